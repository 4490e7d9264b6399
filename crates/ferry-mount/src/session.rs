//! Mounting and unmounting: the FUSE session runs on its own threads while the caller
//! waits for a request to stop (Ctrl-C, SIGTERM) or for the filesystem to be unmounted
//! from outside (`ferry umount`, `fusermount3 -u`).

use crate::fs::ArchiveFs;
use crate::MountError;
use fuser::{Config, MountOption, Session, SessionACL};
use std::path::Path;
use std::process::Command;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

/// How to mount.
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// Let other users in (`allow_other`; for a user other than root, needs
    /// `user_allow_other` in /etc/fuse.conf).
    pub allow_other: bool,
    /// FUSE threads answering requests.
    pub threads: usize,
    /// What `mount` shows as the source.
    pub fsname: String,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            allow_other: false,
            threads: 4,
            fsname: "ferry".to_string(),
        }
    }
}

/// Mounts `fs` on `mountpoint`, calls `ready` once the kernel has answered the mount,
/// and serves until `stop` receives (or its sender is dropped) or the filesystem is
/// unmounted from outside; then unmounts if still mounted.
pub fn serve(
    fs: ArchiveFs,
    mountpoint: &Path,
    opts: &MountOptions,
    ready: impl FnOnce(),
    stop: Receiver<()>,
) -> Result<(), MountError> {
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::RO,
        MountOption::NoDev,
        MountOption::NoSuid,
        MountOption::DefaultPermissions,
        MountOption::FSName(opts.fsname.clone()),
        MountOption::Subtype("ferry".to_string()),
    ];
    if opts.allow_other {
        config.acl = SessionACL::All;
    }
    config.n_threads = Some(opts.threads.max(1));
    config.clone_fd = true;
    let session = Session::new(fs, mountpoint, &config)
        .map_err(|e| MountError::at(mountpoint, format!("mount: {e}")))?;
    ready();
    let background = session
        .spawn()
        .map_err(|e| MountError::at(mountpoint, format!("start serving: {e}")))?;
    loop {
        match stop.recv_timeout(Duration::from_millis(200)) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                return background
                    .umount_and_join()
                    .map_err(|e| MountError::at(mountpoint, format!("unmount: {e}")));
            }
            Err(RecvTimeoutError::Timeout) if background.guard.is_finished() => {
                return background
                    .join()
                    .map_err(|e| MountError::at(mountpoint, format!("serving: {e}")));
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
}

/// Unmounts the ferry (or any FUSE) filesystem at `mountpoint`, also one whose process
/// has died: `fusermount3 -u` (which an ordinary user may run), lazily (`-z`) if the
/// mount is busy or dead; as root, `umount2` directly when fusermount3 is missing.
pub fn unmount(mountpoint: &Path) -> Result<(), MountError> {
    let mut last = String::new();
    for args in [&["-u"][..], &["-u", "-z"][..]] {
        match Command::new("fusermount3")
            .args(args)
            .arg(mountpoint)
            .output()
        {
            Ok(out) if out.status.success() => return Ok(()),
            Ok(out) => last = String::from_utf8_lossy(&out.stderr).trim().to_string(),
            Err(e) => {
                last = format!("run fusermount3: {e}");
                break;
            }
        }
    }
    if rustix::process::geteuid().is_root() {
        for flags in [
            rustix::mount::UnmountFlags::empty(),
            rustix::mount::UnmountFlags::DETACH,
        ] {
            if rustix::mount::unmount(mountpoint, flags).is_ok() {
                return Ok(());
            }
        }
    }
    Err(MountError::at(mountpoint, format!("unmount: {last}")))
}
