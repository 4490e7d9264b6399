//! Hostile archives: members that try to escape the destination, corrupt indexes,
//! truncated and random input. Each must end in a clear error naming the path or the
//! offset, with nothing written outside the destination and no panic.

use crate::common::run::{run_python, Run};
use crate::common::{build, trees};
use crate::common::{scratch, Scratch};
use crate::edit::{rename_in_headers, replace_first, DEV_MINOR};
use crate::{ferry, ferry_stdin, pack};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Writes a tar with Python's tarfile module: `members` are (name, type, linkname,
/// data) with type one of "file", "dir", "symlink", "hardlink".
fn python_tar(path: &Path, members: &[(&str, &str, &str, &str)]) {
    let mut script = String::from(
        "import tarfile, io, sys\nt = tarfile.open(sys.argv[1], 'w', format=tarfile.PAX_FORMAT)\n",
    );
    for (name, kind, link, data) in members {
        let ty = match *kind {
            "file" => "tarfile.REGTYPE",
            "dir" => "tarfile.DIRTYPE",
            "symlink" => "tarfile.SYMTYPE",
            _ => "tarfile.LNKTYPE",
        };
        script.push_str(&format!(
            "i = tarfile.TarInfo({name:?}); i.type = {ty}; i.linkname = {link:?}; d = {data:?}.encode(); i.size = len(d) if i.type == tarfile.REGTYPE else 0; i.mode = 0o755\nt.addfile(i, io.BytesIO(d) if i.size else None)\n"
        ));
    }
    script.push_str("t.close()\n");
    run_python(&script, path);
}

/// Writes `members` (as [`python_tar`] takes them) to `name` in the scratch area and
/// unpacks that into its destination.
fn unpack_members(s: &Scratch, name: &str, members: &[(&str, &str, &str, &str)]) -> Run {
    let archive = s.tmp.path().join(name);
    python_tar(&archive, members);
    ferry(&[&"unpack", &archive, &s.dst])
}

/// Every path under `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("list").filter_map(Result::ok) {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p.clone());
            }
            out.push(
                p.strip_prefix(dir)
                    .expect("inside")
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
    out.sort();
    out
}

#[test]
fn members_cannot_escape_the_destination() {
    let s = scratch();
    let outside = s.tmp.path().join("outside");
    std::fs::create_dir(&outside).expect("mkdir");
    std::fs::write(outside.join("target"), b"secret").expect("write");
    // So that `deep/link/sub` exists when the link is followed.
    std::fs::create_dir(outside.join("sub")).expect("mkdir");
    let archive = s.tmp.path().join("evil.tar");
    let out_abs = outside.to_string_lossy().into_owned();
    python_tar(
        &archive,
        &[
            ("../escape", "file", "", "x"),
            ("ok/../../escape2", "file", "", "x"),
            ("/absolute/file", "file", "", "kept inside"),
            ("abs-link", "symlink", &out_abs, ""),
            ("abs-link/through", "file", "", "must not land outside"),
            ("rel-link", "symlink", "../outside", ""),
            ("rel-link/through", "file", "", "must not land outside"),
            // Deeper: directories below a symlink are opened in one call when they
            // exist, which must refuse the symlink on the way as the walk does.
            ("deep/link", "symlink", &out_abs, ""),
            ("deep/link/sub/through", "file", "", "must not land outside"),
            ("hard-out", "hardlink", "../outside/target", ""),
            ("hard-abs", "hardlink", &format!("{out_abs}/target"), ""),
            ("good", "file", "", "fine"),
        ],
    );
    let before = listing(s.tmp.path());
    let r = ferry(&[&"unpack", &archive, &s.dst]);
    r.assert_status(1);
    let errors = r.errors().join("\n");
    for named in [
        "../escape",
        "escape2",
        "abs-link/through: unpack: not extracted through abs-link, a symlink to ",
        "rel-link/through: unpack: not extracted through rel-link, a symlink to ../outside ",
        "deep/link/sub/through: unpack: not extracted through deep/link, a symlink to ",
        "hard-out",
    ] {
        assert!(errors.contains(named), "no error names {named}:\n{errors}");
    }
    // The links stay as the archive made them; only the members below them fail.
    for link in ["abs-link", "rel-link", "deep/link"] {
        assert!(std::fs::symlink_metadata(s.dst.join(link))
            .expect("stat")
            .is_symlink());
    }
    assert_eq!(
        std::fs::read(outside.join("target")).expect("read"),
        b"secret"
    );
    assert_eq!(
        listing(&outside),
        vec!["sub".to_string(), "target".to_string()],
        "something was written outside"
    );
    let after: Vec<String> = listing(s.tmp.path())
        .into_iter()
        .filter(|p| !p.starts_with("dst"))
        .collect();
    assert_eq!(
        after,
        before
            .into_iter()
            .filter(|p| !p.starts_with("dst"))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        std::fs::read(s.dst.join("absolute/file")).expect("read"),
        b"kept inside"
    );
    assert_eq!(std::fs::read(s.dst.join("good")).expect("read"), b"fine");
    // The hardlink to an absolute path lands on a file inside the destination, if any:
    // never on the file outside.
    if let Ok(m) = std::fs::metadata(s.dst.join("hard-abs")) {
        use std::os::unix::fs::MetadataExt;
        assert_ne!(
            m.ino(),
            std::fs::metadata(outside.join("target"))
                .expect("stat")
                .ino()
        );
    }
}

