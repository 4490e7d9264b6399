//! [`Compressed`]: random access by uncompressed offset, through a small pool of live
//! decoders.
//!
//! Each decoder in the pool (a *cursor*) sits at some uncompressed position. A read takes
//! the cursor furthest along at or before its offset, if that is no further back than the
//! nearest seek point, and skips it forward; otherwise it starts a new cursor at that seek
//! point. The pool's lock is held only to pick and to return cursors, never while
//! decompressing, so reads from several threads run in parallel; two reads never share a
//! cursor. Reading a member sequentially in 128 KiB-1 MiB pieces thus decodes each byte
//! once, and reading several members at once keeps one cursor per member.
//!
//! Memory: at most [`POOL`] cursors live. A gzip cursor holds about 180 KiB (inflate state
//! and window, input buffer), a zstd cursor its frame's window (8 MiB at the default
//! levels, up to 128 MiB with `--long`), an xz cursor its dictionary (8 MiB at -6, 64 MiB
//! at -9), a bzip2 cursor about 4 MiB, lz4 and lzop cursors two blocks (up to 16 MiB and
//! 128 MiB), lzma and lzip ones their dictionary (at most `seq::LZMA_MEMORY`).

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::gzip::GzDecoder;
use crate::index::{Point, SeekIndex};
use crate::seq::{self, SeqDecoder};
use crate::xz::XzDecoder;
use crate::zstd::ZstdDecoder;
use crate::{Codec, SeekError};

/// The most live decoders a [`Compressed`] keeps.
pub const POOL: usize = 8;

/// A decoder of any codec.
pub(crate) enum Decoder {
    Gzip(GzDecoder),
    Zstd(ZstdDecoder),
    Xz(XzDecoder),
    Seq(SeqDecoder),
}

impl Decoder {
    fn resume(codec: Codec, file: Arc<File>, point: &Point) -> io::Result<Decoder> {
        Ok(match codec {
            Codec::Gzip => Decoder::Gzip(GzDecoder::resume(file, point)?),
            Codec::Zstd => Decoder::Zstd(ZstdDecoder::resume(file, point.inp, point.out)?),
            Codec::Xz => Decoder::Xz(XzDecoder::resume(file, point)?),
            _ => Decoder::Seq(seq::from_file(codec, file)),
        })
    }

    /// Decompresses into `buf`; `Ok(0)` at the end of what this decoder can reach.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Decoder::Gzip(d) => d.read(buf),
            Decoder::Zstd(d) => d.read(buf),
            Decoder::Xz(d) => d.read(buf),
            Decoder::Seq(d) => std::io::Read::read(d, buf),
        }
    }
}

/// A live decoder at uncompressed position `pos`.
struct Cursor {
    dec: Decoder,
    pos: u64,
    last_used: u64,
}

#[derive(Default)]
struct Pool {
    cursors: Vec<Cursor>,
    clock: u64,
}

/// Random access to a compressed file by uncompressed offset, with its [`SeekIndex`].
///
/// `read_at` takes `&self` and may be called from many threads at once.
pub struct Compressed {
    file: Arc<File>,
    index: SeekIndex,
    pool: Mutex<Pool>,
    decompressed: AtomicU64,
    wrong_file: Option<(u64, u64)>,
}

impl Compressed {
    /// Random access to `file` through `index`. An index made from another file (of
    /// another size) is not refused here but by every `read_at`; check
    /// [`SeekIndex::compressed_len`] against the file first to refuse it early.
    pub fn new(file: File, index: SeekIndex) -> Compressed {
        let actual = file.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
        let wrong_file = (actual != index.compressed_len).then_some((index.compressed_len, actual));
        Compressed {
            file: Arc::new(file),
            index,
            pool: Mutex::new(Pool::default()),
            decompressed: AtomicU64::new(0),
            wrong_file,
        }
    }

    /// The index in use.
    pub fn index(&self) -> &SeekIndex {
        &self.index
    }

