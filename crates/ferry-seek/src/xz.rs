//! xz: a seek point at the start of a block, about every `span` bytes of output.
//!
//! While indexing, the whole file is read forward stream by stream (`crate::seq`:
//! liblzma checks every block's check and every stream's index; stream padding is
//! skipped; bytes after the last stream that start none are trailing garbage).
//! The block boundaries then come from the xz indexes themselves: each stream ends with
//! a footer that gives the size of its index, the index lists each block's unpadded and
//! uncompressed sizes, and the stream header sits just before its first block (the .xz
//! format, sections 2 and 4). The blocks' total output must equal what was decoded.
//!
//! To start at a block, a stream decoder is given that stream's 12-byte header and then
//! the file from the block's start up to the stream's index: it decodes the blocks in
//! turn, and when the input stops at the index it has output every byte of them. A read
//! that goes on into the next stream starts a decoder at that stream's first block, which
//! is always a point. A file of one block (what single-threaded `xz` makes) has one point
//! and is read sequentially.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use liblzma::stream::{Action, Status, Stream};

use crate::index::{Kind, Point};
use crate::input::Input;
use crate::{corrupt, Codec};

const HEADER_MAGIC: [u8; 6] = [0xfd, b'7', b'z', b'X', b'Z', 0];
/// The largest xz index read (the spec allows 16 GiB; 64 MiB is ~8 million blocks).
const MAX_INDEX: u64 = 64 << 20;

/// Decodes one xz stream's blocks from a block onwards.
pub(crate) struct XzDecoder {
    dec: Stream,
    input: Input,
    /// A stream header still to feed before `input` (starting mid-stream).
    header: [u8; 12],
    header_used: usize,
    done: bool,
    stalls: u8,
}

/// The most memory one xz decoder may take (its dictionary, mostly): 128 MiB, as
/// libzstd's default limit for a zstd window. `xz -9` needs 65 MiB; a block that asks
/// for more (a dictionary given by its header, up to 4 GiB) is refused, not allocated.
pub(crate) const XZ_MEMORY: u64 = 128 << 20;

fn lzma_error(e: liblzma::stream::Error, at: u64) -> io::Error {
    if let liblzma::stream::Error::MemLimit = e {
        return corrupt(
            Codec::Xz,
            format!(
                "a block near compressed offset {at} needs more than {} MiB of memory to \
                 decode (its dictionary): refused",
                XZ_MEMORY >> 20
            ),
        );
    }
    corrupt(Codec::Xz, format!("{e}, near compressed offset {at}"))
}

impl XzDecoder {
    /// A decoder starting at an xz block point (from a validated index).
    pub fn resume(file: Arc<File>, point: &Point) -> io::Result<XzDecoder> {
        let Kind::XzBlock { stream, blocks_end } = point.kind else {
            return Err(corrupt(
                Codec::Xz,
                "a seek point of another codec in an xz index",
            ));
        };
        let mut header = [0u8; 12];
        file.read_exact_at(&mut header, stream)?;
        if header[..6] != HEADER_MAGIC {
            return Err(corrupt(
                Codec::Xz,
                format!("no xz stream header at compressed offset {stream}"),
            ));
        }
        Ok(XzDecoder {
            dec: Stream::new_stream_decoder(XZ_MEMORY, 0).map_err(|e| lzma_error(e, stream))?,
            input: Input::new(file, point.inp, blocks_end),
            header,
            header_used: 0,
            done: false,
            stalls: 0,
        })
    }

    /// Decompresses into `buf`; `Ok(0)` at the end of the stream's blocks.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() || self.done {
            return Ok(0);
        }
        loop {
            let at = self.input.offset();
            let (before_in, before_out) = (self.dec.total_in(), self.dec.total_out());
            let status = if self.header_used < 12 {
                self.dec
                    .process(&self.header[self.header_used..], buf, Action::Run)
                    .map_err(|e| lzma_error(e, at))?
            } else if self.input.fill()? {
                self.dec
                    .process(self.input.avail(), buf, Action::Run)
                    .map_err(|e| lzma_error(e, at))?
            } else {
                // At the stream's index: drain what the decoder still holds, then stop.
                self.dec
                    .process(&[], buf, Action::Run)
                    .map_err(|e| lzma_error(e, at))?;
                let made = (self.dec.total_out() - before_out) as usize;
                if made == 0 {
                    self.done = true;
                }
                return Ok(made);
            };
            let used = (self.dec.total_in() - before_in) as usize;
            let made = (self.dec.total_out() - before_out) as usize;
            if self.header_used < 12 {
                self.header_used += used;
            } else {
                self.input.consume(used);
            }
            if matches!(status, Status::StreamEnd) {
                // Not before the stream's index, where the input stops; but if so,
                // the stream is done.
                self.done = true;
                return Ok(made);
            }
            if made > 0 {
                self.stalls = 0;
                return Ok(made);
            }
            if used == 0 {
                self.stalls += 1;
                if self.stalls > 2 {
                    return Err(corrupt(
                        Codec::Xz,
                        format!("the decoder stalled at compressed offset {at}"),
                    ));
                }
            } else {
                self.stalls = 0;
            }
        }
    }
}

/// One block, as the xz indexes give it.
struct Block {
    /// Compressed offset of the block header.
    inp: u64,
    uncompressed: u64,
    stream: u64,
    blocks_end: u64,
}