/// A path given twice ends as the last member says, as with tar, even in a directory
/// this unpack made (where nothing is looked up before creating); a directory member
/// after files in it keeps them, and one after a file (or symlink) of its name replaces
/// it. (A member below a symlink that no directory member replaced is refused:
/// `members_cannot_escape_the_destination`,
/// `a_member_below_a_symlink_the_archive_made_is_refused_in_any_destination`.)
#[test]
fn a_path_given_twice_ends_as_the_last_member() {
    let s = scratch();
    let r = unpack_members(
        &s,
        "twice.tar",
        &[
            ("d/f", "file", "", "first"),
            ("d/f", "file", "", "second, longer"),
            ("d/l", "symlink", "f", ""),
            ("d/l", "file", "", "a file now"),
            ("d", "dir", "", ""),
            ("d/sub/g", "file", "", "deep"),
            ("d/f2", "file", "", "other"),
            ("was-file", "file", "", "replaced by a directory"),
            ("was-file", "dir", "", ""),
            ("was-file/in", "file", "", "inside"),
            ("was-link", "symlink", ".", ""),
            ("was-link", "dir", "", ""),
            ("was-link/in", "file", "", "inside, not through the link"),
        ],
    );
    r.assert_ok();
    let read = |p: &str| std::fs::read(s.dst.join(p)).expect("read");
    assert_eq!(read("d/f"), b"second, longer");
    assert_eq!(read("d/l"), b"a file now");
    assert!(std::fs::symlink_metadata(s.dst.join("d/l"))
        .expect("stat")
        .is_file());
    assert_eq!(read("d/sub/g"), b"deep");
    assert_eq!(read("d/f2"), b"other");
    assert_eq!(read("was-file/in"), b"inside");
    assert_eq!(read("was-link/in"), b"inside, not through the link");
    assert!(std::fs::symlink_metadata(s.dst.join("was-link"))
        .expect("stat")
        .is_dir());
    assert!(!s.dst.join("in").exists(), "written through the symlink");
}

