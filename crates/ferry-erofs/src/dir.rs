//! Directory data: blocks of dirents, each block its dirents (12 bytes each) then their
//! names, with no terminator (the next name's offset ends each one; the last runs to
//! the block's end, or to a zero byte). Entries are sorted by name across the whole
//! directory, `.` and `..` among them, so the kernel finds a name by binary search over
//! the blocks, then within one.

use crate::format::{dirent, BLOCK, DIRENT_LEN};

/// One name in a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The name.
    pub name: Vec<u8>,
    /// Its inode.
    pub nid: u64,
    /// Its file type ([`crate::format::file_type`]).
    pub file_type: u8,
}

/// The entries (by index) that start each block, for names of `lens` bytes in order.
fn block_starts(lens: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut starts = vec![0];
    let mut used = 0usize;
    for (i, len) in lens.enumerate() {
        if used + DIRENT_LEN + len > BLOCK as usize {
            starts.push(i);
            used = 0;
        }
        used += DIRENT_LEN + len;
    }
    starts
}

/// The size of a directory whose sorted names are `lens` bytes long: whole blocks,
/// then what the last one uses.
pub fn size(lens: &[usize]) -> u64 {
    let starts = block_starts(lens.iter().copied());
    let last = starts.last().copied().unwrap_or(0);
    let tail: usize = lens[last..].iter().map(|l| DIRENT_LEN + l).sum();
    (starts.len() as u64 - 1) * BLOCK + tail as u64
}

/// The directory's data for `entries`, sorted by name: [`size`] bytes.
pub fn encode(entries: &[Entry]) -> Vec<u8> {
    let starts = block_starts(entries.iter().map(|e| e.name.len()));
    let mut out = Vec::new();
    for (b, &first) in starts.iter().enumerate() {
        let end = starts.get(b + 1).copied().unwrap_or(entries.len());
        let block = &entries[first..end];
        let base = out.len();
        let mut nameoff = DIRENT_LEN * block.len();
        for e in block {
            out.extend_from_slice(&dirent(e.nid, nameoff as u16, e.file_type));
            nameoff += e.name.len();
        }
        for e in block {
            out.extend_from_slice(&e.name);
        }
        if end < entries.len() {
            out.resize(base + BLOCK as usize, 0);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &[u8], nid: u64) -> Entry {
        Entry {
            name: name.to_vec(),
            nid,
            file_type: 1,
        }
    }

    #[test]
    fn one_block_holds_dirents_then_names() {
        let e = [entry(b".", 1), entry(b"..", 1), entry(b"abc", 9)];
        let data = encode(&e);
        assert_eq!(data.len() as u64, size(&[1, 2, 3]));
        assert_eq!(data.len(), 36 + 6);
        assert_eq!(u16::from_le_bytes([data[8], data[9]]), 36);
        assert_eq!(u16::from_le_bytes([data[32], data[33]]), 39);
        assert_eq!(&data[36..], b"...abc");
    }

    #[test]
    fn long_names_spill_into_more_blocks() {
        let e: Vec<Entry> = (0..5u8)
            .map(|i| entry(&[b'a' + i; 200], u64::from(i)))
            .collect();
        let data = encode(&e);
        let lens = vec![200; 5];
        assert_eq!(data.len() as u64, size(&lens));
        // Two 212-byte entries per block: blocks of 2, 2, 1.
        assert_eq!(data.len(), 512 * 2 + 212);
        assert_eq!(u16::from_le_bytes([data[512 + 8], data[512 + 9]]), 24);
        assert_eq!(data[1024 + 12], b'e');
    }
}
