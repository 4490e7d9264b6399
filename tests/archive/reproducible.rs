//! Reproducible archives and renamed members: `pack --sort=name` with `--mtime`,
//! `--owner`, `--group`, `--numeric-owner` and `--pax-option` (delete=atime in the
//! reproducible-builds recipe for GNU tar, taken as it is written) makes two copies
//! of a tree, made in different orders at different times, into the same bytes; the
//! order is GNU tar's `--sort=name`; `--transform` renames as GNU tar renames.

use crate::common::{build, scratch};
use crate::{ferry, gnu_pack, missing, pack};
use std::path::Path;
use std::process::Command;

/// The reproducible-builds recipe, as written for GNU tar.
const RECIPE: [&str; 6] = [
    "--sort=name",
    "--mtime=@1700000000",
    "--owner=0",
    "--group=0",
    "--numeric-owner",
    "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime",
];

/// The same tree at `root`, its names made in name order or in reverse (so the two
/// copies' directories list them, and number their inodes, in different orders), with
/// times, modes and xattrs set in that order too.
fn tree(root: &Path, reverse: bool, times: i64) {
    let mut names: Vec<String> = Vec::new();
    for d in ["a", "a.b", "b", "a/z", "b/deep/er", "zz"] {
        names.push(format!("{d}/"));
    }
    for f in [
        "a/1",
        "a/2",
        "a.b/x",
        "a-c",
        "aa",
        "b/deep/er/f",
        "a/z/q",
        "zz/last",
        "top",
    ] {
        names.push(f.to_string());
    }
    if reverse {
        names.reverse();
    }
    for n in &names {
        match n.strip_suffix('/') {
            Some(d) => build::mkdirs(&root.join(d)),
            None => {
                build::mkdirs(root.join(n).parent().expect("a parent"));
                build::write(&root.join(n), format!("{n}\n").as_bytes());
            }
        }
    }
    build::symlink("top", &root.join("link"));
    build::hardlink(&root.join("aa"), &root.join("a/twin"));
    let mut attrs = ["user.one", "user.two", "user.three"];
    if reverse {
        attrs.reverse();
    }
    for a in attrs {
        build::set_xattr(&root.join("top"), a, a.as_bytes());
    }
    // Different times in the two copies, nanoseconds and all.
    let (atime, mtime) = build::stamp(times);
    for n in names.iter().chain(&["link".to_string(), ".".to_string()]) {
        build::set_times(&root.join(n.trim_end_matches('/')), atime, mtime);
    }
}

fn bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).expect("read the archive")
}

#[test]
fn two_copies_made_differently_pack_into_the_same_bytes() {
    let s = scratch();
    let (one, two) = (s.tmp.path().join("one"), s.tmp.path().join("two"));
    tree(&one, false, 11);
    tree(&two, true, 22);
    let (a, b) = (s.tmp.path().join("a.tar"), s.tmp.path().join("b.tar"));
    pack(&one, &a, &RECIPE);
    // Several walkers asked for: one walks, in order.
    let mut parallel = RECIPE.to_vec();
    parallel.extend(["-j", "4"]);
    pack(&two, &b, &parallel);
    assert!(bytes(&a) == bytes(&b), "the two archives differ");
    // Compressed too: the frames and members carry no time of their own.
    for suffix in ["tar.gz", "tar.zst", "tar.xz"] {
        let (a, b) = (
            s.tmp.path().join(format!("a.{suffix}")),
            s.tmp.path().join(format!("b.{suffix}")),
        );
        pack(&one, &a, &RECIPE);
        pack(&two, &b, &RECIPE);
        assert!(bytes(&a) == bytes(&b), "the two .{suffix} archives differ");
    }
    // Each flag does its part: without the sort, or keeping the times, they differ.
    let (c, d) = (s.tmp.path().join("c.tar"), s.tmp.path().join("d.tar"));
    pack(&one, &c, &RECIPE[1..]);
    pack(&two, &d, &RECIPE[1..]);
    assert!(
        bytes(&c) != bytes(&d),
        "the walk's order was the same without --sort"
    );
    pack(&one, &c, &RECIPE[..1]);
    pack(&two, &d, &RECIPE[..1]);
    assert!(
        bytes(&c) != bytes(&d),
        "the times were the same without --mtime"
    );
    // No access time, no owner name; the index says what the headers say.
    assert!(!bytes(&a).windows(6).any(|w| w == b"atime="));
    let json = ferry(&[&"ls", &"--json", &a]);
    json.assert_ok();
    for line in json.stdout.lines() {
        for field in [
            "\"uid\":0,",
            "\"gid\":0,",
            "\"user\":null",
            "\"group\":null",
        ] {
            assert!(line.contains(field), "{field} in {line}");
        }
        assert!(line.contains("\"mtime\":1700000000,"), "{line}");
    }
    let unpacked = s.tmp.path().join("out");
    ferry(&[&"unpack", &a, &unpacked]).assert_ok();
    let st = std::fs::metadata(unpacked.join("a/z/q")).expect("unpacked");
    use std::os::unix::fs::MetadataExt;
    assert_eq!((st.mtime(), st.atime()), (1_700_000_000, 1_700_000_000));
}

