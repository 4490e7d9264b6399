//! Scratch filesystems on loop devices, unmounted even when a test fails.
//!
//! The machine has only 8 loop devices, so loop-mounting tests take [`LOOP_LOCK`] for as
//! long as their mount lives, and the [`Mounted`] guard unmounts on drop (lazily if a
//! plain unmount fails) so the device is freed whatever happens.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use tempfile::TempDir;

/// Serialises the tests that loop-mount images.
static LOOP_LOCK: Mutex<()> = Mutex::new(());

/// A filesystem image mounted on a temporary directory.
pub struct Mounted {
    mnt: TempDir,
    _image_dir: TempDir,
    _lock: MutexGuard<'static, ()>,
}

impl Mounted {
    /// Where the filesystem is mounted.
    pub fn path(&self) -> &Path {
        self.mnt.path()
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let ok = Command::new("umount").arg(self.mnt.path()).status().is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(self.mnt.path()).status();
        }
    }
}

/// Makes a `size`-byte sparse image, formats it with `mkfs` (`mkfs_args` then the image),
/// and loop-mounts it. `Err` says why it cannot be done here (the caller skips).
pub fn mount_image(size: u64, mkfs: &str, mkfs_args: &[&str]) -> Result<Mounted, String> {
    if !super::is_root() {
        return Err("needs root to loop-mount".into());
    }
    let lock = LOOP_LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let image_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let image: PathBuf = image_dir.path().join("fs.img");
    std::fs::File::create(&image).and_then(|f| f.set_len(size)).map_err(|e| format!("make image: {e}"))?;
    match Command::new(mkfs).args(mkfs_args).arg(&image).output() {
        Err(e) => return Err(format!("{mkfs} not available ({e}); install it (xfsprogs/btrfs-progs)")),
        Ok(o) if !o.status.success() => return Err(format!("{mkfs} failed: {}", String::from_utf8_lossy(&o.stderr))),
        Ok(_) => {}
    }
    let mnt = tempfile::tempdir().map_err(|e| e.to_string())?;
    let out = Command::new("mount").arg("-o").arg("loop").arg(&image).arg(mnt.path()).output();
    match out {
        Ok(o) if o.status.success() => Ok(Mounted { mnt, _image_dir: image_dir, _lock: lock }),
        Ok(o) => Err(format!("mount -o loop failed: {}", String::from_utf8_lossy(&o.stderr).trim())),
        Err(e) => Err(format!("cannot run mount: {e}")),
    }
}
