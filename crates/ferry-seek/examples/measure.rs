//! Measures a compressed file: how long indexing takes, how large the index is, and what
//! random reads cost.
//!
//!     cargo run --release -p ferry-seek --example measure -- FILE [SPAN_MIB] [READS]

use std::fs::File;
use std::io::Read;
use std::time::Instant;

use ferry_seek::{detect, Compressed, Indexing, SeekIndex};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: measure FILE [SPAN_MIB] [READS]")?;
    let span = args
        .next()
        .map(|s| s.parse::<u64>())
        .transpose()?
        .unwrap_or(4)
        << 20;
    let reads = args
        .next()
        .map(|s| s.parse::<usize>())
        .transpose()?
        .unwrap_or(200);
    let mut head = [0u8; 8];
    let n = File::open(&path)?.read(&mut head)?;
    let codec = detect(&head[..n]).ok_or("not a compressed file this crate reads")?;
    let t = Instant::now();
    let mut ix = Indexing::new(File::open(&path)?, codec, span)?;
    std::io::copy(&mut ix, &mut std::io::sink())?;
    let index = ix.finish()?;
    let built = t.elapsed();
    let bytes = index.to_bytes();
    let t = Instant::now();
    let index = SeekIndex::from_bytes(&bytes)?;
    let loaded = t.elapsed();
    println!(
        "{codec}: {} -> {} bytes, {} points, index {} bytes, built in {built:.2?} ({:.0} MB/s), loaded in {loaded:.2?}",
        index.compressed_len(),
        index.decompressed_len(),
        index.points(),
        bytes.len(),
        index.decompressed_len() as f64 / built.as_secs_f64() / 1e6,
    );
    println!(
        "random access: {}, {}",
        index.is_random_access(),
        index.advice().unwrap_or_default()
    );
    let len = index.decompressed_len();
    let c = Compressed::new(File::open(&path)?, index);
    let mut rng = fastrand::Rng::with_seed(1);
    let mut buf = vec![0u8; 128 << 10];
    let t = Instant::now();
    for _ in 0..reads {
        c.read_at(&mut buf, rng.u64(0..len.max(1)))?;
    }
    let took = t.elapsed();
    println!(
        "{reads} random 128 KiB reads: {:.2?} each, {:.2} MiB decompressed each",
        took / reads.max(1) as u32,
        c.decompressed_bytes() as f64 / reads.max(1) as f64 / (1 << 20) as f64
    );
    Ok(())
}
