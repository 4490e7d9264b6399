//! `-n/--dry-run` with `-i` and `-v`: a dry run writes nothing at all in DST (compared
//! in every respect with a copy of DST made before), lists each entry the copy would
//! create, update, give new metadata or delete, and why, and counts what the real run
//! then does.

use crate::common::build::*;
use crate::common::compare::assert_same_tree;
use crate::common::run::{copy, copy_ok};
use crate::common::{scratch, trees, Scratch};
use std::path::Path;

/// A scratch whose DST is an old copy of SRC: since then SRC gained `new` and `newdir/f`,
/// `one` changed size, `twin_a` its mtime only, `private` its mode, `link_dangling` its
/// target, and DST gained `extra` and `gone/f`.
fn changed_since_copied() -> Scratch {
    let s = scratch();
    trees::mixed(&s.src);
    copy_ok(&s.src, &s.dst, &[]);
    write(&s.src.join("new"), b"new");
    mkdirs(&s.src.join("newdir"));
    write(&s.src.join("newdir/f"), b"f");
    let keep = |p: &Path, change: &dyn Fn(&Path)| {
        let parent = std::fs::metadata(p.parent().expect("parent")).expect("stat");
        change(p);
        restore_times(p.parent().expect("parent"), &parent);
    };
    keep(&s.src.join("one"), &|p| {
        let m = std::fs::symlink_metadata(p).expect("stat");
        write(p, b"longer");
        restore_times(p, &m);
    });
    set_times(&s.src.join("twin_a"), ts(1_000, 0), ts(2_000, 0));
    let m = std::fs::symlink_metadata(s.src.join("private")).expect("stat");
    chmod(&s.src.join("private"), 0o640);
    restore_times(&s.src.join("private"), &m);
    keep(&s.src.join("link_dangling"), &|p| {
        let m = std::fs::symlink_metadata(p).expect("stat");
        std::fs::remove_file(p).expect("rm");
        symlink("no/such/other", p);
        set_times(p, ts(m_atime(&m), 0), ts(m_mtime(&m), 0));
    });
    write(&s.dst.join("extra"), b"only in DST");
    mkdirs(&s.dst.join("gone"));
    write(&s.dst.join("gone/f"), b"only in DST");
    s
}

fn m_atime(m: &std::fs::Metadata) -> i64 {
    std::os::unix::fs::MetadataExt::atime(m)
}

fn m_mtime(m: &std::fs::Metadata) -> i64 {
    std::os::unix::fs::MetadataExt::mtime(m)
}

#[test]
fn a_dry_run_writes_nothing_and_lists_what_would_change() {
    let s = changed_since_copied();
    let before = s.tmp.path().join("before");
    copy_ok(&s.dst, &before, &[]);
    let r = copy_ok(&s.src, &s.dst, &["-n", "-i", "--delete"]);
    assert_same_tree(&before, &s.dst);
    let lines = items(&r.stdout);
    let mut expected = vec![
        "created dir     newdir",
        "created file    new",
        "created file    newdir/f",
        "deleted dir     gone",
        "deleted file    extra",
        "deleted file    gone/f",
        "meta    dir     . (times)",
        "meta    file    private (mode)",
        "updated file    one (size)",
        "updated file    twin_a (mtime)",
        "updated symlink link_dangling (target)",
    ];
    expected.sort();
    assert_eq!(lines, expected, "{r}");
    // Into a DST that is not there: nothing is made.
    let nowhere = s.tmp.path().join("nowhere/deeper");
    let r = copy_ok(&s.src, &nowhere, &["--dry-run", "-v"]);
    assert!(!nowhere.parent().expect("parent").exists(), "{r}");
    assert!(r.stdout.lines().any(|l| l == "newdir/f"), "{r}");
}

/// The counts of a dry run are those of the real run that follows it.
#[test]
fn a_dry_run_counts_what_the_copy_then_does() {
    let s = changed_since_copied();
    let dry = copy_ok(&s.src, &s.dst, &["-n", "--delete", "--json"]).json();
    let real = copy_ok(&s.src, &s.dst, &["--delete", "--json"]).json();
    for key in [
        "files", "dirs", "others", "bytes", "skipped", "deleted", "errors",
    ] {
        assert_eq!(
            dry.count(key),
            real.count(key),
            "{key}: {} vs {}",
            dry.0,
            real.0
        );
    }
    assert_same_tree(&s.src, &s.dst);
    // -v names deletions as rsync does; with --json the lines go to stderr.
    let again = copy(&s.src, &s.dst, &["-n", "-v", "--json"]);
    again.assert_status(0);
    assert!(again.stderr.is_empty(), "nothing left to do: {again}");
}

