//! Filling an archive's laid-out regions, on filler threads.
//!
//! Pack lays entries out on one thread, in walk order, so that every directory's subtree
//! stays contiguous in the archive (tar readers set a directory's times when extraction
//! leaves its subtree). Laying out needs only what `fstat` and the xattrs say; moving
//! the bytes is the larger part of the work, and it is what this module does, on
//! several threads, each job at offsets already fixed:
//!
//! - a [`Block`]: a stretch of the archive holding headers and small files, built in
//!   memory with the headers in place; the filler reads each file's content into its
//!   slot and writes the stretch with one `pwrite`;
//! - a [`Large`] file: its data region, moved by the cheapest path (cloned, copied in
//!   the kernel, or through memory). The laying-out thread may run a clone job itself
//!   (see `pack`'s `InlineClones`): clones into one file run one at a time anyway.
//!
//! Into a stream the same jobs are done in order on the laying-out thread.

use super::header::pad_block;
use crate::index::HashSlot;
use ferry_core::data::{read_up_to, Method, Mover, Segment};
use ferry_core::entry::RelPath;
use ferry_core::error::{Error, Reporter};
use ferry_core::limits::{open_files_each, threads_within};
use ferry_core::stamp::Stamp;
use ferry_core::Stats;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{Scope, ScopedJoinHandle};

/// A block is sent to a filler once it holds this many bytes ...
pub const BLOCK_BYTES: usize = 256 << 10;
/// ... or this many files (each holds a descriptor until it is filled; fewer when the
/// process may not open that many, see [`files_per_block`]).
pub const BLOCK_FILES: usize = 128;

/// Descriptors kept for everything but the fillers' jobs: the archive, its index when
/// it spills to a file, the walk's directories in progress (room for 20 levels: see
/// `ferry_core::walk::HELD_LEVELS`), the prefetchers' files and directories, the
/// standard streams.
pub const OTHER_DESCRIPTORS: u64 = 64;

/// Jobs in flight with `fillers` fillers: one being done per filler, one queued per
/// filler, one being laid out. Each holds at least one descriptor.
pub fn jobs_in_flight(fillers: usize) -> u64 {
    2 * fillers as u64 + 1
}

/// How many fillers to start, at most `most`, so their [`jobs_in_flight`] fit under the
/// limit on open files. Under `ulimit -n 64` with dozens of descriptors inherited, 16
/// fillers' jobs ran the walk out of descriptors.
pub fn fillers_within_open_files(most: usize) -> usize {
    // Two jobs a filler, and the one being laid out.
    threads_within(2, OTHER_DESCRIPTORS + 1, most)
}

/// How many files a block may hold with `fillers` fillers, once `walkers_hold`
/// descriptors are set aside for extra walkers: every block in flight holds its files
/// open, and together they must stay under the process's limit on open files (with
/// the default of 128 per block and 16 fillers, 4,352 descriptors: more than the usual
/// soft limit of 1,024 when the hard limit does not let ferry raise it).
pub fn files_per_block(fillers: usize, walkers_hold: u64) -> usize {
    open_files_each(
        jobs_in_flight(fillers) as usize,
        OTHER_DESCRIPTORS + walkers_hold,
        BLOCK_FILES,
    )
}

/// A stretch of the archive starting at `at`: headers and padding in place, each small
/// file's slot still to be read in.
pub struct Block {
    /// Archive offset of the stretch's first byte.
    pub at: u64,
    /// The stretch is the first `len` bytes. A buffer is reused without being cleared,
    /// so what lies past `len` is left over from an earlier block, and a small file's
    /// slot holds such bytes until its filler reads the file in and zeroes the slot's
    /// padding: laying out thousands of small files costs the laying-out thread no
    /// zeroing (on the kernel tree, 635 MB of it).
    buf: Vec<u8>,
    len: usize,
    /// The files whose content goes into the stretch.
    pub files: Vec<Small>,
}

/// A small file whose whole content goes into a block.
pub struct Small {
    /// The open file.
    pub fd: OwnedFd,
    /// Where its content starts in the block.
    pub within: usize,
    /// Its size, as laid out.
    pub len: usize,
    /// Its index entry.
    pub slot: HashSlot,
    /// Its path, for errors.
    pub path: RelPath,
    /// What it was when laid out, to tell a change while it is read.
    pub stamp: Option<Stamp>,
}

