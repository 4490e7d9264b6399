//! `pack` with `--exclude`, `--include` and their files: the archive holds what
//! `rsync -a` takes with the same rules (the archive unpacked and compared with rsync's
//! copy); an excluded directory is never read.

use crate::common::build::*;
use crate::common::compare::{assert_same_tree_with, Options};
use crate::common::filters::{rsync, rule_sets, tree};
use crate::common::nobody::{ferry_unprivileged, give_to_nobody, scratch_for_nobody};
use crate::common::{is_root, scratch};
use crate::ferry;
use std::ffi::OsString;

#[test]
fn each_set_of_rules_packs_what_rsync_takes() {
    let s = scratch();
    tree(&s.src);
    // rsync keeps atimes to the second only: everything else is compared.
    let opts = Options {
        skip_atime: true,
        ..Options::default()
    };
    let mut sets = rule_sets();
    let rules = s.tmp.path().join("rules");
    write(&rules, b"# from a file\n+ keep.o\n*.o\n");
    sets.push(vec!["--exclude-from".into(), rules.into()]);
    for (i, rules) in sets.into_iter().enumerate() {
        let theirs = s.tmp.path().join(format!("r{i}"));
        let (archive, ours) = (
            s.tmp.path().join(format!("a{i}.far")),
            s.tmp.path().join(format!("f{i}")),
        );
        if !rsync(&rules, &s.src, &theirs) {
            return;
        }
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"pack"];
        args.extend(rules.iter().map(|r| r as &dyn AsRef<std::ffi::OsStr>));
        args.extend([&s.src as &dyn AsRef<std::ffi::OsStr>, &archive]);
        ferry(&args).assert_ok();
        ferry(&[&"unpack", &archive, &ours]).assert_ok();
        assert_same_tree_with(&theirs, &ours, &opts);
    }
}

/// An excluded directory is not opened: one that may not be read, or that holds one
/// that may not be read, is no error, and is not in the archive.
#[test]
fn an_excluded_directory_is_not_read() {
    let (s, out) = scratch_for_nobody();
    tree(&s.src);
    mkdirs(&s.src.join("private/closed"));
    mkdirs(&s.src.join("locked/inner"));
    if is_root() {
        give_to_nobody(&s.src);
    }
    chmod(&s.src.join("private/closed"), 0o000);
    chmod(&s.src.join("locked"), 0o000);
    let archive = out.with_extension("far");
    let args: Vec<OsString> = vec![
        "pack".into(),
        "--exclude".into(),
        "/private".into(),
        "--exclude".into(),
        "locked/".into(),
        s.src.clone().into(),
        archive.clone().into(),
    ];
    let Some(r) = ferry_unprivileged(&args) else {
        return;
    };
    r.assert_ok();
    let listed = ferry(&[&"ls", &archive]);
    listed.assert_ok();
    for gone in ["private", "locked"] {
        assert!(
            !listed.stdout.lines().any(|l| l.starts_with(gone)),
            "{gone} was packed: {listed}"
        );
    }
    assert!(listed.stdout.contains("src/a.c"), "{listed}");
}
