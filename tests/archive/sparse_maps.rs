//! Issue 33: sparse maps whose runs come out of order, repeat, overlap or include an
//! empty one. GNU tar and bsdtar write each run where the map says, in map order, so
//! where runs overlap the later one's bytes win; ferry makes the same file whichever
//! way it reads the archive: unpacked from the file or a pipe, printed by `cat`, and
//! read through both mounts. Built as GNU tar's pax formats 1.0 (the map opens the
//! data) and 0.1 (the map in `GNU.sparse.map`) write them.

use crate::common::mounted::Mounted;
use crate::common::{fuse_here, is_root, scratch, skip};
use crate::sparse_claims::{header, padded, record, sparse_member, sparse_tar};
use crate::{ferry, ferry_command, ferry_stdin, missing};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::process::Command;

/// A file's logical size and its runs `(offset, bytes)` in map order.
struct Map {
    name: &'static str,
    size: u64,
    runs: Vec<(u64, Vec<u8>)>,
}

const MIB: u64 = 1 << 20;

/// The maps, their regions on 512-byte boundaries (as the kernel mount needs:
/// docs/kernel-mount.md), each ending as GNU tar ends one, with an empty run at the file's size
/// (without it GNU tar makes the file end where the last run does).
fn maps() -> Vec<Map> {
    let fill = |c: u8, n: usize| vec![c; n];
    let mut maps = vec![
        Map {
            name: "overlapping",
            size: 3 * MIB,
            runs: vec![
                (0, fill(b'A', 4096)),
                (2048, fill(b'B', 4096)),
                (2 * MIB, fill(b'C', 4096)),
            ],
        },
        Map {
            name: "out-of-order",
            size: 3 * MIB,
            runs: vec![
                (MIB, fill(b'B', 4096)),
                (0, fill(b'A', 4096)),
                (2 * MIB, fill(b'C', 4096)),
            ],
        },
        Map {
            name: "repeated",
            size: MIB,
            runs: vec![
                (0, fill(b'A', 4096)),
                (0, fill(b'B', 4096)),
                (MIB - 512, fill(b'E', 512)),
            ],
        },
        Map {
            // A later run inside an earlier one: the earlier one's tail is stored before
            // the later run's bytes but lies after them.
            name: "inside",
            size: 64 * 1024,
            runs: vec![
                (0, fill(b'A', 16384)),
                (4096, fill(b'B', 512)),
                (40960, fill(b'C', 512)),
            ],
        },
        Map {
            name: "empty-run",
            size: MIB,
            runs: vec![
                (0, fill(b'A', 4096)),
                (4096, Vec::new()),
                (0, fill(b'B', 512)),
                (8192, fill(b'C', 512)),
            ],
        },
    ];
    for m in &mut maps {
        m.runs.push((m.size, Vec::new()));
    }
    maps
}

/// The file the map makes: each run written where it says, in map order.
fn expected(m: &Map) -> Vec<u8> {
    let mut file = vec![0u8; m.size as usize];
    for (at, bytes) in &m.runs {
        file[*at as usize..*at as usize + bytes.len()].copy_from_slice(bytes);
    }
    file
}

/// Where the file has data (the runs' union, merged), for SEEK_DATA and SEEK_HOLE.
fn data_regions(m: &Map) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = m
        .runs
        .iter()
        .filter(|r| !r.1.is_empty())
        .map(|(at, b)| (*at, at + b.len() as u64))
        .collect();
    runs.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (s, e) in runs {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

/// The map as GNU tar's pax 0.1 writes it: the map in `GNU.sparse.map`, the runs'
/// bytes as the member's data.
fn sparse_tar_01(name: &str, m: &Map) -> Vec<u8> {
    let map: Vec<String> = m
        .runs
        .iter()
        .flat_map(|(at, b)| [at.to_string(), b.len().to_string()])
        .collect();
    let pax = [
        record("GNU.sparse.size", &m.size.to_string()),
        record("GNU.sparse.numblocks", &m.runs.len().to_string()),
        record("GNU.sparse.name", name),
        record("GNU.sparse.map", &map.join(",")),
    ]
    .concat();
    sparse_member(&pax, m.runs.iter().flat_map(|r| r.1.clone()).collect())
}

fn assert_file(path: &Path, want: &[u8], what: &str) {
    let got =
        std::fs::read(path).unwrap_or_else(|e| panic!("{what}: read {}: {e}", path.display()));
    assert_eq!(got.len(), want.len(), "{what}: size");
    if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
        panic!(
            "{what}: differs first at byte {i}: {} where {} was due",
            got[i], want[i]
        );
    }
}

