//! Reading an index a window at a time.
//!
//! A reader never holds the whole index: [`Entries`] decodes entries one after another
//! from any byte source (a buffered window over the archive file, or a slice), checking
//! each on its own and laid over the tar data as it goes, and the index's checksum and
//! its end when it gets there. Going through it once, as opening an archive does, checks
//! it all; going through it again (to unpack, list or find a member) reads the same
//! bytes, checked the same way, so an index changed meanwhile is still an error.

use super::{bad, Footer, IndexEntry, IndexError, Kind, Names, INDEX_MAGIC};
use crate::tree::{Trailer, TRAILER_LEN};
use crate::write::header::pad_block;
use std::io::Read;
use xxhash_rust::xxh3::Xxh3;

/// The longest path or link target a reader takes (far beyond `PATH_MAX`, which only
/// bounds one call), ...
const MAX_PATH_LEN: u32 = 1 << 20;
/// ... and the longest xattr name and value (Linux's own limits).
const MAX_XATTR_NAME_LEN: u32 = 255;
const MAX_XATTR_VALUE_LEN: u32 = 64 << 10;
/// The longest user or group name (tar headers take any length through pax; Linux's
/// own tools keep to 32 bytes).
const MAX_OWNER_NAME_LEN: u32 = 4096;

/// Every entry takes at least this many bytes: a count beyond what the index can hold
/// is a lie.
const MIN_ENTRY_LEN: u64 = 100;

/// Reads the fields of an index from `R`, never past `len` bytes, hashing what it
/// reads when asked to.
struct Decoder<R> {
    r: R,
    /// Bytes read so far.
    pos: u64,
    /// Bytes there are to read.
    len: u64,
    hash: Option<Xxh3>,
    /// The index version, which says what an entry holds.
    version: u32,
}

impl<R: Read> Decoder<R> {
    fn left(&self) -> u64 {
        self.len - self.pos
    }

    fn fill(&mut self, buf: &mut [u8]) -> Result<(), IndexError> {
        if (buf.len() as u64) > self.left() {
            return Err(bad("truncated"));
        }
        self.r
            .read_exact(buf)
            .map_err(|e| bad(format!("reading the index: {e}")))?;
        if let Some(h) = &mut self.hash {
            h.update(buf);
        }
        self.pos += buf.len() as u64;
        Ok(())
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], IndexError> {
        let mut a = [0u8; N];
        self.fill(&mut a)?;
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, IndexError> {
        Ok(self.array::<1>()?[0])
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

    /// A length, at most `max`, and that many bytes; the length is checked before
    /// anything is allocated (a sparse archive may claim any length).
    fn bytes(&mut self, max: u32) -> Result<Vec<u8>, IndexError> {
        let n = self.u32()?;
        if n > max {
            return Err(bad(format!(
                "a field of {n} bytes: at most {max} are taken"
            )));
        }
        let n = u64::from(n);
        if n > self.left() {
            return Err(bad("truncated"));
        }
        let mut b = vec![0u8; n as usize];
        self.fill(&mut b)?;
        Ok(b)
    }

    /// An owner name; none when empty.
    fn name(&mut self) -> Result<Option<Vec<u8>>, IndexError> {
        let name = self.bytes(MAX_OWNER_NAME_LEN)?;
        if name.contains(&0) {
            return Err(bad("NUL byte in an owner name"));
        }
        Ok((!name.is_empty()).then_some(name))
    }

    /// A count of items of at least `min_size` bytes each, checked against what is left.
    fn count(&mut self, min_size: u64) -> Result<usize, IndexError> {
        let n = self.u32()?;
        if u64::from(n).saturating_mul(min_size) > self.left() {
            return Err(bad("count larger than the index"));
        }
        Ok(n as usize)
    }

    fn entry(&mut self) -> Result<IndexEntry, IndexError> {
        let kind = Kind::from_u8(self.u8()?).ok_or_else(|| bad("unknown kind"))?;
        let (mode, uid, gid) = (self.u32()?, self.u32()?, self.u32()?);
        let (mtime, atime) = (self.time()?, self.time()?);
        let (size, header_offset, data_offset, stored, rdev) = (
            self.u64()?,
            self.u64()?,
            self.u64()?,
            self.u64()?,
            self.u64()?,
        );
        let has_hash = self.u8()?;
        let hash = u128::from_le_bytes(self.array()?);
        let path = self.bytes(MAX_PATH_LEN)?;
        let link = self.bytes(MAX_PATH_LEN)?;
        let nruns = self.count(16)?;
        let runs = (0..nruns)
            .map(|_| Ok((self.u64()?, self.u64()?)))
            .collect::<Result<Vec<_>, IndexError>>()?;
        let nx = self.count(8)?;
        let xattrs = (0..nx)
            .map(|_| {
                let name = self.bytes(MAX_XATTR_NAME_LEN)?;
                Ok((name, self.bytes(MAX_XATTR_VALUE_LEN)?))
            })
            .collect::<Result<Vec<_>, IndexError>>()?;
        let names = match self.version {
            1 => None,
            _ => Some(Names {
                user: self.name()?,
                group: self.name()?,
            }),
        };
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
            // An older index's hash of a bigger file may be over holes the current
            // hash skips: left unchecked rather than wrongly failed.
            hash: (has_hash != 0
                && (self.version >= super::SKIPPING_HASH_SINCE || size <= super::LEGACY_HASH_MAX))
                .then_some(hash),
            link,
            runs,
            xattrs,
            names,
        })
    }
}

