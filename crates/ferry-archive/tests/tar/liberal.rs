//! Issue 33: archives GNU tar 1.34 reads that a strict reader refused, made by hand
//! from the format's specification: each is read as GNU tar reads it, with a warning
//! (a [`ferry_archive::tar::TarWarning`]) where GNU tar warns or something is dropped.

use ferry_archive::tar::{Reader, TarKind};

use crate::common::read_all;
use crate::craft::{Archive, Header};

fn paths(archive: &[u8]) -> Vec<Vec<u8>> {
    read_all(archive)
        .unwrap()
        .into_iter()
        .map(|(e, _)| e.path)
        .collect()
}

#[test]
fn pax_times_and_owners_that_do_not_parse_are_ignored_with_a_warning() {
    // GNU tar: "Malformed extended header: invalid mtime=+5", the header field used.
    for (key, value) in [
        (&b"uid"[..], &b"99999999999"[..]),
        (b"gid", b"12x"),
        (b"mtime", b"+5"),
        (b"mtime", b" 5"),
        (b"mtime", b".5"),
        (b"atime", b"99999999999999999999"),
    ] {
        let a = Archive::default()
            .pax(b'x', &[(key, value)])
            .file(b"a", b"")
            .end()
            .bytes();
        let mut r = Reader::new(&a[..]);
        let e = r.next_entry().unwrap().unwrap();
        assert_eq!((e.uid, e.gid, e.mtime), (1000, 1000, (1_600_000_000, 0)));
        let w = r.take_warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        let said = w[0].to_string();
        assert!(said.contains(&*String::from_utf8_lossy(key)), "{said}");
        assert!(said.contains("member a"), "{said}");
    }
    // The forms GNU tar reads: what follows the number ignored.
    for (value, t) in [
        (&b"1.5x"[..], (1, 500_000_000)),
        (b"1.", (1, 0)),
        (b"1e9", (1, 0)),
    ] {
        let a = Archive::default()
            .pax(b'x', &[(b"mtime", value)])
            .file(b"a", b"")
            .end()
            .bytes();
        assert_eq!(read_all(&a).unwrap()[0].0.mtime, t);
    }
}

#[test]
fn global_header_sets_what_gnu_tar_sets() {
    // GNU tar applies a global path, linkpath and size to every member after it.
    let mut link = Header::ustar(b'2', b"l", 0);
    link.set(157, b"own");
    let a = Archive::default()
        .pax(b'g', &[(b"linkpath", b"tgt"), (b"size", b"1")])
        .header(&link)
        .file(b"a", b"x")
        .end()
        .bytes();
    let r = read_all(&a).unwrap();
    assert_eq!(r[0].0.link_target.as_deref(), Some(&b"tgt"[..]));
    assert_eq!((r[1].0.size, &r[1].1[..]), (1, &b"x"[..]));
    let a = Archive::default()
        .pax(b'g', &[(b"path", b"gp")])
        .file(b"a", b"")
        .file(b"b", b"")
        .end()
        .bytes();
    assert_eq!(paths(&a), [b"gp".to_vec(), b"gp".to_vec()]);
    // A sparse map describes one file: dropped, with a warning (GNU tar: "excess").
    let a = Archive::default()
        .pax(
            b'g',
            &[(b"GNU.sparse.map", b"0,1"), (b"GNU.sparse.size", b"9")],
        )
        .file(b"a", b"x")
        .end()
        .bytes();
    let mut r = Reader::new(&a[..]);
    let e = r.next_entry().unwrap().unwrap();
    assert_eq!((e.sparse, e.size), (None, 1));
    let w = r.take_warnings();
    assert!(w[0].to_string().contains("GNU.sparse.map"), "{w:?}");
    // A global header among a member's extension headers applies too.
    let a = Archive::default()
        .pax(b'x', &[(b"path", b"p1")])
        .pax(b'g', &[(b"mtime", b"7")])
        .file(b"a", b"")
        .end()
        .bytes();
    let r = read_all(&a).unwrap();
    assert_eq!((&r[0].0.path[..], r[0].0.mtime), (&b"p1"[..], (7, 0)));
    assert_eq!(r[0].0.header_offset, 0);
}