    /// How many bytes all reads so far have decompressed, including bytes decoded only to
    /// skip to a read's offset: what random access costs.
    pub fn decompressed_bytes(&self) -> u64 {
        self.decompressed.load(Ordering::Relaxed)
    }

    /// Fills `buf` from uncompressed `offset`; short only at the end of the data, 0 at or
    /// past it. Errors name what is wrong (damaged data, an index of another file).
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if let Some((expected, actual)) = self.wrong_file {
            return Err(SeekError::WrongFile {
                codec: self.index.codec,
                expected,
                actual,
            }
            .into());
        }
        let len = self.index.decompressed_len;
        if offset >= len || buf.is_empty() {
            return Ok(0);
        }
        let want = (len - offset).min(buf.len() as u64) as usize;
        let mut done = 0;
        while done < want {
            let pos = offset + done as u64;
            let (mut cursor, fresh) = self.take(pos)?;
            let n = self.advance(&mut cursor, pos, &mut buf[done..want])?;
            if n == 0 {
                if fresh {
                    return Err(SeekError::Corrupt {
                        codec: self.index.codec,
                        what: format!(
                            "the data ends at uncompressed offset {}, the index says {len}",
                            cursor.pos
                        ),
                    }
                    .into());
                }
                // A cursor at the end of what it can reach (an xz stream's last block).
                continue;
            }
            done += n;
            self.give_back(cursor);
        }
        Ok(done)
    }

    /// The cursor to read from `pos`: from the pool, or new at the nearest point before.
    fn take(&self, pos: u64) -> io::Result<(Cursor, bool)> {
        let Some(pi) = self.index.point_before(pos) else {
            return Err(SeekError::BadIndex(format!("no seek point before offset {pos}")).into());
        };
        let point = &self.index.points[pi];
        {
            let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
            let best = pool
                .cursors
                .iter()
                .enumerate()
                .filter(|(_, c)| c.pos <= pos && c.pos >= point.out)
                .max_by_key(|(_, c)| c.pos)
                .map(|(i, _)| i);
            if let Some(i) = best {
                return Ok((pool.cursors.swap_remove(i), false));
            }
        }
        let dec = Decoder::resume(self.index.codec, self.file.clone(), point)?;
        Ok((
            Cursor {
                dec,
                pos: point.out,
                last_used: 0,
            },
            true,
        ))
    }

    /// Moves `cursor` to `pos` and reads from there into `out` until it is full or the
    /// cursor's data ends. Returns the bytes read into `out` (0: the data ended first).
    fn advance(&self, cursor: &mut Cursor, pos: u64, out: &mut [u8]) -> io::Result<usize> {
        let mut own = Vec::new();
        while cursor.pos < pos {
            // Skip by decoding into the caller's buffer when it is large enough.
            let scratch: &mut [u8] = if out.len() >= 32 << 10 {
                &mut *out
            } else {
                if own.is_empty() {
                    own = vec![0u8; 64 << 10];
                }
                &mut own
            };
            let k = (pos - cursor.pos).min(scratch.len() as u64) as usize;
            let n = cursor.dec.read(&mut scratch[..k])?;
            if n == 0 {
                return Ok(0);
            }
            cursor.pos += n as u64;
            self.decompressed.fetch_add(n as u64, Ordering::Relaxed);
        }
        let mut got = 0;
        while got < out.len() {
            let n = cursor.dec.read(&mut out[got..])?;
            if n == 0 {
                break;
            }
            got += n;
            cursor.pos += n as u64;
            self.decompressed.fetch_add(n as u64, Ordering::Relaxed);
        }
        Ok(got)
    }

    fn give_back(&self, mut cursor: Cursor) {
        if cursor.pos >= self.index.decompressed_len {
            return;
        }
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        pool.clock += 1;
        cursor.last_used = pool.clock;
        if pool.cursors.len() >= POOL {
            if let Some((i, _)) = pool
                .cursors
                .iter()
                .enumerate()
                .min_by_key(|(_, c)| c.last_used)
            {
                pool.cursors.swap_remove(i);
            }
        }
        pool.cursors.push(cursor);
    }
}
