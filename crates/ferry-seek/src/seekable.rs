//! The zstd seekable format (zstd's `contrib/seekable_format`): independent zstd
//! frames, then a seek table in a skippable frame, which `zstd -d`, `tar --zstd` and
//! every other zstd reader pass over. [`SeekableWriter`] writes it, compressing frames
//! on worker threads; [`seek_table`] reads the table back into a [`SeekIndex`] without
//! decompressing anything, so random access starts at once.
//!
//! The table is a skippable frame (magic `0x184D2A5E`, a 4-byte length) holding, for
//! each frame in order, its compressed and decompressed sizes (`u32` each, little
//! endian), then a 9-byte footer: the number of frames (`u32`), a descriptor byte (bit
//! 7: each entry has a 4-byte checksum too; bits 2-6 reserved, zero) and the magic
//! `0x8F92EAB1`. Frames are cut between the writes the writer is given, once a frame
//! holds [`SeekableWriter::new`]'s target, and within a write only where one would
//! exceed twice that.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::index::{Kind, Point, SeekIndex};
use crate::Codec;
use zstd::stream::raw::CParameter;

/// The magic number of the skippable frame holding the seek table.
const SKIPPABLE_MAGIC: u32 = 0x184D_2A5E;
/// The magic number ending the seek table.
const SEEKABLE_MAGIC: u32 = 0x8F92_EAB1;
/// The seek table's footer: frame count, descriptor, magic.
const FOOTER_LEN: u64 = 9;
/// Seek table entries read at once.
const TABLE_PIECE: usize = 4096;

/// At level 3 (`pack --zstd`'s default), the match finder's hash and chain tables
/// (log2 of their entries): zstd's own choice for inputs over 256 KiB is 17 and 16.
const FRAME_HASH_LOG: u32 = 16;
const FRAME_CHAIN_LOG: u32 = 15;

/// A frame's data to compress, and where to send the frame.
type Job = (Vec<u8>, SyncSender<io::Result<Vec<u8>>>);

/// Compresses one frame's data into the whole frame.
type Compressor = Box<dyn FnMut(&[u8]) -> io::Result<Vec<u8>> + Send>;

/// What [`SeekableWriter`] writes its frames as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameFormat {
    /// zstd frames at this level (with their checksums and sizes), then the seek table.
    Zstd(i32),
    /// gzip members at this level (0-9), each with its sizes in its header (see
    /// [`crate::gzip_members`]); no table after them.
    Gzip(u32),
}

impl FrameFormat {
    /// A compressor of whole frames, for one worker.
    fn compressor(self) -> io::Result<Compressor> {
        Ok(match self {
            FrameFormat::Zstd(level) => {
                let mut zc = zstd::bulk::Compressor::new(level)?;
                zc.include_checksum(true)?;
                zc.include_contentsize(true)?;
                if level == 3 {
                    // Level 3's tables are sized for a stream of any length; a frame is a
                    // few MiB. One step smaller, they cost the kernel tree 10% less CPU
                    // (user time of `pack --zstd`, 3.82 s against 4.25) for 0.7% more
                    // bytes (212.2 MB against 210.7).
                    zc.set_parameter(CParameter::HashLog(FRAME_HASH_LOG))?;
                    zc.set_parameter(CParameter::ChainLog(FRAME_CHAIN_LOG))?;
                }
                Box::new(move |data| zc.compress(data))
            }
            FrameFormat::Gzip(level) => {
                Box::new(move |data| crate::gzip_members::member(data, level.min(9)))
            }
        })
    }
}

/// Writes independent frames into `W`: what it is given, compressed in parallel and
/// written in order, in the zstd seekable format or as gzip members that carry their
/// sizes ([`FrameFormat`]). [`SeekableWriter::finish`] writes the zstd seek table;
/// without it the output is still a valid zstd stream, but without a table.
pub struct SeekableWriter<W: Write> {
    format: FrameFormat,
    out: Option<W>,
    chunk: Vec<u8>,
    target: usize,
    jobs: Option<SyncSender<Job>>,
    /// Frames being compressed, in order, with their decompressed sizes.
    pending: VecDeque<(u32, Receiver<io::Result<Vec<u8>>>)>,
    max_pending: usize,
    /// `(compressed, decompressed)` size of every frame written.
    frames: Vec<(u32, u32)>,
    workers: Vec<JoinHandle<()>>,
}

