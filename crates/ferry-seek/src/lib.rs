//! Random access into compressed tar archives.
//!
//! A compressed tar is one long compressed stream: reading a member in the middle normally
//! means decompressing everything before it. This crate reads the file once, sequentially,
//! and while doing so records **seek points**: places where a decompressor can start again
//! without what came before. Later, [`Compressed::read_at`] serves any uncompressed byte
//! range by starting at the nearest seek point at or before it.
//!
//! What each codec gets:
//!
//! - **gzip** (single or multi-member, pigz output too): always random access. A seek point
//!   is the inflate state at a deflate block boundary, as zlib's `zran.c` keeps it: the
//!   compressed offset, the bits of the byte before it not yet used, and the last 32 KiB of
//!   output as the dictionary (kept deflated in memory and on disk; a 32 KiB window of tar
//!   data takes a few KiB). Points are about `span` bytes of output apart, so one read
//!   decompresses at most about `span` bytes before its data.
//! - **zstd**: a seek point at the start of a frame (every frame about `span` apart).
//!   Random access when the file has several frames (`pzstd` makes one frame per chunk);
//!   `zstd`, `zstd -T0`, `zstd -B` and `zstd --long` all make a single frame, which is read
//!   sequentially.
//! - **xz**: a seek point at the start of a block, from the xz index at the end of each
//!   stream. Random access when the file has several blocks (`xz -T0` on input larger than
//!   a block, `xz --block-size=`); plain single-threaded `xz` makes one block.
//! - **bzip2, lz4, lzma, lzip, compress (`.Z`), lzop**: sequential only ([`seq`]): one
//!   point at the start. Bytes after the last stream that do not start another are
//!   trailing garbage, not an error: [`Indexing::trailing_garbage`] says where.
//!
//! Sequential files still work: reads are served by live decompressors that move forward,
//! so reading members in archive order costs one pass; only going backwards restarts from
//! the start. [`SeekIndex::advice`] says so in one line, with what to recompress with.
//!
//! Everything here treats its input as hostile: a damaged or truncated compressed file is
//! an error from [`Indexing`] (its `read` or [`Indexing::finish`]) naming what is wrong and
//! where, and a damaged or lying serialised index is an error from [`SeekIndex::from_bytes`]
//! or, at worst, from a later [`Compressed::read_at`]; never a panic.
//!
//! # Example
//!
//! ```no_run
//! use std::io::Read;
//! use ferry_seek::{detect, Compressed, Indexing, SeekIndex, DEFAULT_SPAN};
//!
//! # fn main() -> std::io::Result<()> {
//! let mut file = std::fs::File::open("archive.tar.gz")?;
//! let mut head = [0u8; 8];
//! let n = file.read(&mut head)?;
//! let codec = detect(&head[..n]).expect("a compressed file");
//! let file = std::fs::File::open("archive.tar.gz")?;
//! // Read it once (a tar reader would sit on top of this), recording seek points.
//! let mut indexing = Indexing::new(file, codec, DEFAULT_SPAN)?;
//! std::io::copy(&mut indexing, &mut std::io::sink())?;
//! let index: SeekIndex = indexing.finish()?;
//! // Keep `index.to_bytes()` on disk; later, read anywhere.
//! let archive = Compressed::new(std::fs::File::open("archive.tar.gz")?, index);
//! let mut buf = vec![0u8; 65536];
//! let n = archive.read_at(&mut buf, 1 << 20)?;
//! # let _ = n; Ok(()) }
//! ```
#![deny(missing_docs)]

mod access;
mod frame_read;
mod frames;
mod gzip;
pub mod gzip_members;
mod index;
mod indexing;
mod input;
pub mod seekable;
pub mod seq;
mod xz;
mod zstd;

pub use access::{Compressed, POOL};
pub use frame_read::STREAMS;
pub use frames::{Frames, CACHE_BYTES};
pub use index::{SeekIndex, RANDOM_ACCESS_GAP};
pub use indexing::Indexing;
pub use seekable::{seek_table, FrameFormat, SeekableWriter};
pub use seq::{stream_decoder, SeqDecoder};

/// A good default distance between seek points: 4 MiB of output. Measured here on the
/// first 1.4 GB of a tar of /usr/lib and /usr/share (`examples/measure.rs`): pigz -6 gives
/// 350 points and a 4.7 MB index (each point's 32 KiB window deflates to about 13 KiB of
/// that mostly binary data), built in 5.7 s; a random 128 KiB read then decompresses 2 MiB
/// on average (at most about 4 MiB) and takes about 6 ms. pzstd -3 gives 175 points
/// (pzstd's ~8 MiB frames), xz -1 -T2 234 points, both indexes under 8 KB. Pass 8 MiB to
/// halve a gzip index at twice the cost per read.
pub const DEFAULT_SPAN: u64 = 4 << 20;