/// Issue #21, item 3: a member below a symlink an earlier member made (to a directory
/// inside the destination, or to one elsewhere) is refused, naming the member and the
/// symlink, as bsdtar refuses it ("Cannot extract through symlink"); GNU tar writes
/// through the first. Into a fresh destination, one that was there already, and again
/// over what the first run left (where the symlink is up to date), from the file and
/// from a stream; from Python's tarfile and from GNU tar with `tar -r`. The symlinks
/// stay, nothing lands where they point, and the members beside them are unpacked.
/// (Into an existing destination the members used to replace the symlink with a
/// directory and exit 0.)
#[test]
fn a_member_below_a_symlink_the_archive_made_is_refused_in_any_destination() {
    let s = scratch();
    let elsewhere = s.tmp.path().join("elsewhere");
    build::mkdirs(&elsewhere);
    let elsewhere_abs = elsewhere.to_string_lossy().into_owned();
    let python = s.tmp.path().join("python.tar");
    python_tar(
        &python,
        &[
            ("sub", "dir", "", ""),
            ("good", "file", "", "fine"),
            ("lnk", "symlink", "sub", ""),
            ("lnk/f", "file", "", "through the link"),
            ("lnk/h", "hardlink", "good", ""),
            ("lnk/d", "dir", "", ""),
            ("far", "symlink", &elsewhere_abs, ""),
            ("far/f", "file", "", "through the link"),
        ],
    );
    let mut archives = vec![(python, vec!["lnk/f", "lnk/h", "lnk/d", "far/f"])];
    if !crate::missing("tar") {
        // GNU tar: `sub/` and `lnk -> sub`, then `lnk/f` appended from a tree where
        // `lnk` is a directory.
        let made = s.tmp.path().join("by-gnu-tar");
        build::mkdirs(&made.join("sub"));
        build::symlink("sub", &made.join("lnk"));
        let gnu = s.tmp.path().join("gnu.tar");
        let tar = |args: &[&str]| {
            let ok = Command::new("tar")
                .current_dir(&made)
                .args(args)
                .status()
                .is_ok_and(|st| st.success());
            assert!(ok, "tar {args:?}");
        };
        tar(&["-cf", &gnu.to_string_lossy(), "sub", "lnk"]);
        std::fs::remove_file(made.join("lnk")).expect("rm lnk");
        build::mkdirs(&made.join("lnk"));
        build::write(&made.join("lnk/f"), b"through the link");
        tar(&["-rf", &gnu.to_string_lossy(), "lnk/f"]);
        archives.push((gnu, vec!["lnk/f"]));
    }
    for (archive, below) in &archives {
        let name = archive.file_stem().expect("stem").to_string_lossy();
        for (how, existing) in [("fresh", false), ("existing", true)] {
            for streamed in [false, true] {
                let dst = s.tmp.path().join(format!("{name}-{how}-{streamed}"));
                if existing {
                    build::mkdirs(&dst);
                }
                for round in ["first", "again"] {
                    let r = match streamed {
                        false => ferry(&[&"unpack", archive, &dst]),
                        true => ferry_stdin(&[&"unpack", &"-", &dst], archive),
                    };
                    let shown = format!("{} into {how} {} ({round})", name, dst.display());
                    r.assert_status(1);
                    let errors = r.errors();
                    assert_eq!(errors.len(), below.len(), "{shown}: {r}");
                    for member in below {
                        let (link, to) = match member.starts_with("far") {
                            true => ("far", elsewhere_abs.as_str()),
                            false => ("lnk", "sub"),
                        };
                        let line = format!(
                            "ferry: {}/{member}: unpack: not extracted through {link}, a \
                             symlink to {to} that an earlier member made",
                            dst.display()
                        );
                        assert!(errors.contains(&line.as_str()), "{shown}: {line}\n{r}");
                    }
                    let is_link = |p: &str| {
                        std::fs::symlink_metadata(dst.join(p)).is_ok_and(|m| m.is_symlink())
                    };
                    assert!(is_link("lnk"), "{shown}: lnk replaced");
                    assert_eq!(listing(&dst.join("sub")), Vec::<String>::new(), "{shown}");
                    if below.contains(&"far/f") {
                        assert!(is_link("far"), "{shown}: far replaced");
                        let good = std::fs::read(dst.join("good")).expect("good");
                        assert_eq!(good, b"fine", "{shown}");
                    }
                }
            }
        }
    }
    assert_eq!(
        listing(&elsewhere),
        Vec::<String>::new(),
        "written elsewhere"
    );
}

/// A hardlink whose target is missing (named later, or never) fails with an error that
/// names the link and its target; the rest is unpacked.
#[test]
fn a_hardlink_to_nothing_is_an_error_naming_the_link() {
    let s = scratch();
    let r = unpack_members(
        &s,
        "links.tar",
        &[
            ("early", "hardlink", "later", ""),
            ("into-nothing", "hardlink", "no/such/file", ""),
            ("later", "file", "", "data"),
        ],
    );
    r.assert_status(1);
    let dst = s.dst.display();
    let mut errors = r.errors();
    errors.sort_unstable();
    assert_eq!(
        errors,
        [
            format!("ferry: {dst}/early: link: target later: No such file or directory (os error 2)"),
            format!("ferry: {dst}/into-nothing: link: target no/such/file: No such file or directory (os error 2)"),
        ],
        "{r}"
    );
    assert_eq!(std::fs::read(s.dst.join("later")).expect("read"), b"data");
}

/// A packed mixed tree (its index stored plain, to be edited) and its bytes.
fn packed(s: &crate::common::Scratch) -> (std::path::PathBuf, Vec<u8>) {
    trees::mixed(&s.src);
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &["--plain-index"]);
    let bytes = std::fs::read(&archive).expect("read");
    (archive, bytes)
}

/// The footer of the ferry archive `bytes`.
fn footer_of(bytes: &[u8]) -> ferry_archive::index::Footer {
    let n = bytes.len() as u64;
    ferry_archive::index::Footer::parse(
        &bytes[(n - ferry_archive::index::FOOTER_LEN) as usize..],
        n,
    )
    .expect("a valid footer")
    .expect("a ferry archive")
}

