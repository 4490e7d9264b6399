//! Damaged input: truncated or corrupted compressed files are errors from `Indexing`
//! (never a panic, never silently different data); damaged, truncated or lying seek
//! indexes are errors from `from_bytes` or `read_at`, never a panic or a hang.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use ferry_seek::{Codec, Compressed, Indexing, SeekIndex};

use crate::{index, Fixture};

/// Indexes the whole file; the data read, or the error.
fn try_index(path: &Path, codec: Codec) -> io::Result<(Vec<u8>, SeekIndex)> {
    let mut ix = Indexing::new(File::open(path)?, codec, 64 << 10)?;
    let mut out = Vec::new();
    ix.read_to_end(&mut out)?;
    Ok((out, ix.finish()?))
}

fn fixtures() -> Option<(Fixture, Vec<(Codec, &'static str)>)> {
    let f = Fixture::new(50, 400 << 10);
    let files = vec![
        (Codec::Gzip, "gzip -c"),
        (Codec::Zstd, "zstd -q -c"),
        (Codec::Xz, "xz -0 -T2 --block-size=100KiB -c"),
        (Codec::Bzip2, "bzip2 -c"),
        // The sequential codecs with checks of their own (lzma_alone and compress have
        // none: seq.rs mutates those).
        (Codec::Lz4, "lz4 -q -c"),
        (Codec::Lzip, "lzip -c"),
        (Codec::Lzop, "lzop -c"),
    ];
    for (codec, cmd) in &files {
        f.compress(codec.name(), cmd)?;
    }
    Some((f, files))
}

#[test]
fn truncated_files_are_errors_naming_the_codec() {
    let Some((f, files)) = fixtures() else { return };
    for (codec, _) in files {
        let full = std::fs::read(f.path(codec.name())).expect("read");
        for keep in [
            0,
            1,
            3,
            10,
            full.len() / 3,
            full.len() / 2,
            full.len() - 5,
            full.len() - 1,
        ] {
            let p = f.path("cut");
            std::fs::write(&p, &full[..keep]).expect("write");
            match try_index(&p, codec) {
                Ok(_) => panic!("{codec} truncated to {keep} of {} was accepted", full.len()),
                Err(e) => {
                    let msg = e.to_string();
                    assert!(msg.contains(codec.name()), "{codec} cut at {keep}: {msg}");
                }
            }
        }
    }
}

#[test]
fn corrupted_files_are_errors_or_the_same_data() {
    let Some((f, files)) = fixtures() else { return };
    let mut rng = fastrand::Rng::with_seed(51);
    for (codec, _) in files {
        let full = std::fs::read(f.path(codec.name())).expect("read");
        let mut errors = 0;
        for _ in 0..60 {
            let mut bad = full.clone();
            let at = rng.usize(..bad.len());
            bad[at] ^= 1 << rng.u8(0..8);
            let p = f.path("bad");
            std::fs::write(&p, &bad).expect("write");
            match try_index(&p, codec) {
                // A flip in a field nothing checks (a gzip header's mtime) changes nothing.
                Ok((out, _)) => assert!(out == f.data, "{codec}: flip at {at} gave other data"),
                Err(e) => {
                    errors += 1;
                    assert!(
                        e.to_string().contains(codec.name())
                            || e.kind() != io::ErrorKind::InvalidData,
                        "{e}"
                    );
                }
            }
        }
        assert!(
            errors > 40,
            "{codec}: only {errors} of 60 flips were errors"
        );
    }
    // Garbage after the last gzip member or zstd frame is trailing garbage, told and
    // accepted (as for the sequential codecs: seq.rs), the data before it all there.
    for codec in [Codec::Gzip, Codec::Zstd] {
        let mut bytes = std::fs::read(f.path(codec.name())).expect("read");
        let at = bytes.len() as u64;
        bytes.extend_from_slice(b"\0\0junk");
        std::fs::write(f.path("junk"), &bytes).expect("write");
        let mut ix = Indexing::new(File::open(f.path("junk")).expect("open"), codec, 64 << 10)
            .expect("indexing");
        let mut out = Vec::new();
        ix.read_to_end(&mut out).expect("read");
        assert!(out == f.data, "{codec}: other data");
        assert_eq!(ix.trailing_garbage(), Some(at), "{codec}");
        let index = ix.finish().expect("finish");
        crate::check_reads(&f.path("junk"), index, &f.data, 8, 53);
    }
}

/// Rewrites the checksum so that a changed index gets past it, as a lying one would.
fn reseal(b: &mut Vec<u8>) {
    b.truncate(b.len() - 8);
    let sum = xxhash_rust::xxh3::xxh3_64(b);
    b.extend_from_slice(&sum.to_le_bytes());
}

#[test]
fn damaged_and_lying_indexes_never_panic() {
    let Some((f, files)) = fixtures() else { return };
    let mut rng = fastrand::Rng::with_seed(52);
    for (codec, _) in files {
        let path = f.path(codec.name());
        let good = index(&path, codec, 64 << 10, &f.data).to_bytes();
        // Truncated or flipped: the checksum catches it.
        for _ in 0..200 {
            let mut b = good.clone();
            if rng.bool() {
                b.truncate(rng.usize(..b.len()));
            } else {
                let at = rng.usize(..b.len());
                b[at] ^= 1 << rng.u8(0..8);
            }
            assert!(
                SeekIndex::from_bytes(&b).is_err(),
                "{codec}: damage accepted"
            );
        }
        // Lying (bytes changed and the checksum made to match): refused, or reads that
        // are errors or bytes, but no panic and no hang.
        let mut accepted = 0;
        for _ in 0..300 {
            let mut b = good.clone();
            for _ in 0..rng.usize(1..4) {
                let at = rng.usize(..b.len() - 8);
                b[at] = rng.u8(..);
            }
            reseal(&mut b);
            let Ok(ix) = SeekIndex::from_bytes(&b) else {
                continue;
            };
            accepted += 1;
            let len = ix.decompressed_len();
            let c = Compressed::new(File::open(&path).expect("open"), ix);
            let mut buf = vec![0u8; 100 << 10];
            for _ in 0..4 {
                let off = rng.u64(0..len.clamp(1, 1 << 40));
                let _ = c.read_at(&mut buf, off);
            }
        }
        eprintln!("{codec}: {accepted} of 300 lying indexes passed from_bytes");
    }
}

#[test]
fn an_index_of_another_file_is_refused_by_read_at() {
    let Some((f, files)) = fixtures() else { return };
    let (codec, _) = files[0];
    let ix = index(&f.path(codec.name()), codec, 64 << 10, &f.data);
    let other = File::open(f.path("zstd")).expect("open");
    let c = Compressed::new(other, ix);
    let e = c
        .read_at(&mut [0u8; 10], 0)
        .expect_err("wrong file accepted");
    assert!(
        e.to_string().contains("seek index is for a gzip file"),
        "{e}"
    );
}
