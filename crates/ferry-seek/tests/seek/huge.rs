//! Frames and blocks whose headers ask for much memory: a seekable zstd file whose one
//! frame holds 3 GiB of zeros (about 100 KB on disk) is read through [`Frames`] in a
//! child process whose peak RSS must stay far below the frame's size, and an xz block
//! whose header asks for a 1 GiB dictionary is refused, not allocated.

use std::process::{Command, Stdio};

use ferry_seek::{Codec, Frames, Indexing};
use ferry_testkit::memory::{peak_rss, zeros_tar_zst, ZEROS_AT};

/// The zeros in the archive the child reads.
const ZEROS_LEN: u64 = 3 << 30;

/// Set (to the archive's path) in the child, which reads the small file, the zeros'
/// start, middle and end, backwards to their start again, then 64 MiB of them in order.
const CHILD: &str = "FERRY_SEEK_HUGE_CHILD";

#[test]
fn a_frame_of_3_gib_of_zeros_is_read_in_bounded_memory() {
    if let Some(path) = std::env::var_os(CHILD) {
        let frames = Frames::open(std::fs::File::open(path).expect("open"))
            .expect("open")
            .expect("a seek table");
        let mut buf = vec![0u8; 1 << 20];
        assert_eq!(frames.read_at(&mut buf[..5], 512).expect("head"), 5);
        assert_eq!(&buf[..5], b"hello");
        let data = ZEROS_AT;
        for at in [
            data,
            data + ZEROS_LEN / 2,
            data + ZEROS_LEN - 1000,
            data + 7,
        ] {
            let n = frames.read_at(&mut buf, at).expect("zeros");
            assert!(n >= 1000 && buf[..n].iter().all(|&b| b == 0), "{n} at {at}");
        }
        // A member read in order, as cat reads it: 64 MiB of it in 1 MiB pieces.
        for i in 0..64u64 {
            assert_eq!(
                frames.read_at(&mut buf, data + (i << 20)).expect("read"),
                1 << 20
            );
        }
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("huge.tar.zst");
    zeros_tar_zst(&path, ZEROS_LEN);
    let on_disk = std::fs::metadata(&path).expect("stat").len();
    assert!(on_disk < 1 << 20, "{on_disk} bytes on disk");
    let Some(peak) = child_peak(
        "huge::a_frame_of_3_gib_of_zeros_is_read_in_bounded_memory",
        CHILD,
        &path,
    ) else {
        return;
    };
    // The frame is 3 GiB; the reader keeps a decoder's window and its buffers.
    assert!(peak < 200 << 20, "peak RSS {} MiB", peak >> 20);
}

#[test]
fn an_xz_block_asking_for_a_1_gib_dictionary_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("big-dict.xz");
    let made = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "printf 'small' | xz --lzma2=dict=1GiB -c > {}",
            path.display()
        ))
        .status();
    if !made.is_ok_and(|s| s.success()) {
        ferry_testkit::skip("xz is not installed");
        return;
    }
    let mut indexing = Indexing::new(
        std::fs::File::open(&path).expect("open"),
        Codec::Xz,
        1 << 20,
    )
    .expect("indexing");
    let err = std::io::copy(&mut indexing, &mut std::io::sink()).expect_err("refused");
    assert!(
        err.to_string()
            .contains("needs more than the 128 MiB of memory"),
        "{err}"
    );
}

/// Set (to the file's path) in the child of the seek table test.
const TABLE_CHILD: &str = "FERRY_SEEK_TABLE_CHILD";

#[test]
fn a_seek_table_footer_claiming_a_4_gb_table_allocates_nothing() {
    if let Some(path) = std::env::var_os(TABLE_CHILD) {
        let err = Frames::open(std::fs::File::open(path).expect("open"))
            .err()
            .expect("refused");
        assert!(
            err.to_string().contains("no skippable frame of its length"),
            "{err}"
        );
        return;
    }
    // A sparse file of 4 GB ending in a footer that says 500 million frames: the table
    // would fill the file (and was read into one buffer of its size).
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("table.zst");
    let count: u32 = 500_000_000;
    let len = u64::from(count) * 8 + 9 + 8 + 64;
    let file = std::fs::File::create(&path).expect("create");
    file.set_len(len).expect("sparse");
    let mut footer = count.to_le_bytes().to_vec();
    footer.push(0);
    footer.extend(0x8F92_EAB1u32.to_le_bytes());
    std::os::unix::fs::FileExt::write_all_at(&file, &footer, len - 9).expect("footer");
    let Some(peak) = child_peak(
        "huge::a_seek_table_footer_claiming_a_4_gb_table_allocates_nothing",
        TABLE_CHILD,
        &path,
    ) else {
        return;
    };
    assert!(peak < 64 << 20, "peak RSS {} MiB", peak >> 20);
}

/// Runs test `name` of this binary again in a child process with `env` set to `path`
/// (the child does the reading), which must pass; its peak RSS in bytes. `None` when
/// it cannot be measured here (the reason is given).
fn child_peak(name: &str, env: &str, path: &std::path::Path) -> Option<u64> {
    let mut child = Command::new(std::env::current_exe().expect("exe"));
    child
        .args([name, "--exact", "--test-threads=1"])
        .env(env, path);
    let (out, peak) = peak_rss(&child, Stdio::piped())?;
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(peak)
}
