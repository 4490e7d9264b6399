//! A directory in DST where SRC has a file, a symlink or another non-directory: with
//! `--delete` it goes with everything below it (never followed through a symlink) and
//! the run converges, as `rsync -a --delete` does; `-n -i` tells beforehand exactly
//! what the run then does. Without `--delete` it stays, the path is named, exit 1,
//! and the dry run says so too.

use crate::common::build::*;
use crate::common::compare::{assert_same_tree_with, Options};
use crate::common::filters::rsync;
use crate::common::run::{copy, copy_ok};
use crate::common::scratch;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::Path;

/// SRC: files `f` and `g`, a symlink `l`, a file `sub/h`; and `outside`, a directory
/// with a file.
fn src_tree(src: &Path, outside: &Path) {
    write(&src.join("f"), b"a file");
    write(&src.join("g"), b"another");
    symlink(Path::new("g"), &src.join("l"));
    mkdirs(&src.join("sub"));
    write(&src.join("sub/h"), b"below");
    mkdirs(outside);
    write(&outside.join("keep"), b"outside DST");
    stamp_times(src);
}

/// DST: a copy of SRC, then `f`, `l` and `sub/h` made directories holding a tree and
/// a symlink to `outside`.
fn dst_tree(src: &Path, dst: &Path, outside: &Path) {
    copy_ok(src, dst, &[]);
    for name in ["f", "l", "sub/h"] {
        let at = dst.join(name);
        std::fs::remove_file(&at).expect("remove the copy");
        mkdirs(&at.join("deep/er"));
        write(&at.join("deep/er/x"), b"in the way");
        symlink(outside, &at.join("out"));
    }
    stamp_times(dst);
}

/// A scratch with SRC ([`src_tree`]), `outside`, and DST ([`dst_tree`]).
fn scene() -> (
    crate::common::Scratch,
    std::path::PathBuf,
    std::path::PathBuf,
) {
    let s = scratch();
    let outside = s.tmp.path().join("outside");
    let dst = s.tmp.path().join("dst");
    src_tree(&s.src, &outside);
    dst_tree(&s.src, &dst, &outside);
    (s, outside, dst)
}

/// The lines `-i` printed, as a set (the order follows the walk's workers).
fn itemized(out: &str) -> BTreeSet<String> {
    out.lines().map(str::to_owned).collect()
}

#[test]
fn with_delete_a_directory_in_the_way_goes_and_the_dry_run_said_so() {
    let s = scratch();
    let outside = s.tmp.path().join("outside");
    let (theirs, ours) = (s.tmp.path().join("r"), s.tmp.path().join("f"));
    src_tree(&s.src, &outside);
    dst_tree(&s.src, &ours, &outside);
    dst_tree(&s.src, &theirs, &outside);
    if !rsync(&[OsString::from("--delete")], &s.src, &theirs) {
        return;
    }

    let dry = copy_ok(&s.src, &ours, &["-n", "-i", "--delete"]);
    let said = itemized(&dry.stdout);
    for gone in ["f/deep/er/x", "f/out", "l/out", "sub/h/deep/er"] {
        assert!(
            said.iter()
                .any(|l| l.starts_with("deleted") && l.ends_with(gone)),
            "-n -i does not tell {gone} deleted: {dry}"
        );
    }
    assert!(ours.join("f/deep/er/x").exists(), "the dry run deleted");

    let real = copy_ok(&s.src, &ours, &["-i", "--delete"]);
    assert_eq!(
        itemized(&real.stdout),
        said,
        "the run did other than -n -i said"
    );
    let opts = Options {
        skip_atime: true,
        ..Options::default()
    };
    assert_same_tree_with(&theirs, &ours, &opts);
    assert_same_tree_with(&s.src, &ours, &opts);
    assert_eq!(std::fs::read(outside.join("keep")).unwrap(), b"outside DST");
    // Converged: nothing left to do.
    let again = copy_ok(&s.src, &ours, &["-n", "-i", "--delete"]);
    assert_eq!(again.stdout, "", "a second dry run still has work: {again}");
}

#[test]
fn without_delete_a_directory_in_the_way_is_named_by_the_run_and_the_dry_run() {
    let (s, _outside, dst) = scene();
    // Both named with a slash (`rsync -a SRC/ DST/`): the message joins them right.
    for args in [&["-n", "-i"][..], &[][..]] {
        let r = copy(&with_slash(&s.src), &with_slash(&dst), args);
        r.assert_status(1);
        let named = format!(
            "{}: replace: a directory that is not empty is in the way",
            dst.join("f").display()
        );
        assert!(r.stderr.contains(&named), "{args:?}: {r}");
        assert!(r.stderr.contains("(--delete removes it)"), "{args:?}: {r}");
        assert!(
            dst.join("f/deep/er/x").exists(),
            "{args:?}: removed without --delete"
        );
    }
}

#[test]
fn with_delete_a_directory_in_the_way_holding_what_the_rules_keep_stays() {
    let (s, _outside, dst) = scene();
    write(&dst.join("f/keep.o"), b"excluded: kept");
    let r = copy(&s.src, &dst, &["--delete", "--exclude", "*.o"]);
    r.assert_status(1);
    assert!(
        r.stderr.contains(
            "f: replace: a directory in the way in the destination holds what the rules keep"
        ),
        "{r}"
    );
    assert_eq!(
        std::fs::read(dst.join("f/keep.o")).unwrap(),
        b"excluded: kept"
    );
    // The rest of it went, and so did the other directories in the way.
    assert!(
        !dst.join("f/deep").exists() && dst.join("l").is_symlink(),
        "{r}"
    );
}
