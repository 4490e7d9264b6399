//! `ferry serve --listen`: the daemon. Each accepted connection is taken in by the
//! limits on handshakes ([`crate::preauth`]: one deadline, so many at once), gets a
//! thread, its TLS handshake (or plain TCP with `--insecure`), then one job served by
//! [`crate::serve`], with the daemon's root, token, admission and buffer pool in its
//! [`ServeConfig`]. A connection that fails tells the log one line and ends; the
//! daemon goes on.

use crate::conn::{self, Limits, ReadHalf, WriteHalf};
use crate::preauth::{Pending, PreAuth};
use crate::serve::{serve_pending, ServeConfig, Served};
use crate::NetError;
use std::io::{self, BufWriter};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;

/// How the daemon serves connections.
#[derive(Clone)]
pub struct Daemon {
    /// TLS, or plain TCP (`--insecure`) when `None`.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// The job's configuration (root, token, admission, pool).
    pub serve: ServeConfig,
    /// Timeouts and the bandwidth limit of each connection.
    pub limits: Limits,
    /// Connections in their handshake.
    pub preauth: Arc<PreAuth>,
}

/// Serves every connection `listener` accepts, until accepting fails; `log` is told
/// one line per connection that ends in an error.
pub fn run(
    listener: &TcpListener,
    daemon: &Arc<Daemon>,
    log: &Arc<dyn Fn(&str) + Send + Sync>,
) -> io::Result<()> {
    loop {
        let (sock, peer) = match listener.accept() {
            Ok(accepted) => accepted,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // Out of descriptors, say: this connection is lost, the daemon lives on.
            Err(e) => {
                log(&format!("accept: {e}"));
                std::thread::sleep(std::time::Duration::from_millis(50));
                continue;
            }
        };
        let Some(pending) = daemon.preauth.arrive(&sock, peer.ip()) else {
            log(&format!(
                "{peer}: closed at once: its socket cannot be watched"
            ));
            continue;
        };
        let (daemon, log2) = (daemon.clone(), log.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("ferry-serve {peer}"))
            .spawn(move || {
                if let Err(e) = connection(sock, pending, &daemon) {
                    log2(&format!("{peer}: {e}"));
                }
            });
        if let Err(e) = spawned {
            log(&format!("{peer}: no thread for it: {e}"));
        }
    }
}

/// One connection: handshake, then one job. A failure because the daemon closed it
/// in its handshake says so.
fn connection(sock: TcpStream, mut pending: Pending, daemon: &Daemon) -> Result<(), NetError> {
    let halves = match &daemon.tls {
        Some(tls) => conn::tls_server(sock, tls.clone(), daemon.limits),
        None => conn::plain(sock, daemon.limits).map_err(NetError::Io),
    };
    let (r, w): (ReadHalf, WriteHalf) = match halves {
        Ok(halves) => halves,
        Err(_) if pending.timed_out() => return Err(pending.timeout_error()),
        Err(e) => return Err(e),
    };
    let w = BufWriter::with_capacity(64 << 10, w);
    match serve_pending(r, w, &daemon.serve, Some(&mut pending)) {
        Ok(Served::Done { .. }) => Ok(()),
        Err(_) | Ok(Served::Stopped(_)) if pending.timed_out() => Err(pending.timeout_error()),
        Ok(Served::Stopped(e)) | Err(e) => Err(e),
    }
}

/// The address the daemon listens on, as given (`ADDR:PORT`).
pub fn listen(addr: &str) -> Result<(TcpListener, SocketAddr), NetError> {
    let listener = TcpListener::bind(addr)
        .map_err(|e| NetError::Io(io::Error::new(e.kind(), format!("listen on {addr}: {e}"))))?;
    let local = listener.local_addr()?;
    Ok((listener, local))
}
