//! [`Input`]: buffered positional reads of the compressed file, shared by every decoder.
//!
//! Decoders read with `pread` (`FileExt::read_at`), so any number of them, on any number of
//! threads, share one open file without a shared position. Each keeps its own buffer and
//! knows the compressed offset of the next byte it will hand out, which is what seek
//! points record and what error messages name.

use std::fs::File;
use std::io::{self, BufRead, Read};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// The input buffer of one decoder.
pub(crate) const INPUT_BUF: usize = 64 << 10;

/// A buffered reader of `file` from some offset up to `limit` (exclusive).
pub(crate) struct Input {
    file: Arc<File>,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// The file offset of `buf[end]`: where the next read from the file starts.
    pos: u64,
    limit: u64,
    eof: bool,
}

impl Input {
    /// Reads `file` from `at` up to `limit` (`u64::MAX`: to its end).
    pub fn new(file: Arc<File>, at: u64, limit: u64) -> Input {
        Input {
            file,
            buf: vec![0u8; INPUT_BUF].into_boxed_slice(),
            start: 0,
            end: 0,
            pos: at,
            limit,
            eof: false,
        }
    }

    /// The file read.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The file offset of the next byte [`Input::avail`] returns.
    pub fn offset(&self) -> u64 {
        self.pos - (self.end - self.start) as u64
    }

    /// The bytes read and not yet consumed.
    pub fn avail(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Marks `n` bytes of [`Input::avail`] used.
    pub fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
    }

    /// Makes sure some bytes are available; false at the end of the input.
    pub fn fill(&mut self) -> io::Result<bool> {
        if self.start < self.end {
            return Ok(true);
        }
        self.start = 0;
        self.end = 0;
        self.read_more()?;
        Ok(self.start < self.end)
    }

    /// Reads once more into the free space at the end of the buffer.
    fn read_more(&mut self) -> io::Result<()> {
        if self.eof {
            return Ok(());
        }
        let room = (self.buf.len() - self.end) as u64;
        let want = room.min(self.limit.saturating_sub(self.pos)) as usize;
        if want == 0 {
            self.eof = self.pos >= self.limit;
            return Ok(());
        }
        loop {
            match self
                .file
                .read_at(&mut self.buf[self.end..self.end + want], self.pos)
            {
                Ok(0) => {
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    self.end += n;
                    self.pos += n as u64;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Up to `n` (at most the buffer's size) next bytes without consuming them: fewer
    /// only at the end of the input.
    pub fn peek(&mut self, n: usize) -> io::Result<&[u8]> {
        let n = n.min(self.buf.len());
        if self.end - self.start < n {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            while self.end < n && !self.eof {
                self.read_more()?;
            }
        }
        let have = (self.end - self.start).min(n);
        Ok(&self.buf[self.start..self.start + have])
    }

    /// Skips `n` bytes; false when the input ends first.
    pub fn skip(&mut self, mut n: u64) -> io::Result<bool> {
        while n > 0 {
            if !self.fill()? {
                return Ok(false);
            }
            let k = (self.end - self.start).min(n.min(usize::MAX as u64) as usize);
            self.consume(k);
            n -= k as u64;
        }
        Ok(true)
    }

    /// Whether everything left is zero bytes (padding after the last member).
    pub fn rest_is_zeros(&mut self) -> io::Result<bool> {
        while self.fill()? {
            if self.avail().iter().any(|&b| b != 0) {
                return Ok(false);
            }
            let n = self.end - self.start;
            self.consume(n);
        }
        Ok(true)
    }
}

impl Read for Input {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if !self.fill()? {
            return Ok(0);
        }
        let n = self.avail().len().min(out.len());
        out[..n].copy_from_slice(&self.avail()[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Input {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.fill()?;
        Ok(self.avail())
    }

    fn consume(&mut self, n: usize) {
        Input::consume(self, n)
    }
}
