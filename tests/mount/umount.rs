//! `ferry umount` unmounts only what `ferry mount` made, refuses a busy mount unless
//! `--lazy`, and `ferry mount` refuses to stack a second mount on a mountpoint and
//! records the archive's absolute path.

use super::common::scratch;
use super::{ferry, is_mounted, packed_one_file, Mounted};
use ferry_testkit::skip_unless_root;
use std::process::Command;

#[test]
fn a_filesystem_ferry_did_not_mount_is_left_alone() {
    if skip_unless_root() {
        return;
    }
    let s = scratch();
    let mnt = s.tmp.path().join("tmpfs");
    std::fs::create_dir(&mnt).expect("mkdir");
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "ferry-test"])
        .arg(&mnt)
        .status()
        .expect("mount tmpfs");
    assert!(mounted.success());
    std::fs::write(mnt.join("data"), b"keep").expect("write");
    let r = ferry(s.tmp.path(), &[&"umount", &mnt]);
    let still = is_mounted(&mnt);
    let _ = Command::new("umount").arg(&mnt).status();
    r.assert_status(2);
    assert!(r.stderr.contains("not a mount ferry made"), "{}", r.stderr);
    assert!(still, "ferry umount detached a tmpfs");
}

#[test]
fn a_busy_mount_is_refused_unless_lazy_and_a_second_mount_on_top_is_refused() {
    let Some((s, archive, cache)) = packed_one_file() else {
        return;
    };
    let mnt = s.tmp.path().join("mnt");
    let m = Mounted::new(&cache, &archive, &mnt);
    let again = ferry(&cache, &[&"mount", &archive, &mnt]);
    again.assert_status(2);
    assert!(
        again.stderr.contains("mounted there already"),
        "{}",
        again.stderr
    );
    // Busy: a process has a file of it open.
    let open = std::fs::File::open(mnt.join("f")).expect("open a file of the mount");
    let r = ferry(&cache, &[&"umount", &mnt]);
    r.assert_status(2);
    assert!(
        r.stderr.contains("busy") && r.stderr.contains("--lazy"),
        "{}",
        r.stderr
    );
    assert!(is_mounted(&mnt), "a busy mount was unmounted");
    ferry(&cache, &[&"umount", &"--lazy", &mnt]).assert_ok();
    assert!(!is_mounted(&mnt), "--lazy left it mounted");
    drop((open, m));
}

#[test]
fn the_archive_is_recorded_by_its_absolute_path() {
    let Some((s, _archive, cache)) = packed_one_file() else {
        return;
    };
    let mnt = s.tmp.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir");
    let mut cmd = Command::new(super::common::run::FERRY);
    cmd.current_dir(s.tmp.path())
        .env("XDG_CACHE_HOME", &cache)
        .args(["mount", "t.far", "mnt"]);
    let m = Mounted::made_by(&mnt, || super::common::run::run(cmd));
    let mounts = std::fs::read_to_string("/proc/self/mounts").expect("mounts");
    let line = mounts
        .lines()
        .find(|l| l.contains(&*mnt.to_string_lossy()))
        .expect("the mount's line");
    let source = line.split(' ').next().unwrap_or_default();
    assert_eq!(
        source,
        s.tmp.path().join("t.far").to_string_lossy(),
        "{line}"
    );
    drop(m);
}
