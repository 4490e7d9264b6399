//! Indexed archives whose members' order matters: a name given twice, a member below a
//! symlink. A parallel unpack through the index must make the tree a sequential
//! extraction makes, every time: GNU tar's, and ferry's own from a stream.

use crate::common::compare::{assert_same_tree_with, Options};
use crate::common::{build, scratch};
use crate::edit::{rename_in_headers, rename_in_index, NAME};
use crate::{ferry, missing, pack, peer};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The members of `archive` in archive order, as `ferry ls` prints them.
fn member_order(archive: &Path) -> Vec<String> {
    let r = ferry(&[&"ls", &archive]);
    r.assert_ok();
    r.stdout.lines().map(str::to_owned).collect()
}

/// Renames member `from` to `to` (of the same length) in the tar headers and the index
/// of the archive `bytes`; a directory's name ends in `/` in both.
fn rename_member(bytes: &mut [u8], from: &str, to: &str) {
    assert_eq!(
        rename_in_headers(bytes, NAME, from.as_bytes(), to.as_bytes()),
        1,
        "{from}"
    );
    assert_eq!(
        rename_in_index(bytes, from.as_bytes(), to.as_bytes(), usize::MAX),
        1,
        "{from}"
    );
}

/// `ferry unpack - DST` with `archive` on stdin: the stream reader, in archive order.
fn unpack_streamed(archive: &Path, dst: &Path) -> crate::common::run::Run {
    crate::ferry_stdin(&[&"unpack", &"-", &dst], archive)
}

/// A file given again after a hardlink to it, and a directory given twice: read through
/// the index, the link keeps the first file's data and the name the second's (the link
/// was made before the name was given again), and the directory gets its last member's
/// metadata; as GNU tar has it, and as ferry has it when reading the archive as a
/// stream.
#[test]
fn an_indexed_archive_naming_a_path_twice_unpacks_as_tar_extracts_it() {
    if missing("tar") {
        return;
    }
    let s = scratch();
    let d = s.src.join("d");
    build::mkdirs(&d);
    // Pack writes a directory's files in inode order, which follows the order of
    // creation, or its reverse: some of these come after the linked pair either way.
    let other =
        |name: &str| build::write(&d.join(name), format!("second data, was {name}").as_bytes());
    ["c", "e", "f", "g"].into_iter().for_each(other);
    build::write(&d.join("a"), b"first data");
    build::hardlink(&d.join("a"), &d.join("b"));
    ["h", "i", "j", "k"].into_iter().for_each(other);
    for (name, mode, sec) in [("e1", 0o700, 1_000_000_000), ("e2", 0o755, 1_300_000_000)] {
        build::mkdirs(&s.src.join(name));
        build::chmod(&s.src.join(name), mode);
        build::set_times(&s.src.join(name), build::ts(sec, 0), build::ts(sec, 0));
    }
    let archive = s.tmp.path().join("twice.far");
    pack(&s.src, &archive, &["--pax-times", "--plain-index"]);
    let order = member_order(&archive);
    let at = |name: &str| order.iter().position(|m| m == name).expect(name);
    let (target, link) = match at("d/a") < at("d/b") {
        true => ("d/a", "d/b"),
        false => ("d/b", "d/a"),
    };
    let later = order[at(link)..]
        .iter()
        .find(|m| m.starts_with("d/") && *m != link)
        .unwrap_or_else(|| panic!("no file packed after the hardlink: {order:?}"))
        .clone();
    let (dir_first, dir_later) = match at("e1/") < at("e2/") {
        true => ("e1/", "e2/"),
        false => ("e2/", "e1/"),
    };
    let mut bytes = std::fs::read(&archive).expect("read");
    rename_member(&mut bytes, &later, target);
    rename_member(&mut bytes, dir_later, dir_first);
    std::fs::write(&archive, &bytes).expect("write");

    let by_tar = s.tmp.path().join("by-tar");
    build::mkdirs(&by_tar);
    peer("tar", &[&"-xf", &archive, &"-C", &by_tar]);
    let later_data = format!("second data, was {}", &later[2..]);
    assert_eq!(
        std::fs::read(by_tar.join(target)).expect("target"),
        later_data.as_bytes()
    );
    assert_eq!(
        std::fs::read(by_tar.join(link)).expect("link"),
        b"first data"
    );
    let dir = std::fs::metadata(by_tar.join(dir_first)).expect("dir");
    let last_dir = std::fs::metadata(s.src.join(dir_later)).expect("dir");
    assert_eq!(
        (dir.mode(), dir.mtime()),
        (last_dir.mode(), last_dir.mtime())
    );

    let same = Options {
        skip_atime: true,
        ..Options::default()
    };
    for round in 0..3 {
        let by_index = s.tmp.path().join(format!("by-index-{round}"));
        ferry(&[&"unpack", &archive, &by_index]).assert_ok();
        assert_same_tree_with(&by_tar, &by_index, &same);
    }
    let streamed = s.tmp.path().join("streamed");
    unpack_streamed(&archive, &streamed).assert_ok();
    assert_same_tree_with(&by_tar, &streamed, &same);
}

