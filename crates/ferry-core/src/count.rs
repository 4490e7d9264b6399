//! Counting a tree (files and bytes) without reading any data: the progress total,
//! counted concurrently with the job so the job never waits for it.

use crate::entry::{Entry, EntryKind, InodeKey};
use crate::error::{Error, Reporter, Result};
use crate::sink::{FileData, TreeSink};
use crate::walk::{is_tree, walk, WalkConfig};
use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, PoisonError};

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

/// Counts into the totals; a file with several names has its bytes counted once, as
/// a copy writes them once.
struct CountSink<'a> {
    totals: &'a Totals,
    seen: Mutex<HashSet<InodeKey>>,
}

impl TreeSink for CountSink<'_> {
    type Dir = ();
    fn wants_data(&self) -> bool {
        false
    }
    // Counted as the entries they are; no warning from a walk that only counts.
    fn wants_sockets(&self) -> bool {
        true
    }
    fn root(&self, _: &Entry) -> Result<()> {
        Ok(())
    }
    fn dir(&self, _: &(), _: &Entry) -> Result<()> {
        Ok(())
    }
    fn leaf(&self, _: &(), entry: &Entry, _: Option<FileData<'_>>) -> Result<()> {
        self.totals.entries.fetch_add(1, Relaxed);
        if let EntryKind::File { size, .. } = entry.kind {
            let first = entry.links.is_none_or(|(key, _)| {
                let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
                seen.insert(key)
            });
            if first {
                self.totals.bytes.fetch_add(size, Relaxed);
            }
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
            let sink = CountSink {
                totals,
                seen: Mutex::default(),
            };
            let _ = walk(root, &sink, &cfg, &Silent);
        } else if let Ok(m) = std::fs::symlink_metadata(root) {
            totals.entries.fetch_add(1, Relaxed);
            if m.is_file() {
                totals.bytes.fetch_add(m.len(), Relaxed);
            }
        }
    }
    totals.complete.store(true, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file's bytes count once however many names it has: the total is what the
    /// copy will write.
    #[test]
    fn hardlinked_bytes_count_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a"), vec![1u8; 1000]).expect("write");
        std::fs::hard_link(dir.path().join("a"), dir.path().join("b")).expect("link");
        std::fs::write(dir.path().join("c"), vec![2u8; 10]).expect("write");
        let totals = Totals::default();
        count_tree(dir.path(), &totals);
        assert_eq!(totals.entries.load(Relaxed), 3);
        assert_eq!(totals.bytes.load(Relaxed), 1010);
    }
}
