//! `pack --zstd`: independent zstd frames with a seek table. GNU tar (`--zstd`),
//! `zstd -d | tar -x` and bsdtar read the archive; ferry's ls, cat and unpack read it
//! through its index, decompressing only the frames they need; a damaged frame is an
//! error naming the members in it, and leaves the others readable.

use crate::common::build::{self, pattern, write};
use crate::common::compare::{assert_same_tree, assert_same_tree_with, Options};
use crate::common::{scratch, trees, Scratch};
use crate::{ferry, ferry_stdin, missing, peer};
use std::path::Path;
use std::process::Command;

/// The test tree: every kind, a sparse file, and two 6 MiB files of incompressible data
/// (so the archive has several frames, and the files lie in different ones).
pub(crate) fn tree(root: &Path) {
    trees::mixed(root);
    build::sparse_file(
        &root.join("holey"),
        32 << 20,
        &[(0, b"head"), (20 << 20, b"mid")],
    );
    build::mkdirs(&root.join("big"));
    write(&root.join("big/first"), &pattern(1, 6 << 20));
    write(&root.join("big/last"), &pattern(2, 6 << 20));
    build::stamp_times(root);
}

pub(crate) fn no_atime() -> Options {
    Options {
        skip_atime: true,
        ..Options::default()
    }
}

/// `SRC` packed into `DIR/NAME` with `ARGS`.
pub(crate) fn packed(src: &Path, dir: &Path, name: &str, args: &[&str]) -> std::path::PathBuf {
    let archive = dir.join(name);
    let mut all: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"pack"];
    all.extend(args.iter().map(|a| a as &dyn AsRef<std::ffi::OsStr>));
    all.extend([&src as &dyn AsRef<std::ffi::OsStr>, &archive]);
    ferry(&all).assert_ok();
    archive
}

/// GNU tar reads `archive` (compressed, packed from `s.src`) with `tar_flag`, and again
/// from `decompressor -dc` on a pipe: both give the tree, xattrs included.
pub(crate) fn gnu_tar_and_a_pipe_read(
    s: &Scratch,
    archive: &Path,
    tar_flag: &str,
    decompressor: &str,
) {
    let gnu = s.tmp.path().join("gnu");
    build::mkdirs(&gnu);
    peer(
        "tar",
        &[
            &tar_flag,
            &"--xattrs",
            &"--xattrs-include=*",
            &"-C",
            &gnu,
            &"-xf",
            &archive,
        ],
    );
    assert_same_tree_with(&s.src, &gnu, &no_atime());
    let piped = s.tmp.path().join("piped");
    build::mkdirs(&piped);
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"$0 -dc "$1" | tar --xattrs --xattrs-include='*' -C "$2" -xf -"#)
        .arg(decompressor)
        .arg(archive)
        .arg(&piped)
        .output()
        .expect("run sh");
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
    assert_same_tree_with(&s.src, &piped, &no_atime());
}

#[test]
fn gnu_tar_zstd_and_bsdtar_read_a_zstd_archive() {
    if missing("tar") || missing("zstd") || missing("bsdtar") {
        return;
    }
    let s = scratch();
    tree(&s.src);
    // The peers' extractions are compared to the nanosecond: times in pax headers.
    let archive = packed(&s.src, s.tmp.path(), "a.tar.zst", &["--pax-times"]);
    let head = std::fs::read(&archive).expect("read")[..4].to_vec();
    assert_eq!(head, [0x28, 0xb5, 0x2f, 0xfd], "a .zst name implies --zstd");
    gnu_tar_and_a_pipe_read(&s, &archive, "--zstd", "zstd");
    let bsd = s.tmp.path().join("bsd");
    build::mkdirs(&bsd);
    peer("bsdtar", &[&"-xp", &"-C", &bsd, &"-f", &archive]);
    let opts = Options {
        skip_root_meta: true,
        ..no_atime()
    };
    assert_same_tree_with(&s.src, &bsd, &opts);
}