/// The entries of an index in archive order, each with where it starts in the index,
/// decoded and checked one at a time. The last item is an error if anything is wrong,
/// found where it is found: in an entry, or at the end (the checksum, trailing bytes,
/// entries that stop short of the end-of-archive blocks).
pub struct Entries<R> {
    d: Decoder<R>,
    footer: Footer,
    /// Entries decoded so far.
    decoded: u64,
    /// Where the next entry's headers must start: the entries tile the tar data exactly,
    /// as the tar stream does.
    next_header: u64,
    done: bool,
}

impl<R: Read> Entries<R> {
    /// The entries of the index `footer` describes; `r` reads its bytes from the start.
    pub(super) fn new(r: R, footer: Footer) -> Self {
        Entries {
            d: Decoder {
                r,
                pos: 0,
                len: footer.index_len,
                hash: Some(Xxh3::new()),
                version: footer.version,
            },
            footer,
            decoded: 0,
            next_header: 0,
            done: false,
        }
    }

    fn start(&mut self) -> Result<(), IndexError> {
        if &self.d.array::<8>()? != INDEX_MAGIC {
            return Err(bad("no index magic"));
        }
        if self.d.u32()? != self.footer.version {
            return Err(bad("index version differs from the footer's"));
        }
        let count = self.d.u64()?;
        if count != self.footer.entries {
            return Err(bad("entry count differs from the footer's"));
        }
        if count > self.d.len / MIN_ENTRY_LEN {
            return Err(bad("entry count larger than the index"));
        }
        Ok(())
    }

    fn step(&mut self) -> Result<Option<(u64, IndexEntry)>, IndexError> {
        // Nothing read yet: the index's own header comes first (a failure there ends
        // the walk, so it is read once).
        if self.d.pos == 0 {
            self.start()?;
        }
        if self.decoded == self.footer.entries {
            return self.end().map(|()| None);
        }
        let (i, pos) = (self.decoded, self.d.pos);
        let in_entry = |e: IndexError| bad(format!("entry {i}: {}", e.0));
        let e = self.d.entry().map_err(in_entry)?;
        check_entry(&e, self.footer.tar_end).map_err(in_entry)?;
        if e.header_offset != self.next_header {
            return Err(bad(format!(
                "entry at offset {} does not follow the one before (expected {})",
                e.header_offset, self.next_header
            )));
        }
        self.next_header = e
            .data_offset
            .checked_add(pad_block(e.stored))
            .ok_or_else(|| in_entry(bad("data range overflows")))?;
        self.decoded += 1;
        Ok(Some((pos, e)))
    }

