//! Hand-made hostile and malformed archives: each must end in an error that names the
//! right offset, or, where the case is legal, in exactly the entries the format says.

use ferry_archive::tar::{Reader, TarErrorKind, TarKind};

use crate::common::{read_all, read_err};
use crate::craft::{pad, record, sparse10, Archive, Header};

/// Reading `$archive` fails at `$offset` with an error matching `$kind`.
macro_rules! assert_err {
    ($archive:expr, $offset:expr, $kind:pat) => {{
        let e = read_err(&$archive);
        assert!(matches!(e.kind, $kind), "wrong error: {e}");
        assert_eq!(e.offset, $offset, "wrong offset: {e}");
        e
    }};
}

fn paths(archive: &[u8]) -> Vec<Vec<u8>> {
    read_all(archive)
        .unwrap()
        .into_iter()
        .map(|(e, _)| e.path)
        .collect()
}

#[test]
fn bad_checksum() {
    let mut a = Archive::default()
        .file(b"a", b"hello")
        .file(b"b", b"x")
        .end()
        .bytes();
    a[1024 + 1] = b'Z';
    let e = assert_err!(a, 1024, TarErrorKind::BadChecksum);
    assert_eq!(
        e.to_string(),
        "archive offset 1024, after member a: bad header checksum"
    );
}

#[test]
fn nothing_or_no_header_at_the_start_is_not_an_archive() {
    let e = assert_err!(Vec::<u8>::new(), 0, TarErrorKind::Invalid(_));
    assert_eq!(
        e.to_string(),
        "archive offset 0: not a tar archive: the input is empty"
    );
    let mut a = Archive::default().file(b"a", b"hello").end().bytes();
    a[1] = b'Z';
    let e = assert_err!(a, 0, TarErrorKind::Invalid(_));
    assert_eq!(
        e.to_string(),
        "archive offset 0: not a tar archive: no tar header at its start"
    );
    // Two zero blocks alone are an archive of nothing, as are members without them.
    assert!(paths(&[0u8; 1024]).is_empty());
    assert_eq!(paths(&Archive::default().file(b"a", b"x").bytes()), [b"a"]);
}

#[test]
fn non_octal_numbers() {
    for (at, field) in [
        (124, &b"00000000019\0"[..]),
        (124, b"12345678901x"),
        (124, b"            "),
        (124, b"\x81\0\0\0\0\0\0\0\0\0\0\x01"),
        (100, b"0000644x"),
        (108, b"-0000001"),
        (136, b"0x5f5e1000\0\0"),
    ] {
        let mut h = Header::ustar(b'0', b"a", 0);
        h.set(at, field);
        let a = Archive::default().header(&h).end().bytes();
        let e = assert_err!(a, 0, TarErrorKind::BadNumber(..));
        let value = String::from_utf8_lossy(field.split(|&c| c == 0).next().unwrap());
        let value = value.trim_end_matches('\u{fffd}');
        assert!(e.to_string().contains(value), "{e} names {value:?}");
    }
}

#[test]
fn base256_numbers() {
    let mut h = Header::gnu(b'0', b"a", 0);
    let mut mtime = [0xffu8; 12];
    mtime[11] = 0x18; // -232
    h.set(136, &mtime);
    let mut uid = [0u8; 8];
    uid[0] = 0x80;
    uid[5..].copy_from_slice(&[0x2d, 0xc6, 0xc0]); // 3,000,000
    h.set(108, &uid);
    let a = Archive::default().header(&h).end().bytes();
    let e = &read_all(&a).unwrap()[0].0;
    assert_eq!((e.mtime, e.uid), ((-232, 0), 3_000_000));

    let mut h = Header::gnu(b'0', b"a", 0);
    h.set(124, &[0xffu8; 12]); // size -1
    assert_err!(
        Archive::default().header(&h).end().bytes(),
        0,
        TarErrorKind::BadNumber("size", _)
    );
    let mut h = Header::gnu(b'0', b"a", 0);
    h.set(108, &[0xffu8; 8]); // uid -1
    assert_err!(
        Archive::default().header(&h).end().bytes(),
        0,
        TarErrorKind::BadNumber("uid", _)
    );
}

