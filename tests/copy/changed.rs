//! Issue 32: `copy` tells a file that changed while it was read ("file changed as we
//! read it", naming it, exit status 1), and leaves no copy of it that looks complete.

use crate::common::changing::{assert_told_changed, while_changing};
use crate::common::run::copy;
use crate::common::scratch;

#[test]
fn a_file_changing_while_copied_is_told_and_not_left_as_a_copy() {
    let s = scratch();
    std::fs::write(s.src.join("steady"), b"does not change").expect("write");
    let big = s.src.join("big");
    let r = while_changing(&big, || copy(&s.src, &s.dst, &[]));
    assert_told_changed(&r, "big");
    assert!(!s.dst.join("big").exists(), "a torn copy was left");
    assert!(s.dst.join("steady").is_file());
}
