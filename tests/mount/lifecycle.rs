//! A mount's life: the cached index made, reused and rebuilt; the archive changed under
//! the mount; a member whose data is damaged; Ctrl-C on a foreground mount; a mount
//! whose process was killed; a mount by an ordinary user.

use super::common::build::write;
use super::common::nobody::{give_to_nobody, NOBODY};
use super::common::{is_root, scratch, skip};
use super::{ferry, fuse_here, gnu_tar, is_mounted, must, packed_one_file, wait_for, Mounted};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::process::{Command, Stdio};

#[test]
fn the_index_of_a_plain_tar_is_kept_and_rebuilt_when_the_tar_changes() {
    let s = scratch();
    write(&s.src.join("a"), b"first");
    let archive = s.tmp.path().join("t.tar");
    let cache = s.tmp.path().join("cache");
    gnu_tar(&s.src, &archive, &[]);
    let built = ferry(&cache, &[&"index", &archive]);
    built.assert_ok();
    assert!(built.stdout.contains("index built"), "{}", built.stdout);
    let again = ferry(&cache, &[&"index", &archive]);
    assert!(
        again.stdout.contains("index up to date"),
        "{}",
        again.stdout
    );
    let kept: Vec<_> = std::fs::read_dir(cache.join("ferry"))
        .expect("cache")
        .collect();
    assert!(kept.len() == 1, "one index file in the cache: {kept:?}");
    // Another tar of another size and time at the same path: built anew.
    write(&s.src.join("b"), b"second file");
    std::thread::sleep(std::time::Duration::from_millis(20));
    gnu_tar(&s.src, &archive, &[]);
    let rebuilt = ferry(&cache, &[&"index", &archive]);
    assert!(rebuilt.stdout.contains("index built"), "{}", rebuilt.stdout);
    // A cache file damaged in its table (past its 64-byte header) is built again.
    let kept = std::fs::read_dir(cache.join("ferry"))
        .expect("cache")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "ftree"))
        .expect("the index file");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&kept)
        .expect("open");
    f.write_all_at(b"\xff\xff", 100).expect("damage");
    let repaired = ferry(&cache, &[&"index", &archive]);
    assert!(
        repaired.stdout.contains("index built"),
        "{}",
        repaired.stdout
    );
    if !fuse_here() {
        return;
    }
    let m = Mounted::new(&cache, &archive, &s.tmp.path().join("mnt"));
    assert_eq!(
        std::fs::read(m.at.join("b")).expect("read b"),
        b"second file"
    );
}

#[test]
fn a_member_whose_data_was_damaged_gives_an_io_error_and_a_log_line() {
    if !fuse_here() {
        return;
    }
    let s = scratch();
    write(&s.src.join("good"), &vec![7u8; 10_000]);
    write(&s.src.join("bad"), &vec![9u8; 10_000]);
    let archive = s.tmp.path().join("t.far");
    let cache = s.tmp.path().join("cache");
    ferry(
        &cache,
        &[&"pack", &"--hash", &"--no-progress", &s.src, &archive],
    )
    .assert_ok();
    // Find bad's data (10,000 bytes of 9) and change one byte in its middle.
    let mut bytes = Vec::new();
    std::fs::File::open(&archive)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .expect("read");
    let at = bytes
        .windows(10_000)
        .position(|w| w.iter().all(|&b| b == 9))
        .expect("bad's data");
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&archive)
        .expect("open");
    f.write_all_at(&[8], (at + 5000) as u64).expect("damage");
    let m = Mounted::new(&cache, &archive, &s.tmp.path().join("mnt"));
    assert_eq!(
        std::fs::read(m.at.join("good")).expect("good reads"),
        vec![7u8; 10_000]
    );
    let err = std::fs::read(m.at.join("bad")).expect_err("bad must not read");
    assert_eq!(err.raw_os_error(), Some(libc_eio()), "{err}");
    let log = std::fs::read_to_string(cache.join("ferry/mount.log")).expect("log");
    assert!(log.contains("bad: content differs"), "{log}");
}

fn libc_eio() -> i32 {
    5
}

#[test]
fn an_archive_changed_under_its_mount_is_refused_not_misread() {
    if !fuse_here() {
        return;
    }
    let s = scratch();
    write(&s.src.join("f"), b"original");
    let archive = s.tmp.path().join("t.tar");
    let cache = s.tmp.path().join("cache");
    gnu_tar(&s.src, &archive, &[]);
    let m = Mounted::new(&cache, &archive, &s.tmp.path().join("mnt"));
    let f = std::fs::OpenOptions::new()
        .append(true)
        .open(&archive)
        .expect("open");
    f.write_all_at(
        &[0u8; 512],
        std::fs::metadata(&archive).expect("stat").len(),
    )
    .expect("append");
    let err = std::fs::read(m.at.join("f")).expect_err("a changed archive must not be read");
    assert_eq!(err.raw_os_error(), Some(libc_eio()), "{err}");
    // Any request, a name never looked up too (it was ENOENT, as if the table held).
    let err = std::fs::metadata(m.at.join("never-looked-up")).expect_err("a lookup");
    assert_eq!(err.raw_os_error(), Some(libc_eio()), "{err}");
    let log = std::fs::read_to_string(cache.join("ferry/mount.log")).expect("log");
    assert!(
        log.contains("the archive changed after it was mounted"),
        "{log}"
    );
}

