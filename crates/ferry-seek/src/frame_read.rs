//! Decoding one frame of a [`crate::Frames`] file: a zstd frame or a gzip member, read
//! from the file in small pieces, never gathered whole. [`FrameStreams`] keeps a few
//! decoders positioned inside frames too large to keep decompressed, so a member read
//! in pieces from such a frame decodes each byte once; a read behind every decoder's
//! position starts again at the frame's start.
//!
//! The seek table's sizes are not trusted here: a frame that ends before the size the
//! table gives, or goes on after it, is an error naming the frame, and no more than one
//! byte past the table's size is decoded. A large frame is decoded once to its end
//! before any of it is served (its size and checksum checked, the output dropped), so
//! a damaged frame is refused whole, as a frame kept whole is, not after part of it
//! has gone out.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, OnceLock};

use crate::seekable::Frame;
use crate::Codec;

/// Live decoders kept inside large frames, at most (each holds its frame's window: up to
/// 8 MiB at `zstd -19`, 128 MiB at most, libzstd's limit; 32 KiB for gzip).
pub const STREAMS: usize = 4;

/// Bytes read from the file at once by a decoder.
const INPUT: usize = 64 << 10;

/// The bytes `[at, end)` of a file, read with `pread`.
struct Section {
    file: Arc<File>,
    at: u64,
    end: u64,
}

impl Read for Section {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = (self.end - self.at).min(buf.len() as u64) as usize;
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.at)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the file ends at byte {}", self.at),
            ));
        }
        self.at += n as u64;
        Ok(n)
    }
}

/// What a frame is called in messages.
pub(crate) fn frame_word(codec: Codec) -> &'static str {
    match codec {
        Codec::Gzip => "gzip member",
        _ => "zstd frame",
    }
}

/// A message about frame `i`, naming it and its bytes in the file.
pub(crate) fn say(codec: Codec, i: usize, f: &Frame, what: impl std::fmt::Display) -> String {
    let end = f.inp + u64::from(f.compressed);
    format!("{} {i} (bytes {}..{end}): {what}", frame_word(codec), f.inp)
}

/// A decoder of frame `f` alone (one zstd frame, one gzip member, its checksum checked
/// at its end), reading the file as it goes.
pub(crate) fn decoder(
    file: &Arc<File>,
    codec: Codec,
    f: &Frame,
) -> io::Result<Box<dyn Read + Send>> {
    let section = BufReader::with_capacity(
        INPUT,
        Section {
            file: file.clone(),
            at: f.inp,
            end: f.inp + u64::from(f.compressed),
        },
    );
    Ok(match codec {
        Codec::Gzip => Box::new(flate2::bufread::GzDecoder::new(section)),
        _ => Box::new(zstd::stream::read::Decoder::with_buffer(section)?.single_frame()),
    })
}

/// Frame `f` decompressed whole: for frames small enough to keep. Memory grows with
/// what the frame holds, up to one byte past what the table says.
pub(crate) fn whole(file: &Arc<File>, codec: Codec, f: &Frame) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity((f.decompressed as usize).min(8 << 20));
    decoder(file, codec, f)?
        .take(u64::from(f.decompressed) + 1)
        .read_to_end(&mut out)
        .map_err(|e| damaged(&e))?;
    if out.len() != f.decompressed as usize {
        return Err(io::Error::other(format!(
            "holds {} bytes, the seek table says {}",
            out.len(),
            f.decompressed
        )));
    }
    Ok(out)
}

fn damaged(e: &io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("damaged: {e}"))
}

/// A decoder inside frame `frame`, `pos` bytes into its data.
struct Cursor {
    frame: usize,
    pos: u64,
    dec: Box<dyn Read + Send>,
    last_used: u64,
}

/// Whether a frame decoded whole to its end, as its seek table says.
type Checked = Arc<OnceLock<Result<(), String>>>;

/// Decoders inside frames too large to keep decompressed, at most [`STREAMS`], and
/// which of those frames were found good.
#[derive(Default)]
pub(crate) struct FrameStreams {
    pool: Mutex<(Vec<Cursor>, u64)>,
    checked: Mutex<HashMap<usize, Checked>>,
}

