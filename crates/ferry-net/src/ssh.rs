//! The ssh transport, as rsync has it: `ssh [OPTIONS] HOST FERRY serve --stdio` as a
//! child process, whose standard input and output are the connection. The user's ssh
//! configuration, agent and keys all work as they do for ssh itself; ssh's own
//! messages (a refused key, an unknown host) reach the user on standard error.
//!
//! Also where a command-line path is told to be remote: `[USER@]HOST:PATH` where the
//! part before the first `:` is not empty and has no `/` (so `./a:b` and `/x:y` are
//! local), as rsync and scp tell it.

use crate::NetError;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// A path as the user named it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A path here.
    Local,
    /// `[USER@]HOST:PATH`.
    Remote {
        /// What ssh is given: `HOST` or `USER@HOST`.
        host: String,
        /// The path there (`.`, the login directory, for an empty one).
        path: Vec<u8>,
    },
}

/// Where `arg` is.
pub fn location(arg: &OsStr) -> Location {
    let bytes = arg.as_bytes();
    let Some(colon) = bytes.iter().position(|&b| b == b':') else {
        return Location::Local;
    };
    let host = &bytes[..colon];
    if host.is_empty() || host.contains(&b'/') {
        return Location::Local;
    }
    let Ok(host) = std::str::from_utf8(host) else {
        return Location::Local;
    };
    let path = match &bytes[colon + 1..] {
        [] => b".".to_vec(),
        path => path.to_vec(),
    };
    Location::Remote {
        host: host.to_owned(),
        path,
    }
}

/// Splits a command line (`-e 'ssh -p 2222 -i "my key"'`) into words as a shell
/// would: on blanks, with '...' and "..." quoting and `\` escaping.
pub fn split_words(line: &str) -> Result<Vec<String>, NetError> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => words.extend(word.take()),
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err(unclosed(line)),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => w.extend(chars.next()),
                        Some(c) => w.push(c),
                        None => return Err(unclosed(line)),
                    }
                }
            }
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}

fn unclosed(line: &str) -> NetError {
    NetError::Ssh(format!("-e {line:?}: a quote is not closed"))
}

/// `word` quoted for the remote shell, which ssh hands the command to.
pub fn shell_quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./+=:@,%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return word.to_owned();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// An ssh child running `ferry serve --stdio` on a host.
pub struct Ssh {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    /// What was run, for messages.
    what: String,
}

impl Ssh {
    /// Runs `command` (the ssh program and its options, as `-e` gives them) to `host`,
    /// running `remote_ferry serve --stdio` there.
    pub fn spawn(command: &str, host: &str, remote_ferry: &str) -> Result<Ssh, NetError> {
        let words = split_words(command)?;
        let Some((program, options)) = words.split_first() else {
            return Err(NetError::Ssh("-e: no ssh command given".into()));
        };
        let remote = format!("{} serve --stdio", shell_quote(remote_ferry));
        let mut child = Command::new(program)
            .args(options)
            .arg(host)
            .arg(&remote)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| NetError::Ssh(format!("{program}: run: {e}")))?;
        Ok(Ssh {
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            child,
            what: format!("{program} {host} {remote}"),
        })
    }

    /// The connection: what the server says, and where to say things to it.
    pub fn streams(&mut self) -> Result<(ChildStdout, ChildStdin), NetError> {
        match (self.stdout.take(), self.stdin.take()) {
            (Some(r), Some(w)) => Ok((r, w)),
            _ => Err(NetError::Ssh(
                "the ssh child's pipes were taken already".into(),
            )),
        }
    }

    /// After the job: waits for ssh to end (the server ends once the job has).
    pub fn finish(&mut self) -> Result<(), NetError> {
        self.stdin.take();
        let status = self
            .child
            .wait()
            .map_err(|e| NetError::Ssh(format!("{}: wait: {e}", self.what)))?;
        match status.code() {
            // ferry serve's own ways to end: done, or done with errors.
            Some(0 | 1) => Ok(()),
            _ => Err(NetError::Ssh(format!("{}: ended with {status}", self.what))),
        }
    }

    /// What became of ssh, for a message after the connection failed: how it ended,
    /// if it did within a few seconds (it is killed otherwise).
    pub fn ending(&mut self) -> String {
        self.stdin.take();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    return match status.code() {
                        Some(127) => format!(
                            "`{}` ended with {status}: is ferry at that path there? \
                             (--remote-ferry)",
                            self.what
                        ),
                        _ => format!("`{}` ended with {status}", self.what),
                    };
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return format!("`{}` was stopped", self.what);
                }
            }
        }
    }
}

impl Drop for Ssh {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_paths_are_told_as_rsync_tells_them() {
        let remote = |host: &str, path: &[u8]| Location::Remote {
            host: host.into(),
            path: path.to_vec(),
        };
        assert_eq!(location(OsStr::new("host:/x")), remote("host", b"/x"));
        assert_eq!(
            location(OsStr::new("me@host:x:y")),
            remote("me@host", b"x:y")
        );
        assert_eq!(location(OsStr::new("host:")), remote("host", b"."));
        for local in ["./a:b", "/a:b", ":x", "plain", "a/b:c"] {
            assert_eq!(location(OsStr::new(local)), Location::Local, "{local}");
        }
    }

    #[test]
    fn commands_split_as_a_shell_splits_them() {
        let words = split_words(r#"ssh -p 2222 -i "my key" -o 'A B' x\ y"#).expect("split");
        assert_eq!(
            words,
            ["ssh", "-p", "2222", "-i", "my key", "-o", "A B", "x y"]
        );
        assert!(split_words("ssh 'open").is_err());
        assert_eq!(shell_quote("/usr/bin/ferry"), "/usr/bin/ferry");
        assert_eq!(shell_quote("/a b/it's"), r"'/a b/it'\''s'");
    }
}
