//! Round trips through Garage: every kind of entry and odd names, an incremental
//! re-upload, a killed upload and a killed server resumed, `ls` and `cat`.

use crate::common::build::*;
use crate::common::compare::assert_same_tree;
use crate::common::{scratch, trees, Scratch};
use crate::garage::Garage;
use crate::s;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

const MIB: u64 = 1 << 20;

/// Every kind of entry, odd names, holes, and hardlinks, below `s.src`.
fn every_kind(s: &Scratch) {
    trees::every_kind(&s.src);
    mkdirs(&s.src.join("z/deep"));
    write(&s.src.join("first"), &pattern(2, 3000));
    // Names of one inode far apart in path order: they must stay in one shard.
    hardlink(&s.src.join("first"), &s.src.join("z/deep/last"));
    stamp_times(&s.src);
}

/// Many 1 MiB files in `dir`, enough for several multipart shards.
fn many_files(dir: &Path, n: u64) {
    mkdirs(dir);
    for i in 0..n {
        write(
            &dir.join(format!("f{i:03}")),
            &pattern(i + 100, MIB as usize),
        );
    }
}

/// The counts in the line `ferry s3: N shards: M sent ...`.
fn shards_sent(stderr: &str) -> (u64, u64) {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("ferry s3: "))
        .unwrap_or_else(|| panic!("no summary line in {stderr}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    (
        words[2].parse().expect("shards"),
        words[4].parse().expect("sent"),
    )
}

#[test]
fn round_trip_of_every_kind_and_odd_names() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    every_kind(&sc);
    let url = g.url("every/kind");
    let up = g.ferry(&["copy", s(&sc.src), &url, "--shard-size", "1M"]);
    up.assert_ok();
    let (shards, sent) = shards_sent(&up.stderr);
    assert!(shards >= 3 && sent == shards, "{up}");
    let down = g.ferry(&["copy", "--json", &url, s(&sc.dst)]);
    down.assert_ok();
    assert_same_tree(&sc.src, &sc.dst);
    let (a, b) = (sc.dst.join("first"), sc.dst.join("z/deep/last"));
    assert_eq!(
        std::fs::metadata(a).unwrap().ino(),
        std::fs::metadata(b).unwrap().ino()
    );
    // Run again: DST has it all, nothing is fetched or written.
    let again = g.ferry(&["copy", "--json", "--verify", &url, s(&sc.dst)]);
    again.assert_ok();
    assert_eq!(again.json().count("files"), 0, "{again}");
    assert_same_tree(&sc.src, &sc.dst);
}

#[test]
fn incremental_upload_sends_only_changed_members() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    many_files(&sc.src.join("m"), 24);
    stamp_times(&sc.src);
    let url = g.url("inc");
    let first = g.ferry(&["copy", s(&sc.src), &url, "--shard-size", "6M"]);
    first.assert_ok();
    let (shards, sent) = shards_sent(&first.stderr);
    assert!(shards >= 5 && sent == shards, "{first}");
    let unchanged = g.ferry(&["copy", s(&sc.src), &url, "--shard-size", "6M"]);
    unchanged.assert_ok();
    assert_eq!(shards_sent(&unchanged.stderr), (shards, 0), "{unchanged}");
    write(&sc.src.join("m/f010"), b"changed");
    write(&sc.src.join("new"), b"new file");
    let changed = g.ferry(&["copy", s(&sc.src), &url, "--shard-size", "6M"]);
    changed.assert_ok();
    let (_, resent) = shards_sent(&changed.stderr);
    // One for m/f010 and the new file, and the directories; the other 23 stay.
    assert!(resent <= 2, "{changed}");
    assert!(
        changed
            .stderr
            .contains("(holding 23 unchanged members, 24117248 bytes)"),
        "{changed}"
    );
    g.ferry(&["copy", &url, s(&sc.dst)]).assert_ok();
    assert_same_tree(&sc.src, &sc.dst);
}

/// Starts an upload of 60 MiB in 12 MiB shards, one part in flight, to `url`, and
/// returns once its first multipart upload has begun.
fn start_slow_upload(g: &Garage, sc: &Scratch, url: &str) -> std::process::Child {
    many_files(&sc.src.join("m"), 60);
    stamp_times(&sc.src);
    let args = [
        "copy",
        s(&sc.src),
        url,
        "--shard-size",
        "12M",
        "--transfers",
        "1",
    ];
    g.spawn_until_multipart(&args)
}

