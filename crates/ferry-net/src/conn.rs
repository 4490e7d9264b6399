//! A TCP connection as the protocol's two byte streams (a reader and a writer used
//! from different threads at once): plain (`--insecure`), or TLS with rustls driven
//! over a non-blocking socket, the reader and the writer taking turns on the one
//! rustls connection and waiting for the socket (poll) without holding it. A read
//! that sees no byte for the idle timeout, or a write that cannot send for it, fails
//! with `TimedOut`, so a stalled peer cannot hold a connection (and its buffers)
//! forever. `--bwlimit` paces each direction ([`Paced`]).

use crate::NetError;
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustls::pki_types::ServerName;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The reading half.
pub type ReadHalf = Box<dyn Read + Send>;
/// The writing half.
pub type WriteHalf = Box<dyn Write + Send>;

/// How long a connection may wait for its peer, and how fast it may go.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// No byte read, or none sendable, for this long: the connection fails.
    pub idle: Duration,
    /// Bytes per second each way (`None`: as fast as it goes).
    pub bwlimit: Option<u64>,
}

/// Plain TCP halves.
pub fn plain(sock: TcpStream, limits: Limits) -> io::Result<(ReadHalf, WriteHalf)> {
    sock.set_nodelay(true)?;
    sock.set_read_timeout(Some(limits.idle))?;
    sock.set_write_timeout(Some(limits.idle))?;
    let w = PlainWriter(sock.try_clone()?);
    Ok(paced(Box::new(PlainReader(sock)), Box::new(w), limits))
}

/// The plain reader: a read that times out says so.
struct PlainReader(TcpStream);

impl Read for PlainReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf).map_err(timed_out)
    }
}

/// The plain writer: the connection is shut for writing when it is dropped, so the
/// peer sees the end even while the reader lives on.
struct PlainWriter(TcpStream);

impl Write for PlainWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).map_err(timed_out)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl Drop for PlainWriter {
    fn drop(&mut self) {
        let _ = self.0.shutdown(Shutdown::Write);
    }
}

fn timed_out(e: io::Error) -> io::Error {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => io::Error::new(
            io::ErrorKind::TimedOut,
            "the other end sent or took nothing for the idle timeout",
        ),
        _ => e,
    }
}

fn paced(r: ReadHalf, w: WriteHalf, limits: Limits) -> (ReadHalf, WriteHalf) {
    match limits.bwlimit {
        Some(rate) => (
            Box::new(Paced::new(r, rate)) as ReadHalf,
            Box::new(Paced::new(w, rate)) as WriteHalf,
        ),
        None => (r, w),
    }
}

/// TLS halves for a server, after the handshake (bounded by the idle timeout).
pub fn tls_server(
    sock: TcpStream,
    config: Arc<rustls::ServerConfig>,
    limits: Limits,
) -> Result<(ReadHalf, WriteHalf), NetError> {
    let conn = rustls::ServerConnection::new(config).map_err(tls)?;
    tls_halves(sock, conn.into(), limits)
}

/// TLS halves for a client of `host`, after the handshake.
pub fn tls_client(
    sock: TcpStream,
    config: Arc<rustls::ClientConfig>,
    host: &str,
    limits: Limits,
) -> Result<(ReadHalf, WriteHalf), NetError> {
    // The name is not what is checked (the pin is); an address is a fine name.
    let name = ServerName::try_from(host.to_owned())
        .unwrap_or_else(|_| ServerName::try_from("ferry").expect("a valid name"));
    let conn = rustls::ClientConnection::new(config, name).map_err(tls)?;
    tls_halves(sock, conn.into(), limits)
}

fn tls(e: rustls::Error) -> NetError {
    NetError::Tls(e.to_string())
}

