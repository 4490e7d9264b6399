//! compress (`.Z`): LZW as compress(1) writes it. A 3-byte header (`1f 9d`, then the
//! largest code width, 9 to 16, and the block-mode bit 0x80), then codes packed
//! least-significant bit first, starting 9 bits wide and growing a bit each time the
//! table fills its width. In block mode code 256 clears the table. compress(1) writes
//! codes in groups of eight (a group of `n` bytes at width `n`) and, when the width
//! changes or the table is cleared, drops the rest of the group it is in: the reader
//! skips to the group's end too, as gzip's and libarchive's readers do. The format has
//! no check and no end mark: the data ends where the file does. Memory: the 64 Ki-entry
//! table and one string.

use std::io::{self, BufRead};

use super::{bad, Member, Src};

const CLEAR: u16 = 256;

/// One compress stream (the whole rest of the file).
pub(crate) struct LzwMember {
    src: Src,
    started: bool,
    max_bits: u32,
    block_mode: bool,
    bits: u32,
    /// Codes read at this width since the last width change or clear.
    in_group: u32,
    bitbuf: u64,
    nbits: u32,
    free: u32,
    old: Option<u16>,
    first: u8,
    prefix: Vec<u16>,
    suffix: Vec<u8>,
    /// A decoded string, backwards; handed out from its end.
    stack: Vec<u8>,
}

impl LzwMember {
    pub fn new(src: Src) -> LzwMember {
        LzwMember {
            src,
            started: false,
            max_bits: 16,
            block_mode: true,
            bits: 9,
            in_group: 0,
            bitbuf: 0,
            nbits: 0,
            free: 257,
            old: None,
            first: 0,
            prefix: vec![0; 1 << 16],
            suffix: (0..=255u8)
                .chain(std::iter::repeat_n(0, (1 << 16) - 256))
                .collect(),
            stack: Vec::with_capacity(1 << 16),
        }
    }

    fn header(&mut self) -> io::Result<()> {
        let mut h = [0u8; 3];
        self.src.exact(&mut h)?;
        if h[..2] != [0x1f, 0x9d] {
            return Err(bad("not compress (.Z) data (bad magic)"));
        }
        self.max_bits = u32::from(h[2] & 0x1f);
        self.block_mode = h[2] & 0x80 != 0;
        if !(9..=16).contains(&self.max_bits) {
            return Err(bad(format!(
                "largest code width {} (9 to 16 exist)",
                self.max_bits
            )));
        }
        self.free = if self.block_mode { 257 } else { 256 };
        Ok(())
    }

    /// The next code at the current width; `None` at the end of the data.
    fn code(&mut self) -> io::Result<Option<u16>> {
        while self.nbits < self.bits {
            let Some(&b) = self.src.fill_buf()?.first() else {
                return Ok(None);
            };
            self.src.consume(1);
            self.bitbuf |= u64::from(b) << self.nbits;
            self.nbits += 8;
        }
        let code = (self.bitbuf & ((1 << self.bits) - 1)) as u16;
        self.bitbuf >>= self.bits;
        self.nbits -= self.bits;
        self.in_group = (self.in_group + 1) % 8;
        Ok(Some(code))
    }

    /// Skips the rest of the current group of eight codes.
    fn end_group(&mut self) -> io::Result<()> {
        let left = (8 - self.in_group) % 8;
        for _ in 0..left {
            if self.code()?.is_none() {
                break;
            }
        }
        self.in_group = 0;
        self.bitbuf = 0;
        self.nbits = 0;
        Ok(())
    }

    /// Decodes the next code onto the stack; false at the end of the data.
    fn next(&mut self) -> io::Result<bool> {
        let limit = 1u32 << self.max_bits;
        // As compress(1) and gzip do it: the width grows past the largest code, which
        // at `-b9` makes the codes 10 bits wide once the table is full.
        let top = if self.bits == self.max_bits {
            limit
        } else {
            (1 << self.bits) - 1
        };
        if self.free > top && self.bits < 16 {
            self.end_group()?;
            self.bits += 1;
        }
        let Some(code) = self.code()? else {
            return Ok(false);
        };
        let Some(old) = self.old else {
            if code > 255 {
                return Err(bad(format!("the first code is {code}, not a byte")));
            }
            self.old = Some(code);
            self.first = code as u8;
            self.stack.push(code as u8);
            return Ok(true);
        };
        if code == CLEAR && self.block_mode {
            self.end_group()?;
            self.bits = 9;
            self.free = 256;
            return Ok(true);
        }
        let mut c = code;
        if u32::from(code) >= self.free {
            if u32::from(code) > self.free {
                return Err(bad(format!("code {code} before the table has it")));
            }
            self.stack.push(self.first);
            c = old;
        }
        while c > 255 {
            self.stack.push(self.suffix[usize::from(c)]);
            c = self.prefix[usize::from(c)];
        }
        self.first = c as u8;
        self.stack.push(self.first);
        if self.free < limit {
            self.prefix[self.free as usize] = old;
            self.suffix[self.free as usize] = self.first;
            self.free += 1;
        }
        self.old = Some(code);
        Ok(true)
    }
}

impl Member for LzwMember {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.started {
            self.started = true;
            self.header()?;
        }
        let mut n = 0;
        while n < buf.len() {
            match self.stack.pop() {
                Some(b) => {
                    buf[n] = b;
                    n += 1;
                }
                None => {
                    if !self.next()? {
                        break;
                    }
                }
            }
        }
        Ok(n)
    }

    fn offset(&self) -> u64 {
        self.src.offset()
    }

    fn into_src(self: Box<Self>) -> Src {
        self.src
    }
}
