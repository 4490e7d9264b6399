//! `--dry-run`: a sink that writes nothing, and tells what a copy would change.
//!
//! It takes the walk's entries as the local-tree sink ([`crate::local`]) does, and
//! compares each with what the destination has at its path, by the same rules: a file
//! whose size and mtime (with `checksum`, content) match is up to date, a node of
//! another kind is replaced, an up-to-date node whose owner, mode, times or xattrs
//! differ has its metadata set. What it finds goes to a [`Changes`] and is counted in
//! [`Stats`] as the copy would count it. The destination is only looked at: opened
//! read-only, files read (for `checksum`) with `O_NOATIME` where allowed, directories
//! opened but never listed, nothing followed through a symlink. Only a symlink's
//! target is read, which moves its atime as any `readlink` does (`rsync -n` reads them
//! too).

use crate::changes::{Changes, Kind, Reasons, What};
use crate::data;
use crate::delete::{remove_in_the_way, DeleteOptions};
use crate::entry::{Entry, EntryKind, RelPath};
use crate::error::{Context, Error, Reporter, Result};
use crate::local::open_dir;
use crate::meta::{self, MetaWriter};
use crate::sink::{DirHandle, FileData, TreeSink};
use crate::stats::Stats;
use crate::walk::read_names;
use crate::xattr;
use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, PoisonError};

/// Previews a copy into the destination whose root is open as the root handle.
pub struct PreviewSink<'a> {
    root: PreviewDir,
    checksum: bool,
    meta: MetaWriter,
    stats: &'a Stats,
    changes: Option<&'a dyn Changes>,
    /// Files newer in the destination are left alone (`-u`).
    keep_newer: bool,
    /// With `--delete`: a directory in the way of a non-directory would be removed
    /// with what it holds (see [`crate::local::LocalTreeSink::deleting_in_the_way`]).
    in_the_way: Option<DeleteOptions<'a>>,
    /// `--link-dest`, `--reflink-dest`: a file found unchanged in a DIR would be taken
    /// from there, not made: up to date, as the copy counts it.
    link_dests: Option<crate::local::link_dest::Lazy>,
}

/// A destination directory as a preview sees it: open if it exists (and is a
/// directory), else nothing is there and everything below would be made.
#[derive(Clone)]
pub struct PreviewDir(Option<Arc<OwnedFd>>);

impl PreviewDir {
    /// The directory `fd`, or none.
    pub fn new(fd: Option<OwnedFd>) -> Self {
        PreviewDir(fd.map(Arc::new))
    }
}

impl DirHandle for PreviewDir {
    /// Whether it existed.
    type Mark = bool;

    fn mark(&self, _: &RelPath) -> Result<bool> {
        Ok(self.0.is_some())
    }

    fn reopen_parent(child: &Self, existed: &bool, path: &RelPath) -> Result<Self> {
        match (existed, &child.0) {
            (false, _) => Ok(PreviewDir(None)),
            (true, Some(fd)) => Ok(PreviewDir::new(Some(
                open_dir(fd, c"..").at_dst(path, "open destination directory")?,
            ))),
            (true, None) => Err(Error::dst(path, "open destination directory", Errno::NOENT)),
        }
    }

    fn reopen_child(parent: &Self, name: &CStr, existed: &bool, path: &RelPath) -> Result<Self> {
        match (existed, &parent.0) {
            (true, Some(fd)) => Ok(PreviewDir::new(Some(
                open_dir(fd, name).at_dst(path, "open destination directory")?,
            ))),
            _ => Ok(PreviewDir(None)),
        }
    }
}

/// Keeps the first error reported (a preview's removals, which the copy would report).
#[derive(Default)]
struct FirstError(Mutex<Option<Error>>);

impl Reporter for FirstError {
    fn error(&self, err: &Error) {
        let mut first = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if first.is_none() {
            *first = Some(Error {
                path: err.path.clone(),
                side: err.side,
                op: err.op,
                os: io::Error::new(err.os.kind(), err.os.to_string()),
            });
        }
    }
    fn warn(&self, _: &str) {}
}

fn cname(path: &RelPath) -> Result<CString> {
    CString::new(path.file_name()).map_err(|e| Error::dst(path, "name", e))
}

impl<'a> PreviewSink<'a> {
    /// A preview into `root` (None: the destination does not exist yet).
    pub fn new(
        root: PreviewDir,
        checksum: bool,
        stats: &'a Stats,
        changes: Option<&'a dyn Changes>,
    ) -> Self {
        PreviewSink {
            root,
            checksum,
            meta: MetaWriter::new(),
            stats,
            changes,
            keep_newer: false,
            in_the_way: None,
            link_dests: None,
        }
    }

    /// Files the destination lacks that one of `dests` (relative ones from `dst`) holds
    /// unchanged would be taken from there: counted as up to date, not told.
    pub fn with_link_dests(
        mut self,
        dests: crate::local::link_dest::LinkDests,
        dst: &Path,
    ) -> Self {
        self.link_dests = Some(crate::local::link_dest::Lazy::new(dests, dst));
        self
    }

