//! A FUSE mount's watchdog: a process of its own that unmounts the mount when the
//! process serving it ends without unmounting it (killed by SIGKILL, or by the OOM
//! killer), so a dead mount ("Transport endpoint is not connected") is never left
//! behind.
//!
//! fusermount3's `auto_unmount` is meant to do this, but before unmounting it opens
//! the mountpoint and leaves the mount alone if that works; once a directory has been
//! listed, the kernel knows this filesystem needs no OPENDIR, so the open succeeds
//! without asking the dead process and the mount stays. The watchdog holds the read
//! end of a pipe whose write end only the serving process has: when the pipe closes
//! (however that process ended), it unmounts the mount it was started for (the same
//! mount id, so a mount made there since is left alone), lazily, since a dead mount
//! serves nobody.

use crate::MountError;
use std::io::Read;
use std::path::Path;

/// The id /proc/self/mountinfo gives the topmost mount at `mountpoint`.
pub fn mount_id(mountpoint: &Path) -> Option<u64> {
    let line = crate::session::mountinfo_of(mountpoint)?;
    let id = line.split(|&b| b == b' ').next()?;
    std::str::from_utf8(id).ok()?.parse().ok()
}

/// Waits until `alive` ends (the serving process's end of the pipe closed), then
/// unmounts `mountpoint` if the mount there is still mount `id`.
pub fn watch(mountpoint: &Path, id: u64, mut alive: impl Read) -> Result<(), MountError> {
    let mut buf = [0u8; 64];
    loop {
        match alive.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    if mount_id(mountpoint) != Some(id) {
        return Ok(());
    }
    crate::session::unmount(mountpoint, true)
}
