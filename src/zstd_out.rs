//! `ferry pack --zstd`: the archive written through zstd in independent frames, with
//! a seek table after them (see `ferry_seek::SeekableWriter` and
//! docs/compressed-archives.md), so that ls, cat and unpack read what they need.

use ferry_seek::SeekableWriter;
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
pub const DEFAULT_LEVEL: i32 = 3;

/// Whether an archive named `path` is written compressed with zstd without being told
/// (as GNU tar's `-a` takes the suffix): `.zst` or `.tzst`.
pub fn implied_by_name(path: &Path) -> bool {
    let name = path.as_os_str().as_encoded_bytes();
    name.ends_with(b".zst") || name.ends_with(b".tzst")
}

/// The writer pack is given, shared with the job that finishes it once pack is done.
pub struct Shared<W: Write>(Arc<Mutex<Option<SeekableWriter<W>>>>);

impl<W: Write> Clone for Shared<W> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl<W: Write> Shared<W> {
    /// Compresses into `out` at `level`, with a worker a core.
    pub fn new(out: W, level: i32) -> io::Result<Self> {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let w = SeekableWriter::new(out, level, FRAME_TARGET, threads)?;
        Ok(Shared(Arc::new(Mutex::new(Some(w)))))
    }

    /// Writes the last frame and the seek table.
    pub fn finish(&self) -> io::Result<W> {
        let w = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        w.ok_or_else(|| io::Error::other("the zstd output was finished twice"))?
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
            None => Err(io::Error::other("the zstd output is already finished")),
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
