//! The tree comparer: walks SRC and DST side by side through directory fds (never
//! following a symlink, names as bytes, no PATH_MAX limit) and lists every difference.
//!
//! Checked for every entry: kind; permission bits including setuid/setgid/sticky; uid;
//! gid; mtime to the nanosecond (every kind, directories and symlinks too); atime for
//! regular files; link count for non-directories; size, content, symlink target and
//! device number where they apply; every readable xattr; and the hardlink structure:
//! names that share an inode in SRC share one in DST, and names that do not, do not.
//!
//! Files are read with O_NOATIME where allowed, so comparing does not move the atimes
//! it compares.

use super::fdwalk::{self, at, join, show};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata};
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// What to leave out of a comparison.
#[derive(Default)]
pub struct Options {
    /// Relative paths (bytes, `a/b`) not compared, on either side; a skipped directory
    /// is skipped whole.
    pub skip: Vec<Vec<u8>>,
    /// Leave xattrs out (for a DST filesystem that has none).
    pub skip_xattrs: bool,
    /// Leave atimes out (tar extractors set them to the time of extraction).
    pub skip_atime: bool,
    /// Compare mtimes to the second only (archive formats that keep no fractions).
    pub mtime_seconds: bool,
    /// Leave out the root directory's own metadata (bsdtar does not apply an archive's
    /// `./` entry to the directory it extracts into).
    pub skip_root_meta: bool,
    /// Leave out the link structure of fifos and devices (GNU tar stores every name of
    /// one as a node of its own: it records hardlinks of files and symlinks only).
    pub skip_special_links: bool,
    /// Relative paths (bytes; empty: the root) of directories whose mtime is not
    /// compared: ones an archive does not name, which an extraction makes at the time
    /// it runs.
    pub made_dirs: Vec<Vec<u8>>,
    /// Leave out files' link counts (a backup made with `--link-dest` shares inodes with
    /// the one before it: the hardlinks inside the tree are still compared).
    pub skip_link_counts: bool,
}

impl Options {
    /// Options that leave out the relative paths `rels`.
    pub fn skipping(rels: &[&str]) -> Options {
        let skip = rels.iter().map(|r| r.as_bytes().to_vec()).collect();
        Options {
            skip,
            ..Options::default()
        }
    }
}

/// One difference between two trees: the entry's relative path (bytes; empty: the
/// root) and what differs (`missing in DST`, `extra in DST`, `kind: ...`, `mode: ...`,
/// `nlink: ...`, `hardlink: ...`, `content differs at byte N`...).
pub struct Difference {
    pub rel: Vec<u8>,
    pub what: String,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", show(&self.rel), self.what)
    }
}

/// Every difference between the trees at `src` and `dst`, one line each.
pub fn diff_trees(src: &Path, dst: &Path) -> Vec<String> {
    diff_trees_with(src, dst, &Options::default())
}

/// [`diff_trees`] with some paths left out.
pub fn diff_trees_with(src: &Path, dst: &Path, opts: &Options) -> Vec<String> {
    differences_with(src, dst, opts)
        .iter()
        .map(|d| d.to_string())
        .collect()
}

/// [`diff_trees_with`] as [`Difference`]s, for a caller that looks at the paths.
pub fn differences_with(src: &Path, dst: &Path, opts: &Options) -> Vec<Difference> {
    let (s, d) = (fdwalk::open_dir(src), fdwalk::open_dir(dst));
    let mut cmp = Comparer {
        opts,
        diffs: Vec::new(),
        inodes: Vec::new(),
    };
    cmp.entry(b"", s.as_fd(), d.as_fd(), OsStr::new("."));
    cmp.check_links();
    cmp.diffs
}

/// Panics, listing every difference, unless the trees are the same.
pub fn assert_same_tree(src: &Path, dst: &Path) {
    assert_same_tree_with(src, dst, &Options::default());
}

/// [`assert_same_tree`] with some paths left out.
pub fn assert_same_tree_with(src: &Path, dst: &Path, opts: &Options) {
    let diffs = diff_trees_with(src, dst, opts);
    assert!(
        diffs.is_empty(),
        "{} differs from {} in {} ways:\n  {}",
        dst.display(),
        src.display(),
        diffs.len(),
        diffs.join("\n  ")
    );
}

/// An inode as (device, inode number).
type Ino = (u64, u64);

struct Comparer<'a> {
    opts: &'a Options,
    diffs: Vec<Difference>,
    /// (relative path, inode in SRC, inode in DST) of every non-directory.
    inodes: Vec<(Vec<u8>, Ino, Ino)>,
}

