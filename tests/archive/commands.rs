//! `ls`, `cat`, pipes, compressed input, the aligned layout and resuming an unpack.

use crate::common::compare::assert_same_tree;
use crate::common::nobody::{ferry_unprivileged, give_to_nobody, scratch_for_nobody};
use crate::common::run::{with_open_file_limit, FERRY};
use crate::common::{build, is_root, scratch, skip, trees};
use crate::{ferry, missing, pack, pack_and_unpack};
use ferry_archive::index::Kind;
use ferry_archive::read::Archive;
use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::process::{Command, Stdio};
use xxhash_rust::xxh3::xxh3_128;

#[test]
fn file_data_is_aligned_and_small_files_are_not_padded() {
    let s = scratch();
    trees::mixed(&s.src);
    for (i, size) in [4096usize, 4097, 100_000, 1 << 20].iter().enumerate() {
        build::write(
            &s.src.join(format!("big{i}")),
            &build::pattern(i as u64, *size),
        );
    }
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &[]);
    let a = Archive::open(&archive).expect("open archive");
    let entries = a.entries().expect("a ferry archive has an index");
    let mut big = 0;
    for e in entries
        .map(|e| e.expect("readable"))
        .filter(|e| e.kind == Kind::File)
    {
        if e.stored >= 4096 {
            assert_eq!(
                e.data_offset % 4096,
                0,
                "{:?} not aligned",
                String::from_utf8_lossy(&e.path)
            );
            big += 1;
        } else if e.stored > 0 {
            // A small file's data follows its headers directly: no 4 KiB padding.
            assert!(
                e.data_offset - e.header_offset <= 2048,
                "{:?} padded",
                String::from_utf8_lossy(&e.path)
            );
        }
    }
    assert!(big >= 4);
}

#[test]
fn many_small_files_pack_and_unpack_exactly() {
    // Small files are written with their headers in blocks of 256 KiB or 128 files by
    // parallel fillers: cross those bounds many times, with sizes that end mid-block,
    // mixed with large files moved on their own; every member's hash in the index must
    // be its content's.
    let s = scratch();
    build::mkdirs(&s.src);
    for i in 0..900u64 {
        let size = 100 + (i as usize * 997) % 60_000;
        build::write(&s.src.join(format!("s{i:04}")), &build::pattern(i, size));
        if i % 150 == 0 {
            build::write(&s.src.join(format!("L{i:04}")), &build::pattern(i, 300_000));
        }
    }
    build::stamp_times(&s.src);
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &["--hash"]);
    ferry(&[&"unpack", &archive, &s.dst]).assert_ok();
    assert_same_tree(&s.src, &s.dst);
    let a = Archive::open(&archive).expect("open archive");
    let entries = a.entries().expect("a ferry archive has an index");
    let mut files = 0;
    for e in entries
        .map(|e| e.expect("readable"))
        .filter(|e| e.kind == Kind::File)
    {
        let name = String::from_utf8_lossy(&e.path).into_owned();
        let content = std::fs::read(s.src.join(&name)).expect("read source");
        assert_eq!(
            e.hash,
            Some(xxh3_128(&content)),
            "{name}: hash in the index"
        );
        files += 1;
    }
    assert_eq!(files, 906);
    let out = Command::new("tar")
        .arg("-tf")
        .arg(&archive)
        .output()
        .expect("tar -tf");
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        900 + 6 + 1
    );
}

#[test]
fn pack_and_unpack_keep_within_a_low_limit_on_open_files() {
    // Each small file in a block stays open until a filler reads it: with the default
    // 128 files a block, a process limited to 64 descriptors (a hard limit ferry cannot
    // raise) failed to open the 60th file of the first block. Each unpack worker keeps
    // the directories it used last open: 16 workers in a tree 9 deep failed too. And
    // descriptors ferry inherits count: with 35 open at start (as under CI's runner),
    // 16 fillers' jobs and the read-ahead queue's directories ran pack out of them;
    // and `pack -j 8` ran its walkers' chains of directories out of them.
    let s = scratch();
    trees::deep(&s.src);
    let limited =
        |args: &[&std::ffi::OsStr]| crate::run(with_open_file_limit(64, args)).assert_ok();
    for walkers in ["1", "8"] {
        let archive = s.tmp.path().join(format!("{walkers}.far"));
        let dst = s.tmp.path().join(format!("unpacked-{walkers}"));
        limited(&[
            "pack".as_ref(),
            "-j".as_ref(),
            walkers.as_ref(),
            s.src.as_os_str(),
            archive.as_os_str(),
        ]);
        limited(&[
            "unpack".as_ref(),
            "-j".as_ref(),
            "16".as_ref(),
            archive.as_os_str(),
            dst.as_os_str(),
        ]);
        assert_same_tree(&s.src, &dst);
    }
}

