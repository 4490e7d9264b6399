//! Block sizes: what a signature's blocks may be, and the one chosen for a basis.

use crate::error::{Error, Result};

/// Block sizes are multiples of this, so a block that matches at an aligned offset of
/// the new file lies on filesystem block boundaries on both sides and can be cloned.
pub const ALIGN: u32 = 4096;
/// The smallest block.
pub const MIN_BLOCK: u32 = ALIGN;
/// The largest block (a 1 TiB basis gets it; the scan holds a few blocks in memory).
pub const MAX_BLOCK: u32 = 1 << 20;
/// The most blocks a signature holds: 4 TiB of basis in 1 MiB blocks, a 48 MiB
/// signature. A larger file is sent whole.
pub const MAX_BLOCKS: u64 = 1 << 22;

/// The block size for a basis of `size` bytes: about its square root, which balances
/// the signature (12 bytes a block) against the literal a change costs (a block),
/// rounded up to [`ALIGN`] and kept within [`MIN_BLOCK`]..=[`MAX_BLOCK`].
pub fn block_size_for(size: u64) -> u32 {
    let root = size.isqrt();
    let rounded = root.div_ceil(u64::from(ALIGN)) * u64::from(ALIGN);
    rounded.clamp(u64::from(MIN_BLOCK), u64::from(MAX_BLOCK)) as u32
}

/// Checks a block size read from the wire.
pub(crate) fn check_block(block: u64) -> Result<u32> {
    if block == 0 || block % u64::from(ALIGN) != 0 || block > u64::from(MAX_BLOCK) {
        return Err(Error::BlockSize(block));
    }
    Ok(block as u32)
}

/// How many blocks (the last one possibly short) a basis of `size` bytes has.
pub(crate) fn block_count(size: u64, block: u32) -> Result<usize> {
    let n = size.div_ceil(u64::from(block));
    if n > MAX_BLOCKS {
        return Err(Error::TooManyBlocks {
            size,
            block: u64::from(block),
            max: MAX_BLOCKS,
        });
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_sizes_follow_the_square_root_within_bounds() {
        assert_eq!(block_size_for(0), 4096);
        assert_eq!(block_size_for(1 << 20), 4096);
        assert_eq!(block_size_for(256 << 20), 16384);
        assert_eq!(block_size_for(16385 * 16385), 20480);
        assert_eq!(block_size_for(1 << 40), 1 << 20);
        assert_eq!(block_size_for(u64::MAX), 1 << 20);
        for bad in [0, 1, 4095, 4097, (1 << 20) + 4096, u64::MAX] {
            assert!(check_block(bad).is_err(), "{bad}");
        }
        assert!(block_count(u64::MAX, MAX_BLOCK).is_err());
        assert_eq!(block_count(4097, 4096).unwrap(), 2);
    }
}
