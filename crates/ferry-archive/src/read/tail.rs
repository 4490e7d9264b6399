//! Checking a streamed ferry archive against the index that follows it.
//!
//! Read from a pipe, an archive's data comes before its index, so nothing can be
//! checked as it goes by. Instead, every file member whose stored bytes all pass
//! through the reader is hashed on the way ([`ContentHasher`], the same xxh3-128 of the
//! logical content that `pack` records, see `ferry_core::content`), and the hash is kept with
//! the member's header offset ([`StreamHashes`], moved to an unnamed temporary file past
//! a few MiB, so memory does not grow with the member count). Once the tar data has
//! ended, what follows it is read to the end ([`check_tail`]): for a ferry archive, the
//! index and footer, spooled to a temporary file and checked as an archive file's are;
//! then each index entry that records a hash is matched, by header offset, with the
//! hash taken as the member streamed by. A member that differs is named to the caller:
//! the bytes it was unpacked (or printed) from are not the ones `pack` read.
//!
//! Members whose data was not read whole (not selected, or failed) are not checked;
//! neither are members whose index entry has no hash (data `pack` cloned or copied in
//! the kernel without `--hash`). Anything after a plain tar's end is read and dropped,
//! as before.

use super::archive::At;
use super::convert::safe_path;
use crate::index::{
    Footer, Index, IndexError, Kind, FOOTER_LEN, FOOTER_MAGIC, INDEX_MAGIC, TAR_RECORD,
};
use ferry_core::content::ContentHash;
use ferry_core::entry::RelPath;
use ferry_core::error::Reporter;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;

/// Hashes a member's logical content from its stored bytes as they are read: the runs'
/// bytes in order, with the holes before each run and after the last (the work follows
/// the bytes stored, not the size the map claims: see [`ContentHash`]).
pub struct ContentHasher<'a> {
    hasher: ContentHash,
    /// The runs with data, in file order.
    runs: &'a [(u64, u64)],
    /// The run the next stored byte belongs to, and how much of it has been hashed.
    run: usize,
    in_run: u64,
    /// Stored bytes hashed, and how many there are.
    hashed: u64,
    stored: u64,
}

impl<'a> ContentHasher<'a> {
    /// A hasher for a member whose stored bytes are `runs` (offset, length) of its
    /// logical content, in order.
    pub fn new(runs: &'a [(u64, u64)]) -> Self {
        ContentHasher {
            hasher: ContentHash::new(),
            runs,
            run: 0,
            in_run: 0,
            hashed: 0,
            stored: runs.iter().map(|r| r.1).sum(),
        }
    }

    /// Feeds the next stored bytes.
    pub fn update(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            // Runs with nothing stored hold no bytes: skip them.
            while self.runs.get(self.run).is_some_and(|r| r.1 == 0) {
                self.run += 1;
            }
            let Some(&(off, len)) = self.runs.get(self.run) else {
                // More bytes than the runs hold: the hash cannot be the member's.
                self.hashed = u64::MAX;
                return;
            };
            if self.in_run == 0 {
                self.hasher.zeros(off.saturating_sub(self.hasher.at()));
            }
            let take = (len - self.in_run).min(bytes.len() as u64) as usize;
            self.hasher.update(&bytes[..take]);
            bytes = &bytes[take..];
            self.in_run += take as u64;
            self.hashed = self.hashed.saturating_add(take as u64);
            if self.in_run == len {
                self.run += 1;
                self.in_run = 0;
            }
        }
    }

    /// The content hash of a member of logical `size`, if every stored byte was fed
    /// (exactly those); None otherwise.
    pub fn finish(self, size: u64) -> Option<u128> {
        if self.hashed != self.stored {
            return None;
        }
        Some(self.hasher.finish(size))
    }
}

/// A reader that feeds what it reads to a [`ContentHasher`].
pub struct Hashing<'r, 'h> {
    /// The member's stored bytes.
    pub inner: &'r mut dyn Read,
    /// Where they are hashed.
    pub hasher: &'r mut ContentHasher<'h>,
}