/// Runs each command on `archive`: none may panic (exit 101) and each must fail with
/// exit status 2 and an error mentioning `expect`.
fn all_refuse(archive: &Path, dst: &Path, expect: &str) {
    for args in [vec!["ls"], vec!["cat"], vec!["unpack"]] {
        let mut cmd = Command::new(crate::common::run::FERRY);
        cmd.args(&args).arg(archive);
        match args[0] {
            "unpack" => cmd.arg(dst),
            "cat" => cmd.arg("size0"),
            _ => &mut cmd,
        };
        let r = crate::common::run::run(cmd);
        assert_ne!(r.status, 101, "{args:?} panicked:\n{}", r.stderr);
        assert_eq!(
            r.status, 2,
            "{args:?} on a bad archive: status {}, stderr:\n{}",
            r.status, r.stderr
        );
        assert!(
            r.stderr.contains(expect),
            "{args:?}: expected {expect:?} in:\n{}",
            r.stderr
        );
        for line in r.stderr.lines() {
            assert!(!says_twice(line), "{args:?}: said twice: {line}");
        }
    }
}

/// Whether `line` ends in the same message twice (`A: B: A: B`), as an error wrapped
/// in one that repeats it printed.
fn says_twice(line: &str) -> bool {
    line.match_indices(": ")
        .any(|(i, _)| line[..i].ends_with(&line[i + 2..]))
}

#[test]
fn what_is_not_an_archive_is_named_and_nothing_is_made() {
    let s = scratch();
    let empty = s.tmp.path().join("empty.tar");
    std::fs::write(&empty, b"").expect("write");
    let text = s.tmp.path().join("notes.txt");
    std::fs::write(&text, "not an archive\n".repeat(100)).expect("write");
    for (archive, why) in [
        (&empty, "not a tar archive: the input is empty"),
        (&text, "not a tar archive: no tar header at its start"),
    ] {
        let said = format!("{}: archive offset 0: {why}", archive.display());
        all_refuse(archive, &s.dst, &said);
        // From standard input too.
        let out = Command::new(crate::common::run::FERRY)
            .arg("unpack")
            .arg("-")
            .arg(&s.dst)
            .stdin(std::fs::File::open(archive).expect("open"))
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains(why));
        assert!(
            !s.dst.exists(),
            "unpack of {} made its destination",
            archive.display()
        );
    }
}

/// lz4 and lzip input (read since issue 33) that is damaged from its first bytes: refused,
/// naming the codec and the offset, and nothing made.
#[test]
fn damaged_lz4_and_lzip_input_is_refused_naming_the_codec() {
    let s = scratch();
    for (name, magic, said) in [
        (
            "a.tar.lz4",
            &b"\x04\x22\x4d\x18\x64\x40"[..],
            "lz4 data: frame header checksum mismatch, near compressed offset 7",
        ),
        // Version 2 does not exist.
        ("a.tar.lz", b"LZIP\x02\x0c", "lzip data: "),
    ] {
        let archive = s.tmp.path().join(name);
        std::fs::write(&archive, [magic, &[0u8; 600][..]].concat()).expect("write");
        all_refuse(&archive, &s.dst, said);
        assert!(!s.dst.exists(), "{name}: unpack made its destination");
    }
}

/// An xz stream whose block names the largest dictionary the format allows (4 GiB):
/// the decoder is not given that much memory; the error says what to do instead.
#[test]
fn xz_input_asking_for_gigabytes_of_memory_is_refused() {
    let s = scratch();
    let archive = s.tmp.path().join("big-dictionary.tar.xz");
    let script = r#"
import io, lzma, struct, sys, tarfile, zlib
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as t:
    info = tarfile.TarInfo("f"); info.size = 6
    t.addfile(info, io.BytesIO(b"hello\n"))
b = bytearray(lzma.compress(buf.getvalue(), format=lzma.FORMAT_XZ,
                            filters=[{"id": lzma.FILTER_LZMA2, "dict_size": 1 << 20}]))
# The first block header, after the 12-byte stream header: its LZMA2 filter's one
# property byte is the dictionary size; 40 names 4 GiB - 1. Then mend the CRC32.
size = (b[12] + 1) * 4
at = bytes(b[12:12 + size]).index(b"\x21\x01") + 12 + 2
b[at] = 40
b[12 + size - 4:12 + size] = struct.pack("<I", zlib.crc32(bytes(b[12:12 + size - 4])))
open(sys.argv[1], "wb").write(b)
"#;
    run_python(script, &archive);
    let r = ferry(&[&"unpack", &archive, &s.dst]);
    r.assert_status(2);
    assert!(
        r.stderr.contains(
            "xz data: it needs more than the 128 MiB of memory ferry gives its decoder: \
             decompress it first (`xz -dc`), and pipe that in as -"
        ),
        "{r}"
    );
}

