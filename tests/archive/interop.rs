//! GNU tar and bsdtar read ferry's archives, and ferry reads theirs, to identical trees.

use crate::common::compare::{assert_same_tree, assert_same_tree_with, Options};
use crate::common::{build, is_root, scratch, trees};
use crate::edit::{rename_in_headers, rename_in_index, USER_NAME};
use crate::{ferry, missing, pack, pack_and_unpack, peer};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The test tree: every kind, a sparse file with a hole in the middle, one that ends
/// in a hole and two that are all hole (one over 8 GiB), names that need pax records,
/// and (as root) devices and other owners.
fn tree(root: &Path) {
    trees::mixed(root);
    if is_root() {
        trees::root_extras(root);
    }
    build::sparse_file(
        &root.join("holey"),
        64 << 20,
        &[(0, b"head"), (40 << 20, b"middle")],
    );
    build::sparse_file(&root.join("tail-hole"), 8 << 20, &[(4096, &[7u8; 10_000])]);
    // All hole, and past 8 GiB (too big for ustar's size field): a fresh disk image.
    build::sparse_file(&root.join("all-hole"), (8 << 30) + 4096, &[]);
    build::sparse_file(&root.join("one-hole-byte"), 1, &[]);
    let long = "d".repeat(120);
    build::mkdirs(&root.join(&long));
    build::write(
        &root.join(&long).join("f".repeat(200)),
        &build::pattern(9, 70_000),
    );
    build::write(&root.join("caf\u{e9}"), b"utf-8 name");
    build::stamp_times(root);
}

/// The sparse files of [`tree`] came out of `extractor` with their holes: 64 MiB with 8
/// bytes of data, and 8 GiB of nothing, take (almost) no space.
fn assert_holes_kept(dst: &Path, extractor: &str) {
    for name in ["holey", "all-hole"] {
        assert!(
            build::allocated(&dst.join(name)) < 1 << 20,
            "{extractor} did not keep the holes of {name}"
        );
    }
}

/// An xattr whose name has the characters a pax key must escape (`=`, `%`). GNU tar
/// and ferry escape them alike; bsdtar 3.6 reads `SCHILY.xattr` names unescaped, so the
/// bsdtar test leaves this out.
fn odd_xattr(root: &Path) {
    build::set_xattr(&root.join("one"), "user.odd=name%25", b"value=with%");
}

/// Extractors set atimes to the time they run; everything else must match.
fn no_atime() -> Options {
    Options {
        skip_atime: true,
        ..Options::default()
    }
}

#[test]
fn ferry_round_trip_is_exact() {
    let s = scratch();
    tree(&s.src);
    odd_xattr(&s.src);
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &[]);
    let r = ferry(&[&"unpack", &"--json", &archive, &s.dst]);
    r.assert_ok();
    assert_same_tree(&s.src, &s.dst);
    assert_holes_kept(&s.dst, "ferry");
}

#[test]
fn gnu_tar_extracts_ferry_archives_exactly() {
    if missing("tar") {
        return;
    }
    let s = scratch();
    tree(&s.src);
    odd_xattr(&s.src);
    let archive = s.tmp.path().join("a.tar");
    pack(&s.src, &archive, &["--pax-times"]);
    build::mkdirs(&s.dst);
    peer(
        "tar",
        &[
            &"--xattrs",
            &"--xattrs-include=*",
            &"-C",
            &s.dst,
            &"-xf",
            &archive,
        ],
    );
    assert_same_tree_with(&s.src, &s.dst, &no_atime());
    assert_holes_kept(&s.dst, "GNU tar");
}

#[test]
fn bsdtar_extracts_ferry_archives_exactly() {
    if missing("bsdtar") {
        return;
    }
    let s = scratch();
    tree(&s.src);
    let archive = s.tmp.path().join("a.tar");
    pack(&s.src, &archive, &["--pax-times"]);
    build::mkdirs(&s.dst);
    peer("bsdtar", &[&"-xp", &"-C", &s.dst, &"-f", &archive]);
    assert_same_tree_with(
        &s.src,
        &s.dst,
        &Options {
            skip_root_meta: true,
            ..no_atime()
        },
    );
}