#[test]
fn ferry_reads_a_zstd_archive_through_its_index_and_as_a_stream() {
    let s = scratch();
    tree(&s.src);
    let archive = packed(&s.src, s.tmp.path(), "a.far", &["--zstd"]);
    let plain = packed(&s.src, s.tmp.path(), "a.tar", &[]);
    // Through the index, by several workers.
    ferry(&[&"unpack", &"-j", &"4", &archive, &s.dst]).assert_ok();
    assert_same_tree(&s.src, &s.dst);
    // Read as a stream (standard input), checked against the index at its end.
    let streamed = s.tmp.path().join("streamed");
    ferry_stdin(&[&"unpack", &"-", &streamed], &archive).assert_ok();
    assert_same_tree(&s.src, &streamed);
    let ls = |a: &Path| {
        let r = ferry(&[&"ls", &"-l", &a]);
        r.assert_ok();
        r.stdout
    };
    assert_eq!(ls(&archive), ls(&plain));
    let cat = ferry(&[&"cat", &archive, &"big/last"]);
    cat.assert_ok();
    assert!(cat.stdout == String::from_utf8_lossy(&pattern(2, 6 << 20)));
    // Members asked for, as from a plain archive.
    let some = s.tmp.path().join("some");
    ferry(&[&"unpack", &archive, &some, &"big"]).assert_ok();
    assert!(some.join("big/first").exists() && !some.join("one").exists());
}

#[test]
fn a_damaged_frame_names_its_member_and_leaves_the_others_readable() {
    let s = scratch();
    tree(&s.src);
    let archive = packed(&s.src, s.tmp.path(), "a.tar.zst", &[]);
    damage_a_big_member_and_read_the_rest(&archive, &s.dst, "zstd");
}

/// Flips bytes a quarter into `archive` (compressed, packed from [`tree`]): inside the
/// frames or members of whichever of the two incompressible files comes first (they
/// are most of it; their order is the directory's inode order), far from the index at
/// the end. `cat` of that file fails naming it and `codec_word`, the other reads
/// whole, `ls` works, and `unpack` into `dst` fails on that file alone.
pub(crate) fn damage_a_big_member_and_read_the_rest(archive: &Path, dst: &Path, codec_word: &str) {
    let mut bytes = std::fs::read(archive).expect("read");
    let at = bytes.len() / 4;
    for b in &mut bytes[at..at + 64] {
        *b ^= 0x5a;
    }
    std::fs::write(archive, &bytes).expect("write");
    let cats: Vec<_> = [("big/first", 1), ("big/last", 2)]
        .into_iter()
        .map(|(name, seed)| (name, seed, ferry(&[&"cat", &archive, &name])))
        .collect();
    let damaged: Vec<_> = cats.iter().filter(|(_, _, r)| r.status != 0).collect();
    let statuses: Vec<_> = cats
        .iter()
        .map(|(n, _, r)| format!("{n}: {}", r.status))
        .collect();
    assert_eq!(
        damaged.len(),
        1,
        "one of the two files is damaged: {statuses:?}"
    );
    let (victim, _, r) = damaged[0];
    r.assert_status(2);
    assert!(
        r.stderr.contains(&format!("member {victim}")) && r.stderr.contains(codec_word),
        "{r}"
    );
    // The other member, in frames of its own, and the listing, from the index's frames.
    let (other, seed, r) = cats
        .iter()
        .find(|(_, _, r)| r.status == 0)
        .expect("the other");
    assert!(r.stdout == String::from_utf8_lossy(&pattern(*seed, 6 << 20)));
    ferry(&[&"ls", &archive]).assert_ok();
    let r = ferry(&[&"unpack", &archive, &dst]);
    r.assert_status(1);
    assert!(
        r.errors()
            .iter()
            .any(|l| l.contains(victim) && l.contains(codec_word)),
        "{r}"
    );
    assert_eq!(
        std::fs::read(dst.join(other)).expect("read"),
        pattern(*seed, 6 << 20)
    );
}

