//! Random rounds of changes to a tree, for differential tests of mirroring: a seeded
//! [`Generator`] makes an initial tree holding every kind ferry copies (files of
//! assorted sizes from empty to a few MiB, a sparse one, nested and odd-named
//! directories, symlinks, hardlinks of files, symlinks and fifos, fifos, `user.*`
//! xattrs, setuid and sticky modes, other owners as root) and then applies rounds of
//! random [`Change`]s to it, each round returning one line per change it made (for
//! failure messages).
//!
//! The same seed gives the same changes: choices depend only on the seed and on the
//! tree's names, kinds and link counts, read in sorted order. Every file written gets
//! an mtime of its own (whole seconds apart from every other), so a change of content
//! is always a change of size or mtime, which a mirror without `--checksum` must see;
//! the one exception is [`Change::Rewrite`] (same size, mtime kept), made only when
//! the generator is told the mirror compares content. Atimes are never moved (files
//! are read with `O_NOATIME`): an atime alone is no change to mirror.

use super::build::*;
use super::compare::{read_noatime, xattrs};
use super::fdwalk::show;
use rustix::fs::{AtFlags, Timespec, Timestamps, CWD, UTIME_OMIT};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

/// One kind of change a round makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Bytes overwritten in place at a random offset (maybe past the end).
    Edit,
    /// Bytes appended.
    Append,
    /// Cut to a shorter length.
    Truncate,
    /// The same number of bytes rewritten, size and mtime kept (only `--checksum`
    /// sees it).
    Rewrite,
    /// A file, symlink or fifo removed.
    Delete,
    CreateFile,
    /// A directory, with up to three files in it.
    CreateDir,
    CreateSymlink,
    CreateFifo,
    /// A file, symlink or fifo moved to a new name, sometimes over another file.
    Rename,
    /// A directory moved to a new name, maybe into another directory.
    RenameDir,
    /// A directory removed with everything below it.
    RemoveDir,
    Chmod,
    /// Owner and group changed (root only).
    Chown,
    /// A `user.*` xattr set or changed.
    SetXattr,
    RemoveXattr,
    /// Only the mtime changed (also before 1970 and past 2038).
    Mtime,
    /// A file replaced by a directory of the same name.
    FileToDir,
    /// A directory (preferably one that was a file) replaced by a file.
    DirToFile,
    /// A file, symlink or fifo replaced by one of another of those kinds.
    OtherKind,
    /// A symlink pointed elsewhere (sometimes a target of the same length, the old
    /// times kept).
    Retarget,
    /// A new name for a file (sometimes a symlink or a fifo).
    Hardlink,
    /// One name of a hardlinked node replaced by a copy of its own: same data and
    /// metadata (mtime too, half the time), another inode.
    BreakLink,
}

/// How often each change is picked, out of the sum of all weights.
const WEIGHTS: &[(Change, u32)] = &[
    (Change::Edit, 8),
    (Change::Append, 5),
    (Change::Truncate, 3),
    (Change::Rewrite, 5),
    (Change::Delete, 7),
    (Change::CreateFile, 10),
    (Change::CreateDir, 4),
    (Change::CreateSymlink, 4),
    (Change::CreateFifo, 1),
    (Change::Rename, 4),
    (Change::RenameDir, 3),
    (Change::RemoveDir, 2),
    (Change::Chmod, 5),
    (Change::Chown, 4),
    (Change::SetXattr, 5),
    (Change::RemoveXattr, 3),
    (Change::Mtime, 5),
    (Change::FileToDir, 2),
    (Change::DirToFile, 2),
    (Change::OtherKind, 3),
    (Change::Retarget, 4),
    (Change::Hardlink, 4),
    (Change::BreakLink, 4),
];

/// Past this many entries a round makes nothing new, so the tree stays small.
const MAX_ENTRIES: usize = 300;

/// Directories below this depth get no new children.
const MAX_DEPTH: usize = 6;

/// Bytes of xattrs (names and values, 32 bytes each for overhead) a node gets at
/// most: ext4 keeps them in one 4 KiB block.
const XATTR_ROOM: usize = 3000;

