//! Random access to a file of independent frames by whole frames: a seekable zstd file
//! (see [`crate::seekable`]) or gzip members that carry their sizes (see
//! [`crate::gzip_members`]). A read decompresses the frames it touches, each at once and whole, and keeps the
//! last few decompressed, so readers going through the file side by side (unpack's
//! workers) each decompress a frame once between them. A frame being decompressed by
//! one reader is waited for by the others that want it, not decompressed again.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, OnceLock};

use crate::seekable::{frames, Frame};
use crate::{gzip_members, Codec};

/// Frames kept decompressed at most (each a few MiB as `ferry pack --zstd` writes them).
pub const CACHED_FRAMES: usize = 24;

/// A frame decompressed, or why it could not be.
type Slot = Arc<OnceLock<Result<Arc<Vec<u8>>, String>>>;

/// The frames kept, and in which order they came.
#[derive(Default)]
struct Cache {
    slots: HashMap<usize, Slot>,
    order: VecDeque<usize>,
}

/// A file of independent frames, read by decompressed offset. `read_at` takes `&self`
/// and may be called from many threads at once.
pub struct Frames {
    file: File,
    codec: Codec,
    frames: Vec<Frame>,
    len: u64,
    cache: Mutex<Cache>,
}

impl Frames {
    /// `file` read through its seek table; `None` if it has none (see
    /// [`crate::seekable::frames`] for a table that is refused).
    pub fn open(file: File) -> io::Result<Option<Frames>> {
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
            file,
            codec,
            frames,
            len,
            cache: Mutex::default(),
        }))
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
            let data = self.frame(i)?;
            let from = (pos - self.frames[i].out) as usize;
            let n = (data.len() - from).min(buf.len() - done);
            buf[done..done + n].copy_from_slice(&data[from..from + n]);
            done += n;
        }
        Ok(done)
    }

    /// Frame `i`, decompressed: from the cache, or now.
    fn frame(&self, i: usize) -> io::Result<Arc<Vec<u8>>> {
        let slot = {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            let cache = &mut *cache;
            if !cache.slots.contains_key(&i) {
                cache.order.push_back(i);
                while cache.order.len() > CACHED_FRAMES {
                    if let Some(old) = cache.order.pop_front() {
                        cache.slots.remove(&old);
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
        let end = f.inp + u64::from(f.compressed);
        let frame = match self.codec {
            Codec::Gzip => "gzip member",
            _ => "zstd frame",
        };
        let say = |what: String| format!("{frame} {i} (bytes {}..{end}): {what}", f.inp);
        let mut raw = vec![0u8; f.compressed as usize];
        self.file
            .read_exact_at(&mut raw, f.inp)
            .map_err(|e| say(e.to_string()))?;
        let data = match self.codec {
            Codec::Gzip => gzip_members::inflate(&raw, f.decompressed).map_err(say)?,
            _ => unzstd(&raw, f.decompressed).map_err(say)?,
        };
        if data.len() != f.decompressed as usize {
            return Err(say(format!(
                "holds {} bytes, the seek table says {}",
                data.len(),
                f.decompressed
            )));
        }
        // Kept as made: an Arc<[u8]> would copy the frame once more.
        Ok(Arc::new(data))
    }
}

/// The data of zstd frame `raw`, which the seek table says holds `decompressed` bytes.
/// The table is not trusted: memory grows with what the frame holds, and no more than
/// one byte past what the table says is decompressed.
fn unzstd(raw: &[u8], decompressed: u32) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity((decompressed as usize).min(8 << 20));
    let decoder = zstd::stream::read::Decoder::with_buffer(raw).map_err(|e| e.to_string())?;
    decoder
        .single_frame()
        .take(u64::from(decompressed) + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("damaged: {e}"))?;
    Ok(out)
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
            reads_across_frames_of(format, codec, named);
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
        let err = frames.read_at(&mut [0u8; 100], 0).expect_err("overstated");
        // Memory follows the data, not the table (a buffer of the size it says would
        // be 4 GiB).
        let first = zstd::bulk::compress(&[7u8; 2000], 3).expect("compress");
        let out = unzstd(&first, u32::MAX).expect("decompress");
        assert!(
            out.len() == 2000 && out.capacity() <= 8 << 20,
            "{}",
            out.capacity()
        );
        assert!(
            err.to_string().contains("the seek table says 4294967295"),
            "{err}"
        );
    }

    fn reads_across_frames_of(format: FrameFormat, codec: Codec, named: &str) {
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
        let frames = Frames::open(file.reopen().expect("reopen"))
            .expect("open")
            .expect("table");
        assert_eq!(frames.codec(), codec);
        assert_eq!(frames.decompressed_len(), data.len() as u64);
        assert!(frames.count() >= 10);
        let mut buf = vec![0u8; 300_000];
        assert_eq!(frames.read_at(&mut buf, 1_650_000).expect("read"), 300_000);
        assert_eq!(buf, data[1_650_000..1_950_000]);
        assert_eq!(frames.read_at(&mut buf, 1_900_000).expect("read"), 100_000);
        // A byte flipped in the middle of the file: the frame there is named.
        let mut bytes = std::fs::read(file.path()).expect("read");
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        std::fs::write(file.path(), &bytes).expect("write");
        let frames = Frames::open(file.reopen().expect("reopen"))
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
