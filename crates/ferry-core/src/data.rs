//! Moving file data: the capability ladder clone > `copy_file_range` > buffered, with
//! holes kept and all-zero blocks turned into holes.
//!
//! Every transfer is a list of [`Segment`]s: runs of a file's bytes, each with where it
//! lies in the file, in the source descriptor and in the target descriptor. A local copy
//! maps offsets one to one; packing maps a file's runs onto consecutive archive bytes;
//! unpacking maps them back. Per segment the mover tries the cheapest method the job and
//! the alignment allow, falls back when the kernel says no (`EXDEV`, `EOPNOTSUPP`,
//! `EINVAL`), and remembers the refusal so it costs one failed call per job, not one per
//! file.

pub use crate::content::{hash_bytes, hash_range, hash_runs};
use crate::content::{hash_into, ContentHash};
use crate::gate::Gate;
use crate::zero::{self, BLOCK};
use rustix::fs::{self as rfs, SeekFrom};
use rustix::io::Errno;
use std::cell::RefCell;
use std::io::{self, BufRead, Read};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// When to clone (share blocks) instead of copying.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reflink {
    /// Clone where the filesystem allows, copy otherwise.
    #[default]
    Auto,
    /// Clone or fail.
    Always,
    /// Never clone, nor let the kernel clone (no `copy_file_range`, which may).
    Never,
}

/// How holes are handled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sparse {
    /// Keep the source's holes, and leave all-zero blocks of data that passes through
    /// memory as holes.
    #[default]
    Auto,
    /// The same as auto, which already passes all uncloned data through memory where a
    /// zero block may be (what `cp --sparse=always` does); for `cp`'s users.
    Always,
    /// Write every byte; no holes in the destination.
    Never,
}

/// How one file's data was moved (the cheapest method used for any part of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Method {
    /// Shared blocks (FICLONE / FICLONERANGE).
    Clone,
    /// In-kernel copy (`copy_file_range`).
    KernelCopy,
    /// Read into memory, scanned for zero blocks, written.
    Buffered,
}

/// One run of a file's bytes and where it lies on each side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Offset of the run in the file it belongs to (its logical offset).
    pub file_off: u64,
    /// Offset of the run in the source descriptor.
    pub src: u64,
    /// Offset of the run in the target descriptor.
    pub dst: u64,
    /// Length in bytes.
    pub len: u64,
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
    /// Hash what is cloned when a hash is asked for (reading the shared blocks); off,
    /// a transfer that clones any part gives no hash: a clone shares the very blocks
    /// and so cannot differ from them (pack records hashes so, unless `--hash`).
    pub hash_clones: bool,
    clone_refused: AtomicBool,
    kernel_copy_refused: AtomicBool,
    /// Clones run at most one per CPU at a time (see [`crate::gate`]).
    clone_gate: Gate,
}

/// Buffers are this large at most; a file up to this size is read and written whole.
/// Each worker keeps one, so 16 workers hold 4 MiB (1 MiB buffers made unpack's peak RSS
/// 12 MiB larger, and were no faster; docs/benchmarks.md).
pub const BUFFER_SIZE: usize = 256 << 10;

