//! How fast the all-zero block check runs on a buffer just read (hot in cache), for the
//! data it is slowest on (every 4 KiB block zero but its last byte) and for random
//! data. `cargo run --release -p ferry-core --example zero_scan_speed`; bench/ uses the
//! figure to bound the check's share of a copy's time.

use ferry_core::zero::data_runs;
use std::time::Instant;

fn gb_per_s(buf: &[u8], rounds: usize) -> f64 {
    let start = Instant::now();
    let mut runs = 0;
    for _ in 0..rounds {
        runs += std::hint::black_box(data_runs(std::hint::black_box(buf))).len();
    }
    assert!(runs > 0);
    (buf.len() * rounds) as f64 / start.elapsed().as_secs_f64() / 1e9
}

fn main() {
    let mut worst = vec![0u8; 1 << 20];
    for block in worst.chunks_mut(4096) {
        block[4095] = 1;
    }
    let mut random = vec![0u8; 1 << 20];
    fastrand::Rng::with_seed(0x9E37_79B9_7F4A_7C15).fill(&mut random);
    println!(
        "worst case (zeros but the last byte of each block): {:.1} GB/s",
        gb_per_s(&worst, 4000)
    );
    println!(
        "random data:                                         {:.1} GB/s",
        gb_per_s(&random, 4000)
    );
}