/// A byte changed in the index's tree table: ls and unpack (which check the whole
/// index) and cat (which checks the pages of the table it reads) refuse it. A byte
/// changed among the index's entries, which cat's lookup does not read: ls and unpack
/// refuse it, cat prints the member, found and checked through the table.
#[test]
fn a_corrupt_index_is_refused() {
    let s = scratch();
    let (archive, intact) = packed(&s);
    let tree = ferry_archive::read::archive::embedded_tree(
        &std::fs::File::open(&archive).expect("open"),
        intact.len() as u64,
    )
    .expect("read")
    .expect("a tree table");
    let mut bytes = intact.clone();
    bytes[(tree.at + 50) as usize] ^= 0x55;
    std::fs::write(&archive, &bytes).expect("write");
    all_refuse(&archive, &s.dst, "index");
    let footer = footer_of(&intact);
    let mut bytes = intact.clone();
    bytes[(footer.index_offset + 30) as usize] ^= 0x55;
    std::fs::write(&archive, &bytes).expect("write");
    for args in [vec!["ls"], vec!["unpack"]] {
        let mut cmd = Command::new(crate::common::run::FERRY);
        cmd.args(&args).arg(&archive);
        if args[0] == "unpack" {
            cmd.arg(s.tmp.path().join("entries"));
        }
        let r = crate::common::run::run(cmd);
        assert_eq!(r.status, 2, "{args:?}: {r}");
        assert!(r.stderr.contains("index"), "{args:?}: {r}");
    }
    for name in ["a/b/c/d/deep.txt", "a/b/hard3", "one"] {
        let r = ferry(&[&"cat", &archive, &name]);
        r.assert_ok();
        let want = std::fs::read_to_string(s.src.join(name)).expect("read");
        assert_eq!(r.stdout, want, "{name}");
    }
}

#[test]
fn truncated_archives_are_errors_naming_the_offset() {
    let s = scratch();
    let (archive, bytes) = packed(&s);
    // Cut inside the tar data: the index is gone, the tar ends early.
    std::fs::write(&archive, &bytes[..bytes.len() / 2 + 100]).expect("write");
    let r = ferry(&[&"unpack", &archive, &s.dst]);
    assert_eq!(r.status, 2, "{}", r.stderr);
    assert!(r.stderr.contains("offset"), "{}", r.stderr);
}

