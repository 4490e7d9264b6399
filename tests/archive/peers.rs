//! Issue 33: tars that GNU tar and bsdtar read, made by hand from the format's
//! specification (POSIX pax/ustar, the GNU tar manual's "Basic Tar Format"), unpacked
//! by ferry, GNU tar and bsdtar from the same bytes and compared tree to tree. Where
//! the peers disagree ferry follows GNU tar (docs/archives.md, "Reading other tars").

use crate::common::scratch;
use crate::craft::{Archive, Header};
use crate::{ferry, missing};
use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::process::Command;

/// What a tree holds, by path: kind, and a file's content with its mtime, or a link's
/// target (modes and owners are left out: GNU tar as root applies them as ferry does).
fn tree(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let name = path.strip_prefix(root).unwrap().display().to_string();
            let t = meta.file_type();
            let what = if t.is_dir() {
                todo.push(path.clone());
                "dir".to_string()
            } else if t.is_symlink() {
                format!(
                    "symlink to {}",
                    std::fs::read_link(&path).unwrap().display()
                )
            } else if t.is_fifo() {
                "fifo".to_string()
            } else {
                let data = std::fs::read(&path).unwrap();
                let (s, ns) = (meta.mtime(), meta.mtime_nsec());
                format!(
                    "file {:?} mtime {s}.{ns:09}",
                    String::from_utf8_lossy(&data)
                )
            };
            out.insert(name, what);
        }
    }
    out
}

/// One hand-made archive and what ferry is to do with it.
struct Case {
    name: &'static str,
    bytes: Vec<u8>,
    /// ferry's exit status (GNU tar's is 2 where ferry's is 1: a member left out).
    status: i32,
    /// Words ferry's stderr must hold (a warning, an error), or "" for silence.
    says: &'static str,
    /// Whether bsdtar makes the same tree (else GNU tar is followed).
    bsdtar_agrees: bool,
    /// `ls`'s exit status, where it is not the unpack's (`tar -t` lists what `tar -x`
    /// refuses to make).
    ls_status: Option<i32>,
}

fn case(name: &'static str, archive: Archive, says: &'static str) -> Case {
    Case {
        name,
        bytes: archive.end().bytes(),
        status: 0,
        says,
        bsdtar_agrees: true,
        ls_status: None,
    }
}

fn gnu(flag: u8, name: &[u8], size: u64) -> Header {
    Header::gnu(flag, name, size)
}

fn ustar(flag: u8, name: &[u8], size: u64) -> Header {
    Header::ustar(flag, name, size)
}

fn link(flag: u8, name: &[u8], size: u64, target: &[u8]) -> Header {
    let mut h = ustar(flag, name, size);
    h.set(157, target);
    h
}

fn long(flag: u8, body: &[u8]) -> Archive {
    Archive::default()
        .header(&gnu(flag, b"././@LongLink", body.len() as u64))
        .data(body)
}

