//! The content hash ferry records in an archive's index and checks wherever it writes
//! or serves a file's bytes: [`ContentHash`], fed a file's stored bytes and its holes in
//! logical order.
//!
//! It is the xxh3-128 of the file's logical content (holes read as zeros) as long as
//! the content has at most [`ZERO_BLOCKS_HASHED`] all-zero 4 KiB blocks (counted on
//! the aligned blocks of the logical content, the last one possibly short), so every
//! file but the very sparse keeps the hash earlier versions recorded. Past that many,
//! further all-zero blocks are not fed: instead, once the content ends, the maximal
//! runs of such skipped blocks (first block, count, as little-endian u64 pairs, hashed
//! on their own with xxh3-128), a tag and the logical size are. The hash depends only
//! on the content, not on which zeros were stored and which were holes, and the work
//! follows the data stored: a hole costs nothing past the first
//! `ZERO_BLOCKS_HASHED` blocks, whatever size it claims.

use crate::data::{with_buffer, PositionedReader};
use crate::zero::{is_zero, BLOCK};
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd};
use xxhash_rust::xxh3::Xxh3;

/// All-zero blocks fed as bytes before further ones are skipped (1 MiB of zeros).
pub const ZERO_BLOCKS_HASHED: u64 = 256;

/// What is fed after the content when blocks were skipped, before the skip runs' hash.
const SKIP_TAG: &[u8] = b"\0ferry-skipped-zero-blocks";

static ZEROS: [u8; BLOCK] = [0; BLOCK];

/// The content hash of one file, fed in logical order.
#[derive(Clone)]
pub struct ContentHash {
    h: Xxh3,
    /// Logical offset of the next byte.
    pos: u64,
    /// Whether the current block holds a non-zero byte (its bytes so far were fed).
    block_data: bool,
    /// Zero bytes of the current block not fed yet (while it may still be all zero).
    pending: usize,
    /// All-zero blocks seen.
    zero_blocks: u64,
    /// The current run of skipped blocks (first block, count), and the runs before it
    /// (made only for a file that has some, so most files set up one hasher).
    skip: Option<(u64, u64)>,
    skips: Option<Xxh3>,
}

impl Default for ContentHash {
    fn default() -> Self {
        Self::new()
    }
}

impl ContentHash {
    /// A hash of nothing yet.
    pub fn new() -> Self {
        ContentHash {
            h: Xxh3::new(),
            pos: 0,
            block_data: false,
            pending: 0,
            zero_blocks: 0,
            skip: None,
            skips: None,
        }
    }

    /// The logical offset the next byte fed lies at.
    pub fn at(&self) -> u64 {
        self.pos
    }

