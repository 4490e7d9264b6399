//! Times kept in the index (index version 5): a member that needs a pax header for
//! nothing else has none, its ustar header giving the mtime's seconds; every ferry
//! reader still gives back the times to the nanosecond and the atime, from the index
//! directly or, read as a stream, from the index after the tar data; GNU tar takes the
//! seconds.

use crate::common::compare::{assert_same_tree, assert_same_tree_with, Options};
use crate::common::{build, scratch};
use crate::edit::replace_first;
use crate::{ferry, ferry_stdin, missing, pack, peer};
use std::path::Path;

/// The typeflags of the headers in the tar data of `archive`, in order (pax, GNU
/// long-name and member headers alike), up to the end-of-archive blocks.
fn typeflags(archive: &Path) -> Vec<u8> {
    let bytes = std::fs::read(archive).expect("read the archive");
    let mut flags = Vec::new();
    let mut at = 0;
    while let Some(h) = bytes.get(at..at + 512) {
        if h.iter().all(|&b| b == 0) {
            break;
        }
        let size = std::str::from_utf8(&h[124..135]).expect("an octal size");
        let size = u64::from_str_radix(size.trim_matches(|c| c == ' ' || c == '\0'), 8)
            .expect("an octal size") as usize;
        flags.push(h[156]);
        // Header-only kinds store no data, whatever their size says.
        let data = match h[156] {
            b'1' | b'2' | b'3' | b'4' | b'5' | b'6' => 0,
            _ => size.div_ceil(512) * 512,
        };
        at += 512 + data;
    }
    flags
}

/// Directories, files of 0 to 200 bytes, a symlink and a fifo.
fn small_tree(root: &Path) {
    build::mkdirs(&root.join("dir/sub"));
    build::write(&root.join("dir/a"), b"0123456789");
    build::write(&root.join("dir/b"), &build::pattern(2, 200));
    build::write(&root.join("dir/sub/c"), b"c");
    build::write(&root.join("dir/empty"), b"");
    build::symlink("a", &root.join("dir/link"));
    build::fifo(&root.join("dir/fifo"));
}

/// Small files, directories, symlinks and a fifo, each with nanoseconds and an atime
/// of its own, take no pax header; a file of 4 KiB or more (aligned) has one. The
/// archive unpacked from the file, from a pipe and from a pipe with
/// `--strip-components`, and listed, gives every time back exactly.
#[test]
fn members_without_a_pax_header_keep_their_times_through_every_reader() {
    let s = scratch();
    small_tree(&s.src);
    build::write(&s.src.join("dir/aligned"), &build::pattern(5, 8192));
    build::stamp_times(&s.src);
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &[]).assert_ok();

    let flags = typeflags(&archive);
    let members = flags.iter().filter(|&&f| f != b'x').count();
    let pax = flags.iter().filter(|&&f| f == b'x').count();
    assert!(members > 5, "{flags:?}");
    assert_eq!(pax, 1, "only the aligned file has a pax header: {flags:?}");

    ferry(&[&"unpack", &archive, &s.dst]).assert_ok();
    assert_same_tree(&s.src, &s.dst);

    let piped = s.tmp.path().join("piped");
    ferry_stdin(&[&"unpack", &"-", &piped], &archive).assert_ok();
    assert_same_tree(&s.src, &piped);

    // Placed elsewhere than the stored paths say: the times follow the members.
    let stripped = s.tmp.path().join("stripped");
    ferry_stdin(
        &[&"unpack", &"--strip-components", &"1", &"-", &stripped],
        &archive,
    )
    .assert_ok();
    let opts = Options {
        skip_root_meta: true,
        ..Options::default()
    };
    assert_same_tree_with(&s.src.join("dir"), &stripped, &opts);

    // ls -l shows the index's seconds, as tar -tv shows the header's.
    let listed = ferry(&[&"ls", &"-l", &archive]);
    listed.assert_ok();
    assert!(listed.stdout.contains("dir/aligned"), "{}", listed.stdout);
}

/// GNU tar reads such an archive silently, to the second (as from its own default
/// format, which keeps no more).
#[test]
fn gnu_tar_takes_the_seconds_of_members_without_a_pax_header() {
    if missing("tar") {
        return;
    }
    let s = scratch();
    small_tree(&s.src);
    build::stamp_times(&s.src);
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &[]).assert_ok();
    std::fs::create_dir_all(&s.dst).expect("mkdir");
    peer("tar", &[&"-xf", &archive, &"-C", &s.dst]);
    let opts = Options {
        skip_atime: true,
        mtime_seconds: true,
        ..Options::default()
    };
    assert_same_tree_with(&s.src, &s.dst, &opts);
}

/// A file whose data was changed after packing, unpacked from a pipe with
/// `--strip-components`, is removed where it was placed (not at its stored path,
/// where another file may be), and named.
#[test]
fn a_damaged_member_streamed_elsewhere_is_removed_where_it_was_placed() {
    let s = scratch();
    build::mkdirs(&s.src.join("top"));
    build::write(&s.src.join("top/victim"), b"the packed bytes");
    build::write(&s.src.join("top/other"), b"left as it is");
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &[]).assert_ok();
    let mut bytes = std::fs::read(&archive).expect("read");
    replace_first(&mut bytes, b"the packed bytes", b"The packed bytes");
    std::fs::write(&archive, &bytes).expect("write");
    // What the stored path would name below DST, were the stripping ignored.
    let stored_place = s.dst.join("top/victim");
    build::mkdirs(&s.dst.join("top"));
    build::write(&stored_place, b"not the archive's");

    let r = ferry_stdin(
        &[&"unpack", &"--strip-components", &"1", &"-", &s.dst],
        &archive,
    );
    r.assert_status(1);
    assert!(r.stderr.contains("victim"), "{}", r.stderr);
    assert!(!s.dst.join("victim").exists(), "the damaged file was left");
    assert_eq!(
        std::fs::read(s.dst.join("other")).expect("other"),
        b"left as it is"
    );
    assert_eq!(
        std::fs::read(&stored_place).expect("untouched"),
        b"not the archive's"
    );
}

