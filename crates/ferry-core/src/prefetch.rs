//! Read-ahead for a walk that must stay in order.
//!
//! A walk with one worker (packing, which keeps every directory's subtree together in
//! the archive) reads one file at a time: on a cold cache the disk sees one request at
//! a time. Prefetch threads run ahead of it through the same names, opening each
//! regular file and asking the kernel to read it in (`POSIX_FADV_WILLNEED`, which starts
//! the reads and returns), so the worker finds inodes and data in memory. They stay at
//! most [`AHEAD`] names in front of it and skip names it has passed.
//!
//! On a warm cache that work is wasted, and not free: every file is opened and closed
//! once more, by threads competing with the fillers for the CPUs (by hand, kernel tree
//! on ext4: 1.19-1.42 s with prefetching, 0.98-1.28 s without). So each file a
//! prefetcher opens is first asked for one byte without waiting for the disk
//! (`RWF_NOWAIT`). After [`WARM_STREAK`] files in a row answered from memory the cache
//! is taken as warm: no more runs are offered, and the walk itself samples one file
//! in [`SAMPLE_EVERY`] it opens ([`Prefetch::watch`]); the first one not in memory
//! turns prefetching back on from the next run.

use crate::walk::FileOpener;
use rustix::fs::{self as rfs, Advice};
use rustix::io::{self as rio, ReadWriteFlags};
use std::collections::VecDeque;
use std::ffi::CString;
use std::os::fd::AsFd;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// Prefetchers stay at most this many names ahead of the walk.
pub const AHEAD: usize = 256;

/// After this many files in a row were found in memory, the cache is taken as warm ...
pub const WARM_STREAK: usize = 64;
/// ... and the walk samples one file in this many, until one is not in memory.
pub const SAMPLE_EVERY: usize = 16;

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

    /// The walk has reached the last name: nothing left worth reading ahead.
    fn passed(&self) -> bool {
        self.walked.load(Relaxed) + 1 >= self.names.len()
    }
}

/// The queue of runs the prefetch threads work through.
#[derive(Default)]
pub struct Prefetch {
    queue: Mutex<(VecDeque<Arc<Run>>, bool)>, // (runs, walk over)
    ready: Condvar,
    /// Files found in memory in a row (see the module doc).
    warm: AtomicUsize,
    /// Files the walk opened while warm, to pick its samples.
    watched: AtomicUsize,
    opener: FileOpener,
}

impl Prefetch {
    /// Queues regular files `names` of the directory `dir` for reading ahead; None
    /// while the cache is warm.
    pub fn offer(
        &self,
        dir: Arc<OwnedFd>,
        names: impl Iterator<Item = CString>,
    ) -> Option<Arc<Run>> {
        if self.is_warm() {
            return None;
        }
        let names: Vec<CString> = names.collect();
        if names.is_empty() {
            return None;
        }
        let run = Arc::new(Run {
            dir,
            names,
            next: AtomicUsize::new(0),
            walked: AtomicUsize::new(0),
        });
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        // Each run holds its directory open: runs the walk has passed go now, not when
        // a prefetcher comes to them (with busy CPUs, dozens waited, each holding one).
        q.0.retain(|r| !r.passed());
        q.0.push_back(run.clone());
        drop(q);
        self.ready.notify_all();
        Some(run)
    }

    /// The walk opened a regular file: while warm, one in [`SAMPLE_EVERY`] is checked,
    /// and one not in memory ends the warm spell.
    pub fn watch(&self, fd: impl AsFd) {
        if self.is_warm()
            && self.watched.fetch_add(1, Relaxed) % SAMPLE_EVERY == 0
            && !in_memory(fd)
        {
            self.warm.store(0, Relaxed);
        }
    }

