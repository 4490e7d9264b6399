//! Names Linux allows and tools trip on: bytes that are not UTF-8, newlines, 255-byte
//! names, and paths longer than PATH_MAX (built and compared through directory fds).

use crate::common::build::*;
use crate::common::copy_exact;
use crate::common::fdwalk::{self, at};
use crate::common::{scratch, trees};
use rustix::fs::{AtFlags, Mode, OFlags};
use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

#[test]
fn odd_names_are_copied_byte_for_byte() {
    let s = scratch();
    trees::odd_names(&s.src);
    copy_exact(&s, &[]);
}

/// Makes `levels` nested directories of `len`-byte names below `root` through fds and
/// returns the fd of the deepest one and the length of its path.
fn deep_dirs(root: &Path, levels: usize, len: usize) -> (OwnedFd, usize) {
    let mut fd = fdwalk::open_dir(root);
    let mut path_len = root.as_os_str().len();
    for level in 0..levels {
        let n = format!("{level:03}{}", "d".repeat(len - 3));
        rustix::fs::mkdirat(&fd, n.as_str(), Mode::from_raw_mode(0o755)).expect("mkdirat");
        fd = fdwalk::open_subdir(fd.as_fd(), OsStr::new(&n)).expect("open a deep directory");
        path_len += 1 + n.len();
    }
    (fd, path_len)
}

/// Creates `name` in `dir` with `data`.
fn write_at(dir: &OwnedFd, name: &str, data: &[u8]) {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(0o640))
        .expect("create a deep file");
    std::fs::File::from(fd)
        .write_all(data)
        .expect("write a deep file");
}

#[test]
fn paths_longer_than_path_max_are_copied() {
    let s = scratch();
    write(&s.src.join("top"), b"linked from the bottom");
    let (bottom, path_len) = deep_dirs(&s.src, 40, 200);
    assert!(
        path_len > 8000,
        "the test tree is not deep enough: {path_len} bytes"
    );
    write_at(&bottom, "file", &pattern(1, 70_000));
    rustix::fs::symlinkat("file", &bottom, "link").expect("symlinkat");
    rustix::fs::mkfifoat(&bottom, "fifo", Mode::from_raw_mode(0o600)).expect("mkfifoat");
    let top = fdwalk::open_dir(&s.src);
    rustix::fs::linkat(&top, "top", &bottom, "hardlink_to_top", AtFlags::empty()).expect("linkat");
    set_xattr(
        &at(bottom.as_fd(), OsStr::new("file")),
        "user.deep",
        b"8 KiB down",
    );
    stamp_times(&s.src);
    copy_exact(&s, &[]);
}