/// `unpack --sparse=never` writes every block: a sparse member's holes (which the
/// archive does not store) are allocated, from a file and from a stream, and the
/// content is the same (they used to stay holes).
#[test]
fn unpack_sparse_never_leaves_no_holes() {
    let s = scratch();
    let size: u64 = 1 << 20;
    build::sparse_file(&s.src.join("holey"), size, &[(300_000, b"data")]);
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &[]);
    let from_file = s.tmp.path().join("from-file");
    ferry(&[&"unpack", &"--sparse=never", &archive, &from_file]).assert_ok();
    let streamed = s.tmp.path().join("streamed");
    assert_succeeded(
        Command::new(FERRY)
            .args(["unpack", "--sparse=never", "-"])
            .arg(&streamed)
            .stdin(std::fs::File::open(&archive).expect("open"))
            .output(),
    );
    for dst in [&from_file, &streamed] {
        assert_same_tree(&s.src, dst);
        let blocks = build::allocated(&dst.join("holey"));
        assert!(
            blocks >= size,
            "{}: {blocks} bytes allocated",
            dst.display()
        );
    }
}

#[test]
fn ls_lists_every_member_and_cat_prints_one() {
    let s = scratch();
    trees::mixed(&s.src);
    build::sparse_file(
        &s.src.join("holey"),
        16 << 20,
        &[(1 << 20, b"data in the middle")],
    );
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &[]);
    let ls = ferry(&[&"ls", &archive]);
    ls.assert_ok();
    let listed: Vec<&str> = ls.stdout.lines().collect();
    let counts = trees::count(&s.src);
    assert_eq!(
        listed.len() as u64,
        counts.files + counts.dirs + counts.others
    );
    assert!(listed.contains(&"holey"));
    let long = ferry(&[&"ls", &"-l", &archive]);
    // The mtime in UTC to the nanosecond, the date as GNU date gives it.
    let meta = std::fs::symlink_metadata(s.src.join("setuid")).expect("stat");
    let date = Command::new("date")
        .args(["-u", "+%F %T", "-d"])
        .arg(format!("@{}", meta.mtime()))
        .output()
        .expect("run date");
    let when = format!(
        "{}.{:09}",
        String::from_utf8_lossy(&date.stdout).trim(),
        meta.mtime_nsec()
    );
    assert!(
        long.stdout
            .lines()
            .any(|l| l.starts_with("-rwsr-xr-x") && l.contains(&when) && l.ends_with("setuid")),
        "no line for setuid at {when}: {}",
        long.stdout
    );

    let out = Command::new(FERRY)
        .args(["cat"])
        .arg(&archive)
        .arg("holey")
        .output()
        .expect("run cat");
    assert!(out.status.success());
    assert_eq!(
        out.stdout,
        std::fs::read(s.src.join("holey")).expect("read")
    );
    let size_file = std::fs::read_dir(&s.src)
        .expect("list")
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy().starts_with("size"))
        .expect("a sized file");
    let out = Command::new(FERRY)
        .arg("cat")
        .arg(&archive)
        .arg(size_file.file_name())
        .output()
        .expect("run cat");
    assert_eq!(out.stdout, std::fs::read(size_file.path()).expect("read"));

    let missing = ferry(&[&"cat", &archive, &"no/such/member"]);
    missing.assert_status(2);
    assert!(
        missing.stderr.contains("no such member"),
        "{}",
        missing.stderr
    );
}

