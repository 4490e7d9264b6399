//! Counting a tree (files and bytes) without reading any data: the progress total,
//! counted concurrently with the job so the job never waits for it.

use crate::entry::{Entry, EntryKind};
use crate::error::{Error, Reporter, Result};
use crate::sink::{FileData, TreeSink};
use crate::walk::{is_tree, walk, WalkConfig};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// Running totals of a tree being counted.
#[derive(Debug, Default)]
pub struct Totals {
    /// Non-directory entries seen.
    pub entries: AtomicU64,
    /// Bytes of regular files seen.
    pub bytes: AtomicU64,
    /// Set once the whole tree has been counted.
    pub complete: AtomicBool,
}

struct CountSink<'a>(&'a Totals);

impl TreeSink for CountSink<'_> {
    type Dir = ();
    fn wants_data(&self) -> bool {
        false
    }
    fn root(&self, _: &Entry) -> Result<()> {
        Ok(())
    }
    fn dir(&self, _: &(), _: &Entry) -> Result<()> {
        Ok(())
    }
    fn leaf(&self, _: &(), entry: &Entry, _: Option<FileData<'_>>) -> Result<()> {
        self.0.entries.fetch_add(1, Relaxed);
        if let EntryKind::File { size, .. } = entry.kind {
            self.0.bytes.fetch_add(size, Relaxed);
        }
        Ok(())
    }
}

/// A reporter that drops everything.
pub(crate) struct Silent;
impl Reporter for Silent {
    fn error(&self, _: &Error) {}
    fn warn(&self, _: &str) {}
}

/// Counts the tree at `root` into `totals` on one thread (a `root` that is not a
/// directory is one entry); errors are the job's to report.
pub fn count_tree(root: &Path, totals: &Totals) {
    count_trees(&[root], totals)
}

/// [`count_tree`] of several trees (or files) into the same totals.
pub fn count_trees(roots: &[&Path], totals: &Totals) {
    for &root in roots {
        if is_tree(root) {
            let cfg = WalkConfig {
                threads: 1,
                ..WalkConfig::default()
            };
            let _ = walk(root, &CountSink(totals), &cfg, &Silent);
        } else if let Ok(m) = std::fs::symlink_metadata(root) {
            totals.entries.fetch_add(1, Relaxed);
            if m.is_file() {
                totals.bytes.fetch_add(m.len(), Relaxed);
            }
        }
    }
    totals.complete.store(true, Relaxed);
}
