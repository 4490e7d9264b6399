//! `ferry pack` to a name ending in `.xz`, `.bz2` or `.lz4` (and their `.txz`, `.tbz2`
//! kin): the archive written as one stream of that compression, which every tool of it
//! reads. xz is written by liblzma's multithreaded encoder in independent blocks of
//! [`XZ_BLOCK`] bytes of tar, which the xz index at its end lists, so `mount` and `cat`
//! read it at random as they read zstd frames; bzip2 and lz4 (a frame with its content
//! checksum) are plain streams, read in order.

use std::io::{self, Write};

/// The tar bytes in one xz block: a read at random decompresses at most this much
/// before its data.
pub const XZ_BLOCK: u64 = 8 << 20;
/// xz's default preset, as `xz` and `tar -J` use.
pub const XZ_LEVEL: u32 = 6;
/// bzip2's default block size, as `bzip2` and `tar -j` use.
pub const BZIP2_LEVEL: u32 = 9;

/// A compression written as one stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plain {
    /// xz in blocks, at a preset 0-9.
    Xz(u32),
    /// bzip2 at a block size 1-9.
    Bzip2(u32),
    /// An lz4 frame.
    Lz4,
}

/// The encoder of a [`Plain`] compression over `W`.
pub enum PlainWriter<W: Write> {
    Xz(liblzma::write::XzEncoder<W>),
    Bzip2(bzip2::write::BzEncoder<W>),
    Lz4(lz4_flex::frame::FrameEncoder<W>),
}

impl<W: Write> PlainWriter<W> {
    /// Compresses into `out` as `plain` says, xz with a thread a core.
    pub fn new(out: W, plain: Plain) -> io::Result<Self> {
        Ok(match plain {
            Plain::Xz(level) => {
                let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
                let stream = liblzma::stream::MtStreamBuilder::new()
                    .threads(u32::try_from(threads).unwrap_or(2))
                    .block_size(XZ_BLOCK)
                    .preset(level)
                    .check(liblzma::stream::Check::Crc64)
                    .encoder()
                    .map_err(io::Error::other)?;
                PlainWriter::Xz(liblzma::write::XzEncoder::new_stream(out, stream))
            }
            Plain::Bzip2(level) => PlainWriter::Bzip2(bzip2::write::BzEncoder::new(
                out,
                bzip2::Compression::new(level),
            )),
            Plain::Lz4 => {
                let info = lz4_flex::frame::FrameInfo::new()
                    .block_size(lz4_flex::frame::BlockSize::Max4MB)
                    .content_checksum(true);
                PlainWriter::Lz4(lz4_flex::frame::FrameEncoder::with_frame_info(info, out))
            }
        })
    }

    /// Ends the stream and flushes what is under it.
    pub fn finish(self) -> io::Result<W> {
        let mut out = match self {
            PlainWriter::Xz(w) => w.finish()?,
            PlainWriter::Bzip2(w) => w.finish()?,
            PlainWriter::Lz4(w) => w.finish().map_err(io::Error::other)?,
        };
        out.flush()?;
        Ok(out)
    }
}

impl<W: Write> Write for PlainWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            PlainWriter::Xz(w) => w.write(buf),
            PlainWriter::Bzip2(w) => w.write(buf),
            PlainWriter::Lz4(w) => w.write(buf),
        }
    }

    /// Nothing: the stream has no frames to end (xz's blocks are cut by size).
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
