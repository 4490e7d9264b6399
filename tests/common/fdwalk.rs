//! Reaching entries through directory fds instead of full paths.
//!
//! Every entry is named by an open directory fd and a name in it. For calls that only
//! take paths (lstat, readlink, the xattr calls) the pair becomes
//! `/proc/self/fd/<dirfd>/<name>`, which stays short however deep the directory is.

use rustix::fs::{Mode, OFlags};
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Opens a directory by path, without following a final symlink.
pub fn open_dir(path: &Path) -> OwnedFd {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::open(path, flags, Mode::empty())
        .unwrap_or_else(|e| panic!("open directory {}: {e}", path.display()))
}

/// Opens the directory `name` inside `dir`, without following a symlink.
pub fn open_subdir(dir: BorrowedFd<'_>, name: &OsStr) -> std::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(dir, name, flags, Mode::empty())?)
}

/// A short path naming `name` inside the open directory `dir`.
pub fn at(dir: BorrowedFd<'_>, name: &OsStr) -> PathBuf {
    let mut p = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    p.push(name);
    p
}

/// The names in an open directory, sorted by bytes, without `.` and `..`.
pub fn names(dir: BorrowedFd<'_>) -> Vec<OsString> {
    let path = at(dir, OsStr::new("."));
    let mut out: Vec<OsString> = std::fs::read_dir(&path)
        .unwrap_or_else(|e| panic!("read_dir {}: {e}", path.display()))
        .map(|e| e.expect("read directory entry").file_name())
        .collect();
    out.sort();
    out
}

/// Whether `name` in `dir` is a directory (not a symlink to one).
pub fn is_dir(dir: BorrowedFd<'_>, name: &OsStr) -> bool {
    std::fs::symlink_metadata(at(dir, name)).is_ok_and(|m| m.is_dir())
}

/// `rel/name` as bytes (just `name` at the top).
pub fn join(rel: &[u8], name: &OsStr) -> Vec<u8> {
    if rel.is_empty() {
        return name.as_bytes().to_vec();
    }
    let mut out = rel.to_vec();
    out.push(b'/');
    out.extend_from_slice(name.as_bytes());
    out
}

/// A relative path for messages: `.` for the top, bytes that are not printable ASCII
/// escaped (`\n`, `\xe9`).
pub fn show(rel: &[u8]) -> String {
    if rel.is_empty() {
        ".".to_string()
    } else {
        rel.escape_ascii().to_string()
    }
}

/// Calls `visit(dir, name, rel)` for every entry below `dir`, children before their
/// directory (so a visitor may change a directory's times after its children).
pub fn walk_post_order(
    dir: BorrowedFd<'_>,
    rel: &[u8],
    visit: &mut dyn FnMut(BorrowedFd<'_>, &OsStr, &[u8]),
) {
    for name in names(dir) {
        let child_rel = join(rel, &name);
        if is_dir(dir, &name) {
            let sub = open_subdir(dir, &name).expect("open subdirectory");
            walk_post_order(sub.as_fd(), &child_rel, visit);
        }
        visit(dir, &name, &child_rel);
    }
}