fn cases() -> Vec<Case> {
    let file = |name: &[u8], data: &[u8]| Archive::default().file(name, data);
    let b = || file(b"b", b"bb");
    let mtime = |value: &[u8]| {
        Archive::default()
            .pax(b'x', &[(b"mtime", value)])
            .file(b"a", b"x")
    };
    let mut v = vec![
        // 1. Header-only kinds with a size: no data follows (POSIX).
        case(
            "dir of size 255",
            Archive::default()
                .header(&ustar(b'5', b"d/", 255))
                .file(b"d/f", b"f"),
            "",
        ),
        case(
            "hardlink of size 321",
            file(b"a", b"x")
                .header(&link(b'1', b"h", 321, b"a"))
                .raw(&b().0),
            "",
        ),
        case(
            "symlink of size 10",
            Archive::default()
                .header(&link(b'2', b"s", 10, b"a"))
                .raw(&b().0),
            "",
        ),
        case(
            "fifo of size 5",
            Archive::default().header(&ustar(b'6', b"p", 5)).raw(&b().0),
            "",
        ),
        case(
            "dir of size 255 with data after all",
            Archive::default()
                .header(&ustar(b'5', b"d/", 255))
                .raw(&[0xaa; 512])
                .file(b"d/f", b"f"),
            "a directory whose header claims a size of 255",
        ),
        // 2. Unknown and vendor type flags.
        case(
            "unknown type Z",
            Archive::default()
                .header(&ustar(b'Z', b"z", 5))
                .data(b"zdata")
                .raw(&b().0),
            "unknown file type 'Z'",
        ),
        case(
            "GNU names N",
            Archive::default()
                .header(&gnu(b'N', b"n", 3))
                .data(b"abc")
                .raw(&b().0),
            "unknown file type 'N'",
        ),
        Case {
            bsdtar_agrees: false, // bsdtar reads it as the next member's ACL
            ..case(
                "Solaris ACL A",
                Archive::default()
                    .header(&ustar(b'A', b"a", 10))
                    .data(b"user::rw-\0")
                    .raw(&b().0),
                "unknown file type 'A'",
            )
        },
        Case {
            bsdtar_agrees: false, // bsdtar: "Damaged tar archive"
            ..case(
                "volume label V",
                Archive::default()
                    .header(&gnu(b'V', b"label", 5))
                    .data(b"label")
                    .raw(&b().0),
                "",
            )
        },
        Case {
            status: 1,
            bsdtar_agrees: false, // bsdtar extracts the piece as a file
            ls_status: Some(0),   // listed as `tar -tv` lists it
            ..case(
                "continued M",
                Archive::default()
                    .header(&gnu(b'M', b"m", 5))
                    .data(b"mdata")
                    .raw(&b().0),
                "member m: not extracted",
            )
        },
        case(
            "dumpdir D",
            Archive::default()
                .header(&gnu(b'D', b"d/", 9))
                .data(b"Yf\0Nold\0\0")
                .file(b"d/f", b"x"),
            "",
        ),
        case(
            "Solaris X",
            Archive::default()
                .pax(b'X', &[(b"path", b"xpath")])
                .file(b"a", b"x"),
            "",
        ),
        // 3. Old-style directories.
        case(
            "old dir of size 1",
            file(b"od/", b"Q").raw(&b().0),
            "a directory whose header claims a size of 1",
        ),
        case(
            "old dir, type NUL",
            Archive::default().header(&ustar(0, b"od/", 0)).raw(&b().0),
            "",
        ),
        // A pax size GNU tar cannot read: reported, the header's size used, the rest
        // read (GNU tar exits 2 after it).
        Case {
            // bsdtar reads the bad size as a number of its own and then hunts for
            // the next header ("Damaged tar archive, retrying").
            bsdtar_agrees: false,
            ..case(
                "pax size abc",
                Archive::default()
                    .pax(b'x', &[(b"size", b"abc")])
                    .file(b"a", b"x")
                    .raw(&b().0),
                "invalid value for pax key 'size'",
            )
        },
        Case {
            // bsdtar reads the bad size as a number of its own and then hunts for
            // the next header ("Damaged tar archive, retrying").
            bsdtar_agrees: false,
            ..case(
                "pax size past 2^63",
                Archive::default()
                    .pax(b'x', &[(b"size", b"9223372036854775808")])
                    .file(b"a", b"x")
                    .raw(&b().0),
                "invalid value for pax key 'size'",
            )
        },
        // 4. Repeated extension headers: the last wins.
        case(
            "two L",
            long(b'L', b"first\0")
                .raw(&long(b'L', b"second\0").0)
                .header(&gnu(b'0', b"a", 1))
                .data(b"x"),
            "two GNU long name headers",
        ),
        case(
            "two K",
            long(b'K', b"t1\0")
                .raw(&long(b'K', b"t2\0").0)
                .header(&link(b'2', b"s", 0, b"q")),
            "two GNU long link headers",
        ),
        Case {
            bsdtar_agrees: true,
            ..case(
                "two x",
                Archive::default()
                    .pax(b'x', &[(b"path", b"p1"), (b"mtime", b"5")])
                    .pax(b'x', &[(b"path", b"p2")])
                    .file(b"a", b"x"),
                "two pax extended headers",
            )
        },
        Case {
            bsdtar_agrees: false, // bsdtar takes the long name over the pax path
            ..case(
                "L then x",
                long(b'L', b"lname\0")
                    .pax(b'x', &[(b"path", b"xname")])
                    .file(b"a", b"x"),
                "",
            )
        },
        case(
            "redundant L",
            long(b'L', b"a\0").header(&gnu(b'0', b"a", 1)).data(b"x"),
            "",
        ),
        // 5. A long name ends at its first NUL.
        case(
            "L with a NUL inside",
            long(b'L', b"ab\0cd").header(&gnu(b'0', b"a", 1)).data(b"x"),
            "",
        ),
        // 6. pax globals and times.
        Case {
            bsdtar_agrees: false, // bsdtar ignores global headers
            ..case(
                "global path",
                Archive::default()
                    .pax(b'g', &[(b"path", b"gp"), (b"mtime", b"7")])
                    .file(b"a", b"x")
                    .file(b"b", b"y"),
                "",
            )
        },
        Case {
            bsdtar_agrees: false,
            ..case(
                "global among x",
                Archive::default()
                    .pax(b'x', &[(b"path", b"p1")])
                    .pax(b'g', &[(b"mtime", b"7")])
                    .file(b"a", b"x"),
                "",
            )
        },
        case("negative time", mtime(b"-1"), ""),
        Case {
            bsdtar_agrees: false, // bsdtar: -0.5
            ..case("negative fraction", mtime(b"-1.5"), "")
        },
        case("more digits than needed", mtime(b"1.123456789123"), ""),
        case("leading zeros", mtime(b"00000001600000000"), ""),
        case("dot without digits", mtime(b"1."), ""),
        Case {
            bsdtar_agrees: false, // bsdtar: 0
            ..case(
                "plus sign",
                mtime(b"+5"),
                "invalid value for pax key 'mtime': \"+5\"",
            )
        },
        Case {
            bsdtar_agrees: false, // bsdtar clamps
            ..case(
                "time out of range",
                mtime(b"99999999999999999999"),
                "pax key 'mtime'",
            )
        },
        // 7. Numeric fields as GNU tar's from_header reads them.
        case(
            "size padded with spaces",
            Archive::default()
                .header(ustar(b'0', b"a", 0).set(124, b"          1\0"))
                .data(b"x")
                .raw(&b().0),
            "",
        ),
        case(
            "size ended by NULs",
            Archive::default()
                .header(ustar(b'0', b"a", 0).set(124, b"1\0\0\0\0\0\0\0\0\0\0\0"))
                .data(b"x")
                .raw(&b().0),
            "",
        ),
        Case {
            bsdtar_agrees: false, // bsdtar: "Unrecognized archive format"
            ..case(
                "size 1 1",
                Archive::default()
                    .header(ustar(b'0', b"a", 0).set(124, b"1 1        \0"))
                    .data(b"x")
                    .raw(&b().0),
                "",
            )
        },
        case(
            "base-256 size",
            Archive::default()
                .header(ustar(b'0', b"a", 0).set(124, b"\x80\0\0\0\0\0\0\0\0\0\0\x01"))
                .data(b"x")
                .raw(&b().0),
            "",
        ),
    ];
    // 9. What follows the end.
    let mut after = file(b"a", b"x").end().bytes();
    after.extend_from_slice(&b"garbage".repeat(100));
    v.push(Case {
        bytes: after,
        ..case("garbage after the end", Archive::default(), "")
    });
    for (name, tail) in [
        ("lone zero block, then a member", b().0),
        ("lone zero block, then garbage", vec![1; 512]),
        ("lone zero block, then a partial block", vec![1; 100]),
    ] {
        v.push(Case {
            bytes: file(b"a", b"x").raw(&[0; 512]).raw(&tail).bytes(),
            ..case(name, Archive::default(), "a lone zero block")
        });
    }
    v
}

