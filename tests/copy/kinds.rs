//! Every kind of entry and every metadata field: a mixed tree, hardlinks, symlinks
//! (copied as links, never followed, nothing written outside DST), fifos, device nodes
//! and other owners (root), xattrs (one warning when DST has none), sockets (made
//! again as nodes, as `cp -a` makes them).

use crate::common::build::*;
use crate::common::compare::{assert_same_tree, assert_same_tree_with, Options};
use crate::common::mount::mount_ramfs;
use crate::common::run::copy;
use crate::common::{copy_exact, is_root, scratch, skip, skip_unless_root, trees};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

#[test]
fn mixed_tree_is_an_exact_copy() {
    let s = scratch();
    trees::mixed(&s.src);
    if is_root() {
        trees::root_extras(&s.src);
    }
    copy_exact(&s, &[]);
}

#[test]
fn one_worker_and_many_workers_make_the_same_copy() {
    for jobs in ["1", "16"] {
        let s = scratch();
        trees::mixed(&s.src);
        copy_exact(&s, &["-j", jobs]);
    }
}

#[test]
fn root_only_kinds_and_owners_are_kept() {
    if skip_unless_root() {
        return;
    }
    let s = scratch();
    trees::root_extras(&s.src);
    copy_exact(&s, &[]);
}

/// Groups of names for one inode spread over several directories (so parallel workers
/// meet the same inode), two names in one directory, an empty file with two names, a
/// setuid file with two names, and a name inside a 0500 directory.
fn hardlink_tree(root: &Path) {
    for d in 0..10 {
        mkdirs(&root.join(format!("d{d}")));
    }
    for g in 0..40 {
        let first = root.join(format!("d{}/g{g}_1", g % 10));
        write(&first, &pattern(g, (g as usize) * 1000));
        for (k, shift) in [(2, 3), (3, 7)] {
            hardlink(
                &first,
                &root.join(format!("d{}/g{g}_{k}", (g + shift) % 10)),
            );
        }
    }
    write(&root.join("same_dir_1"), b"two names, one directory");
    hardlink(&root.join("same_dir_1"), &root.join("same_dir_2"));
    write(&root.join("empty_1"), b"");
    hardlink(&root.join("empty_1"), &root.join("d5/empty_2"));
    write(&root.join("suid_1"), b"setuid with two names");
    chmod(&root.join("suid_1"), 0o4755);
    hardlink(&root.join("suid_1"), &root.join("d9/suid_2"));
    mkdirs(&root.join("ro"));
    hardlink(&root.join("same_dir_1"), &root.join("ro/third_name"));
    chmod(&root.join("ro"), 0o500);
    stamp_times(root);
}

#[test]
fn hardlinks_keep_their_structure() {
    let s = scratch();
    hardlink_tree(&s.src);
    copy_exact(&s, &[]);
}

/// One directory of 3,000 entries (large enough to be split among workers): files,
/// hardlink pairs inside it, symlinks and subdirectories.
fn flat_tree(root: &Path) {
    for i in 0..3000u64 {
        let p = root.join(format!("e{i:04}"));
        match i % 10 {
            0 => mkdirs(&p.join("inner")),
            1 => symlink(format!("e{:04}", i - 1), &p),
            2 if i > 10 => hardlink(&root.join(format!("e{:04}", i - 3)), &p),
            _ => write(&p, &pattern(i, (i as usize * 7) % 5000)),
        }
    }
    stamp_times(root);
}

#[test]
fn a_large_flat_directory_is_copied_exactly() {
    let s = scratch();
    flat_tree(&s.src);
    copy_exact(&s, &["-j", "8"]);
}

/// Symlinks of every sort: dangling, absolute, relative, out of SRC (to a file and a
/// directory that exist), to a directory inside, to a symlink, a loop, a long target.
fn symlink_tree(root: &Path, outside: &Path) {
    mkdirs(&root.join("sub/inner"));
    write(&root.join("sub/file"), b"inside");
    for (target, name) in [
        ("no/such/thing".to_string(), "dangling"),
        ("/etc/passwd".to_string(), "absolute"),
        ("/".to_string(), "root"),
        ("sub/file".to_string(), "relative"),
        ("sub".to_string(), "to_dir"),
        ("relative".to_string(), "to_link"),
        ("loop_b".to_string(), "loop_a"),
        ("loop_a".to_string(), "loop_b"),
        ("../outside/secret".to_string(), "out_relative"),
        (outside.display().to_string(), "out_dir"),
        (
            format!("{}/secret", outside.display()),
            "sub/inner/out_file",
        ),
        ("x/".repeat(1000), "long"),
    ] {
        symlink(target, &root.join(name));
    }
    stamp_times(root);
}

/// A directory beside SRC and DST that the copy must never write into.
fn outside_tree(root: &Path) {
    mkdirs(&root.join("dir"));
    write(&root.join("secret"), b"must not change");
    write(&root.join("dir/f"), b"nor this");
    stamp_times(root);
}

#[test]
fn symlinks_are_copied_as_links_never_followed() {
    let s = scratch();
    let (outside, reference) = (
        s.tmp.path().join("outside"),
        s.tmp.path().join("outside_ref"),
    );
    outside_tree(&outside);
    outside_tree(&reference);
    symlink_tree(&s.src, &outside);
    copy_exact(&s, &[]);
    assert_same_tree(&reference, &outside);
}