#[test]
fn pax_size_overrides_ustar_size() {
    // ustar says 0 bytes, pax says 5: the data is read.
    let a = Archive::default()
        .pax(b'x', &[(b"size", b"5")])
        .header(&Header::ustar(b'0', b"a", 0))
        .data(b"hello")
        .end()
        .bytes();
    let r = read_all(&a).unwrap();
    assert_eq!((r[0].0.size, &r[0].1[..]), (5, &b"hello"[..]));

    // ustar says 512 bytes holding a header; pax says 0: that header is the next entry.
    let hidden = Header::ustar(b'0', b"hidden", 0).block();
    let a = Archive::default()
        .pax(b'x', &[(b"size", b"0")])
        .header(&Header::ustar(b'0', b"a", 512))
        .raw(&hidden)
        .end()
        .bytes();
    assert_eq!(paths(&a), [b"a".to_vec(), b"hidden".to_vec()]);
}

#[test]
fn pax_size_larger_than_the_stream() {
    let a = Archive::default()
        .pax(b'x', &[(b"size", b"1000000")])
        .header(&Header::ustar(b'0', b"a", 5))
        .data(b"hello")
        .end()
        .bytes();
    assert_eq!(a.len(), 3072);
    let mut r = Reader::new(&a[..]);
    let e = r.next_entry().unwrap().unwrap();
    assert_eq!(
        (e.size, e.stored, e.data_offset),
        (1_000_000, 1_000_000, 1536)
    );
    let mut buf = vec![0u8; 4096];
    let err = loop {
        match r.read_data(&mut buf) {
            Ok(n) => assert!(n > 0),
            Err(e) => break e,
        }
    };
    assert!(matches!(err.kind, TarErrorKind::UnexpectedEof));
    assert_eq!(err.offset, 3072);
    assert_err!(a, 3072, TarErrorKind::UnexpectedEof);
}

#[test]
fn pax_records_with_lying_lengths() {
    for body in [
        &b"30 path=abc\n"[..],
        b"11 path=abc\n",
        b"5 path=abc\n",
        b"12 path=abc!",
        b"12 path abc\n",
    ] {
        let a = Archive::default()
            .pax_body(b'x', body)
            .file(b"a", b"")
            .end()
            .bytes();
        assert_err!(a, 512, TarErrorKind::BadPax(_));
    }
    let mut body = record(b"path", b"ok");
    let first = body.len() as u64;
    body.extend_from_slice(b"99 mtime=1\n");
    let a = Archive::default()
        .pax_body(b'x', &body)
        .file(b"a", b"")
        .end()
        .bytes();
    assert_err!(a, 512 + first, TarErrorKind::BadPax(_));
}

#[test]
fn pax_values_are_validated() {
    // (A bad `size` is GNU tar's warning, not an error: see the peers' test.)
    for (key, value) in [
        (&b"GNU.sparse.realsize"[..], &b"12a"[..]),
        (b"GNU.sparse.size", b"-1"),
        (b"path", b"a\0b"),
        (b"linkpath", b"\0"),
        (b"LIBARCHIVE.xattr.user.x", b"not base64!"),
        (b"SCHILY.xattr.", b"no name"),
    ] {
        let a = Archive::default()
            .pax(b'x', &[(key, value)])
            .file(b"a", b"")
            .end()
            .bytes();
        let e = assert_err!(a, 512, TarErrorKind::BadPaxValue(..));
        let shown = String::from_utf8_lossy(key);
        assert!(e.to_string().contains(&*shown), "{e}");
    }
}

