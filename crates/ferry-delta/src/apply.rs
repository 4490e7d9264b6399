//! Rebuilding the new file: ops taken one at a time, each checked against the basis
//! and the declared size, written in order into the output.
//!
//! A copy is cloned (FICLONERANGE: the blocks are shared with the basis, nothing is
//! written) where the basis offset, the output offset and the length are multiples of
//! the output filesystem's block size, or the copy ends at the end of both files (the
//! kernel allows a short last block there); what cannot be cloned goes through
//! `copy_file_range`, and where the kernel refuses that too, through memory. A
//! filesystem that cannot clone at all (ext4, tmpfs, two filesystems) is found out by
//! its first refusal and not asked again. Literals are written with `pwrite`.

use crate::error::{Error, Result};
use crate::op::Op;
use ferry_core::data::{clone_range, kernel_copy, read_up_to, with_buffer, write_full, Reflink};
use rustix::io::Errno;
use std::io;
use std::os::fd::BorrowedFd;

/// What an [`Apply`] did, in bytes of output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Shared with the basis (cloned).
    pub cloned: u64,
    /// Copied from the basis in the kernel (`copy_file_range`).
    pub copied: u64,
    /// Copied from the basis through memory (read and written).
    pub buffered: u64,
    /// Written from literals.
    pub written: u64,
}

/// Rebuilds a file from ops: `new`, then [`push`](Self::push) each op in order, then
/// [`finish`](Self::finish).
pub struct Apply<'a> {
    basis: BorrowedFd<'a>,
    basis_size: u64,
    out: BorrowedFd<'a>,
    size: u64,
    at: u64,
    fs_block: u64,
    reflink: Reflink,
    clones: bool,
    kernel_copies: bool,
    done: Applied,
}

impl<'a> Apply<'a> {
    /// Rebuilds into `out` (a new, empty file, open for writing) a file of `size`
    /// bytes from ops against `basis` (`basis_size` bytes, open for reading).
    pub fn new(basis: BorrowedFd<'a>, basis_size: u64, out: BorrowedFd<'a>, size: u64) -> Self {
        let fs_block = rustix::fs::fstatvfs(out)
            .map(|s| s.f_bsize)
            .unwrap_or(4096)
            .max(1);
        Apply {
            basis,
            basis_size,
            out,
            size,
            at: 0,
            fs_block,
            reflink: Reflink::Auto,
            clones: true,
            kernel_copies: true,
            done: Applied::default(),
        }
    }

    /// The clone policy: `Auto` (the default) clones where it can; `Never` neither
    /// clones nor uses `copy_file_range` (which may clone); `Always` fails where the
    /// kernel refuses a clone the alignment allows.
    pub fn reflink(mut self, reflink: Reflink) -> Self {
        self.reflink = reflink;
        self.clones = reflink != Reflink::Never;
        self.kernel_copies = reflink != Reflink::Never;
        self
    }

    /// Bytes of output so far.
    pub fn at(&self) -> u64 {
        self.at
    }

    /// What was done so far.
    pub fn applied(&self) -> Applied {
        self.done
    }

    /// Applies the next op.
    pub fn push(&mut self, op: &Op<'_>) -> Result<()> {
        let len = op.len();
        if self.at.checked_add(len).is_none_or(|end| end > self.size) {
            return Err(Error::PastSize {
                at: self.at,
                len,
                size: self.size,
            });
        }
        match *op {
            Op::Copy { basis_offset, len } => {
                if basis_offset
                    .checked_add(len)
                    .is_none_or(|end| end > self.basis_size)
                {
                    return Err(Error::OutsideBasis {
                        offset: basis_offset,
                        len,
                        basis: self.basis_size,
                    });
                }
                self.copy(basis_offset, len)?;
            }
            Op::Literal(bytes) => {
                write_full(self.out, bytes, self.at)?;
                self.done.written += len;
            }
        }
        self.at += len;
        Ok(())
    }