impl<W: Write> SeekableWriter<W> {
    /// A writer into `out` making frames of about `target` bytes of input (at most
    /// twice that, `target` at most 512 MiB), each compressed as `format` says (zstd
    /// frames with their content checksums, or gzip members), by `threads` workers.
    pub fn new(out: W, format: FrameFormat, target: usize, threads: usize) -> io::Result<Self> {
        let target = target.clamp(1, 512 << 20);
        let threads = threads.max(1);
        let (tx, rx) = sync_channel::<Job>(threads);
        let rx = Arc::new(Mutex::new(rx));
        let mut workers = Vec::new();
        for _ in 0..threads {
            let rx = rx.clone();
            let mut compress = format.compressor()?;
            workers.push(std::thread::spawn(move || loop {
                let job = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
                let Ok((data, reply)) = job else { return };
                let _ = reply.send(compress(&data));
            }));
        }
        Ok(SeekableWriter {
            format,
            out: Some(out),
            chunk: Vec::with_capacity(target * 2),
            target,
            jobs: Some(tx),
            pending: VecDeque::new(),
            max_pending: threads * 2,
            frames: Vec::new(),
            workers,
        })
    }

    /// Hands the frame gathered so far to a worker; writes finished frames while too
    /// many are in flight.
    fn submit(&mut self) -> io::Result<()> {
        if self.chunk.is_empty() {
            return Ok(());
        }
        let data = std::mem::replace(&mut self.chunk, Vec::with_capacity(self.target * 2));
        let size = data.len() as u32;
        let (reply, frame) = sync_channel(1);
        let jobs = self.jobs.as_ref().ok_or_else(finished)?;
        jobs.send((data, reply))
            .map_err(|_| io::Error::other("the compressing workers are gone"))?;
        self.pending.push_back((size, frame));
        while self.pending.len() > self.max_pending {
            self.write_one()?;
        }
        Ok(())
    }

    /// Writes the oldest frame in flight once it is compressed.
    fn write_one(&mut self) -> io::Result<()> {
        let Some((size, frame)) = self.pending.pop_front() else {
            return Ok(());
        };
        let frame = frame
            .recv()
            .map_err(|_| io::Error::other("a compressing worker died"))??;
        let compressed =
            u32::try_from(frame.len()).map_err(|_| io::Error::other("a frame of 4 GiB or more"))?;
        self.out.as_mut().ok_or_else(finished)?.write_all(&frame)?;
        self.frames.push((compressed, size));
        Ok(())
    }

    /// Writes what is left and the seek table; returns the output, flushed.
    pub fn finish(mut self) -> io::Result<W> {
        self.submit()?;
        self.jobs = None;
        while !self.pending.is_empty() {
            self.write_one()?;
        }
        let mut out = self.out.take().ok_or_else(finished)?;
        if let FrameFormat::Zstd(_) = self.format {
            out.write_all(&table_bytes(&self.frames))?;
        }
        out.flush()?;
        Ok(out)
    }

    /// Ends the current frame here (if it holds anything), and makes the frames after
    /// it of about `target` bytes: what follows is read in smaller pieces (an index).
    pub fn end_frame(&mut self, target: usize) -> io::Result<()> {
        self.submit()?;
        self.target = target.clamp(1, 512 << 20);
        Ok(())
    }

    /// The frames written so far, `(compressed, decompressed)` sizes.
    pub fn frames(&self) -> &[(u32, u32)] {
        &self.frames
    }
}

fn finished() -> io::Error {
    io::Error::other("the zstd output is already finished")
}

impl<W: Write> Write for SeekableWriter<W> {
    /// Takes `buf` into the current frame; a frame holding the target already is
    /// handed off first, so frames end between writes where they can.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.chunk.len() >= self.target {
            self.submit()?;
        }
        let n = buf.len().min(self.target * 2 - self.chunk.len());
        self.chunk.extend_from_slice(&buf[..n]);
        if self.chunk.len() >= self.target * 2 {
            self.submit()?;
        }
        Ok(n)
    }

    /// Frames are only written whole: nothing to do until [`Self::finish`].
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<W: Write> Drop for SeekableWriter<W> {
    /// Ends the workers (they stop once no more frames can come).
    fn drop(&mut self) {
        self.jobs = None;
        self.pending.clear();
        for w in std::mem::take(&mut self.workers) {
            let _ = w.join();
        }
    }
}

