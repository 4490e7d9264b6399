//! The scan: reads the new file once, in order, and emits the ops that rebuild it from
//! the basis a [`Signature`] describes.
//!
//! At each offset it first asks whether the block after the last match continues
//! (one strong hash, no weak checksum: an unchanged stretch costs a hash per block);
//! otherwise it rolls the weak checksum over the window one byte at a time and probes
//! the [`Table`](crate::table) (the strong hash only on a weak hit). Bytes that match
//! nothing become literals of at most [`MAX_LITERAL`] bytes; copies of consecutive
//! basis blocks merge into one op. The basis's last block, when short, can match only
//! right after its predecessor or at the very end of the new file (the window is one
//! full block long). The new file's content hash ([`ferry_core::content`]) is taken
//! from the bytes read on the way.

use crate::op::{Op, MAX_LITERAL};
use crate::rolling::Rolling;
use crate::signature::{strong, Signature};
use crate::table::Table;
use ferry_core::content::ContentHash;
use ferry_core::data::read_up_to;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};

/// New data read at a time.
const READ: usize = 4 << 20;

/// What a scan did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeltaStats {
    /// Bytes of the new file given by copies.
    pub copied: u64,
    /// Bytes of the new file sent as literals.
    pub literal: u64,
    /// Copy ops emitted.
    pub copy_ops: u64,
    /// Literal ops emitted.
    pub literal_ops: u64,
    /// The content hash of the new file as read ([`ferry_core::data::hash_range`]'s).
    pub hash: u128,
}

/// Scans the first `size` bytes of `new` against `sig` and hands `emit` the ops that
/// rebuild it, in output order. Stops at the first error `emit` returns; fails if `new`
/// ends before `size`.
pub fn delta<E: From<io::Error>>(
    new: impl AsFd,
    size: u64,
    sig: &Signature,
    mut emit: impl FnMut(Op<'_>) -> Result<(), E>,
) -> Result<DeltaStats, E> {
    let block = sig.block_size() as usize;
    let cap = (MAX_LITERAL + 2 * block + READ).min(size.try_into().unwrap_or(usize::MAX));
    let mut scan = Scan {
        fd: new.as_fd(),
        size,
        sig,
        table: Table::new(sig),
        block,
        buf: vec![0; cap],
        filled: 0,
        base: 0,
        pos: 0,
        lit: 0,
        copy: None,
        next: None,
        rolling: None,
        hash: ContentHash::new(),
        stats: DeltaStats::default(),
    };
    scan.run(&mut emit)?;
    let mut stats = scan.stats;
    stats.hash = scan.hash.finish(size);
    Ok(stats)
}

/// Where a stretch of rolling stopped.
enum Step {
    /// Block `k` matches at `pos`.
    Match(usize),
    /// The pending literal is as long as allowed.
    Flush,
    /// The buffer holds no byte to roll in: read more.
    NeedData,
    /// No full window starts past `pos`: what is left is the tail.
    End,
}

struct Scan<'a> {
    fd: BorrowedFd<'a>,
    size: u64,
    sig: &'a Signature,
    table: Table,
    block: usize,
    /// New-file bytes `base..base + filled`.
    buf: Vec<u8>,
    filled: usize,
    base: u64,
    /// The window's start.
    pos: u64,
    /// The pending literal's start (`lit..pos`).
    lit: u64,
    /// The pending copy (basis offset, length), merged while blocks follow on.
    copy: Option<(u64, u64)>,
    /// The block expected at `pos` (the one after the last match).
    next: Option<usize>,
    /// The window's sums at `pos`, while valid.
    rolling: Option<Rolling>,
    hash: ContentHash,
    stats: DeltaStats,
}