/// Every case: ferry's tree is GNU tar's, bsdtar's too where it agrees; ferry's exit
/// status and what it says are the case's; `ferry index` (the table `mount` serves)
/// reads it, and `ferry ls` lists what was unpacked.
#[test]
fn issue_33_tars_the_peers_read_are_unpacked_as_gnu_tar_does() {
    if missing("tar") || missing("bsdtar") {
        return;
    }
    let s = scratch();
    let mut wrong = Vec::new();
    for (i, c) in cases().into_iter().enumerate() {
        let archive = s.tmp.path().join(format!("{i}.tar"));
        std::fs::write(&archive, &c.bytes).unwrap();
        let dirs = ["ferry", "gnu", "bsd"].map(|d| s.tmp.path().join(format!("{i}-{d}")));
        for d in &dirs[1..] {
            std::fs::create_dir(d).unwrap();
        }
        let r = ferry(&[&"unpack", &archive, &dirs[0]]);
        let peer = |tool: &str, dir: &Path| {
            let out = Command::new(tool)
                .arg("-xf")
                .arg(&archive)
                .arg("-C")
                .arg(dir)
                .output();
            out.unwrap_or_else(|e| panic!("{tool}: {e}")).status.code()
        };
        let gnu_status = peer("tar", &dirs[1]);
        peer("bsdtar", &dirs[2]);
        let (ours, theirs, bsd) = (tree(&dirs[0]), tree(&dirs[1]), tree(&dirs[2]));
        let name = c.name;
        if ours != theirs {
            wrong.push(format!("{name}: ferry made {ours:?}, GNU tar {theirs:?}"));
        }
        if c.bsdtar_agrees != (ours == bsd) {
            wrong.push(format!(
                "{name}: bsdtar agrees: {}, not {}",
                ours == bsd,
                c.bsdtar_agrees
            ));
        }
        // GNU tar exits 2 after its warnings too (a skipped block, a bad pax value).
        if r.status != c.status || (c.says.is_empty() && gnu_status != Some(0)) {
            wrong.push(format!(
                "{name}: exit {} (GNU tar {gnu_status:?}): {r}",
                r.status
            ));
        }
        let silent = c.says.is_empty() && r.stderr.is_empty();
        if !silent && (c.says.is_empty() || !r.stderr.contains(c.says)) {
            wrong.push(format!("{name}: should say {:?}: {}", c.says, r.stderr));
        }
        if r.stderr.lines().count() > 1 {
            wrong.push(format!("{name}: one line at most: {}", r.stderr));
        }
        let cache = s.tmp.path().join("cache");
        let index = ferry(&[&"index", &"--cache-dir", &cache, &archive]);
        if index.status != 0 {
            wrong.push(format!("{name}: index: {index}"));
        }
        // What the reader said, the index (and so the mount) says too.
        if !c.says.is_empty() && !index.stderr.contains(c.says) {
            wrong.push(format!("{name}: index should say {:?}: {index}", c.says));
        }
        let listed = ferry(&[&"ls", &archive]);
        if listed.status != c.ls_status.unwrap_or(c.status) {
            wrong.push(format!("{name}: ls: {listed}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `ferry ls` prints what `tar -tf` prints, and `ls -l` what `tar -tv` does (but the
/// time, which ferry gives to the nanosecond): sizes as the headers claim them (a GNU
/// incremental directory's, a directory's or symlink's of a size, none for a
/// hardlink), a multi-volume continuation as `M... big--Continued at byte N--`, names
/// quoted as GNU tar quotes them (`\200`, `\n`, `\\`).
#[test]
fn issue_33_ls_shows_what_tar_tv_shows() {
    if missing("tar") {
        return;
    }
    let s = scratch();
    let archive = s.tmp.path().join("odd.tar");
    // A file continued from another volume (`M`), from byte 204,288 of it.
    let mut continued = gnu(b'M', b"big", 700);
    continued.set(369, b"00000617000\0");
    let a = Archive::default()
        .header(&continued)
        .data(&[b'z'; 700])
        .header(&gnu(b'D', b"inc/", 9))
        .data(b"Yf\0Nold\0\0")
        .header(&ustar(b'5', b"d/", 255))
        .file(b"caf\xc3\xa9\x80a\nb\\c\x01d\x7fe f\tg\rh", b"x")
        .file(b"\xff\xfe", b"y")
        .header(&link(b'1', b"h", 321, b"\xff\xfe"))
        // Last: `tar -t` (not `-x`) skips a block after a symlink with a size.
        .header(&link(b'2', b"s", 10, b"t\x80"));
    std::fs::write(&archive, a.end().bytes()).unwrap();
    let tar = |args: &[&str]| {
        let out = Command::new("tar")
            .args(args)
            .arg(&archive)
            .env("LANG", "C.UTF-8")
            .output();
        String::from_utf8(out.unwrap().stdout).unwrap()
    };
    let ls = ferry(&[&"ls", &archive]);
    ls.assert_ok();
    assert_eq!(ls.stdout, tar(&["-tf"]));
    let ls = ferry(&[&"ls", &"-l", &archive]);
    ls.assert_ok();
    let without_time = |text: &str| -> Vec<String> {
        let fields = |l: &str| {
            let mut f: Vec<&str> = l.split(' ').filter(|f| !f.is_empty()).collect();
            f.drain(3..5);
            f.join(" ")
        };
        text.lines().map(fields).collect()
    };
    assert_eq!(without_time(&ls.stdout), without_time(&tar(&["-tvf"])));
}

/// `cat` prints the last member of a name, as GNU tar's extraction leaves it (after
/// `tar -r` appended a newer one), from a file, a compressed file or standard input;
/// several names print in the order given; a member before a damaged header prints,
/// with a warning, and exits 0.
#[test]
fn issue_33_cat_prints_the_last_member_of_each_name_and_what_comes_before_damage() {
    if missing("tar") || missing("gzip") {
        return;
    }
    let s = scratch();
    let plain = s.tmp.path().join("dup.tar");
    let dup = Archive::default()
        .file(b"a", b"old\n")
        .file(b"b", b"bee\n")
        .file(b"a", b"new\n")
        .header(&link(b'1', b"h", 0, b"a"));
    std::fs::write(&plain, dup.end().bytes()).unwrap();
    let gz = s.tmp.path().join("dup.tar.gz");
    let zipped = Command::new("gzip")
        .arg("-kc")
        .arg(&plain)
        .output()
        .unwrap();
    std::fs::write(&gz, zipped.stdout).unwrap();
    // What GNU tar leaves of `a`: the newer member.
    let gnu = s.tmp.path().join("gnu");
    std::fs::create_dir(&gnu).unwrap();
    let x = Command::new("tar")
        .arg("-xf")
        .arg(&plain)
        .arg("-C")
        .arg(&gnu)
        .status();
    assert!(x.unwrap().success());
    let left = std::fs::read_to_string(gnu.join("a")).unwrap();
    for archive in [&plain, &gz] {
        let r = ferry(&[&"cat", archive, &"a"]);
        r.assert_ok();
        assert_eq!(r.stdout, left);
        let r = ferry(&[&"cat", archive, &"b", &"a", &"h"]);
        r.assert_ok();
        assert_eq!(r.stdout, "bee\nnew\nnew\n");
        let r = crate::ferry_stdin(&[&"cat", &"-", &"a", &"b"], archive);
        r.assert_ok();
        assert_eq!(r.stdout, "new\nbee\n");
    }
    let r = ferry(&[&"cat", &plain, &"a", &"missing", &"b"]);
    assert_eq!(r.stdout, "new\nbee\n", "the others are printed: {r}");
    assert!(r.stderr.contains("member missing: no such member"), "{r}");
    assert_ne!(r.status, 0);

    // A ferry archive that tar -r appended a newer member to.
    build_file(&s.src.join("f"), b"packed\n");
    let far = s.tmp.path().join("a.far");
    crate::pack(&s.src, &far, &[]);
    build_file(&gnu.join("f"), b"appended\n");
    let r = Command::new("tar")
        .arg("-rf")
        .arg(&far)
        .arg("-C")
        .arg(&gnu)
        .arg("./f")
        .status();
    assert!(r.unwrap().success());
    let r = ferry(&[&"cat", &far, &"f"]);
    assert_eq!(r.stdout, "appended\n", "{r}");

    // A damaged header after the member asked for.
    let damaged = s.tmp.path().join("damaged.tar");
    let mut bytes = Archive::default().file(b"a", b"aaa\n").bytes();
    let mut bad = Archive::default().file(b"c", b"x").end().bytes();
    bad[0] = b'Z';
    bytes.extend(bad);
    std::fs::write(&damaged, bytes).unwrap();
    for r in [
        ferry(&[&"cat", &damaged, &"a"]),
        crate::ferry_stdin(&[&"cat", &"-", &"a"], &damaged),
    ] {
        r.assert_ok();
        assert_eq!(r.stdout, "aaa\n");
        let w = r.warnings();
        assert!(
            w.len() == 1 && w[0].contains("offset 1024, after member a: bad header"),
            "{r}"
        );
    }
}

fn build_file(path: &Path, data: &[u8]) {
    std::fs::write(path, data).unwrap();
}

/// `ls --json` prints one object per member, one a line; `ls -lh` sizes as `ls -h`.
#[test]
fn issue_33_ls_json_and_human_sizes() {
    let s = scratch();
    let archive = s.tmp.path().join("a.tar");
    let a = Archive::default()
        .file(b"big\x80", &vec![7; 1025])
        .header(&link(b'2', b"s", 0, b"big"))
        .header(ustar(b'3', b"c", 0).octal(329, 8, 1).octal(337, 8, 3));
    std::fs::write(&archive, a.end().bytes()).unwrap();
    let r = ferry(&[&"ls", &"--json", &archive]);
    r.assert_ok();
    let lines: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{r}");
    assert_eq!(lines[0]["path"], "big\\200");
    assert_eq!(
        (&lines[0]["kind"], &lines[0]["size"]),
        (&"file".into(), &1025.into())
    );
    assert_eq!(
        (&lines[0]["mode"], &lines[0]["mtime"]),
        (&"0644".into(), &1_600_000_000.into())
    );
    assert_eq!(
        (&lines[1]["kind"], &lines[1]["link"]),
        (&"symlink".into(), &"big".into())
    );
    assert_eq!(lines[2]["device"], serde_json::json!([1, 3]));
    let r = ferry(&[&"ls", &"-lh", &archive]);
    r.assert_ok();
    assert!(r.stdout.lines().next().unwrap().contains(" 1.1K "), "{r}");
}

/// `unpack --exclude` leaves out what GNU tar's `--exclude` does, from a ferry
/// archive (through its index) and from GNU tar's.
#[test]
fn issue_33_unpack_exclude_leaves_out_what_gnu_tar_does() {
    if missing("tar") {
        return;
    }
    let s = scratch();
    for p in ["d/f", "d/sub/g", "e/d", "e/y.o", "x.o"] {
        let path = s.src.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        build_file(&path, p.as_bytes());
    }
    let far = s.tmp.path().join("a.far");
    crate::pack(&s.src, &far, &[]);
    let gnu_tar = s.tmp.path().join("a.tar");
    let made = Command::new("tar")
        .arg("-cf")
        .arg(&gnu_tar)
        .arg("-C")
        .arg(&s.src)
        .arg(".")
        .status();
    assert!(made.unwrap().success());
    for (i, patterns) in [&["d"][..], &["*.o", "sub"], &["./d"], &["*/g"]]
        .iter()
        .enumerate()
    {
        let gnu = s.tmp.path().join(format!("gnu{i}"));
        std::fs::create_dir(&gnu).unwrap();
        let mut tar = Command::new("tar");
        tar.arg("-xf").arg(&gnu_tar).arg("-C").arg(&gnu);
        for p in *patterns {
            tar.arg(format!("--exclude={p}"));
        }
        assert!(tar.status().unwrap().success());
        for (j, archive) in [&far, &gnu_tar].iter().enumerate() {
            let dst = s.tmp.path().join(format!("ours{i}-{j}"));
            let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"unpack", *archive, &dst];
            for p in *patterns {
                args.push(&"--exclude");
                args.push(p);
            }
            ferry(&args).assert_ok();
            assert_eq!(
                tree(&dst).keys().collect::<Vec<_>>(),
                tree(&gnu).keys().collect::<Vec<_>>(),
                "{patterns:?}"
            );
        }
    }
}
