//! What a delta of a big file costs: bytes on the wire for a 256 MiB file with 64
//! scattered changed 4 KiB blocks (the figure rsync is compared on), and how fast the
//! scan runs (printed, not asserted: the machine is shared).

use crate::util::{file_at, random, trip};
use ferry_delta::{block_size_for, delta, signature, Op};
use std::time::Instant;

const SIZE: usize = 256 << 20;

#[test]
fn big_file_with_scattered_changes_costs_little() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = fastrand::Rng::with_seed(64);
    let basis = random(&mut rng, SIZE);
    let mut new = basis.clone();
    let mut changed = std::collections::BTreeSet::new();
    while changed.len() < 64 {
        changed.insert(rng.usize(..SIZE / 4096));
    }
    for &b in &changed {
        rng.fill(&mut new[b * 4096..(b + 1) * 4096]);
    }
    let bf = file_at(&dir.path().join("basis"), &basis);
    let nf = file_at(&dir.path().join("new"), &new);
    let of = file_at(&dir.path().join("out"), b"");
    let block = block_size_for(SIZE as u64);
    let t = trip(&bf, SIZE as u64, &nf, SIZE as u64, block, &of);
    let total = t.sig_bytes + t.ops_bytes;
    eprintln!(
        "256 MiB, 64 changed 4 KiB blocks, {block}-byte blocks: signature {} B, delta {} B \
         ({} literal, {} copy ops, {} literal ops), total {total} B",
        t.sig_bytes, t.ops_bytes, t.stats.literal, t.stats.copy_ops, t.stats.literal_ops
    );
    assert!(total <= 8 << 20, "{total} bytes");
    // Each changed 4 KiB block costs the one signature block holding it.
    assert!(
        t.stats.literal <= 64 * u64::from(block),
        "{}",
        t.stats.literal
    );
    drop(basis);
    assert!(std::fs::read(dir.path().join("out")).expect("read") == new);

    // What other block sizes would cost on the same files (the choice above is
    // block_size_for's; a smaller block trades literal for signature).
    for other in [4096, 8192, 32768, 65536] {
        let t = trip(&bf, SIZE as u64, &nf, SIZE as u64, other, &of);
        eprintln!(
            "  with {other}-byte blocks: signature {} B + delta {} B = {} B",
            t.sig_bytes,
            t.ops_bytes,
            t.sig_bytes + t.ops_bytes
        );
    }

    // Scan speed: mostly unchanged (as above), unchanged, and all new data (every
    // offset rolled and probed).
    let sig = signature(&bf, SIZE as u64, block).expect("signature");
    let other = file_at(&dir.path().join("other"), &random(&mut rng, SIZE));
    for (what, f) in [
        ("64 changed blocks", &nf),
        ("unchanged", &bf),
        ("all new", &other),
    ] {
        let (start, cpu) = (Instant::now(), thread_cpu());
        let mut ops = 0u64;
        delta(f, SIZE as u64, &sig, |_: Op<'_>| {
            ops += 1;
            Ok::<_, std::io::Error>(())
        })
        .expect("delta");
        let (secs, cpu) = (start.elapsed().as_secs_f64(), thread_cpu() - cpu);
        eprintln!(
            "scan, {what}: {secs:.3} s, {:.0} MB/s ({cpu:.3} s of CPU: {:.0} MB/s), {ops} ops",
            SIZE as f64 / secs / 1e6,
            SIZE as f64 / cpu / 1e6
        );
    }
    let start = Instant::now();
    signature(&bf, SIZE as u64, block).expect("signature");
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "signature: {secs:.3} s, {:.0} MB/s",
        SIZE as f64 / secs / 1e6
    );
}

/// This thread's CPU time in seconds (what a loaded machine does not blur).
fn thread_cpu() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}
