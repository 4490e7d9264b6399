//! `unpack` and `ls` of the members named on the command line, as `tar -xf A NAME...`:
//! each name with everything below it, from the index, from a stream, and hardlinks
//! whose target was left out.

use crate::common::compare::assert_same_tree;
use crate::common::{build, scratch, Scratch};
use crate::edit::{rename_in_headers, rename_in_index, NAME};
use crate::{ferry, pack};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Every path below `root`, relative to it, sorted (directories end in `/`).
fn paths_below(root: &Path) -> Vec<String> {
    fn walk(root: &Path, rel: &str, out: &mut Vec<String>) {
        let mut names: Vec<_> = std::fs::read_dir(root.join(rel))
            .expect("list")
            .map(|e| e.expect("entry").file_name().into_string().expect("UTF-8"))
            .collect();
        names.sort();
        for name in names {
            let path = format!("{rel}{name}");
            if std::fs::symlink_metadata(root.join(&path))
                .expect("stat")
                .is_dir()
            {
                out.push(format!("{path}/"));
                walk(root, &format!("{path}/"), out);
            } else {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, "", &mut out);
    out
}

/// A tree whose file `top` has two more names under `d/`, which is also the start of
/// the name of a file beside it; packed into `s.tmp/a.far`, returned.
fn linked_tree(s: &Scratch) -> PathBuf {
    build::mkdirs(&s.src.join("d/sub"));
    build::mkdirs(&s.src.join("e"));
    build::write(&s.src.join("top"), b"shared data");
    build::hardlink(&s.src.join("top"), &s.src.join("d/one"));
    build::hardlink(&s.src.join("top"), &s.src.join("d/sub/two"));
    build::write(&s.src.join("d/sub/own"), b"own");
    build::write(&s.src.join("e/other"), b"other");
    build::write(&s.src.join("dx"), b"a sibling whose name starts with d");
    build::chmod(&s.src.join("d"), 0o750);
    build::stamp_times(&s.src);
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &["--plain-index"]);
    archive
}

/// `ferry unpack - DST MEMBERS..` with `archive` on standard input.
fn unpack_piped(archive: &Path, dst: &Path, members: &[&str]) -> crate::common::run::Run {
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"unpack", &"-", &dst];
    args.extend(members.iter().map(|m| m as &dyn AsRef<std::ffi::OsStr>));
    crate::ferry_stdin(&args, archive)
}

#[test]
fn named_members_unpack_with_what_lies_below_them() {
    let s = scratch();
    let archive = linked_tree(&s);
    let r = ferry(&[&"unpack", &archive, &s.dst, &"./d/", &"nope"]);
    r.assert_status(1);
    assert_eq!(
        r.errors(),
        vec![format!(
            "ferry: {}: member nope: unpack: no such member in the archive",
            archive.display()
        )],
        "{r}"
    );
    assert_eq!(
        paths_below(&s.dst),
        ["d/", "d/one", "d/sub/", "d/sub/own", "d/sub/two"]
    );
    // The two names under d/ get top's data and stay one inode, with d's metadata:
    // what d/ in SRC is, once top is gone.
    std::fs::remove_file(s.src.join("top")).expect("remove top");
    assert_same_tree(&s.src.join("d"), &s.dst.join("d"));
    let one = std::fs::metadata(s.dst.join("d/one")).expect("stat");
    assert_eq!(one.nlink(), 2);

    // Naming the target too links to it, as a whole unpack does.
    let both = s.tmp.path().join("both");
    ferry(&[&"unpack", &archive, &both, &"d/sub", &"top"]).assert_ok();
    assert_eq!(
        paths_below(&both),
        ["d/", "d/sub/", "d/sub/own", "d/sub/two", "top"]
    );
    let (top, two) = (both.join("top"), both.join("d/sub/two"));
    assert_eq!(
        std::fs::metadata(&top).expect("stat").ino(),
        std::fs::metadata(&two).expect("stat").ino()
    );
}