#[test]
fn cat_follows_hardlinks_and_names_the_member_it_refuses() {
    if missing("tar") || missing("gzip") {
        return;
    }
    let s = scratch();
    build::mkdirs(&s.src.join("d"));
    build::write(&s.src.join("first"), b"the data");
    build::hardlink(&s.src.join("first"), &s.src.join("second"));
    build::symlink("first", &s.src.join("link"));
    build::fifo(&s.src.join("pipe"));
    let ferry_archive = s.tmp.path().join("a.far");
    pack(&s.src, &ferry_archive, &[]);
    // GNU tar names members `./x`, and stores whichever name of the inode it meets
    // first with the data, the other as a hardlink to it.
    let gnu = s.tmp.path().join("gnu.tar");
    let tar = Command::new("tar")
        .arg("-cf")
        .arg(&gnu)
        .arg("-C")
        .arg(&s.src)
        .arg(".")
        .status()
        .expect("run tar");
    assert!(tar.success());
    let gz = s.tmp.path().join("gnu.tar.gz");
    let gzip = Command::new("sh")
        .arg("-c")
        .arg(format!("gzip -c {} > {}", gnu.display(), gz.display()))
        .status()
        .expect("run gzip");
    assert!(gzip.success());
    let gnu_listing = ferry(&[&"ls", &"-l", &gnu]);
    assert!(
        gnu_listing.stdout.contains(" link to "),
        "tar stored no hardlink: {}",
        gnu_listing.stdout
    );

    for archive in [&ferry_archive, &gnu, &gz] {
        for name in ["first", "second", "./second", "/first"] {
            let r = ferry(&[&"cat", archive, &name]);
            r.assert_ok();
            assert_eq!(r.stdout, "the data", "cat {} {name}", archive.display());
        }
        for (name, why) in [
            ("link", "link: not a regular file but a symlink"),
            ("d", "d: not a regular file but a directory"),
            ("pipe", "pipe: not a regular file but a fifo"),
            ("missing", "missing: no such member"),
            ("../first", "../first: member path contains '..'"),
        ] {
            let r = ferry(&[&"cat", archive, &name]);
            r.assert_status(2);
            assert!(r.stdout.is_empty(), "{r}");
            assert_eq!(
                r.stderr.trim_end(),
                format!("ferry: {}: member {why}", archive.display()),
                "{r}"
            );
        }
    }

    // From a pipe, a hardlink's data has gone by: say so, and which link it was.
    let link = if gnu_listing.stdout.contains("./second link to") {
        "second"
    } else {
        "first"
    };
    let piped = Command::new(FERRY)
        .args(["cat", "-", link])
        .stdin(std::fs::File::open(&gz).expect("open the archive"))
        .output()
        .expect("run cat");
    let stderr = String::from_utf8_lossy(&piped.stderr);
    assert_eq!(piped.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("ferry: -: {link}: a hardlink to ./")),
        "{stderr}"
    );
}

/// `a | b`: runs both, feeding a's stdout to b's stdin; returns b's output.
fn pipe(a: &mut Command, b: &mut Command) -> std::process::Output {
    let mut first = a.stdout(Stdio::piped()).spawn().expect("spawn first");
    let out = first.stdout.take().expect("stdout");
    let second = b.stdin(out).output().expect("run second");
    assert!(first.wait().expect("wait").success());
    second
}

