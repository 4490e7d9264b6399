//! What an unprivileged user cannot copy: an unreadable file or directory, a device
//! node. Each is one error line naming the path, the rest is copied, the exit status is
//! 1 and the summary counts one error.
//!
//! Root reads everything, so as root ferry runs as `nobody` (see `common::nobody`) on a
//! tree owned by nobody.

use crate::common::build::*;
use crate::common::compare::{assert_same_tree_with, Options};
use crate::common::nobody::{ferry_unprivileged, give_to_nobody, scratch_for_nobody};
use crate::common::run::Run;
use crate::common::{is_root, skip, trees, Scratch};
use std::path::Path;

/// Runs `ferry copy --json src dst` as nobody when root (as the caller otherwise).
/// `None` when it cannot be done here (the reason is printed).
fn copy_unprivileged(src: &Path, dst: &Path) -> Option<Run> {
    ferry_unprivileged(&[
        "copy".as_ref(),
        "--json".as_ref(),
        src.as_os_str(),
        dst.as_os_str(),
    ])
}

/// Copies as an unprivileged user and checks: exit status 1, exactly one error line,
/// naming `bad` (relative to SRC) and containing `why`; errors counted once; everything
/// but `bad` copied exactly; `bad` absent from DST.
fn expect_one_error(s: &Scratch, dst: &Path, bad: &str, why: &str) {
    let Some(r) = copy_unprivileged(&s.src, dst) else {
        return;
    };
    r.assert_status(1);
    let errors = r.errors();
    assert_eq!(errors.len(), 1, "expected exactly one error line: {r}");
    let line = errors[0];
    assert!(
        line.contains(bad) && line.contains(why),
        "the error line should name {bad} and say {why:?}: {r}"
    );
    assert!(
        line.splitn(4, ": ").count() == 4,
        "not `ferry: <path>: <operation>: <error>`: {line}"
    );
    r.json().assert_counts(&[("errors", 1)]);
    assert!(
        std::fs::symlink_metadata(dst.join(bad)).is_err(),
        "{bad} should not be in DST: {r}"
    );
    assert_same_tree_with(&s.src, dst, &Options::skipping(&[bad]));
}

/// The mixed tree plus what `extra` makes, owned by nobody when we are root, with times
/// stamped. (A later chmod leaves the times alone.)
fn unprivileged_tree(s: &Scratch, extra: impl FnOnce(&Path)) {
    trees::mixed(&s.src);
    extra(&s.src);
    if is_root() {
        give_to_nobody(&s.src);
    }
    stamp_times(&s.src);
}

#[test]
fn an_unreadable_file_is_reported_and_the_rest_copied() {
    let (s, dst) = scratch_for_nobody();
    unprivileged_tree(&s, |src| {
        write(&src.join("a/b/secret"), b"nobody may read this")
    });
    chmod(&s.src.join("a/b/secret"), 0o000);
    expect_one_error(&s, &dst, "a/b/secret", "Permission denied");
}

/// Issue 21: the directory that cannot be read is made all the same, empty, with its
/// mode (000) and times, as `cp -a` makes it (ferry used to leave it out); its error is
/// the one line.
#[test]
fn an_unreadable_directory_is_reported_made_empty_and_the_rest_copied() {
    let (s, dst) = scratch_for_nobody();
    unprivileged_tree(&s, |src| {
        mkdirs(&src.join("a/closed/inner"));
        write(&src.join("a/closed/inner/f"), b"out of reach");
    });
    let closed = s.src.join("a/closed");
    let times = std::fs::metadata(&closed).expect("stat a/closed");
    chmod(&closed, 0o000);
    restore_times(&closed, &times);
    let Some(r) = copy_unprivileged(&s.src, &dst) else {
        chmod(&closed, 0o755);
        return;
    };
    r.assert_status(1);
    assert_eq!(
        r.errors(),
        [format!(
            "ferry: {}: open directory: Permission denied (os error 13)",
            closed.display()
        )],
        "{r}"
    );
    r.json().assert_counts(&[("errors", 1)]);
    let made = dst.join("a/closed");
    let st =
        std::fs::symlink_metadata(&made).unwrap_or_else(|e| panic!("a/closed not made: {e}\n{r}"));
    use std::os::unix::fs::MetadataExt;
    assert!(st.is_dir(), "{r}");
    assert_eq!(st.mode() & 0o7777, 0o000, "a/closed's mode: {r}");
    assert_eq!(
        (st.mtime(), st.mtime_nsec()),
        (times.mtime(), times.mtime_nsec())
    );
    chmod(&made, 0o755);
    assert_eq!(std::fs::read_dir(&made).expect("list").count(), 0, "{r}");
    chmod(&closed, 0o755); // so that the temp dir can be removed
    assert_same_tree_with(&s.src, &dst, &Options::skipping(&["a/closed"]));
}

