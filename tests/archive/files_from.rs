//! `ferry pack -T LIST` (`--files-from`, GNU tar's meaning) against `tar -cf A -T
//! LIST` on the same tree: the members (as GNU tar lists both archives) are the same,
//! relative to `-C DIR` or to where each runs, with `--null`, from standard input,
//! with absolute paths and names that are not UTF-8; a missing path is an error and
//! the rest is packed; `..` is refused; a path listed twice is packed once.

use crate::common::build::*;
use crate::common::compare::{assert_same_tree_with, Options};
use crate::common::filters::tree;
use crate::common::run::{run, Run, FERRY};
use crate::common::scratch;
use crate::missing;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Output};

/// `ferry pack ARGS` run in `dir`.
fn ferry_in(dir: &Path, args: &[&dyn AsRef<OsStr>]) -> Run {
    let mut cmd = Command::new(FERRY);
    cmd.current_dir(dir).arg("pack");
    for a in args {
        cmd.arg(a);
    }
    run(cmd)
}

/// `tar ARGS` run in `dir`, with what it printed.
fn tar_in(dir: &Path, args: &[&dyn AsRef<OsStr>]) -> Output {
    let mut cmd = Command::new("tar");
    cmd.current_dir(dir);
    for a in args {
        cmd.arg(a);
    }
    cmd.output().expect("run tar")
}

