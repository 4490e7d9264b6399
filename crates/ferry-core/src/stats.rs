//! Counters shared by every worker of a job, read live by progress displays.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// What a job has done so far. All counters only grow, but for a step begun again
/// ([`Stats::restore`]).
#[derive(Debug, Default)]
pub struct Stats {
    /// Regular files written (including hardlinks made).
    pub files: AtomicU64,
    /// Directories made (by pack: packed); one already there is not counted.
    pub dirs: AtomicU64,
    /// Symlinks, fifos and devices made.
    pub others: AtomicU64,
    /// Bytes of file data moved (logical size, holes included).
    pub bytes: AtomicU64,
    /// Entries left alone because the destination already matched.
    pub skipped: AtomicU64,
    /// Bytes of the skipped files.
    pub skipped_bytes: AtomicU64,
    /// Per-path failures.
    pub errors: AtomicU64,
    /// Files whose data was cloned.
    pub cloned: AtomicU64,
    /// Files whose data went through `copy_file_range`.
    pub kernel_copied: AtomicU64,
    /// Files whose data went through user-space buffers.
    pub buffered: AtomicU64,
    /// Entries removed from the destination (`--delete`), each below a removed
    /// directory counted too.
    pub deleted: AtomicU64,
}

/// A plain copy of [`Stats`] at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct Snapshot {
    pub files: u64,
    pub dirs: u64,
    pub others: u64,
    pub bytes: u64,
    pub skipped: u64,
    pub skipped_bytes: u64,
    pub errors: u64,
    pub cloned: u64,
    pub kernel_copied: u64,
    pub buffered: u64,
    pub deleted: u64,
}

impl Stats {
    /// Adds one to a counter.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Relaxed);
    }

    /// Counts one file moved by `method`.
    pub fn count_method(&self, method: crate::data::Method) {
        self.count_files_moved(method, 1);
    }

    /// Counts `n` files moved by `method`.
    pub fn count_files_moved(&self, method: crate::data::Method, n: u64) {
        match method {
            crate::data::Method::Clone => &self.cloned,
            crate::data::Method::KernelCopy => &self.kernel_copied,
            crate::data::Method::Buffered => &self.buffered,
        }
        .fetch_add(n, Relaxed);
    }

    /// Sets every counter back to what `to` read: a step begun again counts anew.
    pub fn restore(&self, to: &Snapshot) {
        for (counter, value) in [
            (&self.files, to.files),
            (&self.dirs, to.dirs),
            (&self.others, to.others),
            (&self.bytes, to.bytes),
            (&self.skipped, to.skipped),
            (&self.skipped_bytes, to.skipped_bytes),
            (&self.errors, to.errors),
            (&self.cloned, to.cloned),
            (&self.kernel_copied, to.kernel_copied),
            (&self.buffered, to.buffered),
            (&self.deleted, to.deleted),
        ] {
            counter.store(value, Relaxed);
        }
    }

    /// Reads every counter.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            files: self.files.load(Relaxed),
            dirs: self.dirs.load(Relaxed),
            others: self.others.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            skipped: self.skipped.load(Relaxed),
            skipped_bytes: self.skipped_bytes.load(Relaxed),
            errors: self.errors.load(Relaxed),
            cloned: self.cloned.load(Relaxed),
            kernel_copied: self.kernel_copied.load(Relaxed),
            buffered: self.buffered.load(Relaxed),
            deleted: self.deleted.load(Relaxed),
        }
    }
}
