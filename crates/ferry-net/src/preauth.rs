//! The daemon's connections before they are authenticated, which anyone can open.
//!
//! - **One deadline**: from its accept to its request read (the TLS handshake, the
//!   hello, the token, the request), a connection has [`PreAuth::new`]'s `timeout`,
//!   however its bytes trickle in; at the deadline a watchdog thread shuts its socket
//!   and the log says it timed out.
//! - **Few at once**: at most `slots` connections are in their handshake; one more
//!   closes the oldest of them (a client that finishes its handshake at once is never
//!   the oldest, however many others trickle), so a flood of connections costs a
//!   bounded number of threads, and good clients get through.
//! - **Small frames**: a token frame is at most [`MAX_TOKEN`] bytes, checked before
//!   the request is read; a request frame's bytes are taken from a budget of
//!   `frame_bytes` shared by all handshakes ([`Pending::reserve`]), waited for within
//!   the deadline. None of this is the pool of data buffers.
//! - **Wrong tokens are slowed down per address** ([`Pending::check_token`]): after a
//!   wrong token, the next check of one from that address waits, twice as long after
//!   each further one (up to [`MAX_DELAY`]), outside the handshake places. A frame
//!   too large for a token, or none, is refused at once and guesses nothing.

use crate::NetError;
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The most bytes of a token frame.
pub const MAX_TOKEN: usize = 1 << 10;

/// The wait after the first wrong token from an address; it doubles with each more.
pub const FIRST_DELAY: Duration = Duration::from_millis(250);

/// The longest wait before an address's next token is checked.
pub const MAX_DELAY: Duration = Duration::from_secs(8);

/// Addresses remembered for their wrong tokens (the oldest forgotten first).
const MAX_ADDRESSES: usize = 1 << 16;

/// An address's wrong tokens are forgotten this long after the last.
const FORGET: Duration = Duration::from_secs(600);

/// Connections waiting out their address's delay at once, past which one is refused
/// without waiting (each holds a thread).
const MAX_DELAYED: usize = 256;

/// How many connections may be in their handshake, and for how long.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The handshake's one deadline.
    pub timeout: Duration,
    /// Connections in their handshake at once.
    pub slots: usize,
    /// Bytes of request frames read at once by all handshakes.
    pub frame_bytes: usize,
}

/// The connections in their handshake.
pub struct PreAuth {
    limits: Limits,
    state: Mutex<State>,
    /// Signalled when the earliest deadline changes, or budget is given back.
    changed: Condvar,
    fails: Mutex<HashMap<IpAddr, Fails>>,
}

#[derive(Default)]
struct State {
    /// By deadline (so by age), each with its socket and what happened to it.
    pending: BTreeMap<(Instant, u64), Watched>,
    next_id: u64,
    bytes: usize,
    delayed: usize,
    /// The watchdog runs.
    watching: bool,
}

struct Watched {
    sock: TcpStream,
    ended: Arc<AtomicBool>,
}

#[derive(Clone, Copy)]
struct Fails {
    count: u32,
    /// When the next token from the address may be checked.
    next: Instant,
    last: Instant,
}

fn delay(count: u32) -> Duration {
    FIRST_DELAY
        .saturating_mul(1 << count.saturating_sub(1).min(16))
        .min(MAX_DELAY)
}

/// A connection in its handshake; everything it holds is given back when it is
/// dropped (or [`Pending::done`]).
pub struct Pending {
    gate: Arc<PreAuth>,
    key: Option<(Instant, u64)>,
    peer: IpAddr,
    deadline: Instant,
    /// Set by the watchdog when it closed the connection.
    ended: Arc<AtomicBool>,
}

/// Bytes of the frame budget, given back when dropped.
pub struct Reserved<'a> {
    gate: &'a PreAuth,
    n: usize,
}

impl PreAuth {
    /// Connections in their handshake, as `limits` allow.
    pub fn new(limits: Limits) -> Arc<PreAuth> {
        Arc::new(PreAuth {
            limits: Limits {
                slots: limits.slots.max(1),
                frame_bytes: limits.frame_bytes.max(MAX_TOKEN),
                ..limits
            },
            state: Mutex::default(),
            changed: Condvar::new(),
            fails: Mutex::default(),
        })
    }

