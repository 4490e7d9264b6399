//! gzip: single member, several members (one empty), pigz, tiny, empty, trailing zeros,
//! what one random read costs on a 64 MiB file, and reads from several threads.

use std::time::Instant;

use ferry_seek::{Codec, DEFAULT_SPAN};

use crate::{check_reads, index, shell, Fixture};

#[test]
fn single_member_reads_equal_the_data() {
    let f = Fixture::new(1, 6 << 20);
    let Some(gz) = f.compress("d.gz", "gzip -6") else {
        return;
    };
    let ix = index(&gz, Codec::Gzip, 256 << 10, &f.data);
    assert!(ix.points() >= 15, "{} points", ix.points());
    assert!(ix.is_random_access() && ix.advice().is_none());
    check_reads(&gz, ix, &f.data, 300, 1);
}

#[test]
fn multi_member_with_an_empty_member_reads_equal_the_data() {
    let f = Fixture::new(2, 3 << 20);
    if !crate::have("gzip") {
        return ferry_testkit::skip("gzip is not installed");
    }
    shell(
        "(head -c 1000000 data | gzip -1; gzip < /dev/null; tail -c +1000001 data | head -c 1500000 | gzip -9; \
          tail -c +2500001 data | gzip) > m.gz",
        f.dir.path(),
    );
    let gz = f.path("m.gz");
    let ix = index(&gz, Codec::Gzip, 64 << 10, &f.data);
    assert!(ix.points() >= 20, "{} points", ix.points());
    check_reads(&gz, ix, &f.data, 300, 2);
}

#[test]
fn pigz_output_reads_equal_the_data() {
    let f = Fixture::new(3, 5 << 20);
    let Some(gz) = f.compress("p.gz", "pigz -p 2 -b 128") else {
        return;
    };
    let ix = index(&gz, Codec::Gzip, 128 << 10, &f.data);
    assert!(ix.points() >= 20, "{} points", ix.points());
    check_reads(&gz, ix, &f.data, 300, 3);
}

#[test]
fn tiny_empty_and_zero_padded_files() {
    for (len, seed) in [(0usize, 4u64), (1, 5), (100, 6), (70_000, 7)] {
        let f = Fixture::new(seed, len);
        let Some(gz) = f.compress("t.gz", "gzip") else {
            return;
        };
        let ix = index(&gz, Codec::Gzip, 64 << 10, &f.data);
        assert_eq!(ix.points(), 1);
        check_reads(&gz, ix, &f.data, 50, seed);
        // tar's blocking can pad a .tar.gz with zeros: accepted, as gzip does.
        shell(
            "cat t.gz > z.gz; head -c 10240 /dev/zero >> z.gz",
            f.dir.path(),
        );
        let ix = index(&f.path("z.gz"), Codec::Gzip, 64 << 10, &f.data);
        check_reads(&f.path("z.gz"), ix, &f.data, 20, seed);
    }
}

/// The measure: one read near the end of a 64 MiB .tar.gz decompresses at most a
/// few MiB, not the file from its start.
#[test]
fn a_read_near_the_end_of_64_mib_decompresses_at_most_a_span() {
    let f = Fixture::new(8, 64 << 20);
    let Some(gz) = f.compress("big.gz", "gzip -6") else {
        return;
    };
    let t = Instant::now();
    let ix = index(&gz, Codec::Gzip, DEFAULT_SPAN, &f.data);
    let built = t.elapsed();
    let bytes = ix.to_bytes().len();
    eprintln!(
        "64 MiB gzip ({} bytes): {} points, index {} bytes, indexed (and checked) in {:?}",
        std::fs::metadata(&gz).map(|m| m.len()).unwrap_or(0),
        ix.points(),
        bytes,
        built
    );
    assert!(bytes < 400 << 10, "index of {bytes} bytes");
    let c = ferry_seek::Compressed::new(std::fs::File::open(&gz).expect("open"), ix);
    let mut buf = vec![0u8; 64 << 10];
    let off = f.data.len() as u64 - (100 << 10);
    let t = Instant::now();
    assert_eq!(c.read_at(&mut buf, off).expect("read_at"), buf.len());
    let took = t.elapsed();
    assert!(buf[..] == f.data[off as usize..off as usize + buf.len()]);
    let cost = c.decompressed_bytes();
    eprintln!("64 KiB read at {off}: decompressed {cost} bytes in {took:?}");
    assert!(
        cost <= DEFAULT_SPAN + (1 << 20),
        "decompressed {cost} bytes"
    );
    // A second read just after it continues the same cursor: no new decoding before it.
    assert_eq!(
        c.read_at(&mut buf, off + (64 << 10)).expect("read_at"),
        36 << 10
    );
    assert_eq!(c.decompressed_bytes(), cost + (36 << 10));
}

#[test]
fn four_threads_read_the_right_bytes() {
    let f = Fixture::new(9, 12 << 20);
    let Some(gz) = f.compress("c.gz", "gzip -6") else {
        return;
    };
    let ix = index(&gz, Codec::Gzip, 256 << 10, &f.data);
    let c = ferry_seek::Compressed::new(std::fs::File::open(&gz).expect("open"), ix);
    crate::check_threads(&c, &f.data);
}