/// A stream that ends or breaks inside a member's data cannot be read on: one error
/// line, naming the member and the offset, and exit status 2 (not a member's error and
/// then the archive's, nor an unpack that carries on).
#[test]
fn a_stream_broken_inside_a_member_is_one_error_naming_it() {
    let s = scratch();
    build::write(&s.src.join("big"), &build::pattern(9, 1 << 20));
    build::write(&s.src.join("later"), b"after the break");
    let archive = s.tmp.path().join("a.tar");
    crate::peer("tar", &[&"-C", &s.src, &"-cf", &archive, &"big", &"later"]);
    let bytes = std::fs::read(&archive).expect("read");
    let cut = &bytes[..600_000];
    let gz = s.tmp.path().join("a.tar.gz");
    let mut gzip = Command::new("gzip")
        .args(["-c", "-1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run gzip");
    let mut input = gzip.stdin.take().expect("stdin");
    let whole = bytes.clone();
    let feeder = std::thread::spawn(move || input.write_all(&whole));
    let zipped = gzip.wait_with_output().expect("gzip").stdout;
    feeder.join().expect("feed").expect("write to gzip");
    // Cut inside big's data: the gzip stream ends early, and so does a plain one.
    std::fs::write(&gz, &zipped[..zipped.len() / 2]).expect("write");
    let plain = s.tmp.path().join("cut.tar");
    std::fs::write(&plain, cut).expect("write");
    for (archive, at) in [
        (&plain, "archive offset 600000: unexpected end of archive"),
        (&gz, "read error"),
    ] {
        for from_stdin in [false, true] {
            let dst = s.tmp.path().join("out");
            let mut cmd = Command::new(crate::common::run::FERRY);
            cmd.arg("unpack");
            if from_stdin {
                cmd.arg("-")
                    .stdin(std::fs::File::open(archive).expect("open"));
            } else {
                cmd.arg(archive);
            }
            cmd.arg(&dst);
            let r = crate::common::run::run(cmd);
            r.assert_status(2);
            let shown = if from_stdin {
                "-".into()
            } else {
                archive.display().to_string()
            };
            let errors = r.errors();
            assert_eq!(errors.len(), 1, "{r}");
            assert!(
                errors[0].starts_with(&format!("ferry: {shown}: member big: archive offset "))
                    && errors[0].contains(at),
                "{r}"
            );
            assert!(!dst.join("later").exists(), "{r}");
            std::fs::remove_dir_all(&dst).expect("clean up");
        }
    }
}

#[test]
fn random_bytes_are_refused_without_a_panic() {
    let s = scratch();
    let archive = s.tmp.path().join("noise");
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let noise: Vec<u8> = (0..64 * 1024)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    std::fs::write(&archive, noise).expect("write");
    all_refuse(&archive, &s.dst, "offset");
}

#[test]
fn an_index_that_disagrees_with_the_tar_data_is_refused() {
    let s = scratch();
    let (archive, mut bytes) = packed(&s);
    // Change a name in a tar header (and its checksum stays wrong): the index still
    // names the old path, so the member check must catch the header.
    let at = bytes
        .windows(5)
        .position(|w| w == b"size0")
        .expect("a member name in a header");
    bytes[at] = b'S';
    std::fs::write(&archive, &bytes).expect("write");
    let r = ferry(&[&"cat", &archive, &"size0"]);
    assert_eq!(r.status, 2, "{}", r.stderr);
    assert!(r.stderr.contains("offset"), "{}", r.stderr);
}

#[test]
fn a_bad_header_midway_through_a_large_archive_ends_the_unpack() {
    // 80 runs of members (40 directories of 256 files, runs of at most 128) with two
    // workers: far more than the queue to the workers holds, so the walk would wait
    // forever if the workers stopped taking runs after the failure.
    let s = scratch();
    for d in 0..40 {
        let dir = s.src.join(format!("d{d:02}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        for f in 0..256 {
            std::fs::write(dir.join(format!("f{f:03}")), format!("{d} {f}")).expect("write");
        }
    }
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &["--plain-index"]);
    let mut bytes = std::fs::read(&archive).expect("read");
    // The first directory in archive order: the failure comes early, with most runs
    // still to hand out.
    let at = bytes
        .windows(5)
        .position(|w| w == b"/f100")
        .expect("a member's name in its header");
    bytes[at + 1] = b'F'; // the header's checksum no longer matches
    std::fs::write(&archive, &bytes).expect("write");
    let mut child = Command::new(crate::common::run::FERRY)
        .args(["unpack", "-j", "2"])
        .arg(&archive)
        .arg(&s.dst)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn ferry");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("unpack did not end after a bad header");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("read stderr");
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("offset"), "{stderr}");
}

/// A change made to an archive's bytes.
type Edit = fn(&mut Vec<u8>);

/// Turns the padding record (`comment=...`) of the first member that has one into an
/// ACL record of the same length, which a stream reader would apply.
fn comment_into_acl(b: &mut [u8]) {
    let key = b" comment=";
    let at = b
        .windows(key.len())
        .position(|w| w == key)
        .expect("a comment record")
        + 1;
    let end = at
        + b[at..]
            .iter()
            .position(|&c| c == b'\n')
            .expect("record end");
    let mut record = b"SCHILY.acl.access=user::rw-,group::r--,other::r--,".to_vec();
    assert!(
        record.len() <= end - at,
        "the padding is too short to hold an ACL"
    );
    record.resize(end - at, b',');
    b[at..end].copy_from_slice(&record);
}

