//! Sending a directory's small files into the kernel's cache ahead of their reads.
//!
//! Through FUSE every file read costs a round trip: the reader sleeps while the request
//! travels to this process and the data back. Programs that read trees (`tar -c`,
//! `cp -r`, `rsync`) read a directory's files one after another, and an archive keeps
//! them side by side. So the first time a file of a directory is read, the rest of the
//! directory's small files are read from the archive in a few large reads and pushed
//! into the page cache with `FUSE_NOTIFY_STORE`: their reads are then answered by the
//! kernel at once (the directory locality of CW-FFS, seed 004, on the read side).
//!
//! Only files the kernel already knows get stored (a listing with attributes made them
//! known; others are refused by the kernel, harmlessly). A file whose table records a
//! content hash is checked before it is stored, as a read would check it: never wrong
//! bytes. Each directory is sent ahead once, at most [`AHEAD_BYTES`] of it.

use super::{ArchiveFs, BAD, CHECKED, SENT_AHEAD};
use ferry_archive::read::tail::ContentHasher;
use ferry_archive::tree::{Node, NodeKind};
use fuser::INodeNo;

/// The most file data sent ahead for one directory.
const AHEAD_BYTES: u64 = 8 << 20;
/// Files larger than this are left to the kernel's own read-ahead.
const SMALL_FILE: u64 = 256 << 10;
/// The most entries of a directory looked at.
const AHEAD_ENTRIES: usize = 4096;
/// Files closer than this in the archive are read together ...
const GAP: u64 = 64 << 10;
/// ... in reads of at most this much (the buffer each FUSE thread may hold).
const GROUP_BYTES: u64 = 1 << 20;

impl ArchiveFs {
    /// Sends the small files of `file`'s directory into the kernel's cache, if that
    /// was not done before (see the module's doc).
    pub(super) fn send_ahead(&self, file: &Node) {
        let Some(notifier) = self.notifier.get() else {
            return;
        };
        if !self.verified.passed()
            || self.set_state(file.parent, SENT_AHEAD) & SENT_AHEAD != 0
            || !self.unchanged()
        {
            return;
        }
        let Ok(dir) = self.table.node(file.parent) else {
            return;
        };
        let mut files = Vec::new();
        let mut budget = AHEAD_BYTES;
        let mut from = 0u64;
        while files.len() < AHEAD_ENTRIES && budget > 0 {
            let Ok(batch) = self.table.dirents(&dir, from, 256) else {
                return;
            };
            if batch.is_empty() {
                break;
            }
            from += batch.len() as u64;
            for d in batch
                .iter()
                .filter(|d| d.kind == NodeKind::File && d.node != file.id)
            {
                let Ok(n) = self.table.node(d.node) else {
                    continue;
                };
                // Stored whole (no holes to rebuild, its bytes in order), small, and
                // not known to be bad.
                let in_order = || {
                    n.extras.1 == 0
                        || self
                            .table
                            .extras(&n)
                            .is_ok_and(|x| ferry_core::sparse::in_order(&x.runs))
                };
                if n.b == n.size
                    && n.size > 0
                    && n.size <= SMALL_FILE.min(budget)
                    && self.check_state(n.id) & BAD == 0
                    && in_order()
                {
                    budget -= n.size;
                    files.push(n);
                }
            }
        }
        files.sort_unstable_by_key(|n| n.a);
        for group in groups(&files) {
            self.store_group(notifier, group);
        }
    }

    /// Reads `group` (files close together in the archive) at once and stores each.
    fn store_group(&self, notifier: &fuser::Notifier, group: &[Node]) {
        let Some(first) = group.first() else {
            return;
        };
        let start = first.a;
        // Sorted by start; the extent is the furthest end (a table's files never
        // overlap once checked, but nothing here relies on it).
        let end = group.iter().map(|n| n.a + n.b).max().unwrap_or(start);
        let mut buf = vec![0u8; (end - start) as usize];
        match self.data.read_at(&mut buf, start) {
            Ok(got) if got == buf.len() => {}
            _ => return,
        }
        for n in group {
            let bytes = &buf[(n.a - start) as usize..(n.a - start + n.b) as usize];
            if n.hash.is_some() && self.check_state(n.id) & CHECKED == 0 {
                let runs = [(0, n.size)];
                let mut hasher = ContentHasher::new(&runs);
                hasher.update(bytes);
                if self.checked(n, Ok(hasher.finish(n.size))).is_err() {
                    continue;
                }
            }
            // Refused for a file the kernel does not know (not listed yet): harmless.
            let _ = notifier.store(INodeNo(u64::from(n.id) + 1), 0, bytes);
        }
    }
}

/// `files`, sorted by where their data lies, cut into runs whose data lies close
/// together (gaps of at most [`GAP`]) and spans at most [`GROUP_BYTES`] (or one file).
fn groups(files: &[Node]) -> impl Iterator<Item = &[Node]> {
    let mut rest = files;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = 1;
        while end < rest.len()
            && rest[end].a <= rest[end - 1].a + rest[end - 1].b + GAP
            && rest[end].a + rest[end].b - rest[0].a <= GROUP_BYTES
        {
            end += 1;
        }
        let (group, tail) = rest.split_at(end);
        rest = tail;
        Some(group)
    })
}
