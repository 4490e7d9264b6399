//! Helpers shared by ferry's end-to-end tests: making trees, walking them by directory
//! fd (so paths longer than PATH_MAX work), comparing two trees field by field, running
//! the `ferry` binary, loop-mounting scratch filesystems, and random rounds of changes
//! to mirror.

#![allow(dead_code)] // shared by several test binaries, each using a part

pub mod build;
pub mod changing;
pub mod compare;
pub mod corpus;
pub mod corpus_check;
pub mod fdwalk;
pub mod filters;
pub mod mounted;
pub mod nobody;
pub mod rounds;
pub mod rounds_check;
pub mod rounds_known;
pub mod rounds_listing;
pub mod rounds_tree;
pub mod run;
pub mod trees;

pub use ferry_testkit::{extents, is_root, mount, skip, skip_unless_root};

/// Whether FUSE mounts can be made here (/dev/fuse and fuse3's fusermount3); if not,
/// says why the test skips (a failure under FERRY_TEST_NO_SKIP=1).
pub fn fuse_here() -> bool {
    if !std::path::Path::new("/dev/fuse").exists() {
        skip("no /dev/fuse");
        return false;
    }
    if std::process::Command::new("fusermount3")
        .arg("-V")
        .output()
        .is_err()
    {
        skip("no fusermount3 (Debian package fuse3)");
        return false;
    }
    true
}

/// A fresh temporary directory holding `src/` (created) and the path `dst` (not created).
pub struct Scratch {
    pub tmp: tempfile::TempDir,
    pub src: std::path::PathBuf,
    pub dst: std::path::PathBuf,
}

impl Drop for Scratch {
    /// Without root, entries in a 0500 or 000 directory cannot be removed: open every
    /// directory up first so the temp dir goes away.
    fn drop(&mut self) {
        if !is_root() {
            build::make_removable(self.tmp.path());
        }
    }
}

/// A new [`Scratch`] in the system temp dir.
pub fn scratch() -> Scratch {
    scratch_in(&std::env::temp_dir())
}

/// A new [`Scratch`] inside `dir` (e.g. on a mounted test filesystem).
pub fn scratch_in(dir: &std::path::Path) -> Scratch {
    let tmp = tempfile::tempdir_in(dir).expect("make a temp dir");
    let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
    build::mkdirs(&src);
    Scratch { tmp, src, dst }
}

/// Copies `s.src` into `s.dst` with `--json` and `args`, and checks that the run
/// succeeded, that DST equals SRC in every respect, and that the summary counts what
/// the tree holds (nothing skipped, no errors). Returns the summary.
pub fn copy_exact(s: &Scratch, args: &[&str]) -> run::Summary {
    let expected = trees::count(&s.src);
    let args: Vec<&str> = ["--json"].iter().chain(args).copied().collect();
    let r = run::copy_ok(&s.src, &s.dst, &args);
    compare::assert_same_tree(&s.src, &s.dst);
    let summary = r.json();
    summary.assert_counts(&[
        ("files", expected.files),
        ("dirs", expected.dirs),
        ("others", expected.others),
        ("bytes", expected.bytes),
        ("skipped", 0),
        ("errors", 0),
    ]);
    let seconds = summary.0.get("seconds").and_then(|v| v.as_f64());
    assert!(
        seconds.is_some_and(|t| t >= 0.0),
        "no seconds in the summary: {}",
        summary.0
    );
    summary
}
