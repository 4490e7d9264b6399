//! lz4, lzma, lzip, compress (`.Z`) and lzop, as their own tools write them: the stream
//! read back is the data, in every variant the tools make (lz4's legacy format, linked
//! blocks and checksums; lzip and lzop members in a row; compress at every code width,
//! past table clears), reads at any offset are right, bytes after the data are trailing
//! garbage and not an error, and damaged files never panic or hang.

use std::fs::File;
use std::io::Read;
use std::time::{Duration, Instant};

use ferry_seek::{Codec, Indexing};

use crate::{check_reads, index, shell, Fixture};

/// Shell commands (data on stdin) that make each codec's files, in all their variants.
const MAKERS: [(Codec, &str); 17] = [
    (Codec::Lz4, "lz4 -q -c"),
    (Codec::Lz4, "lz4 -q -l -c"),
    (Codec::Lz4, "lz4 -q -BD -B4 -BX --content-size -c"),
    (Codec::Lz4, "lz4 -q -B5 --no-frame-crc -c"),
    (Codec::Lz4, "(head -c 300000 | lz4 -q -c; lz4 -q -l -c)"),
    (Codec::Lzma, "xz --format=lzma -c"),
    (Codec::Lzma, "xz --format=lzma -9e -c"),
    (Codec::Lzip, "lzip -c"),
    (Codec::Lzip, "(head -c 300000 | lzip -1 -c; lzip -9 -c)"),
    (Codec::Lzip, "lzip -b 200KiB -c"),
    (Codec::Compress, "compress -f -c"),
    (Codec::Compress, "compress -f -b10 -c"),
    (Codec::Compress, "compress -f -b12 -c"),
    (Codec::Lzop, "lzop -c"),
    (Codec::Lzop, "lzop -9 -c"),
    (Codec::Lzop, "(head -c 300000 | lzop -1 -c; lzop -c)"),
    (Codec::Lzop, "lzop --crc32 -c"),
];

fn tool(cmd: &str) -> &str {
    cmd.trim_start_matches('(')
        .split_whitespace()
        .find(|w| !["head", "-c", "300000", "|"].contains(w))
        .unwrap_or(cmd)
}

/// The fixture's data compressed by `cmd` into `name`, or `None` after a skip.
fn make(f: &Fixture, name: &str, cmd: &str) -> Option<std::path::PathBuf> {
    let t = tool(cmd);
    if !crate::have(t) {
        ferry_testkit::skip(&format!("{t} is not installed"));
        return None;
    }
    shell(&format!("{cmd} < data > {name}"), f.dir.path());
    Some(f.path(name))
}

#[test]
fn every_variant_the_tools_write_reads_back() {
    // 1.5 MiB with random runs: compress's table fills and is cleared several times.
    let f = Fixture::new(60, 3 << 19);
    for (i, (codec, cmd)) in MAKERS.iter().enumerate() {
        let Some(path) = make(&f, &format!("v{i}"), cmd) else {
            return;
        };
        eprintln!("{cmd}");
        let ix = index(&path, *codec, 64 << 10, &f.data);
        assert!(!ix.is_random_access(), "{cmd}");
        assert!(
            ix.advice().is_some_and(|a| a.contains(codec.name())),
            "{cmd}"
        );
        check_reads(&path, ix, &f.data, 12, i as u64);
    }
    // Empty and one-byte inputs.
    for (len, seed) in [(0usize, 61u64), (1, 62)] {
        let f = Fixture::new(seed, len);
        for (i, (codec, cmd)) in MAKERS
            .iter()
            .enumerate()
            .filter(|(_, (_, c))| !c.contains('('))
        {
            let Some(path) = make(&f, &format!("s{i}"), cmd) else {
                return;
            };
            let ix = index(&path, *codec, 64 << 10, &f.data);
            check_reads(&path, ix, &f.data, 4, seed);
        }
    }
}

#[test]
fn bytes_after_the_data_are_trailing_garbage() {
    let f = Fixture::new(63, 200 << 10);
    // compress has no end mark: whatever follows its data is read as codes.
    for (i, (codec, cmd)) in MAKERS.iter().enumerate() {
        if *codec == Codec::Compress {
            continue;
        }
        let Some(path) = make(&f, &format!("g{i}"), cmd) else {
            return;
        };
        let clean = std::fs::metadata(&path).expect("stat").len();
        shell(&format!("printf 'garbage here\\n' >> g{i}"), f.dir.path());
        let mut ix =
            Indexing::new(File::open(&path).expect("open"), *codec, 64 << 10).expect("indexing");
        let mut out = Vec::new();
        ix.read_to_end(&mut out)
            .unwrap_or_else(|e| panic!("{cmd}: {e}"));
        assert!(out == f.data, "{cmd}: other data");
        assert_eq!(ix.trailing_garbage(), Some(clean), "{cmd}");
        let index = ix.finish().unwrap_or_else(|e| panic!("{cmd}: {e}"));
        check_reads(&path, index, &f.data, 6, i as u64);
    }
}

/// How long the mutation loop runs per codec: `FERRY_FUZZ_SECS` (10 by default) split
/// over the codecs, at least half a second each.
fn budget() -> Duration {
    let secs: f64 = std::env::var("FERRY_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10.0);
    Duration::from_secs_f64((secs / 5.0).max(0.5))
}

#[test]
fn mutated_files_are_errors_or_data_never_a_panic_or_a_hang() {
    let f = Fixture::new(64, 96 << 10);
    let mut rng = fastrand::Rng::with_seed(65);
    for (i, (codec, cmd)) in [0usize, 2, 5, 7, 11, 13].map(|i| (i, MAKERS[i])) {
        let Some(path) = make(&f, &format!("m{i}"), cmd) else {
            return;
        };
        let good = std::fs::read(&path).expect("read");
        let started = Instant::now();
        let mut tries = 0;
        while started.elapsed() < budget() || tries < 50 {
            tries += 1;
            let mut bad = good.clone();
            for _ in 0..rng.usize(1..4) {
                match rng.u8(0..4) {
                    0 => {
                        let at = rng.usize(..bad.len());
                        bad[at] ^= 1 << rng.u8(0..8);
                    }
                    1 => {
                        let at = rng.usize(..bad.len());
                        bad[at] = rng.u8(..);
                    }
                    2 => bad.truncate(rng.usize(..=bad.len())),
                    _ => {
                        let at = rng.usize(..=bad.len());
                        let junk: Vec<u8> = (0..rng.usize(1..20)).map(|_| rng.u8(..)).collect();
                        bad.splice(at..at, junk);
                    }
                }
                if bad.is_empty() {
                    break;
                }
            }
            let p = f.path("mutant");
            std::fs::write(&p, &bad).expect("write");
            let one = Instant::now();
            let Ok(mut ix) = Indexing::new(File::open(&p).expect("open"), codec, 64 << 10) else {
                continue;
            };
            // Output is bounded by the format (compress: 64 KiB per code at most); stop
            // reading well past what any mutant of 96 KiB could honestly hold.
            let mut sink = vec![0u8; 1 << 16];
            let mut total = 0usize;
            loop {
                match ix.read(&mut sink) {
                    Ok(0) => break,
                    Ok(n) => total += n,
                    Err(e) => {
                        let msg = e.to_string();
                        assert!(msg.contains(codec.name()), "{cmd}: {msg}");
                        break;
                    }
                }
                assert!(total < 512 << 20, "{cmd}: a mutant decoded to over 512 MiB");
            }
            assert!(
                one.elapsed() < Duration::from_secs(5),
                "{cmd}: a mutant took {:?}",
                one.elapsed()
            );
        }
    }
}
