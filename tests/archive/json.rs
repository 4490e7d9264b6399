//! With `--json`, every way out of `copy`, `pack` and `unpack` prints exactly one JSON
//! summary on its stream (standard output; standard error for `pack SRC -`), a job that
//! could not start or go on too: its `errors` count it and `error` gives the line
//! printed on stderr (issue 21: unpack of a missing archive, of a directory, of lz4
//! input (damaged lz4 since lz4 is read), and pack into a missing directory printed none).

use crate::common::{build, scratch, skip};
use crate::{ferry, ferry_command};
use std::ffi::OsStr;

/// Checks a failed run's one summary (`json`, the whole of its stream): exit status 2,
/// one error counted, and `error` the line stderr gave for it.
fn one_fatal_summary(what: &str, status: Option<i32>, json: &str, stderr: &str) {
    assert_eq!(status, Some(2), "{what}: exit status; stderr: {stderr}");
    let v: serde_json::Value = serde_json::from_str(json.trim())
        .unwrap_or_else(|e| panic!("{what}: not exactly one JSON object ({e}): {json:?}"));
    assert_eq!(v["errors"], 1, "{what}: {v}");
    let error = v["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: no error in the summary: {v}"));
    let line = format!("ferry: {error}");
    assert!(
        stderr.lines().any(|l| l == line),
        "{what}: the summary's error is not the line on stderr: {v}\n{stderr}"
    );
}

#[test]
fn every_failure_prints_one_json_summary_with_its_error() {
    let s = scratch();
    build::write(&s.src.join("f"), b"some data\n");
    let tmp = s.tmp.path();
    let tar = tmp.join("t.tar");
    crate::pack(&s.src, &tar, &[]);
    let empty = tmp.join("empty.tar");
    build::write(&empty, b"");
    let lz4 = tmp.join("t.tar.lz4");
    let lz4_made = std::process::Command::new("lz4")
        .args([OsStr::new("-q"), tar.as_os_str(), lz4.as_os_str()])
        .status()
        .is_ok_and(|st| st.success());
    if lz4_made {
        // Cut inside its frame header: damaged from the start.
        let bytes = std::fs::read(&lz4).expect("read");
        std::fs::write(&lz4, &bytes[..6]).expect("write");
    }
    let (nosuch, out) = (tmp.join("nosuch.tar"), tmp.join("out"));
    let missing_dir = tmp.join("no-such-dir/p.tar");
    let os = OsStr::new;
    let mut cases: Vec<(&str, [&OsStr; 3])> = vec![
        (
            "unpack of a missing archive",
            [os("unpack"), nosuch.as_os_str(), out.as_os_str()],
        ),
        (
            "unpack of a directory",
            [os("unpack"), s.src.as_os_str(), out.as_os_str()],
        ),
        (
            "unpack of an empty file",
            [os("unpack"), empty.as_os_str(), out.as_os_str()],
        ),
        (
            "copy of a missing source",
            [os("copy"), nosuch.as_os_str(), out.as_os_str()],
        ),
        (
            "pack of a missing source",
            [os("pack"), nosuch.as_os_str(), out.as_os_str()],
        ),
        (
            "pack into a missing directory",
            [os("pack"), s.src.as_os_str(), missing_dir.as_os_str()],
        ),
    ];
    if lz4_made {
        cases.push((
            "unpack of lz4 input cut short",
            [os("unpack"), lz4.as_os_str(), out.as_os_str()],
        ));
    } else {
        skip("lz4 is not installed: its input is not tried");
    }
    for (what, [command, from, to]) in cases {
        let r = ferry(&[&command, &from, &to, &"--json"]);
        one_fatal_summary(what, Some(r.status), &r.stdout, &r.stderr);
    }
    // `pack SRC -`: standard output is the archive, the summary goes to standard error.
    let out = ferry_command(&[&"pack", &nosuch, &"-", &"--json"])
        .stdout(std::process::Stdio::piped())
        .output()
        .expect("run ferry");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let (lines, json): (Vec<&str>, Vec<&str>) =
        stderr.lines().partition(|l| l.starts_with("ferry: "));
    one_fatal_summary(
        "pack of a missing source to -",
        out.status.code(),
        &json.join("\n"),
        &lines.join("\n"),
    );
}