/// Owners a [`Change::Chown`] picks from (they need not exist in /etc/passwd).
const OWNERS: [u32; 5] = [0, 1000, 1001, 4242, 65534];

/// The beginnings of new names: non-UTF-8 bytes, a newline, a tab, spaces, a leading
/// dash or dot, quotes, glob characters, a backslash, non-ASCII letters.
const STEMS: &[&[u8]] = &[
    b"f",
    b"data",
    b"new\nline",
    b"bad\xff\xfe",
    b"sp ace",
    b"-dash",
    "\u{fc}n\u{ef}".as_bytes(),
    b"back\\slash",
    b"tab\there",
    b".hidden",
    b"x.o",
    b"q'uo\"te",
    b"*star?[",
];

/// The kinds of entries the generator makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Symlink,
    Fifo,
}

/// An entry of the tree, as a round sees it.
#[derive(Clone)]
struct Node {
    /// Path below the root as bytes; empty for the root.
    rel: Vec<u8>,
    kind: Kind,
    nlink: u64,
    size: u64,
}

impl Node {
    fn depth(&self) -> usize {
        match self.rel.is_empty() {
            true => 0,
            false => 1 + self.rel.iter().filter(|b| **b == b'/').count(),
        }
    }

    /// Whether `other` is this node or below it.
    fn holds(&self, other: &[u8]) -> bool {
        self.rel.is_empty()
            || other == self.rel
            || (other.starts_with(&self.rel) && other.get(self.rel.len()) == Some(&b'/'))
    }
}

/// Makes and changes the tree at one root.
pub struct Generator {
    root: PathBuf,
    rng: fastrand::Rng,
    /// Chown allowed (root).
    owners: bool,
    /// [`Change::Rewrite`] allowed (the mirror compares content).
    checksum: bool,
    /// Counts names and mtimes made, so each is new.
    serial: u64,
    /// Directories that were files ([`Change::FileToDir`]), for [`Change::DirToFile`]
    /// to turn back.
    were_files: Vec<Vec<u8>>,
}

impl Generator {
    /// A generator for the tree at `root` (which must exist), its choices fixed by
    /// `seed`. `owners`: make chown changes (root only); `checksum`: make rewrites
    /// that keep size and mtime.
    pub fn new(root: &Path, seed: u64, owners: bool, checksum: bool) -> Generator {
        Generator {
            root: root.to_path_buf(),
            rng: fastrand::Rng::with_seed(seed),
            owners,
            checksum,
            serial: 0,
            were_files: Vec::new(),
        }
    }

    /// The change kinds this generator makes.
    pub fn kinds(&self) -> Vec<Change> {
        WEIGHTS
            .iter()
            .map(|(c, _)| *c)
            .filter(|c| self.allowed(*c))
            .collect()
    }

    fn allowed(&self, c: Change) -> bool {
        (c != Change::Chown || self.owners) && (c != Change::Rewrite || self.checksum)
    }

    /// Makes the initial tree below the root, times stamped last; says what it made.
    pub fn initial(&mut self) -> Vec<String> {
        let mut log = super::rounds_tree::fixed(&self.root, self.owners);
        for _ in 0..12 {
            let c = [Change::CreateFile, Change::CreateDir, Change::CreateSymlink];
            let change = c[self.rng.usize(..c.len())];
            if let Some(line) = self.apply(change) {
                log.push(line);
            }
        }
        stamp_times(&self.root);
        log
    }

    /// Applies `n` random changes; one line per change made.
    pub fn round(&mut self, n: usize) -> Vec<String> {
        let total: u32 = WEIGHTS.iter().map(|(_, w)| w).sum();
        let mut log = Vec::new();
        let mut tries = 0;
        while log.len() < n && tries < n * 20 {
            tries += 1;
            let mut pick = self.rng.u32(..total);
            let &(change, _) = WEIGHTS
                .iter()
                .find(|(_, w)| match pick < *w {
                    true => true,
                    false => {
                        pick -= w;
                        false
                    }
                })
                .expect("a pick below the sum of the weights");
            if self.allowed(change) {
                log.extend(self.apply(change));
            }
        }
        log
    }