    /// Feeds the next bytes of the content.
    pub fn update(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let within = (self.pos % BLOCK as u64) as usize;
            if within == 0 && bytes.len() >= BLOCK {
                // Whole blocks: feed a run of data blocks at once.
                let mut data = 0;
                while data + BLOCK <= bytes.len() && !is_zero(&bytes[data..data + BLOCK]) {
                    data += BLOCK;
                }
                if data > 0 {
                    self.h.update(&bytes[..data]);
                    self.pos += data as u64;
                    bytes = &bytes[data..];
                    continue;
                }
            }
            let take = (BLOCK - within).min(bytes.len());
            let chunk = &bytes[..take];
            if self.block_data {
                self.h.update(chunk);
            } else if is_zero(chunk) {
                self.pending += take;
            } else {
                self.h.update(&ZEROS[..self.pending]);
                self.pending = 0;
                self.h.update(chunk);
                self.block_data = true;
            }
            self.advance(take as u64);
            bytes = &bytes[take..];
        }
    }

    /// Feeds `n` zero bytes (a hole, or zeros known without reading them).
    pub fn zeros(&mut self, mut n: u64) {
        while n > 0 {
            let within = self.pos % BLOCK as u64;
            if within != 0 || n < BLOCK as u64 {
                let take = (BLOCK as u64 - within).min(n);
                if self.block_data {
                    self.h.update(&ZEROS[..take as usize]);
                } else {
                    self.pending += take as usize;
                }
                self.advance(take);
                n -= take;
                continue;
            }
            let blocks = n / BLOCK as u64;
            if self.zero_blocks < ZERO_BLOCKS_HASHED {
                self.h.update(&ZEROS);
                self.zero_blocks += 1;
                self.pos += BLOCK as u64;
                n -= BLOCK as u64;
                continue;
            }
            self.skipped(self.pos / BLOCK as u64, blocks);
            self.zero_blocks += blocks;
            self.pos += blocks * BLOCK as u64;
            n -= blocks * BLOCK as u64;
        }
    }

    /// The hash of a file of logical `size` (what was not fed up to it is a hole).
    pub fn finish(mut self, size: u64) -> u128 {
        if self.pos < size {
            self.zeros(size - self.pos);
        }
        if self.pos % BLOCK as u64 != 0 {
            self.end_block();
        }
        if self.zero_blocks <= ZERO_BLOCKS_HASHED {
            return self.h.digest128();
        }
        if let Some(run) = self.skip.take() {
            self.note_run(run);
        }
        let skips = self.skips.take().unwrap_or_default();
        self.h.update(SKIP_TAG);
        self.h.update(&skips.digest128().to_le_bytes());
        self.h.update(&self.pos.to_le_bytes());
        self.h.digest128()
    }

    /// Moves on by `n` bytes within the current block, closing it at its end.
    fn advance(&mut self, n: u64) {
        self.pos += n;
        if self.pos % BLOCK as u64 == 0 {
            self.end_block();
        }
    }

    /// Closes the current block: all zero, it is counted, and fed or skipped.
    fn end_block(&mut self) {
        if std::mem::take(&mut self.block_data) {
            return;
        }
        let len = std::mem::take(&mut self.pending);
        self.zero_blocks += 1;
        if self.zero_blocks <= ZERO_BLOCKS_HASHED {
            self.h.update(&ZEROS[..len]);
        } else {
            self.skipped((self.pos - 1) / BLOCK as u64, 1);
        }
    }

    /// Notes `count` skipped blocks from block `first` on, merging adjacent runs.
    fn skipped(&mut self, first: u64, count: u64) {
        match self.skip.as_mut() {
            Some((f, c)) if *f + *c == first => *c += count,
            _ => {
                if let Some(run) = self.skip.replace((first, count)) {
                    self.note_run(run);
                }
            }
        }
    }

    /// Feeds a finished run of skipped blocks to the hash of the runs.
    fn note_run(&mut self, (first, count): (u64, u64)) {
        let skips = self.skips.get_or_insert_with(Xxh3::new);
        skips.update(&first.to_le_bytes());
        skips.update(&count.to_le_bytes());
    }
}

/// The content hash of bytes held whole.
pub fn hash_of(bytes: &[u8]) -> u128 {
    let mut h = ContentHash::new();
    h.update(bytes);
    h.finish(bytes.len() as u64)
}

/// The content hash of a file stored as `runs` (`(offset, len)` in logical order)
/// from `offset` in `fd`, one after another.
pub fn hash_runs(
    fd: BorrowedFd<'_>,
    offset: u64,
    runs: &[(u64, u64)],
    size: u64,
) -> io::Result<u128> {
    let mut h = ContentHash::new();
    let mut at = offset;
    for &(off, len) in runs {
        h.zeros(off.saturating_sub(h.at()));
        hash_into(&mut h, fd, at, len)?;
        at += len;
    }
    Ok(h.finish(size))
}

/// The content hash of a file whose runs are stored one after another in `bytes`;
/// `None` if `bytes` holds less than the runs.
pub fn hash_bytes(bytes: &[u8], runs: &[(u64, u64)], size: u64) -> Option<u128> {
    let mut h = ContentHash::new();
    let mut at = 0usize;
    for &(off, len) in runs {
        h.zeros(off.saturating_sub(h.at()));
        let end = at.checked_add(usize::try_from(len).ok()?)?;
        h.update(bytes.get(at..end)?);
        at = end;
    }
    Some(h.finish(size))
}