    /// Whether the last [`WARM_STREAK`] files looked at were all in memory.
    pub fn is_warm(&self) -> bool {
        self.warm.load(Relaxed) >= WARM_STREAK
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
            // Opened as the walk opens it: the byte read below must not touch the atime.
            if let Ok(fd) = self.opener.open(&*run.dir, run.names[i].as_c_str()) {
                if in_memory(&fd) {
                    self.warm.fetch_add(1, Relaxed);
                } else {
                    self.warm.store(0, Relaxed);
                    let _ = rfs::fadvise(&fd, 0, None, Advice::WillNeed);
                }
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
                if i < run.names.len() && !run.passed() {
                    return Some((run.clone(), i));
                }
                q.0.pop_front();
            }
            q = self.ready.wait(q).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Whether the first byte of `fd` can be read without waiting for the disk (an empty
/// file has nothing to wait for). A filesystem that cannot say counts as "no".
fn in_memory(fd: impl AsFd) -> bool {
    let mut byte = [0u8; 1];
    let mut bufs = [std::io::IoSliceMut::new(&mut byte)];
    rio::preadv2(fd, &mut bufs, 0, ReadWriteFlags::NOWAIT).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_testkit::{mount, skip};
    use rustix::fs::{Mode, OFlags};

    fn files(dir: &std::path::Path, n: usize) -> Vec<CString> {
        for i in 0..n {
            std::fs::write(dir.join(format!("f{i}")), vec![7u8; 10_000]).expect("write");
        }
        (0..n)
            .map(|i| CString::new(format!("f{i}")).expect("name"))
            .collect()
    }

    fn open_dir(path: &std::path::Path) -> Arc<OwnedFd> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY;
        Arc::new(rfs::open(path, flags, Mode::empty()).expect("open"))
    }

    /// Runs `p`'s prefetchers over `names` until they are all taken.
    fn drain(p: &Prefetch, dir: &Arc<OwnedFd>, names: Vec<CString>) {
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| p.work());
            }
            let run = p.offer(dir.clone(), names.into_iter()).expect("offered");
            while run.next.load(Relaxed) < run.names.len() {
                std::thread::yield_now();
            }
            p.close();
        });
    }

    /// Prefetchers go through every offered name (a missing one is no error) and end
    /// when closed, also while waiting for work.
    #[test]
    fn prefetchers_drain_runs_and_end_when_closed() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut names = files(tmp.path(), 50);
        names.push(CString::new("missing").expect("name"));
        let p = Prefetch::default();
        drain(&p, &open_dir(tmp.path()), names);
        assert!(p.queue.lock().expect("lock").1);
        assert!(!p.is_warm(), "50 files are too few to call the cache warm");
    }

    /// Queued runs hold their directories open: one the walk has passed leaves the
    /// queue when the next is offered, and a directory without files is not queued.
    #[test]
    fn runs_the_walk_has_passed_do_not_stay_queued() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = open_dir(tmp.path());
        let p = Prefetch::default();
        assert!(p.offer(dir.clone(), std::iter::empty()).is_none());
        let names = || files(tmp.path(), 3).into_iter();
        let first = p.offer(dir.clone(), names()).expect("offered");
        let second = p.offer(dir.clone(), names()).expect("offered");
        assert_eq!(
            p.queue.lock().expect("lock").0.len(),
            2,
            "neither passed yet"
        );
        first.at(2);
        second.at(1);
        drop((first, second));
        let _third = p.offer(dir.clone(), names()).expect("offered");
        assert_eq!(
            p.queue.lock().expect("lock").0.len(),
            2,
            "the first one went"
        );
        assert_eq!(
            Arc::strong_count(&dir),
            3,
            "ours, the second's and the third's"
        );
    }

    /// Writes `name` in `dir` (64 KiB), syncs it and drops it from the cache; returns
    /// it open.
    fn dropped_file(dir: &std::path::Path, name: &str) -> std::fs::File {
        let path = dir.join(name);
        std::fs::write(&path, vec![1u8; 1 << 16]).expect("write");
        let file = std::fs::File::open(&path).expect("open");
        file.sync_all().expect("sync");
        rfs::fadvise(&file, 0, None, Advice::DontNeed).expect("fadvise");
        file
    }

    /// Whether `dir` tells a file in memory from one that is not: a file just written
    /// reads without waiting, and not once dropped from the cache. Not so on tmpfs
    /// (no `RWF_NOWAIT`, or a file that *is* its pages).
    fn tells_cached_from_dropped(dir: &std::path::Path) -> bool {
        std::fs::write(dir.join("probe"), b"x").expect("write");
        let probe = std::fs::File::open(dir.join("probe")).expect("open");
        in_memory(&probe) && !in_memory(dropped_file(dir, "probe-dropped"))
    }

    /// Files just written are in memory: after a streak of them no more runs are
    /// offered; a file the walk opens that is not in memory turns prefetching back on.
    /// Runs in the temp dir, or else (as root) on an ext4 image: CI's temp dir may be a
    /// tmpfs.
    #[test]
    fn a_warm_cache_stops_prefetching_until_a_file_is_not_in_memory() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mounted;
        let root = if tells_cached_from_dropped(tmp.path()) {
            tmp.path()
        } else {
            mounted = match mount::mount_image(64 << 20, "mkfs.ext4", &["-q"]) {
                Ok(m) => m,
                Err(why) => return skip(&format!("the temp dir cannot tell; {why}")),
            };
            assert!(tells_cached_from_dropped(mounted.path()), "ext4 can tell");
            mounted.path()
        };
        let dir = open_dir(root);
        let p = Prefetch::default();
        drain(&p, &dir, files(root, 2 * WARM_STREAK));
        assert!(p.is_warm());
        let names = files(root, 10);
        assert!(p.offer(dir.clone(), names.into_iter()).is_none());

        let cold = dropped_file(root, "cold");
        let hot = std::fs::File::open(root.join("f1")).expect("open");
        for _ in 0..SAMPLE_EVERY - 1 {
            p.watch(&hot);
        }
        assert!(p.is_warm(), "files in memory keep it warm");
        for _ in 0..SAMPLE_EVERY {
            p.watch(&cold);
        }
        assert!(
            !p.is_warm(),
            "a sampled file not in memory ends the warm spell"
        );
        assert!(p.offer(dir.clone(), files(root, 3).into_iter()).is_some());
    }
}
