//! Opening regular files as the walk does.

use rustix::fs::{self as rfs, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::CStr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// Opens regular files for reading as the walk does: relative to their directory,
/// never following a symlink, not hanging on a fifo swapped in for the file
/// (`O_NONBLOCK`), and without touching their atime where the kernel allows it
/// (`O_NOATIME` needs ownership or root; after one refusal it is not asked for again).
#[derive(Default)]
pub struct FileOpener {
    noatime_refused: AtomicBool,
}

impl FileOpener {
    /// Opens `name` in `dir`.
    pub fn open(&self, dir: impl AsFd, name: &CStr) -> rustix::io::Result<OwnedFd> {
        self.open_with(dir, name, OFlags::NOFOLLOW)
    }

    /// Opens `name` in `dir`, following it if it is a symlink (`-L`).
    pub fn open_following(&self, dir: impl AsFd, name: &CStr) -> rustix::io::Result<OwnedFd> {
        self.open_with(dir, name, OFlags::empty())
    }

    fn open_with(&self, dir: impl AsFd, name: &CStr, more: OFlags) -> rustix::io::Result<OwnedFd> {
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | more;
        if !self.noatime_refused.load(Ordering::Relaxed) {
            match rfs::openat(&dir, name, flags | OFlags::NOATIME, Mode::empty()) {
                Err(Errno::PERM) => self.noatime_refused.store(true, Ordering::Relaxed),
                other => return other,
            }
        }
        rfs::openat(dir, name, flags, Mode::empty())
    }
}
