//! Trees far deeper than the limit on open files allows directories to be held open:
//! a walk must let go of a directory's descriptors while its subtree is walked and open
//! it again to finish it, as `cp -a` and GNU tar manage.

use crate::common::compare::assert_same_tree;
use crate::common::run::{run, with_open_file_limit};
use crate::common::{scratch, skip, trees};
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
use std::ffi::OsStr;

/// Levels in the chain: two descriptors a level (source and destination) held to the
/// bottom need 4,000, four times the limit ferry runs under here.
const LEVELS: usize = 2000;

/// The limit on open files (soft and hard) ferry runs under: a common hard limit in
/// containers.
const LIMIT: u32 = 1024;

/// Descriptors this process needs to build and compare the trees: two a level, with
/// room to spare.
const OWN_DESCRIPTORS: u64 = 3 * LEVELS as u64;

/// Runs `f` on a thread with a stack deep enough for the test helpers, which recurse
/// once per level.
fn with_deep_stack(f: impl FnOnce() + Send) {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn_scoped(s, f)
            .expect("spawn a thread")
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    });
}

/// Raises this process's soft limit on open files to what building and comparing the
/// trees needs; false (after saying why) when the hard limit is too low for it.
fn enough_descriptors_here() -> bool {
    let limit = getrlimit(Resource::Nofile);
    if limit.current.is_some_and(|n| n >= OWN_DESCRIPTORS) {
        return true;
    }
    if limit.maximum.is_some_and(|n| n < OWN_DESCRIPTORS) {
        skip("the test itself needs 6,000 open files to compare the trees");
        return false;
    }
    let raised = Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    setrlimit(Resource::Nofile, raised).expect("raise the soft limit on open files");
    true
}

/// Runs `ferry ARGS..` under the limit and checks that it succeeded without an error.
fn ferry_within_limit(args: &[&OsStr]) {
    run(with_open_file_limit(LIMIT, args)).assert_ok();
}

#[test]
fn a_tree_2000_directories_deep_is_copied_packed_and_unpacked_within_1024_open_files() {
    // Each directory's source and destination descriptors stayed open until its whole
    // subtree was done: under a hard limit of 1,024, copy and pack failed with "Too
    // many open files" about 500 levels down and left the rest of the tree out. Closing
    // only directories whose subdirectories had all been entered was not enough: the
    // `side` directory waiting at every level held its parent open, and `pack` (one
    // walker) failed the same way.
    if !enough_descriptors_here() {
        return;
    }
    with_deep_stack(|| {
        let s = scratch();
        trees::chain(&s.src, LEVELS);
        let src = s.src.as_os_str();
        for workers in ["1", "16"] {
            let dst = s.tmp.path().join(format!("copied-{workers}"));
            ferry_within_limit(&[
                "copy".as_ref(),
                "-j".as_ref(),
                workers.as_ref(),
                src,
                dst.as_ref(),
            ]);
            assert_same_tree(&s.src, &dst);
        }
        for walkers in ["1", "8"] {
            let archive = s.tmp.path().join(format!("{walkers}.far"));
            let unpacked = s.tmp.path().join(format!("unpacked-{walkers}"));
            let (archive, unpacked) = (archive.as_os_str(), unpacked.as_os_str());
            ferry_within_limit(&[
                "pack".as_ref(),
                "-j".as_ref(),
                walkers.as_ref(),
                src,
                archive,
            ]);
            ferry_within_limit(&["unpack".as_ref(), archive, unpacked]);
            assert_same_tree(&s.src, unpacked.as_ref());
        }
    });
}