impl Read for Hashing<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

/// One record: a member's header offset and its content hash.
const RECORD: usize = 8 + 16;

/// Records held in memory before they move to a temporary file (1.5 MiB).
const HELD_RECORDS: usize = 64 << 10;

/// A record as held: the hash in two halves, so a record takes 24 bytes rather than
/// the 32 a `u128`'s alignment makes of it (a daemon holds one list per upload).
type Held = (u64, [u64; 2]);

fn held((at, hash): (u64, u128)) -> Held {
    (at, [hash as u64, (hash >> 64) as u64])
}

fn record((at, [low, high]): Held) -> (u64, u128) {
    (at, u128::from(high) << 64 | u128::from(low))
}

/// The content hashes of the members a stream carried, by header offset, in archive
/// order (see the module's doc).
#[derive(Default)]
pub struct StreamHashes {
    held: Vec<Held>,
    spill: Option<BufWriter<File>>,
    /// The first failure to write the spill file: the hashes are then incomplete, and
    /// nothing is checked.
    failed: Option<io::Error>,
    /// The offset just past the end-of-archive blocks.
    tar_end: u64,
    /// Header offsets of members whose hash was taken but whose data was not unpacked
    /// from those bytes (see [`StreamHashes::leave_out`]), in order.
    left_out: Vec<u64>,
}

impl StreamHashes {
    /// Notes the hash of the member whose headers start at `header_offset`; members
    /// come in archive order.
    pub fn push(&mut self, header_offset: u64, hash: u128) {
        if self.failed.is_some() {
            return;
        }
        self.held.push(held((header_offset, hash)));
        if self.held.len() >= HELD_RECORDS {
            if let Err(e) = self.spill_held() {
                self.failed = Some(e);
            }
        }
    }

    /// Leaves the members whose headers start at `header_offsets` (in any order) out of
    /// the check: their data was hashed as it was read, but not unpacked from those
    /// bytes (a file found up to date, or one that failed).
    pub fn leave_out(&mut self, mut header_offsets: Vec<u64>) {
        header_offsets.sort_unstable();
        self.left_out = header_offsets;
    }

    /// Sets where the tar data ended: the index of a ferry archive starts there.
    pub fn set_tar_end(&mut self, tar_end: u64) {
        self.tar_end = tar_end;
    }

    fn spill_held(&mut self) -> io::Result<()> {
        let out = match &mut self.spill {
            Some(out) => out,
            none => none.insert(BufWriter::new(tempfile::tempfile()?)),
        };
        for (at, hash) in self.held.drain(..).map(record) {
            out.write_all(&at.to_le_bytes())?;
            out.write_all(&hash.to_le_bytes())?;
        }
        Ok(())
    }

    /// All records, in the order they came.
    fn into_records(mut self) -> io::Result<Records> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let spilled = match self.spill.take() {
            Some(out) => {
                let mut file = out.into_inner().map_err(|e| e.into_error())?;
                file.seek(SeekFrom::Start(0))?;
                Some(BufReader::new(file))
            }
            None => None,
        };
        Ok(Records {
            spilled,
            held: self.held.into_iter(),
            left_out: self.left_out,
        })
    }
}

/// The records of [`StreamHashes`], read back in order.
struct Records {
    spilled: Option<BufReader<File>>,
    held: std::vec::IntoIter<Held>,
    left_out: Vec<u64>,
}

impl Records {
    /// The next record of a member not left out.
    fn next(&mut self) -> io::Result<Option<(u64, u128)>> {
        loop {
            let next = self.next_any()?;
            match next {
                Some((at, _)) if self.left_out.binary_search(&at).is_ok() => {}
                other => return Ok(other),
            }
        }
    }