/// A member is used only where its index entry says what its tar headers say about
/// everything a stream reader would set: the access time, an xattr, a device number,
/// an ACL. The headers are changed here (each in turn), so the index says what they
/// said.
#[test]
fn an_index_that_disagrees_on_times_xattrs_devices_or_acls_is_refused() {
    let s = scratch();
    build::write(&s.src.join("f"), b"data");
    // Large enough that its data is aligned, with a padding record in its pax header.
    build::write(&s.src.join("aligned"), &build::pattern(7, 64 * 1024));
    build::set_xattr(&s.src.join("f"), "user.k", b"vvv");
    build::set_times(
        &s.src.join("f"),
        build::ts(1_111_111_111, 0),
        build::ts(1_000_000_000, 0),
    );
    let root = crate::common::is_root();
    if root {
        build::device(
            &s.src.join("null"),
            rustix::fs::FileType::CharacterDevice,
            1,
            3,
        );
    }
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &["--plain-index"]);
    let packed = std::fs::read(&archive).expect("read");
    let mut edits: Vec<(&str, Edit)> = vec![
        ("access time", |b| {
            replace_first(b, b"atime=1111111111", b"atime=1111111112")
        }),
        ("xattrs", |b| replace_first(b, b"user.k=vvv", b"user.k=www")),
        ("ACLs", |b| comment_into_acl(b)),
    ];
    if root {
        // The device's ustar header, and the header of the pax header before it.
        edits.push(("device number", |b| {
            assert!(rename_in_headers(b, DEV_MINOR, b"0000003", b"0000005") >= 1);
        }));
    }
    for (what, edit) in edits {
        let mut bytes = packed.clone();
        edit(&mut bytes);
        std::fs::write(&archive, &bytes).expect("write");
        let dst = s.tmp.path().join(what.replace(' ', "-"));
        let r = ferry(&[&"unpack", &archive, &dst]);
        r.assert_status(2);
        let want = format!("index and tar header disagree: {what}");
        assert_eq!(r.errors().len(), 1, "{r}");
        assert!(r.errors()[0].contains(&want), "{r}");
    }
}

/// Member data changed after packing with `--hash` (its headers and index intact):
/// `unpack --verify` finds each file that differs from the hash recorded for it, a
/// small one read with its header and a large one moved on its own alike, naming it;
/// `cat` prints it and then fails, naming it. `unpack` checks each file it writes
/// (issue 32), with or without `--verify`, and removes those that differ.
#[test]
fn data_that_differs_from_its_recorded_hash_is_found_by_verify_and_cat() {
    let s = scratch();
    let archive = damaged_after_packing(&s);
    for verify in [false, true] {
        let dst = s.tmp.path().join(format!("out-{verify}"));
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"unpack"];
        if verify {
            args.push(&"--verify");
        }
        args.push(&archive);
        args.push(&dst);
        let r = ferry(&args);
        r.assert_status(1);
        let mut errors = r.errors();
        errors.sort_unstable();
        let shown = dst.display();
        let why = "verify: content differs from the hash recorded in the source (damaged \
                   after packing, or on the way); the file is not kept";
        assert_eq!(
            errors,
            [
                format!("ferry: {shown}/large: {why}"),
                format!("ferry: {shown}/small: {why}"),
            ],
            "{r}"
        );
        assert!(!dst.join("small").exists() && !dst.join("large").exists());
        assert_eq!(std::fs::read(dst.join("intact")).unwrap(), b"not changed");
    }
    for name in ["small", "large"] {
        let r = ferry(&[&"cat", &archive, &name]);
        assert_eq!(r.status, 2, "{r}");
        assert!(
            r.stderr.contains(&format!(
                "{name}: content differs from the hash recorded when it was packed"
            )),
            "{r}"
        );
    }
    let r = ferry(&[&"cat", &archive, &"intact"]);
    r.assert_ok();
    assert_eq!(r.stdout, "not changed");
}

/// Packs `small` (3,000 bytes), `large` (300,000) and `intact` with `--hash`, then flips
/// one data byte of `small` and one of `large` in the archive, which it returns.
fn damaged_after_packing(s: &Scratch) -> std::path::PathBuf {
    let (small, large) = (build::pattern(1, 3000), build::pattern(2, 300_000));
    build::write(&s.src.join("small"), &small);
    build::write(&s.src.join("large"), &large);
    build::write(&s.src.join("intact"), b"not changed");
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &["--hash", "--plain-index"]);
    let mut bytes = std::fs::read(&archive).expect("read");
    for data in [&small, &large] {
        let at = bytes
            .windows(64)
            .position(|w| w == &data[1000..1064])
            .expect("member data");
        bytes[at] ^= 1;
    }
    std::fs::write(&archive, &bytes).expect("write");
    archive
}

