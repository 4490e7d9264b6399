//! Random access to a file of independent frames by whole frames: a seekable zstd file
//! (see [`crate::seekable`]) or gzip members that carry their sizes (see
//! [`crate::gzip_members`]). A read decompresses the frames it touches, each at once and
//! whole, and keeps the last ones decompressed up to a budget in bytes
//! ([`CACHE_BYTES`]), so readers going through the file side by side (unpack's workers)
//! each decompress a frame once between them. A frame being decompressed by one reader
//! is waited for by the others that want it, not decompressed again.
//!
//! A frame larger than a quarter of the budget (a seek table may give a frame up to
//! 4 GiB, and 1 GiB of zeros takes 33 KB at `zstd -19`) is never held whole: reads in it
//! are served by a few decoders kept inside it ([`crate::frame_read`]), which decode it
//! from its start up to the offset asked and move forward with the reads. So memory is
//! the budget, a frame per reader in flight and those decoders' windows, whatever the
//! seek table says.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io;
use std::sync::{Arc, Mutex, OnceLock};

use crate::frame_read::{self, say, FrameStreams};
use crate::seekable::{frames, Frame};
use crate::{gzip_members, Codec};

/// Bytes of decompressed frames kept at most by default: 256 MiB (64 of `ferry pack
/// --zstd`'s 4 MiB frames). Frames larger than a quarter of it are read streaming.
pub const CACHE_BYTES: u64 = 256 << 20;

/// A frame decompressed, or why it could not be.
type Slot = Arc<OnceLock<Result<Arc<Vec<u8>>, String>>>;

/// The frames kept, in which order they came, and their decompressed bytes.
#[derive(Default)]
struct Cache {
    slots: HashMap<usize, Slot>,
    order: VecDeque<usize>,
    bytes: u64,
}

/// A file of independent frames, read by decompressed offset. `read_at` takes `&self`
/// and may be called from many threads at once.
pub struct Frames {
    file: Arc<File>,
    codec: Codec,
    frames: Vec<Frame>,
    len: u64,
    budget: u64,
    /// Boxed, as the streams: a `Frames` is held in enums beside a `File`.
    cache: Box<Mutex<Cache>>,
    streams: Box<FrameStreams>,
}

impl Frames {
    /// `file` read through its seek table; `None` if it has none (see
    /// [`crate::seekable::frames`] for a table that is refused). Keeps at most
    /// [`CACHE_BYTES`] decompressed.
    pub fn open(file: File) -> io::Result<Option<Frames>> {
        Frames::with_budget(file, CACHE_BYTES)
    }

    /// As [`Frames::open`], keeping at most `budget` bytes decompressed; frames larger
    /// than a quarter of it are read streaming, never held whole.
    pub fn with_budget(file: File, budget: u64) -> io::Result<Option<Frames>> {
        let (codec, frames) = match frames(&file)? {
            Some(frames) => (Codec::Zstd, frames),
            None => match gzip_members::members(&file)? {
                Some(frames) => (Codec::Gzip, frames),
                None => return Ok(None),
            },
        };
        let len = frames
            .last()
            .map_or(0, |f| f.out + u64::from(f.decompressed));
        Ok(Some(Frames {
            file: Arc::new(file),
            codec,
            frames,
            len,
            budget,
            cache: Box::default(),
            streams: Box::default(),
        }))
    }

    /// The zstd `frames` of `file` a caller's own table lists (contiguous in the
    /// decompressed data from 0, each a whole zstd frame), keeping at most `budget`
    /// bytes decompressed: for a part of a file, such as a packed ferry index. A frame
    /// that does not decompress to the size given is an error when read.
    pub fn zstd_frames(file: File, frames: Vec<Frame>, budget: u64) -> Frames {
        let len = frames
            .last()
            .map_or(0, |f| f.out + u64::from(f.decompressed));
        Frames {
            file: Arc::new(file),
            codec: Codec::Zstd,
            frames,
            len,
            budget,
            cache: Box::default(),
            streams: Box::default(),
        }
    }

    /// The length of the decompressed data.
    pub fn decompressed_len(&self) -> u64 {
        self.len
    }

    /// What the frames are compressed with: zstd or gzip.
    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// How many frames there are.
    pub fn count(&self) -> usize {
        self.frames.len()
    }

    /// Whether frame `f` is decompressed whole (and kept), or read streaming.
    fn kept_whole(&self, f: &Frame) -> bool {
        u64::from(f.decompressed) <= self.budget / 4
    }

