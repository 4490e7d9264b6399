//! Filter rules (`--exclude`, `--include`...) checked against rsync: a tree with
//! something for every rule to take or leave, the sets of rules to try, and rsync run
//! on the same tree with the same rules, to compare what it keeps with what ferry
//! keeps.

use super::build::*;
use super::skip;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::process::Command;

/// A tree for filter rules: `build/` at the top and `docs/build` below, `src/*.o` and
/// `src/sub/*.o` and `lib/src/*.o`, a directory `cache/` and a file `x/cache`,
/// `docs/a/b/c/deep.md` and `docs/a/c`, `keep.o`, names that are not UTF-8 (a file
/// and a directory), a literal `a{b,c}`, `.git/`, a symlink, a hardlink and a fifo.
/// Times are stamped last.
pub fn tree(root: &Path) {
    let files: &[&[u8]] = &[
        b"build/out.bin",
        b"build/sub/x.o",
        b"docs/build",
        b"src/a.o",
        b"src/a.c",
        b"src/sub/b.o",
        b"src/sub/b.c",
        b"lib/src/c.o",
        b"lib/src/c.c",
        b"cache/entry",
        b"x/cache",
        b"docs/a/b/c/deep.md",
        b"docs/a/c",
        b"keep.o",
        b"name\xff.bin",
        b"dir\xfe/inner.o",
        b"dir\xfe/inner.c",
        b"a{b,c}",
        b".git/config",
        b"tmp~",
        b"sp ace.txt",
    ];
    for (i, f) in files.iter().enumerate() {
        let path = root.join(OsStr::from_bytes(f));
        if let Some(parent) = path.parent() {
            mkdirs(parent);
        }
        write(&path, &pattern(i as u64, 10 + i * 100));
    }
    mkdirs(&root.join("emptydir"));
    symlink("src", &root.join("lnk"));
    hardlink(&root.join("src/a.c"), &root.join("lib/a_twin.c"));
    fifo(&root.join("lib/fifo"));
    stamp_times(root);
}

/// The sets of rules tried, each on its own: anchoring, any depth, a trailing `/`,
/// `**`, first match wins in either order, names that are not UTF-8, braces taken
/// literally, `dir/***`.
pub fn rule_sets() -> Vec<Vec<OsString>> {
    let sets: &[&[&[u8]]] = &[
        &[b"--exclude", b"/build"],
        &[b"--exclude", b"build"],
        &[b"--exclude", b"cache/"],
        &[b"--exclude", b"src/*.o"],
        &[b"--exclude", b"docs/**/c"],
        &[b"--exclude", b"**/*.o"],
        &[b"--exclude", b"a**c"],
        &[b"--include", b"keep.o", b"--exclude", b"*.o"],
        &[b"--exclude", b"*.o", b"--include", b"keep.o"],
        &[
            b"--include",
            b"*/",
            b"--include",
            b"*.c",
            b"--exclude",
            b"*",
        ],
        &[b"--exclude", b"name?.bin", b"--exclude", b"dir?/"],
        &[b"--exclude", b"*[!a-z.]*"],
        &[b"--exclude", b"a{b,c}", b"--exclude", b".git"],
        &[b"--include", b"/docs/***", b"--exclude", b"*"],
        &[
            b"--exclude",
            b"- lnk",
            b"--include",
            b"+ x/",
            b"--exclude",
            b"x/*",
        ],
    ];
    sets.iter()
        .map(|set| set.iter().map(|a| OsString::from_vec(a.to_vec())).collect())
        .collect()
}

/// Copies `src` into `dst` with `rsync -aHUX --open-noatime ARGS SRC/ DST/`, which
/// must succeed. False (after saying why) when rsync is not installed.
pub fn rsync(args: &[OsString], src: &Path, dst: &Path) -> bool {
    if Command::new("rsync").arg("--version").output().is_err() {
        skip("rsync is not installed (scripts/test.sh installs it)");
        return false;
    }
    let slash = |p: &Path| {
        let mut s = p.as_os_str().to_owned();
        s.push("/");
        s
    };
    let out = Command::new("rsync")
        .args(["-aHUX", "--open-noatime"])
        .args(args)
        .arg(slash(src))
        .arg(slash(dst))
        .output()
        .expect("run rsync");
    assert!(
        out.status.success(),
        "rsync {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    true
}