thread_local! {
    /// Each worker's own buffer: the job's buffers are bounded by the worker count.
    static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The result of moving one file's data.
#[derive(Debug)]
pub struct Moved {
    /// The cheapest method that did part of the work.
    pub method: Method,
    /// The content hash of the file ([`crate::content`]), when asked for.
    pub hash: Option<u128>,
    /// Target offset just past the last byte written (or cloned), if any was.
    pub written_end: Option<u64>,
}

fn refused(e: Errno) -> bool {
    matches!(
        e,
        Errno::XDEV | Errno::OPNOTSUPP | Errno::INVAL | Errno::NOTTY | Errno::PERM | Errno::NOSYS
    )
}

impl Mover {
    /// A mover with these policies.
    pub fn new(reflink: Reflink, sparse: Sparse) -> Self {
        Mover {
            reflink,
            sparse,
            zero_scan: true,
            hash_clones: true,
            ..Default::default()
        }
    }

    /// Whether clones are still tried: allowed, and not refused by the kernel yet.
    /// Small files are cloned too: a clone costs about what a buffered copy of a 4 KiB
    /// file does, and leaves no data to write back afterwards (docs/benchmarks.md).
    pub fn may_clone(&self) -> bool {
        self.reflink != Reflink::Never && !self.clone_refused.load(Relaxed)
    }

    /// Runs a clone call through the clone gate.
    fn gated<T>(&self, clone: impl FnOnce() -> T) -> T {
        let _pass = self.clone_gate.enter();
        clone()
    }

    /// Kernel copies are used only when nothing needs to see the `len` bytes: without a
    /// hash there is nothing to hash, and with holes off, or less than a block to move,
    /// there is no zero block to look for. (A small file then costs one call and one
    /// copy in the kernel instead of a read and a write through memory.) Never when
    /// clones are off: on XFS and btrfs `copy_file_range` shares blocks where it can,
    /// and `--reflink=never` promises a copy with blocks of its own (as GNU cp's does,
    /// which reads and writes then too).
    fn may_kernel_copy(&self, len: u64) -> bool {
        (self.sparse == Sparse::Never || len < BLOCK as u64)
            && self.reflink != Reflink::Never
            && !self.kernel_copy_refused.load(Relaxed)
    }

    /// Notes a clone the kernel refused; an error under `--reflink=always`.
    fn clone_failed(&self, e: Errno) -> io::Result<()> {
        if self.reflink == Reflink::Always || !refused(e) {
            return Err(e.into());
        }
        self.clone_refused.store(true, Relaxed);
        Ok(())
    }

    /// Copies the whole local file `src` (`size` bytes) into the new, empty file `dst`,
    /// keeping holes as the policy says, and sets `dst`'s length. `maybe_sparse` says the
    /// source may have holes worth finding (its blocks do not cover its size).
    pub fn copy_file(
        &self,
        src: BorrowedFd<'_>,
        size: u64,
        maybe_sparse: bool,
        dst: BorrowedFd<'_>,
        hash: bool,
    ) -> io::Result<Moved> {
        if self.may_clone() && size > 0 {
            match self.gated(|| rfs::ioctl_ficlone(dst, src)) {
                Ok(()) => {
                    let hash = if hash {
                        Some(hash_range(src, 0, size)?)
                    } else {
                        None
                    };
                    return Ok(Moved {
                        method: Method::Clone,
                        hash,
                        written_end: Some(size),
                    });
                }
                Err(e) => self.clone_failed(e)?,
            }
        }
        let runs = if maybe_sparse && self.sparse != Sparse::Never {
            data_runs(src, 0, size)?
        } else {
            vec![(0, size)]
        };
        let segs: Vec<Segment> = runs
            .iter()
            .map(|&(o, l)| Segment {
                file_off: o,
                src: o,
                dst: o,
                len: l,
            })
            .collect();
        let moved = self.transfer(src, dst, &segs, size, hash)?;
        // Holes at the end (or a file that is all holes) need the length set.
        if moved.written_end.unwrap_or(0) < size {
            rfs::ftruncate(dst, size)?;
        }
        Ok(moved)
    }

    /// Gives the file `fd` blocks for every hole in its first `size` bytes, for
    /// `--sparse=never`, whatever the data path left (a clone keeps the source's holes;
    /// an archive stores none of a sparse file's): `fallocate`, or zeros written where
    /// the filesystem has no `fallocate`.
    pub fn fill_holes(&self, fd: BorrowedFd<'_>, size: u64) -> io::Result<()> {
        match rfs::fallocate(fd, rfs::FallocateFlags::empty(), 0, size) {
            Err(Errno::OPNOTSUPP) => {}
            done => return Ok(done?),
        }
        let zeros = [0u8; BLOCK];
        let mut at = 0;
        for (off, len) in data_runs(fd, 0, size)?.into_iter().chain([(size, 0)]) {
            while at < off {
                let n = (off - at).min(BLOCK as u64) as usize;
                write_full(fd, &zeros[..n], at)?;
                at += n as u64;
            }
            at = off + len;
        }
        Ok(())
    }

    /// Moves `segs` (in file order) from `src` to `dst`, whose target ranges must not
    /// have been written before (skipped zero blocks are left as holes). `size` is the
    /// file's logical size, for the hash. Block-aligned parts are cloned where allowed,
    /// the rest moved by the kernel or through memory.
    pub fn transfer(
        &self,
        src: BorrowedFd<'_>,
        dst: BorrowedFd<'_>,
        segs: &[Segment],
        size: u64,
        hash: bool,
    ) -> io::Result<Moved> {
        let mut hasher = hash.then(ContentHash::new);
        let mut method = Method::Buffered;
        let mut written_end = None;
        let mut unhashed_clone = false;
        for seg in segs {
            if let Some(h) = hasher.as_mut() {
                h.zeros(seg.file_off.saturating_sub(h.at()));
            }
            let mut done = 0;
            let aligned = seg.len - seg.len % BLOCK as u64;
            let block_aligned = seg.src % BLOCK as u64 == 0 && seg.dst % BLOCK as u64 == 0;
            if aligned > 0 && block_aligned && self.may_clone() {
                match self.gated(|| clone_range(dst, src, seg.src, aligned, seg.dst)) {
                    Ok(()) => {
                        done = aligned;
                        method = Method::Clone;
                        written_end = Some(seg.dst + aligned);
                        match hasher.as_mut() {
                            Some(h) if self.hash_clones => hash_into(h, src, seg.src, aligned)?,
                            Some(_) => unhashed_clone = true,
                            None => {}
                        }
                    }
                    Err(e) => self.clone_failed(e)?,
                }
            }
            let rest = Segment {
                file_off: seg.file_off + done,
                src: seg.src + done,
                dst: seg.dst + done,
                len: seg.len - done,
            };
            if rest.len == 0 {
                continue;
            }
            if self.may_kernel_copy(rest.len) {
                match kernel_copy(src, rest.src, dst, rest.dst, rest.len) {
                    Ok(()) => {
                        method = method.min(Method::KernelCopy);
                        written_end = Some(rest.dst + rest.len);
                        // The kernel moved the bytes without showing them: they are
                        // read once more, from the source's pages it just read.
                        if let Some(h) = hasher.as_mut() {
                            h.zeros(rest.file_off.saturating_sub(h.at()));
                            hash_into(h, src, rest.src, rest.len)?;
                        }
                        continue;
                    }
                    Err(e) if refused(e) => self.kernel_copy_refused.store(true, Relaxed),
                    Err(e) => return Err(e.into()),
                }
            }
            let mut reader = PositionedReader {
                fd: src,
                pos: rest.src,
            };
            if let Some(end) =
                self.buffered(&mut reader, dst, rest.dst, rest.len, hasher.as_mut())?
            {
                written_end = Some(end);
            }
        }
        Ok(Moved {
            method,
            hash: hasher.filter(|_| !unhashed_clone).map(|h| h.finish(size)),
            written_end,
        })
    }

    /// Moves a file's runs read in order from a stream (an archive on a pipe) into
    /// `dst`. `runs` are `(file offset, length)`; the target offsets are `base` plus the
    /// file offset.
    pub fn transfer_stream(
        &self,
        src: &mut dyn Read,
        dst: BorrowedFd<'_>,
        base: u64,
        runs: &[(u64, u64)],
        size: u64,
        hash: bool,
    ) -> io::Result<Moved> {
        self.each_run(base, runs, size, hash, |at, len, hasher| {
            self.buffered(src, dst, at, len, hasher)
        })
    }

    /// Moves a file's runs read in order from `src` into `dst`, written straight from
    /// the stream's own buffers (no buffer of this thread's).
    pub fn transfer_buffered(
        &self,
        src: &mut dyn BufRead,
        dst: BorrowedFd<'_>,
        runs: &[(u64, u64)],
        size: u64,
        hash: bool,
    ) -> io::Result<Moved> {
        self.each_run(0, runs, size, hash, |at, len, mut hasher| {
            let (mut done, mut written_end) = (0u64, None);
            while done < len {
                let buf = src.fill_buf()?;
                if buf.is_empty() {
                    return Err(ended_early(io::ErrorKind::UnexpectedEof.into()));
                }
                let n = (len - done).min(buf.len() as u64) as usize;
                let chunk = &buf[..n];
                if let Some(h) = hasher.as_deref_mut() {
                    h.update(chunk);
                }
                if let Some(end) = self.write_chunk(dst, chunk, at + done)? {
                    written_end = Some(end);
                }
                src.consume(n);
                done += n as u64;
            }
            Ok(written_end)
        })
    }

    /// Moves a file's runs stored one after another in `bytes` (a small archive member
    /// read with its header) into `dst`, written straight from memory.
    pub fn transfer_bytes(
        &self,
        mut bytes: &[u8],
        dst: BorrowedFd<'_>,
        runs: &[(u64, u64)],
        size: u64,
        hash: bool,
    ) -> io::Result<Moved> {
        self.each_run(0, runs, size, hash, |at, len, hasher| {
            let Some((chunk, rest)) = usize::try_from(len)
                .ok()
                .and_then(|len| bytes.split_at_checked(len))
            else {
                return Err(io::ErrorKind::UnexpectedEof.into());
            };
            bytes = rest;
            if let Some(h) = hasher {
                h.update(chunk);
            }
            self.write_chunk(dst, chunk, at)
        })
    }

    /// Runs `move_run(target offset, length, hasher)` for each run in order, feeding the
    /// hasher the holes between them, and sums up what was done.
    fn each_run(
        &self,
        base: u64,
        runs: &[(u64, u64)],
        size: u64,
        hash: bool,
        mut move_run: impl FnMut(u64, u64, Option<&mut ContentHash>) -> io::Result<Option<u64>>,
    ) -> io::Result<Moved> {
        let mut hasher = hash.then(ContentHash::new);
        let mut written_end = None;
        for &(off, len) in runs {
            if let Some(h) = hasher.as_mut() {
                h.zeros(off.saturating_sub(h.at()));
            }
            if let Some(end) = move_run(base + off, len, hasher.as_mut())? {
                written_end = Some(end);
            }
        }
        Ok(Moved {
            method: Method::Buffered,
            hash: hasher.map(|h| h.finish(size)),
            written_end,
        })
    }

    /// Reads `len` bytes from `src` and writes them at `dst_off`, skipping all-zero
    /// blocks unless holes are off. Returns the target offset just past the last byte
    /// written, if any. Fails if `src` ends early.
    fn buffered(
        &self,
        src: &mut dyn Read,
        dst: BorrowedFd<'_>,
        dst_off: u64,
        len: u64,
        mut hasher: Option<&mut ContentHash>,
    ) -> io::Result<Option<u64>> {
        with_buffer(len, |buf| {
            let mut done = 0u64;
            let mut written_end = None;
            while done < len {
                let want = (len - done).min(buf.len() as u64) as usize;
                let chunk = &mut buf[..want];
                src.read_exact(chunk).map_err(ended_early)?;
                if let Some(h) = hasher.as_deref_mut() {
                    h.update(chunk);
                }
                if let Some(end) = self.write_chunk(dst, chunk, dst_off + done)? {
                    written_end = Some(end);
                }
                done += want as u64;
            }
            Ok(written_end)
        })
    }

    /// Writes `chunk` at `at`, leaving its all-zero blocks out unless holes are off.
    /// Returns the target offset just past the last byte written, if any was.
    fn write_chunk(&self, dst: BorrowedFd<'_>, chunk: &[u8], at: u64) -> io::Result<Option<u64>> {
        if self.sparse == Sparse::Never || !self.zero_scan {
            write_full(dst, chunk, at)?;
            return Ok((!chunk.is_empty()).then_some(at + chunk.len() as u64));
        }
        let mut written_end = None;
        for (s, e) in zero::data_runs(chunk) {
            write_full(dst, &chunk[s..e], at + s as u64)?;
            written_end = Some(at + e as u64);
        }
        Ok(written_end)
    }
}

/// A file that ended before the length it was to give (it shrank while being copied) is
/// told as such rather than as std's "failed to fill whole buffer". A reader that says
/// why it ended early itself (the tar reader names the archive offset) is left alone.
fn ended_early(e: io::Error) -> io::Error {
    if e.kind() != io::ErrorKind::UnexpectedEof || e.get_ref().is_some() {
        return e;
    }
    io::Error::new(
        e.kind(),
        "the source ended before its size: it shrank while being read",
    )
}

/// The segments of a file whose runs `(file offset, length)` are stored one after
/// another from `offset`, mapped back to their places in the file.
pub fn run_segments(offset: u64, runs: &[(u64, u64)]) -> Vec<Segment> {
    let mut src = offset;
    runs.iter()
        .map(|&(file_off, len)| {
            let seg = Segment {
                file_off,
                src,
                dst: file_off,
                len,
            };
            src += len;
            seg
        })
        .collect()
}

/// Reads a descriptor from a position with `pread`, leaving its file offset alone.
pub(crate) struct PositionedReader<'a> {
    pub(crate) fd: BorrowedFd<'a>,
    pub(crate) pos: u64,
}

