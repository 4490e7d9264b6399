//! `ferry serve --listen` and `ferry copy` to and from `ferry://`: both ways over TLS
//! and plain TCP, resume after a cut and after the server is killed, token,
//! certificate pinning, confinement, hostile bytes, many clients in a memory budget,
//! admission.

use crate::common::build::*;
use crate::common::compare::assert_same_tree;
use crate::common::{scratch, Scratch};
use crate::copy::{
    assert_resumed, assert_whole_copy, every_kind, nothing_partial_looks_complete, s,
};
use crate::daemon::{cutting_proxy, free_port, Daemon};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;

/// Whether a file below `src` is at the same place below `dst` with its size and
/// mtime (set last: it is complete).
fn any_complete_file(src: &Path, dst: &Path) -> bool {
    std::fs::read_dir(src).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let (from, to) = (e.path(), dst.join(e.file_name()));
            match (
                std::fs::symlink_metadata(&from),
                std::fs::symlink_metadata(&to),
            ) {
                (Ok(a), _) if a.is_dir() => any_complete_file(&from, &to),
                (Ok(a), Ok(b)) => {
                    b.is_file()
                        && (a.size(), a.mtime(), a.mtime_nsec())
                            == (b.size(), b.mtime(), b.mtime_nsec())
                }
                _ => false,
            }
        })
    })
}

/// Polls `cond` until it holds, for at most 30 s (then fails naming `what`).
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "waited 30 s for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub fn token(sc: &Scratch, secret: &str) -> String {
    let path = sc.tmp.path().join(format!("token-{secret}"));
    write(&path, format!("{secret}\n").as_bytes());
    path.display().to_string()
}

/// Many small files and a few large ones, below `s.src`.
pub fn files(sc: &Scratch, small: usize, large: usize, large_size: usize) {
    mkdirs(&sc.src.join("small"));
    for i in 0..small {
        write(
            &sc.src.join(format!("small/f{i}")),
            &pattern(i as u64, 3000 + i),
        );
    }
    for i in 0..large {
        write(
            &sc.src.join(format!("large{i}")),
            &pattern(1000 + i as u64, large_size),
        );
    }
    stamp_times(&sc.src);
}

#[test]
fn upload_and_download_over_tls_keep_every_kind_and_pin_the_server() {
    let sc = scratch();
    every_kind(&sc);
    let tok = token(&sc, "s3cret");
    let d = Daemon::start(&["--token-file", &tok]);
    assert!(
        d.log().contains("certificate fingerprint SHA256:"),
        "{}",
        d.log()
    );
    let up = d.copy(s(&sc.src), &d.url("up"), &["--token-file", &tok]);
    assert_whole_copy(&up, &sc.src);
    assert!(
        up.stderr
            .contains("first connection: trusting its certificate"),
        "{up}"
    );
    assert_same_tree(&sc.src, &d.root.join("up"));
    let known = std::fs::read_to_string(d.client_config().join("ferry/known_servers"))
        .expect("known_servers written");
    assert!(
        known.starts_with(&format!("127.0.0.1:{} SHA256:", d.port)),
        "{known}"
    );
    let back = sc.tmp.path().join("back");
    let down = d.copy(
        &d.url("up"),
        s(&back),
        &["--token-file", &tok, "--compress"],
    );
    assert_whole_copy(&down, &sc.src);
    assert!(!down.stderr.contains("first connection"), "{down}");
    assert_same_tree(&sc.src, &back);
    // Up to date: nothing goes again.
    let again = d.copy(s(&sc.src), &d.url("up"), &["--token-file", &tok]);
    again.assert_ok();
    again.json().assert_counts(&[("files", 0), ("bytes", 0)]);
}

#[test]
fn plain_tcp_only_with_insecure_on_both_ends() {
    let sc = scratch();
    files(&sc, 20, 1, 2 * MIB);
    let d = Daemon::start(&["--insecure"]);
    d.copy(s(&sc.src), &d.url("x"), &["--insecure"]).assert_ok();
    assert_same_tree(&sc.src, &d.root.join("x"));
    // A TLS client at a plain server, and a plain client at a TLS server: errors.
    let r = d.copy(s(&sc.src), &d.url("y"), &[]);
    r.assert_status(2);
    assert!(r.stderr.contains("TLS"), "{r}");
    let tls = Daemon::start(&[]);
    let r = tls.copy(s(&sc.src), &tls.url("y"), &["--insecure"]);
    r.assert_status(2);
    assert!(!tls.root.join("y").exists());
}

