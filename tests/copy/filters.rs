//! `--exclude`, `--include`, `--exclude-from`, `--include-from`: what `ferry copy`
//! takes is what `rsync -a` takes with the same rules (both run on the same tree and
//! the results compared in every respect); an excluded directory is never read; a rule
//! that cannot be used stops the copy before it starts, naming it.

use crate::common::build::*;
use crate::common::compare::{assert_same_tree_with, Options};
use crate::common::filters::{rsync, rule_sets, tree};
use crate::common::nobody::{ferry_unprivileged, give_to_nobody, scratch_for_nobody};
use crate::common::run::{run, Run, FERRY};
use crate::common::{is_root, scratch};
use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;

/// `ferry copy ARGS SRC DST`.
fn ferry_copy(args: &[OsString], src: &Path, dst: &Path) -> Run {
    let mut cmd = std::process::Command::new(FERRY);
    cmd.arg("copy").args(args).arg(src).arg(dst);
    run(cmd)
}

/// rsync keeps atimes to the second only: everything else is compared.
fn same_as_rsync(theirs: &Path, ours: &Path) {
    let opts = Options {
        skip_atime: true,
        ..Options::default()
    };
    assert_same_tree_with(theirs, ours, &opts);
}

#[test]
fn each_set_of_rules_takes_what_rsync_takes() {
    let s = scratch();
    tree(&s.src);
    for (i, rules) in rule_sets().into_iter().enumerate() {
        let (theirs, ours) = (
            s.tmp.path().join(format!("r{i}")),
            s.tmp.path().join(format!("f{i}")),
        );
        if !rsync(&rules, &s.src, &theirs) {
            return;
        }
        ferry_copy(&rules, &s.src, &ours).assert_ok();
        same_as_rsync(&theirs, &ours);
    }
}

/// Rules read from files, with comments, blank lines, `+ ` and `- ` lines, mixed
/// with rules on the command line in their order, and from standard input.
#[test]
fn rules_from_files_are_read_as_rsync_reads_them() {
    let s = scratch();
    tree(&s.src);
    let rules = s.tmp.path().join("rules");
    write(
        &rules,
        b"# comment\n; another\n\n+ keep.o\n*.o\r\n- /docs/a/\n",
    );
    let keep = s.tmp.path().join("keep");
    write(&keep, b"lib/\n- cache/\n");
    let args: Vec<OsString> = vec![
        "--exclude-from".into(),
        rules.clone().into(),
        "--include-from".into(),
        keep.into(),
        "--exclude".into(),
        "lib/**".into(),
    ];
    let (theirs, ours) = (s.tmp.path().join("r"), s.tmp.path().join("f"));
    if !rsync(&args, &s.src, &theirs) {
        return;
    }
    ferry_copy(&args, &s.src, &ours).assert_ok();
    same_as_rsync(&theirs, &ours);

    let piped = s.tmp.path().join("piped");
    let mut cmd = std::process::Command::new(FERRY);
    cmd.args(["copy", "--exclude-from", "-"])
        .arg(&s.src)
        .arg(&piped);
    cmd.stdin(std::fs::File::open(&rules).expect("open rules"));
    run(cmd).assert_ok();
    let alone = s.tmp.path().join("alone");
    rsync(&["--exclude-from".into(), rules.into()], &s.src, &alone);
    same_as_rsync(&alone, &piped);
}

/// An excluded directory is not opened: one that may not be read, or that holds one
/// that may not be read, is no error (as rsync never reads it either).
#[test]
fn an_excluded_directory_is_not_read() {
    let (s, dst) = scratch_for_nobody();
    tree(&s.src);
    mkdirs(&s.src.join("private/closed"));
    write(&s.src.join("private/closed/f"), b"out of reach");
    mkdirs(&s.src.join("locked/inner"));
    if is_root() {
        give_to_nobody(&s.src);
    }
    chmod(&s.src.join("private/closed"), 0o000);
    chmod(&s.src.join("locked"), 0o000);
    let args = [
        "copy",
        "--json",
        "--exclude",
        "/private",
        "--exclude",
        "locked/",
    ];
    let mut all: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
    all.extend([s.src.as_os_str(), dst.as_os_str()]);
    let Some(r) = ferry_unprivileged(&all) else {
        return;
    };
    r.assert_ok();
    r.json().assert_counts(&[("errors", 0)]);
    for gone in ["private", "locked"] {
        assert!(!dst.join(gone).exists(), "{gone} was copied: {r}");
    }
    assert!(dst.join("src/a.c").exists(), "the rest was not copied: {r}");
}

/// A pattern that cannot be used, or a rules file that cannot be read, stops the copy
/// before anything is made (exit status 2), with one line naming it.
#[test]
fn a_rule_that_cannot_be_used_is_refused_naming_it() {
    let s = scratch();
    tree(&s.src);
    let missing = s.tmp.path().join("no-such-rules");
    let not_utf8 = <OsString as std::os::unix::ffi::OsStringExt>::from_vec(b"x\xff*".to_vec());
    let cases: Vec<(Vec<OsString>, &str)> = vec![
        (vec!["--exclude".into(), "[unclosed".into()], "[unclosed"),
        (vec!["--include".into(), not_utf8], "\\xFF"),
        (
            vec!["--exclude-from".into(), missing.clone().into()],
            "no-such-rules",
        ),
    ];
    for (args, named) in cases {
        let mut cmd = std::process::Command::new(FERRY);
        cmd.arg("copy")
            .arg("--json")
            .args(&args)
            .arg(&s.src)
            .arg(&s.dst);
        cmd.stdin(Stdio::null());
        let r = run(cmd);
        r.assert_status(2);
        let errors = r.errors();
        assert_eq!(errors.len(), 1, "{r}");
        assert!(
            errors[0].contains(named),
            "the line should name {named}: {r}"
        );
        r.json().assert_counts(&[("errors", 1)]);
        assert!(!s.dst.exists(), "DST was made: {r}");
    }
}