/// Packs `src` into `archive` with a peer: `program ARGS.. -cf ARCHIVE -C SRC .`.
fn peer_pack(program: &str, args: &[&str], src: &Path, archive: &Path) {
    let mut all: Vec<&dyn AsRef<std::ffi::OsStr>> = args
        .iter()
        .map(|a| a as &dyn AsRef<std::ffi::OsStr>)
        .collect();
    all.extend([
        &"-cf" as &dyn AsRef<std::ffi::OsStr>,
        &archive,
        &"-C",
        &src,
        &".",
    ]);
    peer(program, &all);
}

/// ferry unpacks what a peer packed (`args` before `-cf ARCHIVE -C SRC .`).
fn unpack_peer_archive(program: &str, args: &[&str], opts: &Options) {
    if missing(program) {
        return;
    }
    let s = scratch();
    tree(&s.src);
    let archive = s.tmp.path().join("peer.tar");
    peer_pack(program, args, &s.src, &archive);
    let r = ferry(&[&"unpack", &"--json", &archive, &s.dst]);
    r.assert_ok();
    assert_same_tree_with(&s.src, &s.dst, opts);
    assert_holes_kept(&s.dst, &format!("ferry, from {program} {args:?},"));
}

/// GNU tar's pax format with xattrs and the given sparse format version.
fn gnu_tar_pax(sparse_version: &str) {
    let version = format!("--sparse-version={sparse_version}");
    let args = [
        "--format=posix",
        "--sparse",
        version.as_str(),
        "--xattrs",
        "--xattrs-include=*",
    ];
    let opts = Options {
        skip_special_links: true,
        ..no_atime()
    };
    unpack_peer_archive("tar", &args, &opts);
}

#[test]
fn ferry_reads_gnu_tar_pax_with_sparse_1_0() {
    gnu_tar_pax("1.0");
}

#[test]
fn ferry_reads_gnu_tar_pax_with_sparse_0_1() {
    gnu_tar_pax("0.1");
}

#[test]
fn ferry_reads_gnu_tar_gnu_format_with_old_sparse() {
    // The GNU format keeps whole seconds and no xattrs.
    let opts = Options {
        skip_atime: true,
        mtime_seconds: true,
        skip_xattrs: true,
        skip_special_links: true,
        ..Options::default()
    };
    unpack_peer_archive("tar", &["--format=gnu", "--sparse"], &opts);
}

#[test]
fn ferry_reads_bsdtar_pax() {
    unpack_peer_archive("bsdtar", &["--format=pax", "--read-sparse"], &no_atime());
}

/// Extracts `archive` with `program` (`args` before `-C DST -xf ARCHIVE`) into a fresh
/// `dst` and checks that it holds `src` (by `opts`) and that the peer said nothing.
fn peer_extracts(program: &str, args: &[&str], archive: &Path, src: &Path, dst: &Path) {
    build::mkdirs(dst);
    let mut all: Vec<&dyn AsRef<std::ffi::OsStr>> = args
        .iter()
        .map(|a| a as &dyn AsRef<std::ffi::OsStr>)
        .collect();
    all.extend([&"-C" as &dyn AsRef<std::ffi::OsStr>, &dst, &"-xf", &archive]);
    peer(program, &all);
    let opts = Options {
        skip_root_meta: program == "bsdtar",
        ..no_atime()
    };
    assert_same_tree_with(src, dst, &opts);
}

/// Names that are not UTF-8, have newlines, are 255 bytes or make paths too long for
/// ustar's fields, as names, link targets and a sparse file's name: ferry, GNU tar and
/// bsdtar all extract ferry's archive of them exactly, and the peers without a word
/// (a pax `hdrcharset` record made GNU tar warn; a non-UTF-8 `linkpath` without one made
/// bsdtar warn and drop the link).
#[test]
fn odd_names_come_out_of_every_extractor_exactly_and_silently() {
    let s = scratch();
    trees::odd_names(&s.src);
    let archive = pack_and_unpack(&s, "odd.far");
    assert_same_tree(&s.src, &s.dst);
    let sparse = std::ffi::OsStr::from_bytes(b"sparse\xe9");
    for (program, args) in [
        ("tar", &["--xattrs", "--xattrs-include=*"][..]),
        ("bsdtar", &["-p"][..]),
    ] {
        if missing(program) {
            continue;
        }
        let dst = s.tmp.path().join(program);
        peer_extracts(program, args, &archive, &s.src, &dst);
        assert!(
            build::allocated(&dst.join(sparse)) < 512 << 10,
            "{program} lost the holes of a sparse file with a non-UTF-8 name"
        );
    }
}

