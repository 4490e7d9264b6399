//! Mounting an image with the archive as its data device, and unmounting.
//!
//! The mount is made with the kernel's mount API (`fsopen("erofs")`, `source` and
//! `device` set as strings, so any path works, commas included). First file-backed:
//! the image and the archive are regular files, read by the kernel through their page
//! cache. Where the kernel cannot mount files (before 6.12, or without
//! `CONFIG_EROFS_FS_BACKED_BY_FILE`), or when asked, both go on read-only loop devices
//! (`losetup`), which are detached right after the mount whatever its outcome: a
//! device still in use is freed by the kernel when the filesystem is unmounted
//! (autoclear), an unused one at once, so none is left behind.

use crate::MountError;
use rustix::fd::{AsFd, OwnedFd};
use rustix::mount::{
    fsconfig_create, fsconfig_set_flag, fsconfig_set_string, fsmount, fsopen, move_mount,
    FsMountFlags, FsOpenFlags, MountAttrFlags, MoveMountFlags, UnmountFlags,
};
use std::path::{Path, PathBuf};
use std::process::Command;

/// How the kernel is to reach the image and the archive.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Backing {
    /// As files where the kernel can, else through loop devices.
    #[default]
    Auto,
    /// Through loop devices.
    Loop,
}

/// How a mount was made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attached {
    /// The kernel reads the image and the archive as files.
    Files,
    /// Through these loop devices (image, archive), freed on unmount.
    Loop(PathBuf, PathBuf),
}

impl std::fmt::Display for Attached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Attached::Files => f.write_str("file-backed"),
            Attached::Loop(i, a) => write!(f, "loop devices {} and {}", i.display(), a.display()),
        }
    }
}

/// Mounts `image` read-only, `nosuid` and `nodev`, on `mountpoint`, its files' data read
/// from `archive`.
pub fn mount(
    image: &Path,
    archive: &Path,
    mountpoint: &Path,
    backing: Backing,
) -> Result<Attached, MountError> {
    let fail = |e: String| MountError::at(mountpoint, format!("kernel mount: {e}"));
    if backing == Backing::Auto {
        match mount_sources(image, archive, mountpoint) {
            Ok(()) => return Ok(Attached::Files),
            // Where files cannot be mounted, the kernel wants a block device.
            Err((rustix::io::Errno::NOTBLK, _)) => {}
            Err((_, why)) => return Err(fail(why)),
        }
    }
    let img_dev = loop_attach(image).map_err(&fail)?;
    let arc_dev = match loop_attach(archive) {
        Ok(d) => d,
        Err(e) => {
            loop_detach(&img_dev);
            return Err(fail(e));
        }
    };
    let mounted = mount_sources(&img_dev, &arc_dev, mountpoint);
    // Detached at once: in use by the mount, each is freed when it is unmounted.
    loop_detach(&img_dev);
    loop_detach(&arc_dev);
    mounted.map_err(|(_, why)| fail(why))?;
    Ok(Attached::Loop(img_dev, arc_dev))
}

/// One mount of `source` with `device` as its extra device; the error has the kernel's
/// own messages where it gave some.
fn mount_sources(
    source: &Path,
    device: &Path,
    mountpoint: &Path,
) -> Result<(), (rustix::io::Errno, String)> {
    let fs = fsopen("erofs", FsOpenFlags::FSOPEN_CLOEXEC)
        .map_err(|e| (e, format!("the kernel has no EROFS ({e})")))?;
    let said = |e: rustix::io::Errno, fs: &OwnedFd| (e, format!("{e}{}", kernel_log(fs)));
    fsconfig_set_string(&fs, "source", source).map_err(|e| said(e, &fs))?;
    fsconfig_set_string(&fs, "device", device).map_err(|e| said(e, &fs))?;
    fsconfig_set_flag(&fs, "ro").map_err(|e| said(e, &fs))?;
    fsconfig_create(&fs).map_err(|e| said(e, &fs))?;
    let mnt = fsmount(
        &fs,
        FsMountFlags::FSMOUNT_CLOEXEC,
        // An archive is a stranger's: its setuid bits and file capabilities must not
        // take effect, nor its device nodes open (as the FUSE mount says too).
        MountAttrFlags::MOUNT_ATTR_RDONLY
            | MountAttrFlags::MOUNT_ATTR_NOSUID
            | MountAttrFlags::MOUNT_ATTR_NODEV,
    )
    .map_err(|e| said(e, &fs))?;
    move_mount(
        mnt.as_fd(),
        "",
        rustix::fs::CWD,
        mountpoint,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )
    .map_err(|e| (e, e.to_string()))
}

/// The messages the kernel left on a filesystem context (`e erofs: ...` lines).
fn kernel_log(fs: &OwnedFd) -> String {
    let mut out = String::new();
    let mut buf = [0u8; 1024];
    for _ in 0..16 {
        match rustix::io::read(fs, &mut buf) {
            Ok(n) if n > 0 => {
                let line = String::from_utf8_lossy(&buf[..n]);
                // "e erofs: ...": a level letter, then the message.
                let msg = line.split_once(' ').map_or(&*line, |(_, m)| m);
                out.push_str(": ");
                out.push_str(msg.trim());
            }
            _ => break,
        }
    }
    out
}

/// Puts `file` on a free read-only loop device; its path.
fn loop_attach(file: &Path) -> Result<PathBuf, String> {
    let out = Command::new("losetup")
        .args(["--find", "--show", "--read-only"])
        .arg(file)
        .output()
        .map_err(|e| format!("run losetup (util-linux): {e}"))?;
    let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || dev.is_empty() {
        return Err(format!(
            "losetup {}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(PathBuf::from(dev))
}

/// Detaches loop device `dev` (freed now if unused, else when its user lets go).
fn loop_detach(dev: &Path) {
    let _ = Command::new("losetup").arg("--detach").arg(dev).output();
}

/// Unmounts the kernel mount at `mountpoint`; a busy one is refused unless `lazy`
/// (then detached now, let go once unused). Its loop devices, if any, are freed by the
/// kernel as it lets go of them.
pub fn unmount(mountpoint: &Path, lazy: bool) -> Result<(), MountError> {
    let e = match rustix::mount::unmount(mountpoint, UnmountFlags::empty()) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    if e == rustix::io::Errno::BUSY {
        if !lazy {
            return Err(crate::session::busy(mountpoint));
        }
        if rustix::mount::unmount(mountpoint, UnmountFlags::DETACH).is_ok() {
            return Ok(());
        }
    }
    Err(MountError::at(mountpoint, format!("unmount: {e}")))
}