/// The smallest span [`Indexing::new`] accepts (64 KiB): closer points would make the
/// index larger than what they save.
pub const MIN_SPAN: u64 = 64 << 10;

/// A compression format this crate reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// gzip (RFC 1952), one member or several concatenated.
    Gzip,
    /// Zstandard, one frame or several (skippable frames are skipped).
    Zstd,
    /// xz, one stream or several, with stream padding.
    Xz,
    /// bzip2, one stream or several.
    Bzip2,
    /// lz4: frames, skippable frames and the legacy format, one or several.
    Lz4,
    /// lzma: the `lzma_alone` format of LZMA Utils (`.lzma`, `.tlz` of that kind).
    Lzma,
    /// lzip, one member or several.
    Lzip,
    /// compress (`.Z`): LZW.
    Compress,
    /// lzop, one member or several.
    Lzop,
}

impl Codec {
    /// The codec's usual name, as in messages: `gzip`, `zstd`, `xz`, `bzip2`, `lz4`,
    /// `lzma`, `lzip`, `compress`, `lzop`.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Gzip => "gzip",
            Codec::Zstd => "zstd",
            Codec::Xz => "xz",
            Codec::Bzip2 => "bzip2",
            Codec::Lz4 => "lz4",
            Codec::Lzma => "lzma",
            Codec::Lzip => "lzip",
            Codec::Compress => "compress",
            Codec::Lzop => "lzop",
        }
    }

    /// The byte that stands for the codec in a seek index (1 gzip, 2 zstd, 3 xz, 4 bzip2,
    /// 5 lz4, 6 lzma, 7 lzip, 8 compress, 9 lzop).
    pub fn to_byte(self) -> u8 {
        Self::ALL
            .iter()
            .position(|&c| c == self)
            .map_or(0, |i| i as u8 + 1)
    }

    fn from_byte(b: u8) -> Option<Codec> {
        Self::ALL.get(usize::from(b).checked_sub(1)?).copied()
    }

    /// Every codec, in the order of their bytes in a seek index.
    pub const ALL: [Codec; 9] = [
        Codec::Gzip,
        Codec::Zstd,
        Codec::Xz,
        Codec::Bzip2,
        Codec::Lz4,
        Codec::Lzma,
        Codec::Lzip,
        Codec::Compress,
        Codec::Lzop,
    ];

    /// Whether files of this codec have only one seek point, their start (all but gzip,
    /// zstd and xz), and are read by [`SeqDecoder`].
    pub fn is_sequential(self) -> bool {
        !matches!(self, Codec::Gzip | Codec::Zstd | Codec::Xz)
    }

    /// The command that decompresses this codec to standard output.
    pub fn command(self) -> &'static str {
        match self {
            Codec::Gzip => "gzip -dc",
            Codec::Zstd => "zstd -dc",
            Codec::Xz => "xz -dc",
            Codec::Bzip2 => "bzip2 -dc",
            Codec::Lz4 => "lz4 -dc",
            Codec::Lzma => "xz --format=lzma -dc",
            Codec::Lzip => "lzip -dc",
            Codec::Compress => "uncompress -c",
            Codec::Lzop => "lzop -dc",
        }
    }
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Bytes after `codec`'s last stream, which start at compressed offset `at`, as every
/// reader names them (unpack's warning or error, the mount's and index's warning).
pub fn trailing_garbage_said(codec: Codec, at: u64) -> String {
    format!("trailing garbage after the {codec} data, at compressed offset {at}")
}

/// Which compression a file's first bytes name (`None`: not compressed, or unknown).
///
/// gzip is `1f 8b 08`, zstd `28 b5 2f fd` or a skippable frame `5? 2a 4d 18` (`pzstd`
/// output starts with one), xz `fd 37 7a 58 5a 00`, bzip2 `BZh` and a
/// block size digit `1`-`9`, lz4 `04 22 4d 18` (a frame) or `02 21 4c 18` (the legacy
/// format), lzip `LZIP`, compress `1f 9d`, lzop `89 4c 5a 4f 00 0d 0a 1a 0a` (its first
/// 6 bytes are enough), and lzma, which has no magic, as bsdtar tells it: a properties
/// byte of at most 224 and a dictionary size that LZMA Utils or xz write (see
/// [`is_lzma_alone`]). Give it at least the first 6 bytes (13 for lzma's fullest test);
/// fewer can only match the shorter magics.
pub fn detect(head: &[u8]) -> Option<Codec> {
    if head.starts_with(&[0x1f, 0x8b, 0x08]) {
        Some(Codec::Gzip)
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd])
        || (head.len() >= 4 && head[0] & 0xf0 == 0x50 && head[1..4] == [0x2a, 0x4d, 0x18])
    {
        Some(Codec::Zstd)
    } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
        Some(Codec::Xz)
    } else if head.len() >= 4 && head.starts_with(b"BZh") && (b'1'..=b'9').contains(&head[3]) {
        Some(Codec::Bzip2)
    } else {
        detect_sequential(head)
    }
}

