//! S3 over HTTPS, as against AWS: Garage (which speaks plain HTTP) behind a
//! TLS-terminating relay started by the test (rustls, a certificate made for the test
//! and trusted through `SSL_CERT_FILE`). An upload, a download, `ls` and `cat` work
//! through it, and over TLS ferry sends no SHA-256 of each body (`UNSIGNED-PAYLOAD`,
//! as the AWS SDKs do over HTTPS) unless `AWS_UNSIGNED_PAYLOAD=false` asks for one. The
//! relay sees the requests in clear, which is how the test knows.

use crate::common::build::*;
use crate::common::compare::assert_same_tree;
use crate::common::run::run;
use crate::common::scratch;
use crate::garage::Garage;
use crate::s;
use rustix::event::{poll, PollFd, PollFlags};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A TLS relay on a loopback port to a plain-HTTP port; what clients sent, in clear.
struct Relay {
    port: u16,
    cert_file: std::path::PathBuf,
    seen: Arc<Mutex<Vec<u8>>>,
}

impl Relay {
    /// A relay to `upstream`, its certificate (for `localhost`) written to `dir`.
    fn start(upstream: u16, dir: &std::path::Path) -> Relay {
        let made =
            rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("certificate");
        let cert_file = dir.join("relay.pem");
        std::fs::write(&cert_file, made.cert.pem()).expect("write the certificate");
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![CertificateDer::from(made.cert.der().to_vec())], key)
            .expect("server config");
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = seen.clone();
        // Ends with the test process; each connection ends when either side closes or
        // nothing moves for 30 s.
        std::thread::spawn(move || {
            for tcp in listener.incoming().flatten() {
                let (config, seen) = (config.clone(), seen2.clone());
                std::thread::spawn(move || {
                    let _ = relay(tcp, upstream, config, &seen);
                });
            }
        });
        Relay {
            port,
            cert_file,
            seen,
        }
    }

    /// What clients sent from byte `at` of it on, as lowercase text; and where it ends.
    fn requests_from(&self, at: usize) -> (String, usize) {
        let seen = self.seen.lock().expect("seen");
        let text = String::from_utf8_lossy(&seen[at.min(seen.len())..]).to_ascii_lowercase();
        (text, seen.len())
    }
}

/// Relays one connection: TLS from the client, plain to `upstream`; what the client
/// sends is kept in `seen` (its first 64 KiB a connection, enough for the headers).
fn relay(
    mut tcp: TcpStream,
    upstream: u16,
    config: Arc<ServerConfig>,
    seen: &Mutex<Vec<u8>>,
) -> std::io::Result<()> {
    let mut conn = ServerConnection::new(config).map_err(std::io::Error::other)?;
    let mut up = TcpStream::connect(("127.0.0.1", upstream))?;
    tcp.set_nonblocking(true)?;
    let mut buf = vec![0u8; 64 << 10];
    let mut kept = 0usize;
    let timeout = rustix::time::Timespec {
        tv_sec: 30,
        tv_nsec: 0,
    };
    loop {
        let out = match conn.wants_write() {
            true => PollFlags::OUT,
            false => PollFlags::empty(),
        };
        let mut fds = [
            PollFd::new(&tcp, PollFlags::IN | out),
            PollFd::new(&up, PollFlags::IN),
        ];
        if poll(&mut fds, Some(&timeout))? == 0 {
            return Ok(());
        }
        let (client, server) = (fds[0].revents(), fds[1].revents());
        if client.intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR) {
            match conn.read_tls(&mut tcp) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            conn.process_new_packets().map_err(std::io::Error::other)?;
            loop {
                match conn.reader().read(&mut buf) {
                    Ok(0) => return Ok(()),
                    Ok(n) => {
                        if kept < 64 << 10 {
                            seen.lock().expect("seen").extend_from_slice(&buf[..n]);
                            kept += n;
                        }
                        up.write_all(&buf[..n])?;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                }
            }
        }
        if server.intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR) {
            let n = up.read(&mut buf)?;
            if n == 0 {
                conn.send_close_notify();
            }
            conn.writer().write_all(&buf[..n])?;
        }
        while conn.wants_write() {
            match conn.write_tls(&mut tcp) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(1));
                    break;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

#[test]
fn over_https_an_upload_and_a_download_work_and_bodies_are_not_hashed_twice() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    mkdirs(&sc.src.join("d"));
    for i in 0..20u64 {
        write(&sc.src.join(format!("d/f{i}")), &pattern(i, 40_000));
    }
    write(&sc.src.join("big"), &pattern(99, 6 << 20));
    stamp_times(&sc.src);
    let relay = Relay::start(g.nodes[0].s3_port, sc.tmp.path());
    let https_command = |args: &[&str]| {
        let mut cmd = g.command(args);
        cmd.env(
            "AWS_ENDPOINT_URL",
            format!("https://localhost:{}", relay.port),
        )
        .env("SSL_CERT_FILE", &relay.cert_file);
        cmd
    };
    let https = |args: &[&str]| run(https_command(args));
    let url = g.url("tls");
    https(&["copy", s(&sc.src), &url, "--shard-size", "1M"]).assert_ok();
    https(&["copy", "--verify", &url, s(&sc.dst)]).assert_ok();
    assert_same_tree(&sc.src, &sc.dst);
    let cat = https_command(&["cat", &url, "d/f3"]).output().expect("cat");
    assert!(cat.status.success(), "{cat:?}");
    assert!(cat.stdout == pattern(3, 40_000));
    let ls = https(&["ls", &url]);
    ls.assert_ok();
    assert!(ls.stdout.contains("d/f19"), "{ls}");
    let (requests, end) = relay.requests_from(0);
    assert!(requests.contains("put /"), "no PUT went through the relay");
    let signed: Vec<&str> = requests
        .lines()
        .filter(|l| l.starts_with("x-amz-content-sha256:"))
        .filter(|l| !l.contains("unsigned-payload"))
        .filter(|l| {
            // The hash of an empty body (a GET, a HEAD) costs nothing.
            !l.contains("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        })
        .collect();
    assert!(signed.is_empty(), "bodies hashed over TLS: {signed:?}");
    assert!(requests.contains("x-amz-content-sha256: unsigned-payload"));
    // Asked for, a signed body over TLS too.
    let mut cmd = https_command(&["copy", s(&sc.src), &g.url("tls-signed")]);
    cmd.env("AWS_UNSIGNED_PAYLOAD", "false");
    run(cmd).assert_ok();
    let (later, _) = relay.requests_from(end);
    assert!(later.contains("put /"), "no PUT went through the relay");
    assert!(!later.contains("unsigned-payload"), "{later}");
}
