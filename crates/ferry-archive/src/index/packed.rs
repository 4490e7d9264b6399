//! An index stored packed: the bytes of a version-5 index (entries and tree table) in
//! independent zstd frames of 64 KiB each, so that a small file's archive is not
//! mostly index (about 296 bytes a member plain, about 50 packed) and a reader still
//! reads one part of it without the rest.
//!
//! After the tar data, a packed archive holds
//!
//! ```text
//! frames         zstd frames, each of FRAME bytes of the index but the last
//! sizes          u32 compressed size of each frame
//! logical footer the 64-byte footer the index would have stored plain
//! trailer        "FERRYZIX" u64 frame count  u64 index length  u64 logical length
//!                u64 frame size  u64 xxh3-64 of sizes and logical footer  u64 zero
//!                u64 xxh3-64 of the trailer's first 56 bytes
//! zeros, footer  as any archive's, the footer's version PACKED_VERSION, its index
//!                the frames to the trailer, its checksum the index's (unpacked)
//! ```
//!
//! A reader sees the archive as it would be stored plain ([`PackedIndex::read_at`]):
//! the tar data, the index, zeros up to the logical length and the logical footer, so
//! everything that reads an index reads this one unchanged. Every size in the trailer
//! and table is checked against the others and the bytes there before anything is
//! allocated; a frame that does not decompress to its size is an error naming it.

use super::{bad, IndexError, FOOTER_LEN};
use ferry_seek::seekable::Frame;
use ferry_seek::Frames;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use xxhash_rust::xxh3::xxh3_64;

/// The footer version of an archive whose index is packed.
pub const PACKED_VERSION: u32 = 6;
/// Bytes of the index in each frame.
const FRAME: usize = 64 << 10;
const TRAILER_MAGIC: &[u8; 8] = b"FERRYZIX";
const TRAILER_LEN: u64 = 64;
/// zstd's level for the index: its fastest gives 5.8x on small files' entries.
const LEVEL: i32 = 1;
/// Decompressed frames a reader keeps (2 MiB).
const KEPT: u64 = 32 * FRAME as u64;

/// Compresses an index as it is written, frame by frame, to `out`.
pub(crate) struct Packer<F: FnMut(&[u8]) -> io::Result<()>> {
    out: F,
    pending: Vec<u8>,
    sizes: Vec<u32>,
    compressor: zstd::bulk::Compressor<'static>,
    packed: u64,
    len: u64,
}

impl<F: FnMut(&[u8]) -> io::Result<()>> Packer<F> {
    pub(crate) fn new(out: F) -> io::Result<Self> {
        let mut compressor = zstd::bulk::Compressor::new(LEVEL)?;
        compressor.include_checksum(true)?;
        compressor.include_contentsize(true)?;
        Ok(Packer {
            out,
            pending: Vec::with_capacity(FRAME),
            sizes: Vec::new(),
            compressor,
            packed: 0,
            len: 0,
        })
    }

    /// Takes the next bytes of the index.
    pub(crate) fn write(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        self.len += bytes.len() as u64;
        while !bytes.is_empty() {
            let take = (FRAME - self.pending.len()).min(bytes.len());
            self.pending.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.pending.len() == FRAME {
                self.frame()?;
            }
        }
        Ok(())
    }

    fn frame(&mut self) -> io::Result<()> {
        let packed = self.compressor.compress(&self.pending)?;
        (self.out)(&packed)?;
        self.sizes.push(packed.len() as u32);
        self.packed += packed.len() as u64;
        self.pending.clear();
        Ok(())
    }

    /// Ends the frames and writes the table, `logical_footer` and the trailer, for a
    /// plain archive of `logical_len` bytes; returns the bytes written in all and the
    /// index's length.
    pub(crate) fn finish(
        mut self,
        logical_footer: &[u8],
        logical_len: u64,
    ) -> io::Result<(u64, u64)> {
        if !self.pending.is_empty() {
            self.frame()?;
        }
        let mut table = Vec::with_capacity(self.sizes.len() * 4 + 128);
        for s in &self.sizes {
            table.extend_from_slice(&s.to_le_bytes());
        }
        table.extend_from_slice(logical_footer);
        let mut trailer = Vec::with_capacity(TRAILER_LEN as usize);
        trailer.extend_from_slice(TRAILER_MAGIC);
        let words = [
            self.sizes.len() as u64,
            self.len,
            logical_len,
            FRAME as u64,
            xxh3_64(&table),
            0,
        ];
        for w in words {
            trailer.extend_from_slice(&w.to_le_bytes());
        }
        let sum = xxh3_64(&trailer);
        trailer.extend_from_slice(&sum.to_le_bytes());
        table.extend_from_slice(&trailer);
        (self.out)(&table)?;
        Ok((self.packed + table.len() as u64, self.len))
    }
}