#[test]
fn a_lying_seek_table_is_refused_naming_it() {
    let s = scratch();
    write(&s.src.join("f"), b"f");
    let archive = packed(&s.src, s.tmp.path(), "a.tar.zst", &[]);
    let mut bytes = std::fs::read(&archive).expect("read");
    let n = bytes.len();
    // The first frame's compressed size in the table, one too many.
    let count = u32::from_le_bytes(bytes[n - 9..n - 5].try_into().expect("4 bytes")) as usize;
    bytes[n - 9 - 8 * count] ^= 1;
    std::fs::write(&archive, &bytes).expect("write");
    for cmd in ["ls", "unpack"] {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&cmd, &archive];
        let dst = s.tmp.path().join("dst");
        if cmd == "unpack" {
            args.push(&dst);
        }
        let r = ferry(&args);
        r.assert_status(2);
        assert!(
            r.stderr.contains("a.tar.zst") && r.stderr.contains("zstd seek table"),
            "{r}"
        );
    }
}

#[test]
fn zstd_archives_refuse_cloning_and_go_to_standard_output_too() {
    let s = scratch();
    write(&s.src.join("f"), &pattern(3, 100_000));
    let r = ferry(&[
        &"pack",
        &"--reflink",
        &"always",
        &s.src,
        &s.tmp.path().join("a.tar.zst"),
    ]);
    r.assert_status(2);
    assert!(r.stderr.contains("no data can be cloned"), "{r}");
    let out = s.tmp.path().join("out.zst");
    let mut cmd = Command::new(crate::common::run::FERRY);
    cmd.args(["pack", "--zstd", "--level", "9"])
        .arg(&s.src)
        .arg("-");
    cmd.stdout(std::fs::File::create(&out).expect("create"));
    let status = cmd.status().expect("run ferry");
    assert!(status.success());
    let cat = ferry(&[&"cat", &out, &"f"]);
    cat.assert_ok();
    assert!(cat.stdout == String::from_utf8_lossy(&pattern(3, 100_000)));
}

/// `cat` finds a member through the tree table at the end of the index, which pack
/// writes in small frames (the tar data's last frame ends where the index begins):
/// every file prints as it is in the source, from a zstd archive and a plain one. A
/// damaged frame of the table is an error (the zstd frame named), never other bytes.
#[test]
fn cat_looks_members_up_in_the_index_s_small_frames() {
    let s = scratch();
    tree(&s.src);
    let archive = packed(&s.src, s.tmp.path(), "a.tar.zst", &[]);
    let plain = packed(&s.src, s.tmp.path(), "a.far", &[]);
    let frames = ferry_seek::seekable::frames(&std::fs::File::open(&archive).expect("open"))
        .expect("read")
        .expect("a seek table");
    let small = frames
        .iter()
        .rev()
        .take_while(|f| f.decompressed <= 128 << 10)
        .count();
    assert!(
        small >= 1 && small < frames.len(),
        "the index in frames of at most 128 KiB: {frames:?}"
    );
    for name in [
        "one",
        "a/b/c/d/deep.txt",
        "a/b/hard3",
        "big/first",
        "holey",
        "empty",
    ] {
        let want = std::fs::read(s.src.join(name)).expect("read");
        for a in [&archive, &plain] {
            let r = ferry(&[&"cat", a, &name]);
            r.assert_ok();
            assert!(
                r.stdout == String::from_utf8_lossy(&want),
                "{name} from {a:?}"
            );
        }
    }
    let r = ferry(&[&"cat", &archive, &"a/b"]);
    r.assert_status(2);
    assert!(
        r.stderr
            .contains("member a/b: not a regular file but a directory"),
        "{r}"
    );
    let r = ferry(&[&"cat", &archive, &"one/x"]);
    r.assert_status(2);
    assert!(r.stderr.contains("member one/x: no such member"), "{r}");
    // The last frame holds the table's trailer: every lookup reads it.
    let mut bytes = std::fs::read(&archive).expect("read");
    let last = frames.last().expect("frames");
    bytes[(last.inp + u64::from(last.compressed) / 2) as usize] ^= 0x5a;
    std::fs::write(&archive, &bytes).expect("write");
    let r = ferry(&[&"cat", &archive, &"one"]);
    r.assert_status(2);
    assert!(
        r.stdout.is_empty() && r.stderr.contains("zstd frame"),
        "{r}"
    );
}
