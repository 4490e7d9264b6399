//! What the destination shares with the world, and must neither take in nor pass on: a
//! default ACL on DST given to new nodes, an inode DST shares with names outside it, a
//! destination the source reaches through a bind mount, descriptors held for hardlink
//! names that never come; and what an owner change takes away (a file capability, the
//! setuid bit), as `cp -a` keeps them.

use crate::common::build::*;
use crate::common::compare::assert_same_tree;
use crate::common::nobody::NOBODY;
use crate::common::run::{copy, copy_ok, run, with_open_file_limit, FERRY};
use crate::common::{copy_exact, scratch, skip, skip_unless_root};
use rustix::fs::XattrFlags;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

/// An ACL in the kernel's xattr form: version 2, then (tag, permissions, id) entries.
fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
    let mut out = 2u32.to_le_bytes().to_vec();
    for &(tag, perm, id) in entries {
        out.extend_from_slice(&tag.to_le_bytes());
        out.extend_from_slice(&perm.to_le_bytes());
        out.extend_from_slice(&id.to_le_bytes());
    }
    out
}

/// A default ACL on a DST that exists is inherited by every node the kernel creates in
/// it (and masks their mode); the copy gives them the source's metadata, no ACL.
#[test]
fn a_default_acl_on_the_destination_is_not_passed_on() {
    let s = scratch();
    mkdirs(&s.src.join("sub/deeper"));
    write(&s.src.join("a"), b"a");
    write(&s.src.join("sub/b"), b"b");
    write(&s.src.join("sub/deeper/c"), b"c");
    fifo(&s.src.join("sub/pipe"));
    symlink("a", &s.src.join("link"));
    for f in ["a", "sub/b", "sub/deeper/c", "sub/pipe"] {
        chmod(&s.src.join(f), 0o644);
    }
    stamp_times(&s.src);
    mkdirs(&s.dst);
    // user::rwx user:1234:rwx group::r-x mask::rwx other::---
    let default = acl(&[
        (0x01, 7, u32::MAX),
        (0x02, 7, 1234),
        (0x04, 5, u32::MAX),
        (0x10, 7, u32::MAX),
        (0x20, 0, u32::MAX),
    ]);
    let name = "system.posix_acl_default";
    if let Err(e) = rustix::fs::setxattr(&s.dst, name, &default, XattrFlags::empty()) {
        skip(&format!("this filesystem keeps no ACLs ({e})"));
        return;
    }
    copy_ok(&s.src, &s.dst, &[]);
    assert_same_tree(&s.src, &s.dst);
    let mode = std::fs::metadata(s.dst.join("sub/b")).expect("stat").mode();
    assert_eq!(mode & 0o7777, 0o644);
}

/// A file of DST whose inode has a name outside DST (a snapshot made by `cp -al`) is
/// replaced, not changed in place, when its metadata changes: the snapshot keeps its
/// own. And two names that SRC no longer links become two files again.
#[test]
fn metadata_changes_do_not_reach_names_outside_the_destination() {
    let s = scratch();
    write(&s.src.join("f"), b"data");
    write(&s.src.join("a"), b"same");
    hardlink(&s.src.join("a"), &s.src.join("b"));
    chmod(&s.src.join("f"), 0o644);
    chmod(&s.src.join("a"), 0o644);
    stamp_times(&s.src);
    copy_exact(&s, &[]);
    let snapshot = s.tmp.path().join("snapshot");
    mkdirs(&snapshot);
    hardlink(&s.dst.join("f"), &snapshot.join("f"));

    chmod(&s.src.join("f"), 0o600);
    set_xattr(&s.src.join("f"), "user.new", b"1");
    // b becomes a file of its own, with a.'s content and times but another mode.
    let (a, b) = (s.src.join("a"), s.src.join("b"));
    std::fs::remove_file(&b).expect("unlink b");
    std::fs::copy(&a, &b).expect("copy a to b");
    chmod(&b, 0o600);
    restore_times(&b, &std::fs::metadata(&a).expect("stat a"));

    copy_ok(&s.src, &s.dst, &[]);
    // (Copying a to b read a, which may have moved its atime: not a change to copy.)
    let opts = crate::common::compare::Options {
        skip_atime: true,
        ..Default::default()
    };
    crate::common::compare::assert_same_tree_with(&s.src, &s.dst, &opts);
    let kept = std::fs::metadata(snapshot.join("f")).expect("stat the snapshot");
    assert_eq!(kept.mode() & 0o7777, 0o644, "the snapshot's mode changed");
    assert_eq!(kept.nlink(), 1);
    assert!(crate::common::compare::xattrs(&snapshot.join("f")).is_empty());
    assert_eq!(std::fs::read(snapshot.join("f")).expect("read"), b"data");
}

