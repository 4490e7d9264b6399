//! Mirroring over ssh and `ferry://`, both ways: `--delete`, `-n`, `-i`, `-v`,
//! metadata-only changes, the filter rules' protection, `--max-delete`, and nothing
//! deleted after a read error on the sending side.

use crate::common::build::*;
use crate::common::compare::assert_same_tree;
use crate::common::run::Run;
use crate::common::{scratch, trees, Scratch};
use crate::copy::s;
use crate::daemon::Daemon;
use crate::sshd::Sshd;
use std::path::{Path, PathBuf};

/// A source tree, and a destination holding things the source does not have, or has
/// as something else.
fn source_and_stale_destination(sc: &Scratch, dst: &Path) {
    trees::every_kind(&sc.src);
    mkdirs(&sc.src.join("was_dir"));
    write(&sc.src.join("was_dir/inside"), b"in");
    write(&sc.src.join("file_then_dir"), b"f");
    mkdirs(dst);
    // Gone from the source: a file, a symlink, a deep directory.
    write(&dst.join("extra"), b"x");
    symlink("nowhere", &dst.join("extra_link"));
    mkdirs(&dst.join("old/deeper/still"));
    write(&dst.join("old/deeper/still/f"), b"f");
    // Of another kind at the source: a directory where it has a file, a file where
    // it has a directory.
    mkdirs(&dst.join("file_then_dir/sub"));
    write(&dst.join("file_then_dir/sub/g"), b"g");
    write(&dst.join("was_dir"), b"a file in the way");
}

/// The `-i` lines of a run (on standard error, beside `--json`), sorted.
fn lines(r: &Run) -> Vec<String> {
    let items = ["created ", "updated ", "meta ", "deleted "];
    let mut l: Vec<String> = r
        .stderr
        .lines()
        .filter(|l| items.iter().any(|i| l.starts_with(i)))
        .map(str::to_owned)
        .collect();
    l.sort();
    l
}

/// A snapshot of `dir` made with ferry's own local copy (times kept, atimes too).
fn snapshot(dir: &Path, at: &Path) -> PathBuf {
    crate::common::run::copy_ok(dir, at, &[]);
    at.to_path_buf()
}

/// One way of reaching the other end.
enum End {
    Ssh(Sshd),
    Daemon(Daemon),
}

impl End {
    /// How to name `path` (below the daemon's root, for a daemon: `rel` there) there.
    fn name(&self, path: &Path) -> String {
        match self {
            End::Ssh(sshd) => sshd.remote(path),
            End::Daemon(d) => {
                let rel = path.strip_prefix(&d.root).expect("below the daemon's root");
                d.url(s(rel))
            }
        }
    }

    fn copy(&self, src: &str, dst: &str, args: &[&str]) -> Run {
        match self {
            End::Ssh(sshd) => sshd.copy(src, dst, args),
            End::Daemon(d) => {
                let mut all = vec!["--insecure"];
                all.extend_from_slice(args);
                d.copy(src, dst, &all)
            }
        }
    }
}

/// The destination's path for `end`: below the daemon's root for a daemon.
fn place(end: &End, sc: &Scratch, name: &str) -> PathBuf {
    match end {
        End::Ssh(_) => sc.tmp.path().join(name),
        End::Daemon(d) => d.root.join(name),
    }
}

