//! Names Linux allows and tools trip on: bytes that are not UTF-8, newlines, 255-byte
//! names, and paths longer than PATH_MAX (built and compared through directory fds).

use crate::common::copy_exact;
use crate::common::{scratch, trees};

#[test]
fn odd_names_are_copied_byte_for_byte() {
    let s = scratch();
    trees::odd_names(&s.src);
    copy_exact(&s, &[]);
}

#[test]
fn paths_longer_than_path_max_are_copied() {
    let s = scratch();
    trees::beyond_path_max(&s.src);
    copy_exact(&s, &[]);
}