#[test]
fn pax_header_then_end_of_stream() {
    let a = Archive::default().pax(b'x', &[(b"path", b"p")]).bytes();
    assert_err!(a, 1024, TarErrorKind::UnexpectedEof);
    let a = Archive::default()
        .pax(b'x', &[(b"path", b"p")])
        .end()
        .bytes();
    assert_err!(a, 1024, TarErrorKind::Invalid(_));
    let mut a = Archive::default().pax(b'x', &[(b"path", b"p")]).bytes();
    a.truncate(600);
    assert_err!(a, 600, TarErrorKind::UnexpectedEof);
}

#[test]
fn x_header_applies_only_to_the_next_entry() {
    let a = Archive::default()
        .pax(
            b'x',
            &[
                (b"path", b"renamed"),
                (b"uid", b"42"),
                (b"mtime", b"-5.25"),
                (b"uname", b"x"),
            ],
        )
        .file(b"a", b"1")
        .file(b"b", b"2")
        .end()
        .bytes();
    let r = read_all(&a).unwrap();
    let (first, second) = (&r[0].0, &r[1].0);
    assert_eq!(
        (&first.path[..], first.uid, first.mtime),
        (&b"renamed"[..], 42, (-6, 750_000_000))
    );
    assert_eq!(first.uname.as_deref(), Some(&b"x"[..]));
    assert_eq!(first.header_offset, 0);
    assert_eq!(first.data_offset, 1536);
    assert_eq!(
        (&second.path[..], second.uid, second.mtime),
        (&b"b"[..], 1000, (1_600_000_000, 0))
    );
    assert_eq!(second.uname.as_deref(), Some(&b"user"[..]));
    assert!(second.pax.is_empty());
}

#[test]
fn global_header_applies_to_all_following() {
    let a = Archive::default()
        .file(b"before", b"")
        .pax(b'g', &[(b"uid", b"7"), (b"comment", b"c")])
        .file(b"a", b"")
        .pax(b'x', &[(b"uid", b"8")])
        .file(b"b", b"")
        .pax(b'g', &[(b"uid", b"")])
        .file(b"c", b"")
        .end()
        .bytes();
    let r = read_all(&a).unwrap();
    let uids: Vec<u32> = r.iter().map(|(e, _)| e.uid).collect();
    assert_eq!(uids, [1000, 7, 8, 1000]);
    assert_eq!(
        r[1].0.header_offset, 1536,
        "the global header is not part of the entry"
    );
    assert_eq!(
        r[2].0.pax,
        [
            (b"comment".to_vec(), b"c".to_vec()),
            (b"uid".to_vec(), b"8".to_vec())
        ]
    );
}

#[test]
fn huge_declared_extension_sizes_are_refused_before_reading() {
    let mut h = Header::ustar(b'x', b"PaxHeaders/x", 0);
    h.octal(124, 12, 0o77777777777);
    assert_err!(
        Archive::default().header(&h).bytes(),
        0,
        TarErrorKind::TooLarge { .. }
    );
    let mut h = Header::gnu(b'x', b"PaxHeaders/x", 0);
    let mut size = [0u8; 12];
    size[0] = 0x80;
    size[4] = 0x40; // 2^62
    h.set(124, &size);
    assert_err!(
        Archive::default().header(&h).bytes(),
        0,
        TarErrorKind::TooLarge { .. }
    );
    let h = Header::gnu(b'L', b"././@LongLink", 65537);
    assert_err!(
        Archive::default().header(&h).bytes(),
        0,
        TarErrorKind::TooLarge { .. }
    );
}

