//! Copying onto an existing DST: unchanged files are skipped, changed ones replaced,
//! `--checksum` looks at content, `--verify` re-reads.

use crate::common::build::*;
use crate::common::compare::{assert_same_tree, assert_same_tree_with, diff_trees, Options};
use crate::common::run::{copy, copy_ok};
use crate::common::{copy_exact, is_root, scratch, trees, Scratch};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// A scratch with the mixed tree copied once, exactly.
fn copied_mixed() -> Scratch {
    let s = scratch();
    trees::mixed(&s.src);
    copy_exact(&s, &[]);
    s
}

/// Changes the content of `path`, keeping its size, atime and mtime.
fn change_content_keep_times(path: &Path) {
    let m = std::fs::symlink_metadata(path).unwrap();
    let mut data = std::fs::read(path).unwrap();
    data[0] ^= 0xff;
    write(path, &data);
    restore_times(path, &m);
}

#[test]
fn rerun_of_a_complete_copy_skips_everything() {
    let s = copied_mixed();
    let c = trees::count(&s.src);
    let r = copy_ok(&s.src, &s.dst, &["--json"]);
    let summary = r.json();
    summary.assert_counts(&[
        ("files", 0),
        ("dirs", 0),
        ("others", 0),
        ("bytes", 0),
        ("errors", 0),
        ("skipped", c.files + c.others),
    ]);
    assert_same_tree(&s.src, &s.dst);
    // A directory made since counts, and only it.
    mkdirs(&s.src.join("new/deeper"));
    copy_ok(&s.src, &s.dst, &["--json"])
        .json()
        .assert_counts(&[("dirs", 2), ("files", 0)]);
}

#[test]
fn changed_entries_are_replaced_on_rerun() {
    let s = copied_mixed();
    let new_time = || (ts(1_700_000_000, 1), ts(1_700_000_000, 999_999_999));
    write(&s.src.join("size4096"), b"shorter now");
    write(&s.src.join("one"), b"2");
    write(&s.src.join("a/b/added"), b"new file");
    for p in ["size4096", "one", "a/b/added"] {
        let (atime, mtime) = new_time();
        set_times(&s.src.join(p), atime, mtime);
    }
    std::fs::remove_file(s.src.join("fifo")).unwrap();
    write(&s.src.join("fifo"), b"a file where a fifo was");
    std::fs::remove_file(s.src.join("empty")).unwrap();
    symlink("one", &s.src.join("empty"));
    std::fs::remove_file(s.src.join("link_rel")).unwrap();
    symlink("size1", &s.src.join("link_rel"));

    let r = copy_ok(&s.src, &s.dst, &["--json"]);
    let summary = r.json();
    summary.assert_counts(&[("files", 4), ("errors", 0)]);
    // link_rel is replaced, and so may its twin a/link_twin be: in SRC it is now the
    // only name of its inode, and where it is reached while its copy still shares an
    // inode with link_rel's, it is made anew rather than changed in place (its atime
    // differs: reading a link to compare it sets the atime).
    let others = summary.count("others");
    assert!((2..=3).contains(&others), "{}", summary.0);
    assert_same_tree(&s.src, &s.dst);
}

/// What DST holds in the way of another kind is replaced, as rsync and GNU tar replace
/// it (a symlink is removed, never followed), except a directory that is not empty.
#[test]
fn other_kinds_in_the_way_are_replaced_on_rerun() {
    let s = copied_mixed();
    let outside = s.tmp.path().join("outside");
    mkdirs(&outside);
    trees::other_kinds_in_the_way(&s.dst, &outside);
    let r = copy(&s.src, &s.dst, &[]);
    trees::assert_replaced_but_the_full_directory(&r, &s.src, &s.dst, &outside);
}

#[test]
fn metadata_only_changes_are_applied_on_rerun() {
    let s = copied_mixed();
    let keep = |p: &Path, change: &dyn Fn(&Path)| {
        let m = std::fs::symlink_metadata(p).unwrap();
        change(p);
        set_times(
            p,
            ts(m.atime(), m.atime_nsec()),
            ts(m.mtime(), m.mtime_nsec()),
        );
    };
    keep(&s.src.join("size1"), &|p| chmod(p, 0o640));
    keep(&s.src.join("one"), &|p| {
        set_xattr(p, "user.test", b"new value")
    });
    let twin = s.src.join("twin_a");
    let m = std::fs::symlink_metadata(&twin).unwrap();
    let twin_was = std::fs::symlink_metadata(s.dst.join("twin_a")).unwrap();
    set_times(&twin, ts(1_000, 1), ts(m.mtime(), m.mtime_nsec()));
    if is_root() {
        keep(&s.src.join("size4095"), &|p| chown(p, 4242, 4343));
    }
    let r = copy_ok(&s.src, &s.dst, &["-i"]);
    let opts = Options {
        skip_atime: true,
        ..Options::default()
    };
    assert_same_tree_with(&s.src, &s.dst, &opts);
    // An atime alone is not a change (reading SRC moves atimes where O_NOATIME cannot be
    // had), as in rsync: left as it was, and not itemized.
    let twin_now = std::fs::symlink_metadata(s.dst.join("twin_a")).unwrap();
    assert_eq!(
        (twin_now.atime(), twin_now.atime_nsec()),
        (twin_was.atime(), twin_was.atime_nsec())
    );
    assert!(!r.stdout.contains("twin_a"), "{r}");
}

