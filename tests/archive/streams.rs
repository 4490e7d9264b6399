//! Where archives come from and go besides plain files: standard output with a JSON
//! summary, fifos and pipes named by path, a reader that goes away; and paths that are
//! not archives, or not places to unpack to.

use crate::common::run::{run, FERRY};
use crate::common::{build, scratch, skip_unless_root, trees};
use crate::{ferry, pack};
use rustix::fs::FileType;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

/// `pack SRC - --json`: standard output is the archive alone (it ends in ferry's
/// footer), and the summary goes to standard error.
#[test]
fn pack_to_stdout_keeps_the_json_summary_out_of_the_archive() {
    let s = scratch();
    trees::mixed(&s.src);
    let out = Command::new(FERRY)
        .args(["pack", "--json"])
        .arg(&s.src)
        .arg("-")
        .output()
        .expect("run ferry");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let footer = &out.stdout[out.stdout.len() - 64..];
    assert_eq!(
        &footer[..8],
        b"FERRYEND",
        "the archive does not end in its footer"
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&out.stderr).expect("the summary on stderr is JSON");
    assert!(
        summary["files"].as_u64().is_some_and(|n| n > 0),
        "{summary}"
    );
}

/// A fifo named as the archive is written in order, and read as a stream when named
/// to `ls` and `unpack`, as tar does both.
#[test]
fn pack_writes_to_a_fifo_and_unpack_reads_from_one() {
    let s = scratch();
    trees::mixed(&s.src);
    let fifo = s.tmp.path().join("fifo");
    build::fifo(&fifo);
    let reader = Command::new(FERRY)
        .arg("unpack")
        .arg(&fifo)
        .arg(&s.dst)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn unpack");
    let packed = ferry(&[&"pack", &s.src, &fifo]);
    packed.assert_ok();
    let unpacked = reader.wait_with_output().expect("wait for unpack");
    assert!(
        unpacked.status.success(),
        "{}",
        String::from_utf8_lossy(&unpacked.stderr)
    );
    crate::common::compare::assert_same_tree(&s.src, &s.dst);
}

/// `cat` and `ls` into a pipe whose reader has gone end as `cat` does, killed by
/// SIGPIPE, saying nothing (they used to blame the archive for the broken pipe).
#[test]
fn a_reader_that_goes_away_ends_cat_quietly() {
    let s = scratch();
    build::write(&s.src.join("big"), &build::pattern(3, 4 << 20));
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &[]);
    let mut child = Command::new(FERRY)
        .arg("cat")
        .arg(&archive)
        .arg("big")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cat");
    let mut first = [0u8; 1];
    let mut stdout = child.stdout.take().expect("stdout");
    stdout.read_exact(&mut first).expect("one byte");
    drop(stdout);
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.signal(), Some(SIGPIPE), "{:?}", out.status);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// SIGPIPE's number on Linux.
const SIGPIPE: i32 = 13;

/// A directory named as the archive, and a file named as the destination, are errors
/// naming the path and what was being done.
#[test]
fn paths_that_are_not_archives_or_destinations_are_named() {
    let s = scratch();
    trees::mixed(&s.src);
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &[]);
    let dir = s.src.display().to_string();
    for args in [vec!["ls"], vec!["cat"], vec!["unpack"]] {
        let mut cmd = Command::new(FERRY);
        cmd.args(&args).arg(&s.src);
        match args[0] {
            "cat" => cmd.arg("f"),
            "unpack" => cmd.arg(&s.dst),
            _ => &mut cmd,
        };
        let r = run(cmd);
        r.assert_status(2);
        assert_eq!(
            r.errors(),
            [format!("ferry: {dir}: open archive: it is a directory")],
            "{r}"
        );
    }
    let file = s.tmp.path().join("a-file");
    build::write(&file, b"not a directory");
    let r = ferry(&[&"unpack", &archive, &file]);
    r.assert_status(2);
    assert_eq!(
        r.errors(),
        [format!(
            "ferry: {}: open destination: Not a directory (os error 20)",
            file.display()
        )],
        "{r}"
    );
}

/// `ls -l` shows a device's numbers where a file's size would be, as `tar -tv` does,
/// from an index and from a stream alike.
#[test]
fn ls_long_shows_device_numbers() {
    if skip_unless_root() {
        return;
    }
    let s = scratch();
    build::mkdirs(&s.src);
    build::device(&s.src.join("sda"), FileType::BlockDevice, 8, 0);
    build::device(&s.src.join("null"), FileType::CharacterDevice, 1, 3);
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &[]);
    let streamed = run({
        let mut cmd = Command::new(FERRY);
        cmd.args(["ls", "-l", "-"]);
        cmd.stdin(std::fs::File::open(&archive).expect("open"));
        cmd
    });
    for r in [ferry(&[&"ls", &"-l", &archive]), streamed] {
        r.assert_ok();
        let line = |name: &str| {
            r.stdout
                .lines()
                .find(|l| l.ends_with(name))
                .unwrap_or_else(|| panic!("no {name} in\n{r}"))
                .to_owned()
        };
        assert!(line(" sda").starts_with("brw"), "{r}");
        assert!(line(" sda").contains(" 8,0 "), "{r}");
        assert!(line(" null").contains(" 1,3 "), "{r}");
    }
}

/// `pack SRC -` with standard output on a terminal refuses, as GNU tar does, instead of
/// filling the terminal with binary.
#[test]
fn pack_refuses_to_write_an_archive_to_a_terminal() {
    let s = scratch();
    trees::mixed(&s.src);
    let script = "import pty, subprocess, sys\n\
                  main, side = pty.openpty()\n\
                  r = subprocess.run(sys.argv[1:], stdout=side, stderr=subprocess.PIPE)\n\
                  sys.stderr.buffer.write(r.stderr)\n\
                  sys.exit(r.returncode)\n";
    let mut cmd = Command::new("python3");
    cmd.args(["-c", script, FERRY, "pack"]).arg(&s.src).arg("-");
    let r = run(cmd);
    r.assert_status(2);
    assert_eq!(
        r.errors(),
        [
            "ferry: refusing to write an archive to a terminal: redirect standard output to a \
          file, or pipe it on"
        ],
        "{r}"
    );
}

/// `--reflink=always` ("clone or fail") with an archive read or written as a stream
/// fails at once, naming it: nothing can be cloned through a pipe (it used to copy
/// everything and exit 0).
#[test]
fn reflink_always_through_a_stream_is_refused() {
    let s = scratch();
    trees::mixed(&s.src);
    let archive = s.tmp.path().join("a.far");
    pack(&s.src, &archive, &[]);
    let said = |out: std::process::Output| {
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            err.starts_with("ferry: -: --reflink=always: the archive is "),
            "{err}"
        );
        assert!(
            err.contains("no data can be cloned through a stream"),
            "{err}"
        );
    };
    said(
        Command::new(FERRY)
            .args(["unpack", "--reflink=always", "-"])
            .arg(&s.dst)
            .stdin(std::fs::File::open(&archive).expect("open"))
            .output()
            .expect("run ferry"),
    );
    assert!(!s.dst.exists(), "something was unpacked");
    said(
        Command::new(FERRY)
            .args(["pack", "--reflink=always"])
            .arg(&s.src)
            .arg("-")
            .stdout(Stdio::piped())
            .output()
            .expect("run ferry"),
    );
}