impl Comparer<'_> {
    fn differ(
        &mut self,
        rel: &[u8],
        what: &str,
        src: impl std::fmt::Debug,
        dst: impl std::fmt::Debug,
    ) {
        self.note(rel, &format!("{what}: SRC {src:?} != DST {dst:?}"));
    }

    fn note(&mut self, rel: &[u8], msg: &str) {
        self.diffs.push(Difference {
            rel: rel.to_vec(),
            what: msg.to_string(),
        });
    }

    /// Compares the entry `name` of the directories `s` (SRC) and `d` (DST).
    fn entry(&mut self, rel: &[u8], s: BorrowedFd<'_>, d: BorrowedFd<'_>, name: &OsStr) {
        let (sp, dp) = (at(s, name), at(d, name));
        let sm = std::fs::symlink_metadata(&sp)
            .unwrap_or_else(|e| panic!("lstat SRC {}: {e}", show(rel)));
        let dm = match std::fs::symlink_metadata(&dp) {
            Ok(m) => m,
            Err(e) => return self.note(rel, &format!("missing in DST ({e})")),
        };
        let (sk, dk) = (kind(&sm), kind(&dm));
        if sk != dk {
            return self.differ(rel, "kind", sk, dk);
        }
        if !(rel.is_empty() && self.opts.skip_root_meta) {
            self.metadata(rel, sk, &sm, &dm);
        }
        if !self.opts.skip_xattrs {
            self.xattrs(rel, &sp, &dp);
        }
        match sk {
            "dir" => self.dir(rel, s, d, name),
            "file" => self.content(rel, &sp, &dp),
            "symlink" => {
                let (st, dt) = (std::fs::read_link(&sp).ok(), std::fs::read_link(&dp).ok());
                if st != dt {
                    self.differ(rel, "symlink target", st, dt);
                }
            }
            _ => {}
        }
        let special = sk == "fifo" || sk.ends_with("device");
        if sk != "dir" && !(special && self.opts.skip_special_links) {
            self.inodes
                .push((rel.to_vec(), (sm.dev(), sm.ino()), (dm.dev(), dm.ino())));
        }
    }

    fn metadata(&mut self, rel: &[u8], kind: &str, s: &Metadata, d: &Metadata) {
        let fields: [(&str, bool, String, String); 8] = [
            (
                "mode",
                true,
                format!("{:o}", s.mode() & 0o7777),
                format!("{:o}", d.mode() & 0o7777),
            ),
            ("uid", true, s.uid().to_string(), d.uid().to_string()),
            ("gid", true, s.gid().to_string(), d.gid().to_string()),
            (
                "mtime",
                !(kind == "dir" && self.opts.made_dirs.iter().any(|p| p == rel)),
                time(
                    s.mtime(),
                    if self.opts.mtime_seconds {
                        0
                    } else {
                        s.mtime_nsec()
                    },
                ),
                time(
                    d.mtime(),
                    if self.opts.mtime_seconds {
                        0
                    } else {
                        d.mtime_nsec()
                    },
                ),
            ),
            (
                "atime",
                kind == "file" && !self.opts.skip_atime,
                time(s.atime(), s.atime_nsec()),
                time(d.atime(), d.atime_nsec()),
            ),
            (
                "size",
                kind == "file" || kind == "symlink",
                s.size().to_string(),
                d.size().to_string(),
            ),
            (
                "nlink",
                kind != "dir"
                    && !(self.opts.skip_link_counts && kind == "file")
                    && !(self.opts.skip_special_links
                        && (kind == "fifo" || kind.ends_with("device"))),
                s.nlink().to_string(),
                d.nlink().to_string(),
            ),
            (
                "rdev",
                kind.ends_with("device"),
                format!("{:#x}", s.rdev()),
                format!("{:#x}", d.rdev()),
            ),
        ];
        for (what, applies, sv, dv) in fields {
            if applies && sv != dv {
                self.differ(rel, what, sv, dv);
            }
        }
    }

    fn dir(&mut self, rel: &[u8], s: BorrowedFd<'_>, d: BorrowedFd<'_>, name: &OsStr) {
        let open = |fd, side| {
            fdwalk::open_subdir(fd, name)
                .unwrap_or_else(|e| panic!("open {side} {}: {e}", show(rel)))
        };
        let (sd, dd) = (open(s, "SRC"), open(d, "DST"));
        let snames: BTreeSet<OsString> = fdwalk::names(sd.as_fd()).into_iter().collect();
        let dnames: BTreeSet<OsString> = fdwalk::names(dd.as_fd()).into_iter().collect();
        for child in snames.union(&dnames) {
            let child_rel = join(rel, child);
            if self.opts.skip.contains(&child_rel) {
                continue;
            }
            if !snames.contains(child) {
                self.note(&child_rel, "extra in DST");
            } else {
                self.entry(&child_rel, sd.as_fd(), dd.as_fd(), child);
            }
        }
    }

    fn content(&mut self, rel: &[u8], sp: &Path, dp: &Path) {
        let (mut sf, mut df) = (open_noatime(sp), open_noatime(dp));
        let (mut sb, mut db) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
        let mut offset = 0u64;
        loop {
            // A hole in both files reads as zeros in both: skip it (an 8 GiB file of
            // nothing compares in no time).
            // Asking for the next data moves a file's position: set both again.
            offset = offset.max(next_data(&sf, offset).min(next_data(&df, offset)));
            for f in [&mut sf, &mut df] {
                f.seek(SeekFrom::Start(offset)).expect("seek");
            }
            let sn = read_full(&mut sf, &mut sb);
            let dn = read_full(&mut df, &mut db);
            if sb[..sn] != db[..dn] {
                let at = sb[..sn]
                    .iter()
                    .zip(&db[..dn])
                    .position(|(a, b)| a != b)
                    .unwrap_or(sn.min(dn));
                return self.note(
                    rel,
                    &format!("content differs at byte {}", offset + at as u64),
                );
            }
            if sn == 0 {
                return;
            }
            offset += sn as u64;
        }
    }

    fn xattrs(&mut self, rel: &[u8], sp: &Path, dp: &Path) {
        let (sx, dx) = (xattrs(sp), xattrs(dp));
        for key in sx.keys().chain(dx.keys()).collect::<BTreeSet<_>>() {
            let (sv, dv) = (sx.get(key), dx.get(key));
            if sv != dv {
                let what = format!("xattr {}", key.escape_ascii());
                self.differ(
                    rel,
                    &what,
                    sv.map(|v| v.escape_ascii().to_string()),
                    dv.map(|v| v.escape_ascii().to_string()),
                );
            }
        }
    }

    /// Names sharing an inode on one side must share one on the other.
    fn check_links(&mut self) {
        let inodes = std::mem::take(&mut self.inodes);
        let mut problems = Vec::new();
        for (side, other) in [("SRC", "DST"), ("DST", "SRC")] {
            let mut first: HashMap<Ino, (&[u8], Ino)> = HashMap::new();
            for (rel, s, d) in &inodes {
                let (mine, theirs) = if side == "SRC" { (*s, *d) } else { (*d, *s) };
                match first.get(&mine) {
                    Some((r0, t0)) if *t0 != theirs => problems.push((
                        rel.clone(),
                        format!(
                            "hardlink: shares an inode with {} in {side} but not in {other}",
                            show(r0)
                        ),
                    )),
                    Some(_) => {}
                    None => {
                        first.insert(mine, (rel, theirs));
                    }
                }
            }
        }
        for (rel, msg) in problems {
            self.note(&rel, &msg);
        }
    }
}

