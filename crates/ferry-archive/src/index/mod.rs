//! The index after the tar data: every entry with its metadata, where its data lies and
//! its content hash, so `ls`, `cat` and `mount` need not read the archive.
//!
//! Layout, after the tar end-of-archive blocks (all integers little-endian):
//!
//! ```text
//! index:  "FERRYIDX" u32 version u64 entry-count, then per entry:
//!         u8 kind, u32 mode, u32 uid, u32 gid, i64+u32 mtime, i64+u32 atime,
//!         u64 size, u64 header offset, u64 data offset, u64 stored bytes, u64 rdev,
//!         u8 has-hash, u128 hash, bytes path, bytes link,
//!         u32 run count + (u64 offset, u64 length) per run,
//!         u32 xattr count + (bytes name, bytes value) per xattr
//!         ("bytes" = u32 length + the bytes)
//! zeros:  up to the footer, so the archive is a whole number of 512-byte blocks
//! footer: the last 64 bytes: "FERRYEND" u64 index offset, u64 index length,
//!         u64 tar end (first byte after the end-of-archive blocks), u64 entry count,
//!         u64 xxh3-64 of the index, 8 reserved zero bytes, u64 xxh3-64 of the
//!         footer's first 56 bytes
//! ```
//!
//! Reading never trusts a number: every count and length is checked against what is
//! left, every offset against the tar data, before anything is allocated.

mod writer;

pub use writer::{HashSlot, IndexWriter, INDEX_MEMORY};

use crate::write::header::pad_block;
use std::fmt;
use xxhash_rust::xxh3::xxh3_64;

const INDEX_MAGIC: &[u8; 8] = b"FERRYIDX";
const FOOTER_MAGIC: &[u8; 8] = b"FERRYEND";
const VERSION: u32 = 1;
/// Size of the footer at the very end of an indexed archive.
pub const FOOTER_LEN: u64 = 64;
/// The largest index a reader loads (room for several million members): a footer may
/// not make a reader allocate what the archive's length alone would allow.
pub const MAX_INDEX_LEN: u64 = 1 << 30;

/// What an index entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Regular file.
    File = 0,
    /// Directory.
    Dir = 1,
    /// Symbolic link (`link` is the target).
    Symlink = 2,
    /// Another name for an earlier entry (`link` is its path).
    HardLink = 3,
    /// Named pipe.
    Fifo = 4,
    /// Character device.
    CharDevice = 5,
    /// Block device.
    BlockDevice = 6,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            0 => Kind::File,
            1 => Kind::Dir,
            2 => Kind::Symlink,
            3 => Kind::HardLink,
            4 => Kind::Fifo,
            5 => Kind::CharDevice,
            6 => Kind::BlockDevice,
            _ => return None,
        })
    }
}

/// One entry of the index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// Path inside the archive, relative, raw bytes.
    pub path: Vec<u8>,
    /// Kind.
    pub kind: Kind,
    /// Permission bits including setuid/setgid/sticky.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Modification time (seconds, nanoseconds).
    pub mtime: (i64, u32),
    /// Access time (seconds, nanoseconds).
    pub atime: (i64, u32),
    /// Logical size of a file.
    pub size: u64,
    /// Where the entry's first header block starts.
    pub header_offset: u64,
    /// Where its stored data starts (after a sparse map, if any).
    pub data_offset: u64,
    /// Bytes of data stored.
    pub stored: u64,
    /// Device number of a device.
    pub rdev: u64,
    /// xxh3-128 of the file's content, when it was computed.
    pub hash: Option<u128>,
    /// Symlink target or hardlink target path.
    pub link: Vec<u8>,
    /// For a sparse file, its data runs `(offset, length)`, stored one after another.
    pub runs: Vec<(u64, u64)>,
    /// Extended attributes.
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The index of an archive and where the tar data ends. It is kept encoded, as read or
/// built: an entry is decoded when asked for, so a reader holds about the index's own
/// size (a few dozen bytes beyond the path per member), not a decoded entry with its
/// allocations per member.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Index {
    /// The encoded index (as in the archive).
    bytes: Vec<u8>,
    /// Where each entry starts in `bytes`.
    starts: Vec<usize>,
    /// First byte after the tar end-of-archive blocks.
    pub tar_end: u64,
}