#[test]
fn a_connection_cut_mid_file_then_rerun_sends_only_the_rest() {
    let sc = scratch();
    files(&sc, 300, 3, 6 * MIB);
    let d = Daemon::start(&[]);
    // Upload: the connection is cut after 10 MB from the client, inside a large file.
    let proxy = cutting_proxy(d.port, 10 * MIB as u64, u64::MAX);
    let r = d.copy(s(&sc.src), &d.url_via(proxy, "up"), &[]);
    r.assert_status(2);
    // The server ends its side (removing the file it was writing) on its own time.
    d.wait_for_log("closed the connection");
    let dst = d.root.join("up");
    nothing_partial_looks_complete(&sc.src, &dst);
    let again = d.copy(s(&sc.src), &d.url("up"), &[]);
    assert_resumed(&again, &sc.src, &dst);
    // Download: cut after 10 MB from the server, inside a large file.
    let back = sc.tmp.path().join("back");
    let proxy = cutting_proxy(d.port, u64::MAX, 10 * MIB as u64);
    let r = d.copy(&d.url_via(proxy, "up"), s(&back), &[]);
    assert_eq!(r.status, 2, "{r}");
    assert!(r.stderr.contains("closed the connection"), "{r}");
    nothing_partial_looks_complete(&sc.src, &back);
    let again = d.copy(&d.url("up"), s(&back), &[]);
    assert_resumed(&again, &sc.src, &back);
}

#[test]
fn a_server_killed_mid_upload_and_restarted_finishes_on_rerun() {
    let sc = scratch();
    files(&sc, 200, 4, 2 * MIB);
    let mut d = Daemon::start(&["--bwlimit", "2M"]);
    let child = d
        .copy_command(s(&sc.src), &d.url("up"), &[])
        .spawn()
        .expect("spawn");
    // Killed once data has landed: the first file is complete.
    let up = d.root.join("up");
    wait_until("a complete file of the upload", || {
        any_complete_file(&sc.src, &up)
    });
    d.kill();
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    nothing_partial_looks_complete(&sc.src, &d.root.join("up"));
    d.restart();
    // The same identity: the pinned certificate is still the server's.
    let again = d.copy(s(&sc.src), &d.url("up"), &[]);
    assert_resumed(&again, &sc.src, &d.root.join("up"));
}

#[test]
fn a_wrong_or_missing_token_is_refused() {
    let sc = scratch();
    files(&sc, 3, 0, 0);
    let d = Daemon::start(&["--token-file", &token(&sc, "right")]);
    for args in [
        vec!["--token-file".to_string(), token(&sc, "wrong")],
        vec![],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = d.copy(s(&sc.src), &d.url("x"), &args);
        r.assert_status(2);
        assert!(r.stderr.contains("wrong or missing token"), "{r}");
    }
    assert!(!d.root.join("x").exists());
}

fn fingerprint_in(log: &str) -> String {
    let at = log.find("fingerprint ").expect("a fingerprint in the log") + 12;
    log[at..]
        .split_whitespace()
        .next()
        .expect("fingerprint")
        .to_owned()
}

#[test]
fn a_changed_certificate_is_refused_loudly_until_the_new_one_is_given() {
    let sc = scratch();
    files(&sc, 3, 0, 0);
    let port = free_port();
    let first = tempfile::tempdir().expect("tempdir");
    let mut d = Daemon::start_in(first.path(), port, &[]);
    d.copy(s(&sc.src), &d.url("x"), &[]).assert_ok();
    d.kill();
    // Another server (another key) on the same address.
    let second = tempfile::tempdir().expect("tempdir");
    let other = Daemon::start_in(second.path(), port, &[]);
    let as_before = |args: &[&str]| {
        let mut cmd = other.copy_command(s(&sc.src), &other.url("y"), args);
        cmd.env("XDG_CONFIG_HOME", d.client_config());
        crate::common::run::run(cmd)
    };
    let r = as_before(&[]);
    r.assert_status(2);
    assert!(
        r.stderr.contains("THE SERVER'S CERTIFICATE HAS CHANGED"),
        "{r}"
    );
    assert!(!other.root.join("y").exists());
    let wrong = fingerprint_in(&d.log());
    let r = as_before(&["--fingerprint", &wrong]);
    r.assert_status(2);
    let right = fingerprint_in(&other.log());
    as_before(&["--fingerprint", &right]).assert_ok();
    assert_same_tree(&sc.src, &other.root.join("y"));
}

