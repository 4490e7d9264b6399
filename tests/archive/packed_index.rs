//! The index packed in zstd frames (footer version 6, `index::packed`): a small file's
//! archive costs about what GNU tar's does, every reader reads it as the plain index it
//! stands for, and a damaged packing is refused naming what is wrong.

use crate::common::compare::assert_same_tree;
use crate::common::{build, scratch};
use crate::{ferry, ferry_stdin, gnu_pack, missing, pack};
use std::path::Path;

/// `dirs` directories of `per` files of 1 to 200 bytes.
fn tiny_files(root: &Path, dirs: usize, per: usize) {
    for d in 0..dirs {
        let dir = root.join(format!("d{d:03}"));
        build::mkdirs(&dir);
        for f in 0..per {
            let len = 1 + (d * per + f) * 37 % 200;
            build::write(
                &dir.join(format!("f{f:05}")),
                &build::pattern(f as u64, len),
            );
        }
    }
}

/// 2,000 files of 1-200 bytes: ferry's archive is at most 1.1x GNU tar's (default
/// format), where the plain index made it larger; both read back whole, from the file
/// and from a pipe, and `cat` finds a member.
#[test]
fn a_packed_index_makes_small_files_cost_what_they_cost_in_tar() {
    if missing("tar") {
        return;
    }
    let s = scratch();
    tiny_files(&s.src, 20, 100);
    build::stamp_times(&s.src);
    let ours = s.tmp.path().join("a.far");
    let plain = s.tmp.path().join("plain.far");
    let theirs = s.tmp.path().join("g.tar");
    // GNU tar first: it moves the atimes it reads, which ferry then keeps.
    gnu_pack(&[], &theirs, &s.src, &["."]);
    pack(&s.src, &ours, &[]).assert_ok();
    pack(&s.src, &plain, &["--plain-index"]).assert_ok();
    let size = |p: &Path| std::fs::metadata(p).expect("stat").len() as f64;
    let ratio = size(&ours) / size(&theirs);
    assert!(
        ratio <= 1.1,
        "ferry {} against tar {}: {ratio:.3}x",
        size(&ours),
        size(&theirs)
    );
    assert!(size(&plain) > size(&ours), "the plain index is larger");
    for (archive, name) in [(&ours, "packed"), (&plain, "plain")] {
        let dst = s.tmp.path().join(name);
        ferry(&[&"unpack", archive, &dst]).assert_ok();
        assert_same_tree(&s.src, &dst);
        let piped = s.tmp.path().join(format!("{name}-piped"));
        ferry_stdin(&[&"unpack", &"-", &piped], archive).assert_ok();
        assert_same_tree(&s.src, &piped);
        let r = ferry(&[&"cat", archive, &"d007/f00042"]);
        r.assert_ok();
        let want = std::fs::read(s.src.join("d007/f00042")).expect("read");
        assert!(r.stdout == String::from_utf8_lossy(&want), "{name}");
        let listed = ferry(&[&"ls", archive]);
        listed.assert_ok();
        assert_eq!(listed.stdout.lines().count(), 1 + 20 + 2000, "{name}");
    }
}

/// A byte changed in the frames, in their table, in the logical footer or in the
/// trailer of a packed index: `ls`, `cat` and `unpack` (from the file and from a pipe)
/// refuse it with status 2 and a line saying what is wrong, never a panic; nothing is
/// unpacked from the file.
#[test]
fn a_damaged_packed_index_is_refused() {
    let s = scratch();
    tiny_files(&s.src, 4, 50);
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &[]).assert_ok();
    let intact = std::fs::read(&archive).expect("read");
    let n = intact.len();
    let footer = &intact[n - 64..];
    let word = |i: usize| u64::from_le_bytes(footer[8 + 8 * i..16 + 8 * i].try_into().unwrap());
    assert_eq!(word(5), 6, "the footer says the index is packed");
    let (index_at, index_len) = (word(0) as usize, word(1) as usize);
    let trailer_at = index_at + index_len - 64;
    for (what, at) in [
        ("a frame", index_at + 20),
        ("the frame table", trailer_at - 64 - 2),
        ("the logical footer", trailer_at - 30),
        ("the trailer", trailer_at + 12),
    ] {
        let mut bytes = intact.clone();
        bytes[at] ^= 0x5a;
        let bad = s.tmp.path().join("bad.far");
        std::fs::write(&bad, &bytes).expect("write");
        for args in [vec!["ls"], vec!["cat", "d001/f00001"], vec!["unpack"]] {
            let mut all: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![];
            for a in &args {
                all.push(a);
            }
            let dst = s.tmp.path().join("dst");
            all.insert(1, &bad);
            if args[0] == "unpack" {
                all.push(&dst);
            }
            let r = ferry(&all);
            assert_ne!(r.status, 101, "{what}, {args:?}: {r}");
            assert_eq!(r.status, 2, "{what}, {args:?}: {r}");
            assert!(
                r.stderr.contains("index") || r.stderr.contains("zstd frame"),
                "{what}, {args:?}: {r}"
            );
            assert!(!dst.exists(), "{what}: unpacked from a damaged index");
        }
        let piped = ferry_stdin(&[&"unpack", &"-", &s.tmp.path().join("piped")], &bad);
        assert_eq!(piped.status, 2, "{what}, unpack -: {piped}");
        let _ = std::fs::remove_dir_all(s.tmp.path().join("piped"));
    }
}
