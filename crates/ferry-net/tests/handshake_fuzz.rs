//! The handshake fuzz target's body (`fuzz/exercise_handshake.rs`) run in the plain
//! test suite, where cargo-fuzz is not: valid handshakes (a token, right or wrong, and
//! requests of every kind) mutated at random and served, for a bounded time
//! (`FERRY_FUZZ_SECS`, default 10) or number of inputs (`FERRY_FUZZ_ITERS`, default
//! 100,000), from `FERRY_FUZZ_SEED` (default 1). No input may panic; the first 20
//! that do are saved under `fuzz/artifacts/handshake/`.

#[path = "../fuzz/exercise_handshake.rs"]
mod exercise_handshake;

use exercise_handshake::{exercise_handshake, TOKEN};
use ferry_net::frame::{write_frame, Kind};
use ferry_net::proto::{Op, Request};
use ferry_net::transfer::SourceWalk;
use std::panic;
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn request(op: Op, path: &[u8], rules: bool) -> Vec<u8> {
    let mut walk = SourceWalk::default();
    if rules {
        walk.rules
            .add(ferry_core::filter::Action::Exclude, b"*.o")
            .expect("rule");
    }
    Request {
        op,
        path: path.to_vec(),
        checksum: false,
        compress: false,
        verify: false,
        walk,
        mirror: Default::default(),
        one_file: None,
    }
    .encode()
}

/// Handshakes as clients send them, after the hello.
fn corpus() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for token in [Some(TOKEN), Some(&b"wrong"[..]), None] {
        for (op, path, rules) in [
            (Op::Download, &b"d"[..], false),
            (Op::Download, b"/d/f", true),
            (Op::Download, b"missing", false),
            (Op::Upload, b"up", false),
        ] {
            let mut bytes = Vec::new();
            if let Some(t) = token {
                write_frame(&mut bytes, Kind::Auth, t).expect("frame");
            }
            write_frame(&mut bytes, Kind::Request, &request(op, path, rules)).expect("frame");
            // What a download's client sends next: an empty manifest (for one file,
            // the name to send it under).
            let member: &[u8] = if path.ends_with(b"/f") { b"f" } else { b"" };
            write_frame(&mut bytes, Kind::ManifestEnd, member).expect("frame");
            out.push(bytes);
        }
    }
    out
}

/// A small xorshift generator (no dependency on a crate's choices of streams).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One to four mutations: flipped bits, random or boundary bytes (lengths), bytes cut
/// or inserted, a piece of another input spliced in.
fn mutate(rng: &mut Rng, data: &mut Vec<u8>, corpus: &[Vec<u8>]) {
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(data.len() + 1);
        match rng.below(6) {
            0 if !data.is_empty() => {
                let i = at.min(data.len() - 1);
                data[i] ^= 1 << rng.below(8);
            }
            1 if !data.is_empty() => {
                let i = at.min(data.len() - 1);
                data[i] = rng.next() as u8;
            }
            2 if data.len() >= at + 4 => {
                let v: u32 = [0, 1, 0xff, 1 << 10, (1 << 10) + 1, 1 << 20, u32::MAX][rng.below(7)];
                data[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
            3 => data.truncate(at),
            4 => {
                let n = rng.below(16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                data.splice(at..at, bytes);
            }
            _ => {
                let other = &corpus[rng.below(corpus.len())];
                let from = rng.below(other.len());
                let to = from + rng.below(other.len() - from + 1);
                data.splice(at..at, other[from..to].iter().copied());
            }
        }
    }
}

fn save_crash(seed: u64, iter: u64, data: &[u8]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/artifacts/handshake");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("crash-seed{seed}-iter{iter}"));
    let _ = std::fs::write(&path, data);
    path
}

#[test]
fn the_corpus_is_served_only_with_the_token() {
    let served: Vec<bool> = corpus().iter().map(|c| exercise_handshake(c)).collect();
    // The right token's two downloads of what exists; nothing else.
    assert_eq!(served.iter().filter(|s| **s).count(), 2, "{served:?}");
    assert!(served[0] && served[1], "{served:?}");
}

#[test]
fn mutated_handshakes_never_panic() {
    let iters = env_u64("FERRY_FUZZ_ITERS", 100_000);
    let seed = env_u64("FERRY_FUZZ_SEED", 1);
    let limit = Duration::from_secs(env_u64("FERRY_FUZZ_SECS", 10));
    let corpus = corpus();
    let mut rng = Rng(seed.max(1));
    let start = Instant::now();
    let (mut done, mut served) = (0u64, 0u64);
    let mut crashes = Vec::new();
    while done < iters && start.elapsed() < limit {
        let mut data = corpus[rng.below(corpus.len())].clone();
        mutate(&mut rng, &mut data, &corpus);
        match panic::catch_unwind(|| exercise_handshake(&data)) {
            Ok(s) => served += u64::from(s),
            Err(_) if crashes.len() >= 20 => crashes.push(PathBuf::from("(not saved)")),
            Err(_) => crashes.push(save_crash(seed, done, &data)),
        }
        done += 1;
    }
    eprintln!(
        "fuzz handshake: seed {seed}, {done} inputs in {:.1?}, {served} served, {} panics",
        start.elapsed(),
        crashes.len()
    );
    assert!(done > 0);
    assert!(crashes.is_empty(), "inputs that panicked: {crashes:?}");
}
