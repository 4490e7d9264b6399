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
//!         u32 xattr count + (bytes name, bytes value) per xattr,
//!         bytes user name, bytes group name (empty: none; from version 2 on)
//!         ("bytes" = u32 length + the bytes)
//! zeros:  up to the footer, so the archive is a whole number of 10,240-byte records
//!         (GNU tar's; archives from before wrote whole 512-byte blocks, still read)
//! footer: the last 64 bytes: "FERRYEND" u64 index offset, u64 index length,
//!         u64 tar end (first byte after the end-of-archive blocks), u64 entry count,
//!         u64 xxh3-64 of the index, u64 index version (version 1 wrote 0 here),
//!         u64 xxh3-64 of the footer's first 56 bytes
//! ```
//!
//! Version 1 kept no owner names; it is still read, its entries without them.
//!
//! Reading never trusts a number: every count and length is checked against what is
//! left, every offset against the tar data, before anything is allocated.

pub mod packed;
mod read;
mod writer;

pub use read::Entries;
pub use writer::{HashSlot, IndexWriter, INDEX_MEMORY};

use std::fmt;
use std::io::Read;
use xxhash_rust::xxh3::xxh3_64;

pub(crate) const INDEX_MAGIC: &[u8; 8] = b"FERRYIDX";
pub(crate) const FOOTER_MAGIC: &[u8; 8] = b"FERRYEND";
/// The index version written.
const VERSION: u32 = 5;
/// The first version whose archives may leave a member's times to the index: where a
/// member has no pax header, its header gives the mtime's seconds alone, and the index
/// its nanoseconds and the atime (see `write::header`).
pub const TIMES_IN_INDEX_SINCE: u32 = 5;
/// The first version whose content hashes skip all-zero blocks past the first few
/// ([`ferry_core::content`]); before it, a hash is of every logical byte, which is the
/// same only for files of at most [`LEGACY_HASH_MAX`] bytes.
pub const SKIPPING_HASH_SINCE: u32 = 4;
/// The largest file whose hash in an index older than [`SKIPPING_HASH_SINCE`] is
/// checked: no bigger file can have more all-zero blocks than the hash feeds.
pub const LEGACY_HASH_MAX: u64 =
    ferry_core::content::ZERO_BLOCKS_HASHED * ferry_core::zero::BLOCK as u64;
/// The first version whose index ends with the tree table ([`crate::tree`]).
pub const TREE_SINCE: u32 = 3;
/// The oldest version read.
const OLDEST_VERSION: u32 = 1;
/// Size of the footer at the very end of an indexed archive.
pub const FOOTER_LEN: u64 = 64;
/// An archive file is a whole number of these: GNU tar's default record (20 blocks),
/// which GNU tar and bsdtar pad their own archives to. GNU tar 1.34 `--delete`
/// misplaces what it writes back after reading a last record cut short, losing members.
pub const TAR_RECORD: u64 = 10240;
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
    /// The owner's names as its tar header gives them; `None` in an index of version 1,
    /// which kept none (the header may still have them).
    pub names: Option<Names>,
}

/// The user and group names of an entry's owner, where the archive gives them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Names {
    /// The user's name.
    pub user: Option<Vec<u8>>,
    /// The group's name.
    pub group: Option<Vec<u8>>,
}

impl IndexEntry {
    /// A regular file's sparse map: `Some` for a file stored in runs, `None` for one
    /// stored whole. The map of a file that is all hole is empty: no runs, nothing
    /// stored, a size above zero (which a file stored whole cannot have).
    pub fn sparse_map(&self) -> Option<&[(u64, u64)]> {
        let sparse = !self.runs.is_empty() || self.stored != self.size;
        (self.kind == Kind::File && sparse).then_some(self.runs.as_slice())
    }
}

/// A ferry archive's index, as its footer places it. It holds no entries: they are
/// read from the archive a window at a time whenever they are gone through (see
/// [`Entries`]), so a reader's memory does not grow with the number of members.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Index {
    footer: Footer,
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