/// A file whose data region is moved on its own.
pub struct Large {
    /// The open file.
    pub fd: OwnedFd,
    /// Its stored runs and where each goes in the archive.
    pub segs: Vec<Segment>,
    /// Its size, as laid out.
    pub size: u64,
    /// Its index entry.
    pub slot: HashSlot,
    /// Its path, for errors.
    pub path: RelPath,
    /// What it was when laid out, to tell a change while it is read.
    pub stamp: Option<Stamp>,
}

impl Large {
    /// Reports the file if it changed since it was laid out (GNU tar's "file changed
    /// as we read it", exit status 1): its member may hold a version that never was.
    pub fn check_unchanged(&self, reporter: &dyn Reporter) {
        unchanged(self.stamp, self.fd.as_fd(), &self.path, reporter);
    }
}

/// Reports `path` (open as `fd`) if it no longer has its `stamp`.
fn unchanged(stamp: Option<Stamp>, fd: BorrowedFd<'_>, path: &RelPath, reporter: &dyn Reporter) {
    if let Some(Err(e)) = stamp.map(|s| s.check(fd, path)) {
        reporter.error(&e);
    }
}

/// Work for a filler.
pub enum Job {
    /// A stretch of headers and small files.
    Block(Block),
    /// One large file's data.
    Large(Large),
}

impl Block {
    /// An empty block starting at `at`, reusing `buf`'s memory.
    pub fn new(at: u64, buf: Vec<u8>) -> Self {
        Block {
            at,
            buf,
            len: 0,
            files: Vec::new(),
        }
    }

    /// How many bytes the stretch has.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the stretch has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The stretch. Once its files are read in ([`Block::read_files`]), every byte of it
    /// was written for this block.
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// The buffer, to be reused for another block.
    pub fn into_buffer(self) -> Vec<u8> {
        self.buf
    }

    /// Appends `n` bytes to the stretch, their content left as it is; returns where
    /// they start.
    fn extend(&mut self, n: usize) -> usize {
        let start = self.len;
        self.len += n;
        if self.buf.len() < self.len {
            self.buf.resize(self.len, 0);
        }
        start
    }

    /// Appends headers (or any bytes) to the stretch.
    pub fn push_bytes(&mut self, bytes: &[u8]) {
        let start = self.extend(bytes.len());
        self.buf[start..self.len].copy_from_slice(bytes);
    }

    /// Appends the slot for a small file of `len` bytes, padded to a tar block, for
    /// [`Block::read_files`] to fill; returns where the content starts.
    pub fn push_slot(&mut self, len: usize) -> usize {
        self.extend(pad_block(len as u64) as usize)
    }

    /// Whether the block should be sent now, when it may hold `max_files` files.
    pub fn is_full(&self, max_files: usize) -> bool {
        self.len >= BLOCK_BYTES || self.files.len() >= max_files
    }

    /// Reads every file's content into its slot, zeroes the slot's padding and closes
    /// the file; returns the content hash of each file read whole. A file that cannot
    /// be read whole is reported, and the rest of its slot is left as zeros (as GNU tar
    /// pads a file that shrank).
    pub fn read_files(&mut self, reporter: &dyn Reporter, hashes: &mut Vec<(HashSlot, u128)>) {
        for f in self.files.drain(..) {
            let slot = &mut self.buf[f.within..f.within + pad_block(f.len as u64) as usize];
            let (content, padding) = slot.split_at_mut(f.len);
            padding.fill(0);
            match read_or_zeros(f.fd.as_fd(), content, 0) {
                Ok(()) => {
                    unchanged(f.stamp, f.fd.as_fd(), &f.path, reporter);
                    hashes.push((f.slot, ferry_core::content::hash_of(content)));
                }
                Err(e) => reporter.error(&Error::new(&f.path, "read", e)),
            }
        }
    }
}

/// Fills `buf` from `fd` at `at`. What could not be read is left as zeros and returned
/// as the error: the archive keeps its laid-out shape either way.
pub fn read_or_zeros(fd: BorrowedFd<'_>, buf: &mut [u8], at: u64) -> io::Result<()> {
    match read_up_to(fd, buf, at) {
        Ok(got) if got == buf.len() => Ok(()),
        Ok(got) => {
            buf[got..].fill(0);
            Err(shrank())
        }
        Err(e) => {
            buf.fill(0);
            Err(e)
        }
    }
}

/// The error for a file found shorter than it was laid out.
fn shrank() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "file shrank while being packed; the archive holds zeros for the rest",
    )
}