#[test]
fn gnu_long_names_and_links() {
    let name = vec![b'n'; 300];
    let target = vec![b't'; 200];
    let mut name_z = name.clone();
    name_z.push(0);
    let mut link = Header::gnu(b'2', b"short", 0);
    link.set(157, b"short-target");
    let a = Archive::default()
        .header(&Header::gnu(b'L', b"././@LongLink", name_z.len() as u64))
        .data(&name_z)
        .header(&Header::gnu(b'K', b"././@LongLink", target.len() as u64))
        .data(&target)
        .header(&link)
        .header(
            &Header::gnu(b'2', b"next", 0)
                .set(157, b"own-target")
                .clone(),
        )
        .end()
        .bytes();
    let r = read_all(&a).unwrap();
    assert_eq!((&r[0].0.path, r[0].0.kind), (&name, TarKind::Symlink));
    assert_eq!(r[0].0.link_target.as_deref(), Some(&target[..]));
    assert_eq!(r[1].0.link_target.as_deref(), Some(&b"own-target"[..]));

    // The name ends at its first NUL, whatever follows (GNU tar, bsdtar).
    let a = Archive::default()
        .header(&Header::gnu(b'L', b"././@LongLink", 5))
        .data(b"ab\0cd")
        .file(b"a", b"")
        .bytes();
    assert_eq!(paths(&a), [b"ab".to_vec()]);
    let bad = Archive::default()
        .header(&Header::gnu(b'L', b"././@LongLink", 2))
        .data(b"\0x")
        .file(b"a", b"")
        .bytes();
    assert_err!(bad, 0, TarErrorKind::Invalid(_));
}

#[test]
fn ustar_prefix_joins_the_name() {
    let mut h = Header::ustar(b'0', b"name", 0);
    h.set(345, b"pre/fix");
    let mut g = Header::gnu(b'0', b"gnuname", 0);
    g.set(345, b"00000000001\0"); // the old GNU atime, not a prefix
    let a = Archive::default().header(&h).header(&g).end().bytes();
    assert_eq!(paths(&a), [b"pre/fix/name".to_vec(), b"gnuname".to_vec()]);
    assert_eq!(read_all(&a).unwrap()[1].0.atime, Some((1, 0)));
}

#[test]
fn links_need_targets_and_paths_must_not_be_empty() {
    let a = Archive::default()
        .header(&Header::ustar(b'2', b"l", 0))
        .end()
        .bytes();
    assert_err!(a, 0, TarErrorKind::Invalid(_));
    let a = Archive::default().file(b"", b"").end().bytes();
    assert_err!(a, 0, TarErrorKind::Invalid(_));
}

#[test]
fn devices_and_fifos() {
    let mut c = Header::ustar(b'3', b"c", 0);
    c.octal(329, 8, 1).octal(337, 8, 3);
    let a = Archive::default()
        .pax(b'x', &[(b"SCHILY.devmajor", b"300000")])
        .header(&Header::ustar(b'4', b"b", 0))
        .header(&c)
        .header(&Header::ustar(b'6', b"f", 0))
        .end()
        .bytes();
    let r = read_all(&a).unwrap();
    assert_eq!(
        (r[0].0.kind, r[0].0.rdev),
        (TarKind::BlockDevice, Some((300_000, 0)))
    );
    assert_eq!(
        (r[1].0.kind, r[1].0.rdev),
        (TarKind::CharDevice, Some((1, 3)))
    );
    assert_eq!((r[2].0.kind, r[2].0.rdev), (TarKind::Fifo, None));
}