    fn end(&mut self) -> Result<(), IndexError> {
        if self.footer.version >= super::TREE_SINCE {
            self.tree()?;
        }
        if self.d.left() != 0 {
            return Err(bad("trailing bytes after the last entry"));
        }
        if self.next_header.saturating_add(1024) != self.footer.tar_end {
            return Err(bad("entries do not end at the end-of-archive blocks"));
        }
        let hash = self.d.hash.as_ref().map(Xxh3::digest);
        if hash != Some(self.footer.index_hash) {
            return Err(bad("index checksum mismatch"));
        }
        Ok(())
    }
}

impl<R: Read> Entries<R> {
    /// Reads the tree table that ends the index (hashing it with the rest) and checks
    /// its trailer: it must fill exactly what is left, and bound data by the tar end.
    fn tree(&mut self) -> Result<(), IndexError> {
        let left = self.d.left();
        let body = left
            .checked_sub(TRAILER_LEN)
            .ok_or_else(|| bad("no tree table after the entries"))?;
        let mut buf = vec![0u8; body.min(1 << 16) as usize];
        let mut done = 0;
        while done < body {
            let n = buf.len().min((body - done) as usize);
            self.d.fill(&mut buf[..n])?;
            done += n as u64;
        }
        let trailer =
            Trailer::decode(&self.d.array::<{ TRAILER_LEN as usize }>()?).map_err(|e| bad(e.0))?;
        if trailer.body_len() != Some(body) || trailer.data_end != self.footer.tar_end {
            return Err(bad("the tree table does not fit the index"));
        }
        Ok(())
    }
}

impl<R: Read> Iterator for Entries<R> {
    type Item = Result<(u64, IndexEntry), IndexError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let step = self.step();
        self.done = !matches!(step, Ok(Some(_)));
        step.transpose()
    }
}

/// Decodes the one entry that starts `pos` bytes into the index `footer` describes;
/// `r` reads the index's bytes from there. Checked on its own, as [`Entries`] checks it.
pub(super) fn entry_at(r: impl Read, footer: &Footer, pos: u64) -> Result<IndexEntry, IndexError> {
    let mut d = Decoder {
        r,
        pos,
        len: footer.index_len,
        hash: None,
        version: footer.version,
    };
    let in_entry = |e: IndexError| bad(format!("entry at index byte {pos}: {}", e.0));
    let e = d.entry().map_err(in_entry)?;
    check_entry(&e, footer.tar_end).map_err(in_entry)?;
    Ok(e)
}

/// Checks one entry against itself and the tar data's extent.
pub(super) fn check_entry(e: &IndexEntry, tar_end: u64) -> Result<(), IndexError> {
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
        // A file stored whole has all of its bytes stored; one that is all hole, none.
        if e.kind == Kind::File && e.stored != e.size && e.stored != 0 {
            return Err(bad("stored size differs from file size"));
        }
        return Ok(());
    }
    // Runs may come in any order, and overlap, as a tar from elsewhere stores them
    // (ferry_core::sparse); every reader of the data goes through that module's rule.
    let mut total = 0u64;
    for &(o, l) in &e.runs {
        let run_end = o.checked_add(l).ok_or_else(|| bad("run overflows"))?;
        if l == 0 || run_end > e.size {
            return Err(bad("a sparse run is empty or passes the end of the file"));
        }
        total = total.checked_add(l).ok_or_else(|| bad("runs overflow"))?;
    }
    if total != e.stored {
        return Err(bad("sparse runs do not add up to the stored size"));
    }
    Ok(())
}

/// Decodes `count` entries from `r`, which reads an index of `version` from its start
/// (header included) and holds `len` bytes: the index pack has just written, read back
/// to build its tree table. Unchecked beyond what decoding checks.
pub(super) fn decode_written<R: Read>(
    r: R,
    len: u64,
    count: u64,
    version: u32,
) -> impl Iterator<Item = Result<IndexEntry, IndexError>> {
    let mut d = Decoder {
        r,
        pos: 0,
        len,
        hash: None,
        version,
    };
    let header = d.array::<20>().map(drop);
    let mut failed = header.err();
    let mut n = 0;
    std::iter::from_fn(move || {
        if let Some(e) = failed.take() {
            n = count;
            return Some(Err(e));
        }
        if n == count {
            return None;
        }
        n += 1;
        Some(d.entry())
    })
}
