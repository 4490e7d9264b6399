//! Scratch filesystems (loop-mounted images, ramfs), unmounted even when a test fails.
//!
//! The machine has only 8 loop devices, so loop-mounting tests take [`LOOP_LOCK`] for as
//! long as their mount lives, and the [`Mounted`] guard unmounts on drop (lazily if a
//! plain unmount fails) so the device is freed whatever happens.

use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use tempfile::TempDir;

/// Serialises the tests that loop-mount images.
static LOOP_LOCK: Mutex<()> = Mutex::new(());

/// A filesystem mounted on a temporary directory. Fields drop in order: unmount (in
/// `drop`), then the mount point, the image, and last the loop lock.
pub struct Mounted {
    mnt: TempDir,
    _image_dir: Option<TempDir>,
    _lock: Option<MutexGuard<'static, ()>>,
}

impl Mounted {
    /// Where the filesystem is mounted.
    pub fn path(&self) -> &Path {
        self.mnt.path()
    }

    /// Makes the filesystem read-only from now on (`mount -o remount,ro`). `Err` says
    /// why it cannot be done here.
    pub fn remount_read_only(&self) -> Result<(), String> {
        try_run(
            Command::new("mount")
                .args(["-o", "remount,ro"])
                .arg(self.mnt.path()),
        )
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let umount = |args: &[&str]| {
            Command::new("umount")
                .args(args)
                .arg(self.mnt.path())
                .status()
                .is_ok_and(|s| s.success())
        };
        if !umount(&[]) {
            umount(&["-l"]);
        }
    }
}

/// Runs a command, turning failure into the reason a test cannot run here.
fn try_run(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    match cmd.output() {
        Err(e) => Err(format!("cannot run {shown}: {e}")),
        Ok(o) if !o.status.success() => Err(format!(
            "{shown} failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(_) => Ok(()),
    }
}

/// Makes a `size`-byte sparse image, formats it with `mkfs` (`mkfs_args` then the image)
/// and loop-mounts it. `Err` says why it cannot be done here (the caller skips).
pub fn mount_image(size: u64, mkfs: &str, mkfs_args: &[&str]) -> Result<Mounted, String> {
    if !crate::is_root() {
        return Err("needs root to loop-mount".into());
    }
    let lock = LOOP_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let image_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let image = image_dir.path().join("fs.img");
    std::fs::File::create(&image)
        .and_then(|f| f.set_len(size))
        .map_err(|e| format!("make image: {e}"))?;
    try_run(Command::new(mkfs).args(mkfs_args).arg(&image))
        .map_err(|e| format!("{e} (is {mkfs} installed?)"))?;
    let mnt = tempfile::tempdir().map_err(|e| e.to_string())?;
    try_run(
        Command::new("mount")
            .arg("-o")
            .arg("loop")
            .arg(&image)
            .arg(mnt.path()),
    )?;
    Ok(Mounted {
        mnt,
        _image_dir: Some(image_dir),
        _lock: Some(lock),
    })
}

/// Mounts a ramfs, which has no xattrs at all. `Err` says why it cannot be done here.
pub fn mount_ramfs() -> Result<Mounted, String> {
    if !crate::is_root() {
        return Err("needs root to mount a ramfs".into());
    }
    let mnt = tempfile::tempdir().map_err(|e| e.to_string())?;
    try_run(
        Command::new("mount")
            .args(["-t", "ramfs", "ramfs"])
            .arg(mnt.path()),
    )?;
    Ok(Mounted {
        mnt,
        _image_dir: None,
        _lock: None,
    })
}

/// A ramfs bound onto a directory of a tree (a mount point inside it, for
/// `--one-file-system`); unbound, then unmounted, when dropped.
pub struct BoundRamfs {
    at: std::path::PathBuf,
    _ramfs: Mounted,
}

impl Drop for BoundRamfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.at).status();
    }
}

/// Mounts a ramfs and binds it onto the existing directory `at`. `Err` says why it
/// cannot be done here (the caller skips).
pub fn bind_ramfs(at: &Path) -> Result<BoundRamfs, String> {
    let ramfs = mount_ramfs()?;
    try_run(
        Command::new("mount")
            .arg("--bind")
            .arg(ramfs.path())
            .arg(at),
    )?;
    Ok(BoundRamfs {
        at: at.to_path_buf(),
        _ramfs: ramfs,
    })
}