/// ferry reads GNU tar's archives of the same names: raw bytes in pax records
/// (`--format=posix`) and GNU long names (`--format=gnu`).
#[test]
fn ferry_reads_gnu_tar_archives_of_odd_names() {
    if missing("tar") {
        return;
    }
    let s = scratch();
    trees::odd_names(&s.src);
    for (format, opts) in [
        ("--format=posix", no_atime()),
        (
            "--format=gnu",
            Options {
                skip_atime: true,
                mtime_seconds: true,
                skip_xattrs: true,
                ..Options::default()
            },
        ),
    ] {
        let archive = s.tmp.path().join(format!("{format}.tar"));
        let dst = s.tmp.path().join(format!("{format}.out"));
        let xattrs = format == "--format=posix";
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&format, &"--sparse"];
        if xattrs {
            args.extend([
                &"--xattrs" as &dyn AsRef<std::ffi::OsStr>,
                &"--xattrs-include=*",
            ]);
        }
        args.extend([
            &"-cf" as &dyn AsRef<std::ffi::OsStr>,
            &archive,
            &"-C",
            &s.src,
            &".",
        ]);
        peer("tar", &args);
        ferry(&[&"unpack", &archive, &dst]).assert_ok();
        assert_same_tree_with(&s.src, &dst, &opts);
    }
}

/// The owner of `path` (not following a symlink) as (uid, gid).
fn owner(path: &Path) -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).expect("stat");
    (m.uid(), m.gid())
}

/// Unpacks `archive` (holding `d` and `d/f`) into `dst`, once as it is and once with
/// `--numeric-owner` (into `dst` with a 2 appended), and checks both members' owners.
fn assert_unpacked_owners(archive: &Path, dst: &Path, by_name: (u32, u32), numeric: (u32, u32)) {
    let numeric_dst = dst.with_extension("2");
    for (flag, dst, want) in [
        (None, dst, by_name),
        (Some("--numeric-owner"), &numeric_dst, numeric),
    ] {
        let mut all: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"unpack"];
        if let Some(flag) = &flag {
            all.push(flag);
        }
        all.extend([&archive as &dyn AsRef<std::ffi::OsStr>, &dst]);
        ferry(&all).assert_ok();
        assert_eq!(owner(&dst.join("d")), want, "{flag:?}");
        assert_eq!(owner(&dst.join("d/f")), want, "{flag:?}");
    }
}

/// As root, members get the ids their user and group names have here where those
/// exist, as GNU tar gives them; `--numeric-owner` keeps the archive's numbers. Pack
/// writes the names, so GNU tar does the same with ferry's archives.
#[test]
fn owners_follow_their_names_unless_numbers_are_asked_for() {
    if crate::common::skip_unless_root() || missing("tar") {
        return;
    }
    const NOBODY: u32 = crate::common::nobody::NOBODY;
    let s = scratch();
    build::mkdirs(&s.src.join("d"));
    build::write(&s.src.join("d/f"), b"owned");
    // A foreign archive, read as a stream: nobody's number elsewhere is 12345.
    let foreign = s.tmp.path().join("foreign.tar");
    peer(
        "tar",
        &[
            &"-C",
            &s.src,
            &"--owner=nobody:12345",
            &"--group=root:54321",
            &"-cf",
            &foreign,
            &".",
        ],
    );
    assert_unpacked_owners(
        &foreign,
        &s.tmp.path().join("foreign"),
        (NOBODY, 0),
        (12345, 54321),
    );
    // A ferry archive of nobody's files, whose headers name nobody and root.
    build::chown(&s.src.join("d"), NOBODY, 0);
    build::chown(&s.src.join("d/f"), NOBODY, 0);
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &["--plain-index"]);
    let listed = std::process::Command::new("tar")
        .arg("-tvf")
        .arg(&archive)
        .output()
        .expect("run tar");
    assert!(String::from_utf8_lossy(&listed.stdout).contains("nobody/root"));
    // Headers that name another user than the index does are refused.
    let mut bytes = std::fs::read(&archive).expect("read");
    assert!(rename_in_headers(&mut bytes, USER_NAME, b"nobody", b"daemon") >= 2);
    std::fs::write(&archive, &bytes).expect("write");
    let r = ferry(&[&"unpack", &archive, &s.tmp.path().join("refused")]);
    r.assert_status(2);
    assert!(
        r.stderr
            .contains("index and tar header disagree: owner names"),
        "{r}"
    );
    // Made where that user is called daemon (1 here), in headers and index alike: read
    // through the index, members and directories get daemon's id.
    assert_eq!(
        rename_in_index(&mut bytes, b"nobody", b"daemon", usize::MAX),
        2
    );
    std::fs::write(&archive, &bytes).expect("write");
    assert!(ferry(&[&"ls", &"-l", &archive])
        .stdout
        .contains(" daemon/root "));
    assert_unpacked_owners(&archive, &s.tmp.path().join("ferry"), (1, 0), (NOBODY, 0));
}