/// Decodes frame `f` to its end, dropping what it holds: whether it holds what the
/// seek table says, its checksum good.
fn check(file: &Arc<File>, codec: Codec, f: &Frame) -> Result<(), String> {
    let mut dec = decoder(file, codec, f)
        .map_err(|e| e.to_string())?
        .take(u64::from(f.decompressed) + 1);
    let n = io::copy(&mut dec, &mut io::sink()).map_err(|e| damaged(&e).to_string())?;
    if n != u64::from(f.decompressed) {
        return Err(format!(
            "holds {} bytes, the seek table says {}",
            if n > u64::from(f.decompressed) {
                "more".to_string()
            } else {
                n.to_string()
            },
            f.decompressed
        ));
    }
    Ok(())
}

impl FrameStreams {
    /// Fills `buf` from `from` bytes into frame `i` (`f`), up to the frame's end;
    /// returns the bytes read (short only at the frame's end). An error says what is
    /// wrong with the frame, without naming it.
    pub fn read(
        &self,
        file: &Arc<File>,
        codec: Codec,
        i: usize,
        f: &Frame,
        from: u64,
        buf: &mut [u8],
    ) -> io::Result<usize> {
        let checked = {
            let mut all = self.checked.lock().unwrap_or_else(|e| e.into_inner());
            all.entry(i).or_default().clone()
        };
        checked
            .get_or_init(|| check(file, codec, f))
            .clone()
            .map_err(io::Error::other)?;
        let size = u64::from(f.decompressed);
        let mut cursor = match self.take(i, from) {
            Some(c) => c,
            None => Cursor {
                frame: i,
                pos: 0,
                dec: decoder(file, codec, f)?,
                last_used: 0,
            },
        };
        let short =
            |pos: u64| io::Error::other(format!("holds {pos} bytes, the seek table says {size}"));
        let mut scratch = Vec::new();
        while cursor.pos < from {
            if scratch.is_empty() {
                scratch = vec![0u8; INPUT];
            }
            let k = (from - cursor.pos).min(INPUT as u64) as usize;
            match cursor
                .dec
                .read(&mut scratch[..k])
                .map_err(|e| damaged(&e))?
            {
                0 => return Err(short(cursor.pos)),
                n => cursor.pos += n as u64,
            }
        }
        let want = (size - from).min(buf.len() as u64) as usize;
        let mut got = 0;
        while got < want {
            match cursor
                .dec
                .read(&mut buf[got..want])
                .map_err(|e| damaged(&e))?
            {
                0 => return Err(short(cursor.pos)),
                n => {
                    got += n;
                    cursor.pos += n as u64;
                }
            }
        }
        if cursor.pos == size {
            // At the frame's end: it must end here (and its checksum is checked now).
            let mut more = [0u8; 1];
            if cursor.dec.read(&mut more).map_err(|e| damaged(&e))? != 0 {
                return Err(io::Error::other(format!(
                    "holds more than the {size} bytes the seek table says"
                )));
            }
        } else {
            self.give_back(cursor);
        }
        Ok(got)
    }

    /// The decoder in frame `i` furthest along at or before `from`, if any.
    fn take(&self, i: usize, from: u64) -> Option<Cursor> {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        let best = pool
            .0
            .iter()
            .enumerate()
            .filter(|(_, c)| c.frame == i && c.pos <= from)
            .max_by_key(|(_, c)| c.pos)
            .map(|(k, _)| k)?;
        Some(pool.0.swap_remove(best))
    }

    fn give_back(&self, mut cursor: Cursor) {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        pool.1 += 1;
        cursor.last_used = pool.1;
        if pool.0.len() >= STREAMS {
            if let Some((k, _)) = pool.0.iter().enumerate().min_by_key(|(_, c)| c.last_used) {
                pool.0.swap_remove(k);
            }
        }
        pool.0.push(cursor);
    }
}