#[test]
fn repeated_extension_headers_the_last_wins_with_a_warning() {
    // As GNU tar: the second pax header replaces the first, records and all.
    let a = Archive::default()
        .pax(b'x', &[(b"path", b"p1"), (b"mtime", b"5")])
        .pax(b'x', &[(b"path", b"p2")])
        .file(b"a", b"")
        .end()
        .bytes();
    let mut r = Reader::new(&a[..]);
    let e = r.next_entry().unwrap().unwrap();
    assert_eq!((&e.path[..], e.mtime.0), (&b"p2"[..], 1_600_000_000));
    let w = r.take_warnings();
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].offset, 1024);
    assert!(w[0]
        .to_string()
        .contains("member p2: two pax extended headers (type 'x')"));
    for (flag, what) in [(b'L', "GNU long name"), (b'K', "GNU long link")] {
        let long = Header::gnu(flag, b"././@LongLink", 3);
        let mut link = Header::gnu(b'2', b"s", 0);
        link.set(157, b"t");
        let a = Archive::default()
            .header(&long)
            .data(b"n1\0")
            .header(&long)
            .data(b"n2\0")
            .header(&link)
            .end()
            .bytes();
        let mut r = Reader::new(&a[..]);
        let e = r.next_entry().unwrap().unwrap();
        let got = if flag == b'L' {
            e.path
        } else {
            e.link_target.unwrap()
        };
        assert_eq!(got, b"n2");
        let said = r.take_warnings()[0].to_string();
        assert!(said.contains(what), "{said}");
    }
}

#[test]
fn entries_without_data_have_none_whatever_their_size() {
    // POSIX: no data follows types 1-6, whatever the size says (a directory of size
    // 255, a hardlink of size 321 are seen in real archives): the next header follows.
    for flag in [b'1', b'2', b'3', b'4', b'5', b'6'] {
        let mut h = Header::ustar(flag, b"a", 321);
        h.set(157, b"target");
        let a = Archive::default().header(&h).file(b"b", b"bb").end();
        let mut r = Reader::new(&a.0[..]);
        let e = r.next_entry().unwrap().unwrap();
        assert_eq!((e.size, e.stored, e.header_size), (0, 0, 321));
        let b = r.next_entry().unwrap().unwrap();
        assert_eq!((&b.path[..], b.header_offset), (&b"b"[..], 512));
        assert!(r.take_warnings().is_empty());
        assert!(r.next_entry().unwrap().is_none());
        // A writer that stored data there anyway: what is not a header is skipped.
        let a = Archive::default()
            .header(&h)
            .data(&[0xaa; 321])
            .file(b"b", b"bb")
            .end();
        let mut r = Reader::new(&a.0[..]);
        r.next_entry().unwrap().unwrap();
        let b = r.next_entry().unwrap().unwrap();
        assert_eq!((&b.path[..], b.header_offset), (&b"b"[..], 1024));
        let w = r.take_warnings();
        assert!(w[0].to_string().contains("claims a size of 321"), "{w:?}");
    }
    // An old-style directory: a regular file whose name ends in '/', size or not.
    let a = Archive::default()
        .file(b"dir/", b"Q")
        .file(b"dir/f", b"x")
        .end()
        .bytes();
    let r = read_all(&a).unwrap();
    assert_eq!((r[0].0.kind, r[0].0.header_size), (TarKind::Dir, 1));
    assert_eq!(r[1].0.path, b"dir/f");
    let mut h = Header::ustar(b'\0', b"old/", 1);
    h.set(257, &[0; 8]);
    let a = Archive::default()
        .header(&h)
        .file(b"old/f", b"x")
        .end()
        .bytes();
    assert_eq!(paths(&a), [b"old/".to_vec(), b"old/f".to_vec()]);
    let r = read_all(&Archive::default().file(b"dir/", b"").end().bytes()).unwrap();
    assert_eq!(r[0].0.kind, TarKind::Dir);
}

