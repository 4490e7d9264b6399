//! `--link-dest=DIR` and `--reflink-dest=DIR`, the snapshot backup of rsync's
//! `--link-dest`: on ext4, XFS and btrfs (loop-mounted images, as root), a second backup
//! hardlinks (or clones) what is unchanged since the first, copies what changed, and
//! leaves the first as it was; a clone shares its blocks and a change to one copy never
//! reaches the other; several DIRs are tried in order; a symlink in DIR never sends a
//! link elsewhere.

use crate::common::build::*;
use crate::common::compare::{assert_same_tree, assert_same_tree_with, Options};
use crate::common::extents::shared_bytes;
use crate::common::mount::{mount_image, Mounted};
use crate::common::run::{copy, copy_ok};
use crate::common::{scratch_in, skip};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

const MIB: usize = 1 << 20;

/// An image of `fs` (ext4, xfs, btrfs) mounted, or None after saying why not.
fn image(fs: &str) -> Option<Mounted> {
    let (mkfs, args): (&str, &[&str]) = match fs {
        "xfs" => ("mkfs.xfs", &["-q", "-m", "reflink=1"]),
        "btrfs" => ("mkfs.btrfs", &["-q"]),
        _ => ("mkfs.ext4", &["-q"]),
    };
    mount_image(512 << 20, mkfs, args)
        .map_err(|why| skip(&why))
        .ok()
}

/// Files of 1 MiB and small ones, a symlink, below `src`.
fn tree(src: &Path) {
    mkdirs(&src.join("sub"));
    write(&src.join("a"), &pattern(1, MIB));
    write(&src.join("b"), &pattern(2, MIB));
    write(&src.join("sub/c"), &pattern(3, 5000));
    write(&src.join("sub/d"), b"small");
    symlink("a", &src.join("link"));
    set_xattr(&src.join("sub/d"), "user.note", b"kept");
    stamp_times(src);
}

/// An edit, a mode change, an xattr change and a new file.
fn change(src: &Path) {
    write(&src.join("a"), &pattern(9, MIB));
    chmod(&src.join("sub/c"), 0o600);
    write(&src.join("new"), b"new");
}

/// A backup's files have names in the one before too.
fn shared_inodes() -> Options {
    Options {
        skip_link_counts: true,
        ..Options::default()
    }
}

fn ino(p: &Path) -> (u64, u64) {
    let m = std::fs::symlink_metadata(p).expect("stat");
    (m.ino(), m.nlink())
}

/// A first backup, the changes, and a second one taking from the first with `flag`;
/// returns the scratch whose directory holds `src`, `bk1` and `bk2`.
fn two_backups(at: &Path, flag: &str) -> (crate::common::Scratch, crate::common::run::Summary) {
    let s = scratch_in(at);
    let root = s.tmp.path();
    tree(&s.src);
    copy_ok(&s.src, &root.join("bk1"), &[]);
    change(&s.src);
    let r = copy_ok(&s.src, &root.join("bk2"), &["--json", flag]);
    assert_same_tree_with(&s.src, &root.join("bk2"), &shared_inodes());
    (s, r.json())
}

#[test]
fn link_dest_hardlinks_what_is_unchanged_on_ext4_xfs_and_btrfs() {
    for fs in ["ext4", "xfs", "btrfs"] {
        let Some(m) = image(fs) else { return };
        let (sc, summary) = two_backups(m.path(), "--link-dest=../bk1");
        let (bk1, bk2) = (sc.tmp.path().join("bk1"), sc.tmp.path().join("bk2"));
        // b and sub/d are unchanged: one inode in both backups.
        for name in ["b", "sub/d"] {
            assert_eq!(ino(&bk1.join(name)), ino(&bk2.join(name)), "{fs}: {name}");
            assert_eq!(ino(&bk2.join(name)).1, 2, "{fs}: {name}");
        }
        // a (edited), sub/c (its mode), new: copied; the first backup as it was.
        for name in ["a", "sub/c", "new"] {
            assert_eq!(ino(&bk2.join(name)).1, 1, "{fs}: {name}");
        }
        assert_eq!(std::fs::read(bk1.join("a")).unwrap(), pattern(1, MIB));
        assert_eq!(
            std::fs::metadata(bk1.join("sub/c")).unwrap().mode() & 0o777,
            0o644
        );
        summary.assert_counts(&[("skipped", 2), ("files", 3)]);
    }
}

