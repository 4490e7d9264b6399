//! Memory a connection keeps besides its data buffers (the records of a client's
//! manifest), counted in the daemon's one budget: for each buffer's worth of bytes
//! kept, one buffer of the pool is held, empty, until the job ends, so what the
//! manifests keep and what the data moves in stay within `--memory` together.
//!
//! A buffer is waited for at most a while ([`Charge::new`]): the pool is shared, and
//! a job that cannot have one in that time is refused rather than left waiting on
//! other jobs that wait too. The waiting is done by a helper thread (taking from the
//! pool has no timeout of its own), which holds the buffers and gives them back when
//! the charge is dropped.

use crate::NetError;
use ferry_core::pool::{BufferPool, Share};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

/// Bytes charged to the pool for one job, in whole buffers.
pub struct Charge {
    pool: Arc<BufferPool>,
    /// Asks the helper (started when first needed) for one more buffer, and hears
    /// that it holds it; dropped, it gives them all back.
    helper: Option<(Sender<()>, Receiver<()>)>,
    /// Bytes counted so far, and what the buffers held cover.
    bytes: usize,
    covered: usize,
    buffer: usize,
    max: usize,
    wait: Duration,
}

impl Charge {
    /// A charge to `pool` of at most the whole pool, each buffer waited for at most
    /// `wait`.
    pub fn new(pool: &Arc<BufferPool>, wait: Duration) -> Charge {
        let buffer = pool.buffer_size();
        Charge {
            pool: pool.clone(),
            helper: None,
            bytes: 0,
            covered: 0,
            buffer,
            max: pool.capacity() * buffer,
            wait,
        }
    }

    /// Counts `n` more bytes, holding a buffer more for each buffer's worth; an error
    /// saying why when the pool cannot cover them.
    pub fn add(&mut self, n: usize, what: &str) -> Result<(), NetError> {
        self.bytes = self.bytes.saturating_add(n);
        if self.bytes > self.max {
            return Err(NetError::Refused(format!(
                "{what}: more than the {} MiB of this server's memory budget (--memory): \
                 refused",
                self.max >> 20
            )));
        }
        while self.bytes > self.covered {
            if self.helper.is_none() {
                self.helper = self.start();
            }
            let got = self.helper.as_ref().is_some_and(|(more, taken)| {
                more.send(()).is_ok() && taken.recv_timeout(self.wait).is_ok()
            });
            if !got {
                return Err(NetError::Refused(format!(
                    "{what}: server busy: no room in its memory budget (--memory) for \
                     {} MiB more; try again later",
                    self.buffer >> 20
                )));
            }
            self.covered += self.buffer;
        }
        Ok(())
    }

    /// Bytes counted.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The helper thread, or `None` when none can be started (then nothing more can
    /// be charged).
    fn start(&self) -> Option<(Sender<()>, Receiver<()>)> {
        let (more, asks) = channel::<()>();
        let (gave, taken) = channel::<()>();
        let share = Share::new(self.pool.clone(), self.pool.capacity());
        let buffer = self.buffer;
        std::thread::Builder::new()
            .name("ferry-charge".into())
            .spawn(move || hold(share, buffer, asks, gave))
            .ok()
            .map(|_| (more, taken))
    }
}

/// The helper: takes a buffer of `share` for each ask, empty (its memory given up
/// while it is held), and gives them all back once the asks end.
fn hold(share: Share, size: usize, asks: Receiver<()>, gave: Sender<()>) {
    let mut held = Vec::new();
    while asks.recv().is_ok() {
        let mut buf = share.take();
        buf.bytes = Vec::new();
        held.push(buf);
        if gave.send(()).is_err() {
            break;
        }
    }
    for mut buf in held {
        // Given back with room, as the pool's buffers are.
        buf.bytes = Vec::with_capacity(size);
        drop(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_hold_buffers_and_past_the_pool_are_refused() {
        let pool = Arc::new(BufferPool::new(4 << 10, 1 << 10));
        let mut a = Charge::new(&pool, Duration::from_millis(50));
        a.add(1500, "a").expect("two buffers");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while pool.in_use() != 2 {
            assert!(std::time::Instant::now() < deadline, "{}", pool.in_use());
            std::thread::yield_now();
        }
        // Another job waits, then is refused while the pool is taken.
        let mut b = Charge::new(&pool, Duration::from_millis(50));
        b.add(2048, "b").expect("the rest");
        let e = b.add(1, "manifest").expect_err("busy");
        assert!(e.to_string().contains("server busy"), "{e}");
        drop(b);
        // More than the whole pool is never allowed.
        let e = a.add(10 << 10, "manifest").expect_err("over");
        assert!(e.to_string().contains("memory budget"), "{e}");
        drop(a);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while pool.in_use() != 0 {
            assert!(std::time::Instant::now() < deadline, "{}", pool.in_use());
            std::thread::yield_now();
        }
    }
}