    /// Makes one change of kind `c`, if the tree has something it applies to.
    fn apply(&mut self, c: Change) -> Option<String> {
        let nodes = self.nodes();
        let creates = matches!(
            c,
            Change::CreateFile
                | Change::CreateDir
                | Change::CreateSymlink
                | Change::CreateFifo
                | Change::Hardlink
        );
        if creates && nodes.len() > MAX_ENTRIES {
            return None;
        }
        let what = format!("{c:?}");
        let line = match c {
            Change::Edit | Change::Append | Change::Truncate | Change::Rewrite => {
                let n = self.pick(&nodes, |n| n.kind == Kind::File)?;
                self.data_change(c, &n)?
            }
            Change::Delete => {
                let n = self.pick(&nodes, |n| n.kind != Kind::Dir)?;
                remove_any(&self.path(&n.rel));
                show(&n.rel)
            }
            Change::CreateFile | Change::CreateDir | Change::CreateSymlink | Change::CreateFifo => {
                let dir = self.pick(&nodes, |n| n.kind == Kind::Dir && n.depth() < MAX_DEPTH)?;
                let rel = self.new_name(&dir.rel);
                let kind = match c {
                    Change::CreateFile => Kind::File,
                    Change::CreateDir => Kind::Dir,
                    Change::CreateSymlink => Kind::Symlink,
                    _ => Kind::Fifo,
                };
                self.make(&rel, kind, &nodes)
            }
            Change::Rename => {
                let n = self.pick(&nodes, |n| n.kind != Kind::Dir)?;
                let to = match self.rng.u8(..3) {
                    0 => {
                        self.pick(&nodes, |o| o.kind == Kind::File && o.rel != n.rel)?
                            .rel
                    }
                    _ => {
                        let dir = self.pick(&nodes, |d| d.kind == Kind::Dir)?;
                        self.new_name(&dir.rel)
                    }
                };
                std::fs::rename(self.path(&n.rel), self.path(&to)).expect("rename");
                format!("{} -> {}", show(&n.rel), show(&to))
            }
            Change::RenameDir => {
                let n = self.pick(&nodes, |n| n.kind == Kind::Dir && !n.rel.is_empty())?;
                let dir = self.pick(&nodes, |d| {
                    d.kind == Kind::Dir && !n.holds(&d.rel) && d.depth() < MAX_DEPTH
                })?;
                let to = self.new_name(&dir.rel);
                std::fs::rename(self.path(&n.rel), self.path(&to)).expect("rename dir");
                format!("{} -> {}", show(&n.rel), show(&to))
            }
            Change::RemoveDir => {
                let n = self.pick(&nodes, |n| {
                    n.kind == Kind::Dir
                        && !n.rel.is_empty()
                        && nodes.iter().filter(|o| n.holds(&o.rel)).count() <= 40
                })?;
                remove_any(&self.path(&n.rel));
                show(&n.rel)
            }
            Change::Chmod => {
                let n = self.pick(&nodes, |n| n.kind != Kind::Symlink)?;
                let mode = self.mode(n.kind);
                chmod(&self.path(&n.rel), mode);
                format!("{} {mode:o}", show(&n.rel))
            }
            Change::Chown => {
                let n = self.pick(&nodes, |_| true)?;
                let (uid, gid) = (
                    OWNERS[self.rng.usize(..OWNERS.len())],
                    OWNERS[self.rng.usize(..OWNERS.len())],
                );
                chown(&self.path(&n.rel), uid, gid);
                format!("{} {uid}:{gid}", show(&n.rel))
            }
            Change::SetXattr => {
                let n = self.pick(&nodes, |n| matches!(n.kind, Kind::File | Kind::Dir))?;
                let name = format!("user.k{}", self.rng.u8(..4));
                let mut value = self.xattr_value();
                // ext4 keeps a node's xattrs in one block: leave room.
                let held: usize = xattrs(&self.path(&n.rel))
                    .iter()
                    .filter(|(k, _)| **k != name.as_bytes())
                    .map(|(k, v)| k.len() + v.len() + 32)
                    .sum();
                value.truncate(XATTR_ROOM.saturating_sub(held));
                set_xattr(&self.path(&n.rel), &name, &value);
                format!("{} {name} ({} bytes)", show(&n.rel), value.len())
            }
            Change::RemoveXattr => {
                let with: Vec<Node> = nodes
                    .iter()
                    .filter(|n| matches!(n.kind, Kind::File | Kind::Dir))
                    .filter(|n| !user_xattrs(&self.path(&n.rel)).is_empty())
                    .cloned()
                    .collect();
                let n = self.pick(&with, |_| true)?;
                let names = user_xattrs(&self.path(&n.rel));
                let name = &names[self.rng.usize(..names.len())];
                rustix::fs::lremovexattr(self.path(&n.rel), OsStr::from_bytes(name))
                    .expect("removexattr");
                format!("{} {}", show(&n.rel), show(name))
            }
            Change::Mtime => {
                let n = self.pick(&nodes, |_| true)?;
                let t = match self.rng.u8(..10) {
                    0 => ts(-86_400 * 400 - self.rng.i64(0..1000), self.nsec()),
                    1 => ts(7_258_118_400 + self.rng.i64(0..1000), self.nsec()),
                    2 => ts(self.stamp().tv_sec, 0),
                    _ => self.stamp(),
                };
                set_mtime(&self.path(&n.rel), t);
                format!("{} {}.{:09}", show(&n.rel), t.tv_sec, t.tv_nsec)
            }
            Change::FileToDir => {
                let n = self.pick(&nodes, |n| n.kind == Kind::File)?;
                remove_any(&self.path(&n.rel));
                self.make(&n.rel, Kind::Dir, &nodes);
                self.were_files.push(n.rel.clone());
                show(&n.rel)
            }
            Change::DirToFile => {
                let were: Vec<&Node> = nodes
                    .iter()
                    .filter(|n| n.kind == Kind::Dir && self.were_files.contains(&n.rel))
                    .collect();
                let n = match (were.is_empty(), self.rng.bool()) {
                    (false, true) => were[self.rng.usize(..were.len())].clone(),
                    _ => self.pick(&nodes, |n| n.kind == Kind::Dir && !n.rel.is_empty())?,
                };
                remove_any(&self.path(&n.rel));
                self.make(&n.rel, Kind::File, &nodes);
                show(&n.rel)
            }
            Change::OtherKind => {
                let n = self.pick(&nodes, |n| n.kind != Kind::Dir)?;
                let others: Vec<Kind> = [Kind::File, Kind::Symlink, Kind::Fifo]
                    .into_iter()
                    .filter(|k| *k != n.kind)
                    .collect();
                let kind = others[self.rng.usize(..others.len())];
                remove_any(&self.path(&n.rel));
                self.make(&n.rel, kind, &nodes)
            }
            Change::Retarget => {
                let n = self.pick(&nodes, |n| n.kind == Kind::Symlink)?;
                self.retarget(&n, &nodes)
            }
            Change::Hardlink => {
                let n = match self.rng.u8(..5) {
                    0 => self.pick(&nodes, |n| matches!(n.kind, Kind::Symlink | Kind::Fifo))?,
                    _ => self.pick(&nodes, |n| n.kind == Kind::File)?,
                };
                let dir = self.pick(&nodes, |d| d.kind == Kind::Dir && d.depth() < MAX_DEPTH)?;
                let rel = self.new_name(&dir.rel);
                hardlink(&self.path(&n.rel), &self.path(&rel));
                format!("{} -> {}", show(&rel), show(&n.rel))
            }
            Change::BreakLink => {
                let n = self.pick(&nodes, |n| n.kind != Kind::Dir && n.nlink > 1)?;
                self.break_link(&n)
            }
        };
        Some(format!("{what} {line}"))
    }

