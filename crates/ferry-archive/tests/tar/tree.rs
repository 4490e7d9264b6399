//! Source trees for the real tar programs, made in a fresh temporary directory.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, FileExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, Timespec, Timestamps, XattrFlags, CWD};

/// The time every entry gets: nanoseconds that only pax can carry.
pub const MTIME: (i64, u32) = (1_600_000_000, 123_456_789);
/// A file with this name gets a time before 1970 (base-256 in GNU headers).
pub const OLD: &str = "old";
/// Its time.
pub const OLD_MTIME: i64 = -1000;

/// A tree under a temporary directory, deleted on drop.
pub struct Tree {
    _tmp: tempfile::TempDir,
    /// The tree's root directory.
    pub root: PathBuf,
    /// Whether devices could be created (mknod needs privileges).
    pub devices: bool,
}

impl Tree {
    fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("root");
        fs::create_dir(&root).unwrap();
        Tree {
            _tmp: tmp,
            root,
            devices: false,
        }
    }

    /// The absolute path of `rel`.
    pub fn path(&self, rel: &[u8]) -> PathBuf {
        self.root.join(OsStr::from_bytes(rel))
    }

    fn file(&self, rel: &[u8], content: &[u8], mode: u32) {
        let p = self.path(rel);
        fs::write(&p, content).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn dir(&self, rel: &[u8]) {
        fs::create_dir_all(self.path(rel)).unwrap();
    }

    fn sparse(&self, rel: &[u8], size: u64, runs: &[(u64, &[u8])]) {
        let f = fs::File::create(self.path(rel)).unwrap();
        f.set_len(size).unwrap();
        for &(offset, data) in runs {
            f.write_all_at(data, offset).unwrap();
        }
    }

    /// Sets every entry's times to `MTIME` (deepest first, so directories keep theirs),
    /// then the old file's.
    fn set_times(&self) {
        let mut paths = Vec::new();
        walk(&self.root, &mut paths);
        paths.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        for p in paths.iter().chain([&self.root]) {
            set_mtime(p, MTIME.0, MTIME.1);
        }
        let old = self.path(OLD.as_bytes());
        if old.exists() {
            set_mtime(&old, OLD_MTIME, 0);
        }
    }
}

fn set_mtime(p: &Path, secs: i64, nanos: u32) {
    let t = Timespec {
        tv_sec: secs,
        tv_nsec: nanos.into(),
    };
    let times = Timestamps {
        last_access: t,
        last_modification: t,
    };
    rustix::fs::utimensat(CWD, p, &times, AtFlags::SYMLINK_NOFOLLOW).unwrap();
}

/// Every path under `dir`, recursively.
pub fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        out.push(p.clone());
        if fs::symlink_metadata(&p).unwrap().is_dir() {
            walk(&p, out);
        }
    }
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    fastrand::Rng::with_seed(seed.into()).fill(&mut bytes);
    bytes
}

/// Short names only (fits ustar and v7): files of awkward sizes, a directory, a symlink,
/// a hardlink, a fifo, devices, odd modes and owners.
pub fn basic() -> Tree {
    let mut t = Tree::new();
    add_basic(&mut t, true);
    t.set_times();
    t
}

/// `basic` without fifo and devices, which v7 cannot hold.
pub fn v7() -> Tree {
    let mut t = Tree::new();
    add_basic(&mut t, false);
    t.set_times();
    t
}

