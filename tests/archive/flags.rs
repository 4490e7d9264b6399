//! The everyday flags of `ferry pack` (issue 25): `-C DIR`, several SRCs and
//! `-x/--one-file-system`.

use crate::common::build::*;
use crate::common::scratch;
use crate::ferry;
use std::process::Command;

use crate::commands::members as listed;

#[test]
fn pack_dash_c_finds_src_in_dir_as_tar_c_does() {
    let s = scratch();
    mkdirs(&s.src.join("sub/d"));
    write(&s.src.join("sub/f"), b"f");
    write(&s.src.join("sub/d/g"), b"g");
    let (by_c, by_path) = (s.tmp.path().join("c.far"), s.tmp.path().join("p.far"));
    ferry(&[&"pack", &"-C", &s.src, &"sub", &by_c]).assert_ok();
    ferry(&[&"pack", &s.src.join("sub"), &by_path]).assert_ok();
    assert_eq!(listed(&by_c), listed(&by_path));
    assert_eq!(listed(&by_c), ["./", "d/", "d/g", "f"]);
    let r = ferry(&[
        &"pack",
        &"-C",
        &s.src,
        &"missing",
        &s.tmp.path().join("m.far"),
    ]);
    r.assert_status(2);
    assert!(r.stderr.contains("missing"), "{r}");
}

/// `ferry pack a b f A` puts each SRC under its own name as `tar -cf A a b f` does
/// (with `-C`, and from different directories): ls lists what GNU tar lists, ferry
/// and GNU tar unpack the trees (a hardlink inside one kept), to a file or compressed;
/// two SRCs of the same name, or one without a name, are refused before anything is
/// written.
#[test]
fn pack_of_several_srcs_puts_each_under_its_name_as_tar_does() {
    let s = scratch();
    mkdirs(&s.src.join("one/a/deep"));
    write(&s.src.join("one/a/deep/f"), b"f");
    hardlink(&s.src.join("one/a/deep/f"), &s.src.join("one/a/h"));
    mkdirs(&s.src.join("two/b"));
    write(&s.src.join("two/b/g"), b"g");
    write(&s.src.join("one/single"), b"single");
    crate::common::build::stamp_times(&s.src);
    for name in ["s.far", "s.tar.zst"] {
        let archive = s.tmp.path().join(name);
        // GNU tar's extraction is compared to the nanosecond: times in pax headers.
        ferry(&[
            &"pack",
            &"--pax-times",
            &"-C",
            &s.src.join("one"),
            &"a",
            &"../two/b",
            &"single",
            &archive,
        ])
        .assert_ok();
        let mut tar_names: Vec<String> = gnu_tar(&[&"--auto-compress", &"-tf", &archive])
            .lines()
            .map(str::to_owned)
            .collect();
        tar_names.sort();
        assert_eq!(listed(&archive), tar_names, "{name}");
        assert_eq!(
            listed(&archive),
            ["a/", "a/deep/", "a/deep/f", "a/h", "b/", "b/g", "single"],
            "{name}"
        );
        for (who, dst) in [
            ("ferry", s.tmp.path().join("f")),
            ("tar", s.tmp.path().join("t")),
        ] {
            match who {
                "ferry" => ferry(&[&"unpack", &archive, &dst]).assert_ok(),
                _ => {
                    mkdirs(&dst);
                    gnu_tar(&[&"-C", &dst, &"--auto-compress", &"-xf", &archive]);
                }
            }
            // GNU tar leaves the access times as extraction made them.
            let opts = crate::common::compare::Options {
                skip_atime: who == "tar",
                ..Default::default()
            };
            for top in ["one/a", "two/b"] {
                let dst_top = dst.join(&top[4..]);
                crate::common::compare::assert_same_tree_with(&s.src.join(top), &dst_top, &opts);
            }
            assert_eq!(std::fs::read(dst.join("single")).expect("read"), b"single");
            std::fs::remove_dir_all(&dst).expect("clean");
        }
    }
    let refused = s.tmp.path().join("r.far");
    for srcs in [["one/a", "two/a"], ["one", "."]] {
        std::fs::create_dir_all(s.src.join("two/a")).expect("mkdir");
        let r = ferry(&[&"pack", &"-C", &s.src, &srcs[0], &srcs[1], &refused]);
        r.assert_status(2);
        assert!(r.stderr.contains(srcs[1]), "{r}");
        assert!(!refused.exists(), "nothing written: {r}");
    }
}

