//! Metadata-only changes: giving a node that already holds the right data the mode,
//! owner, times and xattrs its source has, without writing the data again. A network
//! copy's receiver does this for what its sender found up to date but for its
//! metadata.
//!
//! The node is reached from the tree's root descriptor, each directory opened without
//! following a symlink, and is changed only if it is still of the kind the sender
//! meant; what differs is judged here, by [`MetaWriter::differences`], as a local copy
//! judges it (as root or not, the groups this process may give), told, and (unless a
//! dry run) set.

use crate::changes::{Changes, Kind, What};
use crate::entry::{Metadata, RelPath};
use crate::error::{Error, Reporter};
use crate::local::{is_plain, open_below};
use crate::meta::MetaWriter;
use crate::xattr;
use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};

/// A metadata-only change to carry out.
pub struct Touch<'a> {
    /// Where the node is, below the root.
    pub path: &'a RelPath,
    /// What kind it must be.
    pub kind: Kind,
    /// What to give it.
    pub meta: &'a Metadata,
    /// Whether `meta.xattrs` is all the source's node has (false: leave its xattrs).
    pub xattrs_known: bool,
}

/// Where and how metadata-only changes are made.
pub struct Toucher<'a> {
    /// The tree's root.
    pub root: &'a OwnedFd,
    /// Writes the metadata, and judges what differs.
    pub writer: &'a MetaWriter,
    /// Change nothing, only tell.
    pub dry_run: bool,
    /// Told of each change made (or, in a dry run, that would be).
    pub changes: Option<&'a dyn Changes>,
    /// Where failures go, each naming its path.
    pub reporter: &'a dyn Reporter,
}

impl Toucher<'_> {
    /// Carries out `t`: nothing when the node is gone, is of another kind now, or
    /// already has the metadata. The root (its path empty) is the root descriptor's.
    pub fn touch(&self, t: &Touch<'_>) {
        let fail = |op: &'static str, e: std::io::Error| {
            self.reporter.error(&Error::dst(t.path, op, e));
        };
        if t.path.is_root() {
            return match rfs::fstat(self.root) {
                Ok(st) => self.set(t, self.root, None, &st, Some(self.root)),
                Err(e) => fail("stat destination", e.into()),
            };
        }
        if !is_plain(t.path) {
            let why = std::io::Error::other("not a path of plain names below the destination");
            return fail("set metadata", why);
        }
        let dir = match open_below(self.root, &t.path.parent()) {
            Ok(Some(dir)) => dir,
            Ok(None) => return,
            Err(e) => return fail("open directory", e.into()),
        };
        let Ok(name) = CString::new(t.path.file_name()) else {
            return;
        };
        let st = match rfs::statat(&dir, &name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::NOENT) => return,
            Err(e) => return fail("stat destination", e.into()),
        };
        let opened = open_node(&dir, &name, FileType::from_raw_mode(st.st_mode));
        self.set(t, &dir, Some(&name), &st, opened.as_ref());
    }

    /// Gives the node `name` of `dir` (`dir` itself when None), whose status is `st`
    /// and which `opened` holds open where it could be, what `t` says it lacks.
    fn set(
        &self,
        t: &Touch<'_>,
        dir: &OwnedFd,
        name: Option<&CString>,
        st: &rfs::Stat,
        opened: Option<&OwnedFd>,
    ) {
        let fail = |op: &'static str, e: std::io::Error| {
            self.reporter.error(&Error::dst(t.path, op, e));
        };
        let file_type = FileType::from_raw_mode(st.st_mode);
        if Kind::of_type(file_type) != t.kind {
            return;
        }
        let node = match name {
            Some(name) => xattr::Node::named(dir.as_fd(), name),
            None => xattr::Node::Fd(dir.as_fd()),
        };
        let have = match xattr::read(&node) {
            Ok(have) => have,
            Err(e) => return fail("read xattrs", e),
        };
        let mut meta = t.meta.clone();
        if !t.xattrs_known {
            meta.xattrs = have.clone();
        }
        let why = self.writer.differences(st, &meta, &have, t.kind);
        if why.is_empty() {
            return;
        }
        if let Some(c) = self.changes {
            c.change(t.path, t.kind, What::Meta(why));
        }
        if self.dry_run {
            return;
        }
        let set = match (opened, name) {
            (Some(fd), _) => self.writer.apply_fd(fd, &meta, true, false, &have),
            (None, Some(name)) => {
                let symlink = file_type == FileType::Symlink;
                self.writer.apply_at(dir, name, &meta, symlink, &have)
            }
            (None, None) => return,
        };
        if let Err((op, e)) = set {
            fail(op, e);
        }
    }
}

/// The regular file or directory `name` of `dir`, open without following a symlink,
/// so its metadata is set on what was checked; None for other kinds (set by name,
/// never through a symlink) and where it cannot be opened.
fn open_node(dir: &OwnedFd, name: &CString, kind: FileType) -> Option<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let flags = match kind {
        FileType::RegularFile => flags,
        FileType::Directory => flags | OFlags::DIRECTORY,
        _ => return None,
    };
    rfs::openat(dir, name.as_c_str(), flags, Mode::empty()).ok()
}
