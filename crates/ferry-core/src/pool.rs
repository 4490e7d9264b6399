//! One pool of fixed-size buffers for a whole process or server, bounded by a memory
//! budget, from which each stream ([`Share`]) takes at most a few buffers at a time
//! (the IOCP paper's buffer sharing: memory bounded whatever the number of streams,
//! several buffers in flight per stream, none held by a stream that waits for data).
//!
//! Buffers are made as first needed, up to the budget, and kept for reuse; taking one
//! waits until the pool and the stream's own share both allow it. A buffer given back
//! wakes one thread waiting on the pool and one waiting on that buffer's own share, not
//! every waiter: with a hundred connections waiting, waking all of them for each buffer
//! cost the daemon more CPU than placing the data did.
//!
//! ```
//! use ferry_core::pool::{BufferPool, Share};
//! use std::sync::Arc;
//! let pool = Arc::new(BufferPool::new(4 << 20, 1 << 20)); // 4 buffers of 1 MiB
//! let stream = Share::new(pool.clone(), 2); // at most 2 of them at a time
//! let a = stream.take();
//! let b = stream.take();
//! assert_eq!(pool.in_use(), 2);
//! drop((a, b));
//! assert_eq!(pool.in_use(), 0);
//! ```

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// Buffers of one size, at most a budget's worth of them.
pub struct BufferPool {
    state: Mutex<State>,
    /// Signalled, once per buffer given back, to a thread waiting for the pool.
    given_back: Condvar,
    size: usize,
    max: usize,
}

#[derive(Default)]
struct State {
    free: Vec<Vec<u8>>,
    made: usize,
    in_use: usize,
    peak: usize,
    /// Threads waiting on `given_back`.
    waiting: usize,
}

impl State {
    fn can_give(&self, max: usize) -> bool {
        !self.free.is_empty() || self.made < max
    }
}

impl BufferPool {
    /// Buffers of `size` bytes, at most `budget / size` of them (at least one).
    pub fn new(budget: usize, size: usize) -> Self {
        BufferPool {
            state: Mutex::default(),
            given_back: Condvar::new(),
            size,
            max: (budget / size.max(1)).max(1),
        }
    }

    /// Bytes of each buffer.
    pub fn buffer_size(&self) -> usize {
        self.size
    }

    /// The most buffers there may be.
    pub fn capacity(&self) -> usize {
        self.max
    }

    /// Buffers taken and not given back now.
    pub fn in_use(&self) -> usize {
        self.lock().in_use
    }

    /// The most buffers ever in use at once.
    pub fn peak(&self) -> usize {
        self.lock().peak
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One stream's share of a pool: at most `cap` buffers at a time.
pub struct Share {
    pool: Arc<BufferPool>,
    cap: usize,
    /// Buffers this share holds (changed under the pool's lock).
    held: AtomicUsize,
    /// Signalled, once per buffer of this share given back, to a thread of the share
    /// waiting because it held all it may.
    own_back: Condvar,
}

impl Share {
    /// A share of `pool` holding at most `cap` buffers at once (at least one).
    pub fn new(pool: Arc<BufferPool>, cap: usize) -> Self {
        let cap = cap.clamp(1, pool.max);
        Share {
            pool,
            cap,
            held: AtomicUsize::new(0),
            own_back: Condvar::new(),
        }
    }

    /// A pool of its own: `buffers` buffers of `size` bytes, all for this share.
    pub fn private(buffers: usize, size: usize) -> Self {
        let pool = Arc::new(BufferPool::new(buffers.max(1) * size, size));
        Share::new(pool, buffers)
    }

    /// Bytes of each buffer.
    pub fn buffer_size(&self) -> usize {
        self.pool.size
    }

    /// A buffer (empty, with room for the pool's size), waiting until this share and
    /// the pool allow one.
    pub fn take(&self) -> PoolBuf<'_> {
        let pool = &*self.pool;
        let mut state = pool.lock();
        loop {
            if self.held.load(Relaxed) >= self.cap {
                // A wake-up from the pool this thread may have had is passed on: a
                // buffer it cannot take is another stream's to have.
                if state.waiting > 0 && state.can_give(pool.max) {
                    pool.given_back.notify_one();
                }
                state = self
                    .own_back
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            let bytes = match state.free.pop() {
                Some(bytes) => bytes,
                None if state.made < pool.max => {
                    state.made += 1;
                    Vec::with_capacity(pool.size)
                }
                None => {
                    state.waiting += 1;
                    state = pool
                        .given_back
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                    state.waiting -= 1;
                    continue;
                }
            };
            self.held.fetch_add(1, Relaxed);
            state.in_use += 1;
            state.peak = state.peak.max(state.in_use);
            return PoolBuf { bytes, share: self };
        }
    }
}

/// A buffer of a pool, given back when dropped.
pub struct PoolBuf<'s> {
    /// Its bytes (empty when taken; at most the pool's size should be put in).
    pub bytes: Vec<u8>,
    share: &'s Share,
}

impl Drop for PoolBuf<'_> {
    fn drop(&mut self) {
        let mut bytes = std::mem::take(&mut self.bytes);
        bytes.clear();
        let pool = &*self.share.pool;
        let mut state = pool.lock();
        state.free.push(bytes);
        state.in_use -= 1;
        self.share.held.fetch_sub(1, Relaxed);
        drop(state);
        // One buffer back: one waiter for the pool, one of this share's own.
        pool.given_back.notify_one();
        self.share.own_back.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_share_waits_for_its_own_buffers_and_the_pool_for_all() {
        let pool = Arc::new(BufferPool::new(3 << 10, 1 << 10));
        let (a, b) = (Share::new(pool.clone(), 2), Share::new(pool.clone(), 2));
        let b = Arc::new(b);
        let a1 = a.take();
        let _a2 = a.take();
        let _b1 = b.take();
        assert_eq!(pool.in_use(), 3);
        let b = b.clone();
        // Not scoped: a waiter never woken fails the test instead of holding it.
        let (got, gets) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = got.send(b.take().bytes.capacity());
        });
        let early = gets.recv_timeout(Duration::from_millis(50));
        assert!(early.is_err(), "the pool is spent: b must wait");
        drop(a1);
        let woken = gets.recv_timeout(Duration::from_secs(20));
        assert!(woken.expect("a buffer given back wakes b") >= 1 << 10);
        assert_eq!((pool.peak(), pool.capacity()), (3, 3));
    }

    #[test]
    fn many_streams_on_a_small_pool_all_finish() {
        // A lost wake-up leaves a taker asleep with buffers free: the run stalls, and
        // the takers (not scoped, so a stalled one cannot hold the test) never finish.
        let pool = Arc::new(BufferPool::new(4 << 10, 1 << 10));
        let (done, finished) = std::sync::mpsc::channel();
        for _ in 0..24 {
            let share = Arc::new(Share::new(pool.clone(), 2));
            for _ in 0..3 {
                let (share, done) = (share.clone(), done.clone());
                std::thread::spawn(move || {
                    for i in 0..200 {
                        let held = share.take();
                        if i % 7 == 0 {
                            std::thread::yield_now();
                        }
                        drop(held);
                    }
                    let _ = done.send(());
                });
            }
        }
        for n in 0..72 {
            let waited = finished.recv_timeout(Duration::from_secs(20));
            assert!(
                waited.is_ok(),
                "{n} of 72 takers finished: the others stalled"
            );
        }
        assert_eq!(pool.in_use(), 0);
        assert!(pool.peak() <= pool.capacity());
    }
}
