//! Writing a packed archive into a stream (a pipe, a fifo) on a thread of its own.
//!
//! A stream is written in order, so the jobs that fillers do in parallel into an
//! archive file ([`super::fill`]) are done one after another here: reading the small
//! files into their block and writing it, or reading a large file's data and writing
//! it. They used to be done by the laying-out thread itself, between walking, opening
//! and laying out: then the receiving end of the pipe waited while the sender walked
//! (`ferry pack SRC - | ferry unpack - DST`, issue #23). On a thread of their own they
//! overlap with the layout, which only waits when [`QUEUED`] jobs are waiting.

use super::fill::Job;
use super::pack_sink::stream_runs;
use crate::index::HashSlot;
use ferry_core::data::Method;
use ferry_core::error::Reporter;
use ferry_core::Stats;
use std::io::{self, Write};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Mutex, PoisonError};
use std::thread::{Scope, ScopedJoinHandle};

/// The stream written to.
type Out = Box<dyn Write + Send>;

/// Content hashes found, `(index slot, hash)`.
type Hashes = Vec<(HashSlot, u128)>;

/// Jobs waiting for the writing thread at most (each block up to 256 KiB, each job
/// holding its files open).
const QUEUED: usize = 8;

/// What the writing thread shares with the laying-out thread.
#[derive(Default)]
pub struct Shared {
    /// Content hashes found, `(index slot, hash)`.
    hashes: Mutex<Hashes>,
    /// Block buffers written, for the next blocks.
    spare: Mutex<Vec<Vec<u8>>>,
    /// Writing the stream failed: what is laid out after that is moot.
    failed: std::sync::atomic::AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// The content hashes found since last asked.
    pub fn take_hashes(&self) -> Hashes {
        std::mem::take(&mut *lock(&self.hashes))
    }

    /// A buffer for a new block.
    pub fn buffer(&self) -> Vec<u8> {
        lock(&self.spare).pop().unwrap_or_default()
    }

    /// Whether writing the stream has failed.
    pub fn has_failed(&self) -> bool {
        self.failed.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// The writing thread, fed in archive order.
pub struct StreamOut<'scope, 'env> {
    shared: &'env Shared,
    queue: Option<SyncSender<Job>>,
    thread: Option<ScopedJoinHandle<'scope, (Out, io::Result<()>)>>,
}

impl<'scope, 'env: 'scope> StreamOut<'scope, 'env> {
    /// Starts the thread writing to `out` in `scope`.
    pub fn start(
        scope: &'scope Scope<'scope, 'env>,
        mut out: Out,
        shared: &'env Shared,
        stats: &'env Stats,
        reporter: &'env dyn Reporter,
    ) -> Self {
        let (queue, jobs) = sync_channel::<Job>(QUEUED);
        let thread = scope.spawn(move || {
            let mut written = Ok(());
            // After a failure jobs are still taken (and their files closed), so the
            // laying-out thread never waits for a thread that stopped.
            for job in jobs {
                if written.is_err() {
                    continue;
                }
                written = write_job(job, &mut *out, shared, stats, reporter);
                if written.is_err() {
                    shared
                        .failed
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
            (out, written)
        });
        StreamOut {
            shared,
            queue: Some(queue),
            thread: Some(thread),
        }
    }

    /// What the thread shares.
    pub fn shared(&self) -> &'env Shared {
        self.shared
    }

    /// Hands `job`, the next stretch of the archive, to the thread.
    pub fn send(&self, job: Job) {
        if let Some(q) = &self.queue {
            // The thread takes jobs until the queue is dropped, so this cannot fail.
            let _ = q.send(job);
        }
    }

    /// Waits until every job is written; gives back the stream, with the content
    /// hashes not yet taken, or the first failure to write it.
    pub fn finish(mut self) -> io::Result<(Out, Hashes)> {
        self.queue = None;
        let (out, written) = self
            .thread
            .take()
            .map(|t| t.join())
            .ok_or_else(|| io::Error::other("no writing thread"))?
            .map_err(|_| io::Error::other("the thread writing the archive failed"))?;
        written?;
        Ok((out, self.shared.take_hashes()))
    }
}

/// Does one job: the block's files read in and the block written, or a large file's
/// data written.
fn write_job(
    job: Job,
    out: &mut dyn Write,
    shared: &Shared,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> io::Result<()> {
    match job {
        Job::Block(mut block) => {
            let files = block.files.len() as u64;
            let mut hashes = Vec::new();
            block.read_files(reporter, &mut hashes);
            lock(&shared.hashes).extend(hashes);
            stats.count_files_moved(Method::Buffered, files);
            out.write_all(block.bytes())?;
            lock(&shared.spare).push(block.into_buffer());
        }
        Job::Large(large) => {
            let hash = stream_runs(&large, out, reporter)?;
            lock(&shared.hashes).push((large.slot, hash));
            stats.count_method(Method::Buffered);
        }
    }
    Ok(())
}
