//! The index fuzz target's body, shared with the plain tests: `data` is taken as a
//! whole archive; its footer is read and its index gone through to the end or the
//! first error, checking what the index reader promises about what it returns.
//!
//! Used by `fuzz_targets/index.rs` (cargo-fuzz) and by the crate's integration tests
//! (corpus replay and the stable mutation loop), through `#[path]`.
//!
//! Random mutations almost never keep the footer's checksum right, so most would stop
//! there: [`with_fixed_footer`] gives the same input with that checksum recomputed, to
//! reach the entries behind it (whose own checksum is checked only at the end).

use ferry_archive::index::{Footer, Index, FOOTER_LEN};

/// Reads the index of `data` and checks the invariants; panics when one is broken.
/// Returns the number of entries read and whether the index was read to its end
/// without error.
pub fn exercise_index(data: &[u8]) -> (usize, bool) {
    let Some(tail) = data.len().checked_sub(FOOTER_LEN as usize) else {
        return (0, false);
    };
    let Ok(Some(footer)) = Footer::parse(&data[tail..], data.len() as u64) else {
        return (0, false);
    };
    let index = Index::new(footer);
    assert!(index.tar_end() <= index.offset(), "tar data past the index");
    let bytes = &data[index.offset() as usize..];
    let (mut entries, mut last) = (0usize, None);
    for item in index.entries(bytes) {
        let Ok((pos, e)) = item else {
            return (entries, false);
        };
        entries += 1;
        assert!(entries as u64 <= index.len(), "more entries than the count");
        assert!(last < Some(pos), "entries out of order");
        last = Some(pos);
        assert!(
            e.header_offset + 512 <= e.data_offset,
            "headers overlap the data"
        );
        assert!(
            e.data_offset + e.stored <= index.tar_end(),
            "data past the tar data"
        );
        let again = index.entry_at(&bytes[pos as usize..], pos);
        assert_eq!(
            again.ok().as_ref(),
            Some(&e),
            "an entry read on its own differs"
        );
    }
    assert_eq!(entries as u64, index.len(), "a clean end before the count");
    (entries, true)
}

/// `data` with its footer's checksum recomputed; None when it has no footer's magic.
pub fn with_fixed_footer(data: &[u8]) -> Option<Vec<u8>> {
    let tail = data.len().checked_sub(FOOTER_LEN as usize)?;
    if &data[tail..tail + 8] != b"FERRYEND" {
        return None;
    }
    let mut fixed = data.to_vec();
    let hash = xxhash_rust::xxh3::xxh3_64(&fixed[tail..tail + 56]);
    fixed[tail + 56..].copy_from_slice(&hash.to_le_bytes());
    Some(fixed)
}
