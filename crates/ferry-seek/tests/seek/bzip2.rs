//! bzip2: sequential, one stream or several; the advice says so.

use ferry_seek::Codec;

use crate::{check_reads, index, shell, Fixture};

#[test]
fn bzip2_reads_are_right_and_sequential() {
    let f = Fixture::new(40, 1 << 20);
    if !crate::have("bzip2") {
        return ferry_testkit::skip("bzip2 is not installed");
    }
    shell(
        "(head -c 300000 data | bzip2 -1; tail -c +300001 data | bzip2 -9) > m.bz2",
        f.dir.path(),
    );
    let ix = index(&f.path("m.bz2"), Codec::Bzip2, 64 << 10, &f.data);
    assert!(!ix.is_random_access());
    let advice = ix.advice().expect("advice");
    assert!(
        advice.contains("sequential") && advice.contains("pzstd"),
        "{advice}"
    );
    check_reads(&f.path("m.bz2"), ix, &f.data, 30, 40);
    for (len, seed) in [(0usize, 41u64), (1, 42)] {
        let f = Fixture::new(seed, len);
        let Some(bz) = f.compress("t.bz2", "bzip2 -c") else {
            return;
        };
        let ix = index(&bz, Codec::Bzip2, 64 << 10, &f.data);
        check_reads(&bz, ix, &f.data, 10, seed);
    }
}
