//! End-to-end tests of ferry and S3: each test starts a real Garage (an S3-compatible
//! distributed object store) on loopback ports in a temporary directory ([`garage`]),
//! runs the built ferry against it with the standard `AWS_*` variables, and checks the
//! trees with the tree comparer.
//!
//! One test binary: `cargo test --profile ci --test s3`. Without `garage` on PATH (or in
//! ~/.cargo/bin; scripts/test.sh installs it with `cargo install garage --locked`) the
//! tests say why and skip; with `FERRY_TEST_NO_SKIP=1` such a skip fails. The
//! [`mount`] tests also need /dev/fuse and fusermount3, and skip the same way.

#[allow(unused_imports)] // the helpers of all test binaries
#[path = "../common/mod.rs"]
mod common;

mod cluster;
mod compaction;
mod copy;
mod directories;
mod errors;
mod garage;
mod hostile;
mod memory;
mod mount;
mod objects;
mod objects_delete;
mod objects_read;
mod profile;
mod renames;
mod snapshots;
mod tls;

/// A temporary path as the `&str` a command line takes (the scratch paths are UTF-8).
fn s(p: &std::path::Path) -> &str {
    p.to_str().expect("UTF-8 temp path")
}