    fn next_any(&mut self) -> io::Result<Option<(u64, u128)>> {
        if let Some(file) = &mut self.spilled {
            let mut rec = [0u8; RECORD];
            match file.read_exact(&mut rec) {
                Ok(()) => {
                    let (at, hash) = rec.split_at(8);
                    let at = u64::from_le_bytes(at.try_into().unwrap_or_default());
                    let hash = u128::from_le_bytes(hash.try_into().unwrap_or_default());
                    return Ok(Some((at, hash)));
                }
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => self.spilled = None,
                Err(e) => return Err(e),
            }
        }
        Ok(self.held.next().map(record))
    }
}

/// Reports, as an error of the archive (exit status 1), that it ended at `offset`
/// with no end-of-archive blocks: a ferry archive always ends with them and its index,
/// and a tar without them was most likely cut short (GNU tar and bsdtar say nothing,
/// so a download cut at a member boundary looks whole to them). What was read before
/// stays as it was made.
pub fn report_cut_short(reporter: &dyn Reporter, offset: u64) {
    let why = format!(
        "the archive ends at offset {offset} without its end-of-archive blocks (nor, \
         for a ferry archive, its index): cut short; the members before are kept"
    );
    reporter.error(&ferry_core::error::Error::new(
        &RelPath::root(),
        "read",
        io::Error::other(why),
    ));
}

/// What reading past the end of a streamed archive found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TailCheck {
    /// Members whose streamed content was compared with the hash the index records.
    pub checked: u64,
    /// Of those, members whose content differed (each reported as an error).
    pub differed: u64,
}

/// Why the end of a stream could not be checked.
#[derive(Debug, thiserror::Error)]
pub enum TailError {
    /// Reading the input (a compressed input's own check fails here too), or the
    /// temporary files.
    #[error(transparent)]
    Read(#[from] io::Error),
    /// The index after the tar data is malformed.
    #[error("the index after the archive: {0}")]
    Index(#[from] IndexError),
}

/// [`check_tail`] for a stream unpacked into `dst` that a rerun repairs (a network
/// copy, an S3 download): each file whose content differs is removed, so the rerun,
/// finding it missing, fetches it again, and reported as an error saying `why`.
pub fn check_tail_removing(
    rest: &mut dyn Read,
    hashes: StreamHashes,
    dst: &std::path::Path,
    why: &str,
    reporter: &dyn Reporter,
) -> Result<TailCheck, TailError> {
    check_tail(rest, hashes, reporter, &mut removing(dst, why, reporter))
}

/// What is done with a file whose content differs, in a stream a rerun repairs: it is
/// removed from `dst` and reported as an error saying `why`.
fn removing<'a>(
    dst: &'a std::path::Path,
    why: &'a str,
    reporter: &'a dyn Reporter,
) -> impl FnMut(RelPath) + 'a {
    move |path: RelPath| {
        let why = match remove_beneath(dst, &path) {
            Ok(()) => io::Error::other(why.to_owned()),
            Err(e) => io::Error::other(format!("{why}; removing it failed: {e}")),
        };
        reporter.error(&ferry_core::error::Error::dst(&path, "verify", why));
    }
}

/// As [`check_tail_removing`], for a stream whose hashes are recorded elsewhere (an S3
/// manifest, when some members of a shard are fetched and not its index): `recorded`
/// gives, in stream order, each file's header offset in the stream, its hash and its
/// path.
pub fn check_recorded_removing(
    hashes: StreamHashes,
    recorded: &[(u64, u128, RelPath)],
    dst: &std::path::Path,
    why: &str,
    reporter: &dyn Reporter,
) -> Result<TailCheck, TailError> {
    let mut differs = removing(dst, why, reporter);
    let mut records = hashes.into_records()?;
    let mut next = records.next()?;
    let mut outcome = TailCheck::default();
    for (offset, hash, path) in recorded {
        while next.is_some_and(|(at, _)| at < *offset) {
            next = records.next()?;
        }
        let Some((at, streamed)) = next else {
            break;
        };
        if at != *offset {
            continue;
        }
        outcome.checked += 1;
        if streamed != *hash {
            outcome.differed += 1;
            differs(path.clone());
        }
    }
    Ok(outcome)
}