/// A packed index opened: the archive as it would be stored plain.
pub struct PackedIndex {
    frames: Frames,
    tar_end: u64,
    index_len: u64,
    logical_len: u64,
    logical_footer: [u8; FOOTER_LEN as usize],
}

impl PackedIndex {
    /// Opens the packed index of `file`, whose footer (version [`PACKED_VERSION`])
    /// places it at `at`, `len` bytes long, after `tar_end` bytes of tar data.
    pub fn open(
        file: &File,
        tar_end: u64,
        (at, len): (u64, u64),
    ) -> Result<PackedIndex, IndexError> {
        let read = |buf: &mut [u8], off: u64| {
            file.read_exact_at(buf, off)
                .map_err(|e| bad(format!("packed index: {e}")))
        };
        if len < TRAILER_LEN + FOOTER_LEN {
            return Err(bad("packed index shorter than its trailer"));
        }
        let mut trailer = [0u8; TRAILER_LEN as usize];
        read(&mut trailer, at + len - TRAILER_LEN)?;
        let word = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&trailer[8 + i * 8..16 + i * 8]);
            u64::from_le_bytes(b)
        };
        if &trailer[..8] != TRAILER_MAGIC || xxh3_64(&trailer[..56]) != word(6) {
            return Err(bad("packed index trailer damaged"));
        }
        let (count, index_len, logical_len, frame, table_sum) =
            (word(0), word(1), word(2), word(3), word(4));
        let room = len - TRAILER_LEN - FOOTER_LEN;
        let table_len = count
            .checked_mul(4)
            .filter(|&t| t <= room && frame == FRAME as u64)
            .ok_or_else(|| bad("packed index table larger than the index"))?;
        if count != index_len.div_ceil(FRAME as u64) {
            return Err(bad("packed index frame count does not fit its length"));
        }
        let expected_end = tar_end
            .checked_add(index_len)
            .and_then(|e| e.checked_add(FOOTER_LEN))
            .ok_or_else(|| bad("packed index length overflows"))?;
        if logical_len < expected_end || logical_len - expected_end >= super::TAR_RECORD {
            return Err(bad("packed index logical length out of place"));
        }
        let mut table = vec![0u8; (table_len + FOOTER_LEN) as usize];
        let table_at = at + room - table_len;
        read(&mut table, table_at)?;
        if xxh3_64(&table) != table_sum {
            return Err(bad("packed index table checksum mismatch"));
        }
        let mut frames = Vec::with_capacity(count as usize);
        let (mut inp, mut out) = (at, 0u64);
        for (i, size) in table[..table_len as usize].chunks_exact(4).enumerate() {
            let compressed = u32::from_le_bytes(size.try_into().unwrap_or_default());
            let decompressed = (index_len - out).min(FRAME as u64) as u32;
            if compressed == 0 {
                return Err(bad(format!("packed index frame {i} is empty")));
            }
            frames.push(Frame {
                inp,
                compressed,
                out,
                decompressed,
            });
            inp += u64::from(compressed);
            out += u64::from(decompressed);
        }
        if inp != table_at {
            return Err(bad(
                "packed index frames do not fill the space before their table",
            ));
        }
        let handle = file
            .try_clone()
            .map_err(|e| bad(format!("packed index: {e}")))?;
        let mut logical_footer = [0u8; FOOTER_LEN as usize];
        logical_footer.copy_from_slice(&table[table_len as usize..]);
        Ok(PackedIndex {
            frames: Frames::zstd_frames(handle, frames, KEPT),
            tar_end,
            index_len,
            logical_len,
            logical_footer,
        })
    }

    /// Where the tar data ends and the index begins.
    pub fn tar_end(&self) -> u64 {
        self.tar_end
    }

    /// The length of the archive as it would be stored plain.
    pub fn logical_len(&self) -> u64 {
        self.logical_len
    }

    /// Reads the plain archive's bytes at `offset` past the tar data (`offset` at
    /// least `tar_end`): the index, then zeros, then the footer; short only at the end.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if offset < self.tar_end {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a packed index holds nothing before the end of the tar data",
            ));
        }
        let index_end = self.tar_end + self.index_len;
        let footer_at = self.logical_len - FOOTER_LEN;
        if offset < index_end {
            let n = buf.len().min((index_end - offset) as usize);
            return self.frames.read_at(&mut buf[..n], offset - self.tar_end);
        }
        if offset < footer_at {
            let n = buf.len().min((footer_at - offset) as usize);
            buf[..n].fill(0);
            return Ok(n);
        }
        let from = (offset - footer_at).min(FOOTER_LEN) as usize;
        let n = buf.len().min(FOOTER_LEN as usize - from);
        buf[..n].copy_from_slice(&self.logical_footer[from..from + n]);
        Ok(n)
    }
}
