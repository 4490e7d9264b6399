//! Archives compressed with lz4, lzma, lzip, compress (`.Z`) and lzop, made by those
//! tools: `unpack` (from a file and from standard input), `ls`, `cat` and `index` read
//! them as bsdtar does, whatever the file is named (the first bytes decide), and bytes
//! after the compressed data are told as GNU tar tells them, with its exit status.

use crate::common::compare::assert_same_tree;
use crate::common::run::FERRY;
use crate::common::{scratch, trees};
use crate::{ferry, missing, pack};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Each codec's compressor, its arguments (the tar on stdin, the result on stdout).
const TOOLS: [(&str, &[&str]); 5] = [
    ("lz4", &["-q", "-c"]),
    ("xz", &["--format=lzma", "-c"]),
    ("lzip", &["-c"]),
    ("compress", &["-f", "-c"]),
    ("lzop", &["-c"]),
];

/// `plain` compressed by `program ARGS` into `out`.
fn compress(program: &str, args: &[&str], plain: &Path, out: &Path) {
    let st = Command::new(program)
        .args(args)
        .stdin(std::fs::File::open(plain).expect("open"))
        .stdout(std::fs::File::create(out).expect("create"))
        .status()
        .expect(program);
    // compress exits 2 when the output is no smaller; it still wrote it.
    assert!(st.success() || program == "compress", "{program}: {st}");
}

fn all_installed() -> bool {
    !TOOLS.iter().any(|(p, _)| missing(p)) && !missing("tar")
}

#[test]
fn lz4_lzma_lzip_compress_and_lzop_archives_read_whatever_their_name() {
    if !all_installed() {
        return;
    }
    let s = scratch();
    trees::mixed(&s.src);
    let plain = s.tmp.path().join("a.tar");
    pack(&s.src, &plain, &[]);
    let listing = ferry(&[&"ls", &plain]);
    listing.assert_ok();
    let first = listing
        .stdout
        .lines()
        .find(|l| !l.ends_with('/'))
        .expect("a file");
    let want_cat = ferry(&[&"cat", &plain, &first]);
    want_cat.assert_ok();
    for (program, args) in TOOLS {
        // A name that says nothing, or lies: the magic decides.
        let packed = s.tmp.path().join(format!("{program}.tar.gz"));
        compress(program, args, &plain, &packed);
        let dst = s.tmp.path().join(format!("out-{program}-{}", args[0]));
        ferry(&[&"unpack", &packed, &dst]).assert_ok();
        assert_same_tree(&s.src, &dst);
        assert_eq!(ferry(&[&"ls", &packed]).stdout, listing.stdout, "{program}");
        let cat = ferry(&[&"cat", &packed, &first]);
        cat.assert_ok();
        assert_eq!(cat.stdout, want_cat.stdout, "{program}");
        let dst = s.tmp.path().join(format!("stdin-{program}"));
        let out = Command::new(FERRY)
            .arg("unpack")
            .arg("-")
            .arg(&dst)
            .stdin(std::fs::File::open(&packed).expect("open"))
            .output()
            .expect("ferry");
        assert!(out.status.success(), "{program}: {out:?}");
        assert_same_tree(&s.src, &dst);
        let cache = s.tmp.path().join("cache");
        let r = crate::common::run::run({
            let mut c = Command::new(FERRY);
            c.arg("index").arg(&packed).env("XDG_CACHE_HOME", &cache);
            c
        });
        r.assert_ok();
    }
}

/// The exit status of `program` (with the `--format` of `args`, if any) decompressing
/// `archive` to nowhere.
fn decompressor_status(program: &str, args: &[&str], archive: &Path) -> i32 {
    let format = args.iter().filter(|a| a.starts_with("--format"));
    Command::new(program)
        .args(format)
        .arg("-dc")
        .stdin(std::fs::File::open(archive).expect("open"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect(program)
        .code()
        .unwrap_or(-1)
}

#[test]
fn trailing_garbage_after_compressed_data_is_told_with_the_decompressors_status() {
    if !all_installed() || missing("bzip2") {
        return;
    }
    let s = scratch();
    trees::mixed(&s.src);
    let plain = s.tmp.path().join("a.tar");
    pack(&s.src, &plain, &[]);
    // compress has no end mark (what follows is read as codes); lz4 is not read by GNU
    // tar 1.34 and is read as bsdtar does (a warning, status 0).
    let tools: Vec<(&str, &[&str])> = TOOLS
        .iter()
        .copied()
        .filter(|(p, _)| *p != "compress")
        .chain([
            ("bzip2", &["-c"][..]),
            ("xz", &["-c"][..]),
            ("gzip", &["-c"][..]),
            ("zstd", &["-q", "-c"][..]),
        ])
        .collect();
    for (program, args) in tools {
        let packed: PathBuf = s.tmp.path().join(format!("{program}-{}-garbage", args[0]));
        compress(program, args, &plain, &packed);
        let mut bytes = std::fs::read(&packed).expect("read");
        bytes.extend_from_slice(b"garbage here\n");
        std::fs::write(&packed, &bytes).expect("write");
        let dst = s.tmp.path().join(format!("out-{program}-{}", args[0]));
        let r = ferry(&[&"unpack", &packed, &dst]);
        assert_same_tree(&s.src, &dst);
        assert!(r.stderr.contains("trailing garbage"), "{program}: {r}");
        // GNU tar's status is its decompressor's, when that reaches the garbage before
        // tar, done at the archive's end, closes the pipe (a decompressor killed by it
        // is not counted: after xz data it went both ways on one archive). So the
        // decompressor's own status, which reads it all, is what ferry follows; lz4,
        // which GNU tar 1.34 does not read, is read as bsdtar does, which succeeds.
        let tool = match program {
            "lz4" => 0,
            _ => decompressor_status(program, args, &packed),
        };
        assert_eq!(
            r.status == 0,
            tool == 0,
            "{program} {args:?}: the decompressor {tool}, ferry {r}"
        );
        // index (and so mount) takes the archive.
        let cache = s.tmp.path().join("cache");
        let ix = crate::common::run::run({
            let mut c = Command::new(FERRY);
            c.arg("index").arg(&packed).env("XDG_CACHE_HOME", &cache);
            c
        });
        ix.assert_ok();
        assert!(ix.stderr.contains("trailing garbage"), "{program}: {ix}");
    }
}