/// The seek points of an xz file of `len` bytes that decoded to `decoded` bytes: the
/// first block of every stream, and blocks `span` apart.
pub(crate) fn points(file: &File, len: u64, decoded: u64, span: u64) -> io::Result<Vec<Point>> {
    let blocks = blocks(file, len)?;
    let total = blocks
        .iter()
        .try_fold(0u64, |t, b| t.checked_add(b.uncompressed));
    if total != Some(decoded) {
        return Err(corrupt(
            Codec::Xz,
            format!("the xz indexes list {total:?} bytes of blocks, {decoded} were decoded"),
        ));
    }
    let mut points: Vec<Point> = Vec::new();
    let mut out = 0u64;
    let mut stream = None;
    for b in &blocks {
        let first = stream != Some(b.stream);
        stream = Some(b.stream);
        let due = points
            .last()
            .is_none_or(|p| out >= p.out.saturating_add(span));
        if first || due {
            let point = Point {
                out,
                inp: b.inp,
                kind: Kind::XzBlock {
                    stream: b.stream,
                    blocks_end: b.blocks_end,
                },
            };
            // A point with no data before the next one is replaced by it.
            match points.last_mut() {
                Some(last) if last.out == out => *last = point,
                _ => points.push(point),
            }
        }
        out += b.uncompressed;
    }
    Ok(points)
}

/// Every block of every stream, in file order, from the streams' indexes.
fn blocks(file: &File, len: u64) -> io::Result<Vec<Block>> {
    let bad = |what: String| corrupt(Codec::Xz, what);
    let mut streams: Vec<Vec<Block>> = Vec::new();
    let mut end = len;
    while end > 0 {
        // Stream padding: zero bytes, a multiple of four.
        let mut word = [0u8; 4];
        while end >= 4 {
            file.read_exact_at(&mut word, end - 4)?;
            if word != [0; 4] {
                break;
            }
            end -= 4;
        }
        if end == 0 && !streams.is_empty() {
            break;
        }
        if end < 24 || end % 4 != 0 {
            return Err(bad(format!(
                "no xz stream footer before compressed offset {end} (truncated?)"
            )));
        }
        let mut footer = [0u8; 12];
        file.read_exact_at(&mut footer, end - 12)?;
        if &footer[10..] != b"YZ" || crc32(&footer[4..10]) != le32(&footer[..4]) {
            return Err(bad(format!(
                "bad xz stream footer at compressed offset {}",
                end - 12
            )));
        }
        let index_len = (u64::from(le32(&footer[4..8])) + 1) * 4;
        if index_len > MAX_INDEX || index_len + 24 > end {
            return Err(bad(format!(
                "an xz index of {index_len} bytes does not fit"
            )));
        }
        let index_at = end - 12 - index_len;
        let mut index = vec![0u8; index_len as usize];
        file.read_exact_at(&mut index, index_at)?;
        let records = parse_index(&index)
            .map_err(|e| bad(format!("xz index at compressed offset {index_at}: {e}")))?;
        let mut padded = 0u64;
        for (unpadded, _) in &records {
            padded = padded
                .checked_add(unpadded.div_ceil(4) * 4)
                .ok_or_else(|| bad("xz block sizes overflow".into()))?;
        }
        let stream = index_at
            .checked_sub(padded)
            .and_then(|s| s.checked_sub(12))
            .ok_or_else(|| {
                bad(format!(
                    "the xz index at {index_at} lists more blocks than fit"
                ))
            })?;
        let mut header = [0u8; 12];
        file.read_exact_at(&mut header, stream)?;
        if header[..6] != HEADER_MAGIC
            || header[6..8] != footer[8..10]
            || crc32(&header[6..8]) != le32(&header[8..])
        {
            return Err(bad(format!(
                "no matching xz stream header at compressed offset {stream}"
            )));
        }
        let mut at = stream + 12;
        let mut list = Vec::with_capacity(records.len());
        for (unpadded, uncompressed) in records {
            list.push(Block {
                inp: at,
                uncompressed,
                stream,
                blocks_end: index_at,
            });
            at += unpadded.div_ceil(4) * 4;
        }
        streams.push(list);
        end = stream;
    }
    streams.reverse();
    Ok(streams.into_iter().flatten().collect())
}

/// The (unpadded size, uncompressed size) records of one xz index.
fn parse_index(b: &[u8]) -> Result<Vec<(u64, u64)>, String> {
    if b.len() < 8 || b.len() % 4 != 0 {
        return Err("bad size".into());
    }
    let (body, sum) = b.split_at(b.len() - 4);
    if crc32(body) != le32(sum) {
        return Err("CRC32 mismatch".into());
    }
    if body[0] != 0 {
        return Err("no index indicator".into());
    }
    let mut at = 1;
    let count = varint(body, &mut at)?;
    // Each record takes at least two bytes.
    if count > (body.len() as u64) / 2 {
        return Err(format!("{count} records do not fit"));
    }
    // Grown as records are read: the count is the input's word.
    let mut records = Vec::with_capacity((count as usize).min(1 << 12));
    for _ in 0..count {
        let unpadded = varint(body, &mut at)?;
        let uncompressed = varint(body, &mut at)?;
        if unpadded < 5 {
            return Err(format!("a block of unpadded size {unpadded}"));
        }
        records.push((unpadded, uncompressed));
    }
    if body[at..].iter().any(|&x| x != 0) || body.len() - at > 3 {
        return Err("bad index padding".into());
    }
    Ok(records)
}

/// An xz multibyte integer (at most 9 bytes, 7 bits each, least significant first).
fn varint(b: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for i in 0..9 {
        let Some(&byte) = b.get(*at) else {
            return Err("truncated".into());
        };
        *at += 1;
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            if byte == 0 && i > 0 {
                return Err("a number with a needless zero byte".into());
            }
            return Ok(v);
        }
    }
    Err("a number longer than 9 bytes".into())
}

fn le32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a)
}

fn crc32(b: &[u8]) -> u32 {
    zlib_rs::crc32::crc32(0, b)
}
