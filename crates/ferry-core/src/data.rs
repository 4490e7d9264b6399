//! Moving file data: the capability ladder clone > `copy_file_range` > buffered, with
//! holes kept and all-zero blocks turned into holes.
//!
//! The planner ([`plan`]) picks one method per file from what the job allows and what
//! has worked so far; each method falls back to the next when the kernel says no
//! (`EXDEV`, `EOPNOTSUPP`, `EINVAL`), and the refusal is remembered for the rest of the
//! job so it costs one failed call, not one per file.

use crate::zero;
use rustix::fs::{self as rfs, SeekFrom};
use rustix::io::Errno;
use std::cell::RefCell;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use xxhash_rust::xxh3::Xxh3;

/// When to clone (share blocks) instead of copying.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reflink {
    /// Clone where the filesystem allows, copy otherwise.
    #[default]
    Auto,
    /// Clone or fail.
    Always,
    /// Never clone.
    Never,
}

/// How holes are handled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sparse {
    /// Keep the source's holes, and leave all-zero blocks of data that passes through
    /// memory as holes.
    #[default]
    Auto,
    /// Like auto, and pass all uncloned data through memory so every zero block is found.
    Always,
    /// Write every byte; no holes in the destination.
    Never,
}

/// How one file's data was moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Shared blocks (FICLONE).
    Clone,
    /// In-kernel copy (`copy_file_range`).
    KernelCopy,
    /// Read into memory, scanned for zero blocks, written.
    Buffered,
}

/// Where a file's data is read from: a byte range of a local file.
#[derive(Clone, Copy, Debug)]
pub struct SourceData<'a> {
    /// The open file holding the data.
    pub fd: BorrowedFd<'a>,
    /// Where the data starts in that file.
    pub offset: u64,
    /// How many bytes.
    pub len: u64,
    /// True when the source range may contain holes worth finding with SEEK_DATA.
    pub maybe_sparse: bool,
}

/// What a job allows, and what the kernel has refused so far.
#[derive(Debug, Default)]
pub struct Mover {
    /// Clone policy.
    pub reflink: Reflink,
    /// Hole policy.
    pub sparse: Sparse,
    /// Check data passing through memory for all-zero blocks (off only to measure what
    /// the check costs).
    pub zero_scan: bool,
    clone_refused: AtomicBool,
    kernel_copy_refused: AtomicBool,
}

/// Buffers are this large at most; a file up to this size is read and written whole.
pub const BUFFER_SIZE: usize = 1 << 20;

