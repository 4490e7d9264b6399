//! What a copy with a remote end takes as SRC, as a local copy takes it: several SRCs
//! (each under its own name, over one connection up, one each down), a SRC named
//! into `DST/`, and a single file (DST becomes it, or it goes into DST when that is a
//! directory), both ways.

use crate::common::build::*;
use crate::common::compare::assert_same_tree;
use crate::common::scratch;
use crate::copy::s;
use crate::sshd::Sshd;

#[test]
fn several_srcs_go_under_their_names_and_delete_only_below_them() {
    let Some(sshd) = Sshd::start() else { return };
    let sc = scratch();
    let (a, b) = (sc.src.join("a"), sc.src.join("b"));
    mkdirs(&a.join("x"));
    mkdirs(&b);
    write(&a.join("x/1"), b"1");
    write(&b.join("2"), b"2");
    let dst = sc.tmp.path().join("dst");
    mkdirs(&dst.join("a"));
    write(&dst.join("other"), b"not ours");
    write(&dst.join("a/stale"), b"gone with --delete");
    let up = sshd.copy(s(&a), &sshd.remote(&dst), &["--delete", s(&b)]);
    // The args put --delete and b before a: SRCs are a, b in either order.
    up.assert_ok();
    assert_same_tree(&a, &dst.join("a"));
    assert_same_tree(&b, &dst.join("b"));
    assert_eq!(std::fs::read(dst.join("other")).expect("kept"), b"not ours");
    // Down: each into DST under its name.
    let back = sc.tmp.path().join("back");
    let down = sshd.copy(
        &sshd.remote(&dst.join("a")),
        s(&back),
        &[&sshd.remote(&dst.join("b"))],
    );
    down.assert_ok();
    assert_same_tree(&a, &back.join("a"));
    assert_same_tree(&b, &back.join("b"));
    // One SRC named into DST/ goes in by name, as `cp -a a bk/` puts it.
    let bk = sc.tmp.path().join("bk");
    mkdirs(&bk);
    let into = format!("{}/", sshd.remote(&bk));
    sshd.copy(s(&a), &into, &[]).assert_ok();
    assert_same_tree(&a, &bk.join("a"));
}

#[test]
fn a_single_file_becomes_dst_or_goes_into_a_directory_both_ways() {
    let Some(sshd) = Sshd::start() else { return };
    let sc = scratch();
    mkdirs(&sc.src);
    let file = sc.src.join("f");
    write(&file, &pattern(3, 70_000));
    chmod(&file, 0o640);
    let dir = sc.tmp.path().join("dir");
    mkdirs(&dir);
    for (to, lands) in [
        (sc.tmp.path().join("named"), sc.tmp.path().join("named")),
        (dir.clone(), dir.join("f")),
    ] {
        let up = sshd.copy(s(&file), &sshd.remote(&to), &["-i"]);
        up.assert_ok();
        up.json().assert_counts(&[("files", 1), ("bytes", 70_000)]);
        assert_eq!(std::fs::read(&lands).expect("read"), pattern(3, 70_000));
        let again = sshd.copy(s(&file), &sshd.remote(&to), &[]);
        again.json().assert_counts(&[("files", 0), ("skipped", 1)]);
    }
    for (to, lands) in [
        (sc.tmp.path().join("down"), sc.tmp.path().join("down")),
        (dir.clone(), dir.join("f")),
    ] {
        std::fs::remove_file(&lands).ok();
        let down = sshd.copy(&sshd.remote(&file), s(&to), &[]);
        down.assert_ok();
        assert_eq!(std::fs::read(&lands).expect("read"), pattern(3, 70_000));
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&lands).expect("stat").permissions(),
        );
        assert_eq!(mode & 0o7777, 0o640);
    }
    // A DST named as a directory that is not one is refused, as `cp` refuses it.
    let missing = format!("{}/", sshd.remote(&sc.tmp.path().join("nodir")));
    let r = sshd.copy(s(&file), &missing, &[]);
    r.assert_status(2);
    assert!(r.stderr.contains("Not a directory"), "{r}");
}

/// `--files-from` up: only the listed paths (and the directories leading to them) go,
/// a listed path SRC lacks is an error naming it (exit 1), with `--delete` nothing
/// the list does not reach is deleted; down it is refused, not ignored.
#[test]
fn files_from_chooses_what_goes_up_and_is_refused_down() {
    let Some(sshd) = Sshd::start() else { return };
    let sc = scratch();
    for p in ["a/b/keep", "a/b/not", "c/all/x", "c/all/y", "top"] {
        mkdirs(sc.src.join(p).parent().expect("parent"));
        write(&sc.src.join(p), p.as_bytes());
    }
    let list = sc.tmp.path().join("list");
    write(&list, b"a/b/keep\nc/all\n# a comment\nmissing\n");
    let dst = sc.tmp.path().join("dst");
    mkdirs(&dst);
    write(&dst.join("stray"), b"not reached by the list");
    let r = sshd.copy(
        &format!("{}/", s(&sc.src)),
        &format!("{}/", sshd.remote(&dst)),
        &["--files-from", s(&list), "--delete"],
    );
    r.assert_status(1);
    assert!(
        r.stderr.contains("src/missing: listed in --files-from"),
        "{r}"
    );
    let got = crate::common::trees::found_names(&dst);
    let want = [
        ".",
        "./a",
        "./a/b",
        "./a/b/keep",
        "./c",
        "./c/all",
        "./c/all/x",
        "./c/all/y",
    ];
    assert_eq!(got[..want.len()], want, "{r}");
    assert_eq!(got[want.len()..], ["./stray"], "{r}");
    // Below a listed directory, --delete deletes what SRC lacks; elsewhere nothing.
    write(&dst.join("c/all/gone"), b"g");
    write(&dst.join("a/b/kept"), b"k");
    let r = sshd.copy(
        &format!("{}/", s(&sc.src)),
        &format!("{}/", sshd.remote(&dst)),
        &["--files-from", s(&list), "--delete"],
    );
    assert!(
        !dst.join("c/all/gone").exists() && dst.join("a/b/kept").exists(),
        "{r}"
    );
    let r = sshd.copy(
        &sshd.remote(&sc.src),
        s(&sc.tmp.path().join("down")),
        &["--files-from", s(&list)],
    );
    r.assert_status(2);
    assert!(r.stderr.contains("only for an upload"), "{r}");
}
