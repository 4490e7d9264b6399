//! Copies over ssh: both ways, every kind, holes, resume, a cut transfer, options.

use crate::common::build::*;
use crate::common::compare::{assert_same_tree, read_noatime};
use crate::common::run::{Run, FERRY};
use crate::common::{scratch, trees, Scratch};
use crate::sshd::Sshd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

const MIB: u64 = 1 << 20;

/// The tests' every-kind tree, odd names and sparse files, below `s.src`.
pub fn every_kind(s: &Scratch) {
    trees::every_kind(&s.src);
}

pub fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 temp path")
}

/// What the summary must say of a copy of all of `src`.
pub fn assert_whole_copy(r: &crate::common::run::Run, src: &Path) {
    r.assert_ok();
    let n = trees::count(src);
    r.json().assert_counts(&[
        ("files", n.files),
        ("dirs", n.dirs),
        ("others", n.others),
        ("bytes", n.bytes),
        ("skipped", 0),
        ("errors", 0),
    ]);
}

#[test]
fn upload_and_download_keep_every_kind_and_holes() {
    let Some(sshd) = Sshd::start() else { return };
    let sc = scratch();
    every_kind(&sc);
    let up = sshd.copy(s(&sc.src), &sshd.remote(&sc.dst), &[]);
    assert_whole_copy(&up, &sc.src);
    assert_same_tree(&sc.src, &sc.dst);
    let back = sc.tmp.path().join("back");
    let down = sshd.copy(&sshd.remote(&sc.dst), s(&back), &["--compress"]);
    assert_whole_copy(&down, &sc.src);
    assert_same_tree(&sc.src, &back);
    for tree in [&sc.dst, &back] {
        let allocated = allocated(&tree.join("middle_hole"));
        assert!(allocated < 4 * MIB, "holes filled in: {allocated} bytes");
    }
}

#[test]
fn a_second_run_sends_nothing_and_then_only_what_changed() {
    let Some(sshd) = Sshd::start() else { return };
    let sc = scratch();
    every_kind(&sc);
    let dst = sshd.remote(&sc.dst);
    sshd.copy(s(&sc.src), &dst, &[]).assert_ok();
    let n = trees::count(&sc.src);
    let again = sshd.copy(s(&sc.src), &dst, &[]);
    again.assert_ok();
    let all = n.files + n.others;
    again
        .json()
        .assert_counts(&[("files", 0), ("others", 0), ("bytes", 0), ("skipped", all)]);
    // One file changed: only it goes.
    let changed = sc.src.join("mixed/size4096");
    let times = std::fs::metadata(&changed).expect("stat");
    write(&changed, &pattern(99, 5000));
    restore_times(&changed, &times);
    set_times(&changed, ts(1_000_000, 5), ts(1_000_000, 7));
    let one = sshd.copy(s(&sc.src), &dst, &[]);
    one.assert_ok();
    one.json()
        .assert_counts(&[("files", 1), ("bytes", 5000), ("skipped", all - 1)]);
    assert_same_tree(&sc.src, &sc.dst);
    // The same the other way.
    let back = sc.tmp.path().join("back");
    sshd.copy(&dst, s(&back), &[]).assert_ok();
    let again = sshd.copy(&dst, s(&back), &[]);
    again.assert_ok();
    again
        .json()
        .assert_counts(&[("files", 0), ("bytes", 0), ("skipped", all)]);
}

/// Passes on at most the bytes given after it, each block as soon as it is read
/// (`head -c` holds them in its buffer).
const DD: &str = "dd status=none bs=64k iflag=count_bytes count=";

/// A remote ferry whose connection is cut after `bytes` bytes: of what it reads
/// (`upload`) or of what it writes.
pub fn cutting_script(sshd: &Sshd, upload: bool, bytes: u64) -> String {
    let script = sshd.file(if upload { "cut_in" } else { "cut_out" });
    let line = match upload {
        true => format!("{DD}{bytes} | {FERRY} \"$@\""),
        false => format!("{FERRY} \"$@\" | {DD}{bytes}"),
    };
    std::fs::write(&script, format!("#!/bin/sh\n{line}\n")).expect("script");
    chmod(&script, 0o755);
    script.display().to_string()
}

/// A rerun after a cut transfer (`again`) succeeded, left out what the cut one had
/// already placed, and made `dst` the same tree as `src`.
pub fn assert_resumed(again: &Run, src: &Path, dst: &Path) {
    again.assert_ok();
    assert!(
        again.json().count("skipped") > 0,
        "nothing resumed: {again}"
    );
    assert_same_tree(src, dst);
}

/// Every file in `dst` that looks complete (the size and mtime of its source) holds
/// the source's content.
pub fn nothing_partial_looks_complete(src: &Path, dst: &Path) {
    let mut stack = vec![dst.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("read dir").flatten() {
            let path = e.path();
            let m = std::fs::symlink_metadata(&path).expect("stat");
            if m.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path.strip_prefix(dst).expect("below dst");
            let Ok(sm) = std::fs::symlink_metadata(src.join(rel)) else {
                continue;
            };
            if m.is_file() && sm.len() == m.len() && sm.mtime() == m.mtime() {
                assert!(
                    read_noatime(&path) == read_noatime(&src.join(rel)),
                    "{} looks complete but is not",
                    path.display()
                );
            }
        }
    }
}

