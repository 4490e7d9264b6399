//! A file's chunk map: how a chunk-based inode finds its data in the archive.
//!
//! A chunk-based inode divides its file into chunks of one power-of-two size, each
//! mapped by an 8-byte index to a block of a device, or to nothing (a hole, read as
//! zeros). A file stored whole in the archive is one run of data starting on a 512-byte
//! boundary (every tar member's data does): one chunk as large as the file covers it.
//! A sparse file's runs are stored one after another; the chunk size is then the
//! largest power of two that every run's start and end is a multiple of, so that each
//! chunk is all data or all hole.

use crate::format::{BLOCK, BLOCK_BITS, MAX_CHUNK_BITS, NULL_ADDR};

/// The most chunks one file may have (its indexes take 8 bytes each in the image).
pub const MAX_CHUNKS: u64 = 1 << 24;

/// A file's chunks: their size, and each one's block on the archive device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkMap {
    /// log2 of the chunk size over the block size.
    pub bits: u32,
    /// Each chunk's first block on the archive device ([`NULL_ADDR`]: a hole).
    pub blocks: Vec<u32>,
}

/// How a file of `size` bytes whose data `runs` (logical offset, length, in any
/// order: [`ferry_core::sparse::pieces`]) are stored one after another from byte
/// `start` of an archive of `archive_len` bytes is cut into chunks: log2 of the chunk
/// size over the block size, and the number of chunks (each takes an 8-byte index in
/// the image). The error says why the kernel could not be shown the file.
pub fn shape(
    size: u64,
    start: u64,
    runs: &[(u64, u64)],
    archive_len: u64,
) -> Result<(u32, u64), String> {
    shape_of(size, start, runs, archive_len).map(|(bits, count, _)| (bits, count))
}

/// [`shape`], with the pieces it found.
fn shape_of(
    size: u64,
    start: u64,
    runs: &[(u64, u64)],
    archive_len: u64,
) -> Result<(u32, u64, Vec<ferry_core::sparse::Piece>), String> {
    let stored = runs
        .iter()
        .try_fold(0u64, |sum, r| sum.checked_add(r.1))
        .ok_or("its runs add up to more bytes than a file can hold")?;
    if start
        .checked_add(stored)
        .is_none_or(|end| end > archive_len)
    {
        return Err("its data lies past the end of the archive".into());
    }
    if stored > 0 && start % BLOCK != 0 {
        return Err(format!(
            "its data starts at byte {start} of the archive, not on a 512-byte boundary"
        ));
    }
    if runs.iter().any(|r| r.0.checked_add(r.1).is_none()) {
        return Err("a sparse region ends past the largest size a file can have".into());
    }
    let pieces = ferry_core::sparse::pieces(runs);
    let mut chunk = BLOCK << MAX_CHUNK_BITS;
    for p in &pieces {
        for edge in [p.at, p.at + p.len] {
            if edge != 0 && edge < size {
                chunk = chunk.min(1 << edge.trailing_zeros());
            }
        }
        if p.stored % BLOCK != 0 {
            // Only a map out of order stores a region at such an offset.
            return Err(format!(
                "a sparse region's bytes are stored at byte {} of its data, not on a \
                 512-byte boundary",
                p.stored
            ));
        }
    }
    if chunk < BLOCK {
        return Err("a sparse region does not start or end on a 512-byte boundary".into());
    }
    // No larger than the file needs (a size past 2^63 has no next power of two).
    if let Some(whole) = size.checked_next_power_of_two() {
        chunk = chunk.min(whole.max(BLOCK));
    }
    let count = size.div_ceil(chunk);
    if count > MAX_CHUNKS {
        return Err(format!(
            "{count} chunks of {chunk} bytes (more than {MAX_CHUNKS})"
        ));
    }
    Ok(((chunk >> BLOCK_BITS).trailing_zeros(), count, pieces))
}

