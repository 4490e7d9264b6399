//! A `ferry serve --listen` daemon for one test, on a free loopback port, with its
//! state (key, certificate) and the clients' config (known_servers) in a temp dir;
//! killed when the guard drops. Proxies for the tests: one that cuts a connection
//! after so many bytes.

use crate::common::run::{run, Run, FERRY};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running daemon; killed on drop.
pub struct Daemon {
    child: Option<Child>,
    pub dir: PathBuf,
    pub root: PathBuf,
    pub port: u16,
    args: Vec<String>,
    _tmp: Option<tempfile::TempDir>,
}

/// A free loopback port (free when asked).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl Daemon {
    /// Starts one serving a fresh root, with `args` (`--insecure`, `--token-file`..).
    pub fn start(args: &[&str]) -> Daemon {
        let tmp = tempfile::tempdir().expect("temp dir");
        let mut d = Daemon::start_in(tmp.path(), free_port(), args);
        d._tmp = Some(tmp);
        d
    }

    /// Starts one keeping its state in `dir` (so a restart keeps its identity).
    pub fn start_in(dir: &Path, port: u16, args: &[&str]) -> Daemon {
        let root = dir.join("root");
        std::fs::create_dir_all(&root).expect("root");
        let mut d = Daemon {
            child: None,
            dir: dir.to_path_buf(),
            root,
            port,
            args: args.iter().map(|a| a.to_string()).collect(),
            _tmp: None,
        };
        d.restart();
        d
    }

    /// (Re)starts the process with the same state, root, port and flags.
    pub fn restart(&mut self) {
        self.kill();
        let log = std::fs::File::create(self.dir.join("serve.log")).expect("log");
        let child = Command::new(FERRY)
            .arg("serve")
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--root")
            .arg(&self.root)
            .arg("--state-dir")
            .arg(self.dir.join("state"))
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start ferry serve");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            let ended = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            assert!(
                ended.is_none() && Instant::now() < deadline,
                "ferry serve did not start: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the process (SIGKILL), if running.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// What it logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("serve.log")).unwrap_or_default()
    }

    /// Waits (at most 20 s) until the log says `text`.
    pub fn wait_for_log(&self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.log().contains(text) {
            assert!(
                Instant::now() < deadline,
                "{text:?} not logged: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Its peak resident memory so far (VmHWM), in bytes.
    pub fn peak_rss(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).expect("status");
        let line = status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .expect("VmHWM");
        let kb: u64 = line
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .expect("a number");
        kb << 10
    }

    /// `ferry://127.0.0.1:PORT/PATH`.
    pub fn url(&self, path: &str) -> String {
        format!("ferry://127.0.0.1:{}/{path}", self.port)
    }

    /// As [`Daemon::url`] through a proxy's port.
    pub fn url_via(&self, port: u16, path: &str) -> String {
        format!("ferry://127.0.0.1:{port}/{path}")
    }

    /// The clients' config dir (`XDG_CONFIG_HOME`).
    pub fn client_config(&self) -> PathBuf {
        self.dir.join("client")
    }

    /// `ferry copy --json ARGS.. SRC DST`, bounded in time, as a client of this daemon.
    pub fn copy(&self, src: &str, dst: &str, args: &[&str]) -> Run {
        run(self.copy_command(src, dst, args))
    }

    /// The command of [`Daemon::copy`], not started.
    pub fn copy_command(&self, src: &str, dst: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new("timeout");
        cmd.args(["-k", "5", "120", FERRY, "copy", "--json"])
            .args(args)
            .args([src, dst])
            .env("XDG_CONFIG_HOME", self.client_config());
        cmd
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Passes bytes from `from` to `to` until `limit` have gone or either end closes,
/// then shuts both connections (cutting the other way too).
fn pass_on(mut from: TcpStream, mut to: TcpStream, limit: u64) {
    let mut left = limit;
    let mut buf = vec![0u8; 64 << 10];
    while left > 0 {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n.min(left as usize),
        };
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
        left -= n as u64;
    }
    for s in [&from, &to] {
        let _ = s.shutdown(Shutdown::Both);
    }
}

/// A proxy on a free loopback port to `target` for one connection, which it cuts
/// (both ways) once `up` bytes have gone from the client to the server or `down`
/// bytes the other way. Returns its port; its threads end with the connection (or
/// after 60 s without one).
pub fn cutting_proxy(target: u16, up: u64, down: u64) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    listener.set_nonblocking(true).expect("nonblocking");
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        let client = loop {
            match listener.accept() {
                Ok((c, _)) => break c,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(_) => return,
            }
        };
        client.set_nonblocking(false).expect("blocking");
        let server = TcpStream::connect(("127.0.0.1", target)).expect("connect");
        let clone = |s: &TcpStream| s.try_clone().expect("clone");
        let (c2, s2) = (clone(&client), clone(&server));
        let back = std::thread::spawn(move || pass_on(s2, c2, down));
        pass_on(client, server, up);
        let _ = back.join();
    });
    port
}
