//! `--delete` and `--delete-excluded`: after the copy, DST holds what `rsync -a
//! --delete` leaves with the same rules (both run on the same trees, the results
//! compared in every respect), symlinks in DST are removed, never followed, and
//! nothing is deleted when some of SRC could not be read.

use crate::common::build::*;
use crate::common::compare::{assert_same_tree, assert_same_tree_with, Options};
use crate::common::filters::{rsync, tree};
use crate::common::nobody::{ferry_unprivileged, give_to_nobody, scratch_for_nobody};
use crate::common::run::{copy_ok, run, FERRY};
use crate::common::{is_root, scratch, trees};
use std::ffi::OsString;
use std::path::Path;

/// What DST has that SRC (the filter tree) does not: files, a directory tree, a fifo,
/// names the rules exclude (`*.o`, `cache/`), and symlinks to `outside` (a directory
/// with a file), one of them inside a directory that goes. Times are stamped last.
fn extras(dst: &Path, outside: &Path) {
    write(&dst.join("extra.txt"), b"not in SRC");
    write(&dst.join("src/extra.o"), b"excluded by *.o");
    write(&dst.join("src/sub/new.c"), b"not in SRC");
    mkdirs(&dst.join("gone/deep/er"));
    write(&dst.join("gone/deep/er/f"), b"deep");
    write(&dst.join("gone/top"), b"top");
    symlink(outside, &dst.join("gone/out_link"));
    symlink(outside, &dst.join("lnk_out"));
    symlink(outside.join("f"), &dst.join("src/file_link"));
    mkdirs(&dst.join("cache/more"));
    write(&dst.join("cache/more/old"), b"in an excluded directory");
    fifo(&dst.join("lib/newfifo"));
    write(
        &dst.join("build/sub/stale.o"),
        b"excluded, below a directory SRC has",
    );
    stamp_times(dst);
}

/// SRC (the filter tree), and two DSTs made alike: SRC copied, then [`extras`].
/// Returns (rsync's DST, ferry's DST, outside).
fn two_dsts(
    s: &crate::common::Scratch,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    tree(&s.src);
    let outside = s.tmp.path().join("outside");
    mkdirs(&outside);
    write(&outside.join("f"), b"must survive");
    let (theirs, ours) = (s.tmp.path().join("r"), s.tmp.path().join("f"));
    for d in [&theirs, &ours] {
        copy_ok(&s.src, d, &[]);
        extras(d, &outside);
    }
    (theirs, ours, outside)
}

/// Entries in the tree at `root`, itself included.
fn entries(root: &Path) -> u64 {
    let c = trees::count(root);
    c.files + c.dirs + c.others
}

#[test]
fn delete_leaves_what_rsync_leaves() {
    let sets: &[&[&str]] = &[
        &["--delete"],
        &["--delete", "--exclude", "*.o", "--exclude", "cache/"],
        &[
            "--delete",
            "--delete-excluded",
            "--exclude",
            "*.o",
            "--exclude",
            "cache/",
        ],
        &[
            "--delete",
            "--include",
            "*/",
            "--include",
            "*.c",
            "--exclude",
            "*",
        ],
    ];
    for set in sets {
        let s = scratch();
        let (theirs, ours, outside) = two_dsts(&s);
        let args: Vec<OsString> = set.iter().map(OsString::from).collect();
        if !rsync(&args, &s.src, &theirs) {
            return;
        }
        let before = entries(&ours);
        let mut cmd = std::process::Command::new(FERRY);
        cmd.arg("copy")
            .arg("--json")
            .args(&args)
            .arg(&s.src)
            .arg(&ours);
        let r = run(cmd);
        r.assert_ok();
        let opts = Options {
            skip_atime: true,
            ..Options::default()
        };
        assert_same_tree_with(&theirs, &ours, &opts);
        // Nothing was made (only replaced): what went is what was deleted.
        r.json()
            .assert_counts(&[("deleted", before - entries(&ours)), ("errors", 0)]);
        assert!(
            r.json().count("deleted") > 0,
            "{set:?}: nothing deleted: {r}"
        );
        assert_eq!(
            std::fs::read(outside.join("f")).expect("outside/f is gone"),
            b"must survive",
            "{set:?}"
        );
    }
}

/// Without rules DST ends up the same tree as SRC, entry for entry.
#[test]
fn delete_makes_dst_an_exact_mirror() {
    let s = scratch();
    let (_, ours, outside) = two_dsts(&s);
    copy_ok(&s.src, &ours, &["--delete"]);
    assert_same_tree(&s.src, &ours);
    assert!(outside.join("f").exists());
    // A second run has nothing left to delete.
    let r = copy_ok(&s.src, &ours, &["--delete", "--json"]);
    r.json().assert_counts(&[("deleted", 0)]);
}

