//! Directories through Garage: a rerun keeps the unchanged directories in the directory
//! shard they are in and sends a shard of the changed ones alone (the root among them),
//! so a nightly upload of a tree of many directories costs what changed; every
//! snapshot restores and mounts with each directory's metadata as it was; once most
//! directories have changed, a prune compacts the old directory shard.

use crate::common::build::*;
use crate::common::compare::{assert_same_tree_with, Options};
use crate::common::mounted::Mounted;
use crate::common::scratch;
use crate::garage::Garage;
use crate::s;
use crate::snapshots::keep_as_it_is;
use std::path::Path;

/// 400 directories, two levels deep, each with one small file.
fn tree(src: &Path) {
    for a in 0..20 {
        for b in 0..20 {
            let dir = src.join(format!("d{a:02}/e{b:02}"));
            mkdirs(&dir);
            write(&dir.join("f"), &pattern(a * 20 + b, 300));
        }
    }
    stamp_times(src);
}

/// The bytes of the directory shards of the newest snapshot under `prefix`, and how
/// many there are.
fn dir_shards(g: &Garage, prefix: &str) -> (u64, usize) {
    let newest = g.get(&g.newest_manifest_key(prefix));
    let m = ferry_s3::manifest::Manifest::decode(&newest, "manifest").expect("manifest");
    let dirs: Vec<_> = m.shards.iter().filter(|s| s.dirs).collect();
    (dirs.iter().map(|s| s.size).sum(), dirs.len())
}

/// What the objects under `prefix` now take that `before` had not.
fn added(g: &Garage, prefix: &str, before: &std::collections::BTreeMap<String, u64>) -> u64 {
    let now = g.sizes(prefix);
    let new = now.iter().filter(|(k, _)| !before.contains_key(*k));
    new.filter(|(k, _)| k.ends_with(".far"))
        .map(|(_, n)| n)
        .sum()
}

#[test]
fn unchanged_directories_stay_where_they_are_and_every_snapshot_reads_back() {
    let Some(g) = Garage::start() else { return };
    let fuse = crate::common::fuse_here();
    let sc = scratch();
    tree(&sc.src);
    let url = g.url("dirs");
    g.ferry(&["copy", s(&sc.src), &url]).assert_ok();
    let (first, count) = dir_shards(&g, "dirs");
    assert_eq!(count, 1);
    let then = sc.tmp.path().join("then");
    keep_as_it_is(&sc.src, &then);
    // One new file: its directory changes (and nothing above it).
    write(&sc.src.join("d03/e07/new"), b"new");
    let before = g.sizes("dirs/");
    let rerun = g.ferry(&["copy", s(&sc.src), &url]);
    rerun.assert_ok();
    let (_, count) = dir_shards(&g, "dirs");
    assert_eq!(count, 2, "{rerun}");
    // The new file's shard and a directory shard of d03/e07 (holding d03 and the root
    // too, above it), a small part of the first directory shard.
    let sent = added(&g, "dirs/", &before);
    assert!(
        sent < first / 4,
        "{sent} bytes sent, the directory shard is {first}"
    );
    // Unchanged again: nothing sent.
    let same = g.ferry(&["copy", s(&sc.src), &url]);
    same.assert_ok();
    assert!(same.stderr.contains(": 0 sent (0 bytes)"), "{same}");

    let no_atime = Options {
        skip_atime: true,
        ..Options::default()
    };
    g.ferry(&["copy", "--verify", &url, s(&sc.dst)]).assert_ok();
    assert_same_tree_with(&sc.src, &sc.dst, &no_atime);
    let listed = g.ferry(&["ls", "--snapshots", &url]);
    listed.assert_ok();
    let oldest = listed.stdout.split_whitespace().next().expect("a name");
    let back = sc.tmp.path().join("back");
    g.ferry(&["copy", &format!("{url}@{oldest}"), s(&back)])
        .assert_ok();
    assert_same_tree_with(&then, &back, &no_atime);
    if fuse {
        let m = Mounted::new(&g, &url, &sc.tmp.path().join("mnt"), &[]);
        assert_same_tree_with(&sc.src, &m.at, &no_atime);
    }
    let ls = g.ferry(&["ls", &url]);
    ls.assert_ok();
    assert!(!ls.stdout.lines().any(|l| l.trim().is_empty()), "{ls}");

    // Most directories change: the first directory shard is mostly dead, and a prune
    // to the newest compacts it; all reads back as it is.
    for a in 0..20 {
        for b in 0..15 {
            write(&sc.src.join(format!("d{a:02}/e{b:02}/more")), b"more");
        }
    }
    g.ferry(&["copy", s(&sc.src), &url]).assert_ok();
    let pruned = g.ferry(&["prune", "--keep", "1", &url]);
    pruned.assert_ok();
    assert!(
        pruned.stderr.contains("sparse shards compacted"),
        "{pruned}"
    );
    // The first directory shard went into a directory shard of its live directories.
    let newest = g.get(&g.newest_manifest_key("dirs"));
    let m = ferry_s3::manifest::Manifest::decode(&newest, "manifest").expect("manifest");
    assert!(m
        .shards
        .iter()
        .filter(|s| s.dirs)
        .all(|s| !s.members.is_empty()));
    let again = sc.tmp.path().join("again");
    g.ferry(&["copy", "--verify", &url, s(&again)]).assert_ok();
    assert_same_tree_with(&sc.src, &again, &no_atime);
    if fuse {
        let m = Mounted::new(&g, &url, &sc.tmp.path().join("mnt"), &[]);
        assert_same_tree_with(&sc.src, &m.at, &no_atime);
    }
}

