//! What `unpack`, `ls` and `cat` say when something fails: one line per member at most,
//! naming the member apart from the archive it is in, or its place in the destination,
//! and what failed (issue #21, item 7).

use crate::common::mount::mount_ramfs;
use crate::common::{build, scratch, skip, skip_unless_root};
use crate::{ferry, ferry_stdin, pack};
use std::path::Path;

/// The member (as `ferry ls` prints it: a directory ends in `/`, the root is `./`) an
/// error line about `dst` names: `ferry: DST/PATH: ...`, or `ferry: DST: ...`.
fn member_named(line: &str, dst: &Path) -> String {
    let dst = format!("ferry: {}", dst.display());
    let rest = line.strip_prefix(&dst).unwrap_or_else(|| panic!("{line}"));
    match rest.strip_prefix('/') {
        Some(path) => path.split(": ").next().unwrap_or_default().to_string(),
        None => ".".to_string(),
    }
}

/// Unpacking onto a read-only filesystem fails once per member, naming it and saying
/// the filesystem is read-only, from the index and from a stream: a directory that
/// could not be made is not failed again when its metadata is due (with "open
/// destination directory: No such file or directory", which it used to be, each one).
#[test]
fn unpack_onto_a_read_only_filesystem_is_one_error_per_member() {
    if skip_unless_root() {
        return;
    }
    let s = scratch();
    for d in ["a", "b", "c/deeper"] {
        let dir = s.src.join(d);
        build::mkdirs(&dir.join("sub"));
        for f in ["f1", "f2"] {
            build::write(&dir.join(f), b"data");
            build::write(&dir.join("sub").join(f), b"more data");
        }
    }
    build::write(&s.src.join("top"), b"top");
    build::symlink("top", &s.src.join("link"));
    let archive = s.tmp.path().join("t.far");
    pack(&s.src, &archive, &[]);
    let ls = ferry(&[&"ls", &archive]);
    ls.assert_ok();
    let mut members: Vec<String> = ls
        .stdout
        .lines()
        .map(|m| match m.trim_end_matches('/') {
            "." => ".".to_string(),
            m => m.to_string(),
        })
        .collect();
    members.sort();
    let m = match mount_ramfs() {
        Ok(m) => m,
        Err(why) => return skip(&why),
    };
    let dst = m.path().join("dst");
    build::mkdirs(&dst);
    if let Err(why) = m.remount_read_only() {
        return skip(&why);
    }
    for streamed in [false, true] {
        let r = match streamed {
            false => ferry(&[&"unpack", &archive, &dst]),
            true => ferry_stdin(&[&"unpack", &"-", &dst], &archive),
        };
        r.assert_status(1);
        let errors = r.errors();
        for line in &errors {
            assert!(
                line.ends_with(": Read-only file system (os error 30)"),
                "{line}\n{r}"
            );
        }
        let mut named: Vec<String> = errors.iter().map(|l| member_named(l, &dst)).collect();
        named.sort();
        assert_eq!(named, members, "one error per member\n{r}");
    }
}

/// An error about a member names the archive and the member apart (`t.tar: member
/// nothere: ...`), not as one path (`t.tar/nothere`) that reads as a file on disk:
/// for `unpack`, `ls` and `cat`, from a file and from standard input.
#[test]
fn errors_name_the_archive_and_the_member_apart() {
    let s = scratch();
    build::write(&s.src.join("f"), b"data");
    build::mkdirs(&s.src.join("d"));
    let archive = s.tmp.path().join("t.far");
    pack(&s.src, &archive, &[]);
    let shown = archive.display().to_string();
    let missing = "member nothere: unpack: no such member in the archive";
    let r = ferry(&[&"unpack", &archive, &s.dst, &"nothere"]);
    r.assert_status(1);
    assert_eq!(r.errors(), [format!("ferry: {shown}: {missing}")], "{r}");
    let r = ferry_stdin(&[&"unpack", &"-", &s.dst, &"nothere"], &archive);
    r.assert_status(1);
    assert_eq!(r.errors(), [format!("ferry: -: {missing}")], "{r}");
    let r = ferry(&[&"ls", &archive, &"nothere"]);
    r.assert_status(1);
    let line = format!("ferry: {shown}: member nothere: ls: no such member in the archive");
    assert_eq!(r.errors(), [line], "{r}");
    for (name, why) in [
        ("nothere", "no such member"),
        ("d", "not a regular file but a directory"),
    ] {
        let r = ferry(&[&"cat", &archive, &name]);
        r.assert_status(2);
        let line = format!("ferry: {shown}: member {name}: {why}");
        assert_eq!(r.errors(), [line], "{r}");
    }
}