    /// Counts `entry`, which the destination lacks, as made, unless a `--link-dest`
    /// DIR holds it unchanged (`name`: its name in its directory).
    fn missing(&self, entry: &Entry, name: &CStr) {
        let found = self
            .link_dests
            .as_ref()
            .and_then(|l| l.find(entry, name, &self.meta, &|_| {}));
        match (found, &entry.kind) {
            (Some(_), EntryKind::File { size }) => {
                Stats::bump(&self.stats.skipped);
                self.stats.skipped_bytes.fetch_add(*size, Relaxed);
            }
            _ => self.made(entry, What::Created),
        }
    }

    /// A directory in the way of a non-directory would go with what it holds, by
    /// `delete`'s rules (`--delete`): the preview tells each removal, as the copy would.
    pub fn deleting_in_the_way(mut self, delete: Option<DeleteOptions<'a>>) -> Self {
        self.in_the_way = delete.map(|d| DeleteOptions { dry_run: true, ..d });
        self
    }

    /// What the copy would do with the directory `name` of `dir` (status `st`) standing
    /// where `entry`, not a directory, goes: remove it with what it holds (`--delete`;
    /// told here), or fail if it holds anything.
    fn directory_in_the_way(&self, dir: &OwnedFd, name: &CStr, entry: &Entry) -> Result<()> {
        if let Some(delete) = &self.in_the_way {
            let failed = FirstError::default();
            remove_in_the_way(dir, name, &entry.path, delete, self.stats, &failed);
            return failed
                .0
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner)
                .map_or(Ok(()), Err);
        }
        let fd = open_dir(dir, name).at_dst(&entry.path, "open destination directory")?;
        let mut holds = false;
        read_names(&fd, &entry.path, |batch| holds |= !batch.is_empty())
            .map_err(|e| Error::dst(&e.path, e.op, e.os))?;
        if holds {
            return Err(Error::dst(
                &entry.path,
                "replace",
                io::Error::other(
                    "a directory that is not empty is in the way in the destination \
                     (--delete removes it)",
                ),
            ));
        }
        Ok(())
    }

    /// Files newer in the destination are left alone (`-u`): the preview says so.
    pub fn keeping_newer(mut self, keep: bool) -> Self {
        self.keep_newer = keep;
        self
    }

    fn tell(&self, entry: &Entry, what: What) {
        if let Some(c) = self.changes {
            c.change(&entry.path, Kind::of_entry(&entry.kind), what);
        }
    }

    /// Counts `entry` as made (or replaced) and tells it.
    fn made(&self, entry: &Entry, what: What) {
        match entry.kind {
            EntryKind::File { size } => {
                Stats::bump(&self.stats.files);
                self.stats.bytes.fetch_add(size, Relaxed);
            }
            EntryKind::Dir => Stats::bump(&self.stats.dirs),
            _ => Stats::bump(&self.stats.others),
        }
        self.tell(entry, what);
    }

    /// How the metadata of the existing `node` (status `st`) differs from `entry`'s,
    /// as the copy would set it.
    fn meta_reasons(&self, node: &xattr::Node<'_>, st: &Stat, entry: &Entry) -> Result<Reasons> {
        let have = xattr::read(node).at_dst(&entry.path, "read xattrs")?;
        let kind = Kind::of_entry(&entry.kind);
        Ok(self.meta.differences(st, &entry.meta, &have, kind))
    }

    /// Why the file `name` in `dir` (status `st`) is not up to date with `entry`
    /// (nothing: it is).
    fn data_reasons(
        &self,
        dir: &OwnedFd,
        name: &CStr,
        st: &Stat,
        entry: &Entry,
        size: u64,
        data: Option<&FileData<'_>>,
    ) -> Result<Reasons> {
        if st.st_size as u64 != size {
            return Ok(Reasons::SIZE);
        }
        if !self.checksum {
            return Ok(
                Reasons::none().with_if(meta::mtime_of(st) != entry.meta.mtime, Reasons::MTIME)
            );
        }
        let Some(FileData::File { fd, .. }) = data else {
            return Ok(Reasons::CONTENT);
        };
        let ours = data::hash_range(fd, 0, size).at(&entry.path, "read")?;
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let theirs = match rfs::openat(dir, name, flags | OFlags::NOATIME, Mode::empty()) {
            Err(Errno::PERM) => rfs::openat(dir, name, flags, Mode::empty()),
            other => other,
        }
        .at_dst(&entry.path, "open destination")?;
        let theirs = data::hash_range(&theirs, 0, size).at_dst(&entry.path, "read destination")?;
        Ok(Reasons::none().with_if(ours != theirs, Reasons::CONTENT))
    }

    /// Whether the existing node (status `st`) is of `entry`'s kind and holds the same
    /// thing (data, target, device); else why not.
    fn content_reasons(
        &self,
        dir: &OwnedFd,
        name: &CStr,
        st: &Stat,
        entry: &Entry,
        data: Option<&FileData<'_>>,
    ) -> Result<Reasons> {
        let kind = FileType::from_raw_mode(st.st_mode);
        match &entry.kind {
            EntryKind::File { size } if kind == FileType::RegularFile => {
                self.data_reasons(dir, name, st, entry, *size, data)
            }
            EntryKind::Symlink { target } if kind == FileType::Symlink => {
                let now =
                    rfs::readlinkat(dir, name, Vec::new()).at_dst(&entry.path, "read link")?;
                Ok(Reasons::none().with_if(now.as_bytes() != target.as_slice(), Reasons::TARGET))
            }
            EntryKind::Fifo if kind == FileType::Fifo => Ok(Reasons::none()),
            EntryKind::Socket if kind == FileType::Socket => Ok(Reasons::none()),
            EntryKind::CharDevice { rdev } if kind == FileType::CharacterDevice => {
                Ok(Reasons::none().with_if(st.st_rdev != *rdev, Reasons::DEVICE))
            }
            EntryKind::BlockDevice { rdev } if kind == FileType::BlockDevice => {
                Ok(Reasons::none().with_if(st.st_rdev != *rdev, Reasons::DEVICE))
            }
            _ => Ok(Reasons::KIND),
        }
    }
}

