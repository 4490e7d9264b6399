//! Byte edits of a ferry archive, for tests that need an archive pack would not write:
//! a name changed in the tar headers, in the index, or both, with the checksums mended
//! so the archive is still read.

use std::ops::Range;
use xxhash_rust::xxh3::xxh3_64;

/// The user name field of a ustar header.
pub const USER_NAME: Range<usize> = 265..297;
/// The name field of a ustar header.
pub const NAME: Range<usize> = 0..100;
/// The device minor number field of a ustar header.
pub const DEV_MINOR: Range<usize> = 337..345;

/// Replaces the first `from` in `bytes` (a pax record's text, say: pax headers have no
/// checksum of their own) with `to`, of the same length.
pub fn replace_first(bytes: &mut [u8], from: &[u8], to: &[u8]) {
    assert_eq!(from.len(), to.len());
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .unwrap_or_else(|| panic!("no {} in the archive", from.escape_ascii()));
    bytes[at..at + to.len()].copy_from_slice(to);
}

/// In every tar header of `bytes` whose `field` holds `from` (NUL-padded), writes `to`
/// instead and mends the header's checksum; returns how many headers it changed.
pub fn rename_in_headers(bytes: &mut [u8], field: Range<usize>, from: &[u8], to: &[u8]) -> usize {
    let mut renamed = 0;
    for block in bytes.chunks_exact_mut(512) {
        let value = &block[field.clone()];
        if &block[257..263] != b"ustar\0" || !value.starts_with(from) || value[from.len()] != 0 {
            continue;
        }
        block[field.clone()].fill(0);
        block[field.start..field.start + to.len()].copy_from_slice(to);
        block[148..156].fill(b' ');
        let sum: u32 = block.iter().map(|&b| u32::from(b)).sum();
        block[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        renamed += 1;
    }
    renamed
}

/// In the index of the ferry archive `bytes`, renames the first `limit` names (member
/// paths, link targets and owner names alike) that are `from` to `to`, of the same
/// length, and mends the index's and footer's checksums; returns how many it renamed.
pub fn rename_in_index(bytes: &mut [u8], from: &[u8], to: &[u8], limit: usize) -> usize {
    assert_eq!(from.len(), to.len());
    let footer = bytes.len() - 64;
    let word = |b: &[u8], i: usize| {
        u64::from_le_bytes(
            b[footer + 8 + 8 * i..footer + 16 + 8 * i]
                .try_into()
                .unwrap(),
        ) as usize
    };
    let (at, len) = (word(bytes, 0), word(bytes, 1));
    // A name is its length as a 32-bit number and its bytes.
    let mut field = (from.len() as u32).to_le_bytes().to_vec();
    field.extend_from_slice(from);
    let mut renamed = 0;
    let index = &mut bytes[at..at + len];
    for i in 0..index.len().saturating_sub(field.len()) {
        if renamed < limit && index[i..].starts_with(&field) {
            index[i + 4..i + field.len()].copy_from_slice(to);
            renamed += 1;
        }
    }
    let hash = xxh3_64(&bytes[at..at + len]);
    bytes[footer + 40..footer + 48].copy_from_slice(&hash.to_le_bytes());
    let hash = xxh3_64(&bytes[footer..footer + 56]);
    bytes[footer + 56..].copy_from_slice(&hash.to_le_bytes());
    renamed
}
