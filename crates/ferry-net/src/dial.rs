//! The client's way to a daemon: `ferry://HOST[:PORT]/PATH` addresses, the TCP
//! connection, and TLS with the server's certificate pinned ([`crate::tls`]): the
//! fingerprint given (`--fingerprint`), or the one `known_servers` holds for
//! `HOST:PORT`, or, on first use, the one the server shows, then pinned with a
//! message saying so.

use crate::conn::{self, Limits, ReadHalf, WriteHalf};
use crate::tls::{KnownServers, Pinned};
use crate::NetError;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// The port a daemon listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 7077;

/// A daemon's address and a path there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DaemonUrl {
    /// The host, as given (an IPv6 address without its brackets).
    pub host: String,
    /// The port.
    pub port: u16,
    /// The path beneath the served root (`/` for the root itself).
    pub path: Vec<u8>,
}

impl DaemonUrl {
    /// `ferry://HOST[:PORT]/PATH`, or `None` for what does not start `ferry://`.
    pub fn parse(arg: &[u8]) -> Option<Result<DaemonUrl, NetError>> {
        let rest = arg.strip_prefix(b"ferry://")?;
        let bad = |why: &str| {
            Err(NetError::Refused(format!(
                "{}: {why} (ferry://HOST[:PORT]/PATH)",
                String::from_utf8_lossy(arg)
            )))
        };
        let slash = rest.iter().position(|&b| b == b'/').unwrap_or(rest.len());
        let (authority, path) = rest.split_at(slash);
        let Ok(authority) = std::str::from_utf8(authority) else {
            return Some(bad("the host is not UTF-8"));
        };
        let (host, port) = match authority.strip_prefix('[') {
            Some(v6) => match v6.split_once(']') {
                Some((host, port)) => (host, port.strip_prefix(':')),
                None => return Some(bad("an unclosed `[`")),
            },
            None => match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            },
        };
        if host.is_empty() {
            return Some(bad("no host"));
        }
        let port = match port.map(str::parse::<u16>) {
            None => DEFAULT_PORT,
            Some(Ok(port)) => port,
            Some(Err(_)) => return Some(bad("the port is not a number")),
        };
        let path = match path {
            [] => b"/".to_vec(),
            path => path.to_vec(),
        };
        Some(Ok(DaemonUrl {
            host: host.to_owned(),
            port,
            path,
        }))
    }

    /// `HOST:PORT` (`[HOST]:PORT` for IPv6), as known_servers names it.
    pub fn server(&self) -> String {
        match self.host.contains(':') {
            true => format!("[{}]:{}", self.host, self.port),
            false => format!("{}:{}", self.host, self.port),
        }
    }
}

/// How to reach a daemon.
pub struct Dial<'a> {
    /// Plain TCP, no TLS (the server must say `--insecure` too).
    pub insecure: bool,
    /// The fingerprint the server's certificate must have.
    pub fingerprint: Option<String>,
    /// Where pins are kept (`None`: nowhere; a fingerprint must then be given).
    pub known: Option<KnownServers>,
    /// Timeouts and bandwidth.
    pub limits: Limits,
    /// Told of a server trusted on first use.
    pub notice: &'a dyn Fn(&str),
}

/// Connects to `url`'s daemon: the connection's two halves.
pub fn connect(url: &DaemonUrl, dial: &Dial<'_>) -> Result<(ReadHalf, WriteHalf), NetError> {
    let server = url.server();
    let sock = tcp(url, &server)?;
    if dial.insecure {
        return Ok(conn::plain(sock, dial.limits)?);
    }
    let known = dial.known.as_ref();
    let expected = dial
        .fingerprint
        .clone()
        .or_else(|| known.and_then(|k| k.get(&server)));
    let pinned = Pinned::new(expected.clone());
    let halves = conn::tls_client(sock, pinned.client_config()?, &url.host, dial.limits);
    let seen = pinned.seen();
    match (halves, expected, seen) {
        (Ok(halves), Some(_), _) => Ok(halves),
        (Ok(halves), None, Some(seen)) => {
            let Some(known) = known else {
                return Err(NetError::Tls(format!(
                    "{server}: its certificate is {seen}; no known_servers file to pin it \
                     in: pass --fingerprint {seen}"
                )));
            };
            known.add(&server, &seen)?;
            (dial.notice)(&format!(
                "{server}: first connection: trusting its certificate {seen} and pinning \
                 it in {}; a different one will be refused",
                known.path().display()
            ));
            Ok(halves)
        }
        (Err(_), Some(want), Some(seen)) if !want.eq_ignore_ascii_case(&seen) => {
            let whence = match &dial.fingerprint {
                Some(_) => "--fingerprint".to_owned(),
                None => known.map_or(String::new(), |k| k.path().display().to_string()),
            };
            Err(NetError::Tls(format!(
                "{server}: WARNING: THE SERVER'S CERTIFICATE HAS CHANGED: {seen}, not \
                 {want} as pinned in {whence}. Someone may be intercepting the connection, \
                 or the server's key was made anew. Refused. If the change is known to be \
                 right, remove the line for {server} from the known_servers file or pass \
                 --fingerprint."
            )))
        }
        (Err(e), _, _) => Err(e),
        (Ok(_), None, None) => Err(NetError::Tls(format!(
            "{server}: the handshake showed no certificate"
        ))),
    }
}

fn tcp(url: &DaemonUrl, server: &str) -> Result<TcpStream, NetError> {
    let fail = |e: std::io::Error| {
        NetError::Io(std::io::Error::new(
            e.kind(),
            format!("connect to {server}: {e}"),
        ))
    };
    let addrs = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(fail)?;
    let mut last = std::io::Error::other("the name has no address");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(10)) {
            Ok(sock) => return Ok(sock),
            Err(e) => last = e,
        }
    }
    Err(fail(last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_read_as_written() {
        let url = |s: &str| DaemonUrl::parse(s.as_bytes()).map(|r| r.map_err(|e| e.to_string()));
        let ok = |host: &str, port, path: &[u8]| {
            Some(Ok(DaemonUrl {
                host: host.into(),
                port,
                path: path.to_vec(),
            }))
        };
        assert_eq!(url("ferry://h:9/a/b"), ok("h", 9, b"/a/b"));
        assert_eq!(url("ferry://h"), ok("h", DEFAULT_PORT, b"/"));
        assert_eq!(url("ferry://[::1]:5/x"), ok("::1", 5, b"/x"));
        assert_eq!(url("host:/x"), None);
        assert!(matches!(url("ferry://h:x/"), Some(Err(_))));
        assert!(matches!(url("ferry:///x"), Some(Err(_))));
    }
}
