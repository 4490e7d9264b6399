//! Builds an index while packing, one entry at a time and already encoded. Content
//! hashes arrive later, once a file's data has been read, and are patched in.
//!
//! A pack's memory must not grow with its member count, so once the index held in
//! memory passes a limit (4 MiB, about 25,000 members), all but its newest part moves to
//! an anonymous temporary file. Hashes arrive soon after their entry (the blocks in
//! flight hold a few thousand members), so nearly all are patched in memory; a late one
//! is written into the file. At the end the index is streamed out of the file and
//! memory ([`crate::spill`]), hashed on the way, then read back once more to build the
//! tree table that ends it.

use super::read::decode_written;
use super::{
    encode_entry, encode_hash, tail, write_tree, IndexEntry, COUNT_AT, FOOTER_LEN, HASH_AT,
    TREE_SINCE, VERSION,
};
use crate::spill::Spill;
use std::io;
use xxhash_rust::xxh3::Xxh3;

/// Where an entry's content hash goes: the offset of its has-hash byte in the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashSlot(pub(crate) u64);

/// An index being built (see the module's doc).
pub struct IndexWriter {
    bytes: Spill,
    count: u64,
}

/// How much of the index a pack holds in memory by default.
pub const INDEX_MEMORY: usize = 4 << 20;

impl Default for IndexWriter {
    fn default() -> Self {
        Self::with_memory_limit(INDEX_MEMORY)
    }
}

impl IndexWriter {
    /// An empty index that holds at most about `limit` bytes in memory.
    pub fn with_memory_limit(limit: usize) -> Self {
        let mut bytes = Spill::new(limit, "the index");
        // The count is set by `finish`; nothing is spilled yet, so this cannot fail.
        let _ = bytes.push(&super::header(0, VERSION));
        IndexWriter { bytes, count: 0 }
    }

    /// Appends an entry; returns where its hash goes. Fails only when the index could
    /// not be moved to its temporary file.
    pub fn push(&mut self, e: &IndexEntry) -> io::Result<HashSlot> {
        let start = self.bytes.len();
        self.bytes.push_with(|out| encode_entry(out, e, VERSION))?;
        self.count += 1;
        Ok(HashSlot(start + HASH_AT as u64))
    }

    /// How many bytes of index there are so far.
    pub fn bytes_so_far(&self) -> u64 {
        self.bytes.len()
    }

    /// Sets the content hash at `slot`.
    pub fn set_hash(&mut self, slot: HashSlot, hash: u128) -> io::Result<()> {
        self.bytes.patch(slot.0, &encode_hash(Some(hash)))
    }

    /// Passes the index, the zeros after it and the footer to `out`, in order, for an
    /// index starting at `at`, right after the tar data; returns how many bytes.
    pub fn finish(self, at: u64, mut out: impl FnMut(&[u8]) -> io::Result<()>) -> io::Result<u64> {
        let mut after = Vec::new();
        let len = self.finish_into(at, &mut out, &mut |tail, _| after = tail.to_vec())?;
        out(&after)?;
        Ok(len)
    }

    /// Passes the index to `out` and its zeros and footer, with the index's checksum,
    /// to `after`; returns the bytes of all three.
    fn finish_into(
        mut self,
        at: u64,
        mut out: impl FnMut(&[u8]) -> io::Result<()>,
        after: &mut dyn FnMut(&[u8], u64),
    ) -> io::Result<u64> {
        self.bytes
            .patch(COUNT_AT as u64, &self.count.to_le_bytes())?;
        let mut hasher = Xxh3::new();
        let mut emit = |bytes: &[u8]| {
            hasher.update(bytes);
            out(bytes)
        };
        self.bytes.copy_to(&mut emit)?;
        let entries_len = self.bytes.len();
        let mut len = entries_len;
        if VERSION >= TREE_SINCE {
            let (bytes, count) = (&self.bytes, self.count);
            let entries = || decode_written(bytes.reader(), entries_len, count, VERSION);
            len += write_tree(entries, at, &mut Emit(&mut emit))?;
        }
        let digest = hasher.digest();
        let tail = tail(at, at, (len, self.count, digest), VERSION);
        after(&tail, digest);
        Ok(len + tail.len() as u64)
    }
}

