//! The handshake fuzz target's body, shared with the plain tests: `data` is what a
//! client sends after its hello, served as the daemon serves a connection (a token, a
//! root of its own, read-only so a request the fuzzer makes up writes nothing, the
//! limits on handshakes in force); never a panic, and never a job served without the
//! right token.
//!
//! Used by `fuzz_targets/handshake.rs` (cargo-fuzz) and by the crate's tests (the
//! bounded mutation loop), through `#[path]`.

use ferry_net::beneath::Root;
use ferry_net::preauth::{Limits, PreAuth};
use ferry_net::serve::{serve_pending, ServeConfig, Served};
use std::net::{IpAddr, Ipv6Addr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The token the server wants.
pub const TOKEN: &[u8] = b"fuzz-token";

struct Fixture {
    config: ServeConfig,
    gate: Arc<PreAuth>,
    /// A connected socket for the watchdog to hold (it is never read).
    sock: TcpStream,
    _peer: TcpStream,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let root = std::env::temp_dir().join(format!("ferry-net-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(root.join("d")).expect("fuzz root");
        std::fs::write(root.join("d/f"), b"a file").expect("fuzz file");
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let peer = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let sock = l.accept().expect("accept").0;
        Fixture {
            config: ServeConfig {
                threads: 1,
                root: Some(Arc::new(Root::open(&root).expect("open root"))),
                read_only: true,
                token: Some(Arc::from(TOKEN)),
                ..ServeConfig::default()
            },
            gate: PreAuth::new(Limits {
                timeout: Duration::from_secs(30),
                slots: 1 << 20,
                frame_bytes: 4 << 20,
            }),
            sock,
            _peer: peer,
        }
    })
}

/// Serves the hello and then `data`; returns whether a job was served.
pub fn exercise_handshake(data: &[u8]) -> bool {
    static N: AtomicU64 = AtomicU64::new(1);
    let f = fixture();
    // An address of its own each time: wrong tokens from one would slow the next.
    let ip = IpAddr::V6(Ipv6Addr::from(u128::from(N.fetch_add(1, Relaxed))));
    let mut pending = f.gate.arrive(&f.sock, ip).expect("watched");
    let mut conn = b"FERRYNET".to_vec();
    conn.extend_from_slice(&ferry_net::proto::VERSION.to_le_bytes());
    conn.extend_from_slice(data);
    let served = serve_pending(conn.as_slice(), Vec::new(), &f.config, Some(&mut pending));
    let done = matches!(served, Ok(Served::Done { .. }));
    if done {
        assert!(has_token(data), "served without the token");
    }
    done
}

/// Whether `data` starts with an Auth frame holding [`TOKEN`].
fn has_token(data: &[u8]) -> bool {
    let mut head = vec![12u8];
    head.extend_from_slice(&(TOKEN.len() as u32).to_le_bytes());
    head.extend_from_slice(TOKEN);
    data.starts_with(&head)
}