/// A dry run lists what the run then does, and changes nothing at either end; the run
/// makes DST an exact copy of SRC; then a dry run lists nothing.
fn mirror_both_ways(end: &End) {
    let sc = scratch();
    let up = place(end, &sc, "up");
    source_and_stale_destination(&sc, &up);
    let src = s(&sc.src);
    let upload = |args: &[&str]| end.copy(src, &end.name(&up), args);
    let before = snapshot(&up, &sc.tmp.path().join("before"));
    let src_before = snapshot(&sc.src, &sc.tmp.path().join("src_before"));
    let preview = upload(&["-n", "-i", "--delete"]);
    preview.assert_ok();
    assert_same_tree(&before, &up);
    assert_same_tree(&src_before, &sc.src);
    let listed = lines(&preview);
    for want in [
        "deleted file    extra",
        "deleted symlink extra_link",
        "deleted file    old/deeper/still/f",
        "deleted dir     old",
        "deleted file    file_then_dir/sub/g",
        "deleted dir     file_then_dir",
        "updated file    file_then_dir (kind)",
        "updated dir     was_dir (kind)",
        "created file    was_dir/inside",
    ] {
        assert!(listed.iter().any(|l| l == want), "no {want:?} in {preview}");
    }
    preview
        .json()
        .assert_counts(&[("deleted", 9), ("errors", 0)]);
    let run = upload(&["-i", "--delete"]);
    run.assert_ok();
    assert_eq!(
        lines(&run),
        listed,
        "the run did other than the dry run said"
    );
    run.json().assert_counts(&[("deleted", 9), ("errors", 0)]);
    assert_same_tree(&sc.src, &up);
    let after = upload(&["-n", "-i", "--delete"]);
    after.assert_ok();
    assert_eq!(lines(&after), Vec::<String>::new(), "{after}");
    // And back: a download into a stale copy.
    let back = sc.tmp.path().join("back");
    source_and_stale_destination(&scratch_like(&sc), &back);
    let download = |args: &[&str]| end.copy(&end.name(&up), s(&back), args);
    let before = snapshot(&back, &sc.tmp.path().join("back_before"));
    let preview = download(&["-n", "-i", "--delete"]);
    preview.assert_ok();
    assert_same_tree(&before, &back);
    assert!(
        lines(&preview).iter().any(|l| l == "deleted dir     old"),
        "{preview}"
    );
    let run = download(&["-v", "--delete"]);
    run.assert_ok();
    assert!(run.stderr.lines().any(|l| l == "deleting extra"), "{run}");
    assert_same_tree(&sc.src, &back);
    let after = download(&["-n", "-i", "--delete"]);
    assert_eq!(lines(&after), Vec::<String>::new(), "{after}");
}

/// A scratch whose source is a throwaway (only its destination half is used).
fn scratch_like(sc: &Scratch) -> Scratch {
    let mut other = scratch();
    other.src = sc.tmp.path().join("unused_src");
    other
}

#[test]
fn mirror_over_ssh_both_ways() {
    let Some(sshd) = Sshd::start() else { return };
    mirror_both_ways(&End::Ssh(sshd));
}

#[test]
fn mirror_over_a_daemon_both_ways() {
    mirror_both_ways(&End::Daemon(Daemon::start(&["--insecure"])));
}

/// A file whose mode, owner, xattrs or times changed but not its data is given its
/// new metadata without its data being sent again, and told as `meta`.
#[test]
fn metadata_only_changes_are_applied_without_the_data() {
    let Some(sshd) = Sshd::start() else { return };
    let end = End::Ssh(sshd);
    let sc = scratch();
    let dst = sc.tmp.path().join("dst");
    mkdirs(&sc.src.join("d"));
    write(&sc.src.join("d/f"), &pattern(1, 100_000));
    write(&sc.src.join("g"), b"g");
    symlink("g", &sc.src.join("l"));
    end.copy(s(&sc.src), &end.name(&dst), &[]).assert_ok();
    chmod(&sc.src.join("d/f"), 0o600);
    set_xattr(&sc.src.join("g"), "user.note", b"new");
    let root = rustix::process::geteuid().is_root();
    if root {
        chown(&sc.src.join("g"), 4321, 4321);
    }
    let when = ts(1_700_000_000, 5);
    set_times_at_path_nofollow(&sc.src.join("l"), when);
    let preview = end.copy(s(&sc.src), &end.name(&dst), &["-n", "-i"]);
    preview.assert_ok();
    let owner = if root { "owner,xattrs" } else { "xattrs" };
    let want = [
        "meta    file    d/f (mode)".to_string(),
        format!("meta    file    g ({owner})"),
        "meta    symlink l (times)".to_string(),
    ];
    assert_eq!(lines(&preview), want, "{preview}");
    let run = end.copy(s(&sc.src), &end.name(&dst), &["-i"]);
    run.assert_ok();
    assert_eq!(lines(&run), want, "{run}");
    run.json()
        .assert_counts(&[("files", 0), ("bytes", 0), ("errors", 0)]);
    assert_same_tree(&sc.src, &dst);
    let after = end.copy(s(&sc.src), &end.name(&dst), &["-n", "-i"]);
    assert_eq!(lines(&after), Vec::<String>::new(), "{after}");
}