/// Checks what a download and (with FUSE) a mount of the upload at `url` make, against
/// `src`, directory metadata and all.
fn compare_back(g: &Garage, src: &Path, url: &str, scratch: &Path) {
    let dst = scratch.join("dst");
    if dst.exists() {
        make_removable(&dst);
        std::fs::remove_dir_all(&dst).expect("remove");
    }
    let no_atime = Options {
        skip_atime: true,
        ..Options::default()
    };
    g.ferry(&["copy", url, s(&dst)]).assert_ok();
    assert_same_tree_with(src, &dst, &no_atime);
    if crate::common::fuse_here() {
        let m = Mounted::new(g, url, &scratch.join("mnt"), &[]);
        assert_same_tree_with(src, &m.at, &no_atime);
    }
}

#[test]
fn directory_metadata_comes_back_right_after_any_order_of_changes() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    let src = &sc.src;
    let t = sc.tmp.path();
    // Empty directories (no shard of files makes them), one read-only, a file below
    // another; and one the rules leave out, kept aside but while uploading.
    for d in ["a/x", "c/w", "b", "ro/inner"] {
        mkdirs(&src.join(d));
    }
    write(&src.join("a/f"), b"f");
    stamp_times(src);
    chmod(&src.join("ro"), 0o555);
    mkdirs(&t.join("skip-aside/sub"));
    let url = g.url("meta");
    let step = |change: &dyn Fn()| {
        change();
        // Moving skip/ in and out leaves the root's times as the change left them.
        let root = std::fs::metadata(src).expect("stat");
        std::fs::rename(t.join("skip-aside"), src.join("skip")).expect("in");
        restore_times(src, &root);
        let up = g.ferry(&["copy", s(src), &url, "--exclude", "skip/"]);
        up.assert_ok();
        std::fs::rename(src.join("skip"), t.join("skip-aside")).expect("aside");
        restore_times(src, &root);
        compare_back(&g, src, &url, t);
    };
    let touch = |p: &str, mode: u32, n: i64| {
        chmod(&src.join(p), mode);
        let (atime, mtime) = stamp(1000 + n);
        set_times(&src.join(p), atime, mtime);
    };
    // Run 1, then: two empty directories in different parents change; one of them
    // again; a parent and its child; the child as it was two runs before (a directory
    // shard of it then is found by its fingerprint only if its parent is as then).
    step(&|| {});
    step(&|| {
        touch("a/x", 0o700, 1);
        touch("c/w", 0o700, 2);
    });
    step(&|| touch("c/w", 0o750, 3));
    step(&|| touch("a/x", 0o700, 4));
    step(&|| {
        touch("a", 0o750, 5);
        touch("a/x", 0o755, 6);
    });
    step(&|| touch("a/x", 0o700, 4));
    // Below the read-only directory, a change and a new empty directory.
    step(&|| {
        chmod(&src.join("ro"), 0o755);
        mkdirs(&src.join("ro/new"));
        touch("ro/inner", 0o700, 7);
        touch("ro", 0o555, 8);
    });
    // The root alone.
    step(&|| {
        let (atime, mtime) = stamp(1009);
        set_times(src, atime, mtime);
    });
    make_removable(src);
}
