//! A source that is not a directory is copied on its own, as `cp -a FILE DST` copies
//! it: to DST (its missing parents made), or into DST when that is a directory. A
//! symlink is copied as a link. The target is skipped when up to date, and a target
//! that is the source itself is refused.

use crate::common::build::*;
use crate::common::compare::{assert_same_tree_with, Options};
use crate::common::nobody::{ferry_unprivileged, give_to_nobody, scratch_for_nobody};
use crate::common::run::{copy, copy_ok};
use crate::common::scratch;
use std::path::Path;

/// Every difference but the roots' own metadata.
fn entries_only() -> Options {
    Options {
        skip_root_meta: true,
        ..Options::default()
    }
}

/// A file with an xattr, setuid bit and old times; a sparse file; a symlink; a fifo.
fn singles(src: &Path) -> [&'static str; 4] {
    let plain = src.join("plain");
    write(&plain, &pattern(1, 100_000));
    set_xattr(&plain, "user.kept", b"yes");
    chmod(&plain, 0o4750);
    sparse_file(
        &src.join("sparse"),
        4 << 20,
        &[(1 << 20, &pattern(2, 8192))],
    );
    symlink("plain", &src.join("link"));
    fifo(&src.join("fifo"));
    stamp_times(src);
    ["plain", "sparse", "link", "fifo"]
}

#[test]
fn each_kind_is_copied_to_a_new_name_with_its_metadata_and_then_skipped() {
    let s = scratch();
    for name in singles(&s.src) {
        // DST does not exist yet for the first: its parent is made as the tree copy's.
        let r = copy_ok(&s.src.join(name), &s.dst.join(name), &["--json"]);
        let moved = if name == "fifo" || name == "link" {
            "others"
        } else {
            "files"
        };
        r.json()
            .assert_counts(&[(moved, 1), ("dirs", 0), ("errors", 0)]);
    }
    assert_same_tree_with(&s.src, &s.dst, &entries_only());
    assert!(
        allocated(&s.dst.join("sparse")) < 1 << 20,
        "the sparse file lost its holes"
    );
    for name in ["plain", "sparse", "link", "fifo"] {
        let again = copy_ok(&s.src.join(name), &s.dst.join(name), &["--json"]);
        again.json().assert_counts(&[("skipped", 1), ("bytes", 0)]);
    }
}

#[test]
fn into_an_existing_directory_it_keeps_its_name() {
    let s = scratch();
    singles(&s.src);
    mkdirs(&s.dst);
    for name in ["plain", "link"] {
        copy_ok(&s.src.join(name), &s.dst, &[]);
    }
    // A trailing slash on DST says the same.
    copy_ok(
        &s.src.join("sparse"),
        Path::new(&format!("{}/", s.dst.display())),
        &[],
    );
    let mut want = std::fs::read_dir(&s.dst)
        .expect("list")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
        .collect::<Vec<_>>();
    want.sort();
    assert_eq!(want, ["link", "plain", "sparse"]);
    assert_same_tree_with(
        &s.src,
        &s.dst,
        &Options {
            skip: vec![b"fifo".to_vec()],
            ..entries_only()
        },
    );
}

#[test]
fn the_source_itself_or_a_missing_directory_is_refused() {
    let s = scratch();
    singles(&s.src);
    let plain = s.src.join("plain");
    let before = std::fs::read(&plain).expect("read");
    hardlink(&plain, &s.src.join("other-name"));
    for dst in [plain.clone(), s.src.join("other-name")] {
        let r = copy(&plain, &dst, &[]);
        r.assert_status(2);
        assert!(
            r.errors()
                .iter()
                .any(|l| l.contains("is the source itself")),
            "{r}"
        );
    }
    assert_eq!(std::fs::read(&plain).expect("read"), before);
    // `cp` too: a trailing slash promises a directory that is not there.
    let missing = s.tmp.path().join("no-such-dir/");
    let r = copy(&plain, &missing, &[]);
    r.assert_status(2);
    assert!(!missing.exists(), "{r}");
}

#[test]
fn an_unreadable_file_is_one_error_naming_it_and_nothing_is_left() {
    let (s, out) = scratch_for_nobody();
    singles(&s.src);
    give_to_nobody(&s.src);
    chmod(&s.src.join("plain"), 0o000);
    let dst = out.join("copy");
    let Some(r) = ferry_unprivileged(&[
        "copy".as_ref(),
        "--json".as_ref(),
        s.src.join("plain").as_os_str(),
        dst.as_os_str(),
    ]) else {
        return;
    };
    r.assert_status(1);
    let source = s.src.join("plain");
    assert_eq!(
        r.errors(),
        [format!(
            "ferry: {}: open: Permission denied (os error 13)",
            source.display()
        )],
        "{r}"
    );
    r.json().assert_counts(&[("errors", 1), ("files", 0)]);
    assert!(std::fs::symlink_metadata(&dst).is_err(), "{r}");
}

/// Issue 21: a symlink to a directory given as SRC is copied as the link, as `cp -a`
/// and `rsync -a` copy it; named with a trailing slash (`link/`) it is followed, and
/// the directory it points to is copied as a tree (as both peers do too).
#[test]
fn a_symlink_to_a_directory_is_copied_as_a_link_unless_named_with_a_slash() {
    let s = scratch();
    mkdirs(&s.src.join("dd/sub"));
    write(&s.src.join("dd/sub/f"), b"inside the directory");
    symlink("dd", &s.src.join("ldd"));
    let link = s.src.join("ldd");
    let (ours, theirs) = (s.tmp.path().join("ours"), s.tmp.path().join("cp"));
    let r = copy_ok(&link, &ours, &["--json"]);
    r.json()
        .assert_counts(&[("files", 0), ("dirs", 0), ("others", 1)]);
    let cp = std::process::Command::new("cp")
        .arg("-a")
        .arg(&link)
        .arg(&theirs)
        .status()
        .expect("run cp");
    assert!(cp.success(), "cp -a failed");
    for made in [&ours, &theirs] {
        let target = std::fs::read_link(made).unwrap_or_else(|e| panic!("{made:?}: {e}"));
        assert_eq!(target, Path::new("dd"), "{made:?} is not the link: {r}");
    }
    let followed = s.tmp.path().join("followed");
    let slash = Path::new(&format!("{}/", link.display())).to_path_buf();
    copy_ok(&slash, &followed, &[]);
    assert_same_tree_with(&s.src.join("dd"), &followed, &entries_only());
}
