//! Builds an index while packing, one entry at a time and already encoded. Content
//! hashes arrive later, once a file's data has been read, and are patched in.
//!
//! A pack's memory must not grow with its member count, so once the index held in
//! memory passes a limit (4 MiB, about 25,000 members), all but its newest part moves to
//! an anonymous temporary file. Hashes arrive soon after their entry (the blocks in
//! flight hold a few thousand members), so nearly all are patched in memory; a late one
//! is written into the file. At the end the index is streamed out of the file and
//! memory, hashed on the way.

use super::read::decode_written;
use super::{
    encode_entry, encode_hash, tail, write_tree, IndexEntry, COUNT_AT, HASH_AT, TREE_SINCE, VERSION,
};
use crate::read::archive::At;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use xxhash_rust::xxh3::Xxh3;

/// Where an entry's content hash goes: the offset of its has-hash byte in the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashSlot(pub(crate) u64);

/// An index being built (see the module's doc).
pub struct IndexWriter {
    /// The newest part of the index: its bytes from `spilled` on.
    held: Vec<u8>,
    /// How many of the index's first bytes are in `spill`.
    spilled: u64,
    spill: Option<File>,
    count: u64,
    /// Once `held` is this long, all but its last eighth moves to `spill`.
    limit: usize,
}

/// How much of the index a pack holds in memory by default.
pub const INDEX_MEMORY: usize = 4 << 20;

/// How much is read back from the spill file at a time at the end.
const CHUNK: usize = 1 << 20;

impl Default for IndexWriter {
    fn default() -> Self {
        Self::with_memory_limit(INDEX_MEMORY)
    }
}

impl IndexWriter {
    /// An empty index that holds at most about `limit` bytes in memory.
    pub fn with_memory_limit(limit: usize) -> Self {
        let mut held = Vec::new();
        held.extend_from_slice(&super::header(0, VERSION)); // the count is set by `finish`
        IndexWriter {
            held,
            spilled: 0,
            spill: None,
            count: 0,
            limit: limit.max(1),
        }
    }

    /// Appends an entry; returns where its hash goes. Fails only when the index could
    /// not be moved to its temporary file.
    pub fn push(&mut self, e: &IndexEntry) -> io::Result<HashSlot> {
        let start = self.spilled + self.held.len() as u64;
        encode_entry(&mut self.held, e, VERSION);
        self.count += 1;
        if self.held.len() >= self.limit {
            self.spill_oldest()?;
        }
        Ok(HashSlot(start + HASH_AT as u64))
    }

    /// Moves all but the newest eighth of what is held to the spill file.
    fn spill_oldest(&mut self) -> io::Result<()> {
        let n = self.held.len() - self.limit / 8;
        let file = match &mut self.spill {
            Some(file) => file,
            empty => empty.insert(tempfile::tempfile().map_err(|e| spill_error("make", e))?),
        };
        file.write_all_at(&self.held[..n], self.spilled)
            .map_err(|e| spill_error("write", e))?;
        self.held.drain(..n);
        self.spilled += n as u64;
        Ok(())
    }

    /// How many bytes of index there are so far.
    pub fn bytes_so_far(&self) -> u64 {
        self.spilled + self.held.len() as u64
    }

    /// Sets the content hash at `slot`.
    pub fn set_hash(&mut self, slot: HashSlot, hash: u128) -> io::Result<()> {
        self.patch(slot.0, &encode_hash(Some(hash)))
    }

    /// Overwrites the index's bytes from `at` on with `bytes`, in the file or in memory.
    fn patch(&mut self, at: u64, bytes: &[u8]) -> io::Result<()> {
        let in_file = self.spilled.saturating_sub(at).min(bytes.len() as u64) as usize;
        if let (Some(file), true) = (&self.spill, in_file > 0) {
            file.write_all_at(&bytes[..in_file], at)
                .map_err(|e| spill_error("write", e))?;
        }
        let rest = &bytes[in_file..];
        if !rest.is_empty() {
            let from = (at + in_file as u64 - self.spilled) as usize;
            self.held[from..from + rest.len()].copy_from_slice(rest);
        }
        Ok(())
    }

    /// Passes the index, the zeros after it and the footer to `out`, in order, for an
    /// index starting at `at`, right after the tar data; returns how many bytes.
    pub fn finish(
        mut self,
        at: u64,
        mut out: impl FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<u64> {
        self.patch(COUNT_AT as u64, &self.count.to_le_bytes())?;
        let mut hasher = Xxh3::new();
        let mut emit = |bytes: &[u8]| {
            hasher.update(bytes);
            out(bytes)
        };
        if let Some(file) = &self.spill {
            let mut buf = vec![0u8; CHUNK.min(self.spilled as usize)];
            let mut pos = 0;
            while pos < self.spilled {
                let n = buf.len().min((self.spilled - pos) as usize);
                file.read_exact_at(&mut buf[..n], pos)
                    .map_err(|e| spill_error("read", e))?;
                emit(&buf[..n])?;
                pos += n as u64;
            }
        }
        emit(&self.held)?;
        let entries_len = self.spilled + self.held.len() as u64;
        let mut len = entries_len;
        if VERSION >= TREE_SINCE {
            let spilled: Box<dyn io::Read + '_> = match &self.spill {
                Some(file) => Box::new(
                    io::BufReader::with_capacity(CHUNK, At { file, pos: 0 }).take(self.spilled),
                ),
                None => Box::new(io::empty()),
            };
            let written = io::BufReader::with_capacity(CHUNK, spilled.chain(&self.held[..]));
            let entries = decode_written(written, entries_len, self.count, VERSION);
            len += write_tree(entries, at, &mut Emit(&mut emit))?;
        }
        let after = tail(at, at, (len, self.count, hasher.digest()), VERSION);
        out(&after)?;
        Ok(len + after.len() as u64)
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

fn spill_error(what: &str, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("{what} the index's temporary file (in the temp dir, TMPDIR): {e}"),
    )
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
        let spilled = w.spill.is_some();
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