/// Why an index could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexError(pub String);

impl fmt::Display for IndexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad index: {}", self.0)
    }
}

impl std::error::Error for IndexError {}

fn bad(msg: impl Into<String>) -> IndexError {
    IndexError(msg.into())
}

/// The index's own header for `count` entries.
fn header(count: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(COUNT_AT + 8);
    out.extend_from_slice(INDEX_MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out
}

/// Where the entry count lies in an encoded index.
const COUNT_AT: usize = 12;

/// Where an entry's has-hash byte lies from its start: after the kind, mode, uid, gid,
/// two times, and five 64-bit numbers.
const HASH_AT: usize = 1 + 3 * 4 + 2 * 12 + 5 * 8;

/// The has-hash byte and the hash, as encoded.
fn encode_hash(hash: Option<u128>) -> [u8; 17] {
    let mut b = [0u8; 17];
    b[0] = u8::from(hash.is_some());
    b[1..].copy_from_slice(&hash.unwrap_or(0).to_le_bytes());
    b
}

/// Appends entry `e`, encoded, to `out`.
fn encode_entry(out: &mut Vec<u8>, e: &IndexEntry) {
    let start = out.len();
    out.push(e.kind as u8);
    for v in [e.mode, e.uid, e.gid] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for (s, ns) in [e.mtime, e.atime] {
        out.extend_from_slice(&s.to_le_bytes());
        out.extend_from_slice(&ns.to_le_bytes());
    }
    for v in [e.size, e.header_offset, e.data_offset, e.stored, e.rdev] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    debug_assert_eq!(out.len() - start, HASH_AT);
    out.extend_from_slice(&encode_hash(e.hash));
    put_bytes(out, &e.path);
    put_bytes(out, &e.link);
    out.extend_from_slice(&(e.runs.len() as u32).to_le_bytes());
    for (o, l) in &e.runs {
        out.extend_from_slice(&o.to_le_bytes());
        out.extend_from_slice(&l.to_le_bytes());
    }
    out.extend_from_slice(&(e.xattrs.len() as u32).to_le_bytes());
    for (n, v) in &e.xattrs {
        put_bytes(out, n);
        put_bytes(out, v);
    }
}

/// What follows an index of `index_len` bytes (`count` entries, hashing to
/// `index_hash`) that starts at `at`: zeros up to the footer, so the archive is a whole
/// number of 512-byte blocks, and the footer.
fn tail(at: u64, tar_end: u64, index_len: u64, count: u64, index_hash: u64) -> Vec<u8> {
    let end = (at + index_len + FOOTER_LEN).div_ceil(512) * 512;
    let mut out = vec![0u8; (end - at - index_len - FOOTER_LEN) as usize];
    let mut footer = Vec::with_capacity(FOOTER_LEN as usize);
    footer.extend_from_slice(FOOTER_MAGIC);
    for v in [at, index_len, tar_end, count, index_hash, 0] {
        footer.extend_from_slice(&v.to_le_bytes());
    }
    let footer_hash = xxh3_64(&footer);
    footer.extend_from_slice(&footer_hash.to_le_bytes());
    out.extend_from_slice(&footer);
    out
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

impl Index {
    /// An index of `entries`.
    pub fn new(entries: &[IndexEntry], tar_end: u64) -> Index {
        let mut bytes = header(entries.len() as u64);
        let starts = entries
            .iter()
            .map(|e| {
                let start = bytes.len();
                encode_entry(&mut bytes, e);
                start
            })
            .collect();
        Index {
            bytes,
            starts,
            tar_end,
        }
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Entry number `i` (in archive order), decoded; `None` past the end.
    pub fn get(&self, i: usize) -> Option<IndexEntry> {
        let pos = *self.starts.get(i)?;
        // Every entry was decoded and checked when the index was read or built.
        read_entry(&mut Cursor {
            buf: &self.bytes,
            pos,
        })
        .ok()
    }

    /// The entries in archive order, decoded one at a time.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = IndexEntry> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    /// Encodes the index, the zero padding and the footer, for an index starting at
    /// `at` (which must be `tar_end`).
    pub fn encode(&self, at: u64) -> Vec<u8> {
        let mut out = self.bytes.clone();
        let (len, count) = (out.len() as u64, self.starts.len() as u64);
        out.extend(tail(at, self.tar_end, len, count, xxh3_64(&self.bytes)));
        out
    }
}

/// Where the index lies, as read and checked from a footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// Offset of the index.
    pub index_offset: u64,
    /// Length of the index.
    pub index_len: u64,
    /// First byte after the tar data.
    pub tar_end: u64,
    /// Number of entries.
    pub entries: u64,
    index_hash: u64,
}

impl Footer {
    /// Reads the footer from the last [`FOOTER_LEN`] bytes of an archive of `file_len`
    /// bytes. `Ok(None)`: there is no ferry footer (a plain tar).
    pub fn parse(bytes: &[u8], file_len: u64) -> Result<Option<Footer>, IndexError> {
        if bytes.len() != FOOTER_LEN as usize || &bytes[..8] != FOOTER_MAGIC {
            return Ok(None);
        }
        let word = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[8 + i * 8..16 + i * 8]);
            u64::from_le_bytes(b)
        };
        if xxh3_64(&bytes[..56]) != word(6) {
            return Err(bad("footer checksum mismatch"));
        }
        let f = Footer {
            index_offset: word(0),
            index_len: word(1),
            tar_end: word(2),
            entries: word(3),
            index_hash: word(4),
        };
        let index_end = f
            .index_offset
            .checked_add(f.index_len)
            .ok_or_else(|| bad("index length overflows"))?;
        if f.tar_end > f.index_offset
            || index_end > file_len.saturating_sub(FOOTER_LEN)
            || f.tar_end < 1024
        {
            return Err(bad("footer places the index outside the archive"));
        }
        if f.index_len > MAX_INDEX_LEN {
            return Err(bad("index larger than a reader loads"));
        }
        Ok(Some(f))
    }

    /// Checks the index bytes this footer points at, decoding every entry once (each
    /// entry on its own, and all of them laid over the tar data), and keeps them as the
    /// index.
    pub fn decode(&self, bytes: Vec<u8>) -> Result<Index, IndexError> {
        if bytes.len() as u64 != self.index_len || xxh3_64(&bytes) != self.index_hash {
            return Err(bad("index checksum mismatch"));
        }
        let mut c = Cursor {
            buf: &bytes,
            pos: 0,
        };
        if c.take(8)? != INDEX_MAGIC {
            return Err(bad("no index magic"));
        }
        if c.u32()? != VERSION {
            return Err(bad("unknown index version"));
        }
        let count = c.u64()?;
        if count != self.entries {
            return Err(bad("entry count differs from the footer's"));
        }
        // Every entry takes at least 100 bytes: a count beyond that is a lie.
        if count > bytes.len() as u64 / 100 {
            return Err(bad("entry count larger than the index"));
        }
        let mut starts = Vec::with_capacity(count as usize);
        // Where the next entry's headers must start: the entries tile the tar data
        // exactly, as the tar stream does.
        let mut next = 0u64;
        for i in 0..count {
            starts.push(c.pos);
            let e = read_entry(&mut c).map_err(|e| bad(format!("entry {i}: {}", e.0)))?;
            check_entry(&e, self.tar_end).map_err(|e| bad(format!("entry {i}: {}", e.0)))?;
            if e.header_offset != next {
                return Err(bad(format!(
                    "entry at offset {} does not follow the one before (expected {next})",
                    e.header_offset
                )));
            }
            next = e
                .data_offset
                .checked_add(pad_block(e.stored))
                .ok_or_else(|| bad(format!("entry {i}: data range overflows")))?;
        }
        if c.pos != bytes.len() {
            return Err(bad("trailing bytes after the last entry"));
        }
        if next.saturating_add(1024) != self.tar_end {
            return Err(bad("entries do not end at the end-of-archive blocks"));
        }
        Ok(Index {
            bytes,
            starts,
            tar_end: self.tar_end,
        })
    }
}

