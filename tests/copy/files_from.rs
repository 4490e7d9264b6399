//! `ferry copy --files-from LIST SRC DST` against `rsync -a -r --files-from=LIST SRC/
//! DST/` on the same trees, compared in every respect but DST's own metadata (rsync
//! leaves a DST it makes as made unless the list names `.`; ferry gives it SRC's, as
//! every copy does): nested paths, a listed directory, a file in directories the list
//! does not name, names that are not UTF-8 or hold a newline, filters, --delete,
//! missing entries, `..` refused, and a list of 100,000 paths.

use crate::common::build::*;
use crate::common::compare::{assert_same_tree_with, Options};
use crate::common::filters::{rsync, tree};
use crate::common::run::{run, Run, FERRY};
use crate::common::scratch;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;

/// `ferry copy --files-from LIST ARGS SRC DST`.
fn ferry_copy(list: &Path, args: &[&str], src: &Path, dst: &Path) -> Run {
    let mut cmd = Command::new(FERRY);
    cmd.arg("copy").arg("--files-from").arg(list).args(args);
    cmd.arg(src).arg(dst);
    run(cmd)
}

/// `rsync -aHUX -r --files-from LIST ARGS SRC/ DST/`; false when rsync is missing.
fn rsync_listed(list: &Path, args: &[&str], src: &Path, dst: &Path) -> bool {
    let mut all: Vec<OsString> = vec!["-r".into(), "--files-from".into(), list.into()];
    all.extend(args.iter().map(OsString::from));
    rsync(&all, src, dst)
}

/// rsync keeps atimes to the second only, and leaves DST's root as it made it.
fn same_as_rsync(theirs: &Path, ours: &Path) {
    let opts = Options {
        skip_atime: true,
        skip_root_meta: true,
        ..Options::default()
    };
    assert_same_tree_with(theirs, ours, &opts);
}

/// Copies `src` by `list` (written from `entries`) with ferry and rsync, both with
/// `args`, and compares the results; false when rsync is missing.
fn both_take_the_same(tmp: &Path, tag: &str, entries: &[u8], args: &[&str], src: &Path) -> bool {
    let list = tmp.join(format!("{tag}.list"));
    write(&list, entries);
    let (theirs, ours) = (tmp.join(format!("{tag}.r")), tmp.join(format!("{tag}.f")));
    if !rsync_listed(&list, args, src, &theirs) {
        return false;
    }
    ferry_copy(&list, args, src, &ours).assert_ok();
    same_as_rsync(&theirs, &ours);
    true
}

/// A list with nested paths, a listed directory, files in directories it does not
/// name, a name that is not UTF-8, comments, blank lines, a leading `/`, `./`, `//`,
/// a trailing `/`, CR and CRLF endings, a path listed twice and one inside a listed
/// directory.
const LIST: &[u8] = b"docs/a/b/c/deep.md\n\
    # a comment\n\
    ; another\n\
    \n\
    src\n\
    /lib/src/c.c\n\
    ./x//cache\r\n\
    dir\xfe/inner.o\r\
    build/\n\
    src/sub/b.c\n\
    docs/a/b/c/deep.md\n\
    lnk\n\
    lib/fifo\n";

#[test]
fn listed_paths_are_copied_as_rsync_copies_them() {
    let s = scratch();
    tree(&s.src);
    both_take_the_same(s.tmp.path(), "plain", LIST, &[], &s.src);
}

/// The rules decide on each listed path and on what is below a listed directory, not
/// on the directories leading to a listed path; a listed path they leave out brings
/// no directories with it.
#[test]
fn filters_apply_to_listed_paths_and_below_them() {
    let s = scratch();
    tree(&s.src);
    let sets: &[&[&str]] = &[
        &["--exclude", "*.o", "--exclude", "c"],
        &["--exclude", "a", "--exclude", "sub/"],
        &["--exclude", "deep.md", "--exclude", "/src/a.c"],
        &["--include", "*/", "--include", "*.c", "--exclude", "*"],
        &["--include", "/lib/**", "--exclude", "*"],
    ];
    for (i, args) in sets.iter().enumerate() {
        if !both_take_the_same(s.tmp.path(), &format!("r{i}"), LIST, args, &s.src) {
            return;
        }
    }
}

