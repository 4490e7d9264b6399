//! End-to-end tests of `ferry mount`, `umount` and `index`: real FUSE mounts (fuse3's
//! fusermount3 and /dev/fuse), compared with the tree that was packed, field by field
//! and byte by byte, by the tests' tree comparer.
//!
//! One test binary: `cargo test --profile ci --test mount`. Without /dev/fuse or
//! fusermount3 the tests say why they skip (a failure under FERRY_TEST_NO_SKIP=1, as
//! in CI).

#[path = "../common/mod.rs"]
#[allow(unused_imports)]
mod common;

mod corpus;
mod crafted;
mod fuzz_table;
mod hostile;
mod kernel;
mod lifecycle;
mod privilege;
mod shown;
mod trees;
mod umount;

use common::fuse_here;
use common::mounted::Mounted;
use common::run::{run, Run, FERRY};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Runs `ferry ARGS..` with the cache in `cache`.
fn ferry(cache: &Path, args: &[&dyn AsRef<std::ffi::OsStr>]) -> Run {
    let mut cmd = Command::new(FERRY);
    cmd.env("XDG_CACHE_HOME", cache);
    for a in args {
        cmd.arg(a);
    }
    run(cmd)
}

impl Mounted {
    /// Mounts `archive` on `at` (made if missing) with `ferry mount`, which must succeed.
    fn new(cache: &Path, archive: &Path, at: &Path) -> Mounted {
        Mounted::made_by(at, || ferry(cache, &[&"mount", &archive, &at]))
    }
}

/// Whether a filesystem is mounted at `at`.
fn is_mounted(at: &Path) -> bool {
    ferry_mount::session::is_mounted(at)
}

/// Waits (up to 10 s) until `cond` holds.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Makes `archive` of the tree `src` with GNU tar and `args`.
fn gnu_tar(src: &Path, archive: &Path, args: &[&str]) {
    must(
        Command::new("tar")
            .args(args)
            .arg("-C")
            .arg(src)
            .arg("-cf")
            .arg(archive)
            .arg("."),
    );
}

/// Packs `src` into `archive` with ferry, the cache in `cache`.
fn pack(cache: &Path, src: &Path, archive: &Path) {
    ferry(cache, &[&"pack", &"--no-progress", &src, &archive]).assert_ok();
}

/// As [`pack`], the index stored plain (`--plain-index`), for tests that edit its
/// tree table in place.
fn pack_plain_index(cache: &Path, src: &Path, archive: &Path) {
    let args: [&dyn AsRef<std::ffi::OsStr>; 5] =
        [&"pack", &"--no-progress", &"--plain-index", &src, &archive];
    ferry(cache, &args).assert_ok();
}

/// Where FUSE mounts can be made: a scratch tree holding `f` ("x") packed by ferry
/// into `t.far`, with the archive's path and the cache to use.
fn packed_one_file() -> Option<(common::Scratch, PathBuf, PathBuf)> {
    if !fuse_here() {
        return None;
    }
    let s = common::scratch();
    common::build::write(&s.src.join("f"), b"x");
    let archive = s.tmp.path().join("t.far");
    let cache = s.tmp.path().join("cache");
    pack(&cache, &s.src, &archive);
    Some((s, archive, cache))
}

/// The tests' tree with every kind of entry ([`common::trees::mixed`]) and odd names
/// below `odd/`.
fn every_kind_and_odd_names(root: &Path) {
    common::trees::mixed(root);
    common::build::mkdirs(&root.join("odd"));
    common::trees::odd_names(&root.join("odd"));
}

/// Runs a command that must succeed.
fn must(cmd: &mut Command) -> std::process::Output {
    let shown = format!("{cmd:?}");
    let out = cmd.output().unwrap_or_else(|e| panic!("{shown}: {e}"));
    assert!(
        out.status.success(),
        "{shown}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