#[test]
fn paths_outside_the_root_are_refused() {
    let sc = scratch();
    files(&sc, 3, 0, 0);
    let d = Daemon::start(&[]);
    let outside = sc.tmp.path().join("outside");
    mkdirs(&outside);
    write(&outside.join("secret"), b"not for clients");
    symlink(&outside, &d.root.join("evil"));
    for path in ["../x", "a/../../x"] {
        let r = d.copy(s(&sc.src), &d.url(path), &[]);
        r.assert_status(2);
        assert!(r.stderr.contains("may not contain `..`"), "{r}");
    }
    let r = d.copy(s(&sc.src), &d.url("evil/x"), &[]);
    r.assert_status(2);
    assert!(r.stderr.contains("evil: refused: a symlink"), "{r}");
    let back = sc.tmp.path().join("back");
    let r = d.copy(&d.url("evil"), s(&back), &[]);
    r.assert_status(2);
    assert!(r.stderr.contains("evil: refused: a symlink"), "{r}");
    assert!(!back.join("secret").exists());
    assert_eq!(std::fs::read_dir(&outside).expect("read").count(), 1);
    // An absolute path is taken beneath the root.
    let r = d.copy(&d.url("/etc"), s(&back), &[]);
    assert_ne!(r.status, 0, "{r}");
    assert!(!back.join("passwd").exists());
}

#[test]
fn read_only_serves_downloads_and_refuses_uploads() {
    let sc = scratch();
    files(&sc, 5, 0, 0);
    let d = Daemon::start(&["--read-only"]);
    let r = d.copy(s(&sc.src), &d.url("x"), &[]);
    r.assert_status(2);
    assert!(r.stderr.contains("read-only"), "{r}");
    assert!(!d.root.join("x").exists());
    copy_tree_into(&sc.src, &d.root.join("x"));
    let back = sc.tmp.path().join("back");
    d.copy(&d.url("x"), s(&back), &[]).assert_ok();
    assert_same_tree(&sc.src, &back);
}

fn copy_tree_into(src: &std::path::Path, dst: &std::path::Path) {
    crate::common::run::copy_ok(src, dst, &["--no-progress"]);
}

/// Raw bytes to the daemon: what it answered (until it closed).
fn send_raw(port: u16, bytes: &[u8]) -> Vec<u8> {
    let mut sock = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let _ = sock.write_all(bytes);
    let _ = sock.shutdown(std::net::Shutdown::Write);
    let mut answer = Vec::new();
    let _ = sock.read_to_end(&mut answer);
    answer
}

use crate::hello;

fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![kind];
    f.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    f.extend_from_slice(payload);
    f
}

#[test]
fn garbage_oversized_frames_and_a_client_gone_mid_frame_leave_the_server_serving() {
    let sc = scratch();
    files(&sc, 5, 1, MIB);
    let d = Daemon::start(&["--insecure"]);
    let mut rng = 7u64;
    let garbage: Vec<u8> = (0..5000)
        .map(|_| {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (rng >> 33) as u8
        })
        .collect();
    send_raw(d.port, &garbage);
    // A frame announcing more than a frame may hold: an error, no allocation of it.
    let mut big = hello();
    big.extend_from_slice(&[1, 0xff, 0xff, 0xff, 0x7f]);
    let answer = send_raw(d.port, &big);
    assert!(
        String::from_utf8_lossy(&answer).contains("more than"),
        "{answer:?}"
    );
    // An upload whose client goes away in the middle of a data frame.
    let mut request = vec![1u8, 0, 0, 0, 0];
    request.extend_from_slice(&4u32.to_le_bytes());
    request.extend_from_slice(b"half");
    let mut cut = hello();
    cut.extend(frame(1, &request));
    let mut data = frame(5, &vec![0u8; 100_000]);
    data.truncate(50_000);
    cut.extend(data);
    send_raw(d.port, &cut);
    d.wait_for_log("middle of a frame");
    let log = d.log();
    for said in [
        "does not speak ferry's protocol",
        "more than",
        "middle of a frame",
    ] {
        assert!(log.contains(said), "{said:?} not in the log: {log}");
    }
    // Nothing half-written looks like a file, and the server serves on.
    let half = d.root.join("half");
    assert!(!half.exists() || std::fs::read_dir(&half).expect("read").count() == 0);
    d.copy(s(&sc.src), &d.url("ok"), &["--insecure"])
        .assert_ok();
    assert_same_tree(&sc.src, &d.root.join("ok"));
    // Garbage at a TLS daemon: the handshake fails, the daemon lives.
    let tls = Daemon::start(&[]);
    send_raw(tls.port, &garbage);
    tls.copy(s(&sc.src), &tls.url("ok"), &[]).assert_ok();
}

