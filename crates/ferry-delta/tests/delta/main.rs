//! ferry-delta's tests: round trips on random edits, what a delta of a big file costs,
//! hostile signatures and ops (and a mutation loop over them), and clones on real
//! XFS and btrfs with the copy fallback on ext4 and tmpfs.

mod clone;
mod cost;
mod fuzz;
mod hostile;
mod roundtrip;
mod util;