/// Removes `path` below `dst`, resolving it without leaving `dst` or following a
/// symlink.
fn remove_beneath(dst: &std::path::Path, path: &RelPath) -> io::Result<()> {
    use rustix::fs::{self as rfs, AtFlags, Mode, OFlags, ResolveFlags};
    let root = rfs::open(
        dst,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let parent = path.parent();
    let parent = match parent.is_root() {
        true => b".".to_vec(),
        false => parent.as_bytes().to_vec(),
    };
    let dir = rfs::openat2(
        &root,
        parent,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
    )?;
    rfs::unlinkat(&dir, path.file_name(), AtFlags::empty())?;
    Ok(())
}

/// Reads `rest`, the input after the end-of-archive blocks, to its end; where it holds a
/// ferry index, checks the members in `hashes` against it, calling `differs` with the
/// path of each whose content differs (see the module's doc). An index that describes
/// another archive is a warning to `reporter`.
pub fn check_tail(
    rest: &mut dyn Read,
    hashes: StreamHashes,
    reporter: &dyn Reporter,
    differs: &mut dyn FnMut(RelPath),
) -> Result<TailCheck, TailError> {
    let tar_end = hashes.tar_end;
    let mut head = Vec::with_capacity(INDEX_MAGIC.len());
    (&mut *rest)
        .take(INDEX_MAGIC.len() as u64)
        .read_to_end(&mut head)?;
    if head != INDEX_MAGIC {
        // A plain tar (or no index): what follows is read and dropped.
        io::copy(rest, &mut io::sink())?;
        return Ok(TailCheck::default());
    }
    let mut spool = tempfile::tempfile()?;
    spool.write_all(&head)?;
    let most = longest_tail(tar_end);
    let mut out = BufWriter::new(&mut spool);
    io::copy(&mut (&mut *rest).take(most), &mut out)?;
    // Flushed here, not on drop, which would let a full disk go unnoticed.
    out.flush()?;
    drop(out);
    let len = spool.seek(SeekFrom::End(0))?;
    if len >= most && rest.read(&mut [0u8; 1])? > 0 {
        return Err(IndexError(format!(
            "longer than the {tar_end} bytes of tar data it would describe: not read on"
        ))
        .into());
    }
    let mut last = [0u8; FOOTER_LEN as usize];
    if len < FOOTER_LEN {
        return Err(IndexError("cut short: no footer".into()).into());
    }
    spool.read_exact_at(&mut last, len - FOOTER_LEN)?;
    if last.starts_with(FOOTER_MAGIC) && footer_tar_end(&last) != tar_end {
        // An index left over from before members were appended (`tar -r` writes them
        // over the end-of-archive blocks): it describes another archive.
        reporter.warn(&format!(
            "the index after the archive was made for one ending at offset {}, not {tar_end} \
             (appended to by tar -r?); the data is not checked against it",
            footer_tar_end(&last)
        ));
        return Ok(TailCheck::default());
    }
    let Some(footer) = Footer::parse(&last, tar_end + len)? else {
        return Err(IndexError("no footer after it".into()).into());
    };
    compare(&spool, footer, hashes, differs)
}

/// The most bytes an index and footer after `tar_end` bytes of tar data can take. Every
/// variable part of an index entry (path, link target, xattrs, owner names) is in the
/// member's tar headers too, and an entry's fixed part (about 140 bytes) is smaller than
/// the member's 512-byte header, so an index is never longer than the tar data it
/// describes; the zeros before the footer round it up to a [`TAR_RECORD`] at most. A longer
/// tail is not spooled to disk, however long the input goes on.
fn longest_tail(tar_end: u64) -> u64 {
    tar_end.saturating_add(FOOTER_LEN + TAR_RECORD)
}

/// The `tar_end` a footer's bytes give, before any check (see `Footer`).
fn footer_tar_end(footer: &[u8; FOOTER_LEN as usize]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&footer[24..32]);
    u64::from_le_bytes(word)
}