/// An archive from before the index kept owner names (index version 1) is still read:
/// as root its members and directories get the ids their headers' names have here.
#[test]
fn owners_of_an_index_without_names_follow_their_headers() {
    if crate::common::skip_unless_root() {
        return;
    }
    let s = scratch();
    let mut bytes = std::fs::read(crate::INDEX_V1_ARCHIVE).expect("read the archive");
    // d and d/twin (and its other name d/f) belong to nobody, named so in their ustar
    // headers and the pax headers before them.
    assert_eq!(
        rename_in_headers(&mut bytes, USER_NAME, b"nobody", b"daemon"),
        6
    );
    let archive = s.tmp.path().join("v1.far");
    std::fs::write(&archive, &bytes).expect("write");
    const NOBODY: u32 = crate::common::nobody::NOBODY;
    assert_unpacked_owners(&archive, &s.tmp.path().join("ferry"), (1, 0), (NOBODY, 0));
}

/// GNU tar and bsdtar append (`-r`) over a ferry archive's end-of-archive blocks and
/// the start of its index, and leave its footer: ferry then reads the archive as they
/// do, as a plain tar, the appended member included, and says why.
#[test]
fn members_appended_by_tar_are_read_as_tar_reads_them() {
    for appender in ["tar", "bsdtar"] {
        if missing(appender) {
            continue;
        }
        let s = scratch();
        trees::mixed(&s.src);
        // Enough members that the index outlasts GNU tar's 10 KiB record, so that its
        // footer is left (a smaller archive loses its footer to -r and is a plain tar).
        build::mkdirs(&s.src.join("many"));
        for i in 0..300 {
            build::write(&s.src.join(format!("many/member-{i}")), b"m");
        }
        let archive = s.tmp.path().join("a.far");
        pack(&s.src, &archive, &["--pax-times"]);
        std::fs::write(s.tmp.path().join("appended"), b"added by tar -r\n").expect("write");
        peer(
            appender,
            &[&"-C", &s.tmp.path(), &"-rf", &archive, &"appended"],
        );
        let r = ferry(&[&"unpack", &archive, &s.dst]);
        r.assert_ok();
        assert!(
            r.warnings()
                .iter()
                .any(|w| w.contains("reading it as a plain tar")),
            "{appender}: {r}"
        );
        let added = std::fs::read(s.dst.join("appended")).expect("the appended member");
        assert_eq!(added, b"added by tar -r\n");
        std::fs::remove_file(s.dst.join("appended")).expect("remove");
        build::restore_times(&s.dst, &std::fs::metadata(&s.src).expect("stat"));
        assert_same_tree(&s.src, &s.dst);
        let listed = ferry(&[&"ls", &archive]);
        listed.assert_ok();
        assert!(listed.stdout.lines().any(|l| l == "appended"), "{listed}");
    }
}