/// A bounds-checked reader over the index bytes.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], IndexError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| bad("truncated"))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], IndexError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, IndexError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, IndexError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, IndexError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn time(&mut self) -> Result<(i64, u32), IndexError> {
        let s = i64::from_le_bytes(self.array()?);
        let ns = self.u32()?;
        if ns >= 1_000_000_000 {
            return Err(bad("nanoseconds out of range"));
        }
        Ok((s, ns))
    }
    fn bytes(&mut self) -> Result<Vec<u8>, IndexError> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
    /// A count of items of at least `min_size` bytes each, checked against what is left.
    fn count(&mut self, min_size: usize) -> Result<usize, IndexError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_size) > self.buf.len() - self.pos {
            return Err(bad("count larger than the index"));
        }
        Ok(n)
    }
}

fn read_entry(c: &mut Cursor<'_>) -> Result<IndexEntry, IndexError> {
    let kind = Kind::from_u8(c.u8()?).ok_or_else(|| bad("unknown kind"))?;
    let (mode, uid, gid) = (c.u32()?, c.u32()?, c.u32()?);
    let (mtime, atime) = (c.time()?, c.time()?);
    let (size, header_offset, data_offset, stored, rdev) =
        (c.u64()?, c.u64()?, c.u64()?, c.u64()?, c.u64()?);
    let has_hash = c.u8()?;
    let hash = u128::from_le_bytes(c.array()?);
    let path = c.bytes()?;
    let link = c.bytes()?;
    let nruns = c.count(16)?;
    let runs = (0..nruns)
        .map(|_| Ok((c.u64()?, c.u64()?)))
        .collect::<Result<Vec<_>, IndexError>>()?;
    let nx = c.count(8)?;
    let xattrs = (0..nx)
        .map(|_| Ok((c.bytes()?, c.bytes()?)))
        .collect::<Result<Vec<_>, IndexError>>()?;
    Ok(IndexEntry {
        path,
        kind,
        mode,
        uid,
        gid,
        mtime,
        atime,
        size,
        header_offset,
        data_offset,
        stored,
        rdev,
        hash: (has_hash != 0).then_some(hash),
        link,
        runs,
        xattrs,
    })
}