impl Read for PositionedReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match rustix::io::pread(self.fd, &mut *buf, self.pos) {
                Ok(n) => {
                    self.pos += n as u64;
                    return Ok(n);
                }
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// The data runs of `fd` within `[offset, offset + len)` as `(offset, len)`, found with
/// SEEK_DATA/SEEK_HOLE. A filesystem that cannot tell yields one run for the range.
pub fn data_runs(fd: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<Vec<(u64, u64)>> {
    let end = offset + len;
    let mut out = Vec::new();
    let mut pos = offset;
    while pos < end {
        let data = match rfs::seek(fd, SeekFrom::Data(pos)) {
            Ok(d) => d,
            Err(Errno::NXIO) => break, // only a hole is left
            Err(Errno::INVAL | Errno::OPNOTSUPP) => return Ok(vec![(offset, len)]),
            Err(e) => return Err(e.into()),
        };
        if data >= end {
            break;
        }
        let hole = rfs::seek(fd, SeekFrom::Hole(data))?.min(end);
        if hole <= data {
            break;
        }
        out.push((data, hole - data));
        pos = hole;
    }
    Ok(out)
}

/// `struct file_clone_range` of `<linux/fs.h>`.
#[repr(C)]
struct FileCloneRange {
    src_fd: i64,
    src_offset: u64,
    src_length: u64,
    dest_offset: u64,
}

/// `ioctl(dst, FICLONERANGE, ...)`: shares `len` bytes of `src` at `src_off` into `dst`
/// at `dst_off`. Offsets and length must be block-aligned, except a length that ends
/// at `src`'s end of file.
pub fn clone_range(
    dst: BorrowedFd<'_>,
    src: BorrowedFd<'_>,
    src_off: u64,
    len: u64,
    dst_off: u64,
) -> Result<(), Errno> {
    use rustix::ioctl::{ioctl, opcode, Setter};
    const FICLONERANGE: rustix::ioctl::Opcode = opcode::write::<FileCloneRange>(0x94, 13);
    let arg = FileCloneRange {
        src_fd: src.as_raw_fd() as i64,
        src_offset: src_off,
        src_length: len,
        dest_offset: dst_off,
    };
    // SAFETY: FICLONERANGE takes a pointer to a `file_clone_range`, which `FileCloneRange`
    // lays out exactly (`#[repr(C)]`, four 64-bit fields); the kernel only reads it.
    unsafe { ioctl(dst, Setter::<FICLONERANGE, FileCloneRange>::new(arg)) }
}

/// `copy_file_range` of `len` bytes of `src` at `off_in` to `dst` at `off_out`, looping
/// until all are moved; `NODATA` if `src` ends first.
pub fn kernel_copy(
    src: BorrowedFd<'_>,
    mut off_in: u64,
    dst: BorrowedFd<'_>,
    mut off_out: u64,
    len: u64,
) -> Result<(), Errno> {
    let end = off_in + len;
    while off_in < end {
        let want = (end - off_in).min(1 << 30) as usize;
        if rfs::copy_file_range(src, Some(&mut off_in), dst, Some(&mut off_out), want)? == 0 {
            return Err(Errno::NODATA); // the source ended early
        }
    }
    Ok(())
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

/// Reads into `buf` from `fd` at `offset` until `buf` is full or the file ends; returns
/// how many bytes were read.
pub fn read_up_to(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut reader = PositionedReader { fd, pos: offset };
    let mut got = 0;
    while got < buf.len() {
        match reader.read(&mut buf[got..])? {
            0 => break,
            n => got += n,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;

    fn file_with(data: &[u8]) -> std::fs::File {
        let mut f = tempfile::tempfile().expect("tempfile");
        f.write_all(data).expect("write");
        f
    }

    #[test]
    fn transfer_maps_runs_and_hashes_logical_content() {
        // Stored runs "aaaa" and "bb" at file offsets 0 and 10: logical "aaaa\0...\0bb".
        let src = file_with(b"xxaaaabb");
        let dst = tempfile::tempfile().expect("tempfile");
        let mover = Mover::new(Reflink::Never, Sparse::Auto);
        let segs = [
            Segment {
                file_off: 0,
                src: 2,
                dst: 100,
                len: 4,
            },
            Segment {
                file_off: 10,
                src: 6,
                dst: 110,
                len: 2,
            },
        ];
        let moved = mover
            .transfer(src.as_fd(), dst.as_fd(), &segs, 12, true)
            .expect("transfer");
        assert_eq!(moved.written_end, Some(112));
        let mut logical = b"aaaa".to_vec();
        logical.resize(10, 0);
        logical.extend_from_slice(b"bb");
        assert_eq!(moved.hash, Some(xxhash_rust::xxh3::xxh3_128(&logical)));
        let mut out = vec![0u8; 12];
        rustix::io::pread(dst.as_fd(), &mut out[..], 100).expect("read");
        assert_eq!(out, logical);
    }

    #[test]
    fn bytes_are_written_from_memory_with_their_holes() {
        // Runs: a block holding one byte, then a zero block (left as a hole) and "bb";
        // the logical file ends past the last run, in a hole.
        let mut stored = vec![0u8; 2 * BLOCK];
        stored[0] = 7;
        stored.extend_from_slice(b"bb");
        let runs = [(0, 2 * BLOCK as u64), (3 * BLOCK as u64, 2)];
        let size = 4 * BLOCK as u64;
        let dst = tempfile::tempfile().expect("tempfile");
        let mover = Mover::new(Reflink::Never, Sparse::Auto);
        let moved = mover
            .transfer_bytes(&stored, dst.as_fd(), &runs, size, true)
            .expect("transfer");
        assert_eq!(moved.written_end, Some(3 * BLOCK as u64 + 2));
        let mut logical = vec![0u8; size as usize];
        logical[0] = 7;
        logical[3 * BLOCK..3 * BLOCK + 2].copy_from_slice(b"bb");
        let want = xxhash_rust::xxh3::xxh3_128(&logical);
        assert_eq!(moved.hash, Some(want));
        assert_eq!(hash_bytes(&stored, &runs, size), Some(want));
        rfs::ftruncate(&dst, size).expect("truncate");
        let mut out = vec![0u8; size as usize];
        rustix::io::pread(dst.as_fd(), &mut out[..], 0).expect("read");
        assert_eq!(out, logical);
        // The zero block was not written: only the first and the last block hold data.
        let data = data_runs(dst.as_fd(), 0, size).expect("runs");
        assert!(!data
            .iter()
            .any(|&(o, l)| o < 2 * BLOCK as u64 && o + l > BLOCK as u64));
        // Fewer bytes than the runs claim: an error, and no hash.
        let short = &stored[..stored.len() - 1];
        let dst = tempfile::tempfile().expect("tempfile");
        assert!(mover
            .transfer_bytes(short, dst.as_fd(), &runs, size, false)
            .is_err());
        assert_eq!(hash_bytes(short, &runs, size), None);
    }

    #[test]
    /// A source that ends early (a file that shrank) is an error that says so.
    fn short_source_is_an_error() {
        let src = file_with(b"abc");
        let dst = tempfile::tempfile().expect("tempfile");
        let mover = Mover::new(Reflink::Never, Sparse::Auto);
        let segs = [Segment {
            file_off: 0,
            src: 0,
            dst: 0,
            len: 10,
        }];
        let err = mover
            .transfer(src.as_fd(), dst.as_fd(), &segs, 10, false)
            .expect_err("three bytes cannot give ten");
        assert!(err.to_string().contains("shrank while being read"), "{err}");
    }

    #[test]
    fn zero_blocks_become_holes() {
        let mut data = vec![0u8; 64 * BLOCK];
        data[0] = 1;
        let src = file_with(&data);
        let dst = tempfile::tempfile().expect("tempfile");
        let mover = Mover::new(Reflink::Never, Sparse::Auto);
        let moved = mover
            .copy_file(src.as_fd(), data.len() as u64, false, dst.as_fd(), true)
            .expect("copy");
        assert_eq!(moved.hash, Some(xxhash_rust::xxh3::xxh3_128(&data)));
        let st = rfs::fstat(&dst).expect("stat");
        assert_eq!(st.st_size as usize, data.len());
        assert!(
            (st.st_blocks as usize) * 512 < data.len() / 4,
            "zero blocks were written: {} blocks",
            st.st_blocks
        );
    }
}
