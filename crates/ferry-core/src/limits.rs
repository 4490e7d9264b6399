//! The process's limit on open descriptors, shared out among threads that each keep
//! many open (pack's blocks of small files, unpack's caches of open directories, copy's
//! chains of open directories).
//!
//! `ferry` raises its soft limit to the hard one at start; where the hard limit itself
//! is low (some containers keep it at 1,024), holding the usual number open would make
//! opens fail with "Too many open files" part way through a job.

use rustix::process::{getrlimit, Resource};

/// The limit on open descriptors (`None`: unlimited).
pub fn open_files_limit() -> Option<u64> {
    getrlimit(Resource::Nofile).current
}

/// How many descriptors each of `holders` may keep open, at most `most` and at least
/// one, once `reserved` are set aside for everything else.
pub fn open_files_each(holders: usize, reserved: u64, most: usize) -> usize {
    (open_files_left(reserved) / (holders.max(1) as u64)).clamp(1, most.max(1) as u64) as usize
}

/// How many threads, at most `most` and at least one, may each keep `each`
/// descriptors open once `reserved` are set aside for everything else.
pub fn threads_within(each: u64, reserved: u64, most: usize) -> usize {
    (open_files_left(reserved) / each.max(1)).clamp(1, most.max(1) as u64) as usize
}

/// Descriptors the limit leaves once `reserved` are set aside.
fn open_files_left(reserved: u64) -> u64 {
    open_files_limit()
        .unwrap_or(u64::MAX)
        .saturating_sub(reserved)
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
}
