//! zstd: pzstd's frames are seek points; `zstd`, `-T0`, `-B` and `--long` make one frame;
//! several frames concatenated (with an empty one) read right.

use ferry_seek::Codec;

use crate::{check_reads, index, shell, Fixture};

#[test]
fn pzstd_frames_are_seek_points() {
    let f = Fixture::new(20, 12 << 20);
    let Some(zst) = f.compress("p.zst", "pzstd -q -1 -p 2 -c") else {
        return;
    };
    let ix = index(&zst, Codec::Zstd, 64 << 10, &f.data);
    assert!(ix.points() >= 4, "{} points", ix.points());
    assert!(ix.is_random_access() && ix.advice().is_none());
    let c = check_reads(&zst, ix.clone(), &f.data, 200, 20);
    // A read near the end costs at most one frame, not the file.
    let c2 = ferry_seek::Compressed::new(std::fs::File::open(&zst).expect("open"), ix);
    let mut buf = vec![0u8; 64 << 10];
    let off = f.data.len() as u64 - (100 << 10);
    assert_eq!(c2.read_at(&mut buf, off).expect("read_at"), buf.len());
    assert!(
        c2.decompressed_bytes() < 4 << 20,
        "{}",
        c2.decompressed_bytes()
    );
    crate::check_threads(&c, &f.data);
}

#[test]
fn zstd_t0_block_size_and_long_still_make_one_frame() {
    let f = Fixture::new(21, 6 << 20);
    for (name, cmd) in [
        ("a.zst", "zstd -q -3 -c"),
        ("b.zst", "zstd -q -T0 -B1MiB -c"),
        ("c.zst", "zstd -q --long -c"),
    ] {
        let Some(zst) = f.compress(name, cmd) else {
            return;
        };
        let ix = index(&zst, Codec::Zstd, 64 << 10, &f.data);
        assert_eq!(ix.points(), 1, "{cmd}");
        // Small enough that a read from the start is cheap: still counted random access.
        assert!(ix.is_random_access());
        check_reads(&zst, ix, &f.data, 40, 21);
    }
}

#[test]
fn concatenated_frames_with_an_empty_one_and_tiny_files() {
    let f = Fixture::new(22, 2 << 20);
    if !crate::have("zstd") {
        return ferry_testkit::skip("zstd is not installed");
    }
    shell(
        "(head -c 700000 data | zstd -q -1; zstd -q < /dev/null; tail -c +700001 data | zstd -q -19 --no-check) > m.zst",
        f.dir.path(),
    );
    let ix = index(&f.path("m.zst"), Codec::Zstd, 64 << 10, &f.data);
    assert_eq!(ix.points(), 2);
    check_reads(&f.path("m.zst"), ix, &f.data, 200, 22);
    for (len, seed) in [(0usize, 23u64), (1, 24), (5000, 25)] {
        let f = Fixture::new(seed, len);
        let Some(zst) = f.compress("t.zst", "zstd -q -c") else {
            return;
        };
        let ix = index(&zst, Codec::Zstd, 64 << 10, &f.data);
        check_reads(&zst, ix, &f.data, 30, seed);
    }
}
