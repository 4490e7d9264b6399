//! [`Src`]: the buffered input of a sequential decoder, which knows the compressed
//! offset of its next byte and can look ahead a few bytes without taking them (to see
//! whether another stream follows the one that ended).

use std::io::{self, BufRead, Read};

const BUF: usize = 64 << 10;

/// A buffered reader that counts what it hands out.
pub(crate) struct Src {
    inner: Box<dyn Read + Send>,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// The offset of `buf[start]`.
    pos: u64,
    eof: bool,
}

impl Src {
    /// Reads `inner` from its current position, counted from 0.
    pub fn new(inner: Box<dyn Read + Send>) -> Src {
        Src {
            inner,
            buf: vec![0u8; BUF].into_boxed_slice(),
            start: 0,
            end: 0,
            pos: 0,
            eof: false,
        }
    }

    /// The compressed offset of the next byte.
    pub fn offset(&self) -> u64 {
        self.pos
    }

    fn read_more(&mut self) -> io::Result<()> {
        if self.eof {
            return Ok(());
        }
        if self.start > 0 && self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        loop {
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Up to `n` (at most 4 KiB) next bytes without taking them: fewer only at the end.
    pub fn peek(&mut self, n: usize) -> io::Result<&[u8]> {
        let n = n.min(4096);
        if self.end - self.start < n && self.buf.len() - self.start < n {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        while self.end - self.start < n && !self.eof {
            self.read_more()?;
        }
        let have = (self.end - self.start).min(n);
        Ok(&self.buf[self.start..self.start + have])
    }

    /// Fills `out` whole; `UnexpectedEof` when the input ends first.
    pub fn exact(&mut self, out: &mut [u8]) -> io::Result<()> {
        self.read_exact(out)
    }

    /// A little-endian (`le`) or big-endian 32-bit number.
    pub fn u32(&mut self, le: bool) -> io::Result<u32> {
        let mut b = [0u8; 4];
        self.exact(&mut b)?;
        Ok(if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    }

    /// Skips `n` bytes; `UnexpectedEof` when the input ends first.
    pub fn skip(&mut self, mut n: u64) -> io::Result<()> {
        while n > 0 {
            let have = self.fill_buf()?.len();
            if have == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let k = (have as u64).min(n) as usize;
            self.consume(k);
            n -= k as u64;
        }
        Ok(())
    }
}

impl Read for Src {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let have = self.fill_buf()?;
        let n = have.len().min(out.len());
        out[..n].copy_from_slice(&have[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Src {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            self.read_more()?;
        }
        Ok(&self.buf[self.start..self.end])
    }

    fn consume(&mut self, n: usize) {
        let n = n.min(self.end - self.start);
        self.start += n;
        self.pos += n as u64;
    }
}