#[test]
fn end_of_archive_forms() {
    let one = Archive::default().file(b"a", b"x");
    let mut r = Reader::new(&one.0[..]);
    assert!(r.next_entry().unwrap().is_some());
    assert!(
        r.next_entry().unwrap().is_none(),
        "EOF at a header boundary"
    );
    assert_eq!(r.offset(), 1024);

    let a = one.clone().raw(&[0u8; 512]).bytes();
    assert_eq!(paths(&a), [b"a".to_vec()], "one zero block then EOF");

    let mut a = one.clone().end().bytes();
    a.extend_from_slice(b"ferry index or anything");
    let mut r = Reader::new(&a[..]);
    while r.next_entry().unwrap().is_some() {}
    assert_eq!(r.offset(), 2048, "stops right after the end marker");

    // A lone zero block, then anything: the end, with GNU tar's warning.
    for after in [
        &Archive::default().file(b"b", b"").0[..],
        &[0u8; 100],
        &[1; 100],
    ] {
        let a = one.clone().raw(&[0u8; 512]).raw(after).bytes();
        let mut r = Reader::new(&a[..]);
        assert!(r.next_entry().unwrap().is_some());
        assert!(r.next_entry().unwrap().is_none());
        let w = r.take_warnings();
        let zero = after.iter().all(|&c| c == 0);
        assert_eq!(w.len(), usize::from(!zero), "{w:?}");
        if let Some(w) = w.first() {
            assert!(
                w.to_string().contains("after member a: a lone zero block"),
                "{w}"
            );
            assert_eq!(w.offset, 1024);
        }
    }

    let a = one.raw(&[1u8; 300]).bytes();
    assert_err!(a, 1324, TarErrorKind::UnexpectedEof);
}

#[test]
fn truncated_in_the_middle_of_data() {
    let a = Archive::default().file(b"a", &[7u8; 1000]).end().bytes();
    let cut = &a[..812];
    let mut r = Reader::new(cut);
    r.next_entry().unwrap().unwrap();
    let mut buf = [0u8; 2000];
    assert_eq!(r.read_data(&mut buf).unwrap(), 300);
    let e = r.read_data(&mut buf).unwrap_err();
    assert!(matches!(e.kind, TarErrorKind::UnexpectedEof));
    assert_eq!(e.offset, 812);
    assert_eq!(
        e.to_string(),
        "archive offset 812: unexpected end of archive"
    );
    assert_err!(cut, 812, TarErrorKind::UnexpectedEof);
    assert_err!(&a[..1100], 1100, TarErrorKind::UnexpectedEof);
}

#[test]
fn errors_are_sticky() {
    let mut a = Archive::default()
        .file(b"a", b"")
        .file(b"b", b"")
        .end()
        .bytes();
    a[512] ^= 1;
    let mut r = Reader::new(&a[..]);
    r.next_entry().unwrap();
    assert!(r.next_entry().is_err());
    let e = r.next_entry().unwrap_err();
    assert!(matches!(e.kind, TarErrorKind::Stopped));
    assert!(r.read_data(&mut [0u8; 10]).is_err());
}

#[test]
fn random_bytes_are_errors() {
    let mut rng = fastrand::Rng::with_seed(0x9e37_79b9_7f4a_7c15);
    for len in [1usize, 511, 512, 513, 1024, 5000, 20_000] {
        for _ in 0..20 {
            let mut bytes = vec![0u8; len];
            rng.fill(&mut bytes);
            let e = read_err(&bytes);
            assert!(e.offset <= len as u64);
        }
    }
}

#[test]
fn sparse_10_map() {
    let a = sparse10(100, "2\n0\n10\n50\n5\n", &[1u8; 15]).end().bytes();
    let r = read_all(&a).unwrap();
    let e = &r[0].0;
    assert_eq!(&e.path, b"sparse");
    assert_eq!((e.size, e.stored, e.data_offset), (100, 15, 2048));
    assert_eq!(e.sparse.as_deref(), Some(&[(0, 10), (50, 5)][..]));
}