#[test]
fn packs_to_a_pipe_and_unpacks_from_one() {
    let s = scratch();
    trees::mixed(&s.src);
    let out = pipe(
        Command::new(FERRY).arg("pack").arg(&s.src).arg("-"),
        Command::new(FERRY).arg("unpack").arg("-").arg(&s.dst),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_same_tree(&s.src, &s.dst);
}

/// The compressors ferry reads, each with its file name suffix (pzstd's output starts
/// with a skippable frame, not zstd's magic).
const COMPRESSORS: [(&str, &str); 5] = [
    ("gzip", "gz"),
    ("zstd", "zst"),
    ("pzstd", "pzst"),
    ("xz", "xz"),
    ("bzip2", "bz2"),
];

#[test]
fn unpacks_gzip_zstd_xz_and_bzip2_archives() {
    if COMPRESSORS.iter().any(|(program, _)| missing(program)) {
        return;
    }
    let s = scratch();
    trees::mixed(&s.src);
    let plain = s.tmp.path().join("a.tar");
    pack(&s.src, &plain, &[]);
    let listing = ferry(&[&"ls", &plain]);
    listing.assert_ok();
    for (program, suffix) in COMPRESSORS {
        let packed = s.tmp.path().join(format!("a.tar.{suffix}"));
        let status = Command::new(program)
            .arg("-c")
            .arg(&plain)
            .stdout(std::fs::File::create(&packed).expect("create"))
            .status();
        assert!(status.is_ok_and(|s| s.success()));
        let dst = s.tmp.path().join(format!("out-{suffix}"));
        ferry(&[&"unpack", &packed, &dst]).assert_ok();
        assert_same_tree(&s.src, &dst);
        assert_eq!(ferry(&[&"ls", &packed]).stdout, listing.stdout, "{program}");
        // The same from standard input.
        let dst = s.tmp.path().join(format!("stdin-{suffix}"));
        let out = Command::new(FERRY)
            .arg("unpack")
            .arg("-")
            .arg(&dst)
            .stdin(std::fs::File::open(&packed).expect("open"))
            .output();
        assert_succeeded(out);
        assert_same_tree(&s.src, &dst);
    }
}

/// Compressed data is checked at its end (gzip's CRC and length, zstd's, xz's and
/// bzip2's checks), after the tar data: `unpack`, `ls` and `cat` read on to it, and fail
/// when it was cut short or damaged (they used to stop at the archive's end, exit 0).
#[test]
fn compressed_archives_cut_short_or_damaged_are_errors() {
    if COMPRESSORS.iter().any(|(program, _)| missing(program)) {
        return;
    }
    let s = scratch();
    // Random bytes: gzip stores them as they are, so a byte changed in the middle
    // leaves the deflate stream whole and only its CRC at the end tells.
    build::write(&s.src.join("f"), &build::pattern(3, 200_000));
    let plain = s.tmp.path().join("a.tar");
    pack(&s.src, &plain, &[]);
    let compress = |program: &str, suffix: &str| {
        let packed = s.tmp.path().join(format!("a.tar.{suffix}"));
        let out = Command::new(program)
            .arg("-c")
            .arg(&plain)
            .output()
            .expect(program);
        assert!(out.status.success(), "{program}");
        (packed, out.stdout)
    };
    let refused = |archive: &std::path::PathBuf, what: &str| {
        let dst = s.tmp.path().join(format!("out-{what}"));
        for r in [
            ferry(&[&"unpack", archive, &dst]),
            ferry(&[&"ls", archive]),
            ferry(&[&"cat", archive, &"f"]),
        ] {
            r.assert_status(2);
            let said = r.errors().join("\n");
            assert!(
                said.contains(": after the end of the archive: "),
                "{what}: {r}"
            );
        }
    };
    for (program, suffix) in COMPRESSORS {
        let (packed, mut bytes) = compress(program, suffix);
        bytes.pop();
        std::fs::write(&packed, &bytes).expect("write");
        refused(&packed, &format!("{program}-cut-short"));
    }
    let (packed, mut bytes) = compress("gzip", "gz");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x55;
    std::fs::write(&packed, &bytes).expect("write");
    refused(&packed, "gzip-damaged");
}

#[test]
fn unpacking_again_skips_what_is_there_and_repairs_what_is_not() {
    let s = scratch();
    trees::mixed(&s.src);
    let archive = pack_and_unpack(&s, "a.far");
    let again = ferry(&[&"unpack", &"--json", &archive, &s.dst]);
    again.assert_ok();
    let j = again.json();
    assert_eq!(j.count("bytes"), 0, "a second unpack rewrote data");
    assert!(j.count("skipped") > 0);
    // A damaged file (same size, other mtime) is rewritten.
    let victim = std::fs::read_dir(&s.src)
        .expect("list")
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy().starts_with("size"))
        .expect("a sized file");
    let damaged = s.dst.join(victim.file_name());
    let len = std::fs::metadata(&damaged).expect("stat").len() as usize;
    build::write(&damaged, &vec![b'x'; len]);
    ferry(&[&"unpack", &archive, &s.dst]).assert_ok();
    assert_same_tree(&s.src, &s.dst);
}

