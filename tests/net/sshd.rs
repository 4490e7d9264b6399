//! A throwaway sshd for one test: host and user keys made by ssh-keygen in a temp dir,
//! listening on a free loopback port, killed when the guard drops.

use crate::common::run::{run, Run, FERRY};
use crate::common::skip;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SSHD: &str = "/usr/sbin/sshd";

/// A running sshd; killed on drop.
pub struct Sshd {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
}

fn keygen(path: &Path) -> bool {
    Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", ""])
        .arg("-f")
        .arg(path)
        .stdin(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl Sshd {
    /// Starts one, or says why it cannot (the test then returns).
    pub fn start() -> Option<Sshd> {
        if !Path::new(SSHD).exists() || Command::new("ssh").arg("-V").output().is_err() {
            skip("needs sshd and ssh (Debian's openssh-server and openssh-client)");
            return None;
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let (host_key, user_key) = (dir.path().join("host_key"), dir.path().join("user_key"));
        if !keygen(&host_key) || !keygen(&user_key) {
            skip("ssh-keygen could not make keys");
            return None;
        }
        // sshd run as root wants its privilege separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let d = dir.path().display();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\n\
             AuthorizedKeysFile {d}/user_key.pub\nStrictModes no\nUsePAM no\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin yes\n"
        );
        std::fs::write(dir.path().join("sshd_config"), config).expect("write config");
        let log = std::fs::File::create(dir.path().join("sshd.log")).expect("log");
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(dir.path().join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start sshd");
        let mut sshd = Sshd { child, dir, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline || sshd.child.try_wait().ok().flatten().is_some() {
                let log = std::fs::read_to_string(sshd.dir.path().join("sshd.log"));
                skip(&format!("sshd did not start: {log:?}"));
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(sshd)
    }

    /// The `-e` command reaching it.
    pub fn rsh(&self) -> String {
        format!(
            "ssh -p {} -i {} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
             -o LogLevel=ERROR -o BatchMode=yes -o ConnectTimeout=10",
            self.port,
            self.dir.path().join("user_key").display()
        )
    }

    /// `127.0.0.1:PATH`.
    pub fn remote(&self, path: &Path) -> String {
        format!("127.0.0.1:{}", path.display())
    }

    /// A file in its temp dir (for scripts standing in for the remote ferry).
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `ferry copy --json -e RSH --remote-ferry FERRY ARGS.. SRC DST`.
    pub fn copy(&self, src: &str, dst: &str, args: &[&str]) -> Run {
        self.copy_with(FERRY, src, dst, args)
    }

    /// As [`Sshd::copy`], with another remote ferry (a script around it).
    pub fn copy_with(&self, remote_ferry: &str, src: &str, dst: &str, args: &[&str]) -> Run {
        // Bounded: a copy that hangs is killed (exit status 124) and the test fails.
        let mut cmd = Command::new("timeout");
        cmd.args(["-k", "5", "120", FERRY])
            .args([
                "copy",
                "--json",
                "-e",
                &self.rsh(),
                "--remote-ferry",
                remote_ferry,
            ])
            .args(args)
            .args([src, dst]);
        run(cmd)
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
