//! The fixed part of the initial tree of [`super::rounds::Generator`]: something of
//! every kind and size a round then changes, so the first rounds already find files
//! from empty to a few MiB, a sparse file, odd names, every kind of link and special
//! modes and owners.

use super::build::*;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Makes the fixed entries below `root` (which exists); `owners`: give some of them
/// other owners (root only). Times are left to the caller. Says what it made.
pub fn fixed(root: &Path, owners: bool) -> Vec<String> {
    let at = |rel: &[u8]| root.join(OsStr::from_bytes(rel));
    let dirs: &[&[u8]] = &[
        b"a/b/c",
        b"d/sticky",
        b"d/private",
        b"empty",
        b"dir\xfe",
        b"line\nbreak dir",
    ];
    for d in dirs {
        mkdirs(&at(d));
    }
    let long = [b'n'; 255];
    let files: &[(&[u8], usize)] = &[
        (b"a/zero", 0),
        (b"a/one", 1),
        (b"a/b/page-1", 4095),
        (b"a/b/page", 4096),
        (b"a/b/c/page+1", 4097),
        (b"d/medium", 65_543),
        (b"d/mib", (1 << 20) + 3),
        (b"big", 2 << 20),
        (b"a/big2", (3 << 20) + 17),
        (b"name\xff.bin", 300),
        (b"line\nbreak", 10),
        (b"sp ace", 20),
        (b"-dash", 5),
        ("\u{fc}n\u{ef}c\u{f6}d\u{e9}".as_bytes(), 9),
        (b"back\\slash", 7),
        (b"dir\xfe/inner", 33),
        (b"d/private/secret", 12),
        (b"a/setuid", 50),
        (b"a/readonly", 60),
        (&long, 40),
    ];
    for (i, (rel, size)) in files.iter().enumerate() {
        write(&at(rel), &pattern(1000 + i as u64, *size));
    }
    let mut zeros = pattern(7, 64 << 10);
    zeros[16 << 10..48 << 10].fill(0);
    write(&at(b"d/zeros"), &zeros);
    let data = pattern(8, 4096);
    sparse_file(&at(b"sparse"), 8 << 20, &[(0, &data), (6 << 20, &data)]);
    for (target, link) in [
        ("a/one", &b"link_rel"[..]),
        ("a/b", b"link_dir"),
        ("/etc/hostname", b"link_abs"),
        ("no/such", b"link_dangling"),
        ("../../d/medium", b"a/b/link_up"),
    ] {
        symlink(target, &at(link));
    }
    hardlink(&at(b"a/one"), &at(b"d/one_twin"));
    hardlink(&at(b"a/one"), &at(b"a/b/c/one_third"));
    hardlink(&at(b"link_rel"), &at(b"d/link_twin"));
    fifo(&at(b"d/fifo"));
    hardlink(&at(b"d/fifo"), &at(b"a/fifo_twin"));
    for (rel, mode) in [
        (&b"a/setuid"[..], 0o4755),
        (b"a/readonly", 0o444),
        (b"d/sticky", 0o1777),
        (b"d/private", 0o700),
    ] {
        // Without root the rounds must still be able to write what they change.
        let mode = if crate::common::is_root() {
            mode
        } else {
            mode | 0o600
        };
        chmod(&at(rel), mode);
    }
    set_xattr(&at(b"a/one"), "user.a", b"1");
    set_xattr(&at(b"a/one"), "user.empty", b"");
    set_xattr(&at(b"d"), "user.dir", b"x");
    set_xattr(&at(b"big"), "user.big", &pattern(9, 2000));
    if owners {
        chown(&at(b"d/medium"), 1000, 1000);
        chown(&at(b"a/b"), 1001, 65534);
        chown(&at(b"link_abs"), 1000, 1000);
        chown(&at(b"d/fifo"), 4242, 0);
        // chown clears setuid: give it back.
        chown(&at(b"a/setuid"), 1000, 1000);
        chmod(&at(b"a/setuid"), 0o4755);
    }
    vec![format!(
        "fixed tree: {} files, {} directories, 5 symlinks, 3 hardlinks, a fifo and its twin{}",
        files.len() + 2,
        dirs.len(),
        if owners { ", other owners" } else { "" }
    )]
}
