//! `--layout=objects` through Garage: one plain object per file with rclone's
//! metadata, read back by ferry and by rclone; a prefix rclone wrote read by ferry;
//! reruns that skip what is there; hostile keys refused, naming them.

use crate::common::build::*;
use crate::common::run::{run, Run};
use crate::common::{scratch, Scratch};
use crate::garage::{Garage, BUCKET, KEY_ID, SECRET};
use crate::s;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

pub(crate) const MIB: usize = 1 << 20;

/// Files of several sizes (one above the multipart threshold), modes, a symlink, a
/// hardlink, names with spaces and non-ASCII, an empty file, nested directories, each
/// with its own nanosecond times. Returns the paths of the files and the symlink.
pub(crate) fn tree(sc: &Scratch) -> Vec<&'static str> {
    let src = &sc.src;
    mkdirs(&src.join("d/e/f"));
    write(&src.join("small"), b"small file");
    write(&src.join("empty"), b"");
    write(&src.join("d/big"), &pattern(1, 12 * MIB + 12345));
    write(&src.join("d/e/f/deep name é"), &pattern(2, 70_000));
    write(&src.join("d/run"), b"#!/bin/sh\n");
    chmod(&src.join("d/run"), 0o750);
    chmod(&src.join("small"), 0o600);
    symlink("../small", &src.join("d/link"));
    hardlink(&src.join("small"), &src.join("d/e/second name"));
    stamp_times(src);
    vec![
        "small",
        "empty",
        "d/big",
        "d/e/f/deep name é",
        "d/run",
        "d/link",
        "d/e/second name",
    ]
}

/// A scratch holding [`tree`] (its paths, sorted), uploaded with `--layout=objects`
/// to `prefix`, and the upload's URL.
pub(crate) fn tree_uploaded(g: &Garage, prefix: &str) -> (Scratch, Vec<&'static str>, String) {
    let sc = scratch();
    let mut paths = tree(&sc);
    paths.sort();
    let url = g.url(prefix);
    g.ferry(&["copy", s(&sc.src), &url, "--layout=objects"])
        .assert_ok();
    (sc, paths, url)
}

/// The files of [`tree`]: its paths but the symlink.
pub(crate) const TREE_FILES: [&str; 6] = [
    "small",
    "empty",
    "d/big",
    "d/e/f/deep name é",
    "d/run",
    "d/e/second name",
];

/// Each of `paths` is in `dst` as in `src`: kind, content or target, mtime to the
/// nanosecond, and (`modes`) permission bits.
pub(crate) fn assert_same_nodes(src: &Path, dst: &Path, paths: &[&str], modes: bool) {
    for p in paths {
        let (a, b) = (src.join(p), dst.join(p));
        let (ma, mb) = (
            std::fs::symlink_metadata(&a).unwrap(),
            std::fs::symlink_metadata(&b).unwrap_or_else(|e| panic!("{p}: {e}")),
        );
        assert_eq!(ma.file_type(), mb.file_type(), "{p}");
        if ma.file_type().is_symlink() {
            assert_eq!(
                std::fs::read_link(&a).unwrap(),
                std::fs::read_link(&b).unwrap()
            );
        } else {
            assert!(
                std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(),
                "{p}"
            );
            if modes {
                assert_eq!(ma.mode() & 0o7777, mb.mode() & 0o7777, "{p}");
            }
        }
        assert_eq!(
            (ma.mtime(), ma.mtime_nsec()),
            (mb.mtime(), mb.mtime_nsec()),
            "mtime of {p}"
        );
    }
}

/// The count after `what` in the line `ferry s3: N objects: M sent (B bytes), K there
/// already`.
pub(crate) fn objects_line(r: &Run) -> (u64, u64, u64) {
    let line = r
        .stderr
        .lines()
        .find(|l| l.starts_with("ferry s3: ") && l.contains(" objects: "))
        .unwrap_or_else(|| panic!("no summary line: {r}"));
    let n: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    (n[1], n[2], n[4])
}

