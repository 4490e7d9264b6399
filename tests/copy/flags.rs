//! The everyday flags of `ferry copy` (issue 25): several SRCs, `-u/--update`,
//! `-x/--one-file-system` and `--progress` off a terminal.

use crate::common::build::*;
use crate::common::compare::assert_same_tree;
use crate::common::run::{copy_ok, run, FERRY};
use crate::common::{scratch, trees};
use std::process::Command;

#[test]
fn several_srcs_go_into_dst_under_their_own_names_as_cp_a_puts_them() {
    let s = scratch();
    trees::mixed(&s.src.join("tree"));
    write(&s.src.join("file"), b"a file of its own\n");
    mkdirs(&s.src.join("other/deeper"));
    write(&s.src.join("other/deeper/x"), b"x");
    let srcs = [s.src.join("tree"), s.src.join("file"), s.src.join("other/")];
    let theirs = s.tmp.path().join("cp");
    mkdirs(&theirs);
    let cp = Command::new("cp")
        .arg("-a")
        .args(&srcs)
        .arg(&theirs)
        .status()
        .expect("run cp");
    assert!(cp.success(), "cp -a failed");
    let mut cmd = Command::new(FERRY);
    cmd.arg("copy").args(&srcs).arg(&s.dst);
    run(cmd).assert_ok();
    // Where cp put each SRC, ferry put it, and exactly (cp's reads moved the atimes).
    let names = |dir: &std::path::Path| {
        let mut n: Vec<_> = std::fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        n.sort();
        n
    };
    assert_eq!(names(&s.dst), names(&theirs));
    assert_eq!(names(&s.dst).len(), 3);
    assert_same_tree(&s.src.join("tree"), &s.dst.join("tree"));
    assert_same_tree(&s.src.join("other"), &s.dst.join("other"));
    assert_eq!(
        std::fs::read(s.dst.join("file")).expect("read"),
        b"a file of its own\n"
    );
}

#[test]
fn several_srcs_refuse_one_without_a_name() {
    let s = scratch();
    write(&s.src.join("f"), b"f");
    let mut cmd = Command::new(FERRY);
    cmd.arg("copy").arg(s.src.join("f")).arg("/").arg(&s.dst);
    let r = run(cmd);
    r.assert_status(2);
    assert!(r.stderr.contains("a name of its own"), "{r}");
}

#[test]
fn update_keeps_files_newer_in_dst_and_replaces_older_ones() {
    let s = scratch();
    for name in ["newer", "older", "same"] {
        write(&s.src.join(name), format!("source {name}\n").as_bytes());
        set_times(
            &s.src.join(name),
            ts(1_600_000_000, 0),
            ts(1_600_000_000, 0),
        );
    }
    copy_ok(&s.src, &s.dst, &[]);
    write(&s.dst.join("newer"), b"edited in DST, newer\n");
    set_times(
        &s.dst.join("newer"),
        ts(1_700_000_000, 0),
        ts(1_700_000_000, 0),
    );
    write(&s.dst.join("older"), b"edited in DST, older\n");
    set_times(
        &s.dst.join("older"),
        ts(1_500_000_000, 0),
        ts(1_500_000_000, 0),
    );
    // A dry run says nothing of the newer file.
    let r = copy_ok(&s.src, &s.dst, &["-u", "-n", "-i"]);
    assert!(!r.stdout.contains("newer"), "{r}");
    assert!(r.stdout.contains("older"), "{r}");
    let r = copy_ok(&s.src, &s.dst, &["-u", "--json"]);
    r.json()
        .assert_counts(&[("files", 1), ("skipped", 2), ("errors", 0)]);
    let read = |n: &str| std::fs::read_to_string(s.dst.join(n)).expect("read");
    assert_eq!(read("newer"), "edited in DST, newer\n");
    assert_eq!(read("older"), "source older\n");
    // Without -u the newer one is replaced too.
    copy_ok(&s.src, &s.dst, &[]);
    assert_eq!(read("newer"), "source newer\n");
}

#[test]
fn one_file_system_makes_a_mount_point_empty_as_cp_x_does() {
    let s = scratch();
    let Some(_bound) = crate::common::trees::with_a_mount_point(&s.src) else {
        return;
    };
    let with_x = s.tmp.path().join("x");
    copy_ok(&s.src, &with_x, &["-x"]);
    assert!(with_x.join("top").exists());
    assert!(with_x.join("mnt").is_dir(), "the mount point is made");
    assert!(
        !with_x.join("mnt/inside").exists(),
        "-x went into the mount"
    );
    let theirs = s.tmp.path().join("cp");
    let cp = Command::new("cp")
        .args(["-a", "-x", "-T"])
        .arg(&s.src)
        .arg(&theirs)
        .status()
        .expect("run cp");
    assert!(cp.success());
    assert!(theirs.join("mnt").is_dir() && !theirs.join("mnt/inside").exists());
    copy_ok(&s.src, &s.dst, &[]);
    assert!(
        s.dst.join("mnt/inside").exists(),
        "without -x the mount is copied"
    );
}

