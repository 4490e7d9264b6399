//! Connections before they are authenticated: a thousand of them sending frames of a
//! MiB keep the daemon within its memory budget while a good client is served; a
//! client trickling its handshake is closed at its one deadline, and the log says it
//! timed out; so does the log of a connection idle after its handshake.

use crate::common::compare::assert_same_tree;
use crate::common::scratch;
use crate::copy::s;
use crate::daemon::Daemon;
use crate::served::{files, token};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;

/// Connections in the flood.
const FLOOD: usize = 1000;

use crate::hello;

/// A frame's head: its kind and the length it claims.
fn head(kind: u8, len: usize) -> Vec<u8> {
    let mut h = vec![kind];
    h.extend_from_slice(&(len as u32).to_le_bytes());
    h
}

/// An upload request for `path`, as a frame.
fn upload_request(path: &[u8]) -> Vec<u8> {
    let mut payload = vec![1u8, 0, 0, 0, 0];
    payload.extend_from_slice(&(path.len() as u32).to_le_bytes());
    payload.extend_from_slice(path);
    let mut f = head(1, payload.len());
    f.extend(payload);
    f
}

/// Opens connection `i` of the flood: the hello, then a token frame of a MiB, or a
/// request frame of a MiB without a token, each with its bytes; or only the head
/// of a MiB frame, or only the hello, then nothing.
fn flood_one(port: u16, i: usize) -> Option<TcpStream> {
    let mut sock = TcpStream::connect(("127.0.0.1", port)).ok()?;
    sock.set_write_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut bytes = hello();
    match i % 4 {
        0 | 1 => {
            bytes.extend(head([12, 1][i % 2], MIB));
            bytes.extend(std::iter::repeat_n(b'x', MIB));
        }
        2 => bytes.extend(head(12, MIB)),
        _ => {}
    }
    // The daemon may close it before it took all: that is its right.
    let _ = sock.write_all(&bytes);
    Some(sock)
}

#[test]
fn a_thousand_unauthenticated_connections_keep_the_daemon_in_its_budget() {
    let sc = scratch();
    files(&sc, 50, 1, MIB);
    let tok = token(&sc, "right");
    let d = Daemon::start(&["--insecure", "--token-file", &tok, "--memory", "64M"]);
    let kept = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for t in 0..8 {
            let kept = &kept;
            let port = d.port;
            scope.spawn(move || {
                for i in (t..FLOOD).step_by(8) {
                    if let Some(sock) = flood_one(port, i) {
                        kept.lock().expect("lock").push(sock);
                    }
                }
            });
        }
    });
    let opened = kept.lock().expect("lock").len();
    assert!(opened >= FLOOD * 9 / 10, "only {opened} connections opened");
    // While they are all open: a good client is served.
    let r = d.copy(
        s(&sc.src),
        &d.url("good"),
        &["--insecure", "--token-file", &tok],
    );
    r.assert_ok();
    assert_same_tree(&sc.src, &d.root.join("good"));
    let peak = d.peak_rss();
    eprintln!("peak RSS {} MiB with {opened} connections", peak >> 20);
    drop(kept);
    assert!(
        peak <= (64 + 32) * MIB as u64,
        "the daemon's peak RSS was {} MiB with {opened} unauthenticated connections\n{}",
        peak >> 20,
        d.log()
    );
    // And after them.
    let r = d.copy(
        s(&sc.src),
        &d.url("after"),
        &["--insecure", "--token-file", &tok],
    );
    r.assert_ok();
}

#[test]
fn a_client_trickling_its_handshake_is_closed_at_the_deadline() {
    let d = Daemon::start(&["--insecure", "--idle-timeout", "2"]);
    let mut sock = TcpStream::connect(("127.0.0.1", d.port)).expect("connect");
    sock.set_read_timeout(Some(Duration::from_millis(700)))
        .expect("timeout");
    let mut bytes = hello();
    bytes.extend(upload_request(b"slow/with/a/long/enough/path"));
    let start = Instant::now();
    let mut closed = false;
    // A byte every 0.7 s (the read's timeout paces it): each read of the daemon's
    // sees one within the idle timeout.
    for b in bytes {
        let mut answer = [0u8; 64];
        let gone = match sock.write_all(&[b]) {
            Err(_) => true,
            Ok(()) => match sock.read(&mut answer) {
                Ok(0) => true,
                Ok(_) => false,
                Err(e) => !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
            },
        };
        if gone {
            closed = true;
            break;
        }
    }
    let took = start.elapsed();
    assert!(closed, "the trickling client was served for {took:?}");
    assert!(took < Duration::from_secs(8), "closed only after {took:?}");
    d.wait_for_log("timed out");
    assert!(d.log().contains("handshake"), "{}", d.log());
}

#[test]
fn a_connection_idle_after_its_handshake_is_logged_as_a_timeout() {
    let d = Daemon::start(&["--insecure", "--idle-timeout", "1"]);
    let mut sock = TcpStream::connect(("127.0.0.1", d.port)).expect("connect");
    let mut bytes = hello();
    bytes.extend(upload_request(b"idle"));
    sock.write_all(&bytes).expect("write");
    // Then nothing: the daemon gives up after a second.
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let _ = sock.read_to_end(&mut Vec::new());
    d.wait_for_log("idle timeout");
    assert!(!d.log().contains("temporarily unavailable"), "{}", d.log());
}

#[test]
fn wrong_tokens_from_an_address_are_slowed_down() {
    let sc = scratch();
    files(&sc, 2, 0, 0);
    let d = Daemon::start(&["--insecure", "--token-file", &token(&sc, "right")]);
    let wrong = token(&sc, "wrong");
    let mut ends = Vec::new();
    for _ in 0..3 {
        let r = d.copy(
            s(&sc.src),
            &d.url("x"),
            &["--insecure", "--token-file", &wrong],
        );
        r.assert_status(2);
        assert!(r.stderr.contains("wrong or missing token"), "{r}");
        ends.push(Instant::now());
    }
    // The third was checked no sooner than twice the first delay (500 ms) after the
    // second was refused, which the client saw a moment later (unslowed, the three
    // took about 12 ms each).
    let gap = ends[2] - ends[1];
    assert!(gap >= Duration::from_millis(400), "{gap:?}");
    // The right token is let in, after the address's delay.
    d.copy(
        s(&sc.src),
        &d.url("x"),
        &["--insecure", "--token-file", &token(&sc, "right")],
    )
    .assert_ok();
}
