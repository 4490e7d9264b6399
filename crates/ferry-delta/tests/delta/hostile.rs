//! Hostile signatures and ops, each refused with its own error, never a panic or an
//! allocation sized by what was sent.

use crate::util::{file_at, random};
use ferry_delta::{delta, signature, Apply, Error, Op, Signature, MAGIC, MAX_LITERAL};
use std::os::fd::AsFd;

fn leb(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn sig_bytes(size: u64, block: u64, sums: usize) -> Vec<u8> {
    let mut v = MAGIC.to_vec();
    leb(size, &mut v);
    leb(block, &mut v);
    v.resize(v.len() + sums * 12, 0xab);
    v
}

#[test]
fn bad_signatures_are_refused() {
    let ok = sig_bytes(10_000, 4096, 3);
    assert!(Signature::decode(&ok).is_ok());
    let check = |bytes: &[u8], want: fn(&Error) -> bool| {
        let e = Signature::decode(bytes).expect_err("decoded");
        assert!(want(&e), "{e}");
    };
    check(b"", |e| matches!(e, Error::Truncated(_)));
    check(b"FDS2\x00\x80\x20", |e| matches!(e, Error::BadMagic));
    check(&ok[..5], |e| matches!(e, Error::Truncated(_)));
    check(&sig_bytes(0, 0, 0), |e| matches!(e, Error::BlockSize(0)));
    check(&sig_bytes(0, 4097, 0), |e| {
        matches!(e, Error::BlockSize(4097))
    });
    check(&sig_bytes(0, 2 << 20, 0), |e| {
        matches!(e, Error::BlockSize(_))
    });
    check(&sig_bytes(u64::MAX, 4096, 0), |e| {
        matches!(e, Error::TooManyBlocks { .. })
    });
    check(&sig_bytes(1 << 40, 4096, 0), |e| {
        matches!(e, Error::TooManyBlocks { .. })
    });
    check(&sig_bytes(10_000, 4096, 2), |e| {
        matches!(e, Error::SumsLength { .. })
    });
    check(&sig_bytes(10_000, 4096, 4), |e| {
        matches!(e, Error::SumsLength { .. })
    });
    // A count that would ask for gigabytes is refused on the bytes present.
    check(&sig_bytes(1 << 41, 1 << 20, 0), |e| {
        matches!(e, Error::SumsLength { .. })
    });
    let mut long = MAGIC.to_vec();
    long.extend([0xff; 11]);
    check(&long, |e| matches!(e, Error::Varint(_)));
    // Making one is held to the same rules.
    let f = file_at(&tempfile::tempdir().expect("dir").path().join("f"), b"abc");
    assert!(matches!(signature(&f, 3, 0), Err(Error::BlockSize(0))));
    assert!(matches!(
        signature(&f, 3, 5000),
        Err(Error::BlockSize(5000))
    ));
    // A basis shorter than its stated size.
    assert!(matches!(signature(&f, 10, 4096), Err(Error::Io(_))));
}

#[test]
fn bad_ops_are_refused() {
    let check = |bytes: &[u8], want: fn(&Error) -> bool| {
        let e = Op::decode(bytes).expect_err("decoded");
        assert!(want(&e), "{e}");
    };
    check(b"X", |e| matches!(e, Error::UnknownOp(b'X')));
    check(b"C\x00\x00", |e| matches!(e, Error::EmptyOp("copy")));
    check(b"L\x00", |e| matches!(e, Error::EmptyOp("literal")));
    let mut huge = b"L".to_vec();
    leb(MAX_LITERAL as u64 + 1, &mut huge);
    check(&huge, |e| matches!(e, Error::LiteralTooLong(_)));
    let mut over = b"C".to_vec();
    leb(u64::MAX, &mut over);
    leb(1, &mut over);
    check(&over, |e| matches!(e, Error::Overflow { .. }));
    let mut long = b"C".to_vec();
    long.extend([0x80; 10]);
    check(&long, |e| matches!(e, Error::Varint(_)));
    // Cut off: not an error yet, just not whole.
    for cut in [&b""[..], b"C", b"C\x05", b"C\x80", b"L\x05abc"] {
        assert_eq!(Op::decode(cut).expect("cut"), None, "{cut:?}");
    }
    assert_eq!(
        Op::decode(b"L\x03abcC").expect("literal"),
        Some((Op::Literal(b"abc"), 5))
    );
}

#[test]
fn apply_refuses_what_does_not_fit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let basis = file_at(
        &dir.path().join("basis"),
        &random(&mut fastrand::Rng::with_seed(9), 10_000),
    );
    let out = file_at(&dir.path().join("out"), b"");
    let apply = || Apply::new(basis.as_fd(), 10_000, out.as_fd(), 5000);
    let copy = |basis_offset, len| Op::Copy { basis_offset, len };

    let mut a = apply();
    assert!(matches!(
        a.push(&copy(9000, 1001)),
        Err(Error::OutsideBasis { .. })
    ));
    assert!(matches!(
        a.push(&copy(u64::MAX, 2)),
        Err(Error::OutsideBasis { .. })
    ));
    assert!(matches!(
        a.push(&copy(0, 5001)),
        Err(Error::PastSize { .. })
    ));
    a.push(&copy(5000, 4000)).expect("fits");
    assert!(matches!(
        a.push(&Op::Literal(&[1; 1001])),
        Err(Error::PastSize { .. })
    ));
    assert!(matches!(
        a.push(&copy(0, u64::MAX)),
        Err(Error::PastSize { .. })
    ));
    a.push(&Op::Literal(&[7; 999])).expect("fits");
    assert!(matches!(a.push(&copy(0, 2)), Err(Error::PastSize { .. })));
    // Short of the declared size.
    assert!(matches!(
        a.finish(),
        Err(Error::Short {
            at: 4999,
            size: 5000
        })
    ));
    assert!(
        std::fs::metadata(dir.path().join("out"))
            .expect("stat")
            .len()
            <= 5000
    );

    // A basis that is shorter than the caller said: an I/O error, not a short file.
    let mut a = Apply::new(basis.as_fd(), 20_000, out.as_fd(), 20_000);
    assert!(matches!(a.push(&copy(5000, 15_000)), Err(Error::Io(_))));
}

#[test]
fn a_new_file_shorter_than_its_size_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = random(&mut fastrand::Rng::with_seed(10), 100_000);
    let f = file_at(&dir.path().join("f"), &data);
    let sig = signature(&f, 100_000, 4096).expect("signature");
    let e = delta(&f, 200_000, &sig, |_: Op<'_>| Ok::<_, std::io::Error>(())).expect_err("shrank");
    assert!(e.to_string().contains("shrank"), "{e}");
}