/// Unpacking over other kinds in the way replaces them as copy does (a symlink is
/// removed, never followed), except a directory that is not empty.
#[test]
fn other_kinds_in_the_way_are_replaced_by_an_unpack() {
    let s = scratch();
    trees::mixed(&s.src);
    let archive = pack_and_unpack(&s, "a.far");
    let outside = s.tmp.path().join("outside");
    build::mkdirs(&outside);
    trees::other_kinds_in_the_way(&s.dst, &outside);
    let r = ferry(&[&"unpack", &archive, &s.dst]);
    trees::assert_replaced_but_the_full_directory(&r, &s.src, &s.dst, &outside);
}

/// The names in `dir`, sorted.
fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The members `ferry ls` lists, sorted (pack writes a directory's in inode order).
pub(crate) fn members(archive: &std::path::Path) -> Vec<String> {
    let r = ferry(&[&"ls", &archive]);
    r.assert_ok();
    let mut names: Vec<String> = r.stdout.lines().map(str::to_owned).collect();
    names.sort();
    names
}

#[test]
fn pack_onto_a_full_filesystem_fails_and_leaves_the_archive_it_would_replace() {
    if crate::common::skip_unless_root() {
        return;
    }
    let m = match crate::common::mount::mount_image(16 << 20, "mkfs.ext4", &["-q"]) {
        Ok(m) => m,
        Err(why) => return crate::common::skip(&why),
    };
    let s = scratch();
    let small = s.tmp.path().join("small");
    build::mkdirs(&small);
    build::write(&small.join("a"), b"the archive that was there");
    for i in 0..24u64 {
        build::write(&s.src.join(format!("f{i:02}")), &build::pattern(i, 1 << 20));
    }
    let archive = m.path().join("a.far");
    let before = names_in(m.path());
    for existing in [false, true] {
        if existing {
            pack(&small, &archive, &[]);
        }
        let old = std::fs::read(&archive).ok();
        let r = ferry(&[&"pack", &s.src, &archive]);
        assert_ne!(r.status, 0, "a pack that did not fit succeeded: {r}");
        assert!(
            r.stderr.contains("No space left on device"),
            "the error says why: {r}"
        );
        assert_eq!(std::fs::read(&archive).ok(), old, "the archive changed");
        let mut expected = before.clone();
        if existing {
            expected.push("a.far".into());
            expected.sort();
        }
        assert_eq!(names_in(m.path()), expected, "something was left behind");
    }
}

#[test]
fn a_pack_replaces_an_archive_only_once_complete() {
    let s = scratch();
    build::write(&s.src.join("a"), b"first");
    let archive = s.tmp.path().join("out.far");
    pack(&s.src, &archive, &[]);
    build::chmod(&archive, 0o640);
    let first = std::fs::read(&archive).expect("archive");

    // A source that is not there: an error, and the archive as it was.
    let r = ferry(&[&"pack", &s.tmp.path().join("no-such-dir"), &archive]);
    assert_eq!(r.status, 2, "{r}");
    assert!(r.stderr.contains("no-such-dir"), "names the source: {r}");
    assert_eq!(std::fs::read(&archive).expect("archive"), first);
    assert_eq!(names_in(s.tmp.path()), ["out.far", "src"]);

    // Packed again: the new archive, with the old one's mode.
    build::write(&s.src.join("b"), b"second");
    pack(&s.src, &archive, &[]);
    assert_eq!(members(&archive), ["./", "a", "b"]);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&archive)
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o640);
    assert_eq!(names_in(s.tmp.path()), ["out.far", "src"]);

    // Through a symlink: written in place, the link stays a link.
    let link = s.tmp.path().join("link.far");
    build::symlink("out.far", &link);
    build::write(&s.src.join("c"), b"third");
    pack(&s.src, &link, &[]);
    assert!(std::fs::symlink_metadata(&link)
        .expect("stat")
        .file_type()
        .is_symlink());
    assert_eq!(members(&archive), ["./", "a", "b", "c"]);
}