/// Packs `names` of `src` in that order (`pack -C SRC -T LIST`) into `archive`.
fn pack_in_order(src: &Path, names: &[&str], archive: &Path) {
    let list = archive.with_extension("list");
    std::fs::write(&list, names.join("\n") + "\n").expect("write the list");
    ferry(&[&"pack", &"-C", &src, &"-T", &list, &archive]).assert_ok();
}

/// Two members placed at one path (`--strip-components` makes `b/x` and `a/x` both
/// `x`): the file is the later one's, with its times, and a damaged earlier one does
/// not take the later one's file with it.
#[test]
fn a_member_placed_over_by_a_later_one_leaves_the_later_ones_file() {
    let s = scratch();
    put(&s.src.join("b/x"), b"early");
    put(&s.src.join("a/x"), &build::pattern(9, 8192));
    build::stamp_times(&s.src);
    let archive = s.tmp.path().join("a.far");
    pack_in_order(&s.src, &["b/x", "a/x"], &archive);
    let want = std::fs::symlink_metadata(s.src.join("a/x")).expect("stat");
    for damaged in [false, true] {
        if damaged {
            let mut bytes = std::fs::read(&archive).expect("read");
            replace_first(&mut bytes, b"early", b"Early");
            std::fs::write(&archive, &bytes).expect("write");
        }
        let dst = s.tmp.path().join(format!("out-{damaged}"));
        let r = ferry_stdin(
            &[&"unpack", &"--strip-components", &"1", &"-", &dst],
            &archive,
        );
        assert!(r.status == 0 || r.status == 1, "{r}");
        let got = std::fs::read(dst.join("x")).expect("x is there");
        assert_eq!(got, build::pattern(9, 8192), "damaged {damaged}");
        let meta = std::fs::symlink_metadata(dst.join("x")).expect("stat");
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            (meta.mtime(), meta.mtime_nsec()),
            (want.mtime(), want.mtime_nsec()),
            "damaged {damaged}"
        );
    }
}

/// A symlink already in DST, found up to date, and linked from outside DST (as a
/// snapshot made with `cp -al` links it): unpacking from a pipe leaves that shared
/// node's times as they were.
#[test]
fn a_node_found_up_to_date_and_linked_from_outside_keeps_its_times() {
    if missing("tar") {
        return;
    }
    let s = scratch();
    build::mkdirs(&s.src);
    build::symlink("nowhere", &s.src.join("l"));
    build::stamp_times(&s.src);
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &[]).assert_ok();
    build::mkdirs(&s.dst);
    peer("tar", &[&"-xf", &archive, &"-C", &s.dst]);
    let outside = s.tmp.path().join("snapshot-l");
    std::fs::hard_link(s.dst.join("l"), &outside).expect("link the symlink");
    use std::os::unix::fs::MetadataExt;
    let before = std::fs::symlink_metadata(&outside).expect("stat");
    ferry_stdin(&[&"unpack", &"-", &s.dst], &archive).assert_ok();
    let after = std::fs::symlink_metadata(&outside).expect("stat");
    assert_eq!(
        (after.mtime(), after.mtime_nsec()),
        (before.mtime(), before.mtime_nsec())
    );
}

/// `cat -` of several members, one damaged: whatever order they are named in, the
/// damage is found and the member named.
#[test]
fn cat_from_a_pipe_names_the_damaged_member_in_any_order() {
    let s = scratch();
    put(&s.src.join("a/x"), b"intact");
    put(&s.src.join("b/x"), b"damaged");
    let archive = s.tmp.path().join("a.far");
    pack_in_order(&s.src, &["a/x", "b/x"], &archive);
    let mut bytes = std::fs::read(&archive).expect("read");
    replace_first(&mut bytes, b"damaged", b"Damaged");
    std::fs::write(&archive, &bytes).expect("write");
    for order in [["a/x", "b/x"], ["b/x", "a/x"]] {
        let r = ferry_stdin(&[&"cat", &"-", &order[0], &order[1]], &archive);
        r.assert_status(2);
        assert!(r.stderr.contains("member b/x"), "{order:?}: {r}");
    }
}

/// Many symlinks with long names and targets: the index (each name in an entry and
/// in the tree table) outweighs their headers, and a stream still reads it.
#[test]
fn an_index_longer_than_its_tar_data_is_read_after_a_stream() {
    let s = scratch();
    let dir = s.src.join("d".repeat(90)).join("e".repeat(90));
    build::mkdirs(&dir);
    for i in 0..300 {
        let name = format!("{i:03}{}", "n".repeat(96));
        build::symlink("t".repeat(100), &dir.join(name));
    }
    build::stamp_times(&s.src);
    for args in [&[][..], &["--plain-index"][..]] {
        let archive = s.tmp.path().join(format!("a{}.far", args.len()));
        pack(&s.src, &archive, args).assert_ok();
        let dst = s.tmp.path().join(format!("out{}", args.len()));
        ferry_stdin(&[&"unpack", &"-", &dst], &archive).assert_ok();
        assert_same_tree(&s.src, &dst);
    }
}

/// Writes `data` to `path`, making its directory first.
fn put(path: &Path, data: &[u8]) {
    build::mkdirs(path.parent().expect("a parent"));
    build::write(path, data);
}
