//! The tree sink: what a source pushes entries into.
//!
//! Shaped like ripgrep's `Sink`: a sink is told about directories as they are entered,
//! about every other entry inside them, and about each directory again once all its
//! descendants are done (so directory modes and times can be applied after the
//! children). Methods are called from many threads at once; `Dir` is the sink's own
//! handle for a directory it has made.

use crate::data::SourceData;
use crate::entry::Entry;
use crate::error::Result;

/// Receives a tree, possibly from many threads at once.
pub trait TreeSink: Sync {
    /// The sink's handle for a directory it has entered.
    type Dir: Send + Sync;

    /// Whether file entries should come with their data opened. A sink that only counts
    /// says no, and the source then only stats.
    fn wants_data(&self) -> bool {
        true
    }

    /// The root of the tree.
    fn root(&self, entry: &Entry) -> Result<Self::Dir>;

    /// A directory inside `parent`.
    fn dir(&self, parent: &Self::Dir, entry: &Entry) -> Result<Self::Dir>;

    /// Any other entry inside `parent`: files come with their data when the sink wants
    /// it.
    fn leaf(&self, parent: &Self::Dir, entry: &Entry, data: Option<&SourceData<'_>>) -> Result<()>;

    /// All of `dir`'s descendants are done.
    fn finish_dir(&self, _dir: &Self::Dir, _entry: &Entry) -> Result<()> {
        Ok(())
    }
}