#[test]
fn sparse_maps_out_of_order_or_overlapping_are_laid_out_as_written_in_map_order() {
    // Stored: 10 bytes of 1 for (10, 10), then 5 of 2 for (0, 5), then 10 of 3 for
    // (15, 10), which overwrites the second half of the first run.
    let stored: Vec<u8> = [[1u8; 10].as_slice(), &[2; 5], &[3; 10]].concat();
    let a = sparse10(40, "3\n10\n10\n0\n5\n15\n10\n", &stored)
        .file(b"after", b"next")
        .end()
        .bytes();
    let mut reader = Reader::new(&a[..]);
    let mut t = reader.next_entry().unwrap().unwrap();
    assert_eq!(t.sparse.as_deref(), Some(&[(10, 10), (0, 5), (15, 10)][..]));
    assert_eq!(t.stored, 25);
    reader.lay_out(&mut t, None).unwrap();
    assert_eq!(t.sparse.as_deref(), Some(&[(0, 5), (10, 5), (15, 10)][..]));
    assert_eq!(t.stored, 20);
    let mut data = Vec::new();
    std::io::Read::read_to_end(&mut reader.data(), &mut data).unwrap();
    assert_eq!(data, [[2u8; 5].as_slice(), &[1; 5], &[3; 10]].concat());
    let next = reader.next_entry().unwrap().unwrap();
    assert_eq!(next.path, b"after");
    let mut data = Vec::new();
    std::io::Read::read_to_end(&mut reader.data(), &mut data).unwrap();
    assert_eq!(data, b"next");
    assert!(reader.next_entry().unwrap().is_none());

    // Laid out before a cut: the error names where the stream ended.
    let cut = &a[..2048 + 12];
    let mut reader = Reader::new(cut);
    let mut t = reader.next_entry().unwrap().unwrap();
    let err = reader.lay_out(&mut t, None).expect_err("cut short");
    assert!(matches!(err.kind, TarErrorKind::UnexpectedEof), "{err}");
    assert!(reader.next_entry().is_err(), "errors are sticky");
}

#[test]
fn sparse_10_bad_maps() {
    let cases: [(u64, &str, usize); 3] = [
        (100, "1\n95\n10\n", 10), // past the real size
        (100, "1\n0\n10\n", 20),  // does not add up
        (100, "1\n0\n10\n", 5),   // more runs than stored data
    ];
    for (realsize, map, stored) in cases {
        let a = sparse10(realsize, map, &vec![1u8; stored]).end().bytes();
        assert_err!(a, 1024, TarErrorKind::BadSparse(_));
    }
    let a = sparse10(100, "1\n0\n5\nXYZ", &[1u8; 5]).end().bytes();
    assert_err!(a, 1536 + 6, TarErrorKind::BadSparse(_));
    // A data area (5 bytes) shorter than the map's block.
    let mut a = sparse10(100, "1\n0\n5\n", &[]).end().bytes();
    let mut h = Header(a[1024..1536].try_into().unwrap());
    a[1024..1536].copy_from_slice(&h.set(124, b"00000000005\0").block());
    assert_err!(a, 1536, TarErrorKind::BadSparse(_));
    let a = sparse10(100, "2000000\n", &[]).end().bytes();
    assert_err!(a, 1536 + 7, TarErrorKind::BadSparse(_));
}

#[test]
fn sparse_pax_0x() {
    let a = Archive::default()
        .pax(
            b'x',
            &[
                (b"GNU.sparse.size", b"100"),
                (b"GNU.sparse.map", b"10,5,90,10"),
            ],
        )
        .header(&Header::ustar(b'0', b"s", 15))
        .data(&[2u8; 15])
        .pax(
            b'x',
            &[
                (b"GNU.sparse.size", b"100"),
                (b"GNU.sparse.numblocks", b"1"),
                (b"GNU.sparse.offset", b"0"),
                (b"GNU.sparse.numbytes", b"7"),
            ],
        )
        .header(&Header::ustar(b'0', b"t", 7))
        .data(&[3u8; 7])
        .end()
        .bytes();
    let r = read_all(&a).unwrap();
    assert_eq!(r[0].0.sparse.as_deref(), Some(&[(10, 5), (90, 10)][..]));
    assert_eq!(r[1].0.sparse.as_deref(), Some(&[(0, 7)][..]));
    assert_eq!(r[1].0.size, 100);

    let bad = Archive::default()
        .pax(
            b'x',
            &[
                (b"GNU.sparse.size", b"100"),
                (b"GNU.sparse.map", b"10,5,95,10"),
            ],
        )
        .header(&Header::ustar(b'0', b"s", 15))
        .data(&[2u8; 15])
        .end()
        .bytes();
    assert_err!(bad, 1024, TarErrorKind::BadSparse(_));
    let bad = Archive::default()
        .pax(b'x', &[(b"GNU.sparse.size", b"100")])
        .file(b"s", b"")
        .end()
        .bytes();
    assert_err!(bad, 1024, TarErrorKind::BadSparse(_));
}