/// `n` clients uploading `sc.src` at once to `up0`.. on `d`: every one succeeds.
fn uploads_at_once(d: &Daemon, sc: &Scratch, n: usize, args: &[&str]) {
    let children: Vec<_> = (0..n)
        .map(|i| {
            let mut cmd = d.copy_command(s(&sc.src), &d.url(&format!("up{i}")), args);
            cmd.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            cmd.spawn().expect("spawn")
        })
        .collect();
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("wait");
        assert!(out.status.success(), "client {i}: {out:?}\n{}", d.log());
    }
    for i in 0..n {
        assert_same_tree(&sc.src, &d.root.join(format!("up{i}")));
    }
}

#[test]
fn fifty_clients_at_once_keep_the_server_within_its_memory_budget() {
    let sc = scratch();
    files(&sc, 200, 3, 3 * MIB);
    let budget = 16 * MIB as u64;
    let d = Daemon::start(&["--insecure", "--memory", "16M", "-j", "2"]);
    // The pin is made once, before the clients race to write it.
    uploads_at_once(&d, &sc, 50, &["--insecure", "-j", "2"]);
    let peak = d.peak_rss();
    eprintln!("server peak RSS with 50 clients: {} MiB", peak >> 20);
    // 33 MiB when all 50 ran at once (by hand, the same tree); 23 MiB with 4 running
    // (the 16 buffers over 4).
    assert!(
        peak < budget + (12 << 20),
        "peak RSS {} MiB over the 16 MiB budget + 12 MiB",
        peak >> 20
    );
}

#[test]
fn one_buffer_per_client_moves_small_and_large_files_too() {
    let sc = scratch();
    files(&sc, 300, 2, 3 * MIB);
    let d = Daemon::start(&["--insecure", "--per-client-buffer", "--memory", "8M"]);
    uploads_at_once(&d, &sc, 6, &["--insecure"]);
}

/// When anything below `path` last changed, earliest and latest (ctime, in ns).
fn changed_between(path: &Path) -> (i128, i128) {
    let meta = std::fs::symlink_metadata(path).expect("stat");
    let at = i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec());
    let mut span = (at, at);
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).expect("read_dir") {
            let (first, last) = changed_between(&entry.expect("entry").path());
            span = (span.0.min(first), span.1.max(last));
        }
    }
    span
}

/// With 4 MiB of buffers one upload runs at a time (the pool's buffers over 4); the
/// others are admitted and queue: each arrives, none is told the server is busy, and
/// the trees were written one after another: no two uploads' change times overlap,
/// unless the earlier had run for the daemon's patience (1 s without an upload
/// starting or ending lets the next one run beside it; a loaded machine gets there).
#[test]
fn admitted_uploads_past_the_running_ones_queue_and_all_arrive() {
    let sc = scratch();
    files(&sc, 400, 1, 2 * MIB);
    let d = Daemon::start(&["--insecure", "--memory", "4M", "--busy-timeout", "1"]);
    d.wait_for_log("uploads running: 1)");
    uploads_at_once(&d, &sc, 6, &["--insecure"]);
    let mut spans: Vec<_> = (0..6)
        .map(|i| changed_between(&d.root.join(format!("up{i}"))))
        .collect();
    spans.sort();
    // The first change of an upload comes a little after its turn: half the patience
    // is left for that.
    let patient = 500_000_000;
    for pair in spans.windows(2) {
        assert!(
            pair[0].1 <= pair[1].0 || pair[1].0 - pair[0].0 >= patient,
            "two uploads were written at once: {spans:?}\n{}",
            d.log()
        );
    }
}

#[test]
fn past_its_places_a_client_waits_then_is_told_the_server_is_busy() {
    let sc = scratch();
    files(&sc, 10, 2, 2 * MIB);
    let d = Daemon::start(&[
        "--insecure",
        "--max-clients",
        "1",
        "--busy-timeout",
        "1",
        "--bwlimit",
        "1M",
    ]);
    let slow = d
        .copy_command(s(&sc.src), &d.url("a"), &["--insecure"])
        .spawn()
        .expect("spawn");
    // The slow one has its place once its destination is made.
    wait_until("the first upload's destination", || {
        d.root.join("a").exists()
    });
    let t = Instant::now();
    let r = d.copy(s(&sc.src), &d.url("b"), &["--insecure"]);
    r.assert_status(2);
    assert!(r.stderr.contains("server busy"), "{r}");
    assert!(t.elapsed() >= Duration::from_secs(1), "it did not wait");
    let out = slow.wait_with_output().expect("wait");
    assert!(out.status.success(), "{out:?}");
    assert_same_tree(&sc.src, &d.root.join("a"));
}

