//! `ferry ls` and `ferry cat` on prefixes of plain objects (no ferry manifest): what
//! ferry's `--layout=objects` wrote, what rclone wrote, objects with no metadata at
//! all; the S3 requests each costs, counted by Garage; hostile keys and paths refused,
//! naming them; `dir/` directory markers read back as empty directories.

use crate::common::scratch;
use crate::garage::Garage;
use crate::objects::{curl_put, rclone, tree, tree_uploaded, TREE_FILES};
use crate::s;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

/// `date -u` of `sec` as `ferry ls -l` shows it (with `nsec`).
fn utc(sec: i64, nsec: i64) -> String {
    let out = Command::new("date")
        .args(["-u", "-d", &format!("@{sec}"), "+%Y-%m-%d %H:%M:%S"])
        .output()
        .expect("date");
    format!("{}.{nsec:09}", String::from_utf8_lossy(&out.stdout).trim())
}

/// This process's umask (ferry's too: it inherits it), from /proc.
fn umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .expect("a Umask line");
    u32::from_str_radix(line.trim(), 8).expect("octal umask")
}

/// The line `ferry ls` (`-l`: with the mtime) prints for `path` below `src`, its
/// mode `mode` or, when None, the one on disk.
fn ls_line(src: &Path, path: &str, mode: Option<u32>, long: bool) -> String {
    let m = std::fs::symlink_metadata(src.join(path)).expect(path);
    let (kind, size) = match m.file_type().is_symlink() {
        true => ('l', 0),
        false => ('-', m.len()),
    };
    let mode = mode.unwrap_or(m.mode() & 0o7777);
    let when = match long {
        true => format!("{} ", utc(m.mtime(), m.mtime_nsec())),
        false => String::new(),
    };
    format!("{kind}{mode:04o} {size:>12} {when}{path}")
}

#[test]
fn ls_and_cat_read_plain_objects_with_their_metadata_in_few_requests() {
    let Some(g) = Garage::start() else { return };
    let (sc, paths, url) = tree_uploaded(&g, "lsobj");
    for long in [false, true] {
        let before = g.s3_requests();
        let ls = match long {
            false => g.ferry(&["ls", &url]),
            true => g.ferry(&["ls", "-l", &url]),
        };
        ls.assert_ok();
        let want: Vec<String> = paths
            .iter()
            .map(|p| ls_line(&sc.src, p, None, long))
            .collect();
        assert_eq!(ls.stdout.lines().collect::<Vec<_>>(), want, "{ls}");
        // The manifest looked for, one LIST, a HEAD per object.
        assert_eq!(
            g.s3_requests_since(&before),
            Garage::requests(&[("GetObject", 1), ("HeadObject", 7), ("ListObjectsV2", 1)]),
            "{ls}"
        );
    }
    // MEMBERs, as for an archive: only what they name is asked about; one that names
    // nothing is an error (exit status 1).
    let before = g.s3_requests();
    let ls = g.ferry(&["ls", &url, "d/e", "*/run", "nothing"]);
    ls.assert_status(1);
    let want: Vec<String> = ["d/e/f/deep name é", "d/e/second name", "d/run"]
        .iter()
        .map(|p| ls_line(&sc.src, p, None, false))
        .collect();
    assert_eq!(ls.stdout.lines().collect::<Vec<_>>(), want, "{ls}");
    let errors = ls.errors();
    assert!(
        errors.len() == 1 && errors[0].contains("nothing: ls: no such member"),
        "{ls}"
    );
    assert_eq!(
        g.s3_requests_since(&before),
        Garage::requests(&[("GetObject", 1), ("HeadObject", 3), ("ListObjectsV2", 1)]),
        "{ls}"
    );
    // cat: the object's GET, sent beside the look for a manifest.
    let cat = |path: &str| {
        let before = g.s3_requests();
        let out = g.command(&["cat", &url, path]).output().expect("ferry cat");
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        (
            out.status.code(),
            out.stdout,
            stderr,
            g.s3_requests_since(&before),
        )
    };
    for path in ["d/big", "d/e/f/deep name é", "d/e/second name", "empty"] {
        let (status, out, stderr, reqs) = cat(path);
        assert_eq!(status, Some(0), "{path}: {stderr}");
        assert!(out == std::fs::read(sc.src.join(path)).unwrap(), "{path}");
        assert_eq!(reqs, Garage::requests(&[("GetObject", 2)]), "{path}");
    }
    let (status, _, stderr, _) = cat("./small");
    assert_eq!(status, Some(0), "{stderr}");
    for (path, why) in [
        (
            "d/link",
            "d/link: not a regular file (a symlink: s3://ferry-test/lsobj/d/link.rclonelink)",
        ),
        (
            "d/nothing",
            "d/nothing: no such object in s3://ferry-test/lsobj",
        ),
        ("d", "d: no such object"),
    ] {
        let (status, out, stderr, _) = cat(path);
        assert_eq!(status, Some(2), "{path}: {stderr}");
        assert!(out.is_empty() && stderr.contains(why), "{path}: {stderr}");
    }
    // Paths that would reach outside the prefix: refused, naming them, before any
    // request for them (only the manifest is looked for).
    for (path, why) in [
        (
            "../lsobj-secret",
            "../lsobj-secret: refused: `.` or `..` component: leaves the tree",
        ),
        ("d/../../x", "d/../../x: refused: `.` or `..` component"),
        ("/etc/passwd", "/etc/passwd: refused: absolute path"),
        ("a//b", "a//b: refused: empty path component"),
        ("d/link.rclonelink", "refused: names a symlink's object"),
    ] {
        let (status, out, stderr, reqs) = cat(path);
        assert_eq!(status, Some(2), "{path}: {stderr}");
        assert!(out.is_empty() && stderr.contains(why), "{path}: {stderr}");
        assert_eq!(
            reqs,
            Garage::requests(&[("GetObject", 1)]),
            "{path}: {stderr}"
        );
    }
}