/// The sequential codecs' magics; lzma last, as the weakest test.
fn detect_sequential(head: &[u8]) -> Option<Codec> {
    const LZOP: [u8; 9] = [0x89, b'L', b'Z', b'O', 0x00, 0x0D, 0x0A, 0x1A, 0x0A];
    if head.len() >= 4 && seq::starts_lz4(head) {
        Some(Codec::Lz4)
    } else if head.starts_with(b"LZIP") {
        Some(Codec::Lzip)
    } else if head.starts_with(&[0x1f, 0x9d]) {
        Some(Codec::Compress)
    } else if head.len() >= 6 && LZOP.starts_with(&head[..head.len().min(9)]) {
        Some(Codec::Lzop)
    } else if is_lzma_alone(head) {
        Some(Codec::Lzma)
    } else {
        None
    }
}

/// Whether `head` starts as an `lzma_alone` file does, by libarchive's test: the
/// properties byte (lc + lp * 9 + pb * 45) at most 224, the dictionary size (bytes 1-4)
/// a power of two from 4 KiB to 128 MiB as LZMA Utils write, or a multiple of 1 MiB from
/// 3 to 63 MiB (xz lowers its dictionary so when memory is short) with the usual
/// properties 0x5d or 0x5e and an unknown size (bytes 5-12 all ones). Needs 5 bytes.
pub fn is_lzma_alone(head: &[u8]) -> bool {
    let (Some(&props), Some(d)) = (head.first(), head.get(1..5)) else {
        return false;
    };
    let dict = u32::from_le_bytes([d[0], d[1], d[2], d[3]]);
    if props > 224 {
        return false;
    }
    if dict.is_power_of_two() && (1 << 12..=1 << 27).contains(&dict) {
        return true;
    }
    let unknown_size = head
        .get(5..13)
        .is_some_and(|s| s.iter().all(|&b| b == 0xff));
    (props == 0x5d || props == 0x5e)
        && unknown_size
        && (0x0030_0000..=0x03F0_0000).contains(&dict)
        && dict & 0xF_FFFF == 0
}

/// What went wrong reading a compressed file or a seek index.
#[derive(Debug, thiserror::Error)]
pub enum SeekError {
    /// The compressed data is damaged, truncated or not what its codec says.
    #[error("{codec} data: {what}")]
    Corrupt {
        /// The codec being decoded.
        codec: Codec,
        /// What is wrong and where (compressed offsets are bytes from the file's start).
        what: String,
    },
    /// A serialised seek index is damaged, truncated, from another version, or
    /// inconsistent with itself.
    #[error("seek index: {0}")]
    BadIndex(String),
    /// The index does not belong to this file (its recorded size differs).
    #[error("seek index is for a {codec} file of {expected} bytes, this one has {actual}")]
    WrongFile {
        /// The codec the index is for.
        codec: Codec,
        /// The compressed size the index was made from.
        expected: u64,
        /// The size of the file given.
        actual: u64,
    },
    /// Reading the file failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl From<SeekError> for std::io::Error {
    fn from(e: SeekError) -> std::io::Error {
        match e {
            SeekError::Io(e) => e,
            other => std::io::Error::new(std::io::ErrorKind::InvalidData, other),
        }
    }
}

/// Shorthand for a [`SeekError::Corrupt`] as an `io::Error`.
fn corrupt(codec: Codec, what: impl Into<String>) -> std::io::Error {
    SeekError::Corrupt {
        codec,
        what: what.into(),
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_the_four_magics_and_nothing_else() {
        assert_eq!(detect(&[0x1f, 0x8b, 0x08, 0]), Some(Codec::Gzip));
        assert_eq!(detect(&[0x28, 0xb5, 0x2f, 0xfd]), Some(Codec::Zstd));
        assert_eq!(detect(b"\xfd7zXZ\x00\x00"), Some(Codec::Xz));
        assert_eq!(detect(&[0x50, 0x2a, 0x4d, 0x18]), Some(Codec::Zstd));
        assert_eq!(detect(&[0x5f, 0x2a, 0x4d, 0x18]), Some(Codec::Zstd));
        assert_eq!(detect(&[0x60, 0x2a, 0x4d, 0x18]), None);
        assert_eq!(detect(b"BZh9"), Some(Codec::Bzip2));
        assert_eq!(detect(b"BZh0"), None);
        assert_eq!(detect(b"BZh"), None);
        assert_eq!(detect(&[0x1f, 0x8b]), None);
        assert_eq!(detect(b""), None);
        assert_eq!(detect(b"ustar\0"), None);
    }
}
