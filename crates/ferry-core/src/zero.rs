//! Finding all-zero blocks, so writers can leave holes instead (the Minix paper, seed 002).
//!
//! The check must be nearly free on dense data: it compares 64 bytes at a time and stops
//! at the first non-zero word, so a block of real data usually costs one comparison.

/// The block size holes are made in.
pub const BLOCK: usize = 4096;

/// True if every byte of `buf` is zero.
pub fn is_zero(buf: &[u8]) -> bool {
    let mut chunks = buf.chunks_exact(64);
    for c in &mut chunks {
        let mut acc = 0u64;
        for w in c.chunks_exact(8) {
            acc |= u64::from_ne_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        }
        if acc != 0 {
            return false;
        }
    }
    chunks.remainder().iter().all(|&b| b == 0)
}

/// Splits `buf` (which starts at a block boundary of the file) into runs of data that
/// must be written, as `(start, end)` offsets into `buf`; the gaps are all-zero blocks.
/// A trailing partial block is data unless it is all zero.
pub fn data_runs(buf: &[u8]) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    while start < buf.len() {
        let end = (start + BLOCK).min(buf.len());
        if !is_zero(&buf[start..end]) {
            match runs.last_mut() {
                Some(last) if last.1 == start => last.1 = end,
                _ => runs.push((start, end)),
            }
        }
        start = end;
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_and_nonzero() {
        assert!(is_zero(&[]));
        assert!(is_zero(&[0; 4096]));
        assert!(is_zero(&[0; 100]));
        let mut b = vec![0u8; 4096];
        b[4095] = 1;
        assert!(!is_zero(&b));
        b[4095] = 0;
        b[70] = 1;
        assert!(!is_zero(&b));
        assert!(!is_zero(&[0, 0, 3]));
    }

    #[test]
    fn runs_skip_zero_blocks_and_merge_neighbours() {
        let mut b = vec![0u8; 5 * BLOCK + 10];
        b[0] = 1; // block 0
        b[BLOCK + 5] = 1; // block 1, merges with 0
        b[3 * BLOCK] = 1; // block 3
        b[5 * BLOCK + 9] = 1; // trailing partial block
        assert_eq!(
            data_runs(&b),
            vec![
                (0, 2 * BLOCK),
                (3 * BLOCK, 4 * BLOCK),
                (5 * BLOCK, 5 * BLOCK + 10)
            ]
        );
        assert!(data_runs(&vec![0u8; 3 * BLOCK + 1]).is_empty());
    }
}