/// The seek table for frames of these `(compressed, decompressed)` sizes, as a
/// skippable frame.
fn table_bytes(frames: &[(u32, u32)]) -> Vec<u8> {
    let content = frames.len() as u64 * 8 + FOOTER_LEN;
    let mut t = Vec::with_capacity(8 + content as usize);
    t.extend(SKIPPABLE_MAGIC.to_le_bytes());
    t.extend((content as u32).to_le_bytes());
    for (c, d) in frames {
        t.extend(c.to_le_bytes());
        t.extend(d.to_le_bytes());
    }
    t.extend((frames.len() as u32).to_le_bytes());
    t.push(0);
    t.extend(SEEKABLE_MAGIC.to_le_bytes());
    t
}

fn bad(what: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("zstd seek table: {what}"),
    )
}

/// One frame of a seekable zstd file, as its seek table gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Where the frame starts in the file.
    pub inp: u64,
    /// Its compressed bytes.
    pub compressed: u32,
    /// Where its data starts in the decompressed stream.
    pub out: u64,
    /// Its decompressed bytes.
    pub decompressed: u32,
}

/// The frames a zstd file's seek table lists, read from its end alone; `None` when the
/// file does not end in one. A table that does not describe the file (sizes not adding
/// up to where the table starts, a frame of no bytes, reserved bits set) is an error
/// saying so.
pub fn frames(file: &File) -> io::Result<Option<Vec<Frame>>> {
    let len = file.metadata()?.len();
    if len < FOOTER_LEN + 8 {
        return Ok(None);
    }
    let mut footer = [0u8; FOOTER_LEN as usize];
    file.read_exact_at(&mut footer, len - FOOTER_LEN)?;
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    if u32_at(&footer, 5) != SEEKABLE_MAGIC {
        return Ok(None);
    }
    let count = u64::from(u32_at(&footer, 0));
    let descriptor = footer[4];
    if descriptor & 0x7c != 0 {
        return Err(bad("reserved bits set in its descriptor"));
    }
    let entry = if descriptor & 0x80 != 0 { 12 } else { 8 };
    let content = count * entry + FOOTER_LEN;
    if content + 8 > len {
        return Err(bad(format!(
            "{count} frames do not fit a file of {len} bytes"
        )));
    }
    let table_at = len - content - 8;
    let mut head = [0u8; 8];
    file.read_exact_at(&mut head, table_at)?;
    if u32_at(&head, 0) != SKIPPABLE_MAGIC || u64::from(u32_at(&head, 4)) != content {
        return Err(bad("no skippable frame of its length before its footer"));
    }
    // The entries are read in pieces, and the list grows with the entries read: what
    // the footer says is not an allocation (the file's own size bounds it).
    let (mut inp, mut out) = (0u64, 0u64);
    let mut frames = Vec::with_capacity((count as usize).min(TABLE_PIECE));
    let mut piece = vec![0u8; TABLE_PIECE * entry as usize];
    let mut i = 0usize;
    while (i as u64) < count {
        let n = (count - i as u64).min(TABLE_PIECE as u64) as usize;
        let bytes = &mut piece[..n * entry as usize];
        file.read_exact_at(bytes, table_at + 8 + i as u64 * entry)?;
        for e in bytes.chunks_exact(entry as usize) {
            let (compressed, decompressed) = (u32_at(e, 0), u32_at(e, 4));
            if compressed == 0 {
                return Err(bad(format!("frame {i} has no bytes")));
            }
            frames.push(Frame {
                inp,
                compressed,
                out,
                decompressed,
            });
            inp += u64::from(compressed);
            out += u64::from(decompressed);
            if inp > table_at {
                return Err(bad(format!(
                    "its frames end at byte {inp} or later, the table starts at {table_at}"
                )));
            }
            i += 1;
        }
    }
    if inp != table_at {
        return Err(bad(format!(
            "its frames end at byte {inp}, the table starts at {table_at}"
        )));
    }
    Ok(Some(frames))
}