/// `--from0`: NUL-ended entries, so a name may hold a newline or a CR; `#` entries
/// are still comments, as rsync has them; a file of rules is read so too.
#[test]
fn nul_ended_lists_take_names_with_newlines() {
    let s = scratch();
    for name in [
        &b"new\nline/f"[..],
        b"cr\rname",
        b"plain/g",
        b"plain/x\ny",
        b"#hash",
    ] {
        let path = s.src.join(OsStr::from_bytes(name));
        mkdirs(path.parent().expect("parent"));
        write(&path, name);
    }
    stamp_times(&s.src);
    let entries = b"new\nline/f\0cr\rname\0#hash\0\0plain\0";
    if !both_take_the_same(s.tmp.path(), "nul", entries, &["--from0"], &s.src) {
        return;
    }
    let rules = s.tmp.path().join("rules0");
    write(&rules, b"x\ny\0# c\0");
    let args = ["--from0", "--exclude-from", rules.to_str().expect("UTF-8")];
    both_take_the_same(s.tmp.path(), "nulrules", entries, &args, &s.src);
    assert!(!s.tmp.path().join("nulrules.f/plain/x\ny").exists());
}

/// A listed path SRC lacks is an error naming it (exit 1, as for any path that
/// fails); the others are copied as rsync copies them (it exits 23).
#[test]
fn a_missing_entry_is_an_error_naming_it_and_the_rest_is_copied() {
    let s = scratch();
    tree(&s.src);
    let list = s.tmp.path().join("list");
    write(&list, b"src/a.c\nnot/there\nkeep.o\n");
    let (theirs, ours) = (s.tmp.path().join("r"), s.tmp.path().join("f"));
    let r = ferry_copy(&list, &[], &s.src, &ours);
    r.assert_status(1);
    let errors = r.errors();
    assert_eq!(errors.len(), 1, "{r}");
    assert!(errors[0].contains("src/not/there: "), "{r}");
    let status = Command::new("rsync")
        .args(["-aHUX", "-r", "--files-from"])
        .arg(&list)
        .arg(with_slash(&s.src))
        .arg(with_slash(&theirs))
        .stderr(std::process::Stdio::null())
        .status();
    let Ok(status) = status else {
        return crate::common::skip("rsync is not installed");
    };
    assert_eq!(status.code(), Some(23), "rsync on a missing entry");
    same_as_rsync(&theirs, &ours);
}

/// A `..` component stops the copy before it starts (exit 2), naming the list's
/// line; nothing is made.
#[test]
fn dot_dot_is_refused_naming_the_line() {
    let s = scratch();
    tree(&s.src);
    let list = s.tmp.path().join("list");
    write(&list, b"src\n# fine\nsrc/../../etc\n");
    let r = ferry_copy(&list, &[], &s.src, &s.dst);
    r.assert_status(2);
    assert!(r.stderr.contains("list: line 3: "), "{r}");
    assert!(r.stderr.contains("src/../../etc"), "{r}");
    assert!(!s.dst.exists(), "nothing made: {r}");
}

