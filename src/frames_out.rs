//! `ferry pack --zstd` and `-z`: the archive written compressed in independent frames
//! (zstd frames with a seek table after them, or gzip members that carry their sizes:
//! see `ferry_seek::SeekableWriter` and docs/compressed-archives.md), so that ls, cat
//! and unpack read what they need. An archive named `.xz`, `.bz2` or `.lz4` is written
//! as one stream of that compression (`crate::plain_out`); a name with another
//! compression's suffix is refused: ferry never writes a file whose name lies.

use crate::plain_out::{Plain, PlainWriter, BZIP2_LEVEL, XZ_LEVEL};
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

/// A compression pack writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compress {
    /// `--zstd`, `.zst`, `.tzst`: frames.
    Zstd,
    /// `-z`, `.gz`, `.tgz`, `.taz`: members.
    Gzip,
    /// `.xz`, `.txz`: one stream in blocks.
    Xz,
    /// `.bz2`, `.tbz2`, `.tbz`, `.tz2`: one stream.
    Bzip2,
    /// `.lz4`: one frame.
    Lz4,
}

/// The suffixes of each compression pack writes, as GNU tar's `-a` reads them (and
/// `.lz4`, as bsdtar's).
const WRITTEN: [(&str, Compress); 12] = [
    (".zst", Compress::Zstd),
    (".tzst", Compress::Zstd),
    (".gz", Compress::Gzip),
    (".tgz", Compress::Gzip),
    (".taz", Compress::Gzip),
    (".xz", Compress::Xz),
    (".txz", Compress::Xz),
    (".bz2", Compress::Bzip2),
    (".tbz2", Compress::Bzip2),
    (".tbz", Compress::Bzip2),
    (".tz2", Compress::Bzip2),
    (".lz4", Compress::Lz4),
];

/// Suffixes of compressions pack does not write (GNU tar's others, and common ones).
const NOT_WRITTEN: [&str; 11] = [
    ".Z", ".taZ", ".lz", ".lzma", ".tlz", ".lzo", ".tzo", ".br", ".sz", ".lzip", ".7z",
];

/// How an archive is written compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// In independent frames with their sizes (zstd, gzip).
    Frames(FrameFormat),
    /// As one stream.
    Plain(Plain),
}

impl Compress {
    /// The compression an archive named `path` is written with without being told (as
    /// GNU tar's `-a` takes the suffix); an error for the suffix of a compression
    /// ferry does not write, naming those it does.
    pub fn implied_by_name(path: &Path) -> anyhow::Result<Option<Compress>> {
        let name = path.as_os_str().as_encoded_bytes();
        let ends = |s: &str| name.ends_with(s.as_bytes());
        if let Some((_, c)) = WRITTEN.iter().find(|(s, _)| ends(s)) {
            return Ok(Some(*c));
        }
        if let Some(s) = NOT_WRITTEN.iter().find(|s| ends(s)) {
            let known: Vec<&str> = WRITTEN.iter().map(|(s, _)| *s).collect();
            anyhow::bail!(
                "{}: ferry does not write {s} archives (it writes {}, and a plain tar \
                 under any other name); pack to .tar and compress that",
                path.display(),
                known.join(" ")
            );
        }
        Ok(None)
    }

    /// How it is written at `level` (its own default when none), refused out of range.
    pub fn format(self, level: Option<u32>) -> anyhow::Result<Written> {
        let (name, default, min, max) = match self {
            Compress::Zstd => ("zstd", ZSTD_LEVEL, 1, 19),
            Compress::Gzip => ("gzip", GZIP_LEVEL, 1, 9),
            Compress::Xz => ("xz", XZ_LEVEL, 0, 9),
            Compress::Bzip2 => ("bzip2", BZIP2_LEVEL, 1, 9),
            Compress::Lz4 => match level {
                Some(_) => anyhow::bail!("--level: ferry writes lz4 at one level only"),
                None => return Ok(Written::Plain(Plain::Lz4)),
            },
        };
        let level = level.unwrap_or(default);
        if !(min..=max).contains(&level) {
            anyhow::bail!("--level {level}: {name} levels go from {min} to {max}");
        }
        Ok(match self {
            Compress::Zstd => Written::Frames(FrameFormat::Zstd(level as i32)),
            Compress::Gzip => Written::Frames(FrameFormat::Gzip(level)),
            Compress::Xz => Written::Plain(Plain::Xz(level)),
            _ => Written::Plain(Plain::Bzip2(level)),
        })
    }
}

/// The writer under [`Shared`].
enum Writer<W: Write> {
    Frames(SeekableWriter<W>),
    Plain(PlainWriter<W>),
}

/// The writer pack is given, shared with the job that finishes it once pack is done.
pub struct Shared<W: Write>(Arc<Mutex<Option<Writer<W>>>>);

impl<W: Write> Clone for Shared<W> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl<W: Write> Shared<W> {
    /// Compresses into `out` as `written` says, with a worker a core.
    pub fn new(out: W, written: Written) -> io::Result<Self> {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let w = match written {
            Written::Frames(format) => {
                Writer::Frames(SeekableWriter::new(out, format, FRAME_TARGET, threads)?)
            }
            Written::Plain(plain) => Writer::Plain(PlainWriter::new(out, plain)?),
        };
        Ok(Shared(Arc::new(Mutex::new(Some(w)))))
    }

    /// Writes the last frame and the seek table (zstd).
    pub fn finish(&self) -> io::Result<W> {
        let w = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        match w.ok_or_else(|| io::Error::other("the compressed output was finished twice"))? {
            Writer::Frames(w) => w.finish(),
            Writer::Plain(w) => w.finish(),
        }
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
            Some(Writer::Frames(w)) => w.write(buf),
            Some(Writer::Plain(w)) => w.write(buf),
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
            Some(Writer::Frames(w)) => w.end_frame(INDEX_FRAME_TARGET),
            Some(Writer::Plain(w)) => w.flush(),
            None => Ok(()),
        }
    }
}