#[test]
fn ls_reads_what_rclone_wrote_and_objects_with_no_metadata() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    tree(&sc);
    // rclone without --metadata writes the mtime alone: the mode shown is what a
    // download gives (0666 less the umask), the size and mtime the file's.
    let Some(_) = rclone(
        &g,
        &[
            "copy",
            s(&sc.src),
            &format!("garage:{}/plain", crate::garage::BUCKET),
        ],
    ) else {
        return;
    };
    let ls = g.ferry(&["ls", "-l", &g.url("plain")]);
    ls.assert_ok();
    let mut files = TREE_FILES;
    files.sort();
    let fresh = 0o666 & !umask();
    let want: Vec<String> = files
        .iter()
        .map(|p| ls_line(&sc.src, p, Some(fresh), true))
        .collect();
    assert_eq!(ls.stdout.lines().collect::<Vec<_>>(), want, "{ls}");
    // No metadata at all: size and LastModified (today, on this machine's clock).
    g.put("bare/x/y", b"twelve bytes".to_vec());
    let today = String::from_utf8(
        Command::new("date")
            .args(["-u", "+%Y-%m-%d"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let ls = g.ferry(&["ls", "-l", &g.url("bare")]);
    ls.assert_ok();
    let line = format!("-{fresh:04o}           12 {} ", today.trim());
    assert!(
        ls.stdout.starts_with(&line) && ls.stdout.ends_with(" x/y\n"),
        "{ls}"
    );
}

#[test]
fn ls_refuses_hostile_keys_naming_them_and_lists_the_rest() {
    let Some(g) = Garage::start() else { return };
    assert!(curl_put(&g, "h/ok", "fine"), "curl could not PUT");
    let long = format!("h/{}", "n".repeat(300));
    assert!(curl_put(&g, &long, "long"));
    let r = g.ferry(&["ls", &g.url("h")]);
    r.assert_status(1);
    let errors = r.errors();
    assert!(
        errors.len() == 1
            && errors[0].contains(&"n".repeat(300))
            && errors[0].contains("longer than 255"),
        "{r}"
    );
    assert!(
        r.stdout
            .lines()
            .eq([format!("-{:04o}            4 ok", 0o666 & !umask())]),
        "{r}"
    );
    // Keys that climb out, hold an empty component or a NUL end the listing
    // (object_store refuses them as paths): one error naming the key (a NUL escaped),
    // nothing listed.
    for (prefix, key, shown) in [
        ("x", "x/../../escape", "x/../../escape"),
        ("y", "y//abs", "y//abs"),
        ("z", "z/./dot", "z/./dot"),
        ("n", "n/nul%00byte", "n/nul\\x00byte"),
    ] {
        assert!(curl_put(&g, key, "out"), "curl could not PUT {key}");
        let r = g.ferry(&["ls", &g.url(prefix)]);
        r.assert_status(2);
        let errors = r.errors();
        assert!(errors.len() == 1 && errors[0].contains(shown), "{r}");
        assert!(!r.stderr.contains('\0') && r.stdout.is_empty(), "{r}");
    }
    // A prefix with nothing in it, and one holding only the shards of an unfinished
    // ferry upload (no manifest): no tree there.
    let r = g.ferry(&["ls", &g.url("nothing")]);
    r.assert_status(2);
    assert!(r.stderr.contains("no ferry upload here"), "{r}");
    g.put(
        &format!("half/shards/{}.far", "0a".repeat(16)),
        b"x".to_vec(),
    );
    for args in [
        vec!["ls", "s3://ferry-test/half"],
        vec!["copy", "s3://ferry-test/half", "/nonexistent-dst"],
    ] {
        let r = g.ferry(&args);
        r.assert_status(2);
        assert!(
            r.stderr
                .contains("only the shards of an upload that has not finished"),
            "{r}"
        );
    }
}

#[test]
fn directory_markers_come_down_as_empty_directories() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    // rclone's --s3-directory-markers form (rclone 1.62 and later; Debian's 1.60 has
    // none): a zero-length object `dir/`, for an empty directory and for a full one.
    for (key, body) in [
        ("m/empty/", ""),
        ("m/a/deeper/", ""),
        ("m/full/", ""),
        ("m/full/f", "in full"),
        ("m/zero", ""),
    ] {
        assert!(curl_put(&g, key, body), "curl could not PUT {key}");
    }
    let url = g.url("m");
    let r = g.ferry(&["copy", &url, s(&sc.dst)]);
    r.assert_ok();
    assert!(sc.dst.join("empty").is_dir(), "{r}");
    assert!(sc.dst.join("a/deeper").is_dir(), "{r}");
    assert_eq!(std::fs::read(sc.dst.join("full/f")).unwrap(), b"in full");
    let zero = std::fs::symlink_metadata(sc.dst.join("zero")).unwrap();
    assert!(zero.is_file() && zero.len() == 0, "{r}");
    let ls = g.ferry(&["ls", &url]);
    ls.assert_ok();
    let (dir, file) = (0o777 & !umask(), 0o666 & !umask());
    let want = [
        format!("d{dir:04o}            0 a/deeper"),
        format!("d{dir:04o}            0 empty"),
        format!("-{file:04o}            7 full/f"),
        format!("-{file:04o}            0 zero"),
    ];
    assert!(
        ls.stdout.lines().eq(want.iter().map(String::as_str)),
        "{ls}"
    );
    // Run again: nothing to write.
    let again = g.ferry(&["copy", "--json", &url, s(&sc.dst)]);
    again.assert_ok();
    assert_eq!(again.json().count("files"), 0, "{again}");
    assert!(is_empty_dir(&sc.dst.join("empty")));
}

/// Whether `dir` is an empty directory.
fn is_empty_dir(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|mut d| d.next().is_none())
        .unwrap_or(false)
}