/// With --delete, what DST has and SRC lacks goes only below listed directories:
/// what is in the directories leading to a listed path, or anywhere else, stays, as
/// rsync leaves it. --delete-excluded is refused (ferry's would delete outside them).
#[test]
fn delete_deletes_within_listed_directories_only() {
    let s = scratch();
    tree(&s.src);
    let before = s.tmp.path().join("before");
    for extra in [
        "old",
        "other/o",
        "docs/old",
        "docs/a/b/c/old",
        "src/old",
        "src/sub/deeper/old",
        "build/old",
        "lib/src/old",
    ] {
        let path = before.join(extra);
        mkdirs(path.parent().expect("parent"));
        write(&path, b"extra");
    }
    let list = s.tmp.path().join("list");
    write(&list, LIST);
    let (theirs, ours) = (s.tmp.path().join("r"), s.tmp.path().join("f"));
    for dst in [&theirs, &ours] {
        let cp = Command::new("cp").arg("-a").arg(&before).arg(dst).status();
        assert!(cp.expect("cp").success());
    }
    if !rsync_listed(&list, &["--delete"], &s.src, &theirs) {
        return;
    }
    ferry_copy(&list, &["--delete"], &s.src, &ours).assert_ok();
    same_as_rsync(&theirs, &ours);
    assert!(ours.join("docs/a/b/c/old").exists() && !ours.join("src/old").exists());
    let r = ferry_copy(&list, &["--delete-excluded"], &s.src, &ours);
    r.assert_status(2);
    assert!(r.stderr.contains("--delete-excluded"), "{r}");
}

/// A list naming each of 100,000 files takes every one of them, and every directory
/// as leading to them: DST is SRC. (Timed by hand: see docs/copy.md.)
#[test]
fn a_list_of_100000_paths() {
    let s = scratch();
    let mut list = Vec::new();
    for d in 0..200 {
        let dir = format!("d{d:03}/e{}", d % 7);
        mkdirs(&s.src.join(&dir));
        for f in 0..500 {
            let path = format!("{dir}/f{f:03}");
            write(&s.src.join(&path), b"");
            list.extend_from_slice(path.as_bytes());
            list.push(b'\n');
        }
    }
    stamp_times(&s.src);
    let file = s.tmp.path().join("list");
    write(&file, &list);
    let r = ferry_copy(&file, &["--json"], &s.src, &s.dst);
    r.assert_ok();
    assert_eq!(r.json().count("files"), 100_000, "{r}");
    assert_same_tree_with(&s.src, &s.dst, &Options::default());
}

/// Refused before anything starts (exit 2), each saying why: a remote SRC (a
/// download: the list's paths are not checked there yet; uploads take it, see
/// tests/net/sources.rs) or an S3 end, several SRCs, a SRC that is not a directory,
/// and standard input asked for twice.
#[test]
fn what_a_list_does_not_go_with_is_refused() {
    let s = scratch();
    tree(&s.src);
    let list = s.tmp.path().join("list");
    write(&list, b"src\n");
    let remote = format!("nohost:{}", s.src.to_str().expect("UTF-8"));
    let file = s.src.join("keep.o");
    let cases: &[(&[&OsStr], &str)] = &[
        (
            &[OsStr::new(&remote), s.dst.as_os_str()],
            "only for an upload",
        ),
        (&[s.src.as_os_str(), OsStr::new("s3://b/p")], "S3"),
        (
            &[s.src.as_os_str(), s.src.as_os_str(), s.dst.as_os_str()],
            "one SRC",
        ),
        (&[file.as_os_str(), s.dst.as_os_str()], "a directory"),
    ];
    for (ends, why) in cases {
        let mut cmd = Command::new(FERRY);
        cmd.arg("copy").arg("--files-from").arg(&list).args(*ends);
        let r = run(cmd);
        r.assert_status(2);
        assert!(r.stderr.contains(why), "{why}: {r}");
    }
    let mut cmd = Command::new(FERRY);
    cmd.args(["copy", "--files-from", "-", "--exclude-from", "-"])
        .arg(&s.src)
        .arg(&s.dst)
        .stdin(std::process::Stdio::null());
    let r = run(cmd);
    r.assert_status(2);
    assert!(r.stderr.contains("read once"), "{r}");
    assert!(!s.dst.exists(), "nothing made: {r}");
}