/// Checks one entry against itself and the tar data's extent.
fn check_entry(e: &IndexEntry, tar_end: u64) -> Result<(), IndexError> {
    if e.path.contains(&0) || e.link.contains(&0) {
        return Err(bad("NUL byte in a path"));
    }
    if e.mode > 0o7777 {
        return Err(bad("mode out of range"));
    }
    let data_end = e
        .data_offset
        .checked_add(e.stored)
        .ok_or_else(|| bad("data range overflows"))?;
    if e.header_offset.saturating_add(512) > e.data_offset || data_end > tar_end {
        return Err(bad("data lies outside the tar data"));
    }
    if e.kind != Kind::File && (e.stored != 0 || !e.runs.is_empty()) {
        return Err(bad("data given for an entry that is not a file"));
    }
    if e.runs.is_empty() {
        if e.kind == Kind::File && e.stored != e.size {
            return Err(bad("stored size differs from file size"));
        }
        return Ok(());
    }
    let mut end = 0u64;
    let mut total = 0u64;
    for &(o, l) in &e.runs {
        let run_end = o.checked_add(l).ok_or_else(|| bad("run overflows"))?;
        if o < end || run_end > e.size {
            return Err(bad("sparse runs overlap or pass the end of the file"));
        }
        end = run_end;
        total = total.checked_add(l).ok_or_else(|| bad("runs overflow"))?;
    }
    if total != e.stored {
        return Err(bad("sparse runs do not add up to the stored size"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn sample_entries() -> Vec<IndexEntry> {
        let file = IndexEntry {
            path: b"a/b\xff".to_vec(),
            kind: Kind::File,
            mode: 0o4755,
            uid: 1,
            gid: 2,
            mtime: (-5, 7),
            atime: (9, 999_999_999),
            size: 10_000,
            header_offset: 0,
            data_offset: 4096,
            stored: 3000,
            rdev: 0,
            hash: Some(42),
            link: Vec::new(),
            runs: vec![(0, 1000), (8000, 2000)],
            xattrs: vec![(b"user.k".to_vec(), b"\x00v".to_vec())],
        };
        let dir = IndexEntry {
            path: b"a".to_vec(),
            kind: Kind::Dir,
            stored: 0,
            size: 0,
            runs: vec![],
            header_offset: 7168, // right after the file's padded data
            data_offset: 9216,   // after 2 KiB of headers, ending the tar data at 10240
            hash: None,
            xattrs: vec![],
            ..file.clone()
        };
        vec![file, dir]
    }

    fn sample() -> Index {
        Index::new(&sample_entries(), 10240)
    }

    fn roundtrip(bytes: &[u8], at: u64) -> Result<Option<Index>, IndexError> {
        let len = at + bytes.len() as u64;
        let Some(f) = Footer::parse(&bytes[bytes.len() - 64..], len)? else {
            return Ok(None);
        };
        let start = (f.index_offset - at) as usize;
        f.decode(bytes[start..start + f.index_len as usize].to_vec())
            .map(Some)
    }

    #[test]
    fn encode_decode_roundtrip() {
        let idx = sample();
        let bytes = idx.encode(10240);
        assert_eq!((10240 + bytes.len()) % 512, 0);
        let read = roundtrip(&bytes, 10240).expect("valid").expect("indexed");
        assert_eq!(read, idx);
        assert_eq!(read.len(), 2);
        assert_eq!(read.iter().collect::<Vec<_>>(), sample_entries());
        assert_eq!(read.iter().next_back(), sample_entries().pop());
        assert_eq!(read.get(2), None);
    }

    #[test]
    fn every_corruption_is_caught() {
        let bytes = sample().encode(10240);
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x41;
            // Flipping padding bytes is harmless; anything else must be an error or no footer.
            if let Ok(Some(idx)) = roundtrip(&b, 10240) {
                assert_eq!(idx, sample(), "byte {i} changed the index silently");
            }
        }
    }

    #[test]
    fn a_huge_index_length_is_refused_before_allocating() {
        let mut bytes = sample().encode(10240);
        let n = bytes.len();
        let footer = &mut bytes[n - 64..];
        footer[16..24].copy_from_slice(&(MAX_INDEX_LEN + 1).to_le_bytes());
        let hash = xxh3_64(&footer[..56]);
        footer[56..64].copy_from_slice(&hash.to_le_bytes());
        let claimed_len = 10240 + MAX_INDEX_LEN * 2; // as a huge sparse file would be
        let err = Footer::parse(&bytes[n - 64..], claimed_len).expect_err("refused");
        assert!(err.0.contains("larger"), "{err}");
    }

    #[test]
    fn lying_entries_are_refused() {
        let lie = |change: fn(&mut IndexEntry)| {
            let mut entries = sample_entries();
            change(&mut entries[0]);
            roundtrip(&Index::new(&entries, 10240).encode(10240), 10240)
        };
        assert!(lie(|e| e.runs[1] = (500, 2000)).is_err()); // overlaps the first run
        assert!(lie(|e| e.data_offset = 9000).is_err()); // data would pass tar_end
    }

    #[test]
    fn entries_must_tile_the_tar_data() {
        let read = |entries: &[IndexEntry], tar_end| {
            roundtrip(&Index::new(entries, tar_end).encode(tar_end), tar_end)
        };
        assert!(read(&sample_entries(), 10240).is_ok());
        // A gap between the two entries.
        let mut gap = sample_entries();
        gap[1].header_offset += 512;
        let err = read(&gap, 10240).expect_err("a gap");
        assert!(err.0.contains("does not follow"), "{err}");
        // The entries end before the end-of-archive blocks.
        let err = read(&sample_entries(), 10752).expect_err("short");
        assert!(err.0.contains("end-of-archive"), "{err}");
    }
}