#[test]
fn ctrl_c_on_a_foreground_mount_unmounts_it() {
    let Some((s, archive, cache)) = packed_one_file() else {
        return;
    };
    let mnt = s.tmp.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir");
    let mut child = Command::new(super::FERRY)
        .env("XDG_CACHE_HOME", &cache)
        .args(["mount", "--foreground"])
        .arg(&archive)
        .arg(&mnt)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ferry mount -f");
    wait_for("the foreground mount", || {
        is_mounted(&mnt) && mnt.join("f").exists()
    });
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::INT,
    )
    .expect("SIGINT");
    let status = child.wait().expect("wait");
    assert!(status.success(), "ferry mount -f ended with {status}");
    assert!(!is_mounted(&mnt), "still mounted after Ctrl-C");
}

#[test]
fn a_mount_whose_process_was_killed_is_cleared_by_ferry_umount() {
    let Some((s, archive, cache)) = packed_one_file() else {
        return;
    };
    let mnt = s.tmp.path().join("mnt");
    // Killed alone, after serving a listing and a read (once the kernel knows listings
    // need no OPENDIR, fusermount3's auto_unmount no longer sees the mount as dead),
    // the mount is taken down by the watchdog left watching it.
    let m = Mounted::new(&cache, &archive, &mnt);
    assert_eq!(std::fs::read_dir(&mnt).expect("list").count(), 1);
    assert_eq!(std::fs::read(mnt.join("f")).expect("read"), b"x");
    kill_all(&[
        "-f",
        &format!("ferry mount --foreground.*{}", mnt.display()),
    ]);
    wait_for("the watchdog to unmount a killed mount", || {
        !is_mounted(&mnt)
    });
    let r = ferry(&cache, &[&"umount", &mnt]);
    r.assert_status(2);
    assert!(r.stderr.contains("not mounted"), "{}", r.stderr);
    // Killed with its watchers, the mount is left dead: ferry umount clears it.
    let m2 = Mounted::new(&cache, &archive, &mnt);
    kill_all(&["-f", &format!("fusermount3 .*{}", mnt.display())]);
    kill_all(&["-f", &format!("ferry mount-watch .*{}", mnt.display())]);
    kill_all(&[
        "-f",
        &format!("ferry mount --foreground.*{}", mnt.display()),
    ]);
    wait_for("the mount to die", || std::fs::metadata(&mnt).is_err());
    assert!(is_mounted(&mnt), "a dead mount is still mounted");
    ferry(&cache, &[&"umount", &mnt]).assert_ok();
    assert!(!is_mounted(&mnt), "still mounted");
    assert!(mnt.is_dir(), "the mountpoint is a plain directory again");
    drop((m, m2));
}

/// SIGKILLs every process `pgrep ARGS` finds (there must be one).
fn kill_all(args: &[&str]) {
    let pids = must(Command::new("pgrep").args(args));
    for pid in String::from_utf8_lossy(&pids.stdout).split_whitespace() {
        must(Command::new("kill").args(["-KILL", pid]));
    }
}

#[test]
fn an_ordinary_user_mounts_and_unmounts() {
    if !fuse_here() {
        return;
    }
    if !is_root() {
        // As an ordinary user every other test here is this test already.
        return;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        skip("no setpriv");
        return;
    }
    // Debian's udev gives /dev/fuse mode 0666 so that fusermount3 can open it for any
    // user; a container's /dev may have left it 0600 for root alone.
    super::common::build::chmod(std::path::Path::new("/dev/fuse"), 0o666);
    let s = scratch();
    write(&s.src.join("f"), b"mine");
    let archive = s.tmp.path().join("t.far");
    ferry(
        &s.tmp.path().join("rootcache"),
        &[&"pack", &"--no-progress", &s.src, &archive],
    )
    .assert_ok();
    let home = s.tmp.path().join("home");
    let mnt = s.tmp.path().join("mnt");
    std::fs::create_dir_all(&home).expect("mkdir");
    std::fs::create_dir_all(&mnt).expect("mkdir");
    super::common::build::chmod(s.tmp.path(), 0o755);
    give_to_nobody(&home);
    give_to_nobody(&mnt);
    super::common::build::chown(&archive, NOBODY, NOBODY);
    let as_nobody = |args: &[&dyn AsRef<std::ffi::OsStr>]| {
        let mut cmd = Command::new("setpriv");
        cmd.args([
            "--reuid",
            &NOBODY.to_string(),
            "--regid",
            &NOBODY.to_string(),
            "--clear-groups",
            "--",
        ])
        .env("HOME", &home)
        .env_remove("XDG_CACHE_HOME");
        for a in args {
            cmd.arg(a);
        }
        super::common::run::run(cmd)
    };
    as_nobody(&[&super::FERRY, &"mount", &archive, &mnt]).assert_ok();
    let guard = Mounted { at: mnt.clone() };
    // Only its owner may enter the mount (no allow_other): read it as nobody.
    let read = as_nobody(&[&"cat", &mnt.join("f")]);
    read.assert_ok();
    assert_eq!(read.stdout, "mine");
    as_nobody(&[&super::FERRY, &"umount", &mnt]).assert_ok();
    assert!(!is_mounted(&mnt), "nobody's umount left it mounted");
    drop(guard);
}
