//! Shared helpers: files holding given bytes, and one full trip (signature, its wire
//! form, delta, the ops' wire form, rebuild) with what each step cost.

use ferry_delta::{delta, hash_range, signature, Applied, Apply, DeltaStats, Op, Signature};
use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;
use std::path::Path;

/// A file at `path` holding `data`, open for reading and writing.
pub fn file_at(path: &Path, data: &[u8]) -> File {
    let mut f = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .expect("create file");
    f.write_all(data).expect("write file");
    f
}

/// Random bytes.
pub fn random(rng: &mut fastrand::Rng, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    rng.fill(&mut v);
    v
}

/// What one trip cost and gave.
pub struct Trip {
    pub sig_bytes: usize,
    pub ops_bytes: usize,
    pub stats: DeltaStats,
    pub applied: Applied,
}

/// Signature of `basis`, delta of `new` against its decoded wire form, the ops'
/// wire form applied into `out`; checks the ops' invariants on the way.
pub fn trip(
    basis: &File,
    basis_len: u64,
    new: &File,
    new_len: u64,
    block: u32,
    out: &File,
) -> Trip {
    let sig = signature(basis, basis_len, block).expect("signature");
    let wire = sig.encode();
    assert_eq!(wire.len(), sig.encoded_len());
    let sig = Signature::decode(&wire).expect("decode signature");
    let mut ops = Vec::new();
    let mut given = 0u64;
    let mut last_copy_end = None;
    let stats = delta(new, new_len, &sig, |op: Op<'_>| {
        match op {
            Op::Copy { basis_offset, len } => {
                assert!(len > 0 && basis_offset + len <= basis_len, "{op:?}");
                assert_ne!(last_copy_end, Some(basis_offset), "copies not merged");
                last_copy_end = Some(basis_offset + len);
            }
            Op::Literal(b) => {
                assert!(!b.is_empty() && b.len() <= ferry_delta::MAX_LITERAL);
                last_copy_end = None;
            }
        }
        given += op.len();
        op.encode(&mut ops);
        Ok::<_, std::io::Error>(())
    })
    .expect("delta");
    assert_eq!(given, new_len);
    assert_eq!(stats.copied + stats.literal, new_len);
    assert_eq!(stats.hash, hash_range(new, 0, new_len).expect("hash new"));
    let mut apply = Apply::new(basis.as_fd(), basis_len, out.as_fd(), new_len);
    // Fed in uneven pieces, as a stream comes: an op cut off waits for the rest.
    let (mut pending, mut fed, mut piece) = (Vec::new(), 0, 1);
    while fed < ops.len() {
        let end = (fed + piece).min(ops.len());
        pending.extend_from_slice(&ops[fed..end]);
        fed = end;
        let used = apply.push_encoded(&pending).expect("apply");
        pending.drain(..used);
        piece = piece * 7 % 300_007 + 1;
    }
    assert!(
        pending.is_empty(),
        "{} bytes of ops left over",
        pending.len()
    );
    let applied = apply.finish().expect("finish");
    assert_eq!(
        applied.cloned + applied.copied + applied.buffered,
        stats.copied
    );
    assert_eq!(applied.written, stats.literal);
    Trip {
        sig_bytes: wire.len(),
        ops_bytes: ops.len(),
        stats,
        applied,
    }
}

/// [`trip`] on bytes in memory, files in `dir`; checks the rebuild byte for byte.
pub fn trip_bytes(dir: &Path, basis: &[u8], new: &[u8], block: u32) -> Trip {
    let b = file_at(&dir.join("basis"), basis);
    let n = file_at(&dir.join("new"), new);
    let out = file_at(&dir.join("out"), b"");
    let t = trip(&b, basis.len() as u64, &n, new.len() as u64, block, &out);
    let got = std::fs::read(dir.join("out")).expect("read out");
    assert!(
        got == new,
        "rebuild differs ({} vs {} bytes)",
        got.len(),
        new.len()
    );
    t
}