    /// [`Change::Edit`], [`Change::Append`], [`Change::Truncate`] or
    /// [`Change::Rewrite`] of the file `n`.
    fn data_change(&mut self, c: Change, n: &Node) -> Option<String> {
        let path = self.path(&n.rel);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open to write");
        let line = match c {
            Change::Edit => {
                let at = self.rng.u64(..=n.size);
                let len = self.rng.usize(1..=8192);
                let data = self.content(len);
                f.write_all_at(&data, at).expect("write");
                format!("{}: {} bytes at {at}", show(&n.rel), data.len())
            }
            Change::Append => {
                let len = self.rng.usize(1..=5000);
                let data = self.content(len);
                f.write_all_at(&data, n.size).expect("append");
                format!("{}: {} bytes", show(&n.rel), data.len())
            }
            Change::Truncate if n.size > 0 => {
                let len = self.rng.u64(..n.size);
                f.set_len(len).expect("truncate");
                format!("{}: to {len} bytes", show(&n.rel))
            }
            Change::Rewrite if n.size > 0 => {
                let before = std::fs::symlink_metadata(&path).expect("stat");
                let old = read_noatime(&path);
                let at = self.rng.usize(..old.len());
                let len = self.rng.usize(1..=(old.len() - at).min(4096));
                let flipped: Vec<u8> = old[at..at + len].iter().map(|b| !b).collect();
                f.write_all_at(&flipped, at as u64).expect("rewrite");
                drop(f);
                restore_times(&path, &before);
                return Some(format!("{}: {len} bytes at {at}", show(&n.rel)));
            }
            _ => return None,
        };
        drop(f);
        set_mtime(&path, self.stamp());
        Some(line)
    }