impl Scan<'_> {
    fn run<E: From<io::Error>>(
        &mut self,
        emit: &mut impl FnMut(Op<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let block = self.block as u64;
        while self.pos < self.size {
            if self.avail() <= block {
                self.fill()?;
            }
            if let Some(k) = self.next.take() {
                if self.continues(k) {
                    self.matched(k, emit)?;
                    continue;
                }
            }
            if self.avail() < block {
                break;
            }
            if self.table.is_empty() {
                // Nothing but the tail can match: skip the rolling, to a full literal,
                // the end of what is buffered, or the tail.
                let buffered = self.base + self.filled as u64;
                let full = self.lit + MAX_LITERAL as u64;
                let unbuffered = buffered - block + 1;
                if full < unbuffered {
                    self.pos = full;
                    self.flush_literal(emit)?;
                } else {
                    self.pos = unbuffered;
                    if buffered == self.size {
                        break;
                    }
                }
                continue;
            }
            match self.roll() {
                Step::Match(k) => self.matched(k, emit)?,
                Step::Flush => self.flush_literal(emit)?,
                Step::NeedData => self.fill()?,
                Step::End => {
                    self.pos += 1;
                    break;
                }
            }
        }
        self.tail(emit)?;
        self.pos = self.size;
        self.flush_literal(emit)?;
        if let Some((basis_offset, len)) = self.copy.take() {
            self.stats.copy_ops += 1;
            emit(Op::Copy { basis_offset, len })?;
        }
        Ok(())
    }

    /// Bytes buffered from the window's start on.
    fn avail(&self) -> u64 {
        self.base + self.filled as u64 - self.pos
    }

    /// The buffered bytes `from..from + len` of the new file (all buffered).
    fn bytes(&self, from: u64, len: u64) -> &[u8] {
        let s = (from - self.base) as usize;
        &self.buf[s..s + len as usize]
    }

    /// Drops what lies before the pending literal and reads on.
    fn fill(&mut self) -> io::Result<()> {
        let keep = (self.lit - self.base) as usize;
        self.buf.copy_within(keep..self.filled, 0);
        self.filled -= keep;
        self.base = self.lit;
        let end = self.base + self.filled as u64;
        let want = (self.size - end).min((self.buf.len() - self.filled) as u64) as usize;
        let room = &mut self.buf[self.filled..self.filled + want];
        let got = read_up_to(self.fd, room, end)?;
        if got < want {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "the file ended at {} bytes, before its size {}: it shrank while being read",
                    end + got as u64,
                    self.size
                ),
            ));
        }
        self.hash.update(&room[..got]);
        self.filled += got;
        Ok(())
    }

    /// Whether block `k` of the basis (if it exists) matches at `pos`.
    fn continues(&self, k: usize) -> bool {
        let Some(sum) = self.sig.sums().get(k) else {
            return false;
        };
        let len = self.sig.block_len(k);
        len <= self.avail() && strong(self.bytes(self.pos, len)) == sum.strong
    }

    /// Rolls from `pos` until a match, a full literal, the buffer's end or the last
    /// full window; `pos` and the rolling sums are left where it stopped.
    fn roll(&mut self) -> Step {
        let b = self.block;
        let buf = &self.buf[..self.filled];
        let mut i = (self.pos - self.base) as usize;
        let flush_at = (self.lit + MAX_LITERAL as u64 - self.base) as usize;
        let last = self.filled - b;
        let at_eof = self.base + self.filled as u64 == self.size;
        let mut r = self
            .rolling
            .take()
            .unwrap_or_else(|| Rolling::new(&buf[i..i + b]));
        // Offsets `i < stop` roll on; `stop` is the full literal or the last window.
        let stop = flush_at.min(last);
        let (leaving, entering) = (&buf[..last], &buf[b..]);
        let step = loop {
            let weak = r.digest();
            if self.table.may_hold(weak) {
                if let Some(k) = self.table.find(weak, &buf[i..i + b]) {
                    break Step::Match(k);
                }
            }
            if i >= stop {
                break if i >= flush_at {
                    Step::Flush
                } else if at_eof {
                    Step::End
                } else {
                    Step::NeedData
                };
            }
            r.roll(leaving[i], entering[i]);
            i += 1;
        };
        self.pos = self.base + i as u64;
        if matches!(step, Step::Flush | Step::NeedData) {
            self.rolling = Some(r);
        }
        step
    }

    /// Block `k` matches at `pos`: the literal before it goes out, the copy grows.
    fn matched<E: From<io::Error>>(
        &mut self,
        k: usize,
        emit: &mut impl FnMut(Op<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        self.flush_literal(emit)?;
        let (off, len) = (self.sig.block_offset(k), self.sig.block_len(k));
        match self.copy {
            Some((o, l)) if o + l == off => self.copy = Some((o, l + len)),
            Some((o, l)) => {
                self.stats.copy_ops += 1;
                emit(Op::Copy {
                    basis_offset: o,
                    len: l,
                })?;
                self.copy = Some((off, len));
            }
            None => self.copy = Some((off, len)),
        }
        self.stats.copied += len;
        self.pos += len;
        self.lit = self.pos;
        self.next = Some(k + 1);
        self.rolling = None;
        Ok(())
    }

    /// Emits `lit..pos` as literals (after the pending copy, which precedes them).
    fn flush_literal<E: From<io::Error>>(
        &mut self,
        emit: &mut impl FnMut(Op<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        if self.pos == self.lit {
            return Ok(());
        }
        if let Some((basis_offset, len)) = self.copy.take() {
            self.stats.copy_ops += 1;
            emit(Op::Copy { basis_offset, len })?;
        }
        while self.lit < self.pos {
            let n = (self.pos - self.lit).min(MAX_LITERAL as u64);
            self.stats.literal += n;
            self.stats.literal_ops += 1;
            emit(Op::Literal(self.bytes(self.lit, n)))?;
            self.lit += n;
        }
        Ok(())
    }

    /// Less than a block is left from `pos`: the basis's short last block may still
    /// match the new file's last bytes.
    fn tail<E: From<io::Error>>(
        &mut self,
        emit: &mut impl FnMut(Op<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let Some(k) = self.sig.sums().len().checked_sub(1) else {
            return Ok(());
        };
        let len = self.sig.block_len(k);
        if len == u64::from(self.sig.block_size()) || len > self.size - self.pos.min(self.size) {
            return Ok(());
        }
        let at = self.size - len;
        if at >= self.pos && strong(self.bytes(at, len)) == self.sig.sums()[k].strong {
            self.pos = at;
            self.matched(k, emit)?;
        }
        Ok(())
    }
}