fn kind(m: &Metadata) -> &'static str {
    let t = m.file_type();
    let kinds = [
        (t.is_dir(), "dir"),
        (t.is_file(), "file"),
        (t.is_symlink(), "symlink"),
        (t.is_fifo(), "fifo"),
        (t.is_char_device(), "char device"),
        (t.is_block_device(), "block device"),
        (t.is_socket(), "socket"),
    ];
    kinds
        .iter()
        .find(|(is, _)| *is)
        .map_or("unknown", |(_, name)| name)
}

fn time(sec: i64, nsec: i64) -> String {
    format!("{sec}.{nsec:09}")
}

/// The content of a regular file, read without updating its atime where allowed.
pub fn read_noatime(path: &Path) -> Vec<u8> {
    let mut data = Vec::new();
    open_noatime(path)
        .read_to_end(&mut data)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    data
}

/// Opens a regular file for reading without updating its atime where the kernel allows
/// O_NOATIME (owner or root), plainly otherwise.
fn open_noatime(path: &Path) -> File {
    let noatime = rustix::fs::OFlags::NOATIME.bits() as i32;
    let nofollow = rustix::fs::OFlags::NOFOLLOW.bits() as i32;
    let open = |flags| {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(flags)
            .open(path)
    };
    open(noatime | nofollow)
        .or_else(|_| open(nofollow))
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
}

/// Where the first data at or after `offset` in `f` starts: its length if only a hole
/// follows, `offset` itself where the filesystem cannot tell.
fn next_data(f: &File, offset: u64) -> u64 {
    match rustix::fs::seek(f, rustix::fs::SeekFrom::Data(offset)) {
        Ok(at) => at,
        Err(rustix::io::Errno::NXIO) => f.metadata().map_or(offset, |m| m.len()),
        Err(_) => offset,
    }
}

fn read_full(f: &mut File, buf: &mut [u8]) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]).expect("read") {
            0 => break,
            k => n += k,
        }
    }
    n
}

/// Every extended attribute of `path` (not following a symlink) that can be read.
pub fn xattrs(path: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut list = vec![0u8; 64 * 1024];
    let n = match rustix::fs::llistxattr(path, &mut list[..]) {
        Ok(n) => n,
        Err(rustix::io::Errno::NOTSUP) => 0,
        Err(e) => panic!("listxattr {}: {e}", path.display()),
    };
    let mut value = vec![0u8; 64 * 1024];
    list[..n]
        .split(|b| *b == 0)
        .filter(|name| !name.is_empty())
        .filter_map(|name| {
            let len = rustix::fs::lgetxattr(path, OsStr::from_bytes(name), &mut value[..]).ok()?;
            Some((name.to_vec(), value[..len].to_vec()))
        })
        .collect()
}
