//! The process's limit on open descriptors, shared out among threads that each keep
//! many open (pack's blocks of small files, unpack's caches of open directories).
//!
//! `ferry` raises its soft limit to the hard one at start; where the hard limit itself
//! is low (some containers keep it at 1,024), holding the usual number open would make
//! opens fail with "Too many open files" part way through a job.

use rustix::process::{getrlimit, Resource};

/// How many descriptors each of `holders` may keep open, at most `most` and at least
/// one, once `reserved` are set aside for everything else.
pub fn open_files_each(holders: usize, reserved: u64, most: usize) -> usize {
    let limit = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    let share = limit.saturating_sub(reserved) / (holders.max(1) as u64);
    share.clamp(1, most.max(1) as u64) as usize
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
    }
}