/// rclone against this Garage (Debian's rclone; configured by environment variables).
pub(crate) fn rclone(g: &Garage, args: &[&str]) -> Option<Run> {
    if Command::new("rclone").arg("version").output().is_err() {
        crate::common::skip("needs rclone (apt-get install rclone)");
        return None;
    }
    let ep = format!("http://127.0.0.1:{}", g.nodes[0].s3_port);
    let mut cmd = Command::new("rclone");
    cmd.args(args)
        .env("RCLONE_CONFIG_GARAGE_TYPE", "s3")
        .env("RCLONE_CONFIG_GARAGE_PROVIDER", "Other")
        .env("RCLONE_CONFIG_GARAGE_ENDPOINT", ep)
        .env("RCLONE_CONFIG_GARAGE_ACCESS_KEY_ID", KEY_ID)
        .env("RCLONE_CONFIG_GARAGE_SECRET_ACCESS_KEY", SECRET)
        .env("RCLONE_CONFIG_GARAGE_REGION", "garage")
        .env("RCLONE_CONFIG_GARAGE_FORCE_PATH_STYLE", "true")
        // rclone 1.60 fails on any AWS_CA_BUNDLE with a plain-HTTP endpoint.
        .env_remove("AWS_CA_BUNDLE");
    let r = run(cmd);
    r.assert_ok();
    Some(r)
}

#[test]
fn objects_round_trip_with_metadata_and_reruns_skip_what_is_there() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    let paths = tree(&sc);
    fifo(&sc.src.join("pipe"));
    let url = g.url("objs/one");
    let up = g.ferry(&["copy", s(&sc.src), &url, "--layout=objects"]);
    up.assert_ok();
    assert_eq!(objects_line(&up), (7, 7, 0), "{up}");
    assert!(up.warnings().iter().any(|w| w.contains("pipe")), "{up}");
    let down = g.ferry(&["copy", "--json", &url, s(&sc.dst)]);
    down.assert_ok();
    assert_eq!(down.json().count("files"), 6, "{down}");
    assert_same_nodes(&sc.src, &sc.dst, &paths, true);
    // Directories are no objects: they exist in DST, with no metadata of their own.
    assert!(sc.dst.join("d/e/f").is_dir());
    // Reruns: nothing sent, nothing written.
    let again = g.ferry(&["copy", s(&sc.src), &url, "--layout=objects"]);
    again.assert_ok();
    assert_eq!(objects_line(&again), (7, 0, 7), "{again}");
    let again = g.ferry(&["copy", "--json", &url, s(&sc.dst)]);
    again.assert_ok();
    assert_eq!(again.json().count("files"), 0, "{again}");
    // One file changed (new size and mtime): only it goes up, and comes down.
    write(&sc.src.join("d/run"), b"#!/bin/sh\necho changed\n");
    let up = g.ferry(&["copy", s(&sc.src), &url, "--layout=objects"]);
    assert_eq!(objects_line(&up), (7, 1, 6), "{up}");
    let down = g.ferry(&["copy", "--json", &url, s(&sc.dst)]);
    down.assert_ok();
    assert_eq!(down.json().count("files"), 1, "{down}");
    assert_same_nodes(&sc.src, &sc.dst, &paths, true);
}

#[test]
fn a_killed_objects_upload_run_again_aborts_what_it_left_and_completes() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    for i in 0..4 {
        write(&sc.src.join(format!("big{i}")), &pattern(i, 24 * MIB));
    }
    stamp_times(&sc.src);
    let url = g.url("objs/killed");
    let upload = ["copy", s(&sc.src), &url, "--layout=objects"];
    let mut child = g.spawn_until_multipart(&[&upload[..], &["--transfers", "1"]].concat());
    child.kill().expect("kill ferry");
    child.wait().expect("wait");
    g.rerun_aborting_what_was_left(&upload);
    g.ferry(&["copy", &url, s(&sc.dst)]).assert_ok();
    let names = ["big0", "big1", "big2", "big3"];
    assert_same_nodes(&sc.src, &sc.dst, &names, true);
}