    /// Applies every whole op at the start of `buf` (their wire form) and returns the
    /// bytes they took; an op cut off at the end is left for the next call.
    pub fn push_encoded(&mut self, buf: &[u8]) -> Result<usize> {
        let mut used = 0;
        while let Some((op, n)) = Op::decode(&buf[used..])? {
            self.push(&op)?;
            used += n;
        }
        Ok(used)
    }

    /// Ends the rebuild: the ops must have given exactly the declared size. Sets the
    /// output's length (if the ops left it otherwise) and returns what was done. The caller then checks the output's
    /// content hash ([`hash_range`](crate::hash_range)) against the sender's.
    pub fn finish(self) -> Result<Applied> {
        if self.at != self.size {
            return Err(Error::Short {
                at: self.at,
                size: self.size,
            });
        }
        // Only when needed: XFS zeroes the rest of the last block on a truncate even
        // to the same size, which unshares a cloned last block.
        let now = rustix::fs::fstat(self.out)
            .map_err(io::Error::from)?
            .st_size;
        if u64::try_from(now).ok() != Some(self.size) {
            rustix::fs::ftruncate(self.out, self.size).map_err(io::Error::from)?;
        }
        Ok(self.done)
    }

    /// Copies `len` basis bytes from `from` to the output at `at`: clone, kernel copy,
    /// memory, each for what the one before could not do.
    fn copy(&mut self, from: u64, len: u64) -> Result<()> {
        let bs = self.fs_block;
        let mut done = 0;
        if self.clones && from % bs == 0 && self.at % bs == 0 {
            let to_eof = from + len == self.basis_size && self.at + len == self.size;
            let n = if to_eof { len } else { len - len % bs };
            if n > 0 {
                match clone_range(self.out, self.basis, from, n, self.at) {
                    Ok(()) => {
                        done = n;
                        self.done.cloned += n;
                    }
                    Err(e) => self.clone_failed(e)?,
                }
            }
        }
        let (from, at, len) = (from + done, self.at + done, len - done);
        if len == 0 {
            return Ok(());
        }
        if self.kernel_copies {
            match kernel_copy(self.basis, from, self.out, at, len) {
                Ok(()) => {
                    self.done.copied += len;
                    return Ok(());
                }
                Err(Errno::NODATA) => return Err(basis_short(from, len)),
                Err(e) if cannot(e) || e == Errno::INVAL => self.kernel_copies = false,
                Err(e) => return Err(io::Error::from(e).into()),
            }
        }
        with_buffer(len, |buf| {
            let mut moved = 0;
            while moved < len {
                let want = (len - moved).min(buf.len() as u64) as usize;
                if read_up_to(self.basis, &mut buf[..want], from + moved)? < want {
                    return Err(basis_short(from, len));
                }
                write_full(self.out, &buf[..want], at + moved)?;
                moved += want as u64;
            }
            Ok(())
        })?;
        self.done.buffered += len;
        Ok(())
    }

    /// A clone failed: this pair of files cannot clone (stop trying), or this one range
    /// could not (`EINVAL`: copy it), or a real error. Under `Reflink::Always` every
    /// refusal is an error.
    fn clone_failed(&mut self, e: Errno) -> Result<()> {
        if self.reflink == Reflink::Always || !(cannot(e) || e == Errno::INVAL) {
            return Err(io::Error::from(e).into());
        }
        if e != Errno::INVAL {
            self.clones = false;
        }
        Ok(())
    }
}

/// Errors that say the kernel will not do this for these files at all.
fn cannot(e: Errno) -> bool {
    matches!(
        e,
        Errno::XDEV | Errno::OPNOTSUPP | Errno::NOTTY | Errno::PERM | Errno::NOSYS | Errno::BADF
    )
}

fn basis_short(from: u64, len: u64) -> Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("the basis ended within the {len} bytes at {from} it was to give"),
    )
    .into()
}