/// An incremental run sends no header for a directory the other end has up to date:
/// the directories whose contents change (a file made, one replaced, one deleted, a
/// directory made inside) are given back their times quietly, those that do not
/// change are left alone, and neither is listed by `-i`. Both ways, over ssh and to a
/// daemon, so both receivers carry out the restores.
#[test]
fn unchanged_directories_are_not_sent_and_keep_their_times() {
    let Some(sshd) = Sshd::start() else { return };
    for end in [End::Ssh(sshd), End::Daemon(Daemon::start(&["--insecure"]))] {
        let sc = scratch();
        for d in ["a/b", "c", "quiet/deep"] {
            mkdirs(&sc.src.join(d));
        }
        for f in ["a/b/f", "a/g", "c/x", "c/y", "quiet/deep/q"] {
            write(&sc.src.join(f), f.as_bytes());
        }
        let dst = place(&end, &sc, "dst");
        let remote = end.name(&dst);
        // Up and back down: each direction's receiver restores.
        let back = sc.tmp.path().join("back");
        end.copy(s(&sc.src), &remote, &[]).assert_ok();
        crate::common::run::copy_ok(&sc.src, &back, &[]);
        write(&sc.src.join("a/b/new"), b"new");
        write(&sc.src.join("a/g"), b"longer than before");
        std::fs::remove_file(sc.src.join("c/x")).expect("rm");
        mkdirs(&sc.src.join("c/sub"));
        for (d, t) in [("a/b", 1), ("a", 2), ("c", 3), ("", 4), ("quiet", 5)] {
            let when = ts(1_600_000_000 + t, 7);
            set_times_at_path_nofollow(&sc.src.join(d).join("."), when);
        }
        // The receivers' directories have the source's old times, so only the
        // directories whose times changed at the source are told.
        let want = [
            "created dir     c/sub",
            "created file    a/b/new",
            "deleted file    c/x",
            "meta    dir     . (times)",
            "meta    dir     a (times)",
            "meta    dir     a/b (times)",
            "meta    dir     c (times)",
            "meta    dir     quiet (times)",
            "updated file    a/g (size)",
        ];
        for (from, to, at) in [
            (s(&sc.src).to_owned(), remote.clone(), &dst),
            (remote.clone(), s(&back).to_owned(), &back),
        ] {
            let run = end.copy(&from, &to, &["-i", "--delete"]);
            run.assert_ok();
            assert_eq!(lines(&run), want, "{run}");
            assert_same_tree(&sc.src, at);
            // Nothing left to do; and a run that changes files only in directories
            // up to date sends no directory header.
            let again = end.copy(&from, &to, &["-n", "-i", "--delete"]);
            assert_eq!(lines(&again), Vec::<String>::new(), "{again}");
        }
        write(&sc.src.join("quiet/deep/q"), b"changed q");
        for (from, to, at) in [
            (s(&sc.src).to_owned(), remote.clone(), &dst),
            (remote.clone(), s(&back).to_owned(), &back),
        ] {
            let run = end.copy(&from, &to, &["-i", "--delete"]);
            run.assert_ok();
            assert_eq!(
                lines(&run),
                ["updated file    quiet/deep/q (size)"],
                "{run}"
            );
            run.json()
                .assert_counts(&[("dirs", 0), ("files", 1), ("errors", 0)]);
            assert_same_tree(&sc.src, at);
        }
    }
}

/// A script beside `sshd` that runs ferry as nobody, for `--remote-ferry`: the other
/// end of a copy without root's privileges.
fn ferry_as_nobody(sshd: &Sshd) -> String {
    let script = sshd.file("ferry-as-nobody");
    let text = format!(
        "#!/bin/sh\nexec setpriv --reuid 65534 --regid 65534 --clear-groups {} \"$@\"\n",
        crate::common::run::FERRY
    );
    write(&script, text.as_bytes());
    chmod(&script, 0o755);
    s(&script).to_owned()
}

/// A receiver not running as root lets itself into a directory its owner may not
/// write to (mode 0555) to replace a file in it: a directory whose header was left
/// out, up to date, gets that mode back, and its times, as the copy found them.
#[test]
fn a_read_only_directory_left_out_keeps_its_mode_below_a_receiver_not_root() {
    if !crate::common::is_root() {
        return ferry_testkit::skip("needs root to run the receiving server as nobody");
    }
    let Some(sshd) = Sshd::start() else { return };
    let sc = scratch();
    chmod(sc.tmp.path(), 0o755);
    let dst = sc.tmp.path().join("dst");
    mkdirs(&dst);
    mkdirs(&sc.src.join("ro"));
    write(&sc.src.join("ro/f"), b"f");
    for p in ["", "ro", "ro/f"] {
        chown(&sc.src.join(p), 65534, 65534);
    }
    chown(&dst, 65534, 65534);
    chmod(&sc.src.join("ro"), 0o555);
    let nobody = ferry_as_nobody(&sshd);
    let up = || sshd.copy_with(&nobody, s(&sc.src), &sshd.remote(&dst), &["--delete"]);
    up().assert_ok();
    assert_same_tree(&sc.src, &dst);
    // Rewritten in place: the source directory's times stay, the receiver replaces
    // the file (a new inode in the directory).
    write(&sc.src.join("ro/f"), b"a longer f");
    let run = up();
    run.assert_ok();
    run.json().assert_counts(&[("files", 1), ("errors", 0)]);
    assert_same_tree(&sc.src, &dst);
}