/// Read as a stream (a pipe, or compressed), a ferry archive's index arrives after
/// all the data: each file unpacked is then checked against the hash the index
/// records, and one whose data was damaged on the way is an error naming the file
/// written (exit 1), with or without `--verify`; the intact member is there. `cat -`
/// prints a damaged member and fails naming it (exit 2). The same archive compressed
/// after the damage (gzip's own check passes) is caught the same way.
#[test]
fn a_stream_whose_data_differs_from_the_index_hashes_is_an_error_naming_the_files() {
    let s = scratch();
    let archive = damaged_after_packing(&s);
    let gz = s.tmp.path().join("a.far.gz");
    let out = Command::new("gzip")
        .arg("-c")
        .arg(&archive)
        .output()
        .expect("run gzip");
    std::fs::write(&gz, out.stdout).expect("write");
    for (i, input) in [&archive, &gz].into_iter().enumerate() {
        let dst = s.tmp.path().join(format!("from-stream-{i}"));
        let r = ferry_stdin(&[&"unpack", &"-", &dst], input);
        r.assert_status(1);
        let mut errors = r.errors();
        errors.sort_unstable();
        let shown = dst.display();
        let differs = "verify: content differs from the hash the archive's index records \
                       for it (damaged after packing, or on the way)";
        assert_eq!(
            errors,
            [
                format!("ferry: {shown}/large: {differs}"),
                format!("ferry: {shown}/small: {differs}"),
            ],
            "{r}"
        );
        assert_eq!(
            std::fs::read(dst.join("intact")).expect("read"),
            b"not changed"
        );
        for name in ["small", "large"] {
            let r = ferry_stdin(&[&"cat", &"-", &name], input);
            assert_eq!(r.status, 2, "{r}");
            assert!(
                r.stderr
                    .contains(&format!("-: member {name}: content differs")),
                "{r}"
            );
        }
        let r = ferry_stdin(&[&"cat", &"-", &"intact"], input);
        r.assert_ok();
        assert_eq!(r.stdout, "not changed");
    }
}

/// An index that arrives damaged after a streamed archive cannot vouch for the data:
/// that is an error (exit 2) saying what is wrong with it, after the members are
/// unpacked. A tail that claims to be an index but is longer than any index of that
/// tar data could be is refused without being spooled whole.
#[test]
fn a_damaged_index_after_a_stream_is_an_error() {
    let s = scratch();
    build::write(&s.src.join("f"), b"some data");
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &["--plain-index"]);
    let mut bytes = std::fs::read(&archive).expect("read");
    let index_at = bytes
        .windows(8)
        .rposition(|w| w == b"FERRYIDX")
        .expect("index");
    bytes[index_at + 40] ^= 1;
    std::fs::write(&archive, &bytes).expect("write");
    let r = ferry_stdin(&[&"unpack", &"-", &s.dst], &archive);
    r.assert_status(2);
    assert!(r.stderr.contains("bad index"), "{r}");
    assert_eq!(std::fs::read(s.dst.join("f")).expect("read"), b"some data");

    // What claims to be an index but goes on past any index's length is not read on.
    bytes.truncate(index_at);
    bytes.extend_from_slice(b"FERRYIDX");
    bytes.resize(index_at + (4 << 20), 0);
    std::fs::write(&archive, &bytes).expect("write");
    let r = ferry_stdin(&[&"unpack", &"-", &s.tmp.path().join("long")], &archive);
    r.assert_status(2);
    assert!(r.stderr.contains("longer than"), "{r}");
}

/// An ACL record (`SCHILY.acl.access`) that makes no valid ACL: the member is
/// unpacked without it, with a warning naming the member and saying what is wrong.
#[test]
fn an_acl_that_cannot_be_made_is_a_warning_naming_the_member() {
    let s = scratch();
    let archive = s.tmp.path().join("bad-acl.tar");
    let script = r#"
import io, sys, tarfile
t = tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT)
info = tarfile.TarInfo("f"); info.size = 4; info.mode = 0o644
info.pax_headers = {"SCHILY.acl.access": "user::rw-\nuser:5:r--\ngroup::r--\nother::r--\n"}
t.addfile(info, io.BytesIO(b"data"))
t.close()
"#;
    run_python(script, &archive);
    let r = ferry(&[&"unpack", &archive, &s.dst]);
    r.assert_ok();
    assert_eq!(
        r.warnings(),
        ["ferry: warning: f: ACL not set: SCHILY.acl.access: named entries without a mask"],
        "{r}"
    );
    assert_eq!(std::fs::read(s.dst.join("f")).expect("f"), b"data");
    let acl = rustix::fs::getxattr(s.dst.join("f"), "system.posix_acl_access", &mut [0u8; 64]);
    assert!(acl.is_err(), "an ACL was set");
    assert_eq!(
        listing(s.tmp.path())
            .iter()
            .filter(|p| p.starts_with("dst"))
            .count(),
        2
    );
}