/// Runs `pack` (the command `pack_cmd` makes, with the source and archive paths as its
/// last arguments) over a source large enough that it is still packing when
/// `writing(pid)` says it has started writing the archive, then sends it `signal`, and
/// returns how it ended. The archive at `archive` holds "the old archive" before.
fn pack_interrupted(
    s: &crate::common::Scratch,
    archive: &std::path::Path,
    pack_cmd: impl Fn() -> Command,
    writing: impl Fn(u32) -> bool,
    signal: rustix::process::Signal,
) -> std::process::Output {
    let mut files = 20_000;
    let mut made = 0;
    loop {
        for i in made..files {
            let dir = s.src.join(format!("d{}", i % 100));
            build::mkdirs(&dir);
            build::write(&dir.join(format!("f{i}")), b"some bytes");
        }
        made = files;
        build::write(archive, b"the old archive");
        let mut child = pack_cmd()
            .arg(&s.src)
            .arg(archive)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ferry");
        while !writing(child.id()) && child.try_wait().expect("wait").is_none() {
            std::thread::yield_now();
        }
        // Past the microseconds between creating the file and noting its name.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let pid = rustix::process::Pid::from_child(&child);
        rustix::process::kill_process(pid, signal).expect("signal ferry");
        let out = child.wait_with_output().expect("wait");
        if !out.status.success() {
            return out;
        }
        // Done before the signal came: try again with more to pack.
        assert!(files < 200_000, "pack always finished before the signal");
        files *= 4;
    }
}

/// Checks a command ran and succeeded, showing its errors if not.
fn assert_succeeded(out: std::io::Result<std::process::Output>) {
    let out = out.expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether process `pid` has a file open in `dir` that has no name (`O_TMPFILE`).
fn writes_unnamed_in(pid: u32, dir: &std::path::Path) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.filter_map(Result::ok)
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .any(|to| to.starts_with(dir) && to.to_string_lossy().ends_with(" (deleted)"))
}