#[test]
fn a_cut_transfer_run_again_gives_the_exact_tree() {
    let Some(sshd) = Sshd::start() else { return };
    let sc = scratch();
    every_kind(&sc);
    mkdirs(&sc.src.join("many"));
    for i in 0..64 {
        write(&sc.src.join(format!("many/f{i}")), &pattern(i, 30_000));
    }
    stamp_times(&sc.src);
    // Upload: the server's input ends in the middle of a frame.
    let cut = cutting_script(&sshd, true, 3_000_000);
    let r = sshd.copy_with(&cut, s(&sc.src), &sshd.remote(&sc.dst), &[]);
    r.assert_status(2);
    assert!(r.stderr.contains("ferry: 127.0.0.1: "), "{r}");
    nothing_partial_looks_complete(&sc.src, &sc.dst);
    sshd.copy(s(&sc.src), &sshd.remote(&sc.dst), &[])
        .assert_ok();
    assert_same_tree(&sc.src, &sc.dst);
    // Download: the client's input ends in the middle of a frame.
    let back = sc.tmp.path().join("back");
    let cut = cutting_script(&sshd, false, 3_000_000);
    let r = sshd.copy_with(&cut, &sshd.remote(&sc.src), s(&back), &[]);
    r.assert_status(2);
    assert!(r.stderr.contains("middle of a frame"), "{r}");
    nothing_partial_looks_complete(&sc.src, &back);
    let again = sshd.copy(&sshd.remote(&sc.src), s(&back), &[]);
    assert_resumed(&again, &sc.src, &back);
}

#[test]
fn checksum_finds_and_repairs_content_that_size_and_mtime_miss() {
    let Some(sshd) = Sshd::start() else { return };
    let sc = scratch();
    trees::mixed(&sc.src);
    let dst = sshd.remote(&sc.dst);
    sshd.copy(s(&sc.src), &dst, &["--compress", "--verify"])
        .assert_ok();
    // Damage one byte, keeping size and times.
    let victim = sc.dst.join("size1048579");
    let times = std::fs::metadata(&victim).expect("stat");
    let mut data = std::fs::read(&victim).expect("read");
    data[100] ^= 1;
    write(&victim, &data);
    restore_times(&victim, &times);
    let plain = sshd.copy(s(&sc.src), &dst, &[]);
    plain.json().assert_counts(&[("files", 0)]);
    let r = sshd.copy(s(&sc.src), &dst, &["--checksum"]);
    r.assert_ok();
    // A file of a MiB goes as a delta: only the damaged block's bytes are written.
    r.json().assert_counts(&[("files", 1), ("bytes", 4096)]);
    assert_same_tree(&sc.src, &sc.dst);
}

#[test]
fn filters_go_to_the_remote_ferry_over_ssh() {
    let Some(sshd) = Sshd::start() else { return };
    let sc = scratch();
    for p in ["a.o", "a.c", "d/b.o", "d/b.c"] {
        mkdirs(sc.src.join(p).parent().unwrap());
        write(&sc.src.join(p), p.as_bytes());
    }
    // Down: the remote ferry serve --stdio walks with the rules.
    let back = sc.tmp.path().join("back");
    sshd.copy(&sshd.remote(&sc.src), s(&back), &["--exclude", "*.o"])
        .assert_ok();
    assert!(back.join("d/b.c").exists() && back.join("a.c").exists());
    assert!(!back.join("a.o").exists() && !back.join("d/b.o").exists());
    // Up: this end's walk.
    sshd.copy(s(&sc.src), &sshd.remote(&sc.dst), &["--exclude", "/d/"])
        .assert_ok();
    assert!(sc.dst.join("a.o").exists() && !sc.dst.join("d").exists());
}

/// A missing local SRC is said (naming it, exit 2) before anything is started at the
/// other end: the `-e` command, which would mark that it ran, never runs.
#[test]
fn a_missing_local_src_is_said_before_the_remote_end_is_started() {
    let t = scratch();
    let mark = t.tmp.path().join("ran");
    let rsh = t.tmp.path().join("rsh");
    write(
        &rsh,
        format!("#!/bin/sh\ntouch '{}'\nexit 1\n", mark.display()).as_bytes(),
    );
    chmod(&rsh, 0o755);
    let missing = t.tmp.path().join("missing");
    let mut cmd = std::process::Command::new(FERRY);
    cmd.args(["copy", "-e", s(&rsh)])
        .arg(&missing)
        .arg("somehost:dst");
    let r = crate::common::run::run(cmd);
    r.assert_status(2);
    assert!(
        r.stderr
            .contains(&format!("{}: open source: No such file", missing.display())),
        "{r}"
    );
    assert!(!mark.exists(), "the remote end was started first: {r}");
}