/// Members below symlinks of their directory's name meet the symlink every time: each
/// is refused, naming it and the symlink, and the symlinks stay, as when the archive is
/// streamed (a parallel unpack used to make a different tree each run), and into a
/// destination that was there before.
#[test]
fn members_below_a_symlink_in_an_indexed_archive_are_refused_every_time() {
    let s = scratch();
    build::mkdirs(&s.src.join("x"));
    let pairs: Vec<u32> = (10..40).collect();
    for i in &pairs {
        build::symlink("x", &s.src.join(format!("l{i}")));
        build::mkdirs(&s.src.join(format!("m{i}")));
        build::write(&s.src.join(format!("m{i}/pwn")), b"below a symlink");
    }
    let archive = s.tmp.path().join("below.far");
    pack(&s.src, &archive, &["--plain-index"]);
    let mut bytes = std::fs::read(&archive).expect("read");
    for i in &pairs {
        rename_member(&mut bytes, &format!("m{i}/pwn"), &format!("l{i}/pwn"));
    }
    std::fs::write(&archive, &bytes).expect("write");

    let check = |dst: &Path, r: crate::common::run::Run| {
        r.assert_status(1);
        let mut refused: Vec<&str> = r.errors();
        refused.sort_unstable();
        let mut expected: Vec<String> = pairs
            .iter()
            .map(|i| {
                format!(
                    "ferry: {}/l{i}/pwn: unpack: not extracted through l{i}, a symlink to x \
                     that an earlier member made",
                    dst.display()
                )
            })
            .collect();
        expected.sort_unstable();
        assert_eq!(refused.len(), expected.len(), "{r}");
        for (line, want) in refused.iter().zip(&expected) {
            assert_eq!(line, want, "{r}");
        }
        for i in &pairs {
            let l = std::fs::symlink_metadata(dst.join(format!("l{i}"))).expect("l");
            assert!(l.file_type().is_symlink(), "l{i} replaced");
        }
        assert_eq!(std::fs::read_dir(dst.join("x")).expect("x").count(), 0);
    };
    for round in 0..3 {
        let dst = s.tmp.path().join(format!("by-index-{round}"));
        check(&dst, ferry(&[&"unpack", &archive, &dst]));
    }
    let streamed = s.tmp.path().join("streamed");
    check(&streamed, unpack_streamed(&archive, &streamed));
    // Into a destination that was there before (issue #21, item 3: the symlinks used
    // to be replaced by directories there), and again over what that left.
    let existing = s.tmp.path().join("existing");
    build::mkdirs(&existing);
    for _ in 0..2 {
        check(&existing, ferry(&[&"unpack", &archive, &existing]));
    }
}

/// Unpacking again onto what an interrupted unpack left, of an archive that gives a
/// name twice with one size and mtime: the earlier member's file may stand there, and
/// looks up to date for both members. The last member's data must win, through the
/// index and from a stream (both used to keep the first member's).
#[test]
fn resuming_an_archive_that_names_a_file_twice_ends_with_the_last_members_data() {
    let s = scratch();
    let d = s.src.join("d");
    build::mkdirs(&d);
    let same_times = build::ts(1_200_000_000, 0);
    for (name, data) in [("xa", b"version one"), ("xb", b"version two")] {
        build::write(&d.join(name), data);
        build::set_times(&d.join(name), same_times, same_times);
    }
    let archive = s.tmp.path().join("twice.far");
    pack(&s.src, &archive, &["--plain-index"]);
    let order = member_order(&archive);
    let at = |name: &str| order.iter().position(|m| m == name).expect(name);
    let (first, last) = match at("d/xa") < at("d/xb") {
        true => ("d/xa", "d/xb"),
        false => ("d/xb", "d/xa"),
    };
    let mut bytes = std::fs::read(&archive).expect("read");
    rename_member(&mut bytes, last, first);
    std::fs::write(&archive, &bytes).expect("write");
    let first_data = std::fs::read(s.src.join(first)).expect("first");
    let last_data = std::fs::read(s.src.join(last)).expect("last");

    // What an unpack stopped between the two members leaves: the first member's file,
    // with its size and mtime, made before this job began.
    let interrupted = |dst: &Path| {
        build::mkdirs(&dst.join("d"));
        build::write(&dst.join(first), &first_data);
        build::set_times(&dst.join(first), same_times, same_times);
    };
    let by_index = s.tmp.path().join("by-index");
    interrupted(&by_index);
    ferry(&[&"unpack", &archive, &by_index]).assert_ok();
    assert_eq!(
        std::fs::read(by_index.join(first)).expect("read"),
        last_data
    );
    let streamed = s.tmp.path().join("streamed");
    interrupted(&streamed);
    unpack_streamed(&archive, &streamed).assert_ok();
    assert_eq!(
        std::fs::read(streamed.join(first)).expect("read"),
        last_data
    );
}
