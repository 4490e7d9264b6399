//! Issue 32: an archive cut exactly at a member boundary (no end-of-archive blocks, and
//! for a ferry archive no index) must not look whole: `unpack FILE`, `unpack -` and
//! `ls` exit 1 saying it was cut short, and `unpack` keeps what it made.

use crate::common::{scratch, trees};
use crate::{ferry, ferry_stdin, pack};
use ferry_archive::tar::{Reader, TarKind};
use std::path::Path;

/// The header offset and path of each member of the tar `bytes`, and whether it is a
/// regular file.
fn members(bytes: &[u8]) -> Vec<(u64, String, bool)> {
    let mut reader = Reader::new(bytes);
    let mut out = Vec::new();
    while let Some(t) = reader.next_entry().expect("a valid archive") {
        let path = String::from_utf8_lossy(&t.path)
            .trim_start_matches("./")
            .to_string();
        out.push((t.header_offset, path, t.kind == TarKind::File));
    }
    out
}

const SAYS: &str = "without its end-of-archive blocks";

/// Cuts `bytes` at every member boundary but the first and checks every command on
/// each cut.
fn every_cut_is_told(bytes: &[u8], dir: &Path) {
    let all = members(bytes);
    assert!(all.len() > 3, "{} members", all.len());
    for (k, &(at, _, _)) in all.iter().enumerate().skip(1) {
        let cut = dir.join(format!("cut-{at}.tar"));
        std::fs::write(&cut, &bytes[..at as usize]).expect("write the cut archive");
        for from_stdin in [false, true] {
            let dst = dir.join(format!("out-{at}-{from_stdin}"));
            let r = match from_stdin {
                true => ferry_stdin(&[&"unpack", &"-", &dst], &cut),
                false => ferry(&[&"unpack", &cut, &dst]),
            };
            assert_eq!(r.status, 1, "cut at {at}: {r}");
            assert!(
                r.errors().iter().any(|e| e.contains(SAYS)),
                "cut at {at}: {r}"
            );
            for (_, path, file) in &all[..k] {
                if *file {
                    assert!(
                        dst.join(path).is_file(),
                        "cut at {at}: {path} not kept: {r}"
                    );
                }
            }
        }
        let listed = ferry(&[&"ls", &cut]);
        assert_eq!(listed.status, 1, "cut at {at}: {listed}");
        assert!(listed.stderr.contains(SAYS), "cut at {at}: {listed}");
        assert_eq!(listed.stdout.lines().count(), k, "cut at {at}: {listed}");
    }
}

#[test]
fn a_ferry_archive_cut_at_any_member_boundary_is_an_error() {
    let s = scratch();
    trees::mixed(&s.src);
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &[]);
    let bytes = std::fs::read(&archive).expect("read the archive");
    every_cut_is_told(&bytes, s.tmp.path());
    // Whole, it is read without a word.
    let r = ferry(&[&"unpack", &archive, &s.dst]);
    r.assert_ok();
    assert!(!r.stderr.contains(SAYS));
}

#[test]
fn a_gnu_tar_archive_cut_at_a_member_boundary_is_an_error() {
    if crate::missing("tar") {
        return;
    }
    let s = scratch();
    trees::mixed(&s.src);
    let archive = s.tmp.path().join("gnu.tar");
    crate::peer("tar", &[&"-C", &s.src, &"-cf", &archive, &"."]);
    let bytes = std::fs::read(&archive).expect("read the archive");
    every_cut_is_told(&bytes, s.tmp.path());
    let r = ferry(&[&"ls", &archive]);
    r.assert_ok();
}