/// An old GNU sparse header with `runs`, `realsize`, `stored` bytes.
fn gnu_sparse(runs: &[(u64, u64)], realsize: u64, stored: u64, extended: bool) -> Header {
    let mut h = Header::gnu(b'S', b"s", stored);
    for (i, &(offset, len)) in runs.iter().enumerate() {
        h.octal(386 + 24 * i, 12, offset)
            .octal(398 + 24 * i, 12, len);
    }
    h.set(482, &[u8::from(extended)]).octal(483, 12, realsize);
    h
}

#[test]
fn sparse_old_gnu_with_extension_blocks() {
    let head: Vec<(u64, u64)> = (0..4).map(|i| (i * 100, 10)).collect();
    let mut ext = Header([0; 512]);
    ext.octal(0, 12, 400).octal(12, 12, 10);
    let a = Archive::default()
        .header(&gnu_sparse(&head, 1000, 50, true))
        .raw(&ext.0)
        .data(&[5u8; 50])
        .end()
        .bytes();
    let r = read_all(&a).unwrap();
    let e = &r[0].0;
    assert_eq!(e.sparse.as_ref().unwrap().len(), 5);
    assert_eq!(
        (e.size, e.stored, e.header_offset, e.data_offset),
        (1000, 50, 0, 1024)
    );

    let mut gap = Header([0; 512]);
    gap.octal(24, 12, 400).octal(36, 12, 10); // a slot after an empty one
    let a = Archive::default()
        .header(&gnu_sparse(&head, 1000, 50, true))
        .raw(&gap.0)
        .bytes();
    assert_err!(a, 512, TarErrorKind::BadSparse(_));

    let a = Archive::default()
        .header(&gnu_sparse(&head, 1000, 50, true))
        .bytes();
    assert_err!(a, 512, TarErrorKind::UnexpectedEof);

    let mut ustar = gnu_sparse(&[(0, 5)], 10, 5, false);
    ustar.set(257, b"ustar\x0000");
    assert_err!(
        Archive::default()
            .header(&ustar)
            .data(b"12345")
            .end()
            .bytes(),
        0,
        TarErrorKind::BadSparse(_)
    );

    let a = Archive::default()
        .header(&gnu_sparse(&[(0, 5)], 4, 5, false))
        .data(b"12345")
        .end()
        .bytes();
    assert_err!(a, 0, TarErrorKind::BadSparse(_));
}

#[test]
fn xattrs_from_both_encodings() {
    let a = Archive::default()
        .pax(
            b'x',
            &[
                (b"LIBARCHIVE.xattr.user.a%3Db", b"AP8"),
                (b"LIBARCHIVE.xattr.user.other", b"dmFsdWU="),
                (b"SCHILY.xattr.user.other", b"override"),
                (b"SCHILY.xattr.user.empty", b""),
                (b"hdrcharset", b"BINARY"),
                (b"comment", b"padding padding"),
                (b"X.unknown", b"kept raw"),
            ],
        )
        .file(b"a", b"")
        .end()
        .bytes();
    let e = &read_all(&a).unwrap()[0].0;
    assert_eq!(
        e.xattrs,
        [
            (b"user.a=b".to_vec(), b"\0\xff".to_vec()),
            (b"user.other".to_vec(), b"value".to_vec())
        ],
        "bsdtar's SCHILY copies are ignored when LIBARCHIVE records are there"
    );
    assert_eq!(e.pax.len(), 7);

    let a = Archive::default()
        .pax(
            b'x',
            &[
                (b"SCHILY.xattr.user.a%3Db%25", b"1"),
                (b"SCHILY.xattr.user.x%41", b"2"),
                (b"SCHILY.xattr.user.empty", b""),
                (b"SCHILY.xattr.user.x%41", b"3"),
            ],
        )
        .file(b"a", b"")
        .end()
        .bytes();
    let e = &read_all(&a).unwrap()[0].0;
    assert_eq!(
        e.xattrs,
        [
            (b"user.a=b%".to_vec(), b"1".to_vec()),
            (b"user.x%41".to_vec(), b"3".to_vec()),
            (b"user.empty".to_vec(), b"".to_vec()),
        ]
    );
}