fn add_basic(t: &mut Tree, specials: bool) {
    t.dir(b"d");
    t.file(b"d/a.txt", b"hello\n", 0o640);
    t.file(b"empty", b"", 0o600);
    t.file(b"block512", &pattern(512, 1), 0o644);
    t.file(b"block513", &pattern(513, 2), 0o644);
    t.file(b"big", &pattern(100_000, 3), 0o755);
    t.file(b"setuid", b"#!/bin/sh\n", 0o4755);
    t.file(b"owned", b"owned\n", 0o604);
    rustix::fs::chownat(
        CWD,
        t.path(b"owned"),
        Some(rustix::process::Uid::from_raw(1234)),
        Some(rustix::process::Gid::from_raw(5678)),
        AtFlags::empty(),
    )
    .unwrap();
    symlink("d/a.txt", t.path(b"link")).unwrap();
    fs::hard_link(t.path(b"d/a.txt"), t.path(b"hard")).unwrap();
    if !specials {
        return;
    }
    rustix::fs::mknodat(
        CWD,
        t.path(b"fifo"),
        FileType::Fifo,
        Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    t.devices = make_device(t, b"cdev", FileType::CharacterDevice, 1, 3)
        && make_device(t, b"bdev", FileType::BlockDevice, 7, 0);
}

fn make_device(t: &Tree, rel: &[u8], kind: FileType, major: u32, minor: u32) -> bool {
    let dev = rustix::fs::makedev(major, minor);
    match rustix::fs::mknodat(CWD, t.path(rel), kind, Mode::from_raw_mode(0o640), dev) {
        Ok(()) => true,
        Err(e) => {
            ferry_testkit::skip(&format!("no devices in the tree: mknod: {e}"));
            false
        }
    }
}

/// A path component of `n` bytes of `c`.
fn long(c: u8, n: usize) -> Vec<u8> {
    vec![c; n]
}

/// The path of the >255-byte file.
pub fn deep_path() -> Vec<u8> {
    [
        long(b'x', 90),
        long(b'y', 90),
        long(b'z', 90),
        b"f".to_vec(),
    ]
    .join(&b'/')
}

/// Everything of `basic`, plus names over 100 and 255 bytes, non-UTF-8 names, a long
/// symlink target, xattrs, a uid too large for octal, a time before 1970.
pub fn full() -> Tree {
    let mut t = Tree::new();
    add_basic(&mut t, true);
    let mut name100 = b"d/".to_vec();
    name100.extend(long(b'n', 120));
    t.file(&name100, b"long name\n", 0o644);
    let deep = deep_path();
    t.dir(&deep[..deep.len() - 2]);
    t.file(&deep, b"deep\n", 0o644);
    t.file(b"caf\xe9", b"latin-1 name\n", 0o644);
    t.dir(b"\xff\xfe dir");
    t.file(b"\xff\xfe dir/\x01\x7f ctl", b"control chars\n", 0o644);
    symlink(OsStr::from_bytes(&deep), t.path(b"longlink")).unwrap();
    t.file(b"biguid", b"big ids\n", 0o644);
    rustix::fs::chownat(
        CWD,
        t.path(b"biguid"),
        Some(rustix::process::Uid::from_raw(3_000_000)),
        Some(rustix::process::Gid::from_raw(3_000_001)),
        AtFlags::empty(),
    )
    .unwrap();
    t.file(OLD.as_bytes(), b"before 1970\n", 0o644);
    let xf = t.path(b"d/a.txt");
    rustix::fs::lsetxattr(&xf, "user.test", b"value", XattrFlags::empty()).unwrap();
    rustix::fs::lsetxattr(&xf, "user.bin", b"\0\x01\xffz\n=", XattrFlags::empty()).unwrap();
    rustix::fs::lsetxattr(&xf, "user.pct% sp", b"", XattrFlags::empty()).unwrap();
    t.set_times();
    t
}

/// Sparse files: holes at the start, middle and end, a file that is all hole, and one
/// with 60 runs (more than an old GNU header and one extension block hold).
pub fn sparse() -> Tree {
    let t = Tree::new();
    let block = pattern(4096, 9);
    t.sparse(
        b"middle",
        1 << 20,
        &[(0, &block), (700_000, b"end of middle run")],
    );
    t.sparse(b"hole_start", 3 << 20, &[(2 << 20, &block)]);
    t.sparse(b"hole_end", 5 << 20, &[(0, &block)]);
    t.sparse(b"all_hole", 1 << 20, &[]);
    let many: Vec<(u64, &[u8])> = (0..60u64)
        .map(|i| (i * 65536, &block[..100 + i as usize]))
        .collect();
    t.sparse(b"many", 60 * 65536, &many);
    t.file(b"dense", &pattern(10_000, 4), 0o644);
    t.set_times();
    t
}

/// A small tree with one of everything but sparse files, for seed archives of a few KiB.
pub fn tiny() -> Tree {
    let t = Tree::new();
    t.dir(b"d");
    t.file(b"d/a.txt", b"hello\n", 0o640);
    let mut name = b"d/".to_vec();
    name.extend(long(b'n', 120));
    t.file(&name, b"long\n", 0o644);
    let deep = deep_path();
    t.dir(&deep[..deep.len() - 2]);
    t.file(&deep, b"deep\n", 0o644);
    t.file(b"caf\xe9", b"x", 0o644);
    symlink("d/a.txt", t.path(b"link")).unwrap();
    fs::hard_link(t.path(b"d/a.txt"), t.path(b"hard")).unwrap();
    rustix::fs::mknodat(
        CWD,
        t.path(b"fifo"),
        FileType::Fifo,
        Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    rustix::fs::lsetxattr(t.path(b"d/a.txt"), "user.k", b"v\0", XattrFlags::empty()).unwrap();
    t.set_times();
    t
}

/// One small sparse file (data, hole, data), for seed archives.
pub fn tiny_sparse() -> Tree {
    let t = Tree::new();
    t.sparse(b"sp", 12288, &[(0, b"head"), (8192, b"tail")]);
    t.set_times();
    t
}