/// Some of SRC cannot be read (a file, a directory, which is copied empty): nothing
/// is deleted, and a warning says so.
#[test]
fn nothing_is_deleted_when_some_of_src_could_not_be_read() {
    for unreadable in ["src/sub/b.c", "docs/a"] {
        let (s, dst) = scratch_for_nobody();
        tree(&s.src);
        let outside = s.tmp.path().join("outside");
        mkdirs(&outside);
        write(&outside.join("f"), b"must survive");
        copy_ok(&s.src, &dst, &[]);
        extras(&dst, &outside);
        if is_root() {
            give_to_nobody(&s.src);
            give_to_nobody(&dst);
        }
        chmod(&s.src.join(unreadable), 0o000);
        let before = entries(&dst);
        let args: [&std::ffi::OsStr; 5] = [
            "copy".as_ref(),
            "--json".as_ref(),
            "--delete".as_ref(),
            s.src.as_os_str(),
            dst.as_os_str(),
        ];
        let Some(r) = ferry_unprivileged(&args) else {
            return;
        };
        chmod(&s.src.join(unreadable), 0o755);
        r.assert_status(1);
        assert_eq!(r.errors().len(), 1, "{r}");
        assert!(
            r.warnings().iter().any(|w| w.contains("nothing deleted")),
            "no warning says why nothing was deleted: {r}"
        );
        r.json().assert_counts(&[("deleted", 0), ("errors", 1)]);
        assert_eq!(
            entries(&dst),
            before,
            "{unreadable}: something was deleted: {r}"
        );
        assert!(dst.join("gone/deep/er/f").exists() && dst.join("extra.txt").exists());
    }
}

/// A DST that holds SRC is refused with --delete, which would remove SRC.
#[test]
fn delete_into_a_dst_holding_src_is_refused() {
    let s = scratch();
    mkdirs(&s.src.join("inner"));
    write(&s.src.join("inner/f"), b"f");
    let r = crate::common::run::copy(&s.src.join("inner"), &s.src, &["--delete"]);
    r.assert_status(2);
    assert!(s.src.join("inner/f").exists(), "{r}");
}

/// `ferry copy --delete proj bk/`: a directory named without a trailing slash into a
/// DST named with one goes in under its own name, where `cp -a proj bk/` and `rsync -a
/// --delete proj bk/` put it, and what else `bk` holds stays (it once made `bk` an
/// exact copy of `proj`, deleting the rest). `proj/ bk/` and `proj bk` copy the
/// contents, as `rsync -a proj/ bk/` does.
#[test]
fn a_dst_named_with_a_slash_takes_a_directory_under_its_own_name() {
    let s = scratch();
    let proj = s.tmp.path().join("proj");
    tree(&proj);
    let (theirs, ours) = (s.tmp.path().join("r"), s.tmp.path().join("f"));
    for bk in [&theirs, &ours] {
        mkdirs(bk);
        write(&bk.join("other"), b"not proj's");
    }
    let out = std::process::Command::new("rsync")
        .args(["-aHUX", "--delete"])
        .arg(&proj)
        .arg(with_slash(&theirs))
        .output()
        .expect("run rsync");
    assert!(out.status.success(), "{out:?}");
    let r = crate::common::run::copy(&proj, &with_slash(&ours), &["--delete", "--json"]);
    r.assert_ok();
    r.json().assert_counts(&[("deleted", 0)]);
    let opts = Options {
        skip_atime: true,
        ..Options::default()
    };
    assert_same_tree_with(&theirs.join("proj"), &ours.join("proj"), &opts);
    assert_eq!(std::fs::read(ours.join("other")).unwrap(), b"not proj's");
    // Contents: `proj/ bk/` (and `proj bk`), a mirror of proj with --delete.
    for (named, dst) in [
        (with_slash(&proj), with_slash(&ours)),
        (proj.clone(), ours.clone()),
    ] {
        copy_ok(&named, &dst, &["--delete"]);
        assert!(!ours.join("other").exists() && !ours.join("proj").exists());
        assert_same_tree_with(&proj, &ours, &opts);
        write(&ours.join("other"), b"again");
    }
}

/// `--max-delete N` removes N entries, then keeps the rest, names the first kept in
/// an error line and exits 1; a dry run counts the same; the in-the-way removals count.
#[test]
fn max_delete_stops_deleting_after_n() {
    let s = scratch();
    let (_, ours, _) = two_dsts(&s);
    let dry = crate::common::run::copy(
        &s.src,
        &ours,
        &["-n", "--delete", "--max-delete", "3", "--json"],
    );
    dry.assert_status(1);
    dry.json().assert_counts(&[("deleted", 3), ("errors", 1)]);
    let before = entries(&ours);
    let r = crate::common::run::copy(&s.src, &ours, &["--delete", "--max-delete", "3", "--json"]);
    r.assert_status(1);
    r.json().assert_counts(&[("deleted", 3), ("errors", 1)]);
    assert_eq!(entries(&ours), before - 3, "{r}");
    assert!(
        r.errors()
            .iter()
            .any(|e| e.contains("--max-delete 3 reached")),
        "{r}"
    );
    assert!(r.warnings().iter().any(|w| w.contains("were kept")), "{r}");
    // Without a limit the mirror then completes.
    copy_ok(&s.src, &ours, &["--delete"]);
    let opts = Options {
        skip_atime: true,
        ..Options::default()
    };
    assert_same_tree_with(&s.src, &ours, &opts);
}
