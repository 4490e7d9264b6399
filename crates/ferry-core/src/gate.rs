//! A counting gate: at most N threads inside at once.
//!
//! Some kernel operations serialise on a lock of their own, and more threads queued on
//! it only add sleeps and wake-ups: on XFS every clone updates the reference-count tree
//! of the source's allocation group under that group's header lock, and eight workers
//! cloning small files spend most of their time waiting for it (measured in
//! docs/benchmarks.md). Workers pass such calls through a gate sized to the CPUs.

use std::sync::{Condvar, Mutex, PoisonError};

/// At most `slots` holders at a time.
#[derive(Debug)]
pub struct Gate {
    free: Mutex<usize>,
    freed: Condvar,
}

/// A place inside a [`Gate`], given back when dropped.
pub struct Pass<'a>(&'a Gate);

impl Default for Gate {
    /// A gate with one place per CPU.
    fn default() -> Self {
        Gate::new(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

impl Gate {
    /// A gate letting `slots` (at least one) threads in at once.
    pub fn new(slots: usize) -> Self {
        Gate {
            free: Mutex::new(slots.max(1)),
            freed: Condvar::new(),
        }
    }

    /// Waits for a free place and takes it.
    pub fn enter(&self) -> Pass<'_> {
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        while *free == 0 {
            free = self
                .freed
                .wait(free)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *free -= 1;
        Pass(self)
    }
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        self.0.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    #[test]
    fn never_more_than_slots_inside() {
        let gate = Gate::new(2);
        let inside = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..200 {
                        let _pass = gate.enter();
                        let now = inside.fetch_add(1, SeqCst) + 1;
                        most.fetch_max(now, SeqCst);
                        std::thread::yield_now();
                        inside.fetch_sub(1, SeqCst);
                    }
                });
            }
        });
        assert_eq!(most.load(SeqCst), 2);
    }
}
