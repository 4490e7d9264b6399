//! Streams placed by several workers (issue #23): a large stream makes exactly the tree
//! a sequential extraction makes, with one worker and with many; one cut in the middle
//! is one error and leaves no incomplete file that looks complete.

use crate::common::build::{self, pattern};
use crate::common::compare::{assert_same_tree, assert_same_tree_with, read_noatime, Options};
use crate::common::run::{run, FERRY};
use crate::common::{scratch, trees, Scratch};
use crate::ferry_stdin;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Thousands of small files in many directories, a few files larger than a pooled
/// buffer (some with holes), hardlinks within and across directories, symlinks, empty
/// files and directories; times stamped last.
fn big_tree(root: &Path) {
    for i in 0..3000u64 {
        let dir = root.join(format!("d{}/e{}", i % 40, i % 3));
        build::mkdirs(&dir);
        let len = (i as usize * 37) % 9000;
        build::write(&dir.join(format!("f{i:04}")), &pattern(i, len));
    }
    // Larger than a pooled buffer, here and there among the small ones.
    for i in 0..10u64 {
        let len = (1 << 20) + 100 * i as usize;
        build::write(
            &root.join(format!("d{}/e1/large", i * 4)),
            &pattern(100 + i, len),
        );
    }
    build::mkdirs(&root.join("big/empty"));
    build::write(&root.join("big/three"), &pattern(1, (3 << 20) + 5));
    build::write(&root.join("big/five"), &pattern(2, 5 << 20));
    build::write(&root.join("big/edge"), &pattern(3, 256 << 10));
    build::sparse_file(
        &root.join("big/sparse"),
        64 << 20,
        &[
            (0, b"head"),
            (8 << 20, &pattern(4, 3 << 20)),
            (40 << 20, b"tail"),
        ],
    );
    build::sparse_file(&root.join("big/holes"), 9 << 20, &[]);
    build::hardlink(&root.join("d3/e0/f0003"), &root.join("d7/e1/linked"));
    build::hardlink(&root.join("big/five"), &root.join("big/five-again"));
    build::hardlink(&root.join("big/five"), &root.join("d1/e1/five-elsewhere"));
    build::symlink("../big/three", &root.join("d2/to-three"));
    build::write(&root.join("d9/e2/empty"), b"");
    trees::mixed(&root.join("mixed"));
    build::stamp_times(root);
}

/// [`big_tree`] in `s.src`, and what `ferry pack ARGS SRC -` writes of it, in a file for
/// `unpack -` to read back on standard input; returns that file's path.
fn packed_big_tree(s: &Scratch, args: &[&str]) -> PathBuf {
    big_tree(&s.src);
    let stream = s.tmp.path().join("stream.far");
    let out = std::fs::File::create(&stream).expect("create");
    let mut cmd = Command::new(FERRY);
    cmd.arg("pack").args(args).arg(&s.src).arg("-").stdout(out);
    run(cmd).assert_ok();
    stream
}

#[test]
fn a_large_stream_unpacks_to_the_same_tree_with_one_worker_or_many() {
    let s = scratch();
    let stream = packed_big_tree(&s, &[]);
    for jobs in ["1", "8"] {
        let dst = s.tmp.path().join(format!("out-j{jobs}"));
        let r = ferry_stdin(&[&"unpack", &"-j", &jobs, &"-", &dst], &stream);
        r.assert_ok();
        assert_same_tree(&s.src, &dst);
        // The stream is a ferry archive: every file was checked against its index.
        assert!(r.warnings().is_empty(), "{r}");
    }
}

