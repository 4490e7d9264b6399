//! Holes: sparse files stay sparse, all-zero 4 KiB blocks of dense files become holes
//! by default but not with `--sparse=never`, and the content never changes.

use crate::common::build::*;
use crate::common::{copy_exact, scratch, Scratch};

const MIB: u64 = 1 << 20;
const BLOCK: usize = 4096;

/// Extra allocation DST may have over SRC (metadata blocks, allocation granularity).
const SLACK: u64 = 256 * 1024;

/// Files with holes: a 64 MiB hole between two 1 MiB extents, a hole at the end, a file
/// that is one hole.
fn holey_files(s: &Scratch) {
    let (a, b) = (pattern(1, MIB as usize), pattern(2, MIB as usize));
    sparse_file(
        &s.src.join("middle_hole"),
        66 * MIB,
        &[(0, &a), (65 * MIB, &b)],
    );
    sparse_file(&s.src.join("trailing_hole"), 16 * MIB, &[(0, &a[..BLOCK])]);
    sparse_file(&s.src.join("all_hole"), 8 * MIB, &[]);
    stamp_times(&s.src);
}

#[test]
fn holes_stay_holes() {
    let s = scratch();
    holey_files(&s);
    copy_exact(&s, &[]);
    for name in ["middle_hole", "trailing_hole", "all_hole"] {
        let (src, dst) = (allocated(&s.src.join(name)), allocated(&s.dst.join(name)));
        assert!(
            dst <= src + SLACK,
            "{name}: DST allocates {dst} bytes, SRC only {src}"
        );
    }
}

/// 1 MiB written in full, with explicit zeros: every second 4 KiB block, a 256 KiB run,
/// and a zero tail that is not a whole block. Returns its path.
fn dense_with_zero_blocks(s: &Scratch) -> std::path::PathBuf {
    let mut data = pattern(3, MIB as usize + 100);
    for (i, block) in data.chunks_mut(BLOCK).enumerate() {
        let in_run = (128..192).contains(&i);
        if i % 2 == 1 || in_run || block.len() < BLOCK {
            block.fill(0);
        }
    }
    let path = s.src.join("dense");
    write(&path, &data);
    stamp_times(&s.src);
    assert!(allocated(&path) >= MIB, "SRC should be fully allocated");
    path
}

#[test]
fn zero_blocks_become_holes_by_default() {
    let s = scratch();
    let src = dense_with_zero_blocks(&s);
    copy_exact(&s, &[]);
    let (before, after) = (allocated(&src), allocated(&s.dst.join("dense")));
    // More than half of the blocks are zero.
    assert!(
        after < before / 2 + SLACK,
        "DST allocates {after} bytes of SRC's {before}: zero blocks were written"
    );
}

#[test]
fn sparse_never_writes_every_block() {
    let s = scratch();
    let src = dense_with_zero_blocks(&s);
    copy_exact(&s, &["--sparse=never"]);
    let (before, after) = (allocated(&src), allocated(&s.dst.join("dense")));
    assert!(
        after >= before,
        "--sparse=never left holes: DST allocates {after} bytes, SRC {before}"
    );
}

#[test]
fn sparse_always_keeps_holes_and_makes_new_ones() {
    let s = scratch();
    holey_files(&s);
    let src = dense_with_zero_blocks(&s);
    copy_exact(&s, &["--sparse=always"]);
    let (before, after) = (allocated(&src), allocated(&s.dst.join("dense")));
    assert!(
        after < before / 2 + SLACK,
        "--sparse=always: DST allocates {after} bytes of SRC's {before}"
    );
    let (before, after) = (
        allocated(&s.src.join("middle_hole")),
        allocated(&s.dst.join("middle_hole")),
    );
    assert!(
        after <= before + SLACK,
        "--sparse=always: middle_hole allocates {after} bytes, SRC {before}"
    );
}
