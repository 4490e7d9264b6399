//! Issue 32: every member whose bytes `pack` reads or copies (through memory or with
//! `copy_file_range`) gets a content hash, and `unpack` checks it whenever it writes
//! the member: a flipped byte is an error naming the member (exit 1), and the damaged
//! file is not left looking complete.

use crate::common::{build, scratch};
use crate::{ferry, ferry_command, ferry_stdin};
use ferry_archive::read::Archive;
use std::path::Path;

/// Flips one byte of the stored data of member `name` in `archive`.
fn flip_a_byte_of(archive: &Path, name: &str) {
    let at = {
        let a = Archive::open(archive).expect("open the archive");
        let e = a
            .entries()
            .expect("an index")
            .map(|e| e.expect("an entry"))
            .find(|e| e.path.ends_with(name.as_bytes()))
            .expect("the member");
        assert!(e.hash.is_some(), "{name}: no hash recorded");
        e.data_offset + 100
    };
    let mut bytes = std::fs::read(archive).expect("read");
    bytes[at as usize] ^= 0x20;
    std::fs::write(archive, bytes).expect("write");
}

#[test]
fn a_flipped_byte_in_any_member_fails_unpack_naming_it() {
    let s = scratch();
    // "small" is read into a block of small files; "large" is moved on its own (by
    // copy_file_range where the kernel can, into a file; through memory into a pipe).
    std::fs::create_dir(s.src.join("d")).expect("mkdir");
    build::write(&s.src.join("small"), &build::pattern(1, 3000));
    build::write(&s.src.join("d/large"), &build::pattern(2, 3 << 20));
    build::write(&s.src.join("d/other"), b"left alone");
    for to_pipe in [false, true] {
        for name in ["small", "large"] {
            let archive = s.tmp.path().join(format!("{name}-{to_pipe}.far"));
            if to_pipe {
                let mut cmd = ferry_command(&[&"pack", &s.src, &"-"]);
                cmd.stdout(std::fs::File::create(&archive).expect("create"));
                crate::common::run::run(cmd).assert_ok();
            } else {
                crate::pack(&s.src, &archive, &[]);
            }
            flip_a_byte_of(&archive, name);
            for from_stdin in [false, true] {
                let dst = s
                    .tmp
                    .path()
                    .join(format!("out-{name}-{to_pipe}-{from_stdin}"));
                let r = match from_stdin {
                    true => ferry_stdin(&[&"unpack", &"-", &dst], &archive),
                    false => ferry(&[&"unpack", &archive, &dst]),
                };
                assert_eq!(r.status, 1, "{r}");
                let errors = r.errors();
                assert_eq!(errors.len(), 1, "{r}");
                assert!(
                    errors[0].contains(name) && errors[0].contains("differs"),
                    "{r}"
                );
                let path = if name == "small" { "small" } else { "d/large" };
                assert!(!dst.join(path).exists(), "{path} left behind: {r}");
                assert_eq!(std::fs::read(dst.join("d/other")).unwrap(), b"left alone");
            }
        }
    }
}