/// `tar -tf`'s names, without the `./` GNU tar puts before them.
fn tar_names(archive: &Path) -> Vec<String> {
    let out = Command::new("tar")
        .arg("-tvf")
        .arg(archive)
        .output()
        .expect("tar -t");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        // `-rw-r--r-- root/root 5 DATE TIME NAME[ -> TARGET | link to TARGET]`: the
        // kind, then what follows the time, without GNU tar's `./`s.
        .map(|l| {
            let mut rest = l;
            for _ in 0..5 {
                rest = rest
                    .trim_start()
                    .split_once(char::is_whitespace)
                    .map_or("", |r| r.1);
            }
            let name = rest.trim_start().replace("./", "");
            format!("{} {name}", &l[..1])
        })
        .filter(|l| l != "d " && l != "d /")
        .collect()
}

#[test]
fn the_order_by_name_is_gnu_tars() {
    if missing("tar") {
        return;
    }
    let s = scratch();
    tree(&s.src, true, 3);
    let ours = s.tmp.path().join("ours.tar");
    pack(&s.src, &ours, &["--sort=name"]);
    let gnu = s.tmp.path().join("gnu.tar");
    gnu_pack(&["--sort=name"], &gnu, &s.src, &["."]);
    assert_eq!(tar_names(&ours), tar_names(&gnu));
}

/// Members named by `-C src` with the top-level names, as GNU tar is given them.
fn named_members(root: &Path) -> Vec<&'static str> {
    let mut top: Vec<&str> = vec!["a", "a.b", "b", "zz", "a-c", "aa", "top", "link"];
    top.retain(|n| root.join(n).symlink_metadata().is_ok());
    top
}

#[test]
fn transform_renames_members_and_link_targets_as_gnu_tar_does() {
    if missing("tar") {
        return;
    }
    let s = scratch();
    tree(&s.src, false, 5);
    let expressions = [
        vec!["s,^,pkg/,"],
        vec![r"s/\(.*\)\.\(.\)$/\2.\1/"],
        // Not a numbered match: GNU tar 1.34 garbles a name with fewer matches than
        // the number (`s/[a-c]/X/2` makes `last` `llast`; sed and ferry leave it).
        vec![r"s/[a-c]/\U&/g"],
        vec!["s,top,TOP,S"],
        vec!["s/a/b/;s/b/c/"],
        vec!["s/a/x/", "s/x/yy/g"],
        vec!["s,^a(/|$),A\\1,x"],
        vec![r"s|a\|z|X|g"],
        vec!["s/Z/9/i"],
        vec![r"s/\.b/\u&X/"],
    ];
    let top = named_members(&s.src);
    for exprs in expressions {
        let mut flags = vec!["--sort=name"];
        let transforms: Vec<String> = exprs.iter().map(|e| format!("--transform={e}")).collect();
        flags.extend(transforms.iter().map(String::as_str));
        let ours = s.tmp.path().join("ours.tar");
        let gnu = s.tmp.path().join("gnu.tar");
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"pack"];
        for f in &flags {
            args.push(f);
        }
        args.push(&"-C");
        args.push(&s.src);
        for t in &top {
            args.push(t);
        }
        args.push(&ours);
        ferry(&args).assert_ok();
        gnu_pack(&flags, &gnu, &s.src, &top);
        assert_eq!(tar_names(&ours), tar_names(&gnu), "{exprs:?}");
    }
}

