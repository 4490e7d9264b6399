//! `--link-dest=DIR` and `--reflink-dest=DIR` (rsync's `--link-dest`, and its clone
//! twin): a file missing from the destination that DIR holds unchanged (a regular file
//! of the same size, and up to date as the copy judges an existing file: mtime, mode,
//! owner and group as far as the job sets them, xattrs) is hardlinked to DIR's,
//! or cloned from it, instead of copied from the source. Several DIRs are tried in the
//! order given. A relative DIR is taken from the destination, as rsync takes it.
//!
//! A path is resolved in DIR from DIR's descriptor, never following a symlink nor
//! leaving it (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`): a symlink in DIR never sends a
//! link or a clone to a file elsewhere.

use crate::changes::Kind;
use crate::entry::{Entry, EntryKind, RelPath};
use crate::meta::MetaWriter;
use rustix::fs::{self as rfs, AtFlags, Mode, OFlags, ResolveFlags};
use std::ffi::CStr;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

/// How an unchanged file found in a DIR is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Take {
    /// A hardlink to it (`--link-dest`): the two names share one inode.
    Link,
    /// A clone of it (`--reflink-dest`): its blocks shared until either copy changes;
    /// copied from the source where the filesystem cannot clone.
    Clone,
}

/// The directories to look in, as given.
#[derive(Clone, Debug, Default)]
pub struct LinkDests {
    /// Each directory, and how a file found there is taken.
    pub dirs: Vec<(PathBuf, Take)>,
}

/// The directories, opened.
pub(crate) struct Opened {
    dirs: Vec<(OwnedFd, Take)>,
}

/// The directories, opened on first use (once the destination they may be relative
/// to is there).
pub(crate) struct Lazy {
    dests: LinkDests,
    dst: PathBuf,
    opened: std::sync::OnceLock<Option<Opened>>,
}

impl Lazy {
    /// `dests`, relative ones taken from `dst`.
    pub(crate) fn new(dests: LinkDests, dst: &Path) -> Lazy {
        Lazy {
            dests,
            dst: dst.to_path_buf(),
            opened: std::sync::OnceLock::new(),
        }
    }

    /// Where `entry` (named `name` in its directory) is found unchanged; a DIR that
    /// cannot be opened is told to `warn` once, and nothing is then found.
    pub(crate) fn find(
        &self,
        entry: &Entry,
        name: &CStr,
        meta: &MetaWriter,
        warn: &dyn Fn(&str),
    ) -> Option<Found> {
        if self.dests.dirs.is_empty() {
            return None;
        }
        let opened = self.opened.get_or_init(|| {
            self.dests
                .open(&self.dst)
                .map_err(|e| warn(&format!("{e}: files are copied instead")))
                .ok()
        });
        opened.as_ref()?.find(entry, name, meta)
    }
}

/// A file found unchanged in a DIR: its directory there, and how to take it.
pub(crate) struct Found {
    /// The directory in DIR that holds it.
    pub dir: OwnedFd,
    /// How it is taken.
    pub take: Take,
}

impl LinkDests {
    /// Opens the directories, a relative one from `dst`; one that cannot be opened is
    /// an error naming it.
    pub(crate) fn open(&self, dst: &Path) -> std::io::Result<Opened> {
        let mut dirs = Vec::with_capacity(self.dirs.len());
        for (dir, take) in &self.dirs {
            let at = match (dir.is_absolute(), dst.exists()) {
                (true, _) => dir.clone(),
                (false, true) => dst.join(dir),
                // A dry run into a DST not made: `..` taken from DST's name.
                (false, false) => lexically(dst, dir),
            };
            let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
            let fd = rfs::open(&at, flags, Mode::empty()).map_err(|e| {
                std::io::Error::new(
                    std::io::Error::from(e).kind(),
                    format!("--link-dest/--reflink-dest {}: {e}", at.display()),
                )
            })?;
            dirs.push((fd, *take));
        }
        Ok(Opened { dirs })
    }
}

impl Opened {
    /// Where `entry` (a file) is found unchanged, in the first DIR that holds it so:
    /// of its size, and with no metadata `meta` (the job's writer) would set.
    pub(crate) fn find(&self, entry: &Entry, name: &CStr, meta: &MetaWriter) -> Option<Found> {
        let EntryKind::File { size } = entry.kind else {
            return None;
        };
        for (root, take) in &self.dirs {
            let Some(dir) = parent_in(root, &entry.path) else {
                continue;
            };
            let Ok(st) = rfs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            let file = rfs::FileType::from_raw_mode(st.st_mode) == rfs::FileType::RegularFile;
            if !file || st.st_size as u64 != size {
                continue;
            }
            let Ok(have) = crate::xattr::read(&crate::xattr::Node::named(dir.as_fd(), name)) else {
                continue;
            };
            if meta
                .differences(&st, &entry.meta, &have, Kind::File)
                .is_empty()
            {
                return Some(Found { dir, take: *take });
            }
        }
        None
    }
}

/// `dir` taken from `dst` by the names alone (`..` removes the name before it).
fn lexically(dst: &Path, dir: &Path) -> PathBuf {
    let mut at = dst.to_path_buf();
    for c in dir.components() {
        match c {
            std::path::Component::ParentDir => {
                at.pop();
            }
            std::path::Component::CurDir => {}
            other => at.push(other),
        }
    }
    at
}

/// The directory above `path` in `root`, reached without following a symlink or
/// leaving it.
fn parent_in(root: &OwnedFd, path: &RelPath) -> Option<OwnedFd> {
    let parent = path.parent();
    let at: &[u8] = match parent.is_root() {
        true => b".",
        false => parent.as_bytes(),
    };
    rfs::openat2(
        root,
        at,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
    )
    .ok()
}

impl super::LocalTreeSink<'_> {
    /// Makes `name` in `dir` (where nothing is) from the unchanged file `found` in a
    /// DIR: a hardlink, or a clone given `entry`'s metadata. Whether it did: false
    /// where the filesystem cannot (another one, no clones, too many links), and the
    /// file is then copied from the source.
    pub(super) fn take_from_link_dest(
        &self,
        dir: &super::DstDir,
        name: &CStr,
        entry: &Entry,
        found: &Found,
    ) -> crate::error::Result<bool> {
        use crate::error::Context;
        let path = &entry.path;
        match found.take {
            Take::Link => {
                Ok(rfs::linkat(&found.dir, name, &*dir.fd, name, AtFlags::empty()).is_ok())
            }
            Take::Clone => {
                let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                let Ok(from) = rfs::openat(&found.dir, name, flags, Mode::empty()) else {
                    return Ok(false);
                };
                let (mode, chmod) = self.meta.create_mode(&entry.meta);
                let fd = self.create(dir, name, path, mode)?;
                if rfs::ioctl_ficlone(&fd, &from).is_err() {
                    rfs::unlinkat(&*dir.fd, name, AtFlags::empty()).at_dst(path, "remove")?;
                    return Ok(false);
                }
                if let Err(e) = self.apply_new(&fd, dir, path, &entry.meta, chmod) {
                    let _ = rfs::unlinkat(&*dir.fd, name, AtFlags::empty());
                    return Err(e);
                }
                Ok(true)
            }
        }
    }
}
