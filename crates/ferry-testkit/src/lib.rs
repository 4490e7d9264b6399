//! Test support shared by every ferry crate's tests: whether they run as root, how a
//! test says it cannot run here (a failure under CI), scratch filesystems (loop-mounted
//! images, ramfs) for tests that need a real disk or a particular kind, a file's
//! extent map (whether its blocks are shared with another file), what memory a
//! command takes on input made to size it, and a ferry archive's tree table edited as
//! an attacker would, its checksums made to match.

pub mod extents;
pub mod memory;
pub mod mount;
pub mod table_edit;

/// Whether the tests run as root (device nodes, chown, trusted.* xattrs, loop mounts).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Reports why a test does not run here and tells the caller to return. With
/// `FERRY_TEST_NO_SKIP=1` in the environment (CI) a skip is a failure instead, so a
/// missing tool cannot turn a test green.
pub fn skip(reason: &str) {
    assert!(
        std::env::var_os("FERRY_TEST_NO_SKIP").is_none(),
        "FERRY_TEST_NO_SKIP is set but this test would skip: {reason}"
    );
    eprintln!("skipping: {reason}");
}

/// Returns `true` (after printing why) when the test needs root and does not have it.
pub fn skip_unless_root() -> bool {
    if is_root() {
        return false;
    }
    skip("needs root");
    true
}
