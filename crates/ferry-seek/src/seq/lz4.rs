//! lz4, as `lz4 -dc` reads it: frames (the LZ4 frame format, with its header, block and
//! content checksums, independent or linked blocks), skippable frames, and the legacy
//! format of `lz4 -l` (blocks of up to 8 MiB, ending at the end of the file or where a
//! block size is too large to be one, which is then the next frame's magic). Blocks are
//! decoded by `lz4_flex`; memory is at most two blocks and the 64 KiB window (about
//! 16 MiB for the legacy format, 8 MiB for the largest frame blocks).

use std::io;

use xxhash_rust::xxh32::{xxh32, Xxh32};

use super::{bad, Member, Src};

const FRAME: u32 = 0x184D_2204;
const LEGACY: u32 = 0x184C_2102;
const LEGACY_BLOCK: usize = 8 << 20;
/// `LZ4_compressBound(8 MiB)`: a legacy block size above it is the next magic.
const LEGACY_BOUND: usize = LEGACY_BLOCK + LEGACY_BLOCK / 255 + 16;
const WINDOW: usize = 64 << 10;

fn is_skippable(magic: u32) -> bool {
    magic & 0xFFFF_FFF0 == 0x184D_2A50
}

/// Whether `head` starts an lz4 frame, a legacy frame or a skippable frame.
pub(crate) fn starts_frame(head: &[u8]) -> bool {
    head.get(..4)
        .map(|m| u32::from_le_bytes([m[0], m[1], m[2], m[3]]))
        .is_some_and(|m| m == FRAME || m == LEGACY || is_skippable(m))
}

/// Whether `head` starts a skippable frame.
pub(crate) fn starts_skippable(head: &[u8]) -> bool {
    head.get(..4)
        .is_some_and(|m| is_skippable(u32::from_le_bytes([m[0], m[1], m[2], m[3]])))
}

/// What the frame header said.
struct Frame {
    block_max: usize,
    linked: bool,
    block_sums: bool,
    content_sum: Option<Xxh32>,
    content_size: Option<u64>,
}

enum Stage {
    Start,
    Frame(Frame),
    Legacy,
    End,
}

/// One lz4 frame (or legacy frame, or skippable frame).
pub(crate) struct Lz4Member {
    src: Src,
    stage: Stage,
    packed: Vec<u8>,
    out: Vec<u8>,
    at: usize,
    /// The last up to 64 KiB of output, for linked blocks.
    window: Vec<u8>,
    total: u64,
}

impl Lz4Member {
    pub fn new(src: Src) -> Lz4Member {
        Lz4Member {
            src,
            stage: Stage::Start,
            packed: Vec::new(),
            out: Vec::new(),
            at: 0,
            window: Vec::new(),
            total: 0,
        }
    }

    /// Reads the magic and, for a frame, its descriptor.
    fn start(&mut self) -> io::Result<Stage> {
        let magic = self.src.u32(true)?;
        if magic == LEGACY {
            return Ok(Stage::Legacy);
        }
        if is_skippable(magic) {
            let len = self.src.u32(true)?;
            self.src.skip(u64::from(len))?;
            return Ok(Stage::End);
        }
        if magic != FRAME {
            return Err(bad(format!("not an lz4 frame (magic {magic:#010x})")));
        }
        let mut d = [0u8; 2];
        self.src.exact(&mut d)?;
        let (flg, bd) = (d[0], d[1]);
        if flg >> 6 != 1 {
            return Err(bad(format!(
                "lz4 frame version {} (only 1 exists)",
                flg >> 6
            )));
        }
        if flg & 0x02 != 0 || bd & 0x8F != 0 {
            return Err(bad("reserved bits set in the frame descriptor"));
        }
        let mut desc = d.to_vec();
        let mut content_size = None;
        if flg & 0x08 != 0 {
            let mut b = [0u8; 8];
            self.src.exact(&mut b)?;
            desc.extend_from_slice(&b);
            content_size = Some(u64::from_le_bytes(b));
        }
        if flg & 0x01 != 0 {
            return Err(bad(
                "an lz4 frame that needs a dictionary, which ferry does not have",
            ));
        }
        let mut hc = [0u8; 1];
        self.src.exact(&mut hc)?;
        if hc[0] != (xxh32(&desc, 0) >> 8) as u8 {
            return Err(bad("frame header checksum mismatch"));
        }
        let block_max = match (bd >> 4) & 7 {
            4 => 64 << 10,
            5 => 256 << 10,
            6 => 1 << 20,
            7 => 4 << 20,
            n => return Err(bad(format!("block size code {n} (4 to 7 exist)"))),
        };
        Ok(Stage::Frame(Frame {
            block_max,
            linked: flg & 0x20 == 0,
            block_sums: flg & 0x10 != 0,
            content_sum: (flg & 0x04 != 0).then(|| Xxh32::new(0)),
            content_size,
        }))
    }

