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

/// A packed archive's parts, found from its footer: where the packing starts and how
/// long it is, and where its trailer is.
fn parts(bytes: &[u8]) -> (usize, usize, usize) {
    let footer = &bytes[bytes.len() - 64..];
    let word = |i: usize| u64::from_le_bytes(footer[8 + 8 * i..16 + 8 * i].try_into().unwrap());
    let (at, len) = (word(0) as usize, word(1) as usize);
    (at, len, at + len - 64)
}

/// Sets the xxh3-64 of `bytes[..56]` into `bytes[56..64]`, as a footer or trailer
/// carries it.
fn seal(bytes: &mut [u8]) {
    let sum = xxhash_rust::xxh3::xxh3_64(&bytes[..56]);
    bytes[56..64].copy_from_slice(&sum.to_le_bytes());
}

/// The footer inside a packed index made to say the tar data ends later (every
/// checksum made right again, as a crafted file would): the archive is refused, so no
/// reader takes bytes of the packing for tar data the file's own readers do not see.
#[test]
fn a_packed_index_whose_footer_inside_disagrees_is_refused() {
    let s = scratch();
    tiny_files(&s.src, 2, 20);
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &[]).assert_ok();
    let mut bytes = std::fs::read(&archive).expect("read");
    let (_, _, trailer_at) = parts(&bytes);
    let word = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let count = word(&bytes, trailer_at + 8) as usize;
    let inner_at = trailer_at - 64;
    let table_at = inner_at - 4 * count;
    // tar_end inside, 512 later (and the index with it).
    for field in [8, 24] {
        let v = word(&bytes, inner_at + field) + 512;
        bytes[inner_at + field..inner_at + field + 8].copy_from_slice(&v.to_le_bytes());
    }
    seal(&mut bytes[inner_at..inner_at + 64]);
    let table_sum = xxhash_rust::xxh3::xxh3_64(&bytes[table_at..inner_at + 64]);
    bytes[trailer_at + 40..trailer_at + 48].copy_from_slice(&table_sum.to_le_bytes());
    seal(&mut bytes[trailer_at..trailer_at + 64]);
    std::fs::write(&archive, &bytes).expect("write");
    for args in [vec!["ls"], vec!["unpack"]] {
        let dst = s.tmp.path().join("dst");
        let r = match args[0] {
            "ls" => ferry(&[&"ls", &archive]),
            _ => ferry(&[&"unpack", &archive, &dst]),
        };
        r.assert_status(2);
        assert!(r.stderr.contains("disagrees"), "{args:?}: {r}");
    }
    let r = ferry_stdin(&[&"unpack", &"-", &s.tmp.path().join("piped")], &archive);
    r.assert_status(2);
    assert!(r.stderr.contains("disagrees"), "{r}");
}

/// zstd data right after a plain tar's end (a tar written with one block a record,
/// then a .zst file after it) is not taken for a packed index: the members are
/// unpacked and the rest dropped, as after any plain tar. A packed index cut short in
/// a stream is an error.
#[test]
fn zstd_after_a_plain_tar_is_dropped_and_a_packed_index_cut_short_is_an_error() {
    if missing("tar") || missing("zstd") {
        return;
    }
    let s = scratch();
    tiny_files(&s.src, 2, 20);
    let tar = s.tmp.path().join("g.tar");
    gnu_pack(&["-b1"], &tar, &s.src, &["."]);
    let noise = s.tmp.path().join("noise");
    build::write(&noise, &build::pattern(7, 1 << 20));
    let zst = s.tmp.path().join("noise.zst");
    let made = std::process::Command::new("zstd")
        .args(["-q", "-c"])
        .arg(&noise)
        .output()
        .expect("zstd");
    assert!(made.status.success());
    let mut bytes = std::fs::read(&tar).expect("read");
    bytes.extend_from_slice(&made.stdout);
    std::fs::write(&zst, &bytes).expect("write");
    let r = ferry_stdin(&[&"unpack", &"-", &s.dst], &zst);
    r.assert_ok();
    assert!(s.dst.join("d001/f00019").exists(), "{r}");

    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &[]).assert_ok();
    let bytes = std::fs::read(&archive).expect("read");
    let (at, len, _) = parts(&bytes);
    let cut = s.tmp.path().join("cut.far");
    std::fs::write(&cut, &bytes[..at + len / 2]).expect("write");
    let r = ferry_stdin(&[&"unpack", &"-", &s.tmp.path().join("cut")], &cut);
    r.assert_status(2);
    assert!(r.stderr.contains("index"), "{r}");
}
