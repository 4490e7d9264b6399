//! End-to-end tests of `ferry pack`, `unpack`, `ls` and `cat`: ferry's archives read by
//! the real GNU tar and bsdtar, theirs read by ferry, hostile archives, and cloning in
//! and out on XFS. One test binary: `cargo test --profile ci --test archive`.

#[path = "../common/mod.rs"]
mod common;

mod changed;
mod codecs;
mod commands;
mod corpus;
#[path = "../../crates/ferry-archive/tests/tar/craft.rs"]
#[allow(dead_code)]
mod craft;
mod cut;
mod damage;
mod edit;
mod errors;
mod exclude_vcs;
mod files_from;
mod filters;
mod flags;
mod gzip;
mod hostile;
mod interop;
mod json;
mod order;
mod pack_compressed;
mod packed_index;
mod parallel;
mod peers;
mod reflink;
mod reproducible;
mod select;
mod sparse_claims;
mod sparse_maps;
mod streams;
mod times_in_index;
mod zstd;
mod zstd_memory;

use common::run::{run, Run, FERRY};
use std::path::Path;
use std::process::Command;

/// An archive made by ferry before its index kept owner names (index version 1): `d/`
/// (0750, nobody:root), `d/twin` (nobody:root, "made by ferry with index version 1\n"),
/// `d/f` a hardlink to it, `d/link` a symlink to `f`; every mtime 2020-01-02
/// 03:04:05.123456789 UTC.
const INDEX_V1_ARCHIVE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/index-v1.far");

/// The command `ferry ARGS..`.
fn ferry_command(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Command {
    let mut cmd = Command::new(FERRY);
    for a in args {
        cmd.arg(a);
    }
    cmd
}

/// Runs `ferry ARGS..`.
fn ferry(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Run {
    run(ferry_command(args))
}

/// Runs `ferry ARGS..` with the file `input` on standard input (`unpack -`, `cat -`:
/// an archive read as a stream).
fn ferry_stdin(args: &[&dyn AsRef<std::ffi::OsStr>], input: &std::path::Path) -> Run {
    let mut cmd = ferry_command(args);
    cmd.stdin(std::fs::File::open(input).expect("open the input"));
    run(cmd)
}

/// Runs a peer program, which must succeed and print nothing on stderr (a warning is a
/// failure: GNU tar and bsdtar must read ferry's archives silently).
fn peer(program: &str, args: &[&dyn AsRef<std::ffi::OsStr>]) {
    let mut cmd = Command::new(program);
    for a in args {
        cmd.arg(a);
    }
    let shown = format!("{cmd:?}");
    let out = cmd.output().unwrap_or_else(|e| panic!("{shown}: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.is_empty(),
        "{shown}: status {:?}, stderr:\n{stderr}",
        out.status
    );
}

/// True (after saying why) when `program` is not installed.
fn missing(program: &str) -> bool {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        common::skip(&format!("{program} is not installed"));
    }
    !found
}

/// Packs the `names` of `dir` into `archive` with GNU tar and `flags` (`tar FLAGS -cf
/// ARCHIVE -C DIR NAMES..`), which must succeed.
fn gnu_pack(flags: &[&str], archive: &Path, dir: &Path, names: &[&str]) {
    let made = Command::new("tar")
        .args(flags)
        .arg("-cf")
        .arg(archive)
        .arg("-C")
        .arg(dir)
        .args(names)
        .status()
        .expect("tar");
    assert!(made.success(), "tar {flags:?} -cf {}", archive.display());
}

/// Packs `src` into `archive` with ferry, which must succeed.
fn pack(src: &Path, archive: &Path, args: &[&str]) -> Run {
    let mut all: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"pack"];
    for a in args {
        all.push(a);
    }
    all.push(&src);
    all.push(&archive);
    let r = ferry(&all);
    r.assert_ok();
    r
}

/// Packs `s.src` into `s.tmp/NAME` and unpacks that into `s.dst`, both of which must
/// succeed; returns the archive's path. The times go in pax headers (`--pax-times`),
/// so the peers' extractions of it compare to the nanosecond too.
fn pack_and_unpack(s: &common::Scratch, name: &str) -> std::path::PathBuf {
    let archive = s.tmp.path().join(name);
    pack(&s.src, &archive, &["--pax-times"]);
    ferry(&[&"unpack", &archive, &s.dst]).assert_ok();
    archive
}
