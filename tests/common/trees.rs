//! Ready-made source trees (mixed kinds, deep, odd names, paths beyond PATH_MAX), and the
//! counts `ferry copy --json` should report for a tree.

use super::build::*;
use super::fdwalk;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use std::collections::HashSet;
use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Every kind of entry ([`mixed`]), odd names, and two sparse files (a hole in the
/// middle, all hole) below `root`, times stamped: the tree endpoint tests send around.
pub fn every_kind(root: &Path) {
    const MIB: u64 = 1 << 20;
    mixed(&root.join("mixed"));
    mkdirs(&root.join("odd"));
    odd_names(&root.join("odd"));
    let a = pattern(1, MIB as usize);
    sparse_file(
        &root.join("middle_hole"),
        40 * MIB,
        &[(0, &a), (39 * MIB, &a)],
    );
    sparse_file(&root.join("all_hole"), 8 * MIB, &[]);
    stamp_times(root);
}

/// Sizes around the page size, plus one past a MiB.
pub const SIZES: [usize; 6] = [0, 1, 4095, 4096, 4097, (1 << 20) + 3];

/// 2,000 small files in 70 directories 10 levels down (`a0..a9/b0..b6/c/d/e/f/g/h`):
/// a walk keeps a chain of directories open for each worker, so this tree needs many
/// descriptors at once. Times are stamped last.
pub fn deep(root: &Path) {
    for i in 0..2000u64 {
        let dir = root.join(format!("a{}/b{}/c/d/e/f/g/h", i % 10, i % 7));
        mkdirs(&dir);
        write(&dir.join(format!("f{i:04}")), &pattern(i, 300));
    }
    stamp_times(root);
}

/// A tree with every kind a non-root user can make and most metadata: files of the
/// sizes in [`SIZES`], empty files, nested directories, a 0500 directory with children,
/// setuid/setgid files, sticky and setgid directories, an empty directory, a fifo,
/// relative/absolute/dangling symlinks, a file with three names in three directories,
/// two names in one directory, two separate identical files, and user.* xattrs on files
/// and directories. Times are stamped last. Identical for identical calls.
pub fn mixed(root: &Path) {
    mkdirs(root);
    for (i, size) in SIZES.iter().enumerate() {
        write(&root.join(format!("size{size}")), &pattern(i as u64, *size));
    }
    write(&root.join("empty"), b"");
    write(&root.join("one"), b"1");
    write(&root.join("twin_a"), b"same content");
    write(&root.join("twin_b"), b"same content");
    for (name, mode) in [
        ("setuid", 0o4755),
        ("setgid", 0o2711),
        ("private", 0o600),
        ("readable", 0o444),
    ] {
        write(&root.join(name), name.as_bytes());
        chmod(&root.join(name), mode);
    }
    mkdirs(&root.join("a/b/c/d"));
    mkdirs(&root.join("emptydir"));
    write(&root.join("a/b/c/d/deep.txt"), b"deep");
    write(&root.join("a/b/sibling"), &pattern(99, 10_000));
    fifo(&root.join("fifo"));
    symlink("one", &root.join("link_rel"));
    symlink("a/b/../b/c", &root.join("link_dir"));
    symlink("/etc/hostname", &root.join("link_abs"));
    symlink("no/such/file", &root.join("link_dangling"));
    write(&root.join("hard1"), b"three names");
    hardlink(&root.join("hard1"), &root.join("a/hard2"));
    hardlink(&root.join("hard1"), &root.join("a/b/hard3"));
    write(&root.join("pair_x"), b"two names");
    hardlink(&root.join("pair_x"), &root.join("pair_y"));
    // Other kinds have more than one name too, and `cp -a` keeps those links.
    hardlink(&root.join("link_rel"), &root.join("a/link_twin"));
    hardlink(&root.join("fifo"), &root.join("a/b/fifo_twin"));
    set_xattr(&root.join("one"), "user.test", b"value");
    set_xattr(&root.join("size4095"), "user.empty", b"");
    set_xattr(
        &root.join("size4095"),
        "user.binary",
        &[0, 1, 2, 255, b'\n'],
    );
    set_xattr(&root.join("a"), "user.dir", b"on a directory");
    set_xattr(&root.join("hard1"), "user.linked", b"shared by three names");
    special_dirs(root);
    stamp_times(root);
}

fn name(bytes: &[u8]) -> &OsStr {
    OsStr::from_bytes(bytes)
}

/// Names as bytes, every one a file with its own content.
const ODD: &[&[u8]] = &[
    b"caf\xe9",
    b"\xff\xfe\xfd",
    b"new\nline",
    b"\n",
    b"tab\there",
    b" leading space",
    b"trailing space ",
    b"-rf",
    b"--json",
    b"back\\slash",
    b"quotes\"'`",
    b"crab \xf0\x9f\xa6\x80",
    b"*?[glob]",
];

/// `len` bytes of name made of `unit` repeated (cut to a whole number of units).
fn long_name(unit: &[u8], len: usize) -> Vec<u8> {
    unit.repeat(len / unit.len())
}

/// Names Linux allows and tools trip on, all below `root`: bytes that are not UTF-8,
/// newlines and other characters shells and tar treat specially, 255-byte names (of
/// one-byte, two-byte and non-UTF-8 characters), a long non-UTF-8 directory, a hardlink
/// and symlinks with such names and targets, and an xattr on one. Times are stamped last.
pub fn odd_names(root: &Path) {
    for (i, n) in ODD.iter().enumerate() {
        write(&root.join(name(n)), &pattern(i as u64, 100 + i));
    }
    let long_file = long_name(b"f", 255);
    let long_dir = long_name(b"d", 255);
    let long_utf8 = long_name("\u{e9}".as_bytes(), 255);
    let long_latin1 = long_name(b"\xe9", 255);
    write(&root.join(name(&long_file)), b"255-byte name");
    write(
        &root.join(name(&long_utf8)),
        b"254 bytes of two-byte characters",
    );
    write(
        &root.join(name(&long_latin1)),
        b"255 bytes that are not UTF-8",
    );
    let dir = root.join(name(&long_dir)).join(name(b"sub\xff\ndir"));
    mkdirs(&dir);
    write(&dir.join(name(&long_file)), b"two long components");
    hardlink(&dir.join(name(&long_file)), &root.join(name(b"link\xe9\n")));
    symlink(name(b"caf\xe9"), &root.join(name(b"sym\xfe")));
    symlink(name(&long_latin1), &root.join(name(b"long\xfetarget")));
    sparse_file(
        &root.join(name(b"sparse\xe9")),
        1 << 20,
        &[(512 << 10, b"middle")],
    );
    symlink(name(&long_dir), &dir.join(name(b"up\nlink")));
    set_xattr(
        &root.join(name(b"new\nline")),
        "user.odd",
        b"xattr on an odd name",
    );
    stamp_times(root);
}

/// Below `root`: 40 nested directories of 200-byte names (a path over 8,000 bytes, twice
/// PATH_MAX), made through directory fds, holding a 70,000-byte file with an xattr, a
/// symlink, a fifo and a hardlink to `root/top`. Times are stamped last. Returns the
/// deep file's path relative to `root`.
pub fn beyond_path_max(root: &Path) -> std::path::PathBuf {
    write(&root.join("top"), b"linked from the bottom");
    let (bottom, path_len) = deep_dirs(root, 40, 200);
    assert!(
        path_len > 8000,
        "the test tree is not deep enough: {path_len} bytes"
    );
    write_at(&bottom, "file", &pattern(1, 70_000));
    rustix::fs::symlinkat("file", &bottom, "link").expect("symlinkat");
    rustix::fs::mkfifoat(&bottom, "fifo", Mode::from_raw_mode(0o600)).expect("mkfifoat");
    let top = fdwalk::open_dir(root);
    rustix::fs::linkat(&top, "top", &bottom, "hardlink_to_top", AtFlags::empty()).expect("linkat");
    set_xattr(
        &fdwalk::at(bottom.as_fd(), OsStr::new("file")),
        "user.deep",
        b"8 KiB down",
    );
    stamp_times(root);
    let mut deep = std::path::PathBuf::new();
    for level in 0..40 {
        deep.push(deep_name(level, 200));
    }
    deep.join("file")
}

/// Below `root`: a chain of `levels` directories named `dir`, one inside the other
/// (2,000 of them make a path of 8,000 bytes, twice PATH_MAX), made through directory
/// fds. Each holds a small file `f` besides the next directory, and a directory `side`
/// with a file in it, made first: where inode numbers grow, a walk that takes the
/// highest first goes down the chain and leaves every `side` waiting. The directory
/// halfway down is read-only (0500) with the chain going on below it; the deepest holds
/// a file with an xattr, a setuid file, a symlink and a read-only directory with a file
/// in it. Times are stamped last; stamping recurses once per level, so call it on a
/// thread with a stack to match (see the deep-tree tests).
pub fn chain(root: &Path, levels: usize) {
    let mut fd = fdwalk::open_dir(root);
    let mut read_only = Vec::new();
    for level in 0..levels {
        rustix::fs::mkdirat(&fd, "side", Mode::from_raw_mode(0o755)).expect("mkdirat side");
        let side = fdwalk::open_subdir(fd.as_fd(), OsStr::new("side")).expect("open side");
        write_at(&side, "g", &pattern(level as u64 + 1, 10));
        write_at(&fd, "f", &pattern(level as u64, 20 + level % 50));
        rustix::fs::mkdirat(&fd, "dir", Mode::from_raw_mode(0o755)).expect("mkdirat");
        let below = fdwalk::open_subdir(fd.as_fd(), OsStr::new("dir")).expect("open a level");
        if level == levels / 2 {
            read_only.push(below.try_clone().expect("dup"));
        }
        fd = below;
    }
    write_at(&fd, "xattr", b"at the bottom");
    set_xattr(
        &fdwalk::at(fd.as_fd(), OsStr::new("xattr")),
        "user.deep",
        b"2,000 levels down",
    );
    write_at(&fd, "setuid", b"odd mode");
    rustix::fs::chmodat(&fd, "setuid", Mode::from_raw_mode(0o4710), AtFlags::empty())
        .expect("chmod setuid");
    rustix::fs::symlinkat("xattr", &fd, "link").expect("symlinkat");
    rustix::fs::mkdirat(&fd, "ro", Mode::from_raw_mode(0o755)).expect("mkdirat ro");
    let ro = fdwalk::open_subdir(fd.as_fd(), OsStr::new("ro")).expect("open ro");
    write_at(&ro, "inside", b"in a read-only directory");
    read_only.push(ro);
    for dir in read_only {
        rustix::fs::fchmod(&dir, Mode::from_raw_mode(0o500)).expect("chmod 0500");
    }
    stamp_times(root);
}

/// The name of the directory at depth `level` in [`beyond_path_max`].
fn deep_name(level: usize, len: usize) -> String {
    format!("{level:03}{}", "d".repeat(len - 3))
}

/// Makes `levels` nested directories of `len`-byte names below `root` through fds and
/// returns the fd of the deepest one and the length of its path.
fn deep_dirs(root: &Path, levels: usize, len: usize) -> (OwnedFd, usize) {
    let mut fd = fdwalk::open_dir(root);
    let mut path_len = root.as_os_str().len();
    for level in 0..levels {
        let n = deep_name(level, len);
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

/// Puts other kinds in the way of what [`mixed`] has, in `dst`, a copy of it: a
/// symlink to `outside` where a directory with children is (`a/b`), a file where a
/// directory is (`sticky`), an empty directory where a symlink is (`link_rel`), and a
/// directory that is not empty where a file is (`one`).
pub fn other_kinds_in_the_way(dst: &Path, outside: &Path) {
    std::fs::remove_dir_all(dst.join("a/b")).expect("remove a/b");
    symlink(outside, &dst.join("a/b"));
    std::fs::remove_dir_all(dst.join("sticky")).expect("remove sticky");
    write(&dst.join("sticky"), b"a file where a directory was");
    std::fs::remove_file(dst.join("link_rel")).expect("remove link_rel");
    mkdirs(&dst.join("link_rel"));
    std::fs::remove_file(dst.join("one")).expect("remove one");
    mkdirs(&dst.join("one/full"));
}

/// Checks what a run of ferry (`r`) over [`other_kinds_in_the_way`] did: everything
/// replaced but the directory that is not empty, which is an error naming it; and
/// nothing written through the symlink.
pub fn assert_replaced_but_the_full_directory(
    r: &super::run::Run,
    src: &Path,
    dst: &Path,
    outside: &Path,
) {
    assert_eq!(r.status, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("one: replace: a directory that is not empty is in the way"),
        "{}",
        r.stderr
    );
    let written_outside: Vec<_> = std::fs::read_dir(outside).expect("list").collect();
    assert!(
        written_outside.is_empty(),
        "written through a/b: {written_outside:?}"
    );
    let diffs = super::compare::diff_trees(src, dst);
    assert!(
        !diffs.is_empty() && diffs.iter().all(|d| d.starts_with("one")),
        "{diffs:#?}"
    );
}

/// A 0500 directory with a file and a subdirectory in it; sticky and setgid directories.
fn special_dirs(root: &Path) {
    let ro = root.join("readonly");
    mkdirs(&ro.join("sub"));
    write(&ro.join("f"), b"in a read-only directory");
    write(&ro.join("sub/g"), b"deeper");
    chmod(&ro, 0o500);
    mkdirs(&root.join("sticky"));
    write(&root.join("sticky/x"), b"x");
    chmod(&root.join("sticky"), 0o1777);
    mkdirs(&root.join("sgid_dir"));
    write(&root.join("sgid_dir/y"), b"y");
    chmod(&root.join("sgid_dir"), 0o2775);
}

/// What only root can add, under `root/rootonly`: device nodes, entries of every kind
/// owned by other users, a setuid+setgid file owned by another user, and trusted.*
/// xattrs on a file, a directory, a symlink, a fifo and a device. Times are stamped again afterwards.
pub fn root_extras(root: &Path) {
    let r = root.join("rootonly");
    mkdirs(&r.join("owned_dir"));
    device(&r.join("null_like"), FileType::CharacterDevice, 1, 3);
    device(&r.join("block_like"), FileType::BlockDevice, 7, 200);
    write(&r.join("owned"), b"owned by someone else");
    write(
        &r.join("owned_dir/inside"),
        b"in a directory owned by someone else",
    );
    symlink("owned", &r.join("owned_link"));
    fifo(&r.join("owned_fifo"));
    write(&r.join("owned_setuid"), b"setuid, not root's");
    for (name, uid, gid) in [
        ("owned", 1234, 5678),
        ("owned_dir", 4321, 8765),
        ("owned_dir/inside", 4321, 0),
        ("owned_link", 2222, 3333),
        ("owned_fifo", 65534, 65534),
        ("owned_setuid", 1234, 1234),
    ] {
        chown(&r.join(name), uid, gid);
    }
    chmod(&r.join("owned_setuid"), 0o6755);
    set_xattr(&r.join("owned"), "trusted.secret", b"root only");
    set_xattr(&r.join("owned_dir"), "trusted.dir", b"root only too");
    set_xattr(&r.join("owned_link"), "trusted.link", b"on a symlink");
    set_xattr(&r.join("owned_fifo"), "trusted.fifo", b"on a fifo");
    set_xattr(&r.join("null_like"), "trusted.dev", b"on a device");
    stamp_times(root);
}

/// The counts `ferry copy --json` should report when copying `root` into nothing.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Regular file names (every name of a hardlinked file).
    pub files: u64,
    /// Directories, `root` included.
    pub dirs: u64,
    /// Symlinks, fifos and devices.
    pub others: u64,
    /// Bytes of file data, once per inode.
    pub bytes: u64,
    /// Regular files with data (once per inode).
    pub nonempty: u64,
}

/// Counts what is in the tree at `root` (sockets are not counted).
pub fn count(root: &Path) -> Counts {
    let fd = fdwalk::open_dir(root);
    let mut c = Counts {
        dirs: 1,
        ..Counts::default()
    };
    let mut seen = HashSet::new();
    fdwalk::walk_post_order(fd.as_fd(), b"", &mut |dir, name, _| {
        let m = std::fs::symlink_metadata(fdwalk::at(dir, name)).expect("lstat");
        let t = m.file_type();
        if t.is_dir() {
            c.dirs += 1;
        } else if t.is_file() {
            c.files += 1;
            if seen.insert(m.ino()) {
                c.bytes += m.size();
                c.nonempty += u64::from(m.size() > 0);
            }
        } else {
            // Symlinks, fifos, devices and sockets (a copy makes each again).
            c.others += 1;
        }
    });
    c
}

/// `top` (a file) and `mnt`, a directory where a ramfs is bound, holding `inside`: a tree
/// that crosses into another filesystem (`--one-file-system`). None, after saying why
/// the test skips, where no ramfs can be mounted; the mount lives as long as the guard.
pub fn with_a_mount_point(root: &Path) -> Option<crate::common::mount::BoundRamfs> {
    write(&root.join("top"), b"top");
    mkdirs(&root.join("mnt"));
    let bound = match crate::common::mount::bind_ramfs(&root.join("mnt")) {
        Ok(b) => b,
        Err(why) => {
            crate::common::skip(&why);
            return None;
        }
    };
    write(&root.join("mnt/inside"), b"on the ramfs");
    Some(bound)
}

/// Every path below `root` as `find .` lists it, sorted: what a tool made, to compare
/// with what another made.
pub fn found_names(root: &Path) -> Vec<String> {
    let out = std::process::Command::new("find")
        .arg(".")
        .current_dir(root)
        .output()
        .expect("run find");
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    names.sort();
    names
}
