//! End-to-end tests of `ferry copy` over ssh: each test starts a real sshd on a
//! loopback port with throwaway keys ([`sshd`]), runs the built ferry as both ends
//! (`--remote-ferry`), and checks the trees with the tree comparer; and of the
//! daemon, `ferry serve --listen` ([`daemon`]), reached at `ferry://` ([`served`]).
//!
//! One test binary: `cargo test --profile ci --test net`. Without sshd (Debian's
//! openssh-server; scripts/test.sh installs it) the tests say why and skip; with
//! `FERRY_TEST_NO_SKIP=1` such a skip fails.

#[allow(unused_imports)] // the helpers of all test binaries
#[path = "../common/mod.rs"]
mod common;

mod copy;
mod daemon;

/// A client's hello in the protocol this ferry speaks: magic, then version.
fn hello() -> Vec<u8> {
    let mut h = b"FERRYNET".to_vec();
    h.extend_from_slice(&ferry_net::proto::VERSION.to_le_bytes());
    h
}
mod deltas;
mod hostile;
mod mirror;
mod mirror_rounds;
mod preauth;
mod race;
mod served;
mod sources;
mod sshd;
