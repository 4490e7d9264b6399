//! xz: `xz -T2` blocks and `--block-size` blocks are seek points; several streams (one
//! empty) with stream padding read right; plain `xz` makes one block.

use ferry_seek::Codec;

use crate::{check_reads, index, shell, Fixture};

#[test]
fn multithreaded_xz_blocks_are_seek_points() {
    let f = Fixture::new(30, 6 << 20);
    // At -0 the dictionary is 256 KiB, so -T makes blocks of 1 MiB.
    let Some(xz) = f.compress("t.xz", "xz -0 -T2 -c") else {
        return;
    };
    let ix = index(&xz, Codec::Xz, 64 << 10, &f.data);
    assert!(ix.points() >= 5, "{} points", ix.points());
    assert!(ix.is_random_access() && ix.advice().is_none());
    let c = check_reads(&xz, ix.clone(), &f.data, 200, 30);
    drop(c);
    let c = ferry_seek::Compressed::new(std::fs::File::open(&xz).expect("open"), ix);
    let mut buf = vec![0u8; 64 << 10];
    let off = f.data.len() as u64 - (100 << 10);
    assert_eq!(c.read_at(&mut buf, off).expect("read_at"), buf.len());
    assert!(
        c.decompressed_bytes() <= 2 << 20,
        "{}",
        c.decompressed_bytes()
    );
}

#[test]
fn block_size_blocks_and_several_streams_with_padding() {
    let f = Fixture::new(31, 3 << 20);
    let Some(xz) = f.compress("b.xz", "xz -1 -T1 --block-size=300KiB -c") else {
        return;
    };
    let ix = index(&xz, Codec::Xz, 64 << 10, &f.data);
    assert!(ix.points() >= 9, "{} points", ix.points());
    check_reads(&xz, ix, &f.data, 200, 31);
    shell(
        "(head -c 1000000 data | xz -1 -T2 --block-size=200KiB; head -c 8 /dev/zero; xz < /dev/null; \
          tail -c +1000001 data | xz -2 --check=sha256; head -c 4 /dev/zero) > m.xz",
        f.dir.path(),
    );
    let ix = index(&f.path("m.xz"), Codec::Xz, 64 << 10, &f.data);
    assert!(ix.points() >= 6, "{} points", ix.points());
    let c = check_reads(&f.path("m.xz"), ix, &f.data, 300, 32);
    // Cursors stop at the end of their stream: threads cross streams all the time here.
    crate::check_threads(&c, &f.data);
}

#[test]
fn one_block_and_tiny_files() {
    let f = Fixture::new(33, 2 << 20);
    let Some(xz) = f.compress("o.xz", "xz -1 -T1 -c") else {
        return;
    };
    let ix = index(&xz, Codec::Xz, 64 << 10, &f.data);
    assert_eq!(ix.points(), 1);
    check_reads(&xz, ix, &f.data, 40, 33);
    for (len, seed) in [(0usize, 34u64), (1, 35), (5000, 36)] {
        let f = Fixture::new(seed, len);
        let Some(xz) = f.compress("t.xz", "xz -c") else {
            return;
        };
        let ix = index(&xz, Codec::Xz, 64 << 10, &f.data);
        check_reads(&xz, ix, &f.data, 30, seed);
    }
}
