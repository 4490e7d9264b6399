//! The tree sink: what a source pushes entries into.
//!
//! Shaped like ripgrep's `Sink`: a sink is told about directories as they are entered,
//! about every other entry inside them, and about each directory again once all its
//! descendants are done (so directory modes and times can be applied after the
//! children). Methods are called from many threads at once; `Dir` is the sink's own
//! handle for a directory it has made.
//!
//! Deep in a tree a walk lets go of a directory's handle while the directory waits for
//! its subtree, and opens it again to finish it ([`DirHandle`]), so the descriptors a
//! walk holds do not grow with the depth of the tree.

use crate::entry::{Entry, RelPath};
use crate::error::Result;
use std::ffi::CStr;
use std::io::{BufRead, Read};
use std::os::fd::{BorrowedFd, OwnedFd};

/// Where a file entry's bytes come from.
pub enum FileData<'a> {
    /// A whole local file: it may be cloned whole, and its holes found with SEEK_DATA.
    File {
        /// The open file, handed over: a sink may keep it past the call (pack reads it
        /// on another thread).
        fd: OwnedFd,
        /// Its blocks do not cover its size, so it may have holes.
        maybe_sparse: bool,
        /// Its size, mtime and ctime when it was statted for the entry, for the sink
        /// to tell a change while it reads the data ([`crate::stamp`]); `None` for a
        /// snapshot that cannot change.
        stamp: Option<crate::stamp::Stamp>,
    },
    /// The file's runs `(file offset, length)` stored one after another from `offset`
    /// in `fd` (an archive member in a local archive file).
    Range {
        /// The file holding the runs.
        fd: BorrowedFd<'a>,
        /// Where the first run's bytes start.
        offset: u64,
        /// The runs, in file order.
        runs: &'a [(u64, u64)],
        /// The content's xxh3-128 hash as the archive recorded it when packing, if it
        /// did: a verifying sink checks what it wrote against that.
        recorded_hash: Option<u128>,
    },
    /// The same runs, stored one after another in memory (a small archive member, read
    /// with its header).
    Bytes {
        /// The stored runs.
        bytes: &'a [u8],
        /// The runs, in file order.
        runs: &'a [(u64, u64)],
        /// As for [`FileData::Range`].
        recorded_hash: Option<u128>,
    },
    /// The same runs, read in order from a stream (an archive on a pipe).
    Stream {
        /// The stream, positioned at the first run's bytes.
        reader: &'a mut dyn Read,
        /// The runs, in file order.
        runs: &'a [(u64, u64)],
    },
    /// The same runs, from a stream that holds them in buffers of its own (a network
    /// stream's pooled buffers): written straight from those, with no buffer of the
    /// writer's.
    Buffered {
        /// The stream, positioned at the first run's bytes.
        reader: &'a mut dyn BufRead,
        /// The runs, in file order.
        runs: &'a [(u64, u64)],
    },
}

impl FileData<'_> {
    /// The content's hash as recorded where it came from, if it was.
    pub fn recorded_hash(&self) -> Option<u128> {
        match self {
            FileData::Range { recorded_hash, .. } | FileData::Bytes { recorded_hash, .. } => {
                *recorded_hash
            }
            FileData::File { .. } | FileData::Stream { .. } | FileData::Buffered { .. } => None,
        }
    }
}

/// A sink's handle for a directory, which a walk may let go of while the directory
/// waits for its subtree to be done, and open again to finish it (deep in a tree, where
/// holding every level open would run the process out of descriptors).
pub trait DirHandle: Send + Sync + Sized {
    /// What is kept of a handle let go of: enough to open the same directory again and
    /// to tell that what is opened is that directory.
    type Mark: Send + Sync;

    /// Notes what the directory at `path` is, before its handle is let go of.
    fn mark(&self, path: &RelPath) -> Result<Self::Mark>;

    /// The directory `mark` (at `path`) opened again as the parent of `child`, which
    /// is open. An error when the parent `child` has now is not that directory.
    fn reopen_parent(child: &Self, mark: &Self::Mark, path: &RelPath) -> Result<Self>;

    /// The directory `mark` (at `path`) opened again as the entry `name` of `parent`,
    /// which is open, never through a symlink. An error when `name` is not that
    /// directory.
    fn reopen_child(parent: &Self, name: &CStr, mark: &Self::Mark, path: &RelPath) -> Result<Self>;
}

/// The handle of a sink that holds nothing open for a directory: there is nothing to
/// let go of or to open again.
impl DirHandle for () {
    type Mark = ();

    fn mark(&self, _: &RelPath) -> Result<()> {
        Ok(())
    }

    fn reopen_parent(_: &(), _: &(), _: &RelPath) -> Result<()> {
        Ok(())
    }

    fn reopen_child(_: &(), _: &CStr, _: &(), _: &RelPath) -> Result<()> {
        Ok(())
    }
}

/// Receives a tree, possibly from many threads at once.
pub trait TreeSink: Sync {
    /// The sink's handle for a directory it has entered.
    type Dir: DirHandle;

    /// Whether file entries should come with their data opened. A sink that only counts
    /// says no, and the source then only stats.
    fn wants_data(&self) -> bool {
        true
    }

    /// Whether entries come with their xattrs. A sink that wants no data may still
    /// want them (an S3 upload's plan, which must see an xattr change); one that only
    /// counts does not.
    fn wants_xattrs(&self) -> bool {
        self.wants_data()
    }

    /// Whether sockets come as entries ([`crate::entry::EntryKind::Socket`]); a sink
    /// that has no form for them (a tar archive, the wire, S3) says no, and the source
    /// skips each with a warning, as GNU tar does.
    fn wants_sockets(&self) -> bool {
        false
    }

    /// The root of the tree.
    fn root(&self, entry: &Entry) -> Result<Self::Dir>;

    /// A directory inside `parent`.
    fn dir(&self, parent: &Self::Dir, entry: &Entry) -> Result<Self::Dir>;

    /// Any other entry inside `parent`: files come with their data when the sink wants
    /// it.
    fn leaf(&self, parent: &Self::Dir, entry: &Entry, data: Option<FileData<'_>>) -> Result<()>;

    /// All of `dir`'s descendants are done.
    fn finish_dir(&self, _dir: &Self::Dir, _entry: &Entry) -> Result<()> {
        Ok(())
    }
}