/// The members `tar -tf` lists of `archive`, as `program` (GNU tar or bsdtar) lists
/// them, silently; or as `ferry ls` lists them, without an error.
fn members(program: &str, archive: &Path) -> Vec<String> {
    let out = if program == "ferry" {
        let r = ferry(&[&"ls", &archive]);
        r.assert_ok();
        r.stdout
    } else {
        let out = std::process::Command::new(program)
            .arg("-tf")
            .arg(archive)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stderr.is_empty(),
            "{program} -tf: {stderr}"
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    out.lines().map(str::to_owned).collect()
}

/// The files below `dir`, by path relative to it, with their contents.
fn files_below(dir: &Path, rel: &str, out: &mut std::collections::BTreeMap<String, Vec<u8>>) {
    for e in std::fs::read_dir(dir).expect("read_dir") {
        let e = e.expect("read_dir");
        let name = format!("{rel}{}", e.file_name().to_string_lossy());
        if e.file_type().expect("file type").is_dir() {
            files_below(&e.path(), &format!("{name}/"), out);
        } else {
            out.insert(name, std::fs::read(e.path()).expect("read"));
        }
    }
}

/// GNU tar 1.34 edits a ferry archive in place (`--delete`, also with `-b 1`, `-r`,
/// `-u`, one after another) and leaves an archive that GNU tar, bsdtar and ferry list
/// and extract with the members expected. (Issue 21: every file of 4 KiB or more had
/// a pax header of a whole number of blocks, after which `--delete` wrote a zero
/// block, ending the archive there; with `-b 1` it grew the file without end, which
/// the size limit here stops.)
#[test]
fn gnu_tar_edits_of_ferry_archives_leave_them_readable() {
    if missing("tar") || missing("bsdtar") {
        return;
    }
    let s = scratch();
    let data = [
        ("big", build::pattern(1, 100_000)),
        ("small", b"small\n".to_vec()),
        ("d/page", build::pattern(2, 4096)),
        ("d/pages", build::pattern(3, 3 * 4096 + 1)),
        ("d/tail", b"after the aligned ones\n".to_vec()),
        ("last", build::pattern(4, 8192)),
    ];
    build::mkdirs(&s.src.join("d"));
    for (name, bytes) in &data {
        build::write(&s.src.join(name), bytes);
    }
    build::set_times(&s.src.join("small"), build::ts(1, 0), build::ts(1, 0));
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &[]);
    // The members in the order pack wrote them, each file with its data.
    let mut expected: Vec<(String, Option<Vec<u8>>)> = members("tar", &archive)
        .into_iter()
        .map(|name| {
            let bytes = data
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, b)| b.clone());
            (name, bytes)
        })
        .collect();
    assert_eq!(
        expected.iter().filter(|(_, b)| b.is_some()).count(),
        data.len()
    );
    assert_eq!(expected.len(), data.len() + 2, "two directories");

    let tar = |args: &str| {
        let script = format!(r#"ulimit -f 20000 && cd "$1" && exec tar {args} -f "$2" "$3""#);
        let path = |p: &Path| p.as_os_str().to_owned();
        move |dir: &Path, archive: &Path, member: &str| {
            peer(
                "sh",
                &[&"-c", &script, &"sh", &path(dir), &path(archive), &member],
            )
        }
    };
    std::fs::write(s.tmp.path().join("appended"), b"by tar -r\n").expect("write");
    build::write(&s.src.join("small"), b"newer\n");
    let steps: [(&str, &Path, &str, Option<&[u8]>); 5] = [
        ("--delete", &s.src, "small", None),
        ("-b 1 --delete", &s.src, "d/page", None),
        ("-r", s.tmp.path(), "appended", Some(b"by tar -r\n")),
        ("-u", &s.src, "small", Some(b"newer\n")),
        ("--delete", &s.src, "big", None),
    ];
    for (i, (args, dir, member, added)) in steps.into_iter().enumerate() {
        tar(args)(dir, &archive, member);
        match added {
            Some(bytes) => expected.push((member.into(), Some(bytes.to_vec()))),
            None => expected.retain(|(name, _)| name != member),
        }
        let names: Vec<&str> = expected.iter().map(|(n, _)| n.as_str()).collect();
        let files: std::collections::BTreeMap<String, Vec<u8>> = expected
            .iter()
            .filter_map(|(n, b)| Some((n.clone(), b.clone()?)))
            .collect();
        for reader in ["tar", "bsdtar", "ferry"] {
            let what = format!("{reader}, after tar {args} {member}");
            assert_eq!(members(reader, &archive), names, "{what}");
            let out = s.tmp.path().join(format!("{reader}-{i}"));
            build::mkdirs(&out);
            if reader == "ferry" {
                ferry(&[&"unpack", &archive, &out]).assert_ok();
            } else {
                peer(reader, &[&"-C", &out, &"-xf", &archive]);
            }
            let mut got = std::collections::BTreeMap::new();
            files_below(&out, "", &mut got);
            assert!(got == files, "{what}: extracted {:?}", got.keys());
        }
    }
}

