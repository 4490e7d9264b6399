//! Opening directories of a tree from a descriptor, one plain name at a time, never
//! through a symlink unless asked (`-L`).

use crate::entry::RelPath;
use rustix::fs::{self as rfs, Mode, OFlags};
use std::ffi::{CStr, CString};
use std::os::fd::OwnedFd;

/// Opens the directory `name` in `parent`, never through a symlink (as the walk opens
/// source directories too).
pub(crate) fn open_dir(parent: &OwnedFd, name: &CStr) -> rustix::io::Result<OwnedFd> {
    rfs::openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Opens the directory `name` in `parent`, or the one it points to if it is a symlink
/// (`-L`).
pub(crate) fn open_dir_following(parent: &OwnedFd, name: &CStr) -> rustix::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    rfs::openat(parent, name, flags, Mode::empty())
}

/// Opens the directory `dir` of the tree whose root is open as `root`, each component
/// from the one above without following a symlink: `None` where one is missing or is
/// not a directory (nothing of the tree is there). `dir` must be made of plain names
/// (see [`is_plain`]).
pub fn open_below(root: &OwnedFd, dir: &RelPath) -> rustix::io::Result<Option<OwnedFd>> {
    let mut at = rustix::io::fcntl_dupfd_cloexec(root, 0)?;
    if dir.is_root() {
        return Ok(Some(at));
    }
    for name in dir.as_bytes().split(|&b| b == b'/') {
        let name = CString::new(name).map_err(|_| rustix::io::Errno::INVAL)?;
        at = match open_dir(&at, &name) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP) => {
                return Ok(None)
            }
            Err(e) => return Err(e),
        };
    }
    Ok(Some(at))
}

/// Whether `path` is a relative path of plain names below a tree's root: not the root
/// itself, no empty, `.` or `..` component, no NUL. A path another ferry sends is
/// used only if it is.
pub fn is_plain(path: &RelPath) -> bool {
    let plain = |c: &[u8]| !c.is_empty() && c != b"." && c != b".." && !c.contains(&0);
    !path.is_root() && path.as_bytes().split(|&b| b == b'/').all(plain)
}