/// What the fillers share with the laying-out thread.
pub struct Shared<'env> {
    out: BorrowedFd<'env>,
    mover: &'env Mover,
    hash: bool,
    stats: &'env Stats,
    reporter: &'env dyn Reporter,
    /// Content hashes found by the fillers, `(index slot, hash)`.
    hashes: Mutex<Vec<(HashSlot, u128)>>,
    /// The first failure to write the archive: everything after it is moot.
    failed: Mutex<Option<io::Error>>,
    /// Emptied block buffers, for the next blocks.
    spare: Mutex<Vec<Vec<u8>>>,
}

impl<'env> Shared<'env> {
    /// What fillers writing to the archive file `out` need.
    pub fn new(
        out: BorrowedFd<'env>,
        mover: &'env Mover,
        hash: bool,
        stats: &'env Stats,
        reporter: &'env dyn Reporter,
    ) -> Self {
        Shared {
            out,
            mover,
            hash,
            stats,
            reporter,
            hashes: Mutex::default(),
            failed: Mutex::default(),
            spare: Mutex::default(),
        }
    }

    /// The content hashes found since last asked, `(index slot, hash)`.
    pub fn take_hashes(&self) -> Vec<(HashSlot, u128)> {
        std::mem::take(&mut *lock(&self.hashes))
    }

    /// Sets the archive file's length to `len` (see `ArchiveSink::keep_length_ahead`).
    pub fn set_len(&self, len: u64) -> io::Result<()> {
        Ok(rustix::fs::ftruncate(self.out, len)?)
    }

    /// A buffer for a new block.
    pub fn buffer(&self) -> Vec<u8> {
        lock(&self.spare).pop().unwrap_or_default()
    }

    /// Whether writing the archive has failed.
    pub fn has_failed(&self) -> bool {
        lock(&self.failed).is_some()
    }

    fn fail(&self, e: io::Error) {
        lock(&self.failed).get_or_insert(e);
    }

    /// Whether large files are still cloned into the archive.
    pub fn clones(&self) -> bool {
        self.mover.may_clone()
    }

    /// Does one job.
    pub fn run(&self, job: Job) {
        if self.has_failed() {
            return;
        }
        let mut hashes = Vec::new();
        match job {
            Job::Block(mut b) => {
                let files = b.files.len() as u64;
                b.read_files(self.reporter, &mut hashes);
                self.stats.count_files_moved(Method::Buffered, files);
                match ferry_core::data::write_full(self.out, b.bytes(), b.at) {
                    Ok(()) => lock(&self.spare).push(b.into_buffer()),
                    Err(e) => self.fail(e),
                }
            }
            Job::Large(f) => {
                match self
                    .mover
                    .transfer(f.fd.as_fd(), self.out, &f.segs, f.size, self.hash)
                {
                    Ok(moved) => {
                        f.check_unchanged(self.reporter);
                        self.stats.count_method(moved.method);
                        hashes.extend(moved.hash.map(|h| (f.slot, h)));
                    }
                    // The source ended early: that member is damaged, not the archive.
                    Err(_) if is_shorter(&f) => {
                        self.reporter.error(&Error::new(&f.path, "read", shrank()))
                    }
                    Err(e) => self.fail(e),
                }
            }
        }
        lock(&self.hashes).extend(hashes);
    }
}

