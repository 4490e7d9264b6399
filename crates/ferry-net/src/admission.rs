//! Admission control for the daemon: at most so many connections run a job at once;
//! one more waits for a place, and is told the server is busy when none frees up in
//! time. A connection waiting here holds no buffer.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Places for connections.
pub struct Admission {
    taken: Mutex<usize>,
    freed: Condvar,
    max: usize,
    wait: Duration,
}

/// A connection's place, given back when dropped.
pub struct Ticket(Arc<Admission>);

impl Admission {
    /// `max` places; a connection waits at most `wait` for one.
    pub fn new(max: usize, wait: Duration) -> Arc<Self> {
        Arc::new(Admission {
            taken: Mutex::new(0),
            freed: Condvar::new(),
            max: max.max(1),
            wait,
        })
    }

    /// The most connections at once.
    pub fn max(&self) -> usize {
        self.max
    }

    /// A place, or `None` when none freed up within the wait.
    pub fn enter(self: &Arc<Self>) -> Option<Ticket> {
        let deadline = Instant::now() + self.wait;
        let mut taken = self.taken.lock().unwrap_or_else(PoisonError::into_inner);
        while *taken >= self.max {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            taken = self
                .freed
                .wait_timeout(taken, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *taken += 1;
        Some(Ticket(self.clone()))
    }

    /// Connections holding a place now.
    pub fn taken(&self) -> usize {
        *self.taken.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        *self.0.taken.lock().unwrap_or_else(PoisonError::into_inner) -= 1;
        self.0.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_past_the_places_waits_then_is_turned_away() {
        let gate = Admission::new(1, Duration::from_millis(100));
        let first = gate.enter().expect("a place");
        let t = Instant::now();
        assert!(gate.enter().is_none());
        assert!(t.elapsed() >= Duration::from_millis(100));
        drop(first);
        assert!(gate.enter().is_some());
    }
}