#[test]
fn names_that_cannot_be_stored_and_bad_expressions_are_refused() {
    let s = scratch();
    build::write(&s.src.join("f"), b"f\n");
    build::write(&s.src.join("g"), b"g\n");
    let archive = s.tmp.path().join("x.tar");
    // A name climbing out: that member is left out, named, and the pack fails.
    let r = ferry(&[&"pack", &"--transform=s,^f,../f,", &s.src, &archive]);
    r.assert_status(1);
    assert!(
        r.stderr.contains("f") && r.stderr.contains(".."),
        "{}",
        r.stderr
    );
    let listed = ferry(&[&"ls", &archive]);
    assert!(
        listed.stdout.contains('g') && !listed.stdout.contains("../"),
        "{}",
        listed.stdout
    );
    for bad in ["s/a/b", "s/a/b/q", r"s/a/\1/", "y/a/b/"] {
        let r = ferry(&[&"pack", &format!("--transform={bad}"), &s.src, &archive]);
        r.assert_status(2);
        assert!(r.stderr.contains("--transform"), "{bad}: {}", r.stderr);
    }
    for bad in ["delete=uname", "uname=x"] {
        let r = ferry(&[&"pack", &format!("--pax-option={bad}"), &s.src, &archive]);
        r.assert_status(2);
        assert!(r.stderr.contains("--pax-option"), "{bad}: {}", r.stderr);
    }
    let r = ferry(&[&"pack", &"--mtime=yesterday", &s.src, &archive]);
    r.assert_status(2);
    assert!(r.stderr.contains("--mtime yesterday"), "{}", r.stderr);
}

#[test]
fn clamped_times_and_named_owners() {
    let s = scratch();
    build::write(&s.src.join("old"), b"old\n");
    build::write(&s.src.join("new"), b"new\n");
    build::set_times(&s.src.join("old"), build::ts(1_000, 0), build::ts(1_000, 0));
    build::set_times(
        &s.src.join("new"),
        build::ts(1_000, 0),
        build::ts(2_000_000_000, 0),
    );
    let archive = s.tmp.path().join("x.tar");
    pack(
        &s.src,
        &archive,
        &[
            "--mtime=@1700000000",
            "--clamp-mtime",
            "--owner=builder:4321",
            "--group=staff:77",
        ],
    );
    let json = ferry(&[&"ls", &"--json", &archive]);
    json.assert_ok();
    let line = |name: &str| {
        json.stdout
            .lines()
            .find(|l| l.contains(&format!("\"path\":\"{name}\"")))
            .unwrap_or_else(|| panic!("{name} in {}", json.stdout))
            .to_owned()
    };
    assert!(line("old").contains("\"mtime\":1000,"), "{}", line("old"));
    assert!(
        line("new").contains("\"mtime\":1700000000,"),
        "{}",
        line("new")
    );
    for name in ["old", "new"] {
        let l = line(name);
        assert!(
            l.contains("\"uid\":4321") && l.contains("\"user\":\"builder\""),
            "{l}"
        );
        assert!(
            l.contains("\"gid\":77") && l.contains("\"group\":\"staff\""),
            "{l}"
        );
    }
}

#[test]
fn unpack_transform_renames_as_gnu_tar_extracts() {
    if missing("tar") {
        return;
    }
    use crate::common::compare::{assert_same_tree_with, Options};
    let s = scratch();
    tree(&s.src, false, 7);
    let archive = s.tmp.path().join("gnu.tar");
    let top = named_members(&s.src);
    gnu_pack(&[], &archive, &s.src, &top);
    let cases: [&[&str]; 4] = [
        &["--transform=s,^,pkg/,"],
        &["--transform=s,^,X/,", "--strip-components=1"],
        &["--transform=s/a/A/g;s,top,TOP,S"],
        &[r"--transform=s/\(.*\)\.\(.\)$/\2.\1/"],
    ];
    for (i, flags) in cases.iter().enumerate() {
        // The root, `pkg/` and (where the directory `a.b/` became `b.a/`) `a.b/` for
        // its member are made by the extraction, at the time it runs.
        let made = match i {
            3 => &["", "a.b"][..],
            _ => &["", "pkg"][..],
        };
        let opts = Options {
            skip_atime: true,
            made_dirs: made.iter().map(|d| d.as_bytes().to_vec()).collect(),
            ..Options::default()
        };
        let gnu = s.tmp.path().join(format!("gnu-{i}"));
        std::fs::create_dir(&gnu).expect("mkdir");
        let made = Command::new("tar")
            .args(*flags)
            .arg("-xf")
            .arg(&archive)
            .arg("-C")
            .arg(&gnu)
            .status()
            .expect("tar");
        assert!(made.success(), "{flags:?}");
        // Through the stream reader (a tar without an index) and from standard input.
        let ours = s.tmp.path().join(format!("ours-{i}"));
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"unpack"];
        for f in flags.iter() {
            args.push(f);
        }
        args.push(&archive);
        args.push(&ours);
        ferry(&args).assert_ok();
        assert_same_tree_with(&gnu, &ours, &opts);
        let piped = s.tmp.path().join(format!("piped-{i}"));
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"unpack"];
        for f in flags.iter() {
            args.push(f);
        }
        args.push(&"-");
        args.push(&piped);
        crate::ferry_stdin(&args, &archive).assert_ok();
        assert_same_tree_with(&gnu, &piped, &opts);
    }
    // Through a ferry archive's index too.
    let far = s.tmp.path().join("ours.far");
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"pack", &"-C", &s.src];
    for t in &top {
        args.push(t);
    }
    args.push(&far);
    ferry(&args).assert_ok();
    let indexed = s.tmp.path().join("indexed");
    ferry(&[&"unpack", &"--transform=s,^,pkg/,", &far, &indexed]).assert_ok();
    // (GNU tar's own archive kept whole seconds, and no xattrs.)
    let opts = Options {
        skip_atime: true,
        mtime_seconds: true,
        skip_xattrs: true,
        made_dirs: vec![Vec::new(), b"pkg".to_vec()],
        ..Options::default()
    };
    assert_same_tree_with(&s.tmp.path().join("gnu-0"), &indexed, &opts);
}

