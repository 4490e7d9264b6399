//! A FUSE mount's watchdog: a process of its own that unmounts the mount when the
//! process serving it ends without unmounting it (killed by SIGKILL, or by the OOM
//! killer), so a dead mount ("Transport endpoint is not connected") is never left
//! behind.
//!
//! fusermount3's `auto_unmount` is meant to do this, but before unmounting it opens
//! the mountpoint and leaves the mount alone if that works; once a directory has been
//! listed, the kernel knows this filesystem needs no OPENDIR, so the open succeeds
//! without asking the dead process and the mount stays. The watchdog holds the read
//! end of a pipe whose write end only the serving process has. A process that ends
//! well writes [`DONE`] to it once it has unmounted; when the pipe closes without it
//! (however that process ended), the watchdog unmounts the mount it was started for,
//! lazily (a dead mount serves nobody), if that mount is still there (the same mount
//! id) and dead (`statfs` answers "not connected"), so a mount made there since, which
//! may have been given the same id, is left alone.

use crate::MountError;
use std::io::Read;
use std::path::Path;

/// The id /proc/self/mountinfo gives the topmost mount at `mountpoint`.
pub fn mount_id(mountpoint: &Path) -> Option<u64> {
    let line = crate::session::mountinfo_of(mountpoint)?;
    let id = line.split(|&b| b == b' ').next()?;
    std::str::from_utf8(id).ok()?.parse().ok()
}

/// What the serving process writes to the watchdog's pipe once it has unmounted.
pub const DONE: &[u8] = b"done\n";

/// Waits until `alive` ends (the serving process's end of the pipe closed); then, if
/// it ended without [`DONE`], unmounts `mountpoint` if the mount there is still mount
/// `id` and dead.
pub fn watch(mountpoint: &Path, id: u64, mut alive: impl Read) -> Result<(), MountError> {
    let mut buf = [0u8; 64];
    let mut said = 0;
    loop {
        match alive.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => said += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    if said > 0 {
        return Ok(());
    }
    // The connection may outlive the server a moment: a helper that still holds the
    // FUSE device (fusermount3, watching for auto_unmount) keeps it up until it exits.
    // So the mount is watched a little longer for its death, never past DEAD_WITHIN
    // (seen in CI: one check right away found it alive, and it died just after).
    let dead = || rustix::fs::statfs(mountpoint).err() == Some(rustix::io::Errno::NOTCONN);
    let until = std::time::Instant::now() + DEAD_WITHIN;
    loop {
        if mount_id(mountpoint) != Some(id) {
            return Ok(());
        }
        if dead() {
            return crate::session::unmount(mountpoint, true);
        }
        if std::time::Instant::now() >= until {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// How long after its server ended a mount may take to die for the watchdog to take it
/// down.
const DEAD_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);