/// Runs a peer's extraction of `archive` into `dst`, which must succeed.
fn peer_extracts(program: &str, archive: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    let out = Command::new(program)
        .arg("-xf")
        .arg(archive)
        .arg("-C")
        .arg(dst)
        .output()
        .expect("run the peer");
    assert!(
        out.status.success(),
        "{program}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What `ferry cat ARGS..` prints, the archive on standard input if `stdin` names it;
/// it must succeed silently.
fn cat_bytes(args: &[&dyn AsRef<std::ffi::OsStr>], stdin: Option<&Path>, what: &str) -> Vec<u8> {
    let mut cmd = ferry_command(args);
    if let Some(input) = stdin {
        cmd.stdin(std::fs::File::open(input).expect("open the archive"));
    }
    let out = cmd.output().expect("run ferry cat");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.is_empty(),
        "{what}: cat: {stderr}"
    );
    out.stdout
}

#[test]
fn maps_out_of_order_repeated_or_overlapping_make_the_file_the_peers_make() {
    let peers: Vec<&str> = ["tar", "bsdtar"]
        .into_iter()
        .filter(|p| !missing(p))
        .collect();
    let s = scratch();
    for m in maps() {
        let want = expected(&m);
        for (format, bytes) in [
            ("1.0", sparse_tar(m.name, m.size, &runs_of(&m))),
            ("0.1", sparse_tar_01(m.name, &m)),
        ] {
            let case = format!("{} map, pax {format}", m.name);
            let dir = s.tmp.path().join(format!("{}-{format}", m.name));
            std::fs::create_dir_all(&dir).unwrap();
            let archive = dir.join("a.tar");
            std::fs::write(&archive, bytes).unwrap();
            for p in &peers {
                let out = dir.join(p);
                peer_extracts(p, &archive, &out);
                assert_file(&out.join(m.name), &want, &format!("{case}: {p}"));
            }
            let file = dir.join("file");
            let r = ferry(&[&"unpack", &archive, &file]);
            r.assert_ok();
            assert!(r.stderr.is_empty(), "{case}: unpack: {}", r.stderr);
            assert_file(&file.join(m.name), &want, &format!("{case}: unpack"));
            let piped = dir.join("piped");
            ferry_stdin(&[&"unpack", &"-", &piped], &archive).assert_ok();
            assert_file(&piped.join(m.name), &want, &format!("{case}: unpack -"));
            let printed = cat_bytes(&[&"cat", &archive, &m.name], None, &case);
            assert!(printed == want, "{case}: cat prints another file");
            let printed = cat_bytes(&[&"cat", &"-", &m.name], Some(&archive), &case);
            assert!(printed == want, "{case}: cat - prints another file");
            let listed = ferry(&[&"ls", &"-l", &archive]);
            listed.assert_ok();
            assert!(
                listed.stdout.contains(&format!(" {} ", m.size)),
                "{case}: ls -l: {}",
                listed.stdout
            );
            check_mounts(&m, &archive, &dir, &want, &case);
        }
    }
}

fn runs_of(m: &Map) -> Vec<(u64, &[u8])> {
    m.runs.iter().map(|(at, b)| (*at, b.as_slice())).collect()
}

/// The FUSE mount shows the file, and where its data and holes are; the kernel mount
/// (as root) shows the file.
fn check_mounts(m: &Map, archive: &Path, dir: &Path, want: &[u8], case: &str) {
    if !fuse_here() {
        return;
    }
    let at = dir.join("fuse");
    {
        let mounted = Mounted::made_by(&at, || ferry(&[&"mount", &archive, &at]));
        let path = mounted.at.join(m.name);
        assert_file(&path, want, &format!("{case}: FUSE mount"));
        let f = std::fs::File::open(&path).unwrap();
        for (start, end) in data_regions(m) {
            let seek =
                |from: u64, whence| unsafe { libc::lseek(f.as_raw_fd(), from as i64, whence) };
            assert_eq!(
                seek(start, libc::SEEK_DATA),
                start as i64,
                "{case}: SEEK_DATA at {start}"
            );
            assert_eq!(
                seek(start, libc::SEEK_HOLE),
                end.min(m.size) as i64,
                "{case}: SEEK_HOLE from {start}"
            );
        }
    }
    if !is_root() {
        skip("the kernel mount (EROFS) needs root");
        return;
    }
    let at = dir.join("kernel");
    let mounted = Mounted::made_by(&at, || ferry(&[&"mount", &"--kernel", &archive, &at]));
    assert_file(
        &mounted.at.join(m.name),
        want,
        &format!("{case}: kernel mount"),
    );
    drop(mounted);
    let _ = ferry_command(&[&"umount", &at]).output();
}

/// Read-ahead sends a directory's small files stored whole into the kernel's cache
/// once one of them is read: a file whose stored bytes add up to its size but whose
/// map is out of order or repeats a run is not stored whole, and must read as the
/// peers make it.
#[test]
fn read_ahead_leaves_files_stored_out_of_order_to_their_own_reads() {
    if !fuse_here() {
        return;
    }
    let s = scratch();
    let fill = |c: u8| vec![c; 512];
    let strip_end = |mut t: Vec<u8>| {
        t.truncate(t.len() - 1024);
        t
    };
    let mut tar = padded([header("a", b'0', 5).to_vec(), b"hello".to_vec()].concat());
    tar.extend(strip_end(sparse_tar(
        "b",
        1024,
        &[(512, &fill(b'B')), (0, &fill(b'A')), (1024, &[])],
    )));
    tar.extend(strip_end(sparse_tar(
        "c",
        1024,
        &[(0, &fill(b'X')), (0, &fill(b'Y')), (1024, &[])],
    )));
    tar.extend([0u8; 1024]);
    let archive = s.tmp.path().join("a.tar");
    std::fs::write(&archive, &tar).unwrap();
    let at = s.tmp.path().join("m");
    let mounted = Mounted::made_by(&at, || ferry(&[&"mount", &archive, &at]));
    // The kernel takes cached data only for files it knows: look them all up first.
    for e in std::fs::read_dir(&mounted.at).unwrap() {
        std::fs::metadata(e.unwrap().path()).unwrap();
    }
    assert_eq!(std::fs::read(mounted.at.join("a")).unwrap(), b"hello");
    // Give the read-ahead, which follows the answer, time to send what it would.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let want_b = [fill(b'A'), fill(b'B')].concat();
    let want_c = [fill(b'Y'), vec![0; 512]].concat();
    assert_file(&mounted.at.join("b"), &want_b, "b through the mount");
    assert_file(&mounted.at.join("c"), &want_c, "c through the mount");
    ferry(&[&"unpack", &archive, &s.dst]).assert_ok();
    assert_file(&s.dst.join("b"), &want_b, "b unpacked");
    assert_file(&s.dst.join("c"), &want_c, "c unpacked");
}
