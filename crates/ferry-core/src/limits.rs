//! The process's limit on open descriptors, shared out among threads that each keep
//! many open (pack's blocks of small files, unpack's caches of open directories, copy's
//! chains of open directories).
//!
//! `ferry` raises its soft limit to the hard one at start; where the hard limit itself
//! is low (some containers keep it at 1,024), holding the usual number open would make
//! opens fail with "Too many open files" part way through a job.

use crate::error::Reporter;
use rustix::process::{getrlimit, Resource};

/// The limit on open descriptors (`None`: unlimited).
pub fn open_files_limit() -> Option<u64> {
    getrlimit(Resource::Nofile).current
}

/// How many descriptors each of `holders` may keep open, at most `most` and at least
/// one, once `reserved` are set aside for everything else.
pub fn open_files_each(holders: usize, reserved: u64, most: usize) -> usize {
    share_of_left(holders as u64, reserved, most)
}

/// How many threads, at most `most` and at least one, may each keep `each`
/// descriptors open once `reserved` are set aside for everything else.
pub fn threads_within(each: u64, reserved: u64, most: usize) -> usize {
    share_of_left(each, reserved, most)
}

/// What the limit leaves once `reserved` are set aside, divided by `by`, kept between
/// one and `most`: both share-outs above, seen from either side.
fn share_of_left(by: u64, reserved: u64, most: usize) -> usize {
    (open_files_left(reserved) / by.max(1)).clamp(1, most.max(1) as u64) as usize
}

/// [`threads_within`] for workers the user asked for: when there is room for fewer than
/// `asked`, says so through `reporter`.
pub fn workers_within(asked: usize, each: u64, reserved: u64, reporter: &dyn Reporter) -> usize {
    let asked = asked.max(1);
    let workers = threads_within(each, reserved, asked);
    if workers < asked {
        let limit = open_files_limit().unwrap_or(u64::MAX);
        let noun = if workers == 1 { "worker" } else { "workers" };
        reporter.warn(&format!(
            "{workers} {noun} instead of {asked}: the limit on open files is {limit} \
             (ulimit -n), {} of them open already",
            open_files_in_use()
        ));
    }
    workers
}

/// Descriptors the limit leaves once those open now and `reserved` more are set aside.
fn open_files_left(reserved: u64) -> u64 {
    open_files_limit()
        .unwrap_or(u64::MAX)
        .saturating_sub(open_files_in_use())
        .saturating_sub(reserved)
}

/// Descriptors open now, inherited ones included: a parent (a shell, a CI runner) may
/// pass dozens, and they count against the same limit. 0 where `/proc` is not mounted.
pub fn open_files_in_use() -> u64 {
    // The listing's own descriptor is one of the entries.
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count().saturating_sub(1) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_stay_between_one_and_the_most() {
        assert_eq!(
            open_files_each(4, u64::MAX, 32),
            1,
            "nothing left: one each"
        );
        let limit = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
        if limit >= 4 * 32 + 64 {
            assert_eq!(open_files_each(4, 64, 32), 32);
        }
        assert_eq!(open_files_each(0, 0, 0), 1);
        assert_eq!(threads_within(8, u64::MAX, 16), 1, "nothing left: one");
        if limit >= 16 * 8 + 64 {
            assert_eq!(threads_within(8, 64, 16), 16);
        }
        assert_eq!(threads_within(0, 0, 0), 1);
    }

    #[test]
    fn descriptors_in_use_are_counted() {
        let before = open_files_in_use();
        assert!(before >= 3, "at least the standard streams: {before}");
        let files: Vec<_> = (0..200).map(|_| tempfile::tempfile().unwrap()).collect();
        let during = open_files_in_use();
        drop(files);
        // Other tests' threads open and close files meanwhile: compare loosely.
        assert!(during >= before + 150, "{before} then {during}");
    }
}