/// Whether a large file is now shorter than it was laid out.
fn is_shorter(f: &Large) -> bool {
    rustix::fs::fstat(&f.fd).is_ok_and(|st| (st.st_size as u64) < f.size)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Filler threads, fed through a bounded queue.
pub struct Fillers<'scope, 'env> {
    shared: &'env Shared<'env>,
    queue: Option<SyncSender<Job>>,
    threads: Vec<ScopedJoinHandle<'scope, ()>>,
}

impl<'scope, 'env: 'scope> Fillers<'scope, 'env> {
    /// Starts `n` fillers in `scope`.
    pub fn start(scope: &'scope Scope<'scope, 'env>, shared: &'env Shared<'env>, n: usize) -> Self {
        let n = n.max(1);
        let (tx, rx) = sync_channel::<Job>(n);
        let rx = Arc::new(Mutex::new(rx));
        let threads = (0..n)
            .map(|_| {
                let rx = rx.clone();
                scope.spawn(move || loop {
                    let job = lock(&rx).recv();
                    match job {
                        Ok(job) => shared.run(job),
                        Err(_) => return,
                    }
                })
            })
            .collect();
        Fillers {
            shared,
            queue: Some(tx),
            threads,
        }
    }

    /// What the fillers share with the laying-out thread.
    pub fn shared(&self) -> &'env Shared<'env> {
        self.shared
    }

    /// Hands `job` to a filler, waiting while all are busy and the queue is full.
    pub fn send(&self, job: Job) {
        if let Some(q) = &self.queue {
            // The fillers outlive the queue's sender, so this cannot fail.
            let _ = q.send(job);
        }
    }

    /// Waits for every job to be done; returns the content hashes found, or the first
    /// failure to write the archive.
    pub fn finish(mut self) -> io::Result<Vec<(HashSlot, u128)>> {
        self.queue = None;
        let mut panicked = false;
        for t in self.threads.drain(..) {
            panicked |= t.join().is_err();
        }
        if panicked {
            return Err(io::Error::other("a filler thread failed"));
        }
        if let Some(e) = lock(&self.shared.failed).take() {
            return Err(e);
        }
        Ok(self.shared.take_hashes())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write;

    /// A reporter keeping every error's text.
    #[derive(Default)]
    pub(crate) struct Kept(pub(crate) Mutex<Vec<String>>);

    impl Reporter for Kept {
        fn error(&self, err: &Error) {
            lock(&self.0).push(err.to_string());
        }
        fn warn(&self, _: &str) {}
    }

    fn file_with(dir: &tempfile::TempDir, name: &str, content: &[u8]) -> OwnedFd {
        let path = dir.path().join(name);
        std::fs::File::create(&path)
            .and_then(|mut f| f.write_all(content))
            .expect("write test file");
        std::fs::File::open(&path).expect("open test file").into()
    }

    #[test]
    fn a_file_that_shrank_is_reported_and_the_rest_of_its_slot_left_zero() {
        let dir = tempfile::tempdir().expect("tempdir");
        let whole = file_with(&dir, "whole", b"abcdef");
        // Laid out as 10 bytes, but only 4 are there when the block is filled.
        let shrunk = file_with(&dir, "shrunk", b"wxyz");
        // A reused buffer, full of an earlier block's bytes.
        let mut block = Block::new(0, vec![0xEE; 2048]);
        block.push_bytes(b"header");
        let slot = |block: &mut Block, fd, len, n, path: &[u8]| {
            let within = block.push_slot(len);
            block.files.push(Small {
                fd,
                within,
                len,
                slot: HashSlot(n),
                path: RelPath::from_bytes(path.to_vec()),
                stamp: None,
            });
        };
        slot(&mut block, whole, 6, 0, b"whole");
        slot(&mut block, shrunk, 10, 1, b"dir/shrunk");
        assert_eq!(block.len(), 6 + 512 + 512);
        let kept = Kept::default();
        let mut hashes = Vec::new();
        block.read_files(&kept, &mut hashes);
        let bytes = block.bytes();
        assert_eq!(&bytes[..12], b"headerabcdef");
        assert!(bytes[12..518].iter().all(|&b| b == 0), "padding is zeroed");
        assert_eq!(
            &bytes[518..528],
            b"wxyz\0\0\0\0\0\0",
            "what was read, then zeros"
        );
        assert!(bytes[528..].iter().all(|&b| b == 0), "padding is zeroed");
        assert!(block.files.is_empty(), "every descriptor is closed");
        assert_eq!(
            block.into_buffer()[1030..],
            [0xEE; 2048 - 1030],
            "bytes past the stretch are untouched"
        );
        assert_eq!(
            hashes,
            vec![(HashSlot(0), xxhash_rust::xxh3::xxh3_128(b"abcdef"))]
        );
        let errors = lock(&kept.0).clone();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains("dir/shrunk") && errors[0].contains("shrank"),
            "{errors:?}"
        );
    }

    #[test]
    fn a_large_file_that_shrank_damages_its_member_not_the_archive() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = file_with(&dir, "big", &vec![5u8; 70_000]);
        let out: OwnedFd = std::fs::File::create(dir.path().join("archive"))
            .expect("create archive")
            .into();
        let mover = Mover::new(
            ferry_core::data::Reflink::Never,
            ferry_core::data::Sparse::Never,
        );
        let stats = Stats::default();
        let kept = Kept::default();
        let shared = Shared::new(out.as_fd(), &mover, true, &stats, &kept);
        let size = 100_000;
        shared.run(Job::Large(Large {
            fd: src,
            segs: vec![Segment {
                file_off: 0,
                src: 0,
                dst: 4096,
                len: size,
            }],
            size,
            slot: HashSlot(3),
            path: RelPath::from_bytes(b"d/big".to_vec()),
            stamp: None,
        }));
        assert!(!shared.has_failed(), "the archive is still good");
        assert!(
            lock(&shared.hashes).is_empty(),
            "no hash for a damaged member"
        );
        let errors = lock(&kept.0).clone();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains("d/big") && errors[0].contains("shrank"),
            "{errors:?}"
        );
    }
}
