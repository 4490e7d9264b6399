//! The checks of a mount left for after it answers (the table against the tar, a large
//! index's checksum): lookups and listings are served meanwhile, file data once the
//! checks have passed it. The table check goes through the files in the order of their
//! data and says how far it has got ([`Gate::advance`]): a file it has passed is served
//! at once, a read of one beyond waits.

use std::sync::{Condvar, Mutex, PoisonError};

/// Where the checks stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Still running; every file node numbered below this has passed.
    Running(u32),
    Passed,
    Failed,
}

/// Whether the checks have passed, failed or still run, and how far; readers wait on it.
pub(super) struct Gate {
    state: Mutex<State>,
    moved: Condvar,
}

impl Gate {
    /// A gate with nothing left to check.
    pub(super) fn open() -> Gate {
        Gate::with(State::Passed)
    }

    /// A gate whose checks are running and have passed nothing yet.
    pub(super) fn running() -> Gate {
        Gate::with(State::Running(0))
    }

    fn with(state: State) -> Gate {
        Gate {
            state: Mutex::new(state),
            moved: Condvar::new(),
        }
    }

    /// Records that every file node numbered below `to` has passed, and wakes the
    /// readers waiting for such a file.
    pub(super) fn advance(&self, to: u32) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let State::Running(below) = *state {
            if to > below {
                *state = State::Running(to);
                self.moved.notify_all();
            }
        }
    }

    /// Records how the checks ended and wakes every waiting reader.
    pub(super) fn finish(&self, passed: bool) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = match passed {
            true => State::Passed,
            false => State::Failed,
        };
        self.moved.notify_all();
    }

    /// Waits until the checks have passed file node `id`, or have ended; whether it
    /// passed (false once the checks failed, even for a file passed before: from then
    /// on nothing is served).
    pub(super) fn wait_for(&self, id: u32) -> bool {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            match *state {
                State::Running(below) if below <= id => {
                    state = self
                        .moved
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner)
                }
                State::Running(_) | State::Passed => return true,
                State::Failed => return false,
            }
        }
    }

    /// Whether the checks have passed (without waiting).
    pub(super) fn passed(&self) -> bool {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) == State::Passed
    }
}

#[cfg(test)]
mod tests {
    use super::Gate;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_file_before_the_checks_progress_is_served_one_beyond_it_waits() {
        let gate = Arc::new(Gate::running());
        gate.advance(4096);
        assert!(gate.wait_for(4095), "the last file the check has passed");
        assert!(!gate.passed());
        let waiter = {
            let gate = Arc::clone(&gate);
            std::thread::spawn(move || gate.wait_for(4096))
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !waiter.is_finished(),
            "a file beyond the check is not served"
        );
        gate.advance(2048); // never backwards
        gate.advance(4097);
        assert!(waiter.join().unwrap());
    }

    #[test]
    fn a_failed_check_serves_nothing_even_what_had_passed() {
        let gate = Arc::new(Gate::running());
        gate.advance(100);
        let waiter = {
            let gate = Arc::clone(&gate);
            std::thread::spawn(move || gate.wait_for(200))
        };
        gate.finish(false);
        assert!(!waiter.join().unwrap());
        assert!(!gate.wait_for(1));
        gate.advance(400);
        assert!(!gate.wait_for(1), "a failed gate stays failed");
    }
}
