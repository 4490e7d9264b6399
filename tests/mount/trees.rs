//! Mounted trees are the trees that were packed: a ferry archive (from its index), GNU
//! tar's archives (scanned), every kind of entry, odd names, sparse files, xattrs.

use super::common::build::{sparse_file, stamp_times, write};
use super::common::compare::{assert_same_tree_with, Options};
use super::common::{scratch, trees};
use super::{every_kind_and_odd_names, ferry, fuse_here, gnu_tar, must, pack, Mounted};
use std::process::Command;

#[test]
fn a_ferry_archive_mounts_as_the_tree_it_was_packed_from() {
    if !fuse_here() {
        return;
    }
    let s = scratch();
    every_kind_and_odd_names(&s.src);
    sparse_file(
        &s.src.join("holes"),
        3 << 20,
        &[(1 << 20, b"data"), (2 << 20, b"more")],
    );
    stamp_times(&s.src);
    let archive = s.tmp.path().join("t.far");
    let cache = s.tmp.path().join("cache");
    pack(&cache, &s.src, &archive);
    let m = Mounted::new(&cache, &archive, &s.tmp.path().join("mnt"));
    assert_same_tree_with(&s.src, &m.at, &Options::default());
    // Served from the archive's own index: nothing was built into the cache.
    let kept: Vec<_> = std::fs::read_dir(cache.join("ferry"))
        .expect("the cache holds the log")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(kept, ["mount.log"]);
    let said = ferry(&cache, &[&"index", &archive]);
    said.assert_ok();
    assert!(
        said.stdout.contains("carries its own index"),
        "{}",
        said.stdout
    );
    // Holes read back as zeros and do not count as blocks.
    let st = std::fs::metadata(m.at.join("holes")).expect("stat");
    use std::os::unix::fs::MetadataExt;
    assert!(
        st.blocks() * 512 < 1 << 20,
        "{} blocks for 8 KiB of data",
        st.blocks()
    );
}

#[test]
fn gnu_tars_mount_as_the_tree_they_hold() {
    if !fuse_here() {
        return;
    }
    let s = scratch();
    every_kind_and_odd_names(&s.src);
    super::common::build::mkdirs(&s.src.join("long"));
    write(
        &s.src
            .join("long")
            .join("x".repeat(200))
            .with_extension("txt"),
        b"long name",
    );
    stamp_times(&s.src);
    let cache = s.tmp.path().join("cache");
    for (name, args) in [
        (
            "posix.tar",
            &[
                "--format=posix",
                "--xattrs",
                "--xattrs-include=*",
                "--atime-preserve=system",
            ][..],
        ),
        ("gnu.tar", &["--format=gnu", "--atime-preserve=system"][..]),
    ] {
        let archive = s.tmp.path().join(name);
        gnu_tar(&s.src, &archive, args);
        let m = Mounted::new(&cache, &archive, &s.tmp.path().join(format!("mnt-{name}")));
        let gnu = name == "gnu.tar";
        let opts = Options {
            // GNU tar records hardlinks of files and symlinks only.
            skip_special_links: true,
            // The gnu format keeps whole seconds and no atime or xattrs.
            mtime_seconds: gnu,
            skip_atime: gnu,
            skip_xattrs: gnu,
            ..Options::default()
        };
        assert_same_tree_with(&s.src, &m.at, &opts);
    }
}

#[test]
fn compressed_tars_mount_and_say_when_reads_are_sequential() {
    if !fuse_here() {
        return;
    }
    let s = scratch();
    trees::mixed(&s.src);
    sparse_file(&s.src.join("holes"), 3 << 20, &[(1 << 20, b"data")]);
    stamp_times(&s.src);
    let cache = s.tmp.path().join("cache");
    let tar = s.tmp.path().join("t.tar");
    gnu_tar(
        &s.src,
        &tar,
        &[
            "--format=posix",
            "--xattrs",
            "--xattrs-include=*",
            "--atime-preserve=system",
        ],
    );
    // (compressor, its arguments, whether reads can start anywhere)
    for (tool, args, random) in [
        ("gzip", &["-c"][..], true),
        ("pigz", &["-c"][..], true),
        ("zstd", &["-c", "-q"][..], true),
        ("xz", &["-c", "-T2"][..], true),
        ("bzip2", &["-c"][..], false),
    ] {
        let archive = s.tmp.path().join(format!("t.tar.{tool}"));
        let out = must(Command::new(tool).args(args).arg(&tar));
        std::fs::write(&archive, out.stdout).expect("write");
        let indexed = ferry(&cache, &[&"index", &archive]);
        indexed.assert_ok();
        assert_eq!(
            indexed.stderr.contains("reads are sequential"),
            !random,
            "{tool}: {}",
            indexed.stderr
        );
        let m = Mounted::new(&cache, &archive, &s.tmp.path().join(format!("mnt-{tool}")));
        let opts = Options {
            skip_special_links: true,
            ..Options::default()
        };
        assert_same_tree_with(&s.src, &m.at, &opts);
    }
}

/// A ferry archive compressed in frames (zstd, gzip) is served from its own index,
/// read through its frames: nothing is scanned or built into the cache.
#[test]
fn a_zstd_or_gzip_ferry_archive_mounts_from_its_own_index() {
    if !fuse_here() {
        return;
    }
    let s = scratch();
    every_kind_and_odd_names(&s.src);
    write(
        &s.src.join("large"),
        &super::common::build::pattern(4, 9 << 20),
    );
    stamp_times(&s.src);
    for name in ["t.tar.zst", "t.tar.gz"] {
        let archive = s.tmp.path().join(name);
        let cache = s.tmp.path().join(format!("cache-{name}"));
        pack(&cache, &s.src, &archive);
        let m = Mounted::new(&cache, &archive, &s.tmp.path().join(format!("mnt-{name}")));
        assert_same_tree_with(&s.src, &m.at, &Options::default());
        let kept: Vec<_> = std::fs::read_dir(cache.join("ferry"))
            .expect("the cache holds the log")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(kept, ["mount.log"], "{name}: nothing built");
        let said = ferry(&cache, &[&"index", &archive]);
        said.assert_ok();
        assert!(
            said.stdout.contains("carries its own index"),
            "{name}: {}",
            said.stdout
        );
    }
}
