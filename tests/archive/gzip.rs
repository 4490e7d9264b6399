//! `pack -z`: independent gzip members, each carrying its sizes in its header. GNU tar
//! (`-xzf`) and `gzip -d | tar -x` read the archive; ferry's ls, cat and unpack read it
//! through its index, decompressing only the members they need; a damaged member is an
//! error naming the tar members in it, and leaves the others readable.

use crate::common::compare::assert_same_tree;
use crate::common::scratch;
use crate::zstd::{damage_a_big_member_and_read_the_rest, gnu_tar_and_a_pipe_read, packed, tree};
use crate::{ferry, ferry_stdin, missing};
use std::path::Path;

#[test]
fn gnu_tar_gzip_and_ferry_read_a_gzip_archive() {
    if missing("tar") || missing("gzip") {
        return;
    }
    let s = scratch();
    tree(&s.src);
    // GNU tar's extraction is compared to the nanosecond: times in pax headers.
    let archive = packed(&s.src, s.tmp.path(), "a.tar.gz", &["--pax-times"]);
    let bytes = std::fs::read(&archive).expect("read");
    assert_eq!(
        bytes[..4],
        [0x1f, 0x8b, 8, 4],
        "a .gz name implies -z: a gzip member with an extra field"
    );
    gnu_tar_and_a_pipe_read(&s, &archive, "-z", "gzip");
    // ferry: through the index, by several workers; as a stream; ls as a plain one.
    ferry(&[&"unpack", &"-j", &"4", &archive, &s.dst]).assert_ok();
    assert_same_tree(&s.src, &s.dst);
    let streamed = s.tmp.path().join("streamed");
    ferry_stdin(&[&"unpack", &"-", &streamed], &archive).assert_ok();
    assert_same_tree(&s.src, &streamed);
    let plain = packed(&s.src, s.tmp.path(), "a.far", &[]);
    let ls = |a: &Path| {
        let r = ferry(&[&"ls", &"-l", &a]);
        r.assert_ok();
        r.stdout
    };
    assert_eq!(ls(&archive), ls(&plain));
    let by_flag = packed(&s.src, s.tmp.path(), "b.far", &["-z", "--level", "1"]);
    assert_eq!(ls(&by_flag), ls(&plain));
    for name in ["big/last", "one", "a/b/c/d/deep.txt", "holey"] {
        let r = ferry(&[&"cat", &archive, &name]);
        r.assert_ok();
        let want = std::fs::read(s.src.join(name)).expect("read");
        assert!(r.stdout == String::from_utf8_lossy(&want), "{name}");
    }
    let r = ferry(&[
        &"pack",
        &"-z",
        &"--level",
        &"10",
        &s.src,
        &s.tmp.path().join("c.gz"),
    ]);
    r.assert_status(2);
    assert!(r.stderr.contains("gzip levels go from 1 to 9"), "{r}");
}

#[test]
fn a_damaged_gzip_member_names_its_tar_member_and_leaves_the_others_readable() {
    let s = scratch();
    tree(&s.src);
    let archive = packed(&s.src, s.tmp.path(), "a.tgz", &[]);
    damage_a_big_member_and_read_the_rest(&archive, &s.dst, "gzip member");
    let bytes = std::fs::read(&archive).expect("read");
    // Sizes in a header that run past the end: refused naming the archive.
    let cut = s.tmp.path().join("cut.tgz");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).expect("write");
    let r = ferry(&[&"ls", &cut]);
    r.assert_status(2);
    assert!(
        r.stderr.contains("cut.tgz") && r.stderr.contains("gzip members"),
        "{r}"
    );
}