#[test]
fn checksum_catches_a_change_that_size_and_mtime_miss() {
    let s = copied_mixed();
    change_content_keep_times(&s.src.join("size4097"));

    copy_ok(&s.src, &s.dst, &[]);
    let diffs = diff_trees(&s.src, &s.dst);
    assert!(
        diffs
            .iter()
            .any(|d| d.starts_with("size4097: content differs")),
        "the default run should have skipped size4097 (same size and mtime), yet: {diffs:?}"
    );

    let r = copy_ok(&s.src, &s.dst, &["--checksum", "--json"]);
    r.json().assert_counts(&[("files", 1), ("errors", 0)]);
    assert_same_tree(&s.src, &s.dst);
}

#[test]
fn verify_passes_on_a_good_copy() {
    let s = scratch();
    trees::mixed(&s.src);
    let data = pattern(5, 1 << 20);
    sparse_file(&s.src.join("sparse"), 32 << 20, &[(8 << 20, &data)]);
    stamp_times(&s.src);
    copy_exact(&s, &["--verify"]);
}

/// A name SRC broke off a hardlink, its data and times kept, while the other name's mode
/// changed: DST's linked inode must not change, so the first name is replaced, which
/// moves the old inode's ctime. The second name is still not "written by this job" (its
/// birth time says so), so the real run leaves it alone and tells the first name's
/// reasons, as the dry run does.
#[test]
fn metadata_set_through_a_twin_does_not_make_the_other_name_look_rewritten() {
    let s = scratch();
    for i in 0..8 {
        let a = s.src.join(format!("p{i}_a"));
        write(&a, &pattern(i, 3000));
        hardlink(&a, &s.src.join(format!("p{i}_b")));
    }
    copy_exact(&s, &[]);
    for i in 0..8 {
        let (a, b) = (s.src.join(format!("p{i}_a")), s.src.join(format!("p{i}_b")));
        let m = std::fs::symlink_metadata(&a).unwrap();
        let copy = s.src.join(format!("p{i}_copy"));
        write(&copy, &std::fs::read(&a).unwrap());
        restore_times(&copy, &m);
        std::fs::rename(&copy, &b).unwrap();
        chmod(&a, 0o600);
        restore_times(&a, &m);
    }
    let dry = copy_ok(&s.src, &s.dst, &["-n", "-i"]);
    let real = copy_ok(&s.src, &s.dst, &["-i"]);
    // The same lines; their order is the workers' (seen to differ in CI, under load).
    let sorted = |out: &str| {
        let mut lines: Vec<String> = out.lines().map(str::to_owned).collect();
        lines.sort();
        lines
    };
    assert_eq!(
        sorted(&dry.stdout),
        sorted(&real.stdout),
        "dry run: {dry}\nreal run: {real}"
    );
    // Each `a` gets a new inode with the new mode (the old one has another name), and
    // each `b` keeps the old inode, which now has one name, as in SRC.
    for i in 0..8 {
        let line = format!("updated file    p{i}_a (mode)\n");
        assert!(real.stdout.contains(&line), "{real}");
        assert!(!real.stdout.contains(&format!("p{i}_b")), "{real}");
    }
    assert_same_tree(&s.src, &s.dst);
}

/// An existing DST that is empty is written as a new one is (nothing looked up before
/// each file is made), yet stays what it was: under its setgid bit new files would
/// take its group, so each is still given its source's; an attribute of its own goes,
/// and the copy is exact.
#[test]
fn an_existing_empty_destination_is_written_as_new_and_its_setgid_bit_still_counts() {
    if !is_root() {
        crate::common::skip("giving files a group of their own needs root");
        return;
    }
    let s = scratch();
    trees::mixed(&s.src);
    std::fs::create_dir(&s.dst).unwrap();
    std::os::unix::fs::chown(&s.dst, Some(0), Some(65534)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&s.dst, std::fs::Permissions::from_mode(0o2750)).unwrap();
    // An attribute SRC's root lacks: the exact copy removes it.
    set_xattr(&s.dst, "user.stale", b"1");
    let r = copy_ok(&s.src, &s.dst, &["--json"]);
    assert_same_tree(&s.src, &s.dst);
    let c = trees::count(&s.src);
    // The root was there: it is not counted as made.
    r.json()
        .assert_counts(&[("files", c.files), ("dirs", c.dirs - 1), ("errors", 0)]);
    // And the second run finds everything in place.
    let again = copy_ok(&s.src, &s.dst, &["--json"]);
    again
        .json()
        .assert_counts(&[("files", 0), ("skipped", c.files + c.others)]);
}