/// A name given twice (as `tar -r` appends a newer version) ends as its last member,
/// as GNU tar extracts it, whatever kinds the two have and whether DST was there: a
/// symlink after a file, a file after a directory, a directory's later metadata, a
/// file of the same size and mtime but other content; and a file named twice, which
/// tar stores as a hardlink to itself, is kept.
#[test]
fn names_given_twice_end_as_their_last_member() {
    if missing("tar") {
        return;
    }
    let s = scratch();
    let (src, archive) = (&s.src, s.tmp.path().join("t.tar"));
    let tar = |args: &[&dyn AsRef<std::ffi::OsStr>]| {
        let mut all: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"-C", src];
        all.extend_from_slice(args);
        peer("tar", &all);
    };
    build::write(&src.join("x"), b"one");
    build::mkdirs(&src.join("d"));
    build::write(&src.join("same"), b"aaa");
    build::write(&src.join("f"), b"data");
    build::hardlink(&src.join("f"), &src.join("g"));
    for i in 0..200 {
        build::mkdirs(&src.join(format!("dirs/d{i:03}")));
    }
    build::chmod(&src.join("dirs"), 0o755);
    let old = build::ts(1_000_000_000, 0);
    for i in 0..200 {
        let d = src.join(format!("dirs/d{i:03}"));
        build::chmod(&d, 0o700);
        build::set_times(&d, old, old);
    }
    build::set_times(&src.join("same"), old, old);
    tar(&[
        &"-cf", &archive, &"x", &"d", &"same", &"dirs", &"f", &"f", &"g",
    ]);

    std::fs::remove_file(src.join("x")).expect("rm x");
    build::symlink("target", &src.join("x"));
    std::fs::remove_dir(src.join("d")).expect("rmdir d");
    build::write(&src.join("d"), b"a file now");
    build::write(&src.join("same"), b"bbb");
    build::set_times(&src.join("same"), old, old);
    let new = build::ts(1_200_000_000, 0);
    for i in 0..200 {
        let d = src.join(format!("dirs/d{i:03}"));
        build::chmod(&d, 0o755);
        build::set_times(&d, new, new);
    }
    tar(&[&"-rf", &archive, &"x", &"d", &"same", &"dirs"]);

    let existing = s.tmp.path().join("existing");
    build::mkdirs(&existing);
    for dst in [&s.dst, &existing] {
        let r = ferry(&[&"unpack", &archive, dst]);
        r.assert_ok();
        assert_eq!(
            std::fs::read_link(dst.join("x")).expect("x"),
            Path::new("target")
        );
        assert_eq!(std::fs::read(dst.join("d")).expect("d"), b"a file now");
        assert_eq!(std::fs::read(dst.join("same")).expect("same"), b"bbb");
        assert_eq!(std::fs::read(dst.join("f")).expect("f"), b"data");
        let (f, g) = (dst.join("f"), dst.join("g"));
        assert_eq!(
            std::fs::metadata(&f).expect("f").ino(),
            std::fs::metadata(&g).expect("g").ino()
        );
        for i in 0..200 {
            let m = std::fs::metadata(dst.join(format!("dirs/d{i:03}"))).expect("dir");
            assert_eq!(
                (m.mode() & 0o7777, m.mtime()),
                (0o755, 1_200_000_000),
                "d{i:03}"
            );
        }
    }
}