/// The index's own header for `count` entries, of index version `version`.
fn header(count: u64, version: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(COUNT_AT + 8);
    out.extend_from_slice(INDEX_MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
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

/// Appends entry `e`, encoded as index version `version` has it, to `out`.
fn encode_entry(out: &mut Vec<u8>, e: &IndexEntry, version: u32) {
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
    if version >= 2 {
        let names = e.names.as_ref();
        put_bytes(
            out,
            names.and_then(|n| n.user.as_deref()).unwrap_or_default(),
        );
        put_bytes(
            out,
            names.and_then(|n| n.group.as_deref()).unwrap_or_default(),
        );
    }
}

/// What follows an index of `index_len` bytes (`count` entries, hashing to
/// `index_hash`, of version `version`) that starts at `at`: zeros up to the footer, so
/// the archive is a whole number of [`TAR_RECORD`]s, and the footer.
fn tail(
    at: u64,
    tar_end: u64,
    (index_len, count, index_hash): (u64, u64, u64),
    version: u32,
) -> Vec<u8> {
    let end = padded_end(at + index_len, TAR_RECORD);
    let mut out = vec![0u8; (end - at - index_len - FOOTER_LEN) as usize];
    let mut footer = Vec::with_capacity(FOOTER_LEN as usize);
    footer.extend_from_slice(FOOTER_MAGIC);
    // Version 1 wrote a zero for its version.
    let version_word = if version == 1 { 0 } else { u64::from(version) };
    for v in [at, index_len, tar_end, count, index_hash, version_word] {
        footer.extend_from_slice(&v.to_le_bytes());
    }
    let footer_hash = xxh3_64(&footer);
    footer.extend_from_slice(&footer_hash.to_le_bytes());
    out.extend_from_slice(&footer);
    out
}

/// Where an archive whose index ends at `index_end` ends: after the footer, rounded up to
/// a whole number of `unit` bytes ([`TAR_RECORD`]; 512 before it).
fn padded_end(index_end: u64, unit: u64) -> u64 {
    index_end.saturating_add(FOOTER_LEN).div_ceil(unit) * unit
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

impl Index {
    /// The index `footer` places.
    pub fn new(footer: Footer) -> Index {
        Index { footer }
    }

    /// The number of entries.
    pub fn len(&self) -> u64 {
        self.footer.entries
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.footer.entries == 0
    }

    /// First byte after the tar end-of-archive blocks.
    pub fn tar_end(&self) -> u64 {
        self.footer.tar_end
    }

    /// Where the index starts in the archive.
    pub fn offset(&self) -> u64 {
        self.footer.index_offset
    }

    /// The entries, decoded and checked as `r` reads the index from its start.
    pub fn entries<R: Read>(&self, r: R) -> Entries<R> {
        Entries::new(r, self.footer)
    }

    /// The entry that starts `pos` bytes into the index (as [`Entries`] gives it),
    /// read by `r` from there.
    pub fn entry_at(&self, r: impl Read, pos: u64) -> Result<IndexEntry, IndexError> {
        read::entry_at(r, &self.footer, pos)
    }
}

/// Writes the tree table of an index's entries (in archive order; `entries` reads them
/// from the start, each time it is called) to `out`, for an archive whose tar data ends
/// at `tar_end`; returns its length. Directories the entries need but do not name (the
/// root, for an archive of one file) take the first entry's owner and time.
///
/// An archive that names every path once (every archive `pack` writes) is built by
/// [`LeanBuilder`](crate::tree::lean::LeanBuilder), in memory bound by its directories;
/// any other by [`TreeBuilder`](crate::tree::TreeBuilder), which holds every name. Both
/// write the same table.
pub(crate) fn write_tree<I>(
    entries: impl Fn() -> I,
    tar_end: u64,
    out: &mut dyn std::io::Write,
) -> std::io::Result<u64>
where
    I: Iterator<Item = Result<IndexEntry, IndexError>>,
{
    use crate::tree::lean::{Added, LeanBuilder};
    let fail = |e: IndexError| std::io::Error::other(e.0);
    let defaults = match entries().next().transpose().map_err(fail)? {
        Some(e) => crate::tree::DirDefaults {
            mode: 0o755,
            uid: e.uid,
            gid: e.gid,
            mtime: e.mtime,
        },
        None => crate::tree::DirDefaults {
            mode: 0o755,
            uid: 0,
            gid: 0,
            mtime: (0, 0),
        },
    };
    // The paths hardlinks name, for the lean builder to remember the nodes there.
    let mut targets = std::collections::HashSet::new();
    for e in entries() {
        let e = e.map_err(fail)?;
        if e.kind == Kind::HardLink {
            if let Ok(p) = crate::read::convert::safe_path(&e.link) {
                targets.insert(p.as_bytes().into());
            }
        }
    }
    let mut lean = Some(LeanBuilder::new(defaults, targets));
    for e in entries() {
        let e = e.map_err(fail)?;
        if let Some(b) = &mut lean {
            if let Err(crate::tree::lean::NotLean) = b.add(&e).map(|_: Added| ()) {
                lean = None;
            }
        }
    }
    if let Some(b) = lean {
        if let Ok(written) = b.write(tar_end, out)? {
            return Ok(written);
        }
    }
    let mut b = crate::tree::TreeBuilder::new(defaults);
    for e in entries() {
        // What pack writes always resolves; a member it could not place is simply
        // not in the tree (the mount then builds nothing better from it either).
        let _ = b.add(&e.map_err(fail)?);
    }
    b.write(tar_end, out)
}

/// Encodes `entries`, with the index's header, padding and footer, as an index at
/// `tar_end` (for tests that build archives by hand).
#[cfg(test)]
pub(crate) fn encode_index(entries: &[IndexEntry], tar_end: u64) -> Vec<u8> {
    encode_index_version(entries, tar_end, VERSION)
}

/// [`encode_index`] as index version `version` has it.
#[cfg(test)]
pub(crate) fn encode_index_version(entries: &[IndexEntry], tar_end: u64, version: u32) -> Vec<u8> {
    let mut out = header(entries.len() as u64, version);
    for e in entries {
        encode_entry(&mut out, e, version);
    }
    if version >= TREE_SINCE {
        write_tree(|| entries.iter().cloned().map(Ok), tar_end, &mut out).expect("write to memory");
    }
    let (len, count) = (out.len() as u64, entries.len() as u64);
    let hash = xxh3_64(&out);
    out.extend(tail(tar_end, tar_end, (len, count, hash), version));
    out
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
    /// The index's version, which says how its entries are encoded.
    pub version: u32,
}

impl Footer {
    /// Whether `hash` is the index checksum this footer records.
    pub fn hash_matches(&self, hash: u64) -> bool {
        hash == self.index_hash
    }

    /// Reads the footer from the last [`FOOTER_LEN`] bytes of an archive of `file_len`
    /// bytes. `Ok(None)`: there is no ferry footer (a plain tar).
    pub fn parse(bytes: &[u8], file_len: u64) -> Result<Option<Footer>, IndexError> {
        Footer::parse_with(bytes, file_len, false)
    }

    /// As [`Footer::parse`], taking the footer of a packed index too (version
    /// [`packed::PACKED_VERSION`]) where `packed` says so: only a reader that then
    /// reads it as packed does.
    pub fn parse_with(
        bytes: &[u8],
        file_len: u64,
        packed: bool,
    ) -> Result<Option<Footer>, IndexError> {
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
        let version = match word(5) {
            0 => 1, // version 1 wrote a zero
            v if (u64::from(OLDEST_VERSION)..=u64::from(VERSION)).contains(&v) => v as u32,
            v if packed && v == u64::from(packed::PACKED_VERSION) => v as u32,
            v => return Err(bad(format!("unknown index version {v}"))),
        };
        let f = Footer {
            index_offset: word(0),
            index_len: word(1),
            tar_end: word(2),
            entries: word(3),
            index_hash: word(4),
            version,
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
        // The index follows the tar data, and only the zeros that round the archive up
        // to whole records (whole blocks, before) lie between it and the footer: no
        // bytes go unaccounted for.
        let padded = [TAR_RECORD, 512].map(|unit| padded_end(index_end, unit));
        if f.index_offset != f.tar_end || !padded.contains(&file_len) {
            return Err(bad(
                "footer leaves bytes between the tar data, index and footer",
            ));
        }
        Ok(Some(f))
    }
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
            names: Some(Names {
                user: Some(b"ann".to_vec()),
                group: None,
            }),
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

    fn sample() -> Vec<u8> {
        encode_index(&sample_entries(), 10240)
    }

    /// Reads the index at the end of `bytes` (an archive's bytes from offset `at`):
    /// every entry with its position, or the first error.
    fn read_all(bytes: &[u8], at: u64) -> Result<Option<Vec<(u64, IndexEntry)>>, IndexError> {
        let len = at + bytes.len() as u64;
        let Some(f) = Footer::parse(&bytes[bytes.len() - 64..], len)? else {
            return Ok(None);
        };
        let start = (f.index_offset - at) as usize;
        Index::new(f)
            .entries(&bytes[start..])
            .collect::<Result<_, _>>()
            .map(Some)
    }

    fn entries_only(read: Vec<(u64, IndexEntry)>) -> Vec<IndexEntry> {
        read.into_iter().map(|(_, e)| e).collect()
    }

    #[test]
    fn encode_decode_roundtrip() {
        let bytes = sample();
        assert_eq!((10240 + bytes.len()) % 512, 0);
        let read = read_all(&bytes, 10240).expect("valid").expect("indexed");
        assert_eq!(entries_only(read.clone()), sample_entries());
        let f = Footer::parse(&bytes[bytes.len() - 64..], 10240 + bytes.len() as u64)
            .expect("valid")
            .expect("a footer");
        let index = Index::new(f);
        assert_eq!(index.len(), 2);
        let (pos, second) = &read[1];
        assert_eq!(
            &index
                .entry_at(&bytes[*pos as usize..], *pos)
                .expect("decoded"),
            second
        );
    }

    /// Before version 4 a hash was of every logical byte: for a file too big to be
    /// sure the current hash is the same, it is left unchecked, not wrongly failed.
    #[test]
    fn an_older_index_keeps_the_hashes_of_small_files_only() {
        for (size, kept) in [(LEGACY_HASH_MAX, true), (LEGACY_HASH_MAX + 1, false)] {
            let mut entries = sample_entries();
            entries[0].size = size;
            entries[0].runs = vec![(0, 1000), (size - 2000, 2000)];
            let hashes = |version| {
                let bytes = encode_index_version(&entries, 10240, version);
                let read = read_all(&bytes, 10240).expect("valid").expect("indexed");
                read[0].1.hash
            };
            assert_eq!(hashes(3), kept.then_some(42), "size {size}");
            assert_eq!(hashes(VERSION), Some(42), "size {size}");
        }
    }

    #[test]
    fn a_version_1_index_is_read_without_names() {
        let old = encode_index_version(&sample_entries(), 10240, 1);
        let read = read_all(&old, 10240).expect("valid").expect("indexed");
        let mut want = sample_entries();
        for e in &mut want {
            e.names = None;
        }
        assert_eq!(entries_only(read.clone()), want);
        // Its footer's version word is the zero version 1 wrote there.
        let footer = &old[old.len() - 64..];
        assert_eq!(footer[48..56], [0; 8]);
        let f = Footer::parse(footer, 10240 + old.len() as u64)
            .unwrap()
            .unwrap();
        assert_eq!(f.version, 1);
        let (pos, second) = &read[1];
        assert_eq!(
            &Index::new(f).entry_at(&old[*pos as usize..], *pos).unwrap(),
            second
        );
    }

    #[test]
    fn an_index_whose_version_is_unknown_or_not_the_footers_is_refused() {
        let mut bytes = sample();
        let n = bytes.len();
        let unknown = u64::from(VERSION) + 1;
        bytes[n - 16..n - 8].copy_from_slice(&unknown.to_le_bytes());
        let mend = |b: &mut Vec<u8>| {
            let n = b.len();
            let hash = xxh3_64(&b[n - 64..n - 8]);
            b[n - 8..].copy_from_slice(&hash.to_le_bytes());
        };
        mend(&mut bytes);
        let err = read_all(&bytes, 10240).expect_err("a later version");
        assert!(
            err.0.contains(&format!("unknown index version {unknown}")),
            "{err}"
        );
        // The footer says 1, the index's header the version written.
        bytes[n - 16..n - 8].fill(0);
        mend(&mut bytes);
        let err = read_all(&bytes, 10240).expect_err("versions differ");
        assert!(err.0.contains("version"), "{err}");
    }

    #[test]
    fn owner_names_with_a_nul_or_past_their_bound_are_refused() {
        let with_user = |user: Vec<u8>| {
            let mut entries = sample_entries();
            entries[0].names = Some(Names {
                user: Some(user),
                group: None,
            });
            read_all(&encode_index(&entries, 10240), 10240)
        };
        with_user(vec![b'u'; 4096]).expect("4 KiB is taken");
        let err = with_user(vec![b'u'; 4097]).expect_err("past 4 KiB");
        assert!(err.0.contains("at most 4096"), "{err}");
        let err = with_user(b"ro\0ot".to_vec()).expect_err("a NUL");
        assert!(err.0.contains("NUL byte in an owner name"), "{err}");
    }

    #[test]
    fn every_corruption_is_caught() {
        let bytes = sample();
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x41;
            // Flipping padding bytes is harmless; anything else must be an error or no footer.
            if let Ok(Some(read)) = read_all(&b, 10240) {
                assert_eq!(
                    entries_only(read),
                    sample_entries(),
                    "byte {i} changed the index silently"
                );
            }
        }
    }

    /// Bytes between the tar data and the index, or past the zeros that round the
    /// archive up to whole blocks, are refused: the layout of an index has one form.
    #[test]
    fn bytes_around_the_index_are_refused() {
        let bytes = sample();
        let footer_at = bytes.len() - 64;
        let (index_offset, footer) = (10240, &bytes[footer_at..]);
        let refit = |index_offset: u64, file_len: u64| {
            let mut f = footer.to_vec();
            f[8..16].copy_from_slice(&index_offset.to_le_bytes());
            let hash = xxh3_64(&f[..56]);
            f[56..].copy_from_slice(&hash.to_le_bytes());
            Footer::parse(&f, file_len)
        };
        let len = 10240 + bytes.len() as u64;
        assert!(refit(index_offset, len).expect("as written").is_some());
        for (offset, file_len, what) in [
            (index_offset + 512, len + 512, "a block before the index"),
            (index_offset, len + 512, "a block before the footer"),
            (index_offset + 8, len + 512, "bytes on both sides"),
        ] {
            let err = refit(offset, file_len).expect_err(what);
            assert!(err.0.contains("leaves bytes between"), "{what}: {err}");
        }
    }

    #[test]
    fn a_huge_field_length_is_refused_before_allocating() {
        let mut entries = sample_entries();
        entries[0].path = vec![b'a'; 1000];
        let mut bytes = encode_index(&entries, 10240);
        // The path's length field: after the header and the fixed fields.
        let at = COUNT_AT + 8 + HASH_AT + 17;
        assert_eq!(bytes[at..at + 4], 1000u32.to_le_bytes());
        bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let err = read_all(&bytes, 10240).expect_err("refused");
        assert!(err.0.contains("at most"), "{err}");
    }

    #[test]
    fn lying_entries_are_refused() {
        let lie = |change: fn(&mut IndexEntry)| {
            let mut entries = sample_entries();
            change(&mut entries[0]);
            read_all(&encode_index(&entries, 10240), 10240)
        };
        // Runs may overlap or come out of order (as a tar from elsewhere stores them),
        // but not pass the file's end, be empty, or add up to other than it stores.
        assert!(lie(|e| e.runs[1] = (500, 2000)).is_ok());
        assert!(lie(|e| e.runs[1] = (9000, 2000)).is_err());
        assert!(lie(|e| e.runs = vec![(0, 3000), (100, 0)]).is_err());
        assert!(lie(|e| e.runs[1] = (500, 1999)).is_err());
        assert!(lie(|e| e.data_offset = 9000).is_err()); // data would pass tar_end

        // Without runs a file stores all of itself, or nothing (all hole).
        let mut e = sample_entries().remove(0);
        e.runs.clear();
        assert!(
            read::check_entry(&e, 10240).is_err(),
            "3,000 of 10,000 bytes"
        );
        e.stored = 0;
        read::check_entry(&e, 10240).expect("a file that is all hole");
        assert_eq!(e.sparse_map(), Some(&[][..]));
        let entries = sample_entries();
        assert_eq!(entries[1].sparse_map(), None, "a directory has no map");
    }

    #[test]
    fn entries_must_tile_the_tar_data() {
        let read =
            |entries: &[IndexEntry], tar_end| read_all(&encode_index(entries, tar_end), tar_end);
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
