//! End-to-end tests of `ferry copy`: the binary is run on temporary trees and the result
//! is checked with a tree comparer (tests/common/compare.rs) that looks at every kind
//! and every metadata field ferry promises to keep.
//!
//! One test binary: `cargo test --profile ci --test copy`. Tests that need root (device
//! nodes, other owners, trusted.* xattrs, loop mounts) or a tool (mkfs.xfs, setpriv)
//! print `skipping: <why>` and pass when they cannot run; set `FERRY_TEST_NO_SKIP=1` to
//! make such a skip fail instead (CI does).

#[path = "../common/mod.rs"]
mod common;

mod changed;
mod cli;
mod deep;
mod delete;
mod dry_run;
mod files_from;
mod filters;
mod flags;
mod in_the_way;
mod kinds;
mod link_dest;
mod mirror_rounds;
mod names;
mod pseudo;
mod reflink;
mod resume;
mod selftest;
mod shared;
mod single;
mod sparse;
mod unreadable;
mod update;