/// The content hash of `len` bytes of `fd` from `offset` on (a file's content when
/// `offset` is 0), reading only its data: holes are found with SEEK_DATA, where the
/// filesystem tells them, and cost nothing.
pub fn hash_range(fd: impl AsFd, offset: u64, len: u64) -> io::Result<u128> {
    let fd = fd.as_fd();
    let mut h = ContentHash::new();
    for (off, run) in crate::data::data_runs(fd, offset, len)? {
        h.zeros((off - offset).saturating_sub(h.at()));
        hash_into(&mut h, fd, off, run)?;
    }
    Ok(h.finish(len))
}

/// Feeds `len` bytes of `fd` at `offset` to `h`; what lies past the end of the file
/// feeds nothing (the caller's `finish` makes it zeros).
pub fn hash_into(h: &mut ContentHash, fd: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<()> {
    let mut reader = PositionedReader { fd, pos: offset };
    with_buffer(len, |buf| {
        let mut left = len;
        while left > 0 {
            let want = left.min(buf.len() as u64) as usize;
            let got = reader.read(&mut buf[..want])?;
            if got == 0 {
                break;
            }
            h.update(&buf[..got]);
            left -= got as u64;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use xxhash_rust::xxh3::xxh3_128;

    /// The logical bytes of a file: `size` zeros with `runs` of 0xab.
    fn logical(runs: &[(u64, u64)], size: u64) -> Vec<u8> {
        let mut v = vec![0u8; size as usize];
        for &(o, l) in runs {
            v[o as usize..(o + l) as usize].fill(0xab);
        }
        v
    }

    fn hashed_as_runs(runs: &[(u64, u64)], size: u64) -> u128 {
        let mut h = ContentHash::new();
        for &(o, l) in runs {
            h.zeros(o - h.at());
            h.update(&vec![0xab; l as usize]);
        }
        h.finish(size)
    }

    #[test]
    fn few_zero_blocks_hash_as_plain_xxh3() {
        // 256 all-zero blocks, the most fed as bytes.
        let size = 260 * BLOCK as u64 + 17;
        let runs = [
            (5, 3),
            (70 * 4096 + 9, 5000),
            (200 * 4096, 1),
            (260 * 4096, 1),
        ];
        let want = xxh3_128(&logical(&runs, size));
        assert_eq!(hashed_as_runs(&runs, size), want);
        assert_eq!(hash_of(&logical(&runs, size)), want);
    }

    #[test]
    fn holes_and_stored_zeros_hash_alike() {
        let size = 2000 * BLOCK as u64 + 100;
        let runs = [(10, 3), (700 * 4096 + 1, 9000), (1999 * 4096, 50)];
        let bytes = logical(&runs, size);
        let whole = hash_of(&bytes);
        assert_ne!(whole, xxh3_128(&bytes), "past the limit blocks are skipped");
        assert_eq!(hashed_as_runs(&runs, size), whole);
        // Fed in odd pieces, with stored zeros in some of them.
        let mut h = ContentHash::new();
        for piece in bytes.chunks(4093) {
            h.update(piece);
        }
        assert_eq!(h.finish(size), whole);
        // Different content, different hash: a run moved by one block, a size.
        let moved = [(10, 3), (701 * 4096 + 1, 9000), (1999 * 4096, 50)];
        assert_ne!(hashed_as_runs(&moved, size), whole);
        assert_ne!(hashed_as_runs(&runs, size + 1), whole);
    }

    #[test]
    fn a_huge_hole_costs_nothing() {
        let start = std::time::Instant::now();
        let a = hashed_as_runs(&[(1 << 59, 10)], 1 << 60);
        let b = hashed_as_runs(&[(1 << 59, 10)], (1 << 60) - 1);
        assert_ne!(a, b);
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
    }
}
