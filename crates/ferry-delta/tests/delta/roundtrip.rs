//! Round trips: the rebuilt file equals the new one byte for byte, whatever the edits,
//! and what travels is about what changed.

use crate::util::{random, trip_bytes};
use ferry_delta::{block_size_for, MAX_LITERAL};

/// One random edit of `data`.
fn edit(rng: &mut fastrand::Rng, data: &mut Vec<u8>) {
    let at = rng.usize(..=data.len());
    let n = rng.usize(1..20_000);
    match rng.u8(..6) {
        0 => {
            let bytes = random(rng, n);
            data.splice(at..at, bytes);
        }
        1 => {
            let end = (at + n).min(data.len());
            data.drain(at..end);
        }
        2 => {
            let end = (at + n).min(data.len());
            rng.fill(&mut data[at..end]);
        }
        3 => data.extend(random(rng, n)),
        4 => data.truncate(data.len().saturating_sub(n)),
        _ => {
            // A stretch of the file repeated elsewhere (moved data).
            let end = (at + n).min(data.len());
            let copy = data[at..end].to_vec();
            let to = rng.usize(..=data.len());
            data.splice(to..to, copy);
        }
    }
}

#[test]
fn random_edits_rebuild_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    for round in 0..120 {
        let len = match round % 4 {
            0 => rng.usize(..5000),
            1 => rng.usize(..70_000),
            _ => rng.usize(..600_000),
        };
        let basis = random(&mut rng, len);
        let mut new = basis.clone();
        for _ in 0..rng.usize(..6) {
            edit(&mut rng, &mut new);
        }
        let block = [4096, 8192, 12288, block_size_for(len as u64)][round % 4];
        let t = trip_bytes(dir.path(), &basis, &new, block);
        assert!(t.stats.literal <= new.len() as u64);
    }
}

#[test]
fn unchanged_file_is_one_copy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = random(&mut fastrand::Rng::with_seed(1), 1_000_003);
    let t = trip_bytes(dir.path(), &data, &data, 4096);
    assert_eq!(
        (t.stats.literal, t.stats.copy_ops, t.stats.literal_ops),
        (0, 1, 0)
    );
}

#[test]
fn an_insertion_costs_its_bytes_and_at_most_a_block() {
    let dir = tempfile::tempdir().expect("tempdir");
    let basis = random(&mut fastrand::Rng::with_seed(2), 500_001);
    // At a block boundary: every basis block (the short last one too) is found at its
    // shifted offset, and only the inserted bytes travel.
    for at in [0, 8192, 30 * 8192, 61 * 8192, 500_001] {
        let mut new = basis.clone();
        new.splice(at..at, *b"xyz");
        let t = trip_bytes(dir.path(), &basis, &new, 8192);
        assert_eq!(t.stats.literal, 3, "insertion at {at}");
        assert!(
            t.stats.copy_ops <= 2,
            "insertion at {at}: {} copies",
            t.stats.copy_ops
        );
    }
    // Inside a block: that block travels too.
    for at in [1, 250_000, 500_000] {
        let mut new = basis.clone();
        new.splice(at..at, *b"xyz");
        let t = trip_bytes(dir.path(), &basis, &new, 8192);
        assert!(
            t.stats.literal <= 8192 + 3,
            "insertion at {at}: {}",
            t.stats.literal
        );
    }
}

#[test]
fn a_deletion_costs_at_most_a_block() {
    let dir = tempfile::tempdir().expect("tempdir");
    let basis = random(&mut fastrand::Rng::with_seed(3), 300_000);
    let mut new = basis.clone();
    new.drain(100_000..100_010);
    let t = trip_bytes(dir.path(), &basis, &new, 4096);
    assert!(t.stats.literal < 4096, "{}", t.stats.literal);
}

#[test]
fn edge_sizes_rebuild_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = fastrand::Rng::with_seed(4);
    let big = random(&mut rng, 100_000);
    let cases: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![
        ("both empty", vec![], vec![]),
        ("empty basis", vec![], big.clone()),
        ("empty new file", big.clone(), vec![]),
        (
            "basis shorter than a block",
            big[..100].to_vec(),
            big.clone(),
        ),
        ("new shorter than a block", big.clone(), big[..100].to_vec()),
        (
            "new is the basis's last bytes",
            big.clone(),
            big[big.len() - 5000..].to_vec(),
        ),
        (
            "basis larger (truncated)",
            big.clone(),
            big[..61_440].to_vec(),
        ),
        (
            "basis smaller (appended)",
            big[..50_000].to_vec(),
            big.clone(),
        ),
        ("same size, one byte changed", big.clone(), {
            let mut v = big.clone();
            v[77_777] ^= 1;
            v
        }),
        ("all zeros", vec![0; 100_000], vec![0; 120_000]),
    ];
    for (what, basis, new) in cases {
        let t = trip_bytes(dir.path(), &basis, &new, 4096);
        eprintln!("{what}: {} literal bytes", t.stats.literal);
    }
    // The basis's short last block matches where it ends the new file.
    let t = trip_bytes(dir.path(), &big, &big[big.len() - 5000..], 4096);
    assert!(t.stats.literal < 5000, "{}", t.stats.literal);
    // Only the appended bytes travel (the basis's short block is matched in place).
    let t = trip_bytes(dir.path(), &big[..50_000], &big, 4096);
    assert_eq!(t.stats.literal, 50_000);
    // A file of zeros is copies of one block.
    let t = trip_bytes(dir.path(), &[0; 100_000], &[0; 120_000], 4096);
    assert!(t.stats.literal < 4096, "{}", t.stats.literal);
}

#[test]
fn literals_are_bounded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = fastrand::Rng::with_seed(5);
    let basis = random(&mut rng, 200_000);
    let new = random(&mut rng, 3 * MAX_LITERAL + 12_345);
    let t = trip_bytes(dir.path(), &basis, &new, 4096);
    assert_eq!(t.stats.literal, new.len() as u64);
    assert_eq!(t.stats.literal_ops, 4);
    // And with no full basis block to roll against.
    let t = trip_bytes(dir.path(), &basis[..10], &new, 4096);
    assert_eq!(t.stats.literal_ops, 4);
}