#[test]
fn progress_off_a_terminal_is_lines_and_only_when_asked() {
    let s = scratch();
    trees::mixed(&s.src);
    let r = copy_ok(&s.src, &s.dst, &["--progress"]);
    let lines: Vec<_> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("progress: "))
        .collect();
    assert!(!lines.is_empty(), "no progress line: {r}");
    assert!(lines.iter().all(|l| l.contains(" entries")), "{r}");
    let r = copy_ok(&s.src, &s.tmp.path().join("again"), &[]);
    assert!(!r.stderr.contains("progress: "), "{r}");
}

#[test]
fn dereference_copies_what_symlinks_point_to_as_rsync_al_does() {
    let s = scratch();
    mkdirs(&s.src.join("real/sub"));
    write(&s.src.join("real/sub/f"), b"in a linked directory");
    write(&s.src.join("file"), b"a file");
    let outside = s.tmp.path().join("outside");
    mkdirs(&outside);
    write(&outside.join("o"), b"outside the tree");
    symlink("file", &s.src.join("to-file"));
    symlink("real", &s.src.join("to-dir"));
    symlink(&outside, &s.src.join("to-outside"));
    copy_ok(&s.src, &s.dst, &["-L"]);
    // Each link is what it points to, with its metadata: the linked directory's tree,
    // the linked file (two files, as rsync -L and tar -h make them; cp -aL makes one
    // inode of a file and a link to it, keeping hard links by inode).
    assert_same_tree(&s.src.join("real"), &s.dst.join("to-dir"));
    assert_same_tree(&s.src.join("real"), &s.dst.join("real"));
    assert_same_tree(&outside, &s.dst.join("to-outside"));
    let meta = |p: &std::path::Path| std::fs::symlink_metadata(p).expect("stat");
    use std::os::unix::fs::MetadataExt;
    let (file, link) = (meta(&s.src.join("file")), meta(&s.dst.join("to-file")));
    assert!(link.is_file() && link.mode() == file.mode() && link.mtime() == file.mtime());
    assert_ne!(meta(&s.dst.join("file")).ino(), link.ino());
    // The same names as rsync -aL gives.
    let theirs = s.tmp.path().join("rsync");
    let rsync = Command::new("rsync")
        .arg("-aL")
        .arg(format!("{}/", s.src.display()))
        .arg(&theirs)
        .status()
        .expect("run rsync");
    assert!(rsync.success(), "rsync -aL failed");
    let names = crate::common::trees::found_names;
    assert_eq!(names(&s.dst), names(&theirs));
    // Without -L, links stay links.
    let plain = s.tmp.path().join("plain");
    copy_ok(&s.src, &plain, &[]);
    assert!(plain.join("to-dir").is_symlink());
}

#[test]
fn dereference_reports_loops_and_dangling_links_and_copies_the_rest() {
    let s = scratch();
    mkdirs(&s.src.join("a/b"));
    write(&s.src.join("a/b/f"), b"f");
    symlink("..", &s.src.join("a/b/up"));
    symlink("nowhere", &s.src.join("dangling"));
    let r = crate::common::run::copy(&s.src, &s.dst, &["-L"]);
    r.assert_status(1);
    let errors = r.errors();
    assert!(
        errors
            .iter()
            .any(|l| l.contains("a/b/up") && l.contains("loop")),
        "{r}"
    );
    assert!(errors.iter().any(|l| l.contains("dangling")), "{r}");
    assert_eq!(errors.len(), 2, "{r}");
    assert_eq!(std::fs::read(s.dst.join("a/b/f")).expect("read"), b"f");
    assert!(!s.dst.join("a/b/up").exists() && !s.dst.join("dangling").exists());
}

/// rsync's habits: `-aHAX` is taken (ferry keeps all that anyway), `-c` is
/// `--checksum`, and `--stats` prints the summary line off a terminal too.
#[test]
fn rsync_habits_are_taken() {
    let s = scratch();
    trees::mixed(&s.src);
    let r = crate::common::run::copy(&s.src, &s.dst, &["-aHAX", "--stats"]);
    r.assert_status(0);
    assert_same_tree(&s.src, &s.dst);
    assert!(
        r.stderr.contains(" files, ") && r.stderr.contains(" up to date, "),
        "--stats printed no summary: {r}"
    );
    // A change size and mtime do not show: only -c (--checksum) finds it.
    let f = s.src.join("size4097");
    let was = std::fs::metadata(&f).unwrap();
    let mut data = std::fs::read(&f).unwrap();
    data[0] ^= 0xff;
    std::fs::write(&f, &data).unwrap();
    restore_times(&f, &was);
    let r = copy_ok(&s.src, &s.dst, &["-a", "--json"]);
    r.json().assert_counts(&[("files", 0)]);
    let r = copy_ok(&s.src, &s.dst, &["-ac", "--json"]);
    r.json().assert_counts(&[("files", 1)]);
    assert_eq!(std::fs::read(s.dst.join("size4097")).unwrap(), data);
}
