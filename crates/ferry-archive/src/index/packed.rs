//! An index stored packed: the bytes of a version-5 index (entries and tree table) in
//! independent zstd frames of 64 KiB each, so that a small file's archive is not
//! mostly index (about 296 bytes a member plain, about 50 packed) and a reader still
//! reads one part of it without the rest.
//!
//! After the tar data, a packed archive holds
//!
//! ```text
//! marker         a zstd skippable frame holding "FERRYZIX" (MARKER)
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

use super::{bad, Footer, IndexError, FOOTER_LEN};
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
/// What a packed index starts with: a zstd skippable frame (RFC 8878: magic
/// 0x184D2A5E, length 8) holding "FERRYZIX", so a reader of a stream tells it from any
/// other zstd data after a tar, and a zstd decoder skips it.
pub const MARKER: [u8; 16] = *b"\x5e\x2a\x4d\x18\x08\x00\x00\x00FERRYZIX";
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
        let mut out = out;
        out(&MARKER)?;
        Ok(Packer {
            out,
            pending: Vec::with_capacity(FRAME),
            sizes: Vec::new(),
            compressor,
            packed: MARKER.len() as u64,
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
    /// What `logical_footer` says, checked.
    logical: Footer,
}

impl PackedIndex {
    /// Opens the packed index of `file`, whose own footer (version [`PACKED_VERSION`])
    /// is `physical`; `shift` is subtracted from the archive's offsets to find bytes in
    /// `file` (0 for the archive itself; its `tar_end` for a file holding what follows
    /// the tar data, as a stream's tail is spooled).
    pub fn open(file: &File, physical: &Footer, shift: u64) -> Result<PackedIndex, IndexError> {
        let read = |buf: &mut [u8], off: u64| {
            file.read_exact_at(buf, off)
                .map_err(|e| bad(format!("packed index: {e}")))
        };
        let (tar_end, len) = (physical.tar_end, physical.index_len);
        let at = physical
            .index_offset
            .checked_sub(shift)
            .ok_or_else(|| bad("packed index before its file"))?;
        let marker_len = MARKER.len() as u64;
        if len < marker_len + TRAILER_LEN + FOOTER_LEN {
            return Err(bad("packed index shorter than its trailer"));
        }
        let mut marker = [0u8; MARKER.len()];
        read(&mut marker, at)?;
        if marker != MARKER {
            return Err(bad("packed index does not start with its marker"));
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
        // The index it stands for is no longer than the tar data can need (see
        // `read::tail`): a few bytes of frames claiming gigabytes are refused here.
        let most = tar_end.saturating_mul(3).saturating_add(super::TAR_RECORD);
        if frame != FRAME as u64 || index_len > most {
            return Err(bad("packed index larger than its tar data can need"));
        }
        let room = len - marker_len - TRAILER_LEN - FOOTER_LEN;
        let table_len = count
            .checked_mul(4)
            .filter(|&t| t <= room)
            .ok_or_else(|| bad("packed index table larger than the index"))?;
        if count != index_len.div_ceil(FRAME as u64) {
            return Err(bad("packed index frame count does not fit its length"));
        }
        let mut table = vec![0u8; (table_len + FOOTER_LEN) as usize];
        let table_at = at + marker_len + room - table_len;
        read(&mut table, table_at)?;
        if xxh3_64(&table) != table_sum {
            return Err(bad("packed index table checksum mismatch"));
        }
        let mut logical_footer = [0u8; FOOTER_LEN as usize];
        logical_footer.copy_from_slice(&table[table_len as usize..]);
        // The footer inside says what the one outside says of the tar data and index.
        let logical = Footer::parse(&logical_footer, logical_len)?
            .ok_or_else(|| bad("packed index: no footer inside"))?;
        let agrees = logical.tar_end == tar_end
            && logical.index_offset == tar_end
            && logical.index_len == index_len
            && logical.entries == physical.entries
            && logical.version >= super::TIMES_IN_INDEX_SINCE
            && logical.hash_matches(physical.index_hash);
        if !agrees {
            return Err(bad(
                "packed index: the footer inside disagrees with the archive's",
            ));
        }
        let mut frames = Vec::new();
        let (mut inp, mut out) = (at + marker_len, 0u64);
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
            inp = inp.saturating_add(u64::from(compressed));
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
        Ok(PackedIndex {
            frames: Frames::zstd_frames(handle, frames, KEPT),
            tar_end,
            index_len,
            logical_len,
            logical_footer,
            logical,
        })
    }

    /// The footer of the plain archive this stands for (the index's place, version,
    /// entry count and checksum), checked against the archive's own.
    pub fn footer(&self) -> Footer {
        self.logical
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
        let mut done = 0;
        while done < buf.len() {
            let pos = offset + done as u64;
            let rest = &mut buf[done..];
            let n = if pos < index_end {
                let n = rest.len().min((index_end - pos) as usize);
                self.frames
                    .read_at(&mut rest[..n], pos - self.tar_end)
                    .map_err(|e| io::Error::new(e.kind(), format!("packed index: {e}")))?
            } else if pos < footer_at {
                let n = rest.len().min((footer_at - pos) as usize);
                rest[..n].fill(0);
                n
            } else if pos < self.logical_len {
                let from = (pos - footer_at) as usize;
                let n = rest.len().min(FOOTER_LEN as usize - from);
                rest[..n].copy_from_slice(&self.logical_footer[from..from + n]);
                n
            } else {
                0
            };
            if n == 0 {
                break;
            }
            done += n;
        }
        Ok(done)
    }
}