#[test]
fn symlinks_already_in_dst_are_not_followed() {
    let s = scratch();
    let (outside, reference) = (
        s.tmp.path().join("outside"),
        s.tmp.path().join("outside_ref"),
    );
    outside_tree(&outside);
    outside_tree(&reference);
    mkdirs(&s.src.join("escape"));
    write(&s.src.join("escape/f"), b"would land outside");
    write(
        &s.src.join("secret_link"),
        b"a file in SRC, a symlink in DST",
    );
    stamp_times(&s.src);
    mkdirs(&s.dst);
    symlink(&outside, &s.dst.join("escape"));
    symlink(outside.join("secret"), &s.dst.join("secret_link"));

    let r = copy(&s.src, &s.dst, &[]);
    assert_same_tree(&reference, &outside);
    // Like cp -a, ferry may refuse to put a directory where a symlink is; it must say so.
    let escape_is_link = std::fs::symlink_metadata(s.dst.join("escape"))
        .unwrap()
        .is_symlink();
    if escape_is_link {
        r.assert_status(1);
        assert!(
            r.errors().iter().any(|l| l.contains("escape")),
            "no error line names escape: {r}"
        );
        assert_same_tree_with(&s.src, &s.dst, &Options::skipping(&["escape"]));
    } else {
        r.assert_ok();
        assert_same_tree(&s.src, &s.dst);
    }
}

#[test]
fn fifos_are_recreated() {
    let s = scratch();
    mkdirs(&s.src.join("d"));
    for (name, mode) in [
        ("f600", 0o600),
        ("f644", 0o644),
        ("d/f622", 0o622),
        ("d/f1777", 0o1777),
    ] {
        fifo(&s.src.join(name));
        chmod(&s.src.join(name), mode);
    }
    stamp_times(&s.src);
    copy_exact(&s, &[]);
}

#[test]
fn xattrs_are_copied() {
    let s = scratch();
    let (file, dir) = (s.src.join("file"), s.src.join("dir"));
    write(&file, b"with many xattrs");
    mkdirs(&dir);
    // ext4 keeps all of a file's xattrs in one 4 KiB block.
    for i in 0..12 {
        set_xattr(
            &file,
            &format!("user.attr{i:02}"),
            &pattern(i, i as usize * 20),
        );
    }
    set_xattr(&file, "user.big", &pattern(7, 1500));
    set_xattr(&dir, "user.on_dir", b"directory value");
    set_xattr(&dir, "user.empty", b"");
    if is_root() {
        symlink("file", &s.src.join("link"));
        set_xattr(&file, "trusted.t", b"trusted on a file");
        set_xattr(&dir, "trusted.t", b"trusted on a directory");
        set_xattr(&s.src.join("link"), "trusted.t", b"trusted on a symlink");
    } else {
        eprintln!("trusted.* xattrs not tested: needs root");
    }
    stamp_times(&s.src);
    copy_exact(&s, &[]);
}

#[test]
fn a_target_without_xattrs_costs_one_warning() {
    let target = match mount_ramfs() {
        Ok(m) => m,
        Err(why) => return skip(&why),
    };
    let s = scratch();
    trees::mixed(&s.src);
    let dst = target.path().join("dst");
    let r = copy(&s.src, &dst, &[]);
    r.assert_ok();
    assert_eq!(
        r.warnings().len(),
        1,
        "expected one warning about xattrs: {r}"
    );
    let opts = Options {
        skip_xattrs: true,
        ..Options::default()
    };
    assert_same_tree_with(&s.src, &dst, &opts);
}

#[test]
fn sockets_are_made_again_as_cp_a_and_rsync_a_make_them() {
    let s = scratch();
    write(&s.src.join("file"), b"kept");
    mkdirs(&s.src.join("run"));
    let _listeners: Vec<_> = ["sock", "run/deep.sock"]
        .iter()
        .map(|name| {
            std::os::unix::net::UnixListener::bind(s.src.join(name)).expect("bind a socket")
        })
        .collect();
    chmod(&s.src.join("run/deep.sock"), 0o640);
    stamp_times(&s.src);
    let dry = crate::common::run::copy_ok(&s.src, &s.dst, &["-n", "-i"]);
    assert!(dry.stdout.contains("run/deep.sock"), "{dry}");
    assert!(!s.dst.exists());
    let r = copy_exact(&s, &[]);
    assert_eq!(r.0["others"], 2, "{}", r.0);
    let made = std::fs::symlink_metadata(s.dst.join("run/deep.sock")).expect("made");
    assert!(made.file_type().is_socket());
    // Up to date on a rerun, with --delete too, and a dry run after lists nothing.
    let again = crate::common::run::copy_ok(&s.src, &s.dst, &["--json", "--delete"]);
    again
        .json()
        .assert_counts(&[("others", 0), ("skipped", 3), ("deleted", 0)]);
    let dry = crate::common::run::copy_ok(&s.src, &s.dst, &["-n", "-i", "--delete"]);
    assert!(dry.stdout.trim().is_empty(), "{dry}");
    assert_same_tree(&s.src, &s.dst);
}