#[test]
fn rclone_reads_what_ferry_wrote_and_ferry_reads_what_rclone_wrote() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    let paths = tree(&sc);
    let url = g.url("interop/ferry");
    g.ferry(&["copy", s(&sc.src), &url, "--layout=objects"])
        .assert_ok();
    // rclone sees plain objects with their mtimes, and with --metadata their modes.
    let Some(ls) = rclone(
        &g,
        &[
            "lsf",
            "-R",
            "--files-only",
            &format!("garage:{BUCKET}/interop/ferry"),
        ],
    ) else {
        return;
    };
    let mut names: Vec<&str> = ls.stdout.lines().collect();
    names.sort();
    assert_eq!(
        names,
        [
            "d/big",
            "d/e/f/deep name é",
            "d/e/second name",
            "d/link.rclonelink",
            "d/run",
            "empty",
            "small"
        ],
        "{ls}"
    );
    // (Not with --links too: rclone 1.60 then applies a symlink's mode to its target.)
    let by_rclone = sc.tmp.path().join("by-rclone");
    rclone(
        &g,
        &[
            "copy",
            "-M",
            &format!("garage:{BUCKET}/interop/ferry"),
            s(&by_rclone),
        ],
    );
    let files = TREE_FILES;
    assert_same_nodes(&sc.src, &by_rclone, &files, true);
    assert_eq!(
        std::fs::read(by_rclone.join("d/link.rclonelink")).unwrap(),
        b"../small"
    );
    // What rclone uploads (with --metadata: mode, owner, times), ferry reads back.
    rclone(
        &g,
        &[
            "copy",
            "-M",
            "--links",
            s(&sc.src),
            &format!("garage:{BUCKET}/interop/rclone"),
        ],
    );
    let r = g.ferry(&["copy", &g.url("interop/rclone"), s(&sc.dst)]);
    r.assert_ok();
    assert_same_nodes(&sc.src, &sc.dst, &paths, true);
    // Without --metadata rclone writes the mtime alone; ferry takes it and gives
    // files the mode a new file gets.
    rclone(
        &g,
        &[
            "copy",
            s(&sc.src),
            &format!("garage:{BUCKET}/interop/plain"),
        ],
    );
    let plain = sc.tmp.path().join("plain");
    g.ferry(&["copy", &g.url("interop/plain"), s(&plain)])
        .assert_ok();
    assert_same_nodes(&sc.src, &plain, &files, false);
}

/// PUTs `body` as `key` in the test bucket with curl's SigV4, the key sent as it is
/// (no `..` folding), for keys no S3 library would make.
pub(crate) fn curl_put(g: &Garage, key: &str, body: &str) -> bool {
    let url = format!("http://127.0.0.1:{}/{BUCKET}/{key}", g.nodes[0].s3_port);
    let out = Command::new("curl")
        .args([
            "-sS",
            "--fail-with-body",
            "--path-as-is",
            "-X",
            "PUT",
            "--data-binary",
            body,
        ])
        .args(["--aws-sigv4", "aws:amz:garage:s3", "-H"])
        .arg(format!(
            "x-amz-content-sha256: {}",
            sha256_hex(body.as_bytes())
        ))
        .arg("--user")
        .arg(format!("{KEY_ID}:{SECRET}"))
        .arg(&url)
        .output()
        .expect("curl");
    if !out.status.success() {
        eprintln!(
            "curl PUT {key}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out.status.success()
}

/// The SHA-256 of `bytes` in hex (sha256sum's).
fn sha256_hex(bytes: &[u8]) -> String {
    use std::io::Write;
    let mut child = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sha256sum");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)[..64].to_string()
}

#[test]
fn hostile_object_keys_are_refused_naming_them_and_nothing_leaves_dst() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    assert!(curl_put(&g, "h/ok", "fine"), "curl could not PUT");
    let long = format!("h/{}", "n".repeat(300));
    assert!(curl_put(&g, &long, "long"));
    let r = g.ferry(&["copy", &g.url("h"), s(&sc.dst)]);
    r.assert_status(1);
    let errors = r.errors();
    assert_eq!(errors.len(), 1, "{r}");
    assert!(
        errors[0].contains(&"n".repeat(300)) && errors[0].contains("longer than 255"),
        "{r}"
    );
    assert_eq!(std::fs::read(sc.dst.join("ok")).unwrap(), b"fine");
    // Keys that climb out of the prefix or hold an empty component end the listing
    // (object_store refuses them as paths): the error names the key, nothing is written.
    for (prefix, key) in [("x", "x/../../escape"), ("y", "y//abs"), ("z", "z/./dot")] {
        assert!(curl_put(&g, key, "out"), "curl could not PUT {key}");
        let dst = sc.tmp.path().join(format!("{prefix}-dst"));
        let r = g.ferry(&["copy", &g.url(prefix), s(&dst)]);
        r.assert_status(2);
        let errors = r.errors();
        assert!(errors.len() == 1 && errors[0].contains(key), "{r}");
        assert!(!dst.exists(), "{r}");
    }
    assert!(!sc.tmp.path().join("escape").exists());
    assert!(!sc.dst.join("../escape").exists());
}
