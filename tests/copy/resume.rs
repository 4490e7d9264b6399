//! Resuming: `ferry copy` killed with SIGKILL at several moments, then run again with
//! the same command, must leave DST exactly equal to SRC (hardlinks, symlinks and 0500
//! directories included); meanwhile no file in DST may look complete (size and mtime
//! of SRC) without being complete. A rerun of a finished copy skips every file.

use crate::common::build::*;
use crate::common::compare::{assert_same_tree, read_noatime};
use crate::common::mount::{mount_image, Mounted};
use crate::common::run::{copy_command, copy_ok};
use crate::common::{scratch_in, trees, Scratch};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

const DIRS: usize = 100;
const FILES_PER_DIR: usize = 200;

/// 20,000 small entries of different sizes in 100 directories: mostly files, every
/// 50th a hardlink to a file in the previous directory, every 50th a symlink, and every
/// tenth directory 0500.
fn many_small_files(root: &Path) {
    for d in 0..DIRS {
        let dir = root.join(format!("d{d:03}"));
        mkdirs(&dir);
        for f in 0..FILES_PER_DIR {
            let (n, path) = (d * FILES_PER_DIR + f, dir.join(format!("f{f:03}")));
            match n % 50 {
                7 if d > 0 => hardlink(&root.join(format!("d{:03}/f{:03}", d - 1, f - 1)), &path),
                13 => symlink("f000", &path),
                _ => write(&path, &pattern(n as u64, (n * 37) % 6000)),
            }
        }
        if d % 10 == 9 {
            chmod(&dir, 0o500);
        }
    }
    stamp_times(root);
}

/// Every file of DST that has SRC's size and mtime must have SRC's content. Returns
/// how many such complete-looking files there are.
fn complete_looking_files_are_complete(src: &Path, dst: &Path) -> usize {
    let mut complete = 0;
    for d in 0..DIRS {
        for f in 0..FILES_PER_DIR {
            let rel = format!("d{d:03}/f{f:03}");
            let (s, d) = (src.join(&rel), dst.join(&rel));
            let (Ok(sm), Ok(dm)) = (std::fs::symlink_metadata(&s), std::fs::symlink_metadata(&d))
            else {
                continue;
            };
            if dm.is_file()
                && (sm.size(), sm.mtime(), sm.mtime_nsec())
                    == (dm.size(), dm.mtime(), dm.mtime_nsec())
            {
                let same = read_noatime(&s) == read_noatime(&d);
                assert!(
                    same,
                    "{rel} has SRC's size and mtime in DST but not its content"
                );
                complete += 1;
            }
        }
    }
    complete
}

/// Starts a copy of `src` into `dst`, kills it with SIGKILL once the last file of the
/// directory `d{dir}` is there (polled, within a minute), and says whether it was
/// still running then.
fn copy_killed_at(src: &Path, dst: &Path, dir: usize) -> bool {
    let mut child = copy_command(src, dst, &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start ferry");
    let started = Instant::now();
    let mut running = true;
    let mark = dst.join(format!("d{dir:03}/f{:03}", FILES_PER_DIR - 1));
    while std::fs::symlink_metadata(&mark).is_err() {
        running = child.try_wait().expect("poll ferry").is_none();
        if !running {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the copy never made {}",
            mark.display()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    running = running && child.try_wait().expect("poll ferry").is_none();
    child.kill().expect("kill ferry");
    child.wait().expect("reap ferry");
    running
}

/// A fresh ext4 image when root (the root filesystem here is slow and erratic for
/// making many files), the temp dir otherwise.
fn fresh_fs() -> Option<Mounted> {
    mount_image(1 << 30, "mkfs.ext4", &["-q", "-N", "200000"])
        .map_err(|why| eprintln!("resume test runs in the temp dir: {why}"))
        .ok()
}

/// A scratch tree on [`fresh_fs`], with the mount that must outlive it.
fn scratch_on_fresh_fs() -> (Option<Mounted>, Scratch) {
    let mounted = fresh_fs();
    let s = scratch_in(
        &mounted
            .as_ref()
            .map_or_else(std::env::temp_dir, |m| m.path().to_path_buf()),
    );
    (mounted, s)
}

#[test]
fn killed_copies_resume_to_an_exact_copy() {
    let (_mounted, first) = scratch_on_fresh_fs();
    many_small_files(&first.src);
    let started = Instant::now();
    copy_ok(&first.src, &first.dst, &[]);
    let full = started.elapsed();
    assert_same_tree(&first.src, &first.dst);

    let expected = trees::count(&first.src);
    let rerun = copy_ok(&first.src, &first.dst, &["--json"]).json();
    rerun.assert_counts(&[
        ("files", 0),
        ("bytes", 0),
        ("skipped", expected.files + expected.others),
        ("errors", 0),
    ]);

    let mut interrupted = 0;
    // Killed once the last file of four directories is there: four points of the
    // copy, whatever order the walk takes (here, about 2,400 to 19,600 of the files
    // were complete at the kill).
    for (i, dir) in [0, 10, DIRS / 2, DIRS - 10].into_iter().enumerate() {
        let (src, dst) = (&first.src, &first.tmp.path().join(format!("dst{i}")));
        if copy_killed_at(src, dst, dir) {
            interrupted += 1;
        }
        let complete = complete_looking_files_are_complete(src, dst);
        eprintln!("killed once d{dir:03} had a file (a full copy took {full:?}): {complete} files complete");
        copy_ok(src, dst, &[]);
        assert_same_tree(src, dst);
    }
    assert!(
        interrupted > 0,
        "every kill came after ferry had finished (a full copy took {full:?})"
    );
}

/// Told to stop (SIGINT) part way, `ferry copy --json` says so, prints its summary as
/// far as it got with `"interrupted": true`, and exits with status 130; the same command
/// run again finishes the copy exactly.
#[test]
fn an_interrupted_copy_prints_its_summary_and_resumes() {
    let (_mounted, s) = scratch_on_fresh_fs();
    many_small_files(&s.src);
    let child = copy_command(&s.src, &s.dst, &["--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ferry");
    // The handler is set before the copy makes DST: once a file is there, it is on.
    let started = Instant::now();
    while std::fs::read_dir(s.dst.join("d000")).map_or(true, |mut d| d.next().is_none()) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the copy never started"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let pid = i32::try_from(child.id()).expect("pid");
    // SAFETY: sends a signal to our own child, which has not been reaped yet.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let out = child.wait_with_output().expect("wait for ferry");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("ferry: interrupted"), "{stderr}");
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    assert_eq!(summary["interrupted"], true, "{summary}");
    let files = summary["files"].as_u64().expect("files");
    assert!(files < (DIRS * FILES_PER_DIR) as u64, "{summary}");
    copy_ok(&s.src, &s.dst, &[]);
    assert_same_tree(&s.src, &s.dst);
}
