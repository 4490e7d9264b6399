//! `ferry pack` to a name ending in `.xz`, `.txz`, `.bz2`, `.tbz2` or `.lz4` writes that
//! compression (it used to write a plain tar under the name): GNU tar, bsdtar and the
//! compressor itself read it, to the same tree; an xz archive is in blocks, so `cat` and
//! `mount` read it at random; a name of a compression ferry does not write is refused.

use crate::common::compare::{assert_same_tree_with, Options};
use crate::common::{build, scratch, trees};
use crate::{ferry, missing, pack, peer};
use std::path::Path;
use std::process::Command;

/// Each name, the tool that tests it, and GNU tar's option for it.
const NAMES: [(&str, &str, &str); 5] = [
    ("a.tar.xz", "xz", "-J"),
    ("a.txz", "xz", "-J"),
    ("a.tar.bz2", "bzip2", "-j"),
    ("a.tbz2", "bzip2", "-j"),
    ("a.tar.lz4", "lz4", "--use-compress-program=lz4"),
];

fn extracted_by(program: &str, args: &[&str], archive: &Path, src: &Path, dst: &Path) {
    build::mkdirs(dst);
    let mut all: Vec<&dyn AsRef<std::ffi::OsStr>> = args
        .iter()
        .map(|a| a as &dyn AsRef<std::ffi::OsStr>)
        .collect();
    all.extend([&"-C" as &dyn AsRef<std::ffi::OsStr>, &dst, &"-xf", &archive]);
    peer(program, &all);
    let opts = Options {
        skip_atime: true,
        skip_root_meta: program == "bsdtar",
        ..Options::default()
    };
    assert_same_tree_with(src, dst, &opts);
}

#[test]
fn pack_writes_the_compression_its_name_says_and_the_peers_read_it() {
    if ["tar", "bsdtar", "xz", "bzip2", "lz4"]
        .iter()
        .any(|p| missing(p))
    {
        return;
    }
    let s = scratch();
    trees::mixed(&s.src);
    for (name, tool, gnu) in NAMES {
        let archive = s.tmp.path().join(name);
        pack(&s.src, &archive, &["--pax-times"]);
        // The compressor's own test of its format.
        peer(tool, &[&"-t", &"-q", &archive]);
        extracted_by(
            "tar",
            &[gnu, "--xattrs", "--xattrs-include=*"],
            &archive,
            &s.src,
            &s.tmp.path().join(format!("gnu-{name}")),
        );
        extracted_by(
            "bsdtar",
            &["-p"],
            &archive,
            &s.src,
            &s.tmp.path().join(format!("bsd-{name}")),
        );
        let dst = s.tmp.path().join(format!("ferry-{name}"));
        ferry(&[&"unpack", &archive, &dst]).assert_ok();
        assert_same_tree_with(&s.src, &dst, &Options::default());
    }
}

#[test]
fn a_name_of_a_compression_ferry_does_not_write_is_refused() {
    let s = scratch();
    build::write(&s.src.join("f"), b"data\n");
    for name in ["a.tar.Z", "a.tlz", "a.tar.lzma", "a.tar.lz", "a.tar.lzo"] {
        let archive = s.tmp.path().join(name);
        let r = ferry(&[&"pack", &s.src, &archive]);
        r.assert_status(2);
        assert!(
            r.stderr.contains("ferry does not write") && r.stderr.contains(".xz"),
            "{name}: {r}"
        );
        assert!(!archive.exists(), "{name} was written");
    }
}

#[test]
fn an_xz_pack_is_in_blocks_read_at_random() {
    if missing("xz") {
        return;
    }
    let s = scratch();
    // 40 MiB that compress little: five 8 MiB blocks at least.
    for i in 0..5 {
        build::write(&s.src.join(format!("f{i}")), &build::pattern(i, 8 << 20));
    }
    let archive = s.tmp.path().join("a.tar.xz");
    pack(&s.src, &archive, &[]);
    let out = Command::new("xz")
        .args(["--robot", "-l"])
        .arg(&archive)
        .output()
        .expect("xz -l");
    let listing = String::from_utf8_lossy(&out.stdout);
    let blocks: u64 = listing
        .lines()
        .find(|l| l.starts_with("file\t"))
        .and_then(|l| l.split('\t').nth(2))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(blocks >= 5, "{listing}");
    // ferry-seek finds the blocks: random access, as zstd frames are.
    let file = std::fs::File::open(&archive).expect("open");
    let mut ix = ferry_seek::Indexing::new(file, ferry_seek::Codec::Xz, ferry_seek::DEFAULT_SPAN)
        .expect("indexing");
    std::io::copy(&mut ix, &mut std::io::sink()).expect("read");
    let index = ix.finish().expect("finish");
    assert!(index.is_random_access(), "{:?}", index.advice());
    assert!(index.points() >= 5, "{} points", index.points());
    let cat = Command::new(crate::common::run::FERRY)
        .arg("cat")
        .arg(&archive)
        .arg("f3")
        .output()
        .expect("ferry cat");
    assert!(cat.status.success(), "{cat:?}");
    assert!(cat.stdout == build::pattern(3, 8 << 20), "cat f3 differs");
}