#[test]
fn a_device_node_is_an_error_without_root() {
    if !is_root() {
        skip("needs root to make the device node that nobody then copies");
        return;
    }
    let (s, dst) = scratch_for_nobody();
    let kind = rustix::fs::FileType::CharacterDevice;
    unprivileged_tree(&s, |src| device(&src.join("a/dev"), kind, 1, 3));
    expect_one_error(&s, &dst, "a/dev", "Operation not permitted");
}

/// An existing DST directory of another owner that the user may not write: each entry
/// that cannot be made in it is its own error line, naming it, as with `cp -a` (ferry
/// used to skip the directory's entries after one line about its mode).
#[test]
fn each_entry_a_foreign_read_only_directory_refuses_is_named() {
    if !is_root() {
        skip("needs root to give DST a directory of another owner");
        return;
    }
    let (s, dst) = scratch_for_nobody();
    unprivileged_tree(&s, |src| {
        mkdirs(&src.join("shut"));
        write(&src.join("shut/a"), b"a");
        write(&src.join("shut/b"), b"b");
    });
    mkdirs(&dst.join("shut"));
    chown(
        &dst,
        crate::common::nobody::NOBODY,
        crate::common::nobody::NOBODY,
    );
    chmod(&dst.join("shut"), 0o555);
    let Some(r) = copy_unprivileged(&s.src, &dst) else {
        return;
    };
    r.assert_status(1);
    let refused = |name: &str| {
        let at = dst.join(name);
        format!(
            "ferry: {}: create: Permission denied (os error 13)",
            at.display()
        )
    };
    let errors = r.errors();
    for name in ["shut/a", "shut/b"] {
        assert!(errors.contains(&refused(name).as_str()), "{r}");
    }
    r.json().assert_counts(&[("errors", errors.len() as u64)]);
    assert_same_tree_with(&s.src, &dst, &Options::skipping(&["shut"]));
}

/// Not as root, a read-only file with `user.*` xattrs copies whole: the kernel wants
/// write permission to set them, so they are set before the file's mode takes it away.
#[test]
fn a_read_only_file_with_user_xattrs_copies_unprivileged() {
    let (s, dst) = scratch_for_nobody();
    unprivileged_tree(&s, |src| {
        write(&src.join("read-only"), b"with an xattr");
        set_xattr(&src.join("read-only"), "user.note", b"kept");
    });
    chmod(&s.src.join("read-only"), 0o444);
    let Some(r) = copy_unprivileged(&s.src, &dst) else {
        return;
    };
    r.assert_ok();
    assert_same_tree_with(&s.src, &dst, &Options::default());
}

/// Not as root, copying again onto a finished copy: a hardlink whose first name is in
/// a read-only directory the job has finished reopens that directory only to link from
/// it, and leaves its mode alone (it used to be made 0755, after being set to 0555).
#[test]
fn linking_from_a_finished_read_only_directory_keeps_its_mode_unprivileged() {
    let (s, dst) = scratch_for_nobody();
    let shut: Vec<String> = (0..16).map(|i| format!("shut{i:02}")).collect();
    unprivileged_tree(&s, |src| {
        mkdirs(&src.join("links"));
        for dir in &shut {
            mkdirs(&src.join(dir));
            write(&src.join(dir).join("f"), dir.as_bytes());
            hardlink(&src.join(dir).join("f"), &src.join("links").join(dir));
        }
    });
    for dir in &shut {
        chmod(&s.src.join(dir), 0o555);
    }
    for round in ["first", "again"] {
        let Some(r) = copy_unprivileged(&s.src, &dst) else {
            return;
        };
        r.assert_ok();
        assert_same_tree_with(&s.src, &dst, &Options::default());
        println!("{round}: same tree");
    }
    for dir in &shut {
        chmod(&s.src.join(dir), 0o755);
        chmod(&dst.join(dir), 0o755);
    }
}
