//! Compressed archives: which compression an input's first bytes name (never its file
//! name), and a reader that undoes it. gzip, zstd, xz, bzip2, lz4, lzma (`lzma_alone`),
//! lzip, compress (`.Z`) and lzop are read, as bsdtar reads them (each also when several
//! streams follow one another, as `cat a.gz b.gz` makes). Bytes after the last stream
//! are trailing garbage: a warning, and, where GNU tar's decompressor fails on it
//! (gzip, zstd, xz, lzma, lzop), an error once the archive has been read. Decompression runs on
//! a thread of its own.

use crate::read_ahead::read_ahead;
use std::io::{self, BufReader, Read};

/// A compression ferry reads: what ferry-seek recognises (gzip, zstd with a frame or
/// a skippable frame first, as `pzstd` writes, xz, bzip2, lz4, lzma, lzip, compress,
/// lzop).
use ferry_seek::Codec as Compression;

/// How many first bytes to look at: a whole tar header block.
pub const HEAD_LEN: usize = ferry_archive::tar::BLOCK_SIZE as usize;

/// The compression `head` (an input's first bytes, up to [`HEAD_LEN`]) names: none if
/// it is a tar header (whatever its first bytes look like).
fn of(head: &[u8]) -> io::Result<Option<Compression>> {
    if ferry_archive::tar::starts_with_header(head) {
        return Ok(None);
    }
    Ok(ferry_seek::detect(head).filter(|&c| c != Compression::Bzip2 || is_bzip2(head)))
}

/// Whether `head`, which starts `BZh`, goes on as bzip2 does: a block size digit, then
/// a block's magic (the digits of pi) or the end's (those of the square root of pi).
fn is_bzip2(head: &[u8]) -> bool {
    matches!(head.get(3), Some(b'1'..=b'9'))
        && head.get(4..10).is_some_and(|m| {
            m == [0x31, 0x41, 0x59, 0x26, 0x53, 0x59] || m == [0x17, 0x72, 0x45, 0x38, 0x50, 0x90]
        })
}

/// Whether an input starting with `head` is compressed (an error for a compression
/// ferry does not read).
pub fn is_compressed(head: &[u8]) -> io::Result<bool> {
    of(head).map(|c| c.is_some())
}

/// `raw`, decompressed as its first bytes say; the decompression runs on a thread of
/// its own, ahead of the reader.
pub fn decompressed(mut raw: Box<dyn Read + Send>) -> io::Result<Box<dyn Read>> {
    // A pipe may hand over fewer bytes than asked: read the whole first block.
    let mut head = Vec::with_capacity(HEAD_LEN);
    (&mut raw).take(HEAD_LEN as u64).read_to_end(&mut head)?;
    let compression = of(&head)?;
    let buffered = BufReader::with_capacity(1 << 20, io::Cursor::new(head).chain(raw));
    let decoder: Box<dyn Read + Send> = match compression {
        None => return Ok(Box::new(buffered)),
        Some(codec) => Box::new(Trailing(
            ferry_seek::stream_decoder(codec, Box::new(buffered)),
            false,
        )),
    };
    Ok(Box::new(read_ahead(decoder)))
}

/// Reads `input` to its end, once the archive in it has ended. A compressed input's
/// checks come after all its data (gzip's CRC and length, zstd's and xz's checksums,
/// bzip2's stream CRC), so only reading on finds data damaged or cut short anywhere
/// in it; and a ferry archive's index comes there too, which its writer, at the other
/// end of a pipe, must be able to write.
pub fn read_to_end(input: &mut dyn Read) -> io::Result<()> {
    io::copy(input, &mut io::sink())
        .map(drop)
        .map_err(after_the_end)
}

/// A failure to read `input` after the archive's end, told as what it may mean.
pub fn after_the_end(e: io::Error) -> io::Error {
    if e.get_ref()
        .is_some_and(|inner| inner.is::<TrailingGarbage>())
    {
        // The compressed data before it was whole: nothing read before is in doubt.
        return io::Error::new(e.kind(), format!("after the end of the archive: {e}"));
    }
    io::Error::new(
        e.kind(),
        format!(
            "after the end of the archive: {e}; what was read before it may be damaged \
             too (a compressed input is checked only at its end)"
        ),
    )
}