fn set_times_at_path_nofollow(path: &Path, when: rustix::fs::Timespec) {
    let dir = std::fs::File::open(path.parent().expect("parent")).expect("open");
    use std::os::fd::AsFd;
    set_times_at(dir.as_fd(), path.file_name().expect("name"), when, when);
}

/// What the rules exclude is kept in DST by `--delete`, and removed by
/// `--delete-excluded`; `--max-delete` stops deleting past its count, with status 1.
#[test]
fn rules_protect_from_deletion_and_max_delete_stops_it() {
    let Some(sshd) = Sshd::start() else { return };
    let end = End::Ssh(sshd);
    let sc = scratch();
    let dst = sc.tmp.path().join("dst");
    write(&sc.src.join("keep.c"), b"c");
    mkdirs(&dst.join("cache"));
    write(&dst.join("cache/x.o"), b"o");
    write(&dst.join("y.o"), b"o");
    write(&dst.join("gone"), b"g");
    for i in 0..5 {
        write(&dst.join(format!("many{i}")), b"m");
    }
    let remote = end.name(&dst);
    let limited = end.copy(
        s(&sc.src),
        &remote,
        &["--delete", "--max-delete", "2", "--exclude", "*.o"],
    );
    limited.assert_status(1);
    assert!(limited.stderr.contains("--max-delete 2"), "{limited}");
    limited.json().assert_counts(&[("deleted", 2)]);
    let r = end.copy(s(&sc.src), &remote, &["--delete", "--exclude", "*.o"]);
    r.assert_ok();
    assert!(dst.join("y.o").exists() && dst.join("cache/x.o").exists());
    assert!(!dst.join("gone").exists() && !dst.join("many4").exists());
    let r = end.copy(
        s(&sc.src),
        &remote,
        &["--delete-excluded", "--exclude", "*.o", "-i"],
    );
    r.assert_ok();
    assert!(
        !dst.join("y.o").exists() && !dst.join("cache/x.o").exists(),
        "{r}"
    );
    // The directory that held only excluded files goes too: it is not in SRC.
    assert!(!dst.join("cache").exists(), "{r}");
}

/// A source directory that cannot be read stops every deletion (what could not be
/// read is not taken for gone), with a warning and status 1: here the sending end is
/// the server, run as nobody, downloading a tree with a directory nobody may read.
#[test]
fn nothing_is_deleted_after_a_read_error_at_the_sending_end() {
    if !crate::common::is_root() {
        return ferry_testkit::skip("needs root to run the sending server as nobody");
    }
    let Some(sshd) = Sshd::start() else { return };
    let sc = scratch();
    chmod(sc.tmp.path(), 0o755);
    let dst = sc.tmp.path().join("dst");
    mkdirs(&sc.src.join("locked"));
    write(&sc.src.join("locked/f"), b"f");
    write(&sc.src.join("open"), b"o");
    sshd.copy(&sshd.remote(&sc.src), s(&dst), &[]).assert_ok();
    write(&dst.join("extra"), b"x");
    chmod(&sc.src.join("locked"), 0o000);
    let nobody = ferry_as_nobody(&sshd);
    let r = sshd.copy_with(&nobody, &sshd.remote(&sc.src), s(&dst), &["--delete"]);
    chmod(&sc.src.join("locked"), 0o755);
    r.assert_status(1);
    assert!(r.stderr.contains("nothing deleted"), "{r}");
    assert!(dst.join("extra").exists() && dst.join("locked/f").exists());
    // With the directory readable again, the same copy deletes.
    let r = sshd.copy_with(&nobody, &sshd.remote(&sc.src), s(&dst), &["--delete"]);
    r.assert_ok();
    assert!(!dst.join("extra").exists());
    assert_same_tree(&sc.src, &dst);
}