    /// Makes a new entry of `kind` at `rel`; says what it made.
    fn make(&mut self, rel: &[u8], kind: Kind, nodes: &[Node]) -> String {
        let path = self.path(rel);
        match kind {
            Kind::File => {
                let data = self.sized_content();
                write(&path, &data);
                if self.rng.u8(..4) == 0 {
                    let value = self.xattr_value();
                    set_xattr(&path, "user.made", &value);
                }
                set_mtime(&path, self.stamp());
                format!("{} (file, {} bytes)", show(rel), data.len())
            }
            Kind::Dir => {
                mkdirs(&path);
                let files = self.rng.usize(..=3);
                for _ in 0..files {
                    let child = self.new_name(rel);
                    let data = self.sized_content();
                    write(&self.path(&child), &data);
                    set_mtime(&self.path(&child), self.stamp());
                }
                format!("{} (dir, {files} files)", show(rel))
            }
            Kind::Symlink => {
                let target = self.target(rel, nodes);
                symlink(OsStr::from_bytes(&target), &path);
                format!("{} (symlink to {})", show(rel), show(&target))
            }
            Kind::Fifo => {
                fifo(&path);
                format!("{} (fifo)", show(rel))
            }
        }
    }

    /// [`Change::Retarget`] of the symlink `n`.
    fn retarget(&mut self, n: &Node, nodes: &[Node]) -> String {
        let path = self.path(&n.rel);
        let before = std::fs::symlink_metadata(&path).expect("lstat");
        let old = std::fs::read_link(&path).expect("readlink");
        let mut target = old.as_os_str().as_bytes().to_vec();
        let same_length = self.rng.bool() && !target.is_empty();
        match same_length {
            true => {
                let last = target.len() - 1;
                target[last] = if target[last] == b'x' { b'y' } else { b'x' };
            }
            false => target = self.target(&n.rel, nodes),
        }
        std::fs::remove_file(&path).expect("remove symlink");
        symlink(OsStr::from_bytes(&target), &path);
        if same_length {
            restore_times(&path, &before);
        }
        let kept = if same_length { ", times kept" } else { "" };
        format!("{} -> {}{kept}", show(&n.rel), show(&target))
    }