/// The seek index a zstd file's seek table gives (a point at every frame), read from
/// its end alone, as [`frames`] reads it; `None` when the file does not end in one.
pub fn seek_table(file: &File) -> io::Result<Option<SeekIndex>> {
    let Some(frames) = frames(file)? else {
        return Ok(None);
    };
    let start = |f: &Frame| Point {
        out: f.out,
        inp: f.inp,
        kind: Kind::Start,
    };
    let mut points: Vec<Point> = frames
        .iter()
        .filter(|f| f.decompressed > 0)
        .map(start)
        .collect();
    if points.is_empty() {
        points.push(Point {
            out: 0,
            inp: 0,
            kind: Kind::Start,
        });
    }
    let end = frames
        .last()
        .map_or(0, |f| f.out + u64::from(f.decompressed));
    Ok(Some(SeekIndex {
        codec: Codec::Zstd,
        span: end / (frames.len() as u64).max(1),
        compressed_len: file.metadata()?.len(),
        decompressed_len: end,
        points,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Compressed;
    use std::io::Read;

    fn written(data: &[u8], target: usize, pieces: usize) -> (tempfile::NamedTempFile, usize) {
        let file = tempfile::NamedTempFile::new().expect("temp");
        let mut w = SeekableWriter::new(
            file.reopen().expect("reopen"),
            FrameFormat::Zstd(3),
            target,
            2,
        )
        .expect("writer");
        for piece in data.chunks(data.len().div_ceil(pieces).max(1)) {
            w.write_all(piece).expect("write");
        }
        w.finish().expect("finish");
        let frames = seek_table(&file.reopen().expect("reopen"))
            .expect("table")
            .expect("a table")
            .points();
        (file, frames)
    }

    fn sample(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i * 7 % 251) as u8 ^ (i >> 12) as u8)
            .collect()
    }

    #[test]
    fn zstd_reads_it_whole_and_the_table_gives_random_access() {
        let data = sample(3 << 20);
        let (file, _) = written(&data, 256 << 10, 40);
        let mut plain = Vec::new();
        zstd::stream::read::Decoder::new(file.reopen().expect("reopen"))
            .expect("decoder")
            .read_to_end(&mut plain)
            .expect("zstd reads every frame and skips the table");
        assert_eq!(plain, data);
        let index = seek_table(&file.reopen().expect("reopen"))
            .expect("table")
            .expect("a table");
        assert!(index.points() >= 8, "{} frames", index.points());
        assert_eq!(index.decompressed_len(), data.len() as u64);
        let c = Compressed::new(file.reopen().expect("reopen"), index);
        let mut buf = vec![0u8; 5000];
        let at = 2_500_000;
        assert_eq!(c.read_at(&mut buf, at as u64).expect("read"), 5000);
        assert_eq!(buf, data[at..at + 5000]);
        assert!(c.decompressed_bytes() <= 2 * (512 << 10) + 5000);
    }

    #[test]
    fn frames_end_between_writes_once_full() {
        let data = sample(1 << 20);
        // Writes of 100,000 bytes, target 150,000: every frame is two whole writes.
        let (_file, frames) = written(&data, 150_000, 11);
        assert_eq!(frames, 6);
    }

    #[test]
    fn a_file_without_a_table_has_none_and_a_lying_table_is_refused() {
        let plain = tempfile::NamedTempFile::new().expect("temp");
        std::fs::write(
            plain.path(),
            zstd::encode_all(&b"no table"[..], 3).expect("zstd"),
        )
        .expect("write");
        assert!(seek_table(&plain.reopen().expect("reopen"))
            .expect("read")
            .is_none());
        let (file, _) = written(&sample(100_000), 30_000, 4);
        let mut bytes = std::fs::read(file.path()).expect("read");
        let n = bytes.len();
        let count = u32::from_le_bytes(bytes[n - 9..n - 5].try_into().expect("4 bytes")) as usize;
        // The first frame's compressed size, one more than it is.
        let first = n - 9 - 8 * count;
        bytes[first] = bytes[first].wrapping_add(1);
        std::fs::write(file.path(), &bytes).expect("write");
        let err = seek_table(&file.reopen().expect("reopen")).unwrap_err();
        assert!(
            err.to_string()
                .contains("zstd seek table: its frames end at"),
            "{err}"
        );
    }
}
