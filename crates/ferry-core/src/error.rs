//! Errors: one line naming the path, the operation and the OS error.

use crate::entry::RelPath;
use std::io;

/// Which tree a path belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The tree being read.
    Source,
    /// The tree being written.
    Destination,
}

/// A failure on one path. Most are per-file: the job goes on and counts them.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {op}: {os}")]
pub struct Error {
    /// The path, relative to the root of `side`.
    pub path: RelPath,
    /// The tree the path is in.
    pub side: Side,
    /// What was being done, e.g. "open source", "clone".
    pub op: &'static str,
    /// The OS error (shown in the message, so it is not also chained as a source).
    pub os: io::Error,
}

impl Error {
    /// An error at `path` in the source tree.
    pub fn new(path: &RelPath, op: &'static str, source: impl Into<io::Error>) -> Self {
        Error {
            path: path.clone(),
            side: Side::Source,
            op,
            os: source.into(),
        }
    }

    /// An error at `path` in the destination tree.
    pub fn dst(path: &RelPath, op: &'static str, source: impl Into<io::Error>) -> Self {
        Error {
            side: Side::Destination,
            ..Error::new(path, op, source)
        }
    }
}

/// A result whose error names a path.
pub type Result<T> = std::result::Result<T, Error>;

/// Adds the path and operation to an `io::Result`.
pub trait Context<T> {
    /// Turns an OS error into an [`Error`] naming `path` in the source and `op`.
    fn at(self, path: &RelPath, op: &'static str) -> Result<T>;
    /// Turns an OS error into an [`Error`] naming `path` in the destination and `op`.
    fn at_dst(self, path: &RelPath, op: &'static str) -> Result<T>;
}

impl<T, E: Into<io::Error>> Context<T> for std::result::Result<T, E> {
    fn at(self, path: &RelPath, op: &'static str) -> Result<T> {
        self.map_err(|e| Error::new(path, op, e))
    }
    fn at_dst(self, path: &RelPath, op: &'static str) -> Result<T> {
        self.map_err(|e| Error::dst(path, op, e))
    }
}

/// Where per-file errors and warnings go. The binary prints them; tests collect them.
pub trait Reporter: Sync {
    /// A failure on one path; the job goes on.
    fn error(&self, err: &Error);
    /// Something the user should know that is not a failure.
    fn warn(&self, msg: &str);
}

/// Passes messages on to another reporter and counts the errors in `stats.errors`.
pub struct Counting<'a> {
    /// Where the messages go.
    pub inner: &'a dyn Reporter,
    /// Where the count goes.
    pub stats: &'a crate::stats::Stats,
}

impl Reporter for Counting<'_> {
    fn error(&self, err: &Error) {
        crate::stats::Stats::bump(&self.stats.errors);
        self.inner.error(err);
    }
    fn warn(&self, msg: &str) {
        self.inner.warn(msg);
    }
}

/// Passes messages on with the paths of a walk of one entry (see
/// [`crate::walk::walk_one`]) named as the user named them: the entry's source is the
/// source root itself, and so is its destination when `dst_is_entry` (the user named
/// the target, not the directory it goes into).
pub struct OneEntry<'a> {
    /// Where the messages go.
    pub inner: &'a dyn Reporter,
    /// The destination root is the entry itself.
    pub dst_is_entry: bool,
}

impl OneEntry<'_> {
    fn at_root(&self, side: Side) -> bool {
        side == Side::Source || self.dst_is_entry
    }

    /// `err` with its path made the root where that is what names it.
    pub fn named(&self, err: Error) -> Error {
        if self.at_root(err.side) {
            Error {
                path: RelPath::root(),
                ..err
            }
        } else {
            err
        }
    }
}

impl Reporter for OneEntry<'_> {
    fn error(&self, err: &Error) {
        if !self.at_root(err.side) {
            return self.inner.error(err);
        }
        // io::Error is not Clone; its message is all the line shows.
        self.inner.error(&Error {
            path: RelPath::root(),
            side: err.side,
            op: err.op,
            os: io::Error::new(err.os.kind(), err.os.to_string()),
        })
    }
    fn warn(&self, msg: &str) {
        self.inner.warn(msg);
    }
}
