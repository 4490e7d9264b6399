//! The checks of a mount left for after it answers (the table against the tar, a large
//! index's checksum): lookups and listings are served meanwhile, file data only once
//! they have passed. A read that comes first waits for them.

use std::sync::{Condvar, Mutex, PoisonError};

/// Where the checks stand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Running,
    Passed,
    Failed,
}

/// Whether the checks have passed, failed or still run; readers wait on it.
pub(super) struct Gate {
    state: Mutex<State>,
    done: Condvar,
}

impl Gate {
    /// A gate with nothing left to check.
    pub(super) fn open() -> Gate {
        Gate::with(State::Passed)
    }

    /// A gate whose checks are running.
    pub(super) fn running() -> Gate {
        Gate::with(State::Running)
    }

    fn with(state: State) -> Gate {
        Gate {
            state: Mutex::new(state),
            done: Condvar::new(),
        }
    }

    /// Records how the checks ended and wakes every waiting reader.
    pub(super) fn finish(&self, passed: bool) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = match passed {
            true => State::Passed,
            false => State::Failed,
        };
        self.done.notify_all();
    }

    /// Waits until the checks have ended; whether they passed.
    pub(super) fn wait(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while *state == State::Running {
            state = self
                .done
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *state == State::Passed
    }

    /// Whether the checks have passed (without waiting).
    pub(super) fn passed(&self) -> bool {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) == State::Passed
    }
}