#[test]
fn an_interrupted_or_killed_pack_leaves_nothing_behind() {
    // The archive is written without a name until complete: stopped by a signal it
    // handles (exit 130) or killed outright, pack leaves the archive it would have
    // replaced as it was, and nothing else.
    use rustix::process::Signal;
    let s = scratch();
    let archive = s.tmp.path().join("out.far");
    for signal in [Signal::INT, Signal::KILL] {
        let out = pack_interrupted(
            &s,
            &archive,
            || {
                let mut pack = Command::new(FERRY);
                pack.arg("pack");
                pack
            },
            |pid| writes_unnamed_in(pid, s.tmp.path()),
            signal,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        if signal == Signal::INT {
            assert_eq!(out.status.code(), Some(130), "{stderr}");
            assert!(stderr.contains("interrupted"), "{stderr}");
        } else {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(out.status.signal(), Some(9), "{stderr}");
        }
        assert_eq!(
            std::fs::read(&archive).expect("archive"),
            b"the old archive"
        );
        assert_eq!(names_in(s.tmp.path()), ["out.far", "src"], "{signal:?}");
    }
}

#[test]
fn without_proc_pack_writes_under_a_temporary_name_and_removes_it_when_stopped() {
    // Without /proc an unnamed file could not be given a name: pack writes under
    // `.out.far.XXXXXX.partial` beside the archive instead, renames it over the
    // archive when complete, and removes it when told to stop.
    if crate::common::skip_unless_root() || missing("unshare") {
        return;
    }
    let s = scratch();
    let archive = s.tmp.path().join("out.far");
    let without_proc = || {
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg("umount -l /proc && exec \"$0\" pack \"$@\"")
            .arg(FERRY);
        cmd
    };
    let out = pack_interrupted(
        &s,
        &archive,
        without_proc,
        |_| {
            names_in(s.tmp.path())
                .iter()
                .any(|n| n.ends_with(".partial"))
        },
        rustix::process::Signal::INT,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert_eq!(
        std::fs::read(&archive).expect("archive"),
        b"the old archive"
    );
    assert_eq!(names_in(s.tmp.path()), ["out.far", "src"]);
    // Left to finish, the archive replaces the old one, and nothing else is left.
    assert_succeeded(without_proc().arg(&s.src).arg(&archive).output());
    assert_eq!(names_in(s.tmp.path()), ["out.far", "src"]);
    assert!(members(&archive).len() > 20_000);
}

#[test]
fn an_archive_inside_its_source_is_not_packed_into_itself() {
    // Packed twice into the same path inside the source: the second pack must skip
    // both the file it writes and the archive it replaces.
    let s = scratch();
    build::write(&s.src.join("a"), b"data");
    let archive = s.src.join("self.far");
    for _ in 0..2 {
        let r = pack(&s.src, &archive, &[]);
        assert!(
            r.warnings()
                .iter()
                .all(|w| w.contains("where this job writes")),
            "{r}"
        );
    }
    assert_eq!(members(&archive), ["./", "a"]);
    assert_eq!(names_in(&s.src), ["a", "self.far"]);
}

/// A source that is not a directory is packed as its one member, named as it is (as
/// `tar -C DIR -cf A NAME` does), with no member for a root directory.
#[test]
fn a_single_file_or_link_packs_as_its_one_member() {
    let s = scratch();
    build::write(&s.src.join("plain"), &build::pattern(3, 70_000));
    build::set_xattr(&s.src.join("plain"), "user.kept", b"yes");
    build::symlink("plain", &s.src.join("link"));
    build::stamp_times(&s.src);
    for name in ["plain", "link"] {
        let archive = s.tmp.path().join(format!("{name}.far"));
        pack(&s.src.join(name), &archive, &[]);
        assert_eq!(members(&archive), [name]);
        ferry(&[&"unpack", &archive, &s.dst]).assert_ok();
        crate::peer("tar", &[&"-tf", &archive]);
    }
    crate::common::compare::assert_same_tree_with(
        &s.src,
        &s.dst,
        &crate::common::compare::Options {
            skip_root_meta: true,
            ..Default::default()
        },
    );
}

/// Issue 21: a symlink to a directory given as SRC is packed as the link (its one
/// member), as `tar -cf A LINK` packs it; named with a trailing slash it is followed,
/// and the tree it points to is packed, as `tar -cf A LINK/` does.
#[test]
fn a_symlink_to_a_directory_packs_as_a_link_unless_named_with_a_slash() {
    let s = scratch();
    build::mkdirs(&s.src.join("dd"));
    build::write(&s.src.join("dd/f"), b"inside the directory");
    build::symlink("dd", &s.src.join("ldd"));
    let link = s.src.join("ldd");
    let archive = s.tmp.path().join("link.far");
    pack(&link, &archive, &[]);
    assert_eq!(members(&archive), ["ldd"]);
    let r = ferry(&[&"ls", &"-l", &archive]);
    assert!(
        r.stdout.starts_with('l') && r.stdout.contains("ldd -> dd"),
        "{r}"
    );
    let slash = std::path::PathBuf::from(format!("{}/", link.display()));
    let followed = s.tmp.path().join("followed.far");
    pack(&slash, &followed, &[]);
    assert_eq!(members(&followed), ["./", "f"]);
}

#[test]
fn directory_metadata_comes_after_everything_below_it() {
    // A directory no one but root may enter, holding directories with times of their
    // own: an unprivileged unpack must finish those before it locks the outer one
    // (in the other order, opening `locked/inner` to set its times is refused).
    if !is_root() {
        skip("needs root to pack a directory nobody may read, then unpack it as nobody");
        return;
    }
    let (s, dst) = scratch_for_nobody();
    build::mkdirs(&s.src.join("locked/inner/deeper"));
    build::write(&s.src.join("locked/inner/deeper/f"), b"data");
    build::mkdirs(&s.src.join("open/inner"));
    build::stamp_times(&s.src);
    give_to_nobody(&s.src);
    build::chmod(&s.src.join("locked"), 0o000);
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &[]);
    let unpack = [OsStr::new("unpack"), archive.as_os_str(), dst.as_os_str()];
    let Some(r) = ferry_unprivileged(&unpack) else {
        return;
    };
    r.assert_ok();
    assert_same_tree(&s.src, &dst);
    build::chmod(&s.src.join("locked"), 0o755);
    build::chmod(&dst.join("locked"), 0o755);
}

/// Paths over twice PATH_MAX, and names that are not UTF-8 or hold newlines: pack and
/// unpack keep them exactly, `ls` lists them (escaped), and `cat` finds them by the raw
/// bytes given as its argument.
#[test]
fn odd_and_over_long_paths_pack_unpack_list_and_cat() {
    use std::os::unix::ffi::OsStrExt;
    let s = scratch();
    let odd = s.src.join("odd");
    build::mkdirs(&odd);
    trees::odd_names(&odd);
    let deep = trees::beyond_path_max(&s.src);
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &[]);
    ferry(&[&"unpack", &archive, &s.dst]).assert_ok();
    assert_same_tree(&s.src, &s.dst);

    let ls = ferry(&[&"ls", &archive]);
    ls.assert_ok();
    let deep_text = deep.to_str().expect("the deep path is ASCII");
    assert!(ls.stdout.lines().any(|l| l == deep_text), "{}", ls.stdout);
    assert!(
        ls.stdout.lines().any(|l| l == "odd/new\\nline"),
        "{}",
        ls.stdout
    );
    assert!(
        // As `tar -t` shows a byte that is not UTF-8: octal.
        ls.stdout.lines().any(|l| l == "odd/caf\\351"),
        "{}",
        ls.stdout
    );

    let cat = |member: &OsStr| {
        let out = Command::new(FERRY)
            .arg("cat")
            .arg(&archive)
            .arg(member)
            .output()
            .expect("run cat");
        assert!(out.status.success(), "cat {member:?}: {out:?}");
        out.stdout
    };
    assert_eq!(cat(deep.as_os_str()), build::pattern(1, 70_000));
    for name in [&b"odd/new\nline"[..], b"odd/caf\xe9"] {
        let name = OsStr::from_bytes(name);
        let want = std::fs::read(s.src.join(name)).expect("read the source");
        assert_eq!(cat(name), want, "{name:?}");
    }
}