#[test]
fn a_killed_upload_run_again_resumes_and_aborts_what_it_left() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    let url = g.url("killed");
    let mut child = start_slow_upload(&g, &sc, &url);
    child.kill().expect("kill ferry");
    child.wait().expect("wait");
    // Nothing is readable yet: the manifest is written last.
    let ls = g.ferry(&["ls", &url]);
    assert!(ls.stderr.contains("no ferry upload here"), "{ls}");
    g.rerun_aborting_what_was_left(&["copy", s(&sc.src), &url, "--shard-size", "12M"]);
    g.ferry(&["copy", &url, s(&sc.dst)]).assert_ok();
    assert_same_tree(&sc.src, &sc.dst);
}

#[test]
fn a_server_killed_mid_upload_and_restarted_then_a_rerun_gives_the_tree() {
    let Some(mut g) = Garage::start() else { return };
    let sc = scratch();
    let url = g.url("server-killed");
    let child = start_slow_upload(&g, &sc, &url);
    g.nodes[0].kill();
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("s3://{}/", crate::garage::BUCKET)),
        "{stderr}"
    );
    g.nodes[0].start();
    g.wait_ready();
    g.ferry(&["copy", s(&sc.src), &url, "--shard-size", "12M"])
        .assert_ok();
    g.ferry(&["copy", &url, s(&sc.dst)]).assert_ok();
    assert_same_tree(&sc.src, &sc.dst);
}

#[test]
fn ls_and_cat_read_from_the_manifest_and_one_ranged_get() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    every_kind(&sc);
    let url = g.url("cat");
    g.ferry(&["copy", s(&sc.src), &url, "--shard-size", "1M"])
        .assert_ok();
    let ls = g.ferry(&["ls", &url]);
    ls.assert_ok();
    assert!(ls.stdout.lines().any(|l| l.ends_with(" first")), "{ls}");
    assert!(
        ls.stdout
            .lines()
            .any(|l| l.starts_with('d') && l.ends_with(" z/deep")),
        "{ls}"
    );
    // -l adds the mtime; MEMBERs choose, as for an archive.
    let ls = g.ferry(&["ls", "-l", &url, "first"]);
    ls.assert_ok();
    let m = std::fs::metadata(sc.src.join("first")).unwrap();
    let nsec = format!(".{:09} first\n", m.mtime_nsec());
    assert!(
        ls.stdout.lines().count() == 1 && ls.stdout.ends_with(&nsec),
        "{ls}"
    );
    let cat = |path: &str| {
        let mut cmd = g.command(&["cat", &url, path]);
        let out = cmd.output().expect("run ferry cat");
        assert!(
            out.status.success(),
            "{path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    assert_eq!(cat("first"), pattern(2, 3000));
    // The second read revalidates the cached manifest (304), finds the member in the
    // lookup table kept beside it, and reads the same.
    let cached = g.dir.path().join("cache/ferry/s3");
    let tables = std::fs::read_dir(&cached).unwrap().flatten();
    assert_eq!(
        tables
            .filter(|e| e.path().extension().is_some_and(|x| x == "lookup"))
            .count(),
        1
    );
    assert_eq!(cat("z/deep/last"), pattern(2, 3000));
    let hole = cat("middle_hole");
    assert_eq!(hole.len() as u64, 40 * MIB);
    assert_eq!(&hole[39 * MIB as usize..], &pattern(1, MIB as usize)[..]);
    let missing = g.ferry(&["cat", &url, "no/such"]);
    missing.assert_status(2);
    assert!(
        missing.stderr.contains("no/such: no such member"),
        "{missing}"
    );
    // A new upload: the cached manifest and its lookup table are stale. What a warm
    // `cat` fetched from them while revalidating is dropped, and the new bytes come
    // (the old shards are still there, kept for the older snapshot, so bytes fetched
    // by the stale table would be the old ones, and wrong).
    std::fs::write(sc.src.join("first"), pattern(7, 5000)).expect("change first");
    g.ferry(&["copy", s(&sc.src), &url, "--shard-size", "1M"])
        .assert_ok();
    // (z/deep/last is a hardlink of first: it changed too.)
    for path in ["first", "z/deep/last"] {
        let got = cat(path);
        assert!(
            got == pattern(7, 5000),
            "{path}: {} bytes, the old content: {}",
            got.len(),
            got == pattern(2, 3000)
        );
    }
}
