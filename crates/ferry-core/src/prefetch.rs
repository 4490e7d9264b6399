//! Read-ahead for a walk that must stay in order.
//!
//! A walk with one worker (packing, which keeps every directory's subtree together in
//! the archive) reads one file at a time: on a cold cache the disk sees one request at
//! a time. Prefetch threads run ahead of it through the same names, opening each
//! regular file and asking the kernel to read it in (`POSIX_FADV_WILLNEED`, which starts
//! the reads and returns), so the worker finds inodes and data in memory. They stay at
//! most [`AHEAD`] names in front of it and skip names it has passed, so on a warm cache
//! they mostly sleep.

use rustix::fs::{self as rfs, Advice, Mode, OFlags};
use std::collections::VecDeque;
use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// Prefetchers stay at most this many names ahead of the walk.
pub const AHEAD: usize = 256;

/// Names of one directory to read ahead, and how far the walk and the prefetchers are.
pub struct Run {
    dir: Arc<OwnedFd>,
    names: Vec<CString>,
    /// The next name a prefetcher takes.
    next: AtomicUsize,
    /// The walk has reached this name.
    walked: AtomicUsize,
}

impl Run {
    /// The walk has reached name `i`; prefetchers skip names before it.
    pub fn at(&self, i: usize) {
        self.walked.store(i, Relaxed);
    }
}

/// The queue of runs the prefetch threads work through.
#[derive(Default)]
pub struct Prefetch {
    queue: Mutex<(VecDeque<Arc<Run>>, bool)>, // (runs, walk over)
    ready: Condvar,
}

impl Prefetch {
    /// Queues regular files `names` of the directory `dir` for reading ahead.
    pub fn offer(&self, dir: Arc<OwnedFd>, names: Vec<CString>) -> Arc<Run> {
        let run = Arc::new(Run {
            dir,
            names,
            next: AtomicUsize::new(0),
            walked: AtomicUsize::new(0),
        });
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        q.0.push_back(run.clone());
        drop(q);
        self.ready.notify_all();
        run
    }

    /// Ends the prefetch threads once the walk is over.
    pub fn close(&self) {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner).1 = true;
        self.ready.notify_all();
    }

    /// A prefetch thread's loop: runs until [`Prefetch::close`].
    pub fn work(&self) {
        while let Some((run, i)) = self.take() {
            // The walk goes through every name of the run, so this wait ends.
            while i > run.walked.load(Relaxed) + AHEAD {
                if self.closed() {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            if i < run.walked.load(Relaxed) {
                continue;
            }
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
            if let Ok(fd) = rfs::openat(&*run.dir, run.names[i].as_c_str(), flags, Mode::empty()) {
                let _ = rfs::fadvise(&fd, 0, None, Advice::WillNeed);
            }
        }
    }

    fn closed(&self) -> bool {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner).1
    }

    /// The next name to read ahead, waiting for one; None once closed.
    fn take(&self) -> Option<(Arc<Run>, usize)> {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if q.1 {
                return None;
            }
            while let Some(run) = q.0.front() {
                let i = run.next.fetch_add(1, Relaxed);
                // The walk is past this run's end: nothing left worth reading.
                if i < run.names.len() && run.walked.load(Relaxed) + 1 < run.names.len() {
                    return Some((run.clone(), i));
                }
                q.0.pop_front();
            }
            q = self.ready.wait(q).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prefetchers go through every offered name (a missing one is no error) and end
    /// when closed, also while waiting for work.
    #[test]
    fn prefetchers_drain_runs_and_end_when_closed() {
        let tmp = tempfile::tempdir().expect("tempdir");
        for i in 0..50 {
            std::fs::write(tmp.path().join(format!("f{i}")), vec![7u8; 10_000]).expect("write");
        }
        let dir = rfs::open(
            tmp.path(),
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        )
        .expect("open");
        let dir = Arc::new(dir);
        let p = Prefetch::default();
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| p.work());
            }
            let mut names: Vec<CString> = (0..50)
                .map(|i| CString::new(format!("f{i}")).expect("name"))
                .collect();
            names.push(CString::new("missing").expect("name"));
            let run = p.offer(dir.clone(), names);
            while run.next.load(Relaxed) < run.names.len() {
                std::thread::yield_now();
            }
            p.close();
        });
        assert!(p.queue.lock().expect("lock").1);
    }
}
