//! Making source trees: files with known content, every kind of entry, exact times.
//!
//! Every helper panics with the path and the OS error when it fails: a test tree that
//! cannot be made is a broken test, not a ferry bug.

use super::fdwalk;
use rustix::fs::{AtFlags, FileType, Gid, Mode, Timespec, Timestamps, Uid, XattrFlags, CWD};
use std::ffi::OsStr;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// `len` pseudo-random bytes, the same for the same `seed`.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    fastrand::Rng::with_seed(seed).fill(&mut bytes);
    bytes
}

/// Creates (or truncates) `path` with `data`.
pub fn write(path: &Path, data: &[u8]) {
    std::fs::write(path, data).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// Creates `path` and its missing parents.
pub fn mkdirs(path: &Path) {
    std::fs::create_dir_all(path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
}

/// Sets the permission bits (including setuid/setgid/sticky) of a non-symlink.
pub fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {:o} {}: {e}", mode, path.display()));
}

/// Makes the symlink `link` pointing at `target` (which need not exist).
pub fn symlink(target: impl AsRef<Path>, link: &Path) {
    std::os::unix::fs::symlink(target.as_ref(), link)
        .unwrap_or_else(|e| panic!("symlink {}: {e}", link.display()));
}

/// Gives `existing` the extra name `new`.
pub fn hardlink(existing: &Path, new: &Path) {
    std::fs::hard_link(existing, new).unwrap_or_else(|e| panic!("link {}: {e}", new.display()));
}

/// Makes a fifo.
pub fn fifo(path: &Path) {
    rustix::fs::mkfifoat(CWD, path, Mode::from_raw_mode(0o640))
        .unwrap_or_else(|e| panic!("mkfifo {}: {e}", path.display()));
}

/// Makes a character or block device node (root only).
pub fn device(path: &Path, kind: FileType, major: u32, minor: u32) {
    let dev = rustix::fs::makedev(major, minor);
    rustix::fs::mknodat(CWD, path, kind, Mode::from_raw_mode(0o660), dev)
        .unwrap_or_else(|e| panic!("mknod {}: {e}", path.display()));
}

/// Changes owner and group without following a symlink (root only).
pub fn chown(path: &Path, uid: u32, gid: u32) {
    rustix::fs::chownat(
        CWD,
        path,
        Some(Uid::from_raw(uid)),
        Some(Gid::from_raw(gid)),
        AtFlags::SYMLINK_NOFOLLOW,
    )
    .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
}

/// Sets an extended attribute without following a symlink.
pub fn set_xattr(path: &Path, name: &str, value: &[u8]) {
    rustix::fs::lsetxattr(path, name, value, XattrFlags::empty())
        .unwrap_or_else(|e| panic!("setxattr {name} {}: {e}", path.display()));
}

/// A timestamp from seconds and nanoseconds.
pub fn ts(sec: i64, nsec: i64) -> Timespec {
    Timespec {
        tv_sec: sec,
        tv_nsec: nsec,
    }
}

/// Sets atime and mtime of `name` in `dir`, without following a symlink.
pub fn set_times_at(dir: BorrowedFd<'_>, name: &OsStr, atime: Timespec, mtime: Timespec) {
    let times = Timestamps {
        last_access: atime,
        last_modification: mtime,
    };
    rustix::fs::utimensat(dir, name, &times, AtFlags::SYMLINK_NOFOLLOW)
        .unwrap_or_else(|e| panic!("utimensat {}: {e}", name.to_string_lossy()));
}

/// Sets atime and mtime of `path`, without following a symlink.
pub fn set_times(path: &Path, atime: Timespec, mtime: Timespec) {
    set_times_at(CWD, path.as_os_str(), atime, mtime);
}

/// Gives `path` the atime and mtime `times` had (a `stat` taken earlier).
pub fn restore_times(path: &Path, times: &std::fs::Metadata) {
    use std::os::unix::fs::MetadataExt;
    set_times(
        path,
        ts(times.atime(), times.atime_nsec()),
        ts(times.mtime(), times.mtime_nsec()),
    );
}

/// The distinct, odd-nanosecond (atime, mtime) pair that [`stamp_times`] gives entry `n`.
pub fn stamp(n: i64) -> (Timespec, Timespec) {
    let mtime = ts(
        1_500_000_000 + n * 1_000,
        (n * 7_919 + 123_456_789) % 1_000_000_000,
    );
    let atime = ts(
        1_400_000_000 + n * 1_000,
        (n * 104_729 + 987_654_321) % 1_000_000_000,
    );
    (atime, mtime)
}

/// Gives every entry of the tree at `root`, and `root` itself, its own atime and mtime
/// with nanoseconds, directories after their children. The times depend only on the
/// sorted order of names, so two trees built the same way get the same times.
pub fn stamp_times(root: &Path) {
    let fd = fdwalk::open_dir(root);
    let mut n = 0;
    fdwalk::walk_post_order(fd.as_fd(), b"", &mut |dir, name, _| {
        n += 1;
        let (atime, mtime) = stamp(n);
        set_times_at(dir, name, atime, mtime);
    });
    let (atime, mtime) = stamp(n + 1);
    set_times_at(fd.as_fd(), OsStr::new("."), atime, mtime);
}

/// Gives every directory below `root` mode 0755 (top down, not following symlinks),
/// so that the tree can be removed without root. Failures are ignored.
pub fn make_removable(root: &Path) {
    fn open_up(dir: BorrowedFd<'_>) {
        let Ok(entries) = std::fs::read_dir(fdwalk::at(dir, OsStr::new("."))) else {
            return;
        };
        for name in entries.filter_map(|e| Some(e.ok()?.file_name())) {
            if fdwalk::is_dir(dir, &name) {
                let _ =
                    rustix::fs::chmodat(dir, &name, Mode::from_raw_mode(0o755), AtFlags::empty());
                if let Ok(sub) = fdwalk::open_subdir(dir, &name) {
                    open_up(sub.as_fd());
                }
            }
        }
    }
    open_up(fdwalk::open_dir(root).as_fd());
}

/// Creates a file of `size` bytes whose only data is `extents` (offset, bytes): the
/// rest are holes.
pub fn sparse_file(path: &Path, size: u64, extents: &[(u64, &[u8])]) {
    let mut f = File::create(path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    for (offset, data) in extents {
        f.seek(SeekFrom::Start(*offset)).expect("seek");
        f.write_all(data).expect("write extent");
    }
    f.set_len(size).expect("set_len");
}

/// Allocated size of `path` in bytes (`st_blocks * 512`), after flushing delayed
/// allocation so the number is final.
pub fn allocated(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    File::open(path)
        .and_then(|f| f.sync_all())
        .unwrap_or_else(|e| panic!("fsync {}: {e}", path.display()));
    std::fs::symlink_metadata(path).expect("stat").blocks() * 512
}

/// `p` named with a trailing slash (`DST/`, as rsync and cp read it).
pub fn with_slash(p: &Path) -> std::path::PathBuf {
    let mut named = p.as_os_str().to_owned();
    named.push("/");
    named.into()
}
