//! The fuzz target's body, shared with the plain tests: reads every entry of `data`
//! and all of its data, and checks what the reader promises about what it returns.
//!
//! Used by `fuzz_targets/reader.rs` (cargo-fuzz) and by the crate's integration tests
//! (corpus replay and the stable mutation loop), through `#[path]`.
//!
//! Random mutations almost never keep a header checksum right, so most would stop at
//! the first header: [`with_fixed_checksums`] gives the same input with the checksum of
//! every block that looks like a header recomputed, to reach the code behind it.

use ferry_archive::tar::{Reader, TarKind, BLOCK_SIZE};

/// Reads `data` to its end or its first error and checks the invariants; panics when
/// one is broken. Returns the number of entries read and whether the archive was read
/// to its end without error.
pub fn exercise(data: &[u8]) -> (usize, bool) {
    let len = data.len() as u64;
    let mut reader = Reader::new(data);
    let mut entries = 0;
    loop {
        match reader.next_entry() {
            Ok(None) => {
                assert!(reader.offset() <= len, "end offset past the input");
                // On a block, unless the input ends in a partial block after a lone
                // zero block (read as the end, as GNU tar does).
                assert!(
                    reader.offset() % BLOCK_SIZE == 0 || reader.offset() == len,
                    "end offset not on a block"
                );
                assert!(reader.next_entry().unwrap().is_none(), "end is sticky");
                return (entries, true);
            }
            Ok(Some(entry)) => {
                entries += 1;
                check_entry(&entry);
                if !read_data(&mut reader, &entry, data) {
                    return (entries, false);
                }
            }
            Err(e) => {
                assert!(
                    e.offset <= len,
                    "error offset {} past the input ({len}): {e}",
                    e.offset
                );
                assert!(reader.next_entry().is_err(), "errors are sticky");
                return (entries, false);
            }
        }
    }
}

fn check_entry(entry: &ferry_archive::tar::TarEntry) {
    // The ACL text unpack turns into attributes: an error, or attributes the kernel's
    // format allows (a 4-byte version, then 8 bytes an entry, at least three).
    let mut ids = ferry_archive::owners::LocalIds::default();
    if let Ok(attrs) = ferry_archive::read::acl::acl_xattrs(&entry.pax, &mut ids) {
        for attr in attrs {
            let len = attr.value.len();
            assert!(
                len >= 4 + 3 * 8 && (len - 4) % 8 == 0,
                "ACL attribute of {len} bytes"
            );
        }
    }
    assert!(
        !entry.path.is_empty() && !entry.path.contains(&0),
        "bad path"
    );
    assert_eq!(
        entry.header_offset % BLOCK_SIZE,
        0,
        "header offset not on a block"
    );
    assert_eq!(
        entry.data_offset % BLOCK_SIZE,
        0,
        "data offset not on a block"
    );
    assert!(
        entry.data_offset > entry.header_offset,
        "data before header"
    );
    assert!(entry.mode <= 0o7777);
    assert!(entry.mtime.1 < 1_000_000_000 && entry.atime.is_none_or(|a| a.1 < 1_000_000_000));
    assert_eq!(
        entry.link_target.is_some(),
        matches!(entry.kind, TarKind::Symlink | TarKind::HardLink)
    );
    assert_eq!(
        entry.rdev.is_some(),
        matches!(entry.kind, TarKind::CharDevice | TarKind::BlockDevice)
    );
    if entry.kind != TarKind::File {
        assert_eq!((entry.size, entry.stored), (0, 0), "data on a non-file");
    }
    match &entry.sparse {
        None => assert_eq!(entry.size, entry.stored),
        Some(runs) => {
            // In any order, as stored (ferry_core::sparse lays them out).
            let mut total = 0u64;
            for &(offset, n) in runs {
                assert!(n > 0, "an empty run");
                assert!(offset + n <= entry.size, "run past the size");
                total += n;
            }
            assert_eq!(total, entry.stored, "runs do not add up");
        }
    }
}

/// Reads the entry's data (all of it, or half of it to exercise skipping) and checks it
/// is the input's bytes at `data_offset`. Returns false if reading failed.
fn read_data(
    reader: &mut Reader<&[u8]>,
    entry: &ferry_archive::tar::TarEntry,
    data: &[u8],
) -> bool {
    let want = if entry.header_offset % 1024 == 0 {
        entry.stored
    } else {
        entry.stored / 2
    };
    let mut pos = 0u64;
    let mut buf = [0u8; 4096];
    while pos < want {
        let n = match reader.read_data(&mut buf) {
            Ok(0) => panic!("data ended at {pos} of {}", entry.stored),
            Ok(n) => n,
            Err(e) => {
                assert!(e.offset <= data.len() as u64);
                return false;
            }
        };
        let start = entry.data_offset + pos;
        let expected = &data[start as usize..start as usize + n];
        assert_eq!(&buf[..n], expected, "data is not the input at data_offset");
        pos += n as u64;
    }
    if want == entry.stored {
        assert_eq!(reader.read_data(&mut buf).unwrap(), 0, "data past stored");
    }
    true
}

/// `data` with the checksum of every 512-byte block that has a `ustar` magic
/// recomputed, or `None` if that changes nothing.
pub fn with_fixed_checksums(data: &[u8]) -> Option<Vec<u8>> {
    let mut fixed = data.to_vec();
    for block in fixed.chunks_exact_mut(512) {
        if &block[257..262] == b"ustar" {
            block[148..156].fill(b' ');
            let sum: u32 = block.iter().map(|&c| u32::from(c)).sum();
            block[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        }
    }
    (fixed != data).then_some(fixed)
}