/// The lines of `-i` on `out`, sorted. (Every line: reading a symlink moves its atime,
/// but an atime alone is not a change.)
fn items(out: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    lines
}

/// `-i` in a real run lists what the dry run listed; `-v` names what it does.
#[test]
fn itemize_in_a_real_run_lists_what_the_dry_run_listed() {
    let s = changed_since_copied();
    let dry = copy_ok(&s.src, &s.dst, &["-n", "-i", "--delete"]);
    let real = copy_ok(&s.src, &s.dst, &["-i", "--delete"]);
    assert_eq!(items(&real.stdout), items(&dry.stdout), "{real}");
    assert_same_tree(&s.src, &s.dst);

    let s = changed_since_copied();
    let r = copy_ok(&s.src, &s.dst, &["-v", "--delete"]);
    let mut names: Vec<&str> = r.stdout.lines().collect();
    names.sort();
    let expected = [
        "deleting extra",
        "deleting gone/",
        "deleting gone/f",
        "link_dangling",
        "new",
        "newdir/",
        "newdir/f",
        "one",
        "twin_a",
    ];
    assert_eq!(names, expected, "{r}");
}

/// Right after a copy, `-n -i` lists nothing, even once SRC has been read since (which
/// moves atimes: a symlink's on every readlink, a file's where `O_NOATIME` is not had):
/// an atime alone is not a change, as in rsync.
#[test]
fn a_fresh_mirror_lists_nothing_after_its_source_was_read() {
    let s = scratch();
    mkdirs(&s.src.join("d"));
    write(&s.src.join("d/f"), b"file");
    write(&s.src.join("g"), b"another");
    symlink("g", &s.src.join("l"));
    symlink("d/f", &s.src.join("d/l"));
    stamp_times(&s.src);
    copy_ok(&s.src, &s.dst, &[]);
    for p in ["d/f", "g"] {
        std::fs::read(s.src.join(p)).expect("read");
    }
    for p in ["l", "d/l"] {
        std::fs::read_link(s.src.join(p)).expect("readlink");
    }
    let atime = |p: &std::path::Path| {
        std::os::unix::fs::MetadataExt::atime(&std::fs::symlink_metadata(p).unwrap())
    };
    assert_ne!(
        atime(&s.src.join("l")),
        atime(&s.dst.join("l")),
        "SRC's symlink has the atime of its copy: the test proves nothing"
    );
    let r = copy_ok(&s.src, &s.dst, &["-n", "-i", "--delete"]);
    assert_eq!(r.stdout, "", "{r}");
}

/// A scratch whose DST is an old copy of SRC where since `e`, an empty directory, has
/// become a file, `f`, a file, a directory, and `g` has new content of its old size
/// and a new mtime.
fn kinds_replaced_since_copied() -> Scratch {
    let s = scratch();
    mkdirs(&s.src.join("e"));
    write(&s.src.join("f"), b"file");
    write(&s.src.join("g"), b"aaaa");
    stamp_times(&s.src);
    copy_ok(&s.src, &s.dst, &[]);
    std::fs::remove_dir(s.src.join("e")).expect("rmdir");
    write(&s.src.join("e"), b"now a file");
    std::fs::remove_file(s.src.join("f")).expect("rm");
    mkdirs(&s.src.join("f"));
    write(&s.src.join("g"), b"bbbb");
    s
}

/// A real run lists and counts replacements as the dry run does: an empty directory in
/// the way goes as a deletion, a directory replacing a file is `updated dir (kind)`,
/// and with `-c` a file of its old size with other content is `updated file (content)`
/// (not `mtime`). Found by the mirror rounds (mirror_rounds.rs).
#[test]
fn replacements_are_listed_and_counted_as_the_dry_run_does() {
    let s = kinds_replaced_since_copied();
    let args = ["-i", "--delete", "-c"];
    let dry = copy_ok(&s.src, &s.dst, &[&["-n"][..], &args].concat());
    let real = copy_ok(&s.src, &s.dst, &args);
    let expected = [
        "deleted dir     e",
        "meta    dir     . (times)",
        "updated dir     f (kind)",
        "updated file    e (kind)",
        "updated file    g (content)",
    ];
    assert_eq!(items(&dry.stdout), expected, "{dry}");
    assert_eq!(items(&real.stdout), expected, "{real}");
    assert_same_tree(&s.src, &s.dst);

    let s = kinds_replaced_since_copied();
    let dry = copy_ok(&s.src, &s.dst, &["-n", "--delete", "--json"]).json();
    let real = copy_ok(&s.src, &s.dst, &["--delete", "--json"]).json();
    assert_eq!(dry.count("deleted"), 1, "{}", dry.0);
    assert_eq!(real.count("deleted"), 1, "{}", real.0);
}
