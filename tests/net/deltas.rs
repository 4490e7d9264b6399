//! Deltas over ssh: a big file with scattered changes is rebuilt exactly, only what
//! changed travels, and on XFS the unchanged ranges of the new version are clones of
//! the old one's blocks, both ways.

use crate::common::build::*;
use crate::common::compare::assert_same_tree;
use crate::common::mount::{mount_image, Mounted};
use crate::common::{scratch, skip};
use crate::copy::s;
use crate::sshd::Sshd;
use std::path::Path;

const MIB: u64 = 1 << 20;
const SIZE: usize = 48 << 20;
const CHANGED: usize = 24;

/// Overwrites `CHANGED` scattered 4 KiB blocks of `path`, keeping its size.
fn change_blocks(path: &Path, seed: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open");
    let mut rng = fastrand::Rng::with_seed(seed);
    for i in 0..CHANGED {
        let block = rng.usize(0..SIZE / 4096) as u64;
        f.write_all_at(&pattern(seed + i as u64, 4096), block * 4096)
            .expect("write");
    }
}

/// A 1 GiB XFS image with reflink, or `None` (after saying why).
fn xfs() -> Option<Mounted> {
    mount_image(1 << 30, "mkfs.xfs", &["-q", "-m", "reflink=1"])
        .map_err(|why| skip(&why))
        .ok()
}

/// A reflink copy of `from` at `to`: it shares every block `from` has now.
fn reflink_copy(from: &Path, to: &Path) {
    let ok = std::process::Command::new("cp")
        .args(["--reflink=always", s(from), s(to)])
        .status()
        .expect("cp");
    assert!(ok.success(), "cp --reflink=always {from:?}");
}

#[test]
fn a_big_changed_file_goes_as_a_delta_and_is_cloned_on_xfs_both_ways() {
    let Some(sshd) = Sshd::start() else { return };
    let Some(fs) = xfs() else { return };
    let sc = scratch();
    mkdirs(&sc.src);
    let big = sc.src.join("big");
    write(&big, &pattern(7, SIZE));
    write(&sc.src.join("small"), b"small");
    let dst = fs.path().join("up");
    sshd.copy(s(&sc.src), &sshd.remote(&dst), &[]).assert_ok();
    // Up: the old version is kept aside (sharing its blocks) to see what the new
    // one shares with it.
    change_blocks(&big, 1);
    reflink_copy(&dst.join("big"), &fs.path().join("old_up"));
    let r = sshd.copy(s(&sc.src), &sshd.remote(&dst), &["-i"]);
    r.assert_ok();
    assert!(r.stderr.contains("updated file    big"), "{r}");
    let sent = r.json().count("bytes");
    assert!(
        sent <= 2 * (CHANGED as u64) * 4096 + 64 * 1024,
        "{sent} bytes written: {r}"
    );
    assert_same_tree(&sc.src, &dst);
    let shared = ferry_testkit::extents::shared_bytes(&dst.join("big")).expect("fiemap");
    let unchanged = (SIZE - CHANGED * 4096) as u64;
    assert!(
        shared >= unchanged - MIB,
        "only {shared} of {SIZE} bytes cloned"
    );
    // Down: the same into a copy on XFS.
    let back = fs.path().join("back");
    sshd.copy(&sshd.remote(&sc.src), s(&back), &[]).assert_ok();
    change_blocks(&big, 2);
    reflink_copy(&back.join("big"), &fs.path().join("old_back"));
    let r = sshd.copy(&sshd.remote(&sc.src), s(&back), &["-i"]);
    r.assert_ok();
    assert!(r.stderr.contains("updated file    big"), "{r}");
    let sent = r.json().count("bytes");
    assert!(
        sent <= 2 * (CHANGED as u64) * 4096 + 64 * 1024,
        "{sent} bytes written: {r}"
    );
    assert_same_tree(&sc.src, &back);
    let shared = ferry_testkit::extents::shared_bytes(&back.join("big")).expect("fiemap");
    assert!(
        shared >= unchanged - MIB,
        "only {shared} of {SIZE} bytes cloned"
    );
    // Nothing of a rebuild is left beside the file.
    for dir in [&dst, &back] {
        let names: Vec<_> = std::fs::read_dir(dir)
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }
}

/// Where the destination cannot clone, the unchanged ranges are copied there, and
/// the file still comes out exact; a file grown and shrunk too.
#[test]
fn deltas_rebuild_exactly_without_clones_and_when_sizes_change() {
    let Some(sshd) = Sshd::start() else { return };
    let sc = scratch();
    mkdirs(&sc.src);
    let big = sc.src.join("big");
    write(&big, &pattern(9, SIZE));
    let dst = sc.tmp.path().join("dst");
    sshd.copy(s(&sc.src), &sshd.remote(&dst), &[]).assert_ok();
    for round in 0..3u64 {
        let mut data = std::fs::read(&big).expect("read");
        match round {
            0 => data.splice(1000..1000, pattern(round, 5000)).for_each(drop),
            1 => data.truncate(SIZE / 2),
            _ => data.extend(pattern(round, 3 * MIB as usize)),
        }
        write(&big, &data);
        let r = sshd.copy(s(&sc.src), &sshd.remote(&dst), &["--compress"]);
        r.assert_ok();
        assert_same_tree(&sc.src, &dst);
    }
}

/// A big file cut short on the way resumes from what arrived (it is the old version
/// the next run's delta builds on): the rerun sends little more than what was
/// missing, both ways, and the file never looks complete before it is.
#[test]
fn a_big_file_cut_short_resumes_from_what_arrived_both_ways() {
    let Some(sshd) = Sshd::start() else { return };
    let sc = scratch();
    mkdirs(&sc.src);
    write(&sc.src.join("big"), &pattern(11, SIZE));
    let cut_at = (SIZE / 2) as u64;
    // Up: the server's input ends halfway through the file.
    let dst = sc.tmp.path().join("dst");
    let cut = crate::copy::cutting_script(&sshd, true, cut_at);
    let r = sshd.copy_with(&cut, s(&sc.src), &sshd.remote(&dst), &[]);
    r.assert_status(2);
    crate::copy::nothing_partial_looks_complete(&sc.src, &dst);
    let arrived = std::fs::metadata(dst.join("big")).map_or(0, |m| m.len());
    assert!(
        arrived >= MIB,
        "only {arrived} bytes arrived before the cut"
    );
    let again = sshd.copy(s(&sc.src), &sshd.remote(&dst), &[]);
    again.assert_ok();
    let sent = again.json().count("bytes");
    assert!(
        sent <= SIZE as u64 - arrived + MIB,
        "{sent} bytes sent again after {arrived} arrived: {again}"
    );
    assert_same_tree(&sc.src, &dst);
    // Down: the client's input ends halfway.
    let back = sc.tmp.path().join("back");
    let cut = crate::copy::cutting_script(&sshd, false, cut_at);
    let r = sshd.copy_with(&cut, &sshd.remote(&sc.src), s(&back), &[]);
    r.assert_status(2);
    crate::copy::nothing_partial_looks_complete(&sc.src, &back);
    let arrived = std::fs::metadata(back.join("big")).map_or(0, |m| m.len());
    assert!(
        arrived >= MIB,
        "only {arrived} bytes arrived before the cut"
    );
    let again = sshd.copy(&sshd.remote(&sc.src), s(&back), &[]);
    again.assert_ok();
    let sent = again.json().count("bytes");
    assert!(
        sent <= SIZE as u64 - arrived + MIB,
        "{sent} bytes sent again after {arrived} arrived: {again}"
    );
    assert_same_tree(&sc.src, &back);
}