/// Goes through the index in `spool` (which starts at the archive's `tar_end`) and the
/// streamed hashes side by side, both in archive order.
fn compare(
    spool: &File,
    footer: Footer,
    hashes: StreamHashes,
    differs: &mut dyn FnMut(RelPath),
) -> Result<TailCheck, TailError> {
    let mut records = hashes.into_records()?;
    let mut next = records.next()?;
    let mut outcome = TailCheck::default();
    let start = footer.index_offset - footer.tar_end;
    let reader = BufReader::with_capacity(
        256 << 10,
        At {
            file: spool,
            pos: start,
        },
    );
    for item in Index::new(footer).entries(reader) {
        let (_, e) = item?;
        let Some(recorded) = e.hash.filter(|_| e.kind == Kind::File) else {
            continue;
        };
        while next.is_some_and(|(at, _)| at < e.header_offset) {
            next = records.next()?;
        }
        let Some((at, streamed)) = next else {
            continue;
        };
        if at != e.header_offset {
            continue;
        }
        outcome.checked += 1;
        if streamed != recorded {
            outcome.differed += 1;
            // Named as unpacking names it.
            differs(safe_path(&e.path).unwrap_or_else(|_| RelPath::from_bytes(e.path.clone())));
        }
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(content: &[u8]) -> u128 {
        xxhash_rust::xxh3::xxh3_128(content)
    }

    #[test]
    fn a_held_record_gives_back_its_offset_and_whole_hash() {
        let hash = digest(b"both halves") | 1 << 127 | 1;
        assert_eq!(record(held((u64::MAX - 7, hash))), (u64::MAX - 7, hash));
        assert_eq!(std::mem::size_of::<Held>(), RECORD);
    }

    /// Fed in any chunks, the hash is that of the logical content, holes as zeros.
    #[test]
    fn a_sparse_members_hash_is_its_whole_contents() {
        let runs = [(4096u64, 3u64), (10_000, 0), (8192, 2)];
        let mut content = vec![0u8; 12_000];
        content[4096..4099].copy_from_slice(b"abc");
        content[8192..8194].copy_from_slice(b"de");
        for split in 0..5 {
            let stored = b"abcde";
            let mut h = ContentHasher::new(&runs);
            h.update(&stored[..split]);
            h.update(&stored[split..]);
            assert_eq!(h.finish(12_000), Some(digest(&content)), "split at {split}");
        }
    }

    /// Bytes missing or left over make no hash.
    #[test]
    fn a_member_not_read_exactly_has_no_hash() {
        let runs = [(0u64, 4u64)];
        let mut short = ContentHasher::new(&runs);
        short.update(b"abc");
        assert_eq!(short.finish(4), None);
        let mut long = ContentHasher::new(&runs);
        long.update(b"abcde");
        assert_eq!(long.finish(4), None);
        let empty = ContentHasher::new(&[]);
        assert_eq!(empty.finish(0), Some(digest(b"")));
    }

    /// Records come back in order, from the spill file and then from memory.
    #[test]
    fn spilled_records_read_back_in_order() {
        let mut hashes = StreamHashes::default();
        let n = HELD_RECORDS as u64 * 2 + 5;
        for i in 0..n {
            hashes.push(i * 512, u128::from(i) << 64 | 7);
        }
        assert!(
            hashes.spill.is_some(),
            "past the limit the records move out"
        );
        let mut records = hashes.into_records().expect("records");
        for i in 0..n {
            assert_eq!(
                records.next().expect("read"),
                Some((i * 512, u128::from(i) << 64 | 7))
            );
        }
        assert_eq!(records.next().expect("read"), None);
    }
}