    /// Decodes the next block of a frame into `out`; false at the frame's end mark.
    fn frame_block(&mut self) -> io::Result<bool> {
        let Stage::Frame(f) = &mut self.stage else {
            return Ok(false);
        };
        let word = self.src.u32(true)?;
        if word == 0 {
            if let Some(sum) = f.content_sum.take() {
                if self.src.u32(true)? != sum.digest() {
                    return Err(bad("content checksum mismatch: the data is damaged"));
                }
            }
            if let Some(size) = f.content_size.filter(|&s| s != self.total) {
                return Err(bad(format!(
                    "the frame says {size} bytes of content, its blocks hold {}",
                    self.total
                )));
            }
            return Ok(false);
        }
        let stored = word & 0x8000_0000 != 0;
        let len = (word & 0x7FFF_FFFF) as usize;
        if len > f.block_max {
            return Err(bad(format!(
                "a block of {len} bytes in a frame of blocks of at most {}",
                f.block_max
            )));
        }
        self.packed.resize(len, 0);
        self.src.exact(&mut self.packed)?;
        if f.block_sums && self.src.u32(true)? != xxh32(&self.packed, 0) {
            return Err(bad("block checksum mismatch: the data is damaged"));
        }
        let (block_max, linked) = (f.block_max, f.linked);
        if stored {
            std::mem::swap(&mut self.out, &mut self.packed);
        } else {
            self.decode(block_max, linked)?;
        }
        if let Stage::Frame(Frame {
            content_sum: Some(sum),
            ..
        }) = &mut self.stage
        {
            sum.update(&self.out);
        }
        if linked {
            let keep = self.window.len().min(WINDOW.saturating_sub(self.out.len()));
            self.window.drain(..self.window.len() - keep);
            let tail = self.out.len().saturating_sub(WINDOW);
            self.window.extend_from_slice(&self.out[tail..]);
        }
        Ok(true)
    }

    /// Decodes `packed` into `out` (at most `max` bytes), with the window if `linked`.
    fn decode(&mut self, max: usize, linked: bool) -> io::Result<()> {
        self.out.resize(max, 0);
        let dict: &[u8] = if linked { &self.window } else { &[] };
        let n = lz4_flex::block::decompress_into_with_dict(&self.packed, &mut self.out, dict)
            .map_err(|e| bad(format!("damaged block: {e}")))?;
        self.out.truncate(n);
        Ok(())
    }

    /// Decodes the next legacy block into `out`; false at the legacy frame's end.
    fn legacy_block(&mut self) -> io::Result<bool> {
        let head = self.src.peek(4)?;
        if head.is_empty() {
            return Ok(false);
        }
        if head.len() < 4 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        if len > LEGACY_BOUND {
            // Not a block: the magic of whatever follows.
            return Ok(false);
        }
        self.src.skip(4)?;
        self.packed.resize(len, 0);
        self.src.exact(&mut self.packed)?;
        self.decode(LEGACY_BLOCK, false)?;
        Ok(true)
    }
}

impl Member for Lz4Member {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.out.len() {
            self.at = 0;
            self.out.clear();
            let more = match self.stage {
                Stage::Start => {
                    self.stage = self.start()?;
                    continue;
                }
                Stage::Frame(_) => self.frame_block()?,
                Stage::Legacy => self.legacy_block()?,
                Stage::End => false,
            };
            if !more {
                self.stage = Stage::End;
                return Ok(0);
            }
            self.total += self.out.len() as u64;
        }
        let n = (self.out.len() - self.at).min(buf.len());
        buf[..n].copy_from_slice(&self.out[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }

    fn offset(&self) -> u64 {
        self.src.offset()
    }

    fn into_src(self: Box<Self>) -> Src {
        self.src
    }
}
