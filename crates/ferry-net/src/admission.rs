//! Admission control for the daemon: at most so many connections hold a place at once;
//! one more waits for a place, and is told the server is busy when none frees up in
//! time. A connection waiting here holds no buffer.
//!
//! Of the connections admitted, at most so many *run* (place data) at once; the others
//! queue, in the order they asked ([`Ticket::run`]), holding no buffer and no worker
//! and, their clients waiting for the server's answer, taking no CPU on either end.
//! Admitting many but running few is what lets a shared pool serve more clients than
//! one buffer each without thrashing: with 128 uploads running on a 64-buffer pool
//! each got two buffers and one worker, and all of them contended for both. A queued
//! job waits only while the running ones make progress: when none has started or
//! finished for [`Admission::with_runners`]'s patience (they wait on slow clients,
//! say), the next one runs anyway, over the limit, one more each time that passes.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Places for connections.
pub struct Admission {
    state: Mutex<State>,
    freed: Condvar,
    /// Signalled to every queued job when a running one starts or ends.
    run_changed: Condvar,
    max: usize,
    wait: Duration,
    runners: usize,
    patience: Duration,
}

struct State {
    taken: usize,
    running: usize,
    /// The turn the next job to queue for running gets.
    next_turn: u64,
    /// The turn whose job runs next.
    turn: u64,
    /// When a job last started or stopped running.
    last_change: Instant,
}

/// A connection's place, given back when dropped.
pub struct Ticket(Arc<Admission>);

/// A job's place among those running, given back when dropped.
pub struct Running(Arc<Admission>);

impl Admission {
    /// `max` places; a connection waits at most `wait` for one. Every job admitted
    /// runs at once (see [`Admission::with_runners`]).
    pub fn new(max: usize, wait: Duration) -> Arc<Self> {
        Self::with_runners(max, wait, max, Duration::ZERO)
    }

    /// `max` places, waited for at most `wait`; of the jobs admitted, `runners` run
    /// at once, the next one anyway when none has started or finished for `patience`.
    pub fn with_runners(
        max: usize,
        wait: Duration,
        runners: usize,
        patience: Duration,
    ) -> Arc<Self> {
        Arc::new(Admission {
            state: Mutex::new(State {
                taken: 0,
                running: 0,
                next_turn: 0,
                turn: 0,
                last_change: Instant::now(),
            }),
            freed: Condvar::new(),
            run_changed: Condvar::new(),
            max: max.max(1),
            wait,
            runners: runners.max(1),
            patience,
        })
    }

    /// The most connections at once.
    pub fn max(&self) -> usize {
        self.max
    }

    /// The most jobs running at once while they make progress.
    pub fn runners(&self) -> usize {
        self.runners
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place, or `None` when none freed up within the wait.
    pub fn enter(self: &Arc<Self>) -> Option<Ticket> {
        let deadline = Instant::now() + self.wait;
        let mut state = self.lock();
        while state.taken >= self.max {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            state = self
                .freed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        state.taken += 1;
        Some(Ticket(self.clone()))
    }

    /// Connections holding a place now.
    pub fn taken(&self) -> usize {
        self.lock().taken
    }

    /// Jobs running now.
    pub fn running(&self) -> usize {
        self.lock().running
    }

    /// Jobs waiting for their turn to run now.
    pub fn queued(&self) -> usize {
        let state = self.lock();
        (state.next_turn - state.turn) as usize
    }
}

impl Ticket {
    /// A place among the running jobs: at once if one is free and no job queued
    /// before; else when one frees up and this job's turn has come, or when none has
    /// started or finished for the patience.
    pub fn run(&self) -> Running {
        let gate = &*self.0;
        let mut state = gate.lock();
        let turn = state.next_turn;
        state.next_turn += 1;
        loop {
            if state.turn == turn {
                let stalled = state.last_change.elapsed();
                if state.running < gate.runners || stalled >= gate.patience {
                    break;
                }
                state = gate
                    .run_changed
                    .wait_timeout(state, gate.patience - stalled)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            } else {
                state = gate
                    .run_changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        }
        state.turn += 1;
        state.running += 1;
        state.last_change = Instant::now();
        drop(state);
        // The next in turn looks again (a job starting is rare beside its work).
        gate.run_changed.notify_all();
        Running(self.0.clone())
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.0.lock().taken -= 1;
        self.0.freed.notify_one();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.running -= 1;
        state.last_change = Instant::now();
        drop(state);
        self.0.run_changed.notify_all();
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

    /// Runs `ticket`'s job for a moment, noting when it started.
    fn run_and_note(ticket: &Ticket, name: &'static str, order: &Mutex<Vec<&'static str>>) {
        let running = ticket.run();
        order.lock().expect("lock").push(name);
        std::thread::sleep(Duration::from_millis(20));
        drop(running);
    }

    #[test]
    fn admitted_jobs_past_the_runners_queue_in_turn() {
        let gate = Admission::with_runners(8, Duration::ZERO, 1, Duration::from_secs(30));
        let (a, b, c) = (gate.enter(), gate.enter(), gate.enter());
        let (a, b, c) = (a.expect("a"), b.expect("b"), c.expect("c"));
        let first = a.run();
        let order = Mutex::new(Vec::new());
        // Each queues before the next is started: the order they asked in is known.
        let queued = |n: usize| {
            let deadline = Instant::now() + Duration::from_secs(10);
            while gate.queued() < n {
                assert!(Instant::now() < deadline, "{} queued", gate.queued());
                std::thread::yield_now();
            }
        };
        std::thread::scope(|s| {
            let tb = s.spawn(|| run_and_note(&b, "b", &order));
            queued(1);
            let tc = s.spawn(|| run_and_note(&c, "c", &order));
            queued(2);
            assert_eq!(gate.running(), 1, "b and c must queue behind a");
            assert!(order.lock().expect("lock").is_empty());
            drop(first);
            tb.join().expect("b");
            tc.join().expect("c");
        });
        assert_eq!(*order.lock().expect("lock"), ["b", "c"]);
        assert_eq!((gate.running(), gate.taken()), (0, 3));
    }

    #[test]
    fn a_queued_job_runs_anyway_when_the_running_ones_stall() {
        let patience = Duration::from_millis(200);
        let gate = Admission::with_runners(4, Duration::ZERO, 1, patience);
        let (a, b) = (gate.enter().expect("a"), gate.enter().expect("b"));
        let _slow = a.run();
        let t = Instant::now();
        let _second = b.run();
        assert!(t.elapsed() >= patience - Duration::from_millis(10));
        assert_eq!(gate.running(), 2);
    }
}