/// The members of `archive` as GNU tar lists them, in the archive's order.
fn members(archive: &Path) -> Vec<Vec<u8>> {
    let out = tar_in(Path::new("/"), &[&"-tf", &archive]);
    assert!(out.status.success(), "tar -tf {archive:?}: {out:?}");
    out.stdout
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

fn sorted(mut v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    v.sort();
    v
}

/// Shown as text, for messages.
fn shown(v: &[Vec<u8>]) -> Vec<String> {
    v.iter().map(|m| m.escape_ascii().to_string()).collect()
}

/// A list with a file in directories it does not name, a listed directory, a name
/// that is not UTF-8, a symlink, a fifo, a trailing `/` and an empty line.
const LIST: &[u8] =
    b"docs/a/b/c/deep.md\nsrc\n\nlib/src/c.c\ndir\xfe/inner.o\nlnk\nlib/fifo\nbuild/\n";

#[test]
fn listed_paths_are_packed_as_gnu_tar_packs_them() {
    if missing("tar") {
        return;
    }
    let s = scratch();
    tree(&s.src);
    let list = s.tmp.path().join("list");
    write(&list, LIST);
    let (ours, theirs) = (s.tmp.path().join("a.far"), s.tmp.path().join("a.tar"));
    let tmp = s.tmp.path();
    ferry_in(tmp, &[&"-C", &s.src, &"-T", &list, &ours]).assert_ok();
    let out = tar_in(tmp, &[&"-C", &s.src, &"-cf", &theirs, &"-T", &list]);
    assert!(out.status.success(), "{out:?}");
    let got = members(&ours);
    assert_eq!(
        shown(&sorted(got.clone())),
        shown(&sorted(members(&theirs)))
    );
    // In the list's order, each directory in the walk's.
    let at = |m: &[u8]| got.iter().position(|g| g == m).expect("a member");
    assert!(at(b"docs/a/b/c/deep.md") < at(b"src/") && at(b"src/") < at(b"src/a.c"));
    assert!(at(b"src/sub/b.c") < at(b"lib/src/c.c") && at(b"lnk") < at(b"build/"));
    assert!(
        !got.iter().any(|m| m == b"docs/"),
        "no leading directories, as tar"
    );

    // Relative to where ferry runs without -C; what it packs unpacks as tar's does.
    let here = s.tmp.path().join("here.far");
    ferry_in(&s.src, &[&"-T", &list, &here]).assert_ok();
    assert_eq!(sorted(members(&here)), sorted(got));
    let (a, b) = (s.tmp.path().join("x.ferry"), s.tmp.path().join("x.tar"));
    for (archive, dst) in [(&here, &a), (&theirs, &b)] {
        mkdirs(dst);
        let out = tar_in(dst, &[&"-xf", archive]);
        assert!(out.status.success(), "{out:?}");
    }
    // GNU tar's own format keeps mtimes to the second.
    let opts = Options {
        skip_atime: true,
        mtime_seconds: true,
        skip_root_meta: true,
        made_dirs: [&b"docs"[..], b"docs/a", b"docs/a/b", b"docs/a/b/c", b"lib"]
            .iter()
            .chain([&b"lib/src"[..], b"dir\xfe"].iter())
            .map(|d| d.to_vec())
            .collect(),
        ..Options::default()
    };
    assert_same_tree_with(&b, &a, &opts);
}

/// `--null`: NUL-ended names, so one may hold a newline; `-T -` reads standard input;
/// an absolute path is read where it is and named without its `/`, as tar names it.
#[test]
fn null_lists_from_standard_input_and_absolute_paths() {
    if missing("tar") {
        return;
    }
    let s = scratch();
    for name in [&b"new\nline/f"[..], b"plain/g", b"cr\r"] {
        let path = s.src.join(OsStr::from_bytes(name));
        mkdirs(path.parent().expect("parent"));
        write(&path, name);
    }
    let mut entries = b"new\nline\0cr\r\0\0".to_vec();
    entries.extend_from_slice(s.src.join("plain/g").as_os_str().as_bytes());
    entries.push(0);
    let list = s.tmp.path().join("list0");
    write(&list, &entries);
    let (ours, theirs) = (s.tmp.path().join("n.far"), s.tmp.path().join("n.tar"));
    let mut cmd = Command::new(FERRY);
    cmd.current_dir(&s.src)
        .args(["pack", "--null", "-T", "-"])
        .arg(&ours)
        .stdin(std::fs::File::open(&list).expect("open the list"));
    run(cmd).assert_ok();
    let out = tar_in(&s.src, &[&"--null", &"-cf", &theirs, &"-T", &list]);
    assert!(out.status.success(), "{out:?}");
    let got = sorted(members(&ours));
    assert_eq!(shown(&got), shown(&sorted(members(&theirs))));
    assert_eq!(got.len(), 4, "{:?}", shown(&got));
}

/// A listed path that is not there is an error naming it (exit 1; tar exits 2); the
/// others are packed as tar packs them.
#[test]
fn a_missing_path_is_an_error_and_the_rest_is_packed() {
    if missing("tar") {
        return;
    }
    let s = scratch();
    tree(&s.src);
    let list = s.tmp.path().join("list");
    write(&list, b"keep.o\nnot/there\nsrc/sub\n");
    let (ours, theirs) = (s.tmp.path().join("m.far"), s.tmp.path().join("m.tar"));
    let r = ferry_in(&s.src, &[&"-T", &list, &ours]);
    r.assert_status(1);
    assert_eq!(r.errors().len(), 1, "{r}");
    assert!(r.errors()[0].contains("not/there: "), "{r}");
    let out = tar_in(&s.src, &[&"-cf", &theirs, &"-T", &list]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(sorted(members(&ours)), sorted(members(&theirs)));
}

/// A path listed twice, or below a listed directory, is packed once (tar packs it
/// again); the members are otherwise tar's.
#[test]
fn a_path_listed_twice_is_packed_once() {
    if missing("tar") {
        return;
    }
    let s = scratch();
    tree(&s.src);
    let list = s.tmp.path().join("list");
    write(&list, b"src/sub\nsrc\nsrc/a.c\nkeep.o\nkeep.o\n");
    let (ours, theirs) = (s.tmp.path().join("d.far"), s.tmp.path().join("d.tar"));
    ferry_in(&s.src, &[&"-T", &list, &ours]).assert_ok();
    let out = tar_in(&s.src, &[&"-cf", &theirs, &"-T", &list]);
    assert!(out.status.success(), "{out:?}");
    let mut once = sorted(members(&theirs));
    assert!(
        once.windows(2).any(|w| w[0] == w[1]),
        "tar packs some twice"
    );
    once.dedup();
    assert_eq!(shown(&sorted(members(&ours))), shown(&once));
}

/// `..` stops the pack before it starts (exit 2), naming the line; so does a SRC
/// given beside -T.
#[test]
fn dot_dot_and_a_src_beside_the_list_are_refused() {
    let s = scratch();
    tree(&s.src);
    let list = s.tmp.path().join("list");
    write(&list, b"src\nsrc/../../x\n");
    let archive = s.tmp.path().join("r.far");
    let r = ferry_in(&s.src, &[&"-T", &list, &archive]);
    r.assert_status(2);
    assert!(
        r.stderr.contains("list: line 2: ") && r.stderr.contains("../x"),
        "{r}"
    );
    assert!(!archive.exists(), "nothing written: {r}");
    let r = ferry_in(&s.src, &[&"-T", &list, &"src", &archive]);
    r.assert_status(2);
    assert!(r.stderr.contains("-T"), "{r}");
}