/// A chown drops a file's capability (`security.capability`); a file whose owner
/// alone changed gets its capability set again.
#[test]
fn a_file_capability_survives_an_owner_change() {
    if skip_unless_root() {
        return;
    }
    let s = scratch();
    let prog = s.src.join("prog");
    write(&prog, b"#!/bin/sh\n");
    chmod(&prog, 0o755);
    // Version 2, effective: CAP_NET_RAW (bit 13) permitted.
    let mut cap = 0x0200_0001u32.to_le_bytes().to_vec();
    for word in [1u32 << 13, 0, 0, 0] {
        cap.extend_from_slice(&word.to_le_bytes());
    }
    set_xattr(&prog, "security.capability", &cap);
    stamp_times(&s.src);
    copy_exact(&s, &[]);

    let m = std::fs::metadata(&prog).expect("stat");
    chown(&prog, 1234, 0);
    set_xattr(&prog, "security.capability", &cap);
    restore_times(&prog, &m);
    copy_ok(&s.src, &s.dst, &[]);
    assert_same_tree(&s.src, &s.dst);
}

/// Unmounts a bind mount when dropped, whatever the test did.
struct BindMount<'a>(&'a Path);

impl Drop for BindMount<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).status();
    }
}

/// A destination this job makes, which the source reaches through a bind mount, is
/// skipped with a warning, not copied into itself level after level.
#[test]
fn a_new_destination_inside_the_source_through_a_bind_mount_is_skipped() {
    if skip_unless_root() {
        return;
    }
    let s = scratch();
    mkdirs(&s.src.join("sub"));
    write(&s.src.join("sub/f"), b"x");
    let view = s.tmp.path().join("view");
    mkdirs(&view);
    let bound = Command::new("mount")
        .arg("--bind")
        .arg(s.src.join("sub"))
        .arg(&view)
        .status()
        .expect("run mount");
    assert!(bound.success(), "mount --bind failed");
    let _unmount = BindMount(&view);
    let dst = view.join("x");
    let r = copy(&s.src, &dst, &["-j", "2"]);
    r.assert_ok();
    assert_eq!(r.warnings().len(), 1, "{r}");
    assert!(r.warnings()[0].contains("not copied: it is where this job writes"));
    assert!(s.src.join("sub/x/sub/f").is_file());
    assert!(!s.src.join("sub/x/sub/x").exists(), "copied into itself");
}

/// Files whose other names lie outside SRC hold no descriptor while they wait for
/// names that never come: under a low limit on open files, all are copied.
#[test]
fn hardlinks_to_outside_the_source_hold_no_descriptors() {
    let s = scratch();
    let outside = s.tmp.path().join("outside");
    mkdirs(&outside);
    for i in 0..300 {
        let dir = s.src.join(format!("d{i}"));
        mkdirs(&dir);
        write(&outside.join(format!("f{i}")), b"x");
        hardlink(&outside.join(format!("f{i}")), &dir.join("f"));
    }
    let r = run(with_open_file_limit(
        128,
        &[
            "copy".as_ref(),
            "--json".as_ref(),
            s.src.as_os_str(),
            s.dst.as_os_str(),
        ],
    ));
    r.assert_ok();
    r.json().assert_counts(&[("files", 300), ("errors", 0)]);
}

/// Not as root, a file keeps its group where the user is in it, and loses setuid where
/// its owner cannot be kept (it would run as the user who copied it), as with `cp -a`.
#[test]
fn not_as_root_groups_are_kept_and_foreign_setuid_bits_dropped() {
    if skip_unless_root() {
        return;
    }
    const GROUP: u32 = 4242;
    let s = scratch();
    chmod(s.tmp.path(), 0o755);
    mkdirs(&s.src.join("shared"));
    write(&s.src.join("shared/f"), b"f");
    write(&s.src.join("mine"), b"setuid, mine");
    write(&s.src.join("roots"), b"setuid, root's");
    for p in ["", "shared", "shared/f", "mine"] {
        chown(&s.src.join(p), NOBODY, GROUP);
    }
    chmod(&s.src.join("shared"), 0o2775);
    chmod(&s.src.join("mine"), 0o4755);
    chmod(&s.src.join("roots"), 0o4755);
    let out = s.tmp.path().join("out");
    mkdirs(&out);
    chown(&out, NOBODY, NOBODY);
    let dst = out.join("dst");
    let ids = NOBODY.to_string();
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid", &ids, "--regid", &ids, "--groups", "4242", "--"]);
    cmd.arg(FERRY).arg("copy").arg(&s.src).arg(&dst);
    run(cmd).assert_ok();
    let meta = |p: &str| std::fs::symlink_metadata(dst.join(p)).expect("stat");
    for p in ["", "shared", "shared/f", "mine"] {
        assert_eq!(meta(p).gid(), GROUP, "{p}");
    }
    assert_eq!(meta("shared").mode() & 0o7777, 0o2775);
    assert_eq!(meta("mine").mode() & 0o7777, 0o4755);
    assert_eq!(meta("roots").mode() & 0o7777, 0o755);
    assert_eq!(meta("roots").gid(), NOBODY);
}

/// A job that cannot start counts that error in its summary, as well as exiting 2.
#[test]
fn a_job_that_cannot_start_counts_its_error() {
    let s = scratch();
    let r = copy(&s.src.join("missing"), &s.dst, &["--json"]);
    r.assert_status(2);
    r.json().assert_counts(&[("errors", 1), ("files", 0)]);
    assert!(!s.dst.exists());
}