impl TreeSink for PreviewSink<'_> {
    type Dir = PreviewDir;

    // A copy makes sockets again: its dry run says so.
    fn wants_sockets(&self) -> bool {
        true
    }

    fn root(&self, entry: &Entry) -> Result<PreviewDir> {
        if self.root.0.is_none() {
            self.made(entry, What::Created);
        }
        Ok(self.root.clone())
    }

    fn dir(&self, parent: &PreviewDir, entry: &Entry) -> Result<PreviewDir> {
        let Some(pfd) = &parent.0 else {
            self.made(entry, What::Created);
            return Ok(PreviewDir(None));
        };
        let name = cname(&entry.path)?;
        match rfs::statat(&**pfd, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Err(Errno::NOENT) => {
                self.made(entry, What::Created);
                Ok(PreviewDir(None))
            }
            Err(e) => Err(Error::dst(&entry.path, "stat destination", e)),
            Ok(st) if FileType::from_raw_mode(st.st_mode) != FileType::Directory => {
                self.made(entry, What::Updated(Reasons::KIND));
                Ok(PreviewDir(None))
            }
            Ok(_) => Ok(PreviewDir::new(Some(
                open_dir(pfd, &name).at_dst(&entry.path, "open destination directory")?,
            ))),
        }
    }

    fn leaf(&self, parent: &PreviewDir, entry: &Entry, data: Option<FileData<'_>>) -> Result<()> {
        let name = cname(&entry.path)?;
        let Some(dir) = &parent.0 else {
            self.missing(entry, &name);
            return Ok(());
        };
        let st = match rfs::statat(&**dir, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Err(Errno::NOENT) => {
                self.missing(entry, &name);
                return Ok(());
            }
            other => other.at_dst(&entry.path, "stat destination")?,
        };
        if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
            self.directory_in_the_way(dir, &name, entry)?;
        }
        let is_file = FileType::from_raw_mode(st.st_mode) == FileType::RegularFile;
        if let (EntryKind::File { size }, true) = (&entry.kind, is_file) {
            if self.keep_newer && meta::mtime_of(&st) > entry.meta.mtime {
                // `-u`: left alone, as the copy leaves it.
                Stats::bump(&self.stats.skipped);
                self.stats.skipped_bytes.fetch_add(*size, Relaxed);
                return Ok(());
            }
        }
        let changed = self.content_reasons(dir, &name, &st, entry, data.as_ref())?;
        if !changed.is_empty() {
            self.made(entry, What::Updated(changed));
            return Ok(());
        }
        let meta = self.meta_reasons(&xattr::Node::named(dir.as_fd(), &name), &st, entry)?;
        // A node with more names than the source's must not change (its other names
        // may be outside DST): the copy replaces it instead.
        let source_links = entry.links.map_or(1, |(_, n)| n);
        if !meta.is_empty() && st.st_nlink > source_links {
            self.made(entry, What::Updated(meta));
            return Ok(());
        }
        Stats::bump(&self.stats.skipped);
        if let EntryKind::File { size } = entry.kind {
            self.stats.skipped_bytes.fetch_add(size, Relaxed);
        }
        if !meta.is_empty() {
            self.tell(entry, What::Meta(meta));
        }
        Ok(())
    }

    fn finish_dir(&self, dir: &PreviewDir, entry: &Entry) -> Result<()> {
        let Some(fd) = &dir.0 else {
            return Ok(());
        };
        let st = rfs::fstat(&**fd).at_dst(&entry.path, "stat destination")?;
        let meta = self.meta_reasons(&xattr::Node::Fd(fd.as_fd()), &st, entry)?;
        if !meta.is_empty() {
            self.tell(entry, What::Meta(meta));
        }
        Ok(())
    }
}