    /// The handshake's deadline.
    pub fn timeout(&self) -> Duration {
        self.limits.timeout
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Connections in their handshake now.
    pub fn pending(&self) -> usize {
        self.lock().pending.len()
    }

    /// Takes in the connection `sock` from `peer`, closing the oldest one in its
    /// handshake when all places are taken; `None` when the socket cannot be watched.
    pub fn arrive(self: &Arc<Self>, sock: &TcpStream, peer: IpAddr) -> Option<Pending> {
        let watched = sock.try_clone().ok()?;
        let deadline = Instant::now() + self.limits.timeout;
        let ended = Arc::new(AtomicBool::new(false));
        let mut state = self.lock();
        while state.pending.len() >= self.limits.slots {
            if let Some((_, oldest)) = state.pending.pop_first() {
                oldest.ended.store(true, Relaxed);
                let _ = oldest.sock.shutdown(Shutdown::Both);
            }
        }
        let key = (deadline, state.next_id);
        state.next_id += 1;
        let first = state.pending.keys().next().is_none_or(|k| key < *k);
        state.pending.insert(
            key,
            Watched {
                sock: watched,
                ended: ended.clone(),
            },
        );
        if !state.watching {
            let gate = self.clone();
            state.watching = std::thread::Builder::new()
                .name("ferry-handshakes".into())
                .spawn(move || gate.watch())
                .is_ok();
        }
        drop(state);
        if first {
            self.changed.notify_all();
        }
        Some(Pending {
            gate: self.clone(),
            key: Some(key),
            peer,
            deadline,
            ended,
        })
    }

    /// The watchdog: shuts each connection still in its handshake at its deadline.
    fn watch(&self) {
        let mut state = self.lock();
        loop {
            let now = Instant::now();
            let wait = match state.pending.first_key_value() {
                Some((&(deadline, _), _)) if deadline <= now => {
                    if let Some((_, late)) = state.pending.pop_first() {
                        late.ended.store(true, Relaxed);
                        let _ = late.sock.shutdown(Shutdown::Both);
                    }
                    continue;
                }
                Some((&(deadline, _), _)) => deadline - now,
                None => Duration::from_secs(3600),
            };
            state = self
                .changed
                .wait_timeout(state, wait)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    fn fails(&self) -> MutexGuard<'_, HashMap<IpAddr, Fails>> {
        self.fails.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Pending {
    /// Whether the daemon closed this connection: its deadline passed, or it was the
    /// oldest in its handshake when all places were taken.
    pub fn timed_out(&self) -> bool {
        self.ended.load(Relaxed)
    }

    /// Why the handshake failed, when the daemon closed the connection.
    pub fn timeout_error(&self) -> NetError {
        NetError::Handshake(format!(
            "timed out: the client did not finish its handshake within {} s (or was \
             the oldest of too many connections in theirs)",
            self.gate.limits.timeout.as_secs_f32()
        ))
    }

    /// Leaves the handshake's place and the watchdog (the rest of the connection has
    /// the idle timeout).
    pub fn done(&mut self) {
        if let Some(key) = self.key.take() {
            self.gate.lock().pending.remove(&key);
        }
    }

    /// `n` bytes of the frame budget, waited for until the deadline.
    pub fn reserve(&self, n: usize) -> Result<Reserved<'_>, NetError> {
        let gate = &*self.gate;
        let n = n.min(gate.limits.frame_bytes);
        let mut state = gate.lock();
        while state.bytes + n > gate.limits.frame_bytes {
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || self.timed_out() {
                return Err(self.timeout_error());
            }
            state = gate
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        state.bytes += n;
        Ok(Reserved { gate, n })
    }

    /// Checks the token `got` against `want`, after this address's delay for wrong
    /// ones before (waited outside the handshake's places); a wrong one makes the
    /// next wait longer. A missing one (`None`: a client not given the token) is
    /// refused at once and counts for nothing: it guesses nothing.
    pub fn check_token(&mut self, got: Option<&[u8]>, want: &[u8]) -> Result<(), NetError> {
        let refused = |why: &str| {
            NetError::Refused(format!(
                "wrong or missing token (--token-file): refused{why}"
            ))
        };
        let Some(got) = got else {
            return Err(refused(""));
        };
        let now = Instant::now();
        let at = {
            let mut fails = self.gate.fails();
            match fails.get_mut(&self.peer) {
                Some(f) if now.duration_since(f.last) < FORGET => {
                    let at = f.next.max(now);
                    f.next = at + delay(f.count);
                    at
                }
                _ => now,
            }
        };
        if at > now {
            // Out of the places: a client slowed down holds none.
            self.done();
            let mut state = self.gate.lock();
            if at > self.deadline || state.delayed >= MAX_DELAYED {
                drop(state);
                self.failed();
                return Err(refused(
                    " (too many wrong tokens from this address: try again later)",
                ));
            }
            state.delayed += 1;
            drop(state);
            std::thread::sleep(at - now);
            self.gate.lock().delayed -= 1;
        }
        if same_secret(got, want) {
            self.gate.fails().remove(&self.peer);
            return Ok(());
        }
        self.failed();
        Err(refused(""))
    }

    /// Counts a wrong or missing token from this address.
    fn failed(&self) {
        let now = Instant::now();
        let mut fails = self.gate.fails();
        if fails.len() >= MAX_ADDRESSES && !fails.contains_key(&self.peer) {
            fails.retain(|_, f| now.duration_since(f.last) < FORGET);
            if fails.len() >= MAX_ADDRESSES {
                fails.clear();
            }
        }
        let f = fails.entry(self.peer).or_insert(Fails {
            count: 0,
            next: now,
            last: now,
        });
        if now.duration_since(f.last) >= FORGET {
            f.count = 0;
        }
        f.count = f.count.saturating_add(1);
        f.last = now;
        f.next = f.next.max(now + delay(f.count));
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.done();
    }
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        self.gate.lock().bytes -= self.n;
        self.gate.changed.notify_all();
    }
}

/// Compares secrets in time independent of where they differ.
pub fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    /// A connected pair of loopback sockets: (the server's end, the client's).
    fn pair(l: &TcpListener) -> (TcpStream, TcpStream) {
        let client = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        (l.accept().expect("accept").0, client)
    }

    fn limits(slots: usize, timeout_ms: u64) -> Limits {
        Limits {
            timeout: Duration::from_millis(timeout_ms),
            slots,
            frame_bytes: 4 << 10,
        }
    }

    fn closed_within(mut client: &TcpStream, within: Duration) -> bool {
        client.set_read_timeout(Some(within)).expect("timeout");
        matches!(client.read(&mut [0u8; 1]), Ok(0))
    }

    #[test]
    fn the_deadline_closes_a_handshake_and_the_oldest_makes_room() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let ip: IpAddr = [127, 0, 0, 1].into();
        let gate = PreAuth::new(limits(2, 300));
        let (s1, c1) = pair(&l);
        let p1 = gate.arrive(&s1, ip).expect("watched");
        assert!(closed_within(&c1, Duration::from_secs(10)), "the deadline");
        assert!(p1.timed_out());
        let gate = PreAuth::new(limits(2, 60_000));
        let (s2, c2) = pair(&l);
        let (s3, c3) = pair(&l);
        let (s4, _c4) = pair(&l);
        let p2 = gate.arrive(&s2, ip).expect("watched");
        let mut p3 = gate.arrive(&s3, ip).expect("watched");
        p3.done();
        let _p4 = gate.arrive(&s4, ip).expect("watched");
        let (s5, _c5) = pair(&l);
        let _p5 = gate.arrive(&s5, ip).expect("watched");
        // p3 was done, so room was made by closing p2, the oldest.
        assert!(closed_within(&c2, Duration::from_secs(10)));
        assert!(p2.timed_out() && !p3.timed_out());
        c3.set_nonblocking(true).expect("nonblocking");
        assert!((&c3).read(&mut [0u8; 1]).is_err(), "p3 stays open");
        assert_eq!(gate.pending(), 2);
    }

    #[test]
    fn frame_bytes_are_shared_and_waited_for_until_the_deadline() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let ip: IpAddr = [127, 0, 0, 1].into();
        let gate = PreAuth::new(limits(8, 200));
        let (s1, _c1) = pair(&l);
        let (s2, _c2) = pair(&l);
        let (p1, p2) = (
            gate.arrive(&s1, ip).expect("1"),
            gate.arrive(&s2, ip).expect("2"),
        );
        let held = p1.reserve(3 << 10).expect("room");
        let e = p2.reserve(2 << 10).err().expect("no room");
        assert!(e.to_string().contains("timed out"), "{e}");
        drop(held);
        let (s3, _c3) = pair(&l);
        let p3 = gate.arrive(&s3, ip).expect("3");
        p3.reserve(4 << 10).expect("room again");
    }