#[test]
fn named_members_unpack_from_a_stream() {
    let s = scratch();
    let archive = linked_tree(&s);
    unpack_piped(&archive, &s.dst, &["e", "d/sub/own"]).assert_ok();
    assert_eq!(
        paths_below(&s.dst),
        ["d/", "d/sub/", "d/sub/own", "e/", "e/other"]
    );
    assert_same_tree(&s.src.join("e"), &s.dst.join("e"));

    // A hardlink's target went by unread: each such link is an error naming it, and the
    // rest is unpacked.
    let links = s.tmp.path().join("links");
    let r = unpack_piped(&archive, &links, &["d"]);
    r.assert_status(1);
    let why = "unpack: a hardlink to top, which was not asked for: name it too";
    assert_eq!(
        r.errors(),
        vec![
            format!("ferry: -: member d/one: {why}"),
            format!("ferry: -: member d/sub/two: {why}")
        ],
        "{r}"
    );
    assert_eq!(paths_below(&links), ["d/", "d/sub/", "d/sub/own"]);
}

#[test]
fn ls_lists_the_named_members_and_names_the_missing() {
    let s = scratch();
    let archive = linked_tree(&s);
    let r = ferry(&[&"ls", &archive, &"d/sub", &"e/other", &"e/nope"]);
    r.assert_status(1);
    let mut listed: Vec<&str> = r.stdout.lines().collect();
    listed.sort_unstable();
    assert_eq!(listed, ["d/sub/", "d/sub/own", "d/sub/two", "e/other"]);
    assert_eq!(
        r.stderr.trim_end(),
        format!(
            "ferry: {}: member e/nope: ls: no such member in the archive",
            archive.display()
        )
    );
    for name in ["../d", "d/../../x"] {
        for cmd in ["ls", "unpack"] {
            let r = match cmd {
                "ls" => ferry(&[&cmd, &archive, &name]),
                _ => ferry(&[&cmd, &archive, &s.dst, &name]),
            };
            r.assert_status(2);
            assert!(
                r.stderr
                    .contains(&format!("{name}: member path contains '..'")),
                "{r}"
            );
        }
    }
    assert!(!s.dst.exists(), "a refused name makes nothing");
}

/// A named hardlink whose target no member before it is called (made by hand: `top`
/// renamed `tip` in its header and index entry, its links still naming `top`) is an
/// error naming the link, and the rest is unpacked; a whole unpack fails those links
/// the same way.
#[test]
fn a_named_link_to_a_target_no_member_is_called_is_an_error() {
    let s = scratch();
    let archive = linked_tree(&s);
    let mut bytes = std::fs::read(&archive).expect("read the archive");
    assert_eq!(rename_in_headers(&mut bytes, NAME, b"top", b"tip"), 1);
    assert_eq!(rename_in_index(&mut bytes, b"top", b"tip", 1), 1);
    std::fs::write(&archive, &bytes).expect("write the archive");
    assert!(ferry(&[&"ls", &archive]).stdout.contains("\ntip\n"));

    let r = ferry(&[&"unpack", &archive, &s.dst, &"d"]);
    r.assert_status(1);
    let why = "unpack: a hardlink to top, with no member of that name before it to copy";
    let a = archive.display();
    assert_eq!(
        r.errors(),
        vec![
            format!("ferry: {a}: member d/one: {why}"),
            format!("ferry: {a}: member d/sub/two: {why}")
        ],
        "{r}"
    );
    assert_eq!(paths_below(&s.dst), ["d/", "d/sub/", "d/sub/own"]);

    let whole = s.tmp.path().join("whole");
    let r = ferry(&[&"unpack", &archive, &whole]);
    r.assert_status(1);
    assert_eq!(r.errors().len(), 2, "{r}");
    assert!(r.errors().iter().all(|e| e.contains("top")), "{r}");
    assert!(whole.join("tip").is_file() && !whole.join("d/one").exists());
}
