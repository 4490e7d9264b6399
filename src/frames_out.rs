//! `ferry pack --zstd` and `-z`: the archive written compressed in independent frames
//! (zstd frames with a seek table after them, or gzip members that carry their sizes:
//! see `ferry_seek::SeekableWriter` and docs/compressed-archives.md), so that ls, cat
//! and unpack read what they need.

use ferry_seek::{FrameFormat, SeekableWriter};
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

/// Input bytes a frame gathers before the next write starts a new one (a few MiB: `cat`
/// of one member decompresses about this much).
pub const FRAME_TARGET: usize = 4 << 20;

/// Input bytes a frame of the index gathers: a lookup in the tree table (`cat`) reads
/// a few 64 KiB pages of it, each then costing one small frame's decompression.
pub const INDEX_FRAME_TARGET: usize = 128 << 10;

/// The zstd level `--zstd` packs at by default (what `zstd` and `tar -I zstd` use).
pub const ZSTD_LEVEL: u32 = 3;
/// The gzip level `-z` packs at by default (what `gzip` and `tar -z` use).
pub const GZIP_LEVEL: u32 = 6;

/// A compression pack writes in frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compress {
    /// `--zstd`, `.zst`, `.tzst`.
    Zstd,
    /// `-z`, `.gz`, `.tgz`.
    Gzip,
}

impl Compress {
    /// The compression an archive named `path` is written with without being told (as
    /// GNU tar's `-a` takes the suffix).
    pub fn implied_by_name(path: &Path) -> Option<Compress> {
        let name = path.as_os_str().as_encoded_bytes();
        let ends = |suffixes: &[&[u8]]| suffixes.iter().any(|s| name.ends_with(s));
        if ends(&[b".zst", b".tzst"]) {
            Some(Compress::Zstd)
        } else if ends(&[b".gz", b".tgz"]) {
            Some(Compress::Gzip)
        } else {
            None
        }
    }

    /// Its frames at `level` (its own default when none), refused out of its range.
    pub fn format(self, level: Option<u32>) -> anyhow::Result<FrameFormat> {
        let (name, default, max) = match self {
            Compress::Zstd => ("zstd", ZSTD_LEVEL, 19),
            Compress::Gzip => ("gzip", GZIP_LEVEL, 9),
        };
        let level = level.unwrap_or(default);
        if !(1..=max).contains(&level) {
            anyhow::bail!("--level {level}: {name} levels go from 1 to {max}");
        }
        Ok(match self {
            Compress::Zstd => FrameFormat::Zstd(level as i32),
            Compress::Gzip => FrameFormat::Gzip(level),
        })
    }
}

/// The writer pack is given, shared with the job that finishes it once pack is done.
pub struct Shared<W: Write>(Arc<Mutex<Option<SeekableWriter<W>>>>);

impl<W: Write> Clone for Shared<W> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl<W: Write> Shared<W> {
    /// Compresses into `out` in frames of `format`, with a worker a core.
    pub fn new(out: W, format: FrameFormat) -> io::Result<Self> {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let w = SeekableWriter::new(out, format, FRAME_TARGET, threads)?;
        Ok(Shared(Arc::new(Mutex::new(Some(w)))))
    }

    /// Writes the last frame and the seek table (zstd).
    pub fn finish(&self) -> io::Result<W> {
        let w = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        w.ok_or_else(|| io::Error::other("the compressed output was finished twice"))?
            .finish()
    }
}

impl<W: Write> Write for Shared<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            Some(w) => w.write(buf),
            None => Err(io::Error::other(
                "the compressed output is already finished",
            )),
        }
    }

    /// Pack flushes once the tar data has ended, before the index: the frame ends
    /// there, and the index goes in small frames.
    fn flush(&mut self) -> io::Result<()> {
        match self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            Some(w) => w.end_frame(INDEX_FRAME_TARGET),
            None => Ok(()),
        }
    }
}