    /// [`Change::BreakLink`] of `n`: a copy with the same data, owner, mode, xattrs
    /// and times (or a new mtime) renamed over it.
    fn break_link(&mut self, n: &Node) -> String {
        let path = self.path(&n.rel);
        let tmp = self.new_name(parent(&n.rel));
        let tmp = self.path(&tmp);
        let m = std::fs::symlink_metadata(&path).expect("lstat");
        match n.kind {
            Kind::File => write(&tmp, &read_noatime(&path)),
            Kind::Symlink => symlink(std::fs::read_link(&path).expect("readlink"), &tmp),
            _ => fifo(&tmp),
        }
        if self.owners {
            chown(&tmp, m.uid(), m.gid());
        }
        if n.kind != Kind::Symlink {
            chmod(&tmp, m.mode() & 0o7777);
        }
        for (name, value) in xattrs(&path) {
            let name = String::from_utf8(name).expect("xattr names made here are UTF-8");
            set_xattr(&tmp, &name, &value);
        }
        restore_times(&tmp, &m);
        let new_mtime = self.rng.bool();
        if new_mtime {
            set_mtime(&tmp, self.stamp());
        }
        std::fs::rename(&tmp, &path).expect("rename the copy over");
        let how = if new_mtime {
            "a new mtime"
        } else {
            "times kept"
        };
        format!("{} ({} names, {how})", show(&n.rel), n.nlink)
    }

    /// A symlink target for a link at `rel`: another entry (relative), a dangling
    /// name, or an absolute path.
    fn target(&mut self, rel: &[u8], nodes: &[Node]) -> Vec<u8> {
        match self.rng.u8(..4) {
            0 => b"/etc/hostname".to_vec(),
            1 => {
                let mut t = b"no/such/".to_vec();
                t.extend(self.new_name(b"").iter());
                t
            }
            _ => {
                let depth = rel.iter().filter(|b| **b == b'/').count();
                let mut t = b"../".repeat(depth);
                match nodes.get(self.rng.usize(..nodes.len().max(1))) {
                    Some(n) if !n.rel.is_empty() => t.extend(&n.rel),
                    _ => t.push(b'.'),
                }
                t
            }
        }
    }

    /// The entries of the tree, the root first, names sorted by bytes.
    fn nodes(&self) -> Vec<Node> {
        let mut out = Vec::new();
        self.walk(Vec::new(), &mut out);
        out
    }

    fn walk(&self, rel: Vec<u8>, out: &mut Vec<Node>) {
        let path = self.path(&rel);
        let m = std::fs::symlink_metadata(&path).expect("lstat");
        let t = m.file_type();
        let kind = match () {
            _ if t.is_dir() => Kind::Dir,
            _ if t.is_symlink() => Kind::Symlink,
            _ if t.is_file() => Kind::File,
            _ => Kind::Fifo,
        };
        out.push(Node {
            rel: rel.clone(),
            kind,
            nlink: m.nlink(),
            size: m.len(),
        });
        if kind == Kind::Dir {
            let mut names: Vec<_> = std::fs::read_dir(&path)
                .expect("read_dir")
                .map(|e| e.expect("entry").file_name())
                .collect();
            names.sort();
            for name in names {
                self.walk(child(&rel, name.as_bytes()), out);
            }
        }
    }

    /// A random node that `want` accepts.
    fn pick(&mut self, nodes: &[Node], want: impl Fn(&Node) -> bool) -> Option<Node> {
        let fit: Vec<&Node> = nodes.iter().filter(|n| want(n)).collect();
        (!fit.is_empty()).then(|| fit[self.rng.usize(..fit.len())].clone())
    }

    fn path(&self, rel: &[u8]) -> PathBuf {
        self.root.join(OsStr::from_bytes(rel))
    }

    /// A name not used before, in the directory `dir`.
    fn new_name(&mut self, dir: &[u8]) -> Vec<u8> {
        self.serial += 1;
        let mut name = STEMS[self.rng.usize(..STEMS.len())].to_vec();
        name.extend(format!("_{}", self.serial).bytes());
        if self.rng.u8(..30) == 0 {
            name.resize(250, b'L');
        }
        child(dir, &name)
    }