#[test]
fn pax_body_padding_and_hidden_records() {
    let mut body = record(b"path", b"p");
    body.extend([0u8; 20]);
    let a = Archive::default()
        .pax_body(b'x', &body)
        .file(b"a", b"")
        .end()
        .bytes();
    assert_eq!(paths(&a), [b"p".to_vec()]);
    body.extend(record(b"path", b"hidden"));
    let a = Archive::default()
        .pax_body(b'x', &body)
        .file(b"a", b"")
        .end()
        .bytes();
    assert_err!(
        a,
        512 + record(b"path", b"p").len() as u64,
        TarErrorKind::BadPax(_)
    );
}

#[test]
fn offsets_count_every_extension_header() {
    let a = Archive::default()
        .file(b"first", &[1u8; 600])
        .pax(b'x', &[(b"path", b"p")])
        .header(&Header::gnu(b'L', b"././@LongLink", 4))
        .data(b"lng\0")
        .file(b"x", b"abc")
        .end()
        .bytes();
    let r = read_all(&a).unwrap();
    assert_eq!((r[0].0.header_offset, r[0].0.data_offset), (0, 512));
    assert_eq!((r[1].0.header_offset, r[1].0.data_offset), (1536, 4096));
    assert_eq!(&r[1].0.path, b"p", "pax path wins over the long name");
    assert_eq!(pad(b"abc"), a[4096..4608].to_vec());
}

#[test]
fn sparse_records_on_a_non_file_are_refused() {
    // Found by the mutation loop: a symlink carrying a sparse map got a logical size.
    let mut link = Header::ustar(b'2', b"l", 0);
    link.set(157, b"target");
    let a = Archive::default()
        .pax(
            b'x',
            &[(b"GNU.sparse.size", b"12288"), (b"GNU.sparse.map", b"")],
        )
        .header(&link)
        .end()
        .bytes();
    assert_err!(a, 1024, TarErrorKind::BadSparse(_));
}

#[test]
fn many_small_records_cost_linear_time() {
    // 30,000 distinct xattrs in one header and 2,500 distinct global keys: the lookups
    // must not be quadratic (a 1 MiB header would otherwise cost minutes).
    let local: Vec<u8> = (0..30_000)
        .flat_map(|i| record(format!("SCHILY.xattr.user.{i}").as_bytes(), b"v"))
        .collect();
    assert!(local.len() < 1 << 20);
    let global: Vec<u8> = (0..2_500)
        .flat_map(|i| record(format!("k{i}").as_bytes(), b"v"))
        .collect();
    let a = Archive::default()
        .pax_body(b'g', &global)
        .pax_body(b'x', &local)
        .file(b"a", b"")
        .file(b"b", b"")
        .end()
        .bytes();
    let start = std::time::Instant::now();
    let r = read_all(&a).unwrap();
    assert_eq!(r[0].0.xattrs.len(), 30_000);
    assert_eq!(r[1].0.pax.len(), 2_500);
    assert!(start.elapsed().as_secs() < 20, "took {:?}", start.elapsed());
}
