//! Memory that what the bucket holds could size: an oversized manifest is refused from
//! its GET's headers, before its body is read; a large member is catted as it arrives;
//! a shard's record too large to be one is not read. Each is checked by the peak RSS
//! of the ferry process (GNU time's `%M`, from the kernel's rusage of the child).

use crate::common::build::*;
use crate::common::scratch;
use crate::garage::Garage;
use crate::s;
use ferry_testkit::memory::peak_rss;
use std::process::Stdio;

const MIB: u64 = 1 << 20;

/// What a ferry run under GNU time did: exit status, stderr, peak RSS in bytes.
struct Measured {
    status: i32,
    stderr: String,
    peak: u64,
}

/// Runs ferry `args` against `g` under GNU time, its stdout into `out`.
fn measured(g: &Garage, args: &[&str], out: Stdio) -> Option<Measured> {
    let (done, peak) = peak_rss(&g.command(args), out)?;
    Some(Measured {
        status: done.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&done.stderr).into_owned(),
        peak,
    })
}

#[test]
fn an_oversized_manifest_is_refused_before_it_is_downloaded() {
    let Some(g) = Garage::start() else { return };
    let size = ferry_s3::manifest::MAX_STORED + MIB;
    g.put("huge/manifest.ferry", vec![0x55; size as usize]);
    let Some(r) = measured(&g, &["cat", &g.url("huge"), "x"], Stdio::null()) else {
        return;
    };
    assert_eq!(r.status, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("s3://ferry-test/huge/manifest.ferry: read the manifest: ")
            && r.stderr
                .contains("more than the 134217728 it may have: refused"),
        "{}",
        r.stderr
    );
    // Not a byte of the body gathered: ferry's own few MiB.
    assert!(r.peak < 48 * MIB, "peak RSS {} MiB", r.peak / MIB);
}

#[test]
fn a_large_member_is_catted_in_bounded_memory() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    let big = pattern(7, 96 << 20);
    write(&sc.src.join("big"), &big);
    let url = g.url("large");
    g.ferry(&["copy", s(&sc.src), &url]).assert_ok();
    let out = sc.tmp.path().join("out");
    let file = std::fs::File::create(&out).expect("create");
    let Some(r) = measured(&g, &["cat", &url, "big"], Stdio::from(file)) else {
        return;
    };
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        std::fs::read(&out).expect("out") == big,
        "catted bytes differ"
    );
    assert!(r.peak < 48 * MIB, "peak RSS {} MiB", r.peak / MIB);
}

#[test]
fn a_shard_record_too_large_to_be_one_is_not_read_and_the_shard_is_sent_again() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    write(&sc.src.join("a"), &pattern(3, 100_000));
    let url = g.url("rec");
    g.ferry(&["copy", s(&sc.src), &url]).assert_ok();
    let records: Vec<String> = g
        .list("rec/shards")
        .into_iter()
        .filter(|k| k.ends_with(".json"))
        .collect();
    assert!(!records.is_empty(), "no shard records");
    // No manifest, and every record far too large: as after a killed run, with the
    // records replaced.
    {
        use ferry_s3::object_store::ObjectStoreExt;
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let key = ferry_s3::object_store::path::Path::from("rec/manifest.ferry");
        rt.block_on(g.client().delete(&key)).expect("delete");
    }
    let size = (ferry_s3::manifest::MAX_RECORD * 8) as usize;
    for k in &records {
        g.put(k, vec![0x55; size]);
    }
    let Some(r) = measured(&g, &["copy", s(&sc.src), &url], Stdio::null()) else {
        return;
    };
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(r.peak < size as u64, "peak RSS {} MiB", r.peak / MIB);
    g.ferry(&["copy", &url, s(&sc.dst)]).assert_ok();
    assert_eq!(
        std::fs::read(sc.dst.join("a")).expect("a"),
        pattern(3, 100_000)
    );
}