    /// A file size: often empty or small, around a page, sometimes 64 KiB+, rarely a
    /// few MiB.
    fn size(&mut self) -> usize {
        match self.rng.u8(..100) {
            0..10 => 0,
            10..45 => self.rng.usize(1..200),
            45..70 => self.rng.usize(200..8192),
            70..80 => 4095 + self.rng.usize(..3),
            80..98 => self.rng.usize(8192..300_000),
            _ => self.rng.usize(1 << 20..3 << 20),
        }
    }

    /// Data of a random [`Generator::size`].
    fn sized_content(&mut self) -> Vec<u8> {
        let len = self.size();
        self.content(len)
    }

    /// `len` bytes of data, one time in five with an all-zero 4 KiB-aligned run.
    fn content(&mut self, len: usize) -> Vec<u8> {
        let mut data = pattern(self.rng.u64(..), len);
        if len >= 3 * 4096 && self.rng.u8(..5) == 0 {
            let blocks = len / 4096;
            let from = self.rng.usize(..blocks - 1) * 4096;
            let to = (from + self.rng.usize(1..blocks) * 4096).min(len);
            data[from..to].fill(0);
        }
        data
    }

    fn xattr_value(&mut self) -> Vec<u8> {
        let len = match self.rng.u8(..4) {
            0 => 0,
            1 => self.rng.usize(1000..3000),
            _ => self.rng.usize(1..40),
        };
        pattern(self.rng.u64(..), len)
    }

    fn mode(&mut self, kind: Kind) -> u32 {
        let (modes, keep): (&[u32], u32) = match kind {
            Kind::Dir => (&[0o755, 0o700, 0o1777, 0o2775, 0o750, 0o555], 0o700),
            _ => (
                &[0o644, 0o600, 0o755, 0o4755, 0o2711, 0o640, 0o444, 0o1644],
                0o600,
            ),
        };
        let mode = modes[self.rng.usize(..modes.len())];
        // Without root the generator must still be able to write and list.
        if rustix::process::geteuid().is_root() {
            mode
        } else {
            mode | keep
        }
    }

    /// An mtime no other write got: whole seconds apart from every other.
    fn stamp(&mut self) -> Timespec {
        self.serial += 1;
        ts(1_600_000_000 + self.serial as i64 * 10, self.nsec())
    }

    fn nsec(&mut self) -> i64 {
        self.rng.i64(0..1_000_000_000)
    }
}

/// `dir/name` as bytes (just `name` at the top).
fn child(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut rel = dir.to_vec();
    if !rel.is_empty() {
        rel.push(b'/');
    }
    rel.extend_from_slice(name);
    rel
}

/// The directory part of a relative path (empty at the top).
fn parent(rel: &[u8]) -> &[u8] {
    rel.iter()
        .rposition(|b| *b == b'/')
        .map_or(&[][..], |i| &rel[..i])
}

/// Removes whatever is at `path`, a directory with everything below it.
fn remove_any(path: &Path) {
    let is_dir = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
    let done = match is_dir {
        true => std::fs::remove_dir_all(path),
        false => std::fs::remove_file(path),
    };
    done.unwrap_or_else(|e| panic!("remove {}: {e}", path.display()));
}

/// The names of the `user.*` xattrs of `path`.
fn user_xattrs(path: &Path) -> Vec<Vec<u8>> {
    xattrs(path)
        .into_keys()
        .filter(|k| k.starts_with(b"user."))
        .collect()
}

/// Sets the mtime of `path` (not following a symlink), leaving its atime.
fn set_mtime(path: &Path, mtime: Timespec) {
    let times = Timestamps {
        last_access: ts(0, UTIME_OMIT),
        last_modification: mtime,
    };
    rustix::fs::utimensat(CWD, path, &times, AtFlags::SYMLINK_NOFOLLOW)
        .unwrap_or_else(|e| panic!("set the mtime of {}: {e}", path.display()));
}
