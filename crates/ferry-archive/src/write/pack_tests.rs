//! Tests of the pack sink and of `pack` as a whole.

use super::*;
use crate::write::fill::tests::Kept;
use crate::write::pack::{pack, Output, PackOptions};
use ferry_core::data::Reflink;
use std::path::Path;

#[test]
fn only_slow_clones_in_a_row_hand_large_files_to_the_fillers() {
    let clones = InlineClones::default();
    let (fast, slow) = (SLOW_CLONE / 10, SLOW_CLONE * 2);
    for _ in 0..3 {
        for _ in 1..SLOW_CLONES {
            clones.took(slow);
        }
        clones.took(fast); // one fast clone: the slow ones were a hiccup
    }
    assert!(clones.wanted());
    for _ in 0..SLOW_CLONES {
        clones.took(slow);
    }
    assert!(!clones.wanted());
    clones.took(fast);
    assert!(!clones.wanted(), "the fillers keep large files to the end");
    let stalled = InlineClones::default();
    stalled.took(STALLED_CLONE);
    assert!(!stalled.wanted(), "one stalled clone is enough");
}

#[test]
fn a_large_file_that_shrank_keeps_the_stream_in_shape() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("big");
    std::fs::write(&path, vec![7u8; 70_000]).expect("write test file");
    let fd: OwnedFd = std::fs::File::open(&path).expect("open").into();
    // Laid out as 100,000 bytes: the stream must still carry all of them.
    let size = 100_000;
    let large = Large {
        fd,
        segs: vec![Segment {
            file_off: 0,
            src: 0,
            dst: 0,
            len: size,
        }],
        size,
        slot: HashSlot(0),
        path: RelPath::from_bytes(b"d/big".to_vec()),
        stamp: None,
    };
    let kept = Kept::default();
    let mut out = Vec::new();
    stream_runs(&large, &mut out, &kept).expect("the stream is written");
    assert_eq!(out.len() as u64, pad_block(size));
    assert!(out[..70_000].iter().all(|&b| b == 7));
    assert!(out[70_000..].iter().all(|&b| b == 0));
    let errors = kept.0.into_inner().unwrap();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("d/big"), "{errors:?}");
}

/// Packs `src` with `opts`, into a file or through a stream; returns the archive.
fn packed(src: &Path, opts: &PackOptions, stream: bool) -> Vec<u8> {
    let out = tempfile::tempfile().expect("tempfile");
    let to = match stream {
        true => Output::Stream(Box::new(out.try_clone().expect("clone"))),
        false => Output::File(out.try_clone().expect("clone").into()),
    };
    let kept = Kept::default();
    pack(src, to, &[], opts, &Stats::default(), &kept).expect("packed");
    let errors = kept.0.into_inner().unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    use std::io::{Read, Seek};
    let (mut out, mut bytes) = (out, Vec::new());
    out.rewind().expect("rewind");
    out.read_to_end(&mut bytes).expect("read archive");
    bytes
}

/// A pack whose index moves to a temporary file, hashes patched there as the
/// fillers find them, writes the same archive as one that holds it all in memory,
/// to a file and through a stream.
#[test]
fn an_index_moved_to_a_temporary_file_makes_the_same_archive() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    for i in 0..600usize {
        let sub = src.join(format!("d{}", i % 7));
        std::fs::create_dir_all(&sub).expect("mkdir");
        let size = if i % 50 == 0 {
            200_000
        } else {
            (i * 131) % 9000
        };
        std::fs::write(sub.join(format!("f{i}")), vec![i as u8; size]).expect("write");
    }
    let opts = |index_memory| PackOptions {
        hash: true,
        reflink: Reflink::Never,
        index_memory,
        ..PackOptions::default()
    };
    use std::os::unix::fs::FileExt;
    // The first read of each new directory sets its atime (relatime), which the
    // archive records: only packs after that one are alike.
    packed(&src, &opts(1 << 30), false);
    let in_memory = packed(&src, &opts(1 << 30), false);
    let archive = crate::read::Archive::from_file({
        let f = tempfile::tempfile().expect("tempfile");
        f.write_all_at(&in_memory, 0).expect("write");
        f
    })
    .expect("a valid archive");
    let index = archive.index().expect("indexed");
    assert_eq!(index.len(), 608);
    assert!(archive
        .entries()
        .expect("indexed")
        .map(|e| e.expect("readable"))
        .filter(|e| e.kind == Kind::File)
        .all(|e| e.hash.is_some()));
    for stream in [false, true] {
        let spilled = packed(&src, &opts(1 << 10), stream);
        let differs =
            (0..spilled.len().max(in_memory.len())).find(|&i| spilled.get(i) != in_memory.get(i));
        assert_eq!(
            differs, None,
            "index spilled, stream {stream}: first difference"
        );
    }
}