#[test]
fn unknown_and_vendor_type_flags_are_read_as_gnu_tar_reads_them() {
    // POSIX, GNU tar, bsdtar: an unknown type is a regular file. GNU tar extracts a
    // Solaris ACL header ('A') and GNU's old 'N' as files too.
    for flag in [b'N', b'A', b'Z', 0xff] {
        let a = Archive::default()
            .header(&Header::gnu(flag, b"a", 3))
            .data(b"abc")
            .end()
            .bytes();
        let mut r = Reader::new(&a[..]);
        let e = r.next_entry().unwrap().unwrap();
        assert_eq!((e.kind, e.size), (TarKind::File, 3));
        let said = r.take_warnings()[0].to_string();
        assert!(said.contains("member a: unknown file type"), "{said}");
    }
    // A volume label is skipped, its data too (GNU tar); a file continued from another
    // volume is left out as an error (GNU tar without -M), the rest read on.
    let a = Archive::default()
        .header(&Header::gnu(b'V', b"label", 5))
        .data(b"label")
        .header(&Header::gnu(b'M', b"m", 700))
        .data(&[7; 700])
        .file(b"a", b"")
        .end()
        .bytes();
    let mut r = Reader::new(&a[..]);
    assert_eq!(r.next_entry().unwrap().unwrap().path, b"a");
    let w = r.take_warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0].severity, ferry_archive::tar::Severity::Error);
    assert!(
        w[0].to_string().contains("member m: not extracted"),
        "{w:?}"
    );
    // A GNU incremental directory is a directory; the names it lists are skipped.
    let dumpdir = b"Yf\0Nold\0\0";
    let a = Archive::default()
        .header(&Header::gnu(b'D', b"d/", dumpdir.len() as u64))
        .data(dumpdir)
        .file(b"d/f", b"x")
        .end()
        .bytes();
    let read = read_all(&a).unwrap();
    let kinds: Vec<_> = read.iter().map(|(e, _)| (e.kind, e.size)).collect();
    assert_eq!(kinds, [(TarKind::Dir, 0), (TarKind::File, 1)]);
    assert_eq!(
        read[0].0.header_size,
        dumpdir.len() as u64,
        "as tar -tv lists it"
    );
}

#[test]
fn global_records_are_capped() {
    // Every entry carries a copy of the globals: a global header that would make them
    // pass the cap is dropped, with a warning, never a refusal.
    let big = vec![b'v'; 40_000];
    let a = Archive::default()
        .pax(b'g', &[(b"k1", &big)])
        .pax(b'g', &[(b"k2", &big)])
        .file(b"a", b"")
        .end()
        .bytes();
    let mut r = Reader::new(&a[..]);
    let e = r.next_entry().unwrap().unwrap();
    assert_eq!(e.pax.len(), 1);
    let said = r.take_warnings()[0].to_string();
    assert!(said.contains("pax global header ignored"), "{said}");
}

#[test]
fn lenient_octal_forms_are_accepted() {
    let mut h = Header::ustar(b'0', b"a", 0);
    h.set(124, b"000000000005")
        .set(100, b"  644 \0\0")
        .set(108, b"\0\0\0\0\0\0\0\0");
    let a = Archive::default().header(&h).data(b"hello").end().bytes();
    let e = &read_all(&a).unwrap()[0];
    assert_eq!((e.0.size, e.0.mode, e.0.uid), (5, 0o644, 0));
    assert_eq!(e.1, b"hello");
    // As GNU tar's from_header: one NUL then blanks skipped, the number ends at the
    // first NUL or blank, and what follows that is not looked at (so NULs then digits
    // read as 0, and "0000 000012" as 0).
    for (field, size) in [
        (&b"\0\0\0\0\0\0\0\0\0\0\x001"[..], 0),
        (b"0000 000012\0", 0),
        (b"\0   5      ", 5),
        (b"5\0junk!!!!!!", 5),
        (b"\t\n\x0b\x0c\r5      ", 5),
        (b"\x80\0\0\0\0\0\0\0\0\0\0\x05", 5),
    ] {
        let mut h = Header::ustar(b'0', b"a", 0);
        h.set(124, field);
        let a = Archive::default().header(&h).data(&b"hello"[..size]).end();
        let r = read_all(&a.bytes()).unwrap();
        assert_eq!(r[0].0.size, size as u64, "{field:?}");
    }
}