/// The chunk map of a file (the arguments as for [`shape`]).
pub fn map(
    size: u64,
    start: u64,
    runs: &[(u64, u64)],
    archive_len: u64,
) -> Result<ChunkMap, String> {
    let (bits, count, pieces) = shape_of(size, start, runs, archive_len)?;
    let chunk = BLOCK << bits;
    let mut blocks = Vec::with_capacity(count as usize);
    let mut piece = 0usize;
    for k in 0..count {
        let at = k * chunk;
        while piece < pieces.len() && pieces[piece].at + pieces[piece].len <= at {
            piece += 1;
        }
        let addr = match pieces.get(piece) {
            Some(p) if p.at <= at => {
                let block = (start + p.stored + (at - p.at)) >> BLOCK_BITS;
                u32::try_from(block)
                    .ok()
                    .filter(|&b| b != NULL_ADDR)
                    .ok_or("its data lies past the 2 TiB a 512-byte block address reaches")?
            }
            _ => NULL_ADDR,
        };
        blocks.push(addr);
    }
    Ok(ChunkMap { bits, blocks })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_file_is_one_chunk_at_its_data() {
        let m = map(10_000, 4096, &[(0, 10_000)], 1 << 20).unwrap();
        assert_eq!(m.bits, 5); // 16 KiB chunk = 512 << 5
        assert_eq!(m.blocks, [8]);
        let small = map(1, 512, &[(0, 1)], 1024).unwrap();
        assert_eq!((small.bits, small.blocks), (0, vec![1]));
    }

    #[test]
    fn holes_are_null_chunks_and_data_chunks_follow_the_stored_runs() {
        // 3 MiB: data at 1 MiB (4 KiB) and 2 MiB (4 KiB), stored from byte 1536.
        let runs = [(1 << 20, 4096), (2 << 20, 4096)];
        let m = map(3 << 20, 1536, &runs, 1 << 30).unwrap();
        assert_eq!(m.bits, 3); // 4 KiB chunks
        assert_eq!(m.blocks.len(), 768);
        assert_eq!(m.blocks[256], 3);
        assert_eq!(m.blocks[512], 3 + 8);
        assert_eq!(m.blocks.iter().filter(|&&b| b != NULL_ADDR).count(), 2);
    }

    #[test]
    fn a_last_run_may_end_anywhere_and_an_all_hole_file_has_no_data() {
        let m = map(5000, 0, &[(4096, 904)], 1 << 20).unwrap();
        assert_eq!(m.blocks, [NULL_ADDR, 0]);
        let empty = map(1 << 30, 0, &[], 0).unwrap();
        assert!(empty.blocks.iter().all(|&b| b == NULL_ADDR));
    }

    #[test]
    fn what_the_kernel_cannot_be_shown_is_an_error() {
        assert!(map(100, 100, &[(0, 100)], 1000)
            .unwrap_err()
            .contains("512-byte"));
        assert!(map(100, 512, &[(0, 100)], 600)
            .unwrap_err()
            .contains("past the end"));
        let odd = map(2000, 0, &[(0, 100), (1000, 100)], 1 << 20);
        assert!(odd.unwrap_err().contains("sparse region"));
        let huge = map(1 << 50, 0, &[(4096, 4096)], 1 << 20);
        assert!(huge.unwrap_err().contains("chunks"));
        let far = map(1024, 1 << 41, &[(0, 1024)], 1 << 42);
        assert!(far.unwrap_err().contains("2 TiB"));
        // A size past 2^63 has no next power of two; runs whose ends overflow.
        assert!(map(u64::MAX, 0, &[(0, 512)], 1 << 20)
            .unwrap_err()
            .contains("chunks"));
        assert!(map(u64::MAX, 0, &[(u64::MAX - 10, 512)], 1 << 20).is_err());
        assert!(map(1 << 20, 0, &[(0, u64::MAX), (0, 2)], 1 << 20).is_err());
    }
}