impl IndexWriter {
    /// [`IndexWriter::finish_packed`] where `packed`, else [`IndexWriter::finish`].
    pub fn finish_as(
        self,
        packed: bool,
        at: u64,
        out: impl FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<u64> {
        match packed {
            true => self.finish_packed(at, out),
            false => self.finish(at, out),
        }
    }

    /// As [`IndexWriter::finish`], the index packed (see [`super::packed`]): its bytes
    /// in zstd frames, then their table, the footer it would have had plain, the
    /// packed trailer, zeros and a footer of version
    /// [`PACKED_VERSION`](super::packed::PACKED_VERSION).
    pub fn finish_packed(
        self,
        at: u64,
        mut out: impl FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<u64> {
        let mut packer = super::packed::Packer::new(&mut out)?;
        let mut logical_tail = Vec::new();
        let (count, mut hash) = (self.count, 0);
        // The plain index goes to the packer; its zeros and footer are kept aside.
        let plain_len =
            self.finish_into(at, |bytes| packer.write(bytes), &mut |after, digest| {
                logical_tail = after.to_vec();
                hash = digest;
            })?;
        let footer = &logical_tail[logical_tail.len() - FOOTER_LEN as usize..];
        let (packed_len, index_len) = packer.finish(footer, at + plain_len)?;
        debug_assert_eq!(plain_len, index_len + logical_tail.len() as u64);
        let after = tail(
            at,
            at,
            (packed_len, count, hash),
            super::packed::PACKED_VERSION,
        );
        out(&after)?;
        Ok(packed_len + after.len() as u64)
    }
}

/// A [`Write`](io::Write) that hands each write to a closure.
struct Emit<'a, F>(&'a mut F);

impl<F: FnMut(&[u8]) -> io::Result<()>> io::Write for Emit<'_, F> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (self.0)(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::encode_index;
    use super::super::tests::sample_entries;
    use super::*;

    /// Packs `entries` (hashing each file after the next entry is pushed, as hashes
    /// arrive late) with a writer that holds at most `limit` bytes.
    fn written(entries: &[IndexEntry], limit: usize) -> (Vec<u8>, bool) {
        let mut w = IndexWriter::with_memory_limit(limit);
        let mut pending = None;
        for e in entries {
            let unhashed = IndexEntry {
                hash: None,
                ..e.clone()
            };
            let slot = w.push(&unhashed).expect("push");
            if let Some((slot, hash)) = pending.take() {
                w.set_hash(slot, hash).expect("hash");
            }
            pending = e.hash.map(|h| (slot, h));
        }
        if let Some((slot, hash)) = pending {
            w.set_hash(slot, hash).expect("hash");
        }
        let spilled = w.bytes.has_spilled();
        let mut out = Vec::new();
        let n = w
            .finish(10240, |b| {
                out.extend_from_slice(b);
                Ok(())
            })
            .expect("finish");
        assert_eq!(n, out.len() as u64);
        (out, spilled)
    }

    /// Whatever the memory limit, even one that spills after every entry and splits
    /// hashes and the count across the file and memory, the bytes written are those of
    /// an index built in memory.
    #[test]
    fn a_spilled_index_is_the_same_bytes() {
        let mut entries = sample_entries();
        let many: Vec<IndexEntry> = (0..40).flat_map(|_| entries.clone()).collect();
        entries.extend(many);
        let expected = encode_index(&entries, 10240);
        assert!(expected.len() > 8192);
        for limit in [1, 7, 16, 100, 333, 4096, 1 << 30] {
            let (bytes, spilled) = written(&entries, limit);
            assert_eq!(bytes, expected, "memory limit {limit}");
            assert_eq!(spilled, limit < 1 << 30, "memory limit {limit}");
        }
    }
}
