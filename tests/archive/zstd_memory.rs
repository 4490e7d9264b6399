//! A `.tar.zst` whose one frame holds 2 GiB of zeros (about 100 KB on disk): `cat` and
//! `unpack` read it with a peak RSS far below the frame's size, as the frame is read
//! streaming rather than decompressed whole into the cache.

use crate::ferry_command;
use ferry_testkit::memory::{peak_rss, zeros_tar_zst};
use std::process::Stdio;

const ZEROS: u64 = 2 << 30;
/// Far below the frame's 2 GiB: ferry, a decoder's window, its buffers.
const BOUND: u64 = 160 << 20;

#[test]
fn cat_and_unpack_read_a_frame_of_2_gib_of_zeros_in_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = dir.path().join("zeros.tar.zst");
    zeros_tar_zst(&archive, ZEROS);
    let Some((out, peak)) = peak_rss(&ferry_command(&[&"cat", &archive, &"head"]), Stdio::piped())
    else {
        return;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"hello");
    assert!(peak < BOUND, "cat head: peak RSS {} MiB", peak >> 20);
    let sink = std::fs::File::create(dir.path().join("out")).expect("create");
    let cat = ferry_command(&[&"cat", &archive, &"zeros"]);
    let Some((out, peak)) = peak_rss(&cat, Stdio::from(sink)) else {
        return;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let catted = std::fs::metadata(dir.path().join("out"))
        .expect("stat")
        .len();
    assert_eq!(catted, ZEROS);
    std::fs::remove_file(dir.path().join("out")).expect("remove");
    assert!(peak < BOUND, "cat zeros: peak RSS {} MiB", peak >> 20);
    let dst = dir.path().join("dst");
    let unpack = ferry_command(&[&"unpack", &archive, &dst]);
    let Some((out, peak)) = peak_rss(&unpack, Stdio::piped()) else {
        return;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(dst.join("head")).expect("head"), b"hello");
    assert_eq!(
        std::fs::metadata(dst.join("zeros")).expect("zeros").len(),
        ZEROS
    );
    assert!(peak < BOUND, "unpack: peak RSS {} MiB", peak >> 20);
}
