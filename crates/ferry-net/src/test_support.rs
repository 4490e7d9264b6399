//! What the unit tests share: a reporter that keeps every error as a line.

use ferry_core::error::{Error, Reporter};
use std::sync::Mutex;

/// Keeps each error reported as `path: op: message`.
#[derive(Default)]
pub(crate) struct Collect(pub(crate) Mutex<Vec<String>>);

impl Reporter for Collect {
    fn error(&self, err: &Error) {
        let line = format!("{}: {}: {}", err.path, err.op, err.os);
        self.0.lock().expect("lock").push(line);
    }
    fn warn(&self, _: &str) {}
}