    /// Fills `buf` from decompressed `offset`; short only at the end of the data.
    /// A damaged frame is an error naming it and saying what is wrong.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            let pos = offset + done as u64;
            if pos >= self.len {
                break;
            }
            let i = self
                .frames
                .partition_point(|f| f.out + u64::from(f.decompressed) <= pos);
            let f = self.frames[i];
            let from = pos - f.out;
            let n = if self.kept_whole(&f) {
                let data = self.frame(i)?;
                let from = from as usize;
                let n = (data.len() - from).min(buf.len() - done);
                buf[done..done + n].copy_from_slice(&data[from..from + n]);
                n
            } else {
                self.streams
                    .read(&self.file, self.codec, i, &f, from, &mut buf[done..])
                    .map_err(|e| {
                        io::Error::new(io::ErrorKind::InvalidData, say(self.codec, i, &f, e))
                    })?
            };
            done += n;
        }
        Ok(done)
    }

    /// Frame `i`, decompressed: from the cache, or now. Older frames are let go while
    /// the frames kept exceed the budget.
    fn frame(&self, i: usize) -> io::Result<Arc<Vec<u8>>> {
        let slot = {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            let cache = &mut *cache;
            if !cache.slots.contains_key(&i) {
                cache.order.push_back(i);
                cache.bytes += u64::from(self.frames[i].decompressed);
                while cache.bytes > self.budget && cache.order.len() > 1 {
                    if let Some(old) = cache.order.pop_front() {
                        cache.slots.remove(&old);
                        cache.bytes -= u64::from(self.frames[old].decompressed);
                    }
                }
            }
            cache.slots.entry(i).or_default().clone()
        };
        slot.get_or_init(|| self.decompress(i))
            .clone()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    fn decompress(&self, i: usize) -> Result<Arc<Vec<u8>>, String> {
        let f = self.frames[i];
        let data =
            frame_read::whole(&self.file, self.codec, &f).map_err(|e| say(self.codec, i, &f, e))?;
        // Kept as made: an Arc<[u8]> would copy the frame once more.
        Ok(Arc::new(data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FrameFormat, SeekableWriter};
    use std::io::Write;

    #[test]
    fn reads_across_frames_and_names_a_damaged_one() {
        for (format, codec, named) in [
            (FrameFormat::Zstd(3), Codec::Zstd, "zstd frame "),
            (FrameFormat::Gzip(6), Codec::Gzip, "gzip member "),
        ] {
            // Kept whole, and (a budget of 64 KiB) read streaming.
            for budget in [CACHE_BYTES, 64 << 10] {
                reads_across_frames_of(format, codec, named, budget);
            }
        }
    }

    #[test]
    fn a_seek_table_overstating_a_frame_is_an_error_not_a_huge_buffer() {
        let file = tempfile::NamedTempFile::new().expect("temp");
        let mut w = SeekableWriter::new(
            file.reopen().expect("reopen"),
            FrameFormat::Zstd(3),
            1000,
            1,
        )
        .expect("w");
        w.write_all(&[7u8; 3000]).expect("write");
        w.finish().expect("finish");
        // The first entry's decompressed size (after the skippable frame's 8-byte
        // header and the entry's compressed size) said to be 4 GiB - 1.
        let mut bytes = std::fs::read(file.path()).expect("read");
        let count = u32::from_le_bytes(bytes[bytes.len() - 9..bytes.len() - 5].try_into().unwrap());
        let entry = if bytes[bytes.len() - 5] & 0x80 != 0 {
            12
        } else {
            8
        };
        let table_at = bytes.len() - 9 - count as usize * entry - 8;
        bytes[table_at + 12..table_at + 16].copy_from_slice(&u32::MAX.to_le_bytes());
        std::fs::write(file.path(), &bytes).expect("write");
        let frames = Frames::open(file.reopen().expect("reopen"))
            .expect("open")
            .expect("table");
        // Read streaming (4 GiB is more than a quarter of the budget): the frame's
        // 2000 bytes come, then the error where the data ends.
        let err = frames.read_at(&mut [0u8; 3000], 0).expect_err("overstated");
        assert!(
            err.to_string().contains("zstd frame 0 (bytes 0..")
                && err
                    .to_string()
                    .contains("holds 2000 bytes, the seek table says 4294967295"),
            "{err}"
        );
        // Kept whole (a budget of 16 GiB): memory follows the data, not the table, and
        // the same error.
        let frames = Frames::with_budget(file.reopen().expect("reopen"), 16 << 30)
            .expect("open")
            .expect("table");
        let err = frames.read_at(&mut [0u8; 100], 0).expect_err("overstated");
        assert!(
            err.to_string()
                .contains("holds 2000 bytes, the seek table says 4294967295"),
            "{err}"
        );
    }

    fn reads_across_frames_of(format: FrameFormat, codec: Codec, named: &str, budget: u64) {
        let data: Vec<u8> = (0..2_000_000u32)
            .map(|i| (i % 253) as u8 ^ (i >> 15) as u8)
            .collect();
        let file = tempfile::NamedTempFile::new().expect("temp");
        let mut w =
            SeekableWriter::new(file.reopen().expect("reopen"), format, 100_000, 2).expect("w");
        for piece in data.chunks(50_000) {
            w.write_all(piece).expect("write");
        }
        w.finish().expect("finish");
        let frames = Frames::with_budget(file.reopen().expect("reopen"), budget)
            .expect("open")
            .expect("table");
        assert_eq!(frames.codec(), codec);
        assert_eq!(frames.decompressed_len(), data.len() as u64);
        assert!(frames.count() >= 10);
        let mut buf = vec![0u8; 300_000];
        assert_eq!(frames.read_at(&mut buf, 1_650_000).expect("read"), 300_000);
        assert_eq!(buf, data[1_650_000..1_950_000]);
        assert_eq!(frames.read_at(&mut buf, 1_900_000).expect("read"), 100_000);
        // Backwards, in small pieces, within one frame.
        for at in [1_250_000u64, 1_210_000, 1_210_100, 1_200_001] {
            assert_eq!(frames.read_at(&mut buf[..7000], at).expect("read"), 7000);
            assert_eq!(buf[..7000], data[at as usize..at as usize + 7000]);
        }
        // A byte flipped in the middle of the file: the frame there is named.
        let mut bytes = std::fs::read(file.path()).expect("read");
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        std::fs::write(file.path(), &bytes).expect("write");
        let frames = Frames::with_budget(file.reopen().expect("reopen"), budget)
            .expect("open")
            .expect("table");
        let err = (0..data.len() as u64)
            .step_by(50_000)
            .find_map(|at| frames.read_at(&mut buf[..1000], at).err())
            .expect("some frame is damaged");
        assert!(err.to_string().starts_with(named), "{err}");
        assert!(
            frames.read_at(&mut buf[..1000], 0).is_ok(),
            "the first frame still reads"
        );
    }
}