/// An archive from before the index kept owner names (index version 1) still lists,
/// prints and unpacks through its index.
#[test]
fn an_archive_with_a_version_1_index_still_reads() {
    let s = scratch();
    let archive = std::path::Path::new(crate::INDEX_V1_ARCHIVE);
    let a = Archive::open(archive).expect("open the archive");
    assert!(a.index().is_some(), "read through its index");
    let ls = ferry(&[&"ls", &"-l", &archive]);
    ls.assert_ok();
    // No names in the index: ls shows the numbers.
    assert!(
        ls.stdout
            .lines()
            .any(|l| l.starts_with("drwxr-x--- 65534/0 ") && l.ends_with(" d/")),
        "{}",
        ls.stdout
    );
    assert!(ls.stdout.contains("2020-01-02 03:04:05.123456789"));
    let text = "made by ferry with index version 1\n";
    let cat = ferry(&[&"cat", &archive, &"d/f"]);
    cat.assert_ok();
    assert_eq!(cat.stdout, text);
    ferry(&[&"unpack", &archive, &s.dst]).assert_ok();
    assert_eq!(
        std::fs::read_to_string(s.dst.join("d/twin")).expect("read"),
        text
    );
    let (f, twin) = (
        std::fs::metadata(s.dst.join("d/f")).expect("stat"),
        std::fs::metadata(s.dst.join("d/twin")).expect("stat"),
    );
    assert_eq!(f.ino(), twin.ino());
    let d = std::fs::metadata(s.dst.join("d")).expect("stat");
    assert_eq!(
        (d.mode() & 0o7777, d.mtime(), d.mtime_nsec()),
        (0o750, 1577934245, 123456789)
    );
    assert_eq!(
        std::fs::read_link(s.dst.join("d/link")).expect("readlink"),
        std::path::Path::new("f")
    );
}

/// Unpack's workers make directories as they first need them, and race for the same
/// ones: each is counted once all the same (it was counted by every worker that tried
/// to make it), and one that was there before not at all.
#[test]
fn a_parallel_unpack_counts_each_directory_once() {
    let s = scratch();
    for a in 0..40 {
        for b in 0..6 {
            let dir = s.src.join(format!("a{a}/b{b}"));
            build::mkdirs(&dir);
            for f in 0..3 {
                build::write(&dir.join(format!("f{f}")), b"x");
            }
        }
    }
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &[]);
    for round in 0..3 {
        let dst = s.tmp.path().join(format!("u{round}"));
        let r = ferry(&[&"unpack", &"-j", &"16", &"--json", &archive, &dst]);
        r.assert_ok();
        r.json()
            .assert_counts(&[("dirs", 1 + 40 + 40 * 6), ("files", 40 * 6 * 3)]);
    }
    // Unpacked again, nothing is made: the directories were there already.
    let again = ferry(&[&"unpack", &"--json", &archive, &s.tmp.path().join("u0")]);
    again.assert_ok();
    again
        .json()
        .assert_counts(&[("dirs", 0), ("files", 0), ("skipped", 40 * 6 * 3)]);
}
