//! The command line: what a successful run prints (nothing, unless `--json`), and
//! what ferry refuses with exit status 2 (usage errors, a missing SRC, a directory onto
//! a file, copying a directory into itself), leaving everything as it was.

use crate::common::build::*;
use crate::common::compare::assert_same_tree;
use crate::common::run::{copy, copy_ok, run, with_open_file_limit, FERRY};
use crate::common::{scratch, trees};
use std::path::Path;
use std::process::Command;

#[test]
fn a_successful_run_prints_nothing_when_not_on_a_terminal() {
    let s = scratch();
    trees::mixed(&s.src);
    let r = copy_ok(&s.src, &s.dst, &[]);
    assert!(
        r.stdout.is_empty() && r.stderr.is_empty(),
        "expected silence: {r}"
    );
}

/// Runs `ferry copy src dst` expecting exit status 2, an error line, and no DST.
fn refused(src: &Path, dst: &Path) {
    let existed = dst.exists();
    let r = copy(src, dst, &[]);
    r.assert_status(2);
    assert!(!r.errors().is_empty(), "no error line says why: {r}");
    assert_eq!(dst.exists(), existed, "{} was created: {r}", dst.display());
}

#[test]
fn refuses_to_copy_a_directory_into_itself() {
    let s = scratch();
    let reference = s.tmp.path().join("reference");
    trees::mixed(&s.src);
    trees::mixed(&reference);
    let alias = s.tmp.path().join("alias");
    symlink(&s.src, &alias);

    refused(&s.src, &s.src.join("inside"));
    refused(&s.src, &s.src.join("a/b/new/deeper"));
    refused(&s.src, &s.src);
    refused(&s.src, &s.src.join("a"));
    refused(&s.src, &alias.join("through_a_symlink"));
    refused(&alias, &s.src.join("a/x"));
    assert_same_tree(&reference, &s.src);
}

#[test]
fn usage_and_fatal_errors_exit_2() {
    let s = scratch();
    let missing = s.tmp.path().join("missing");
    refused(&missing, &s.dst);
    let dst_file = s.tmp.path().join("dst_file");
    write(&dst_file, b"a file where DST should be a directory");
    refused(&s.src, &dst_file);
    for args in [
        &["copy"][..],
        &["copy", "--reflink=sometimes", "a", "b"],
        &["copy", "--jobs", "many", "a", "b"],
        &["no-such-command"],
    ] {
        let mut cmd = Command::new(FERRY);
        cmd.args(args);
        run(cmd).assert_status(2);
    }
}

#[test]
fn a_closed_stderr_does_not_turn_an_error_into_a_crash() {
    // As in `ferry copy ... 2>&1 | head -1`: the reader of stderr is gone before ferry
    // reports. The error still ends the run with status 2, not a panic's 101.
    let s = scratch();
    let missing = s.tmp.path().join("missing");
    let (reader, writer) = rustix::pipe::pipe().expect("pipe");
    drop(reader);
    let status = Command::new(FERRY)
        .arg("copy")
        .arg(&missing)
        .arg(&s.dst)
        .stderr(std::process::Stdio::from(writer))
        .status()
        .expect("run ferry");
    assert_eq!(status.code(), Some(2));
}

#[test]
fn copies_within_a_low_limit_on_open_files() {
    // Each worker keeps its chain of source and destination directories open: under
    // `ulimit -n 64` (a hard limit ferry cannot raise) 16 workers, and even 4, ran out
    // of descriptors on a tree 10 deep. ferry now runs fewer workers and says so.
    let s = scratch();
    trees::deep(&s.src);
    let (src, dst) = (s.src.as_os_str(), s.dst.as_os_str());
    let r = run(with_open_file_limit(
        64,
        &["copy".as_ref(), "-j".as_ref(), "16".as_ref(), src, dst],
    ));
    r.assert_ok();
    assert!(
        r.stderr.contains("limit on open files is 64"),
        "{}",
        r.stderr
    );
    assert_same_tree(&s.src, &s.dst);
}
