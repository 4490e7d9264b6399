//! Issue 32: a GNU sparse 1.0 map may claim a logical size far beyond the data stored
//! (60 GB, 600 GB, 2^60 bytes in a few KB). Unpacking one must cost what the stored
//! data costs, leave the holes as holes, and `ls` and `cat` must behave.

use crate::common::run::run;
use crate::{ferry, ferry_command, ferry_stdin};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A ustar header block for `name` of type `kind` with `size` bytes of data.
pub(crate) fn header(name: &str, kind: u8, size: u64) -> [u8; 512] {
    let mut b = [0u8; 512];
    b[..name.len()].copy_from_slice(name.as_bytes());
    let octal = |b: &mut [u8], v: u64| {
        let s = format!("{v:0w$o}\0", w = b.len() - 1);
        b.copy_from_slice(s.as_bytes());
    };
    octal(&mut b[100..108], 0o644);
    octal(&mut b[108..116], 0);
    octal(&mut b[116..124], 0);
    octal(&mut b[124..136], size);
    octal(&mut b[136..148], 1_600_000_000);
    b[156] = kind;
    b[257..263].copy_from_slice(b"ustar\0");
    b[263..265].copy_from_slice(b"00");
    b[148..156].fill(b' ');
    let sum: u32 = b.iter().map(|&c| u32::from(c)).sum();
    b[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    b
}

/// `bytes` padded with zeros to a whole number of 512-byte blocks.
pub(crate) fn padded(mut bytes: Vec<u8>) -> Vec<u8> {
    bytes.resize(bytes.len().div_ceil(512) * 512, 0);
    bytes
}

/// One pax record `LEN key=value\n`.
pub(crate) fn record(key: &str, value: &str) -> String {
    let body = format!(" {key}={value}\n");
    let mut len = body.len() + 1;
    while format!("{len}{body}").len() != len {
        len += 1;
    }
    format!("{len}{body}")
}

/// A tar (as GNU tar writes one with `--sparse --format=pax`) holding `name`, of logical
/// `size`, whose runs `(offset, bytes)` are the only data stored; ends with its
/// end-of-archive blocks.
pub fn sparse_tar(name: &str, size: u64, runs: &[(u64, &[u8])]) -> Vec<u8> {
    let pax = [
        record("GNU.sparse.major", "1"),
        record("GNU.sparse.minor", "0"),
        record("GNU.sparse.name", name),
        record("GNU.sparse.realsize", &size.to_string()),
    ]
    .concat();
    let mut map = format!("{}\n", runs.len());
    for (off, data) in runs {
        map.push_str(&format!("{off}\n{}\n", data.len()));
    }
    let mut data = padded(map.into_bytes());
    for (_, bytes) in runs {
        data.extend_from_slice(bytes);
    }
    sparse_member(&pax, data)
}

/// The archive of one sparse member as GNU tar lays it out: its pax header of `pax`
/// records, the ustar header of its stand-in name, its `data`, then the end blocks.
pub(crate) fn sparse_member(pax: &str, data: Vec<u8>) -> Vec<u8> {
    let mut out = header("./PaxHeaders/x", b'x', pax.len() as u64).to_vec();
    out.extend(padded(pax.as_bytes().to_vec()));
    out.extend(header("./GNUSparseFile.0/x", b'0', data.len() as u64));
    out.extend(padded(data));
    out.extend([0u8; 1024]);
    out
}

/// Writes the archive of a file `big` of `size` with "hello" at the start and
/// "world" at the end, stored in a few KB.
fn claims(dir: &Path, size: u64) -> std::path::PathBuf {
    let path = dir.join(format!("claims-{size}.tar"));
    let tar = sparse_tar("big", size, &[(0, b"hello"), (size - 5, b"world")]);
    assert!(tar.len() < 5000, "{} bytes", tar.len());
    std::fs::write(&path, tar).expect("write the archive");
    path
}

/// Well under what hashing the holes took (4-5 s for 60 GB, unloaded), with room
/// for a loaded machine.
const QUICK: Duration = Duration::from_secs(3);

/// `ferry unpack ARCHIVE DST`, the archive named or on standard input; what it did
/// and how long it took.
fn timed_unpack(
    archive: &Path,
    dst: &Path,
    from_stdin: bool,
) -> (crate::common::run::Run, Duration) {
    let start = Instant::now();
    let r = if from_stdin {
        ferry_stdin(&[&"unpack", &"-", &dst], archive)
    } else {
        ferry(&[&"unpack", &archive, &dst])
    };
    (r, start.elapsed())
}

fn check_unpacked(dst: &Path, size: u64) {
    let big = dst.join("big");
    let meta = std::fs::metadata(&big).expect("stat the unpacked file");
    assert_eq!(meta.len(), size);
    assert!(
        meta.blocks() <= 64,
        "{} blocks: holes were written",
        meta.blocks()
    );
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(&big).unwrap();
    let mut head = [0u8; 5];
    f.read_exact_at(&mut head, 0).unwrap();
    let mut tail = [0u8; 5];
    f.read_exact_at(&mut tail, size - 5).unwrap();
    assert_eq!((&head, &tail), (b"hello", b"world"));
}

#[test]
fn a_sparse_map_claiming_60_or_600_gb_unpacks_in_the_time_its_data_takes() {
    let s = crate::common::scratch();
    for size in [60_000_000_000u64, 600_000_000_000] {
        let archive = claims(s.tmp.path(), size);
        for from_stdin in [false, true] {
            let dst = s.tmp.path().join(format!("out-{size}-{from_stdin}"));
            let (r, took) = timed_unpack(&archive, &dst, from_stdin);
            r.assert_ok();
            assert!(took < QUICK, "unpack of a {size}-byte claim took {took:?}");
            check_unpacked(&dst, size);
            // --verify reads the holes back as holes, not as zeros.
            let again = s.tmp.path().join(format!("verified-{size}-{from_stdin}"));
            let start = Instant::now();
            ferry(&[&"unpack", &"--verify", &archive, &again]).assert_ok();
            assert!(
                start.elapsed() < QUICK,
                "--verify took {:?}",
                start.elapsed()
            );
            check_unpacked(&again, size);
        }
        let listed = ferry(&[&"ls", &"-l", &archive]);
        listed.assert_ok();
        assert!(
            listed.stdout.contains(&size.to_string()),
            "{}",
            listed.stdout
        );
        // cat streams the logical bytes: the first ones come at once.
        let mut cat = ferry_command(&[&"cat", &archive, &"big"]);
        cat.stdout(Stdio::piped());
        let mut child = cat.spawn().expect("start ferry cat");
        let mut head = [0u8; 5];
        use std::io::Read;
        child.stdout.take().unwrap().read_exact(&mut head).unwrap();
        assert_eq!(&head, b"hello");
        let _ = child.wait();
    }
}

#[test]
fn a_sparse_map_claiming_2_pow_60_bytes_ends_at_once_naming_the_file() {
    let s = crate::common::scratch();
    let archive = claims(s.tmp.path(), 1 << 60);
    for from_stdin in [false, true] {
        let dst = s.tmp.path().join(format!("out-{from_stdin}"));
        let (r, took) = timed_unpack(&archive, &dst, from_stdin);
        assert!(took < QUICK, "unpack took {took:?}");
        // No filesystem here holds 2^60 bytes: the file is an error naming it, and
        // nothing that looks complete is left.
        assert_eq!(r.status, 1, "{}", r.stderr);
        assert!(r.errors().iter().any(|e| e.contains("big")), "{}", r.stderr);
        assert!(std::fs::metadata(dst.join("big")).map_or(true, |m| m.len() != 1 << 60));
    }
    let mut ls = ferry_command(&[&"ls", &"-l", &archive]);
    ls.stdout(Stdio::piped());
    let listed = run(ls);
    listed.assert_ok();
    assert!(
        listed.stdout.contains(&(1u64 << 60).to_string()),
        "{}",
        listed.stdout
    );
}
