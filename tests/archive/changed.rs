//! Issue 32: `pack` tells a file that changed while it was read ("file changed as we
//! read it", naming it, exit status 1), as GNU tar does, instead of archiving a version
//! of it that never existed under its old mtime.

use crate::common::changing::{assert_told_changed, while_changing};
use crate::common::scratch;
use crate::ferry;

#[test]
fn a_file_changing_while_packed_is_told_and_the_exit_status_is_1() {
    let s = scratch();
    std::fs::write(s.src.join("steady"), b"does not change").expect("write");
    let big = s.src.join("big");
    // Packed to a file and to a pipe (each its own way of reading the data).
    for (i, out) in ["a.far", "-"].into_iter().enumerate() {
        let archive = s.tmp.path().join(format!("{i}-{out}"));
        let r = while_changing(&big, || match out {
            "-" => {
                let mut cmd = crate::ferry_command(&[&"pack", &s.src, &"-"]);
                cmd.stdout(std::fs::File::create(&archive).expect("create"));
                crate::common::run::run(cmd)
            }
            _ => ferry(&[&"pack", &s.src, &archive]),
        });
        assert_told_changed(&r, "big");
    }
    // Left alone, it packs without a word.
    let archive = s.tmp.path().join("quiet.far");
    let r = ferry(&[&"pack", &s.src, &archive]);
    r.assert_ok();
}