thread_local! {
    /// Each worker's own buffer: the job's buffers are bounded by the worker count.
    static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The result of moving one file's data.
#[derive(Debug)]
pub struct Moved {
    /// The method that did the work.
    pub method: Method,
    /// xxh3-128 of the source bytes, when asked for.
    pub hash: Option<u128>,
}

impl Mover {
    /// A mover with these policies.
    pub fn new(reflink: Reflink, sparse: Sparse) -> Self {
        Mover {
            reflink,
            sparse,
            ..Default::default()
        }
    }

    /// The method to try first for a file. With `hash`, the data must pass through
    /// memory unless it is cloned (then the source is read once more to hash it).
    pub fn plan(&self, src: &SourceData<'_>, whole_file: bool, hash: bool) -> Method {
        let clone_ok = self.reflink != Reflink::Never && !self.clone_refused.load(Relaxed);
        if clone_ok && whole_file && src.len > 0 {
            return Method::Clone;
        }
        // Only data that passes through memory can be checked for zero blocks; with
        // holes off there is nothing to check, and the kernel copies cheapest.
        if self.sparse == Sparse::Never && !hash && !self.kernel_copy_refused.load(Relaxed) {
            return Method::KernelCopy;
        }
        Method::Buffered
    }

    /// Copies `src` to offset 0 of the empty file `dst`, leaving holes as the policy
    /// says, and sets `dst`'s length. `whole_file` says `src` is an entire file (so it
    /// may be cloned with FICLONE). With `hash`, returns the xxh3-128 of the source data.
    pub fn copy(
        &self,
        src: &SourceData<'_>,
        dst: BorrowedFd<'_>,
        whole_file: bool,
        hash: bool,
    ) -> io::Result<Moved> {
        let mut method = self.plan(src, whole_file, hash);
        if method == Method::Clone {
            match rfs::ioctl_ficlone(dst, src.fd) {
                Ok(()) => {
                    let hash = if hash {
                        Some(hash_range(src.fd, src.offset, src.len)?)
                    } else {
                        None
                    };
                    return Ok(Moved { method, hash });
                }
                Err(e) if self.reflink == Reflink::Always => return Err(e.into()),
                Err(Errno::XDEV | Errno::OPNOTSUPP | Errno::INVAL | Errno::NOTTY | Errno::PERM) => {
                    self.clone_refused.store(true, Relaxed);
                    method = self.plan(src, false, hash);
                }
                Err(e) => return Err(e.into()),
            }
        }
        let keep_holes = self.sparse != Sparse::Never && src.maybe_sparse;
        let segments = if keep_holes {
            data_segments(src)?
        } else {
            vec![(src.offset, src.len)]
        };
        let mut hasher = hash.then(Xxh3::new);
        let mut covered = src.offset; // source offset up to which the hash is fed
        let mut written_end = 0u64; // destination offset after the last byte written
        for &(start, len) in &segments {
            if let Some(h) = hasher.as_mut() {
                hash_zeros(h, start - covered);
            }
            let dst_off = start - src.offset;
            covered = start + len;
            if method == Method::KernelCopy {
                match kernel_copy(src.fd, start, dst, dst_off, len) {
                    Ok(()) => {
                        written_end = dst_off + len;
                        continue;
                    }
                    Err(Errno::XDEV | Errno::OPNOTSUPP | Errno::INVAL | Errno::NOSYS) => {
                        self.kernel_copy_refused.store(true, Relaxed);
                        method = Method::Buffered;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            let scan = self.sparse != Sparse::Never && self.zero_scan;
            if let Some(end) =
                buffered_copy(src.fd, start, dst, dst_off, len, scan, hasher.as_mut())?
            {
                written_end = end;
            }
        }
        if let Some(h) = hasher.as_mut() {
            hash_zeros(h, src.offset + src.len - covered);
        }
        // Holes at the end (or a file that is all holes) need the length set.
        if written_end < src.len {
            rfs::ftruncate(dst, src.len)?;
        }
        Ok(Moved {
            method,
            hash: hasher.map(|h| h.digest128()),
        })
    }
}

/// The data runs of a source range as `(offset, len)`, found with SEEK_DATA/SEEK_HOLE.
/// A filesystem that cannot tell yields one run for the whole range.
pub fn data_segments(src: &SourceData<'_>) -> io::Result<Vec<(u64, u64)>> {
    let end = src.offset + src.len;
    let mut out = Vec::new();
    let mut pos = src.offset;
    while pos < end {
        let data = match rfs::seek(src.fd, SeekFrom::Data(pos)) {
            Ok(d) => d,
            Err(Errno::NXIO) => break, // only a hole is left
            Err(Errno::INVAL | Errno::OPNOTSUPP) => return Ok(vec![(src.offset, src.len)]),
            Err(e) => return Err(e.into()),
        };
        if data >= end {
            break;
        }
        let hole = match rfs::seek(src.fd, SeekFrom::Hole(data)) {
            Ok(h) => h.min(end),
            Err(e) => return Err(e.into()),
        };
        if hole <= data {
            break;
        }
        out.push((data, hole - data));
        pos = hole;
    }
    Ok(out)
}

fn kernel_copy(
    src: BorrowedFd<'_>,
    mut off_in: u64,
    dst: BorrowedFd<'_>,
    mut off_out: u64,
    len: u64,
) -> Result<(), Errno> {
    let end = off_in + len;
    while off_in < end {
        let want = (end - off_in).min(1 << 30) as usize;
        let n = rfs::copy_file_range(src, Some(&mut off_in), dst, Some(&mut off_out), want)?;
        if n == 0 {
            break; // the source shrank
        }
    }
    Ok(())
}

/// Reads `len` bytes at `src_off` and writes them at `dst_off`, skipping all-zero blocks
/// when `scan` is set (the destination must be freshly created, so skipped blocks are
/// holes). Returns the destination offset just past the last byte written, if any.
fn buffered_copy(
    src: BorrowedFd<'_>,
    src_off: u64,
    dst: BorrowedFd<'_>,
    dst_off: u64,
    len: u64,
    scan: bool,
    mut hasher: Option<&mut Xxh3>,
) -> io::Result<Option<u64>> {
    with_buffer(len, |buf| {
        let mut done = 0u64;
        let mut written_end = None;
        while done < len {
            let want = (len - done).min(buf.len() as u64) as usize;
            let got = read_full(src, &mut buf[..want], src_off + done)?;
            if got == 0 {
                break; // the source shrank
            }
            let chunk = &buf[..got];
            if let Some(h) = hasher.as_deref_mut() {
                h.update(chunk);
            }
            let at = dst_off + done;
            if scan {
                for (s, e) in zero::data_runs(chunk) {
                    write_full(dst, &chunk[s..e], at + s as u64)?;
                    written_end = Some(at + e as u64);
                }
            } else {
                write_full(dst, chunk, at)?;
                written_end = Some(at + got as u64);
            }
            done += got as u64;
        }
        Ok(written_end)
    })
}

/// Runs `f` with this thread's buffer, sized for `len` bytes but at most [`BUFFER_SIZE`].
pub fn with_buffer<T>(len: u64, f: impl FnOnce(&mut [u8]) -> T) -> T {
    BUFFER.with(|cell| {
        let mut buf = cell.borrow_mut();
        let want = (len.max(1) as usize).min(BUFFER_SIZE);
        if buf.len() < want {
            buf.resize(want, 0);
        }
        f(&mut buf[..want])
    })
}

/// Reads until `buf` is full or the file ends; returns how much was read.
pub fn read_full(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match rustix::io::pread(fd, &mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(got)
}

/// Writes all of `buf` at `offset`.
pub fn write_full(fd: BorrowedFd<'_>, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match rustix::io::pwrite(fd, buf, offset) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                buf = &buf[n..];
                offset += n as u64;
            }
            Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

fn hash_zeros(h: &mut Xxh3, mut n: u64) {
    static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];
    while n > 0 {
        let k = n.min(ZEROS.len() as u64) as usize;
        h.update(&ZEROS[..k]);
        n -= k as u64;
    }
}

/// xxh3-128 of `len` bytes of `fd` at `offset` (holes read as zeros).
pub fn hash_range(fd: impl AsFd, offset: u64, len: u64) -> io::Result<u128> {
    let fd = fd.as_fd();
    let mut h = Xxh3::new();
    with_buffer(len, |buf| {
        let mut done = 0u64;
        while done < len {
            let want = (len - done).min(buf.len() as u64) as usize;
            let got = read_full(fd, &mut buf[..want], offset + done)?;
            if got == 0 {
                break;
            }
            h.update(&buf[..got]);
            done += got as u64;
        }
        Ok::<_, io::Error>(())
    })?;
    Ok(h.digest128())
}