#[test]
fn pack_one_file_system_leaves_a_mount_point_empty_as_gnu_tar_does() {
    let s = scratch();
    let Some(_bound) = crate::common::trees::with_a_mount_point(&s.src) else {
        return;
    };
    let (ours, theirs) = (s.tmp.path().join("x.far"), s.tmp.path().join("x.tar"));
    ferry(&[&"pack", &"-x", &s.src, &ours]).assert_ok();
    gnu_tar(&[&"--one-file-system", &"-C", &s.src, &"-cf", &theirs, &"."]);
    let mut tar_names: Vec<String> = gnu_tar(&[&"-tf", &theirs])
        .lines()
        .map(|l| l.strip_prefix("./").unwrap_or(l).to_owned())
        .map(|l| if l.is_empty() { "./".to_owned() } else { l })
        .collect();
    tar_names.sort();
    assert_eq!(listed(&ours), tar_names);
    assert_eq!(listed(&ours), ["./", "mnt/", "top"]);
    let all = s.tmp.path().join("all.far");
    ferry(&[&"pack", &s.src, &all]).assert_ok();
    assert!(listed(&all).contains(&"mnt/inside".to_owned()));
}

/// Runs GNU tar with `args`, which must succeed; returns what it printed.
fn gnu_tar(args: &[&dyn AsRef<std::ffi::OsStr>]) -> String {
    let mut cmd = Command::new("tar");
    for a in args {
        cmd.arg(a);
    }
    let out = cmd.output().expect("run tar");
    assert!(out.status.success(), "{cmd:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Extracts `archive` into a new `dst` with GNU tar and `--strip-components N`.
fn gnu_tar_strip(archive: &std::path::Path, dst: &std::path::Path, n: usize) {
    mkdirs(dst);
    let strip = format!("--strip-components={n}");
    gnu_tar(&[&"-C", &dst, &strip, &"-xf", &archive]);
}

#[test]
fn strip_components_unpacks_what_gnu_tar_does() {
    use crate::common::compare::{assert_same_tree_with, Options};
    let s = scratch();
    mkdirs(&s.src.join("top/d/e"));
    write(&s.src.join("top/d/f"), b"f");
    write(&s.src.join("top/d/e/g"), b"g");
    hardlink(&s.src.join("top/d/f"), &s.src.join("top/d/e/f-link"));
    write(
        &s.src.join("top/shallow"),
        b"left out: nothing below the first component",
    );
    write(&s.src.join("lone"), b"its whole name is stripped");
    symlink("d/f", &s.src.join("top/sym"));
    let far = s.tmp.path().join("a.far");
    // Compared with GNU tar's extraction to the nanosecond: times in pax headers.
    ferry(&[&"pack", &"--pax-times", &s.src, &far]).assert_ok();
    // GNU tar's own archive, its names starting `./`, read as a plain tar.
    let tar = s.tmp.path().join("a.tar");
    gnu_tar(&[&"-C", &s.src, &"-cf", &tar, &"."]);
    let opts = Options {
        skip_atime: true,
        skip_root_meta: true,
        ..Options::default()
    };
    for n in [1, 2] {
        for (name, archive) in [("far", &far), ("tar", &tar)] {
            let theirs = s.tmp.path().join(format!("gnu-{name}-{n}"));
            let ours = s.tmp.path().join(format!("ferry-{name}-{n}"));
            gnu_tar_strip(archive, &theirs, n);
            let strip = n.to_string();
            let r = ferry(&[&"unpack", &"--strip-components", &strip, archive, &ours]);
            r.assert_ok();
            assert_same_tree_with(&theirs, &ours, &opts);
            // Streamed (standard input) as well as through the index.
            let piped = s.tmp.path().join(format!("piped-{name}-{n}"));
            crate::ferry_stdin(
                &[&"unpack", &"--strip-components", &strip, &"-", &piped],
                archive,
            )
            .assert_ok();
            assert_same_tree_with(&theirs, &piped, &opts);
        }
    }
    let one = s.tmp.path().join("one");
    ferry(&[&"unpack", &"--strip-components", &"1", &far, &one]).assert_ok();
    assert_eq!(std::fs::read(one.join("d/e/g")).expect("read"), b"g");
    assert!(
        !one.join("lone").exists(),
        "a member named by one component is skipped"
    );
}

#[test]
fn strip_components_refuses_a_name_that_climbs_out_once_stripped() {
    let s = scratch();
    let tar = s.tmp.path().join("hostile.tar");
    crate::common::run::run_python(
        "import io, sys, tarfile\n\
         with tarfile.open(sys.argv[1], 'w', format=tarfile.PAX_FORMAT) as t:\n\
         \x20   for name in ['a/ok', 'a/../../evil', 'x/y/../../../evil2']:\n\
         \x20       i = tarfile.TarInfo(name); i.size = 2\n\
         \x20       t.addfile(i, io.BytesIO(b'hi'))\n",
        &tar,
    );
    let dst = s.tmp.path().join("in/dst");
    let r = ferry(&[&"unpack", &"--strip-components", &"1", &tar, &dst]);
    r.assert_status(1);
    assert_eq!(std::fs::read(dst.join("ok")).expect("read"), b"hi");
    for climbing in ["a/../../evil", "x/y/../../../evil2"] {
        assert!(
            r.errors()
                .iter()
                .any(|l| l.contains(climbing) && l.contains("..")),
            "no error naming {climbing}: {r}"
        );
    }
    assert!(!s.tmp.path().join("evil").exists() && !s.tmp.path().join("in/evil").exists());
    assert!(!s.tmp.path().join("evil2").exists() && !s.tmp.path().join("in/evil2").exists());
}

#[test]
fn pack_dereference_packs_what_symlinks_point_to_as_tar_h_does() {
    let s = scratch();
    mkdirs(&s.src.join("real"));
    write(&s.src.join("real/f"), b"f");
    symlink("real", &s.src.join("to-dir"));
    symlink("real/f", &s.src.join("to-file"));
    let ours = s.tmp.path().join("l.far");
    ferry(&[&"pack", &"-L", &s.src, &ours]).assert_ok();
    let theirs = s.tmp.path().join("h.tar");
    gnu_tar(&[&"-h", &"-C", &s.src, &"-cf", &theirs, &"."]);
    let tar_says = gnu_tar(&[&"-tvf", &theirs]);
    assert!(
        !tar_says.contains(" -> "),
        "tar -h kept a symlink: {tar_says}"
    );
    assert_eq!(
        listed(&ours),
        ["./", "real/", "real/f", "to-dir/", "to-dir/f", "to-file"]
    );
    let r = ferry(&[&"ls", &"-l", &ours]);
    assert!(!r.stdout.contains(" -> "), "{r}");
    let out = ferry(&[&"cat", &ours, &"to-dir/f"]);
    out.assert_ok();
    assert_eq!(out.stdout, "f");
}

#[test]
fn member_globs_select_what_gnu_tar_wildcards_do() {
    let s = scratch();
    mkdirs(&s.src.join("d/sub"));
    mkdirs(&s.src.join("e"));
    write(&s.src.join("d/x.c"), b"x");
    write(&s.src.join("d/sub/y.c"), b"y");
    write(&s.src.join("d/sub/z.h"), b"z");
    write(&s.src.join("e/w.c"), b"w");
    write(&s.src.join("top.h"), b"t");
    let far = s.tmp.path().join("a.far");
    ferry(&[&"pack", &s.src, &far]).assert_ok();
    let names = crate::common::trees::found_names;
    for (i, pattern) in ["d/*", "*.c", "d/sub/?.h", "[de]/*.c"]
        .into_iter()
        .enumerate()
    {
        let (ours, theirs) = (
            s.tmp.path().join(format!("f{i}")),
            s.tmp.path().join(format!("t{i}")),
        );
        ferry(&[&"unpack", &far, &ours, &pattern]).assert_ok();
        mkdirs(&theirs);
        gnu_tar(&[&"--wildcards", &"-C", &theirs, &"-xf", &far, &pattern]);
        assert_eq!(names(&ours), names(&theirs), "{pattern}");
        let mut listed: Vec<String> = ferry(&[&"ls", &far, &pattern])
            .stdout
            .lines()
            .map(str::to_owned)
            .collect();
        let mut tar_listed: Vec<String> = gnu_tar(&[&"--wildcards", &"-tf", &far, &pattern])
            .lines()
            .map(str::to_owned)
            .collect();
        listed.sort();
        tar_listed.sort();
        assert_eq!(listed, tar_listed, "ls {pattern}");
    }
    let r = ferry(&[&"ls", &far, &"nothing*"]);
    r.assert_status(1);
    assert!(r.stderr.contains("nothing*"), "{r}");
}

/// `unpack -k` replaces nothing already in DST, as GNU tar's `-k` (`--keep-old-files`):
/// the files it keeps are errors naming them (GNU tar exits 2, ferry 1, as for any path
/// that failed), directories are entered, and every other member is extracted. Both
/// extract the same tree.
#[test]
fn unpack_keep_old_files_replaces_nothing_there_as_gnu_tar_k() {
    let s = scratch();
    for p in ["d/f", "d/g", "top", "new/h"] {
        let path = s.src.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        write(&path, format!("archive's {p}").as_bytes());
    }
    symlink("top", &s.src.join("link"));
    let far = s.tmp.path().join("a.far");
    crate::pack(&s.src, &far, &[]);
    let (ours, theirs) = (s.tmp.path().join("ours"), s.tmp.path().join("theirs"));
    for dst in [&ours, &theirs] {
        mkdirs(&dst.join("d"));
        write(&dst.join("d/f"), b"mine");
        write(&dst.join("link"), b"a file where the archive has a link");
    }
    let r = ferry(&[&"unpack", &"-k", &far, &ours]);
    r.assert_status(1);
    let tar = Command::new("tar")
        .arg("-xkf")
        .arg(&far)
        .arg("-C")
        .arg(&theirs)
        .output()
        .expect("run tar");
    assert_eq!(tar.status.code(), Some(2), "GNU tar -k: {tar:?}");
    for dst in [&ours, &theirs] {
        assert_eq!(std::fs::read(dst.join("d/f")).unwrap(), b"mine");
        assert_eq!(
            std::fs::read(dst.join("link")).unwrap(),
            b"a file where the archive has a link"
        );
        assert_eq!(std::fs::read(dst.join("d/g")).unwrap(), b"archive's d/g");
        assert_eq!(
            std::fs::read(dst.join("new/h")).unwrap(),
            b"archive's new/h"
        );
    }
    for kept in ["d/f", "link"] {
        assert!(
            r.stderr
                .lines()
                .any(|l| l.contains(&format!("{kept}: extract: already there"))),
            "{kept} not named: {r}"
        );
    }
    // Without -k they are replaced.
    ferry(&[&"unpack", &far, &ours]).assert_status(0);
    assert_eq!(std::fs::read(ours.join("d/f")).unwrap(), b"archive's d/f");
}