    #[test]
    fn wrong_tokens_slow_down_their_address_only() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let gate = PreAuth::new(limits(8, 30_000));
        let (bad, good): (IpAddr, IpAddr) = ([10, 0, 0, 1].into(), [10, 0, 0, 2].into());
        // Whether it was let in, how long the check took, when it ended.
        let check = |ip, token: &[u8]| {
            let (s, _c) = pair(&l);
            let mut p = gate.arrive(&s, ip).expect("watched");
            let t = Instant::now();
            let r = p.check_token(Some(token), b"right");
            (r.is_ok(), t.elapsed(), Instant::now())
        };
        // Each check from the address waits for the delay since its last wrong one
        // (counted from the refusal, a moment before the check returned).
        let slack = Duration::from_millis(10);
        let (ok, _, first) = check(bad, b"wrong");
        assert!(!ok);
        let (ok, _, second) = check(bad, b"wrong");
        assert!(
            !ok && second - first >= FIRST_DELAY - slack,
            "{:?}",
            second - first
        );
        let (ok, _, third) = check(bad, b"wrong");
        assert!(
            !ok && third - second >= FIRST_DELAY * 2 - slack,
            "{:?}",
            third - second
        );
        let (ok, took, _) = check(good, b"right");
        assert!(ok && took < FIRST_DELAY, "{took:?}");
        // The right token from the slowed address waits, then is let in and forgiven.
        let (ok, _, fourth) = check(bad, b"right");
        assert!(
            ok && fourth - third >= FIRST_DELAY * 4 - slack,
            "{:?}",
            fourth - third
        );
        assert!(check(bad, b"right").1 < FIRST_DELAY);
    }
}
