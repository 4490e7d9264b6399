//! What the serving end refuses: paths outside what the client named, garbage on the
//! wire.

use crate::common::build::*;
use crate::common::run::{run, FERRY};
use crate::common::scratch;
use crate::sshd::Sshd;
use std::io::Write;
use std::process::{Command, Stdio};

#[test]
fn a_remote_path_with_dot_dot_is_refused() {
    let Some(sshd) = Sshd::start() else { return };
    let sc = scratch();
    write(&sc.src.join("f"), b"data");
    let up = sshd.copy(sc.src.to_str().expect("path"), "127.0.0.1:../x", &[]);
    up.assert_status(2);
    assert!(up.stderr.contains("may not contain `..`"), "{up}");
    assert!(up.json().0["error"]
        .as_str()
        .is_some_and(|e| e.contains("..")));
    let down = sshd.copy("127.0.0.1:/tmp/../etc", sc.dst.to_str().expect("path"), &[]);
    down.assert_status(2);
    assert!(!sc.dst.exists(), "something was made");
}

#[test]
fn a_symlink_in_dst_pointing_outside_is_not_written_through() {
    let Some(sshd) = Sshd::start() else { return };
    let sc = scratch();
    let outside = sc.tmp.path().join("outside");
    mkdirs(&outside);
    mkdirs(&sc.dst);
    symlink(&outside, &sc.dst.join("evil"));
    mkdirs(&sc.src.join("evil"));
    write(&sc.src.join("evil/f"), b"should not leave dst");
    let r = sshd.copy(sc.src.to_str().expect("path"), &sshd.remote(&sc.dst), &[]);
    assert!(r.status <= 1, "{r}");
    assert_eq!(std::fs::read_dir(&outside).expect("read").count(), 0);
    // Downloaded, a symlink out of the tree is a symlink, never followed.
    write(&outside.join("secret"), b"secret");
    let back = sc.tmp.path().join("back");
    let d = sshd.copy(&sshd.remote(&sc.dst), back.to_str().expect("path"), &[]);
    d.assert_ok();
    assert!(std::fs::symlink_metadata(back.join("evil")).is_ok_and(|m| m.is_dir()));
    assert!(!back.join("evil/secret").exists());
}

/// Random bytes, and a greeting followed by random bytes, piped into `ferry serve
/// --stdio`: a clear error and exit status 2, never a panic.
#[test]
fn garbage_to_serve_is_a_clear_error() {
    for seed in 0..20u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut input: Vec<u8> = Vec::new();
        if seed % 2 == 1 {
            input.extend_from_slice(&crate::hello());
            input.push(rng.u8(2..=16));
        }
        input.extend((0..rng.usize(0..100_000)).map(|_| rng.u8(..)));
        let mut child = Command::new(FERRY)
            .args(["serve", "--stdio"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut stdin = child.stdin.take().expect("stdin");
        let _ = stdin.write_all(&input);
        drop(stdin);
        let out = child.wait_with_output().expect("wait");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "seed {seed}: {stderr}");
        assert!(stderr.starts_with("ferry serve: "), "seed {seed}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "seed {seed}: {stderr}");
        assert!(!stderr.contains("panicked"), "seed {seed}: {stderr}");
    }
    // Nothing at all: still one line.
    let mut cmd = Command::new(FERRY);
    cmd.args(["serve", "--stdio"]).stdin(Stdio::null());
    let r = run(cmd);
    r.assert_status(2);
}
