//! The everyday flags of `ferry pack` (issue 25): `-C DIR` and `-x/--one-file-system`.

use crate::common::build::*;
use crate::common::mount::mount_ramfs;
use crate::common::{scratch, skip};
use crate::ferry;
use std::process::Command;

/// The member names `ferry ls` prints, sorted.
fn listed(archive: &std::path::Path) -> Vec<String> {
    let r = ferry(&[&"ls", &archive]);
    r.assert_ok();
    let mut names: Vec<String> = r.stdout.lines().map(str::to_owned).collect();
    names.sort();
    names
}

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

#[test]
fn pack_one_file_system_leaves_a_mount_point_empty_as_gnu_tar_does() {
    let s = scratch();
    write(&s.src.join("top"), b"top");
    mkdirs(&s.src.join("mnt"));
    let mounted = match mount_ramfs() {
        Ok(m) => m,
        Err(why) => return skip(&why),
    };
    let status = Command::new("mount")
        .arg("--bind")
        .arg(mounted.path())
        .arg(s.src.join("mnt"))
        .status()
        .expect("run mount");
    assert!(status.success(), "mount --bind failed");
    let _unbind = Unmount(s.src.join("mnt"));
    write(&s.src.join("mnt/inside"), b"on the ramfs");
    let (ours, theirs) = (s.tmp.path().join("x.far"), s.tmp.path().join("x.tar"));
    ferry(&[&"pack", &"-x", &s.src, &ours]).assert_ok();
    let tar = Command::new("tar")
        .args(["--one-file-system", "-C"])
        .arg(&s.src)
        .arg("-cf")
        .arg(&theirs)
        .arg(".")
        .output()
        .expect("run tar");
    assert!(tar.status.success(), "{tar:?}");
    let tar_names = Command::new("tar")
        .arg("-tf")
        .arg(&theirs)
        .output()
        .expect("tar -t");
    let mut tar_names: Vec<String> = String::from_utf8_lossy(&tar_names.stdout)
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

/// Unmounts a bind mount when dropped.
struct Unmount(std::path::PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}