/// The pax headers' own mtime fields in `archive` (each `x` header, as octal text).
fn pax_header_mtimes(archive: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at + 512 <= archive.len() {
        let h = &archive[at..at + 512];
        if h.iter().all(|&b| b == 0) {
            break;
        }
        let field = String::from_utf8_lossy(&h[124..135]).into_owned();
        let size = u64::from_str_radix(field.trim_matches(|c: char| c == '\0' || c == ' '), 8)
            .expect("a size field");
        if h[156] == b'x' {
            out.push(String::from_utf8_lossy(&h[136..147]).into_owned());
        }
        at += 512 + (size as usize).div_ceil(512) * 512;
    }
    out
}

#[test]
fn pax_option_delete_patterns_and_the_headers_own_mtime() {
    if missing("tar") {
        return;
    }
    let s = scratch();
    let file = s.src.join("f");
    std::fs::write(&file, b"data").unwrap();
    std::fs::write(s.src.join("n".repeat(120)), b"long").unwrap();
    build::set_xattr(&file, "user.keep", b"1");
    build::set_xattr(&file, "user.drop.me", b"2");
    let when = std::fs::File::options().write(true).open(&file).unwrap();
    when.set_modified(std::time::UNIX_EPOCH + std::time::Duration::new(1_600_000_000, 123_456_789))
        .unwrap();
    let archive = s.tmp.path().join("a.tar");
    pack(
        &s.src,
        &archive,
        &[
            "--pax-option=delete=mtime,delete=SCHILY.xattr.user.drop*",
            "--pax-option=exthdr.mtime=@1000",
        ],
    );
    let bytes = bytes(&archive);
    let headers = pax_header_mtimes(&bytes);
    assert!(!headers.is_empty(), "the long name needs a pax header");
    assert!(headers.iter().all(|m| m == "00000001750"), "{headers:?}");
    // GNU tar and ferry both extract whole seconds and the attribute kept alone.
    let gnu = s.tmp.path().join("gnu");
    std::fs::create_dir_all(&gnu).unwrap();
    let ok = Command::new("tar")
        .args(["--xattrs", "--xattrs-include=*", "-xf"])
        .arg(&archive)
        .arg("-C")
        .arg(&gnu)
        .status()
        .unwrap();
    assert!(ok.success());
    ferry(&[&"unpack", &archive, &s.dst]).assert_ok();
    for root in [&gnu, &s.dst] {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(root.join("f")).unwrap();
        assert_eq!(
            (meta.mtime(), meta.mtime_nsec()),
            (1_600_000_000, 0),
            "{}",
            root.display()
        );
        let names = crate::common::compare::xattrs(&root.join("f"));
        let names: Vec<&[u8]> = names.keys().map(Vec::as_slice).collect();
        assert_eq!(names, [b"user.keep".as_slice()], "{}", root.display());
    }
    // What ferry needs, and what it does not do, is refused by name.
    for (option, says) in [
        ("--pax-option=delete=path", "it would leave out `path`"),
        ("--pax-option=delete=*", "it would leave out `path`"),
        ("--pax-option=comment=x", "adding keywords"),
    ] {
        let r = ferry(&[&"pack", &option, &s.src, &s.tmp.path().join("b.tar")]);
        r.assert_status(2);
        assert!(r.stderr.contains(says), "{option}: {}", r.stderr);
    }
}