/// A tree with ACLs under `root`: a file with named entries and a directory with a
/// default ACL, for ids no user or group here has, and (`named`) a file with entries
/// for root, which has a name everywhere.
fn acl_tree(root: &Path, named: bool) {
    // What `setfacl -m u:1234:rwx,g:55:r` makes of a 0644 file, and
    // `setfacl -d -m u:1234:rx` of a 0755 directory.
    const ACCESS: &str = "0200000001000600ffffffff02000700d204000004000400ffffffff\
                          080004003700000010000700ffffffff20000400ffffffff";
    const DEFAULT: &str = "0200000001000700ffffffff02000500d204000004000500ffffffff\
                           10000500ffffffff20000500ffffffff";
    // `setfacl -m u:root:r,g:root:rw` of a 0600 file.
    const ROOT: &str = "0200000001000600ffffffff020004000000000004000000ffffffff\
                        080006000000000010000600ffffffff20000000ffffffff";
    let bytes = |hex: &str| -> Vec<u8> {
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
            .collect()
    };
    build::mkdirs(&root.join("d"));
    build::write(&root.join("f"), b"with an ACL");
    build::write(&root.join("d/inherits"), b"made before the default ACL");
    build::set_xattr(&root.join("f"), "system.posix_acl_access", &bytes(ACCESS));
    build::set_xattr(&root.join("d"), "system.posix_acl_default", &bytes(DEFAULT));
    if named {
        build::write(&root.join("root's"), b"root named in its ACL");
        build::chmod(&root.join("root's"), 0o600);
        build::set_xattr(
            &root.join("root's"),
            "system.posix_acl_access",
            &bytes(ROOT),
        );
    }
    build::stamp_times(root);
}

/// GNU tar and bsdtar (`--acls`) store ACLs as text in `SCHILY.acl.*` records; ferry
/// sets them as the kernel's ACL attributes, so the tree comes out as it was packed.
#[test]
fn acls_gnu_tar_and_bsdtar_store_as_text_are_set() {
    // bsdtar writes a pax header only where one is needed, so nanoseconds only there.
    for (program, args, mtime_seconds) in [
        ("tar", &["--acls", "--format=posix"][..], false),
        ("bsdtar", &["--acls"][..], true),
    ] {
        if missing(program) {
            continue;
        }
        let s = scratch();
        acl_tree(&s.src, false);
        let archive = s.tmp.path().join("acls.tar");
        peer_pack(program, args, &s.src, &archive);
        let r = ferry(&[&"unpack", &archive, &s.dst]);
        r.assert_ok();
        assert!(r.stderr.is_empty(), "{program}: {r}");
        let opts = Options {
            mtime_seconds,
            ..no_atime()
        };
        assert_same_tree_with(&s.src, &s.dst, &opts);
    }
}

/// The ACLs in ferry's archives come out of GNU tar (`--acls`, alone or with every
/// xattr) and bsdtar (`-p`) as they went in: ferry writes them as text
/// (`SCHILY.acl.access`, `SCHILY.acl.default`), which both restore, beside the
/// attribute records, which neither restores as an ACL (issue 21). ferry reads such an
/// archive back the same, through its index and as a stream.
#[test]
fn acls_in_ferry_archives_come_out_of_gnu_tar_and_bsdtar() {
    let s = scratch();
    acl_tree(&s.src, true);
    let archive = s.tmp.path().join("acls.far");
    pack(&s.src, &archive, &["--pax-times"]);
    let gnu_all = ["--acls", "--xattrs", "--xattrs-include=*", "-xpf"];
    for (program, args) in [
        ("tar", &["--acls", "-xpf"][..]),
        ("tar", &gnu_all[..]),
        ("bsdtar", &["-xpf"][..]),
    ] {
        if missing(program) {
            continue;
        }
        let dst = s.tmp.path().join(format!("{program}{}", args.len()));
        build::mkdirs(&dst);
        let mut all: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"-C", &dst];
        all.extend(args.iter().map(|a| a as &dyn AsRef<std::ffi::OsStr>));
        all.push(&archive);
        peer(program, &all);
        let opts = Options {
            skip_root_meta: true,
            ..no_atime()
        };
        assert_same_tree_with(&s.src, &dst, &opts);
    }
    let r = ferry(&[&"unpack", &archive, &s.dst]);
    r.assert_ok();
    assert!(r.stderr.is_empty(), "{r}");
    assert_same_tree(&s.src, &s.dst);
    let streamed = s.tmp.path().join("streamed");
    let r = crate::ferry_stdin(&[&"unpack", &"-", &streamed], &archive);
    r.assert_ok();
    assert!(r.stderr.is_empty(), "{r}");
    assert_same_tree(&s.src, &streamed);
}