/// A stream whose members give names again (appended with `tar -r`: a second version
/// of a file, a link to it, a new file) makes the tree GNU tar makes reading it in
/// order, every time.
#[test]
fn a_stream_giving_names_again_makes_the_sequential_tree() {
    let s = scratch();
    if crate::missing("tar") {
        return;
    }
    big_tree(&s.src);
    let tar = s.tmp.path().join("a.tar");
    crate::peer("tar", &[&"-C", &s.src, &"-cf", &tar, &"."]);
    let more = s.tmp.path().join("more");
    build::mkdirs(&more.join("d5/e2"));
    build::write(&more.join("d5/e2/f0005"), b"second version");
    build::mkdirs(&more.join("d6"));
    build::hardlink(&more.join("d5/e2/f0005"), &more.join("d6/link-to-second"));
    build::write(&more.join("d8x"), &pattern(8, 70_000));
    build::stamp_times(&more);
    crate::peer(
        "tar",
        &[
            &"-C",
            &more,
            &"-rf",
            &tar,
            &"./d5/e2/f0005",
            &"./d6/link-to-second",
            &"./d8x",
        ],
    );
    let want = s.tmp.path().join("by-tar");
    build::mkdirs(&want);
    crate::peer("tar", &[&"-C", &want, &"-xf", &tar]);
    let sequential = s.tmp.path().join("out-j1");
    ferry_stdin(&[&"unpack", &"-j", &"1", &"-", &sequential], &tar).assert_ok();
    // GNU tar sets a directory's mtime before the members appended to it come (they
    // change it again); ferry sets it after all members.
    let opts = Options {
        skip_atime: true,
        skip_special_links: true,
        ..Options::skipping(&["d5/e2", "d6"])
    };
    assert_same_tree_with(&want, &sequential, &opts);
    let second = std::fs::read(sequential.join("d5/e2/f0005")).expect("read");
    assert_eq!(second, b"second version");
    let ino = |p: &str| std::fs::metadata(sequential.join(p)).expect("stat").ino();
    assert_eq!(ino("d5/e2/f0005"), ino("d6/link-to-second"));
    let opts = Options {
        skip_atime: true,
        ..Options::default()
    };
    for _ in 0..3 {
        let dst = s.tmp.path().join("out");
        ferry_stdin(&[&"unpack", &"-j", &"8", &"-", &dst], &tar).assert_ok();
        assert_same_tree_with(&sequential, &dst, &opts);
        std::fs::remove_dir_all(&dst).expect("clean up");
    }
}

/// A stream cut in the middle of a large member's data, with many members before it
/// placed by workers: one error naming that member, exit status 2, and every file
/// left with its member's mtime is whole.
#[test]
fn a_stream_cut_in_the_middle_is_one_error_and_no_file_looks_whole_that_is_not() {
    let s = scratch();
    // Cut short, the stream has no index after it to give times finer than its
    // headers': they must carry them.
    let stream = packed_big_tree(&s, &["--pax-times"]);
    let bytes = std::fs::read(&stream).expect("read");
    // Cut inside the large file that comes last.
    let (at, cut_name) = (0..10u64)
        .map(|i| {
            let head = pattern(100 + i, 4096);
            let at = bytes.windows(4096).position(|w| w == &head[..]);
            (
                at.expect("data in the stream"),
                format!("d{}/e1/large", i * 4),
            )
        })
        .max()
        .expect("ten");
    let cut = s.tmp.path().join("cut.far");
    std::fs::write(&cut, &bytes[..at + (1 << 19)]).expect("write");
    for jobs in ["1", "8"] {
        let dst = s.tmp.path().join(format!("out-j{jobs}"));
        let r = ferry_stdin(&[&"unpack", &"-j", &jobs, &"-", &dst], &cut);
        r.assert_status(2);
        let errors = r.errors();
        assert_eq!(errors.len(), 1, "{r}");
        assert!(
            errors[0].starts_with(&format!("ferry: -: member {cut_name}: archive offset")),
            "{r}"
        );
        let mut whole = 0;
        let mut left = vec![dst.clone()];
        while let Some(dir) = left.pop() {
            for e in std::fs::read_dir(&dir).expect("read dir") {
                let path = e.expect("entry").path();
                let meta = std::fs::symlink_metadata(&path).expect("stat");
                if meta.is_dir() {
                    left.push(path);
                    continue;
                }
                let rel = path.strip_prefix(&dst).expect("below");
                let src = std::fs::symlink_metadata(s.src.join(rel)).expect("in the source");
                if !meta.is_file()
                    || (meta.mtime(), meta.mtime_nsec()) != (src.mtime(), src.mtime_nsec())
                {
                    continue;
                }
                let same = read_noatime(&path) == read_noatime(&s.src.join(rel));
                assert!(same, "{} has its mtime but not its content", rel.display());
                whole += 1;
            }
        }
        assert!(whole > 500, "only {whole} files placed before the cut: {r}");
        assert!(!dst.join(&cut_name).exists(), "the member cut is left: {r}");
    }
    // Packed again whole, the same archive unpacks into what the cut one left (resume).
    let dst = s.tmp.path().join("out-j8");
    ferry_stdin(&[&"unpack", &"-", &dst], &stream).assert_ok();
    assert_same_tree(&s.src, &dst);
}