fn tls_halves(
    mut sock: TcpStream,
    mut conn: rustls::Connection,
    limits: Limits,
) -> Result<(ReadHalf, WriteHalf), NetError> {
    sock.set_nodelay(true)?;
    sock.set_read_timeout(Some(limits.idle))?;
    sock.set_write_timeout(Some(limits.idle))?;
    while conn.is_handshaking() {
        conn.complete_io(&mut sock).map_err(|e| match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => NetError::Io(timed_out(e)),
            _ => NetError::Tls(format!(
                "the handshake failed: {e} (does the other end speak TLS, or plain TCP \
                 with --insecure?)"
            )),
        })?;
    }
    sock.set_nonblocking(true)?;
    let shared = Arc::new(Tls {
        fd: sock.try_clone()?,
        inner: Mutex::new(Inner { conn, sock }),
        idle: limits.idle,
    });
    let r = Box::new(TlsReader(shared.clone()));
    let w = Box::new(TlsWriter(shared));
    Ok(paced(r, w, limits))
}

struct Tls {
    /// The socket, to wait on without the lock.
    fd: TcpStream,
    inner: Mutex<Inner>,
    idle: Duration,
}

struct Inner {
    conn: rustls::Connection,
    sock: TcpStream,
}

impl Tls {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits (not holding the connection) until the socket is ready for `flags`.
    fn wait(&self, flags: PollFlags) -> io::Result<()> {
        let deadline = Instant::now() + self.idle;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(timed_out(io::ErrorKind::TimedOut.into()));
            }
            let timeout = Timespec::try_from(left).map_err(io::Error::other)?;
            let fd = self.fd.as_fd();
            let mut fds = [PollFd::new(&fd, flags)];
            match poll(&mut fds, Some(&timeout)) {
                Ok(0) => {}
                Ok(_) => return Ok(()),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Sends what rustls has to send, waiting for the socket as needed.
    fn send_out<'a>(&'a self, mut inner: MutexGuard<'a, Inner>) -> io::Result<()> {
        while inner.conn.wants_write() {
            let Inner { conn, sock } = &mut *inner;
            match conn.write_tls(sock) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    drop(inner);
                    self.wait(PollFlags::OUT)?;
                    inner = self.lock();
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

struct TlsReader(Arc<Tls>);

impl Read for TlsReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut eof = false;
        loop {
            let mut inner = self.0.lock();
            match inner.conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // Closed without TLS's goodbye: an end, which the protocol's frames
                // tell from a finished job (every job ends in a frame saying so).
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            if eof {
                return Ok(0);
            }
            let Inner { conn, sock } = &mut *inner;
            match conn.read_tls(sock) {
                Ok(0) => eof = true,
                Ok(_) => {
                    conn.process_new_packets()
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                    // An answer rustls owes (a key update) goes out now.
                    self.0.send_out(inner)?;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    drop(inner);
                    self.0.wait(PollFlags::IN)?;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

struct TlsWriter(Arc<Tls>);

impl Write for TlsWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            let mut inner = self.0.lock();
            let n = inner.conn.writer().write(buf)?;
            self.0.send_out(inner)?;
            // rustls takes nothing while its send buffer is full; it was sent now.
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        let inner = self.0.lock();
        self.0.send_out(inner)
    }
}

impl Drop for TlsWriter {
    fn drop(&mut self) {
        let mut inner = self.0.lock();
        inner.conn.send_close_notify();
        let _ = self.0.send_out(inner);
    }
}

/// A reader or writer kept to `rate` bytes per second on average.
pub struct Paced<T> {
    inner: T,
    rate: u64,
    start: Instant,
    moved: u64,
}

impl<T> Paced<T> {
    /// `inner` at `rate` bytes per second.
    pub fn new(inner: T, rate: u64) -> Self {
        Paced {
            inner,
            rate: rate.max(1),
            start: Instant::now(),
            moved: 0,
        }
    }

    /// At most this many bytes go in one call, so the pace is smooth.
    fn slice(&self) -> usize {
        (self.rate / 10).clamp(1, 256 << 10) as usize
    }

    fn account(&mut self, n: usize) {
        self.moved += n as u64;
        let due = Duration::from_secs_f64(self.moved as f64 / self.rate as f64);
        if let Some(wait) = due.checked_sub(self.start.elapsed()) {
            std::thread::sleep(wait);
        }
    }
}

impl<R: Read> Read for Paced<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let max = buf.len().min(self.slice());
        let n = self.inner.read(&mut buf[..max])?;
        self.account(n);
        Ok(n)
    }
}

impl<W: Write> Write for Paced<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let max = buf.len().min(self.slice());
        let n = self.inner.write(&buf[..max])?;
        self.account(n);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}