/// A sequential decoder whose trailing garbage is told as GNU tar tells it: a warning,
/// and an error (after the archive, whose members are all read) where GNU tar's
/// decompressor fails on it: `gzip` (status 2, a warning of its own), `zstd`, `xz`, `xz
/// --format=lzma` and `lzop` do. (Whether GNU tar's own status shows `xz`'s failure is
/// a race: it stops reading at the archive's end, and an `xz` killed by the closed pipe
/// before it reaches the garbage is not counted; seen both ways on one archive.)
/// `bzip2` and `lzip` warn or say nothing and succeed, and lz4, which GNU tar 1.34 does
/// not read, is read as bsdtar does, which succeeds.
struct Trailing(ferry_seek::SeqDecoder, bool);

impl Read for Trailing {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.0.read(buf)?;
        let Some(at) = self.0.trailing_garbage().filter(|_| n == 0 && !self.1) else {
            return Ok(n);
        };
        self.1 = true;
        let codec = self.0.codec();
        let what = ferry_seek::trailing_garbage_said(codec, at);
        let warned = [Compression::Bzip2, Compression::Lzip, Compression::Lz4];
        if !warned.contains(&codec) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                TrailingGarbage(format!(
                    "{what} (the members before it were read; `{}` fails on it too, as GNU \
                     tar does)",
                    codec.command()
                )),
            ));
        }
        crate::report::to_stderr(format_args!("ferry: warning: {what}, ignored"));
        Ok(0)
    }
}

/// Trailing garbage that fails the command, as GNU tar's decompressor fails on it.
#[derive(Debug)]
struct TrailingGarbage(String);

impl std::fmt::Display for TrailingGarbage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TrailingGarbage {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_bytes_name_the_compression() {
        assert_eq!(of(&[0x1f, 0x8b, 8, 0]).unwrap(), Some(Compression::Gzip));
        assert_eq!(of(b"BZh91AY&SY").unwrap(), Some(Compression::Bzip2));
        assert_eq!(of(b"\xfd7zXZ\0").unwrap(), Some(Compression::Xz));
        // pzstd starts with a skippable frame.
        assert_eq!(
            of(b"\x50\x2a\x4d\x18\x04\0\0\0").unwrap(),
            Some(Compression::Zstd)
        );
        // Cut short, or only alike: not taken for compressed data.
        assert_eq!(of(b"\xfd7zX").unwrap(), None);
        assert_eq!(of(b"BZh9 and more").unwrap(), None);
        assert_eq!(of(b"./a\0\0\0").unwrap(), None);
        assert_eq!(of(b"").unwrap(), None);
        assert_eq!(of(b"LZIP\x01").unwrap(), Some(Compression::Lzip));
        assert_eq!(
            of(b"\x04\x22\x4d\x18\x64\x40").unwrap(),
            Some(Compression::Lz4)
        );
        assert_eq!(of(b"\x1f\x9d\x90").unwrap(), Some(Compression::Compress));
        assert_eq!(
            of(b"\x89LZO\0\r\n\x1a\n\x10").unwrap(),
            Some(Compression::Lzop)
        );
        assert_eq!(
            of(b"\x5d\0\0\x80\0\xff\xff\xff\xff\xff\xff\xff\xff").unwrap(),
            Some(Compression::Lzma)
        );
    }

    #[test]
    fn a_tar_header_is_tar_whatever_its_name_starts_with() {
        // A member named like lzip's magic, in a real header with its checksum.
        let mut block = [0u8; HEAD_LEN];
        block[..8].copy_from_slice(b"LZIPfile");
        block[100..108].copy_from_slice(b"0000644\0");
        block[124..136].copy_from_slice(b"00000000000\0");
        block[156] = b'0';
        block[148..156].fill(b' ');
        let sum: u32 = block.iter().map(|&b| u32::from(b)).sum();
        block[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        assert_eq!(of(&block).unwrap(), None);
        // The same bytes with a broken checksum are lzip's.
        block[148] = b'7';
        assert_eq!(of(&block).unwrap(), Some(Compression::Lzip));
    }
}