/// Paths of regular files and symlinks below `root`, sorted, for comparing selections.
fn entries_below(root: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).expect("read_dir") {
            let e = e.expect("entry");
            let path = e.path();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            match e.file_type().expect("type").is_dir() {
                true => dirs.push(path),
                false => out.push(rel),
            }
        }
    }
    out.sort();
    out
}

#[test]
fn filters_choose_what_goes_both_ways_and_l_follows_links_up() {
    let sc = scratch();
    for p in [
        "keep/a.o", "keep/a.c", "src/b.o", "src/b.c", "build/x", "top.o",
    ] {
        mkdirs(sc.src.join(p).parent().unwrap());
        write(&sc.src.join(p), p.as_bytes());
    }
    std::os::unix::fs::symlink("src/b.c", sc.src.join("link")).unwrap();
    let d = Daemon::start(&["--insecure"]);
    // Up: the client's walk chooses; first match wins, /build/ anchored, dirs only.
    let rules = [
        "--insecure",
        "--include",
        "keep/*.o",
        "--exclude",
        "*.o",
        "--exclude",
        "/build/",
        "-L",
    ];
    d.copy(s(&sc.src), &d.url("up"), &rules).assert_ok();
    let up = d.root.join("up");
    assert_eq!(
        entries_below(&up),
        ["keep/a.c", "keep/a.o", "link", "src/b.c"]
    );
    assert!(
        !std::fs::symlink_metadata(up.join("link"))
            .unwrap()
            .is_symlink(),
        "-L: the file itself"
    );
    assert_eq!(std::fs::read(up.join("link")).unwrap(), b"src/b.c");
    // Down: the rules travel in the request and the server's walk chooses.
    let back = sc.tmp.path().join("back");
    let rules_file = sc.tmp.path().join("rules");
    // keep/ is taken by its include before `- keep` is reached: first match wins.
    write(&rules_file, b"# no C\n*.c\n+ /keep/\n- keep\n");
    d.copy(
        &d.url("up"),
        s(&back),
        &["--insecure", "--exclude-from", s(&rules_file)],
    )
    .assert_ok();
    assert_eq!(entries_below(&back), ["keep/a.o", "link"]);
    // Rules the server cannot use are refused by name, before anything is sent.
    let bad = sc.tmp.path().join("bad");
    let r = d.copy(&d.url("up"), s(&bad), &["--insecure", "--exclude", "a[b"]);
    r.assert_status(2);
    assert!(r.stderr.contains("a[b"), "{r}");
    assert!(!bad.join("keep").exists());
    // Mirroring goes over the network too: the rules keep what they exclude.
    let up = d.root.join("up");
    write(&up.join("stale"), b"s");
    let r = d.copy(
        s(&sc.src),
        &d.url("up"),
        &["--insecure", "--delete", "--exclude", "*.o"],
    );
    r.assert_ok();
    assert!(!up.join("stale").exists(), "{r}");
}

#[test]
fn update_keeps_files_newer_at_the_receiving_end_both_ways() {
    let sc = scratch();
    let at = |sec: i64| ts(1_800_000_000 + sec, 0);
    let put = |path: &std::path::Path, text: &[u8], when| {
        write(path, text);
        set_times(path, when, when);
    };
    let d = Daemon::start(&["--insecure"]);
    let there = d.root.join("t");
    mkdirs(&sc.src);
    mkdirs(&there);
    // Up: `a` is newer there (kept with -u), `b` older there (replaced).
    put(&sc.src.join("a"), b"src a", at(1));
    put(&sc.src.join("b"), b"src b", at(2));
    put(&there.join("a"), b"there a", at(2));
    put(&there.join("b"), b"there b", at(1));
    d.copy(s(&sc.src), &d.url("t"), &["--insecure", "-u"])
        .assert_ok();
    assert_eq!(std::fs::read(there.join("a")).unwrap(), b"there a");
    assert_eq!(std::fs::read(there.join("b")).unwrap(), b"src b");
    // Down: the rule travels in the request; the server leaves out what is newer here.
    let back = sc.tmp.path().join("back");
    mkdirs(&back);
    put(&back.join("a"), b"back a", at(3));
    put(&back.join("b"), b"back b", at(0));
    d.copy(&d.url("t"), s(&back), &["--insecure", "-u"])
        .assert_ok();
    assert_eq!(std::fs::read(back.join("a")).unwrap(), b"back a");
    assert_eq!(std::fs::read(back.join("b")).unwrap(), b"src b");
    // Without -u the sender's version wins.
    d.copy(&d.url("t"), s(&back), &["--insecure"]).assert_ok();
    assert_eq!(std::fs::read(back.join("a")).unwrap(), b"there a");
}