#[test]
fn reflink_dest_clones_on_xfs_and_btrfs_and_copies_on_ext4() {
    for fs in ["xfs", "btrfs", "ext4"] {
        let Some(m) = image(fs) else { return };
        let (sc, summary) = two_backups(m.path(), "--reflink-dest=../bk1");
        let (bk1, bk2) = (sc.tmp.path().join("bk1"), sc.tmp.path().join("bk2"));
        let b = bk2.join("b");
        // Never the same inode; on XFS and btrfs the blocks are shared.
        assert_ne!(ino(&bk1.join("b")).0, ino(&b).0, "{fs}");
        let shared = shared_bytes(&b).expect("extent map");
        assert_eq!(shared > 0, fs != "ext4", "{fs}: b shares {shared} bytes");
        let counts: &[(&str, u64)] = match fs {
            "ext4" => &[("skipped", 0), ("files", 5)],
            _ => &[("skipped", 2), ("files", 3)],
        };
        summary.assert_counts(counts);
        // A change to one copy leaves the other as it was.
        std::fs::write(&b, b"changed in the second backup").expect("write");
        assert_eq!(
            std::fs::read(bk1.join("b")).unwrap(),
            pattern(2, MIB),
            "{fs}"
        );
    }
}

#[test]
fn several_dirs_are_tried_in_order_and_a_symlink_in_one_is_not_followed() {
    let Some(m) = image("ext4") else { return };
    let sc = scratch_in(m.path());
    let root = sc.tmp.path();
    let src = root.join("src");
    tree(&src);
    copy_ok(&src, &root.join("bk0"), &[]);
    change(&src);
    copy_ok(&src, &root.join("bk1"), &[]);
    // bk1 has no `b` but a `sub` that is a symlink to a copy of sub elsewhere.
    std::fs::remove_file(root.join("bk1/b")).unwrap();
    let outside = root.join("outside");
    std::fs::rename(root.join("bk1/sub"), &outside).unwrap();
    symlink(&outside, &root.join("bk1/sub"));
    let r = copy_ok(
        &src,
        &root.join("bk2"),
        &[
            "--json",
            "--link-dest=../bk1",
            "--link-dest",
            utf8(&root.join("bk0")),
        ],
    );
    assert_same_tree_with(&src, &root.join("bk2"), &shared_inodes());
    // a and new from bk1, b from bk0 (not in bk1); nothing of sub through the symlink.
    for (name, from) in [("a", "bk1"), ("new", "bk1"), ("b", "bk0")] {
        assert_eq!(
            ino(&root.join(from).join(name)),
            ino(&root.join("bk2").join(name)),
            "{name}"
        );
    }
    for name in ["sub/c", "sub/d"] {
        assert_eq!(
            ino(&outside.join(name.trim_start_matches("sub/"))).1,
            1,
            "{name}"
        );
    }
    // sub/d is unchanged in bk0: linked from there.
    assert_eq!(ino(&root.join("bk0/sub/d")), ino(&root.join("bk2/sub/d")));
    r.json().assert_counts(&[("skipped", 4)]);
}

#[test]
fn a_missing_dir_is_told_and_everything_copied_and_remote_copies_refuse_it() {
    let Some(m) = image("ext4") else { return };
    let sc = scratch_in(m.path());
    tree(&sc.src);
    let r = copy(&sc.src, &sc.dst, &["--link-dest=../nowhere"]);
    r.assert_status(0);
    assert!(
        r.stderr.contains("--link-dest/--reflink-dest") && r.stderr.contains("nowhere"),
        "{r}"
    );
    assert_same_tree(&sc.src, &sc.dst);
    let r = copy(
        &sc.src,
        Path::new("ferry://127.0.0.1:9/x"),
        &["--link-dest=../y"],
    );
    r.assert_status(2);
    assert!(r.stderr.contains("not supported for a remote copy"), "{r}");
}

fn utf8(p: &Path) -> &str {
    p.to_str().expect("UTF-8")
}

#[test]
fn a_dry_run_lists_only_what_would_not_be_linked() {
    let Some(m) = image("ext4") else { return };
    let sc = scratch_in(m.path());
    let root = sc.tmp.path();
    tree(&sc.src);
    copy_ok(&sc.src, &root.join("bk1"), &[]);
    change(&sc.src);
    let r = copy_ok(
        &sc.src,
        &root.join("bk2"),
        &["-n", "-i", "--link-dest=../bk1"],
    );
    let listed: Vec<&str> = r
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    for name in ["a", "sub/c", "new", "link"] {
        assert!(listed.contains(&name), "{name} not listed: {r}");
    }
    for name in ["b", "sub/d"] {
        assert!(!listed.contains(&name), "{name} listed: {r}");
    }
    assert!(!root.join("bk2").exists(), "a dry run made DST");
}
