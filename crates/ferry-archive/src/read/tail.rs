//! Checking a streamed ferry archive against the index that follows it.
//!
//! Read from a pipe, an archive's data comes before its index, so nothing can be
//! checked as it goes by. Instead, every file member whose stored bytes all pass
//! through the reader is hashed on the way ([`ContentHasher`], the same xxh3-128 of the
//! logical content that `pack` records, see `ferry_core::content`), and the hash is kept
//! with the member's header offset and the path it was placed at ([`StreamHashes`], see
//! `placed`). Once the tar data has ended, what follows it is read to the end
//! ([`check_tail`]): for a ferry archive, the index and footer, spooled to a temporary
//! file and checked as an archive file's are; then each index entry is matched, by
//! header offset, with what was noted as the member streamed by. A file whose content
//! differs is named to the caller: the bytes it was unpacked (or printed) from are not
//! the ones `pack` read. A member whose headers gave its times to the second alone (an
//! archive that keeps them in its index: see `TarEntry::own_pax`) gets them exactly
//! from its entry, where the caller unpacked it ([`check_tail_removing`]).
//!
//! Members whose data was not read whole (not selected, or failed) are not checked;
//! neither are members whose index entry has no hash (data `pack` cloned or copied in
//! the kernel without `--hash`). Anything after a plain tar's end is read and dropped,
//! as before.

pub use super::placed::{Placed, StreamHashes};

use super::archive::At;
use crate::index::packed::{PackedIndex, MARKER, PACKED_VERSION};
use crate::index::{
    Footer, Index, IndexError, Kind, FOOTER_LEN, FOOTER_MAGIC, INDEX_MAGIC, TAR_RECORD,
    TIMES_IN_INDEX_SINCE,
};
use ferry_core::content::ContentHash;
use ferry_core::entry::RelPath;
use ferry_core::error::Reporter;
use rustix::fs::{self as rfs, AtFlags, Mode, OFlags, ResolveFlags};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::Path;

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
    /// Members whose times the index gave finer than their headers did.
    pub retimed: u64,
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

/// [`check_tail`] for a stream unpacked into `dst` that a rerun repairs (`unpack -`, a
/// network copy, an S3 download): each file whose content differs is removed, so the
/// rerun, finding it missing, fetches it again, and reported as an error saying `why`;
/// and each member whose headers gave its times to the second alone gets them from the
/// index, to the nanosecond, with its atime.
pub fn check_tail_removing(
    rest: &mut dyn Read,
    hashes: StreamHashes,
    dst: &Path,
    why: &str,
    reporter: &dyn Reporter,
) -> Result<TailCheck, TailError> {
    let mut repairing = Repairing::new(dst, why, reporter);
    check_tail_with(rest, hashes, reporter, &mut repairing)
}

/// What is done with what the index says of the members placed.
trait Outcome {
    /// The content of the member placed at `path` differs from what was packed.
    fn differs(&mut self, path: &RelPath);
    /// The member placed at `path` has these times (mtime, atime), where its headers
    /// gave the mtime's seconds alone; set where `links` allows.
    fn times(&mut self, path: &RelPath, times: ((i64, u32), (i64, u32)), links: Links);
}

/// Which nodes a time may be set on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Links {
    /// Any: one this run made.
    Any,
    /// Only one with at most this many names (its own and the archive's links to it).
    AtMost(u64),
}

/// Only told of what differs.
struct Told<'a>(&'a mut dyn FnMut(RelPath));

impl Outcome for Told<'_> {
    fn differs(&mut self, path: &RelPath) {
        (self.0)(path.clone())
    }
    fn times(&mut self, _: &RelPath, _: ((i64, u32), (i64, u32)), _: Links) {}
}

/// A destination a rerun repairs: a file whose content differs is removed and
/// reported as an error saying `why`; times are set.
struct Repairing<'a> {
    beneath: Beneath<'a>,
    why: &'a str,
    reporter: &'a dyn Reporter,
}

impl<'a> Repairing<'a> {
    fn new(dst: &'a Path, why: &'a str, reporter: &'a dyn Reporter) -> Self {
        Repairing {
            beneath: Beneath::new(dst),
            why,
            reporter,
        }
    }
}

impl Outcome for Repairing<'_> {
    fn differs(&mut self, path: &RelPath) {
        let why = match self.beneath.remove(path) {
            Ok(()) => io::Error::other(self.why.to_owned()),
            Err(e) => io::Error::other(format!("{}; removing it failed: {e}", self.why)),
        };
        self.reporter
            .error(&ferry_core::error::Error::dst(path, "verify", why));
    }

    fn times(&mut self, path: &RelPath, times: ((i64, u32), (i64, u32)), links: Links) {
        let gone = |e: &io::Error| {
            e.kind() == io::ErrorKind::NotFound
                || e.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error())
        };
        match self.beneath.set_times(path, times, links) {
            Ok(()) => {}
            // Gone with a later member that replaced a directory above it.
            Err(e) if gone(&e) => {}
            Err(e) => self
                .reporter
                .error(&ferry_core::error::Error::dst(path, "set times", e)),
        }
    }
}

/// As [`check_tail_removing`], for a stream whose hashes are recorded elsewhere (an S3
/// manifest, when some members of a shard are fetched and not its index): `recorded`
/// gives, in stream order, each file's header offset in the stream, its hash and its
/// path.
pub fn check_recorded_removing(
    hashes: StreamHashes,
    recorded: &[(u64, u128, RelPath)],
    dst: &Path,
    why: &str,
    reporter: &dyn Reporter,
) -> Result<TailCheck, TailError> {
    let mut repairing = Repairing::new(dst, why, reporter);
    let mut records = hashes.into_records()?;
    let mut next = records.next()?;
    let mut outcome = TailCheck::default();
    for (offset, hash, path) in recorded {
        while next.as_ref().is_some_and(|p| p.header_offset < *offset) {
            next = records.next()?;
        }
        let Some(placed) = &next else {
            break;
        };
        let Some(streamed) = placed.hash.filter(|_| placed.header_offset == *offset) else {
            continue;
        };
        outcome.checked += 1;
        if streamed != *hash {
            outcome.differed += 1;
            repairing.differs(path);
        }
    }
    Ok(outcome)
}

/// Paths below a destination, each resolved from it at the moment of use without
/// leaving it or following a symlink; the directory of the last one is kept open
/// for the next (a stream's members come a directory at a time).
struct Beneath<'a> {
    dst: &'a Path,
    root: Option<OwnedFd>,
    parent: Option<(RelPath, OwnedFd)>,
}

impl<'a> Beneath<'a> {
    fn new(dst: &'a Path) -> Self {
        Beneath {
            dst,
            root: None,
            parent: None,
        }
    }

    /// The directory `path` is in, opened `O_PATH`.
    fn parent_of(&mut self, path: &RelPath) -> io::Result<BorrowedFd<'_>> {
        let parent = path.parent();
        if self.parent.as_ref().is_none_or(|(p, _)| *p != parent) {
            self.parent = None;
            let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
            let root = match &mut self.root {
                Some(root) => root,
                none => none.insert(rfs::open(self.dst, flags, Mode::empty())?),
            };
            let at = match parent.is_root() {
                true => b".".to_vec(),
                false => parent.as_bytes().to_vec(),
            };
            let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS;
            let dir = rfs::openat2(&*root, at, flags, Mode::empty(), resolve)?;
            self.parent = Some((parent, dir));
        }
        match &self.parent {
            Some((_, dir)) => Ok(dir.as_fd()),
            None => Err(io::Error::other("no parent directory")),
        }
    }

    /// Removes `path` (not a directory).
    fn remove(&mut self, path: &RelPath) -> io::Result<()> {
        let name = path.file_name().to_vec();
        rfs::unlinkat(self.parent_of(path)?, name, AtFlags::empty())?;
        Ok(())
    }

    /// Sets the times (mtime, atime) of `path` (of the symlink itself, for a symlink),
    /// where `links` allows.
    fn set_times(
        &mut self,
        path: &RelPath,
        (mtime, atime): ((i64, u32), (i64, u32)),
        links: Links,
    ) -> io::Result<()> {
        let ts = |(sec, nsec): (i64, u32)| rfs::Timespec {
            tv_sec: sec,
            tv_nsec: nsec.into(),
        };
        let times = rfs::Timestamps {
            last_access: ts(atime),
            last_modification: ts(mtime),
        };
        if path.is_root() {
            rfs::utimensat(rfs::CWD, self.dst, &times, AtFlags::empty())?;
            return Ok(());
        }
        let name = path.file_name().to_vec();
        let parent = self.parent_of(path)?;
        if let Links::AtMost(names) = links {
            let st = rfs::statat(parent, name.as_slice(), AtFlags::SYMLINK_NOFOLLOW)?;
            if st.st_nlink > names {
                return Ok(());
            }
        }
        rfs::utimensat(parent, name, &times, AtFlags::SYMLINK_NOFOLLOW)?;
        Ok(())
    }
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
    check_tail_with(rest, hashes, reporter, &mut Told(differs))
}

/// [`check_tail`], telling `outcome` what differs and what times to set.
fn check_tail_with(
    rest: &mut dyn Read,
    hashes: StreamHashes,
    reporter: &dyn Reporter,
    outcome: &mut dyn Outcome,
) -> Result<TailCheck, TailError> {
    let tar_end = hashes.tar_end;
    let mut head = Vec::with_capacity(INDEX_MAGIC.len());
    (&mut *rest)
        .take(INDEX_MAGIC.len() as u64)
        .read_to_end(&mut head)?;
    // A plain index starts with its magic; a packed one with its marker.
    if head != INDEX_MAGIC && !(head == MARKER[..8] && packed_marker(rest, &mut head)?) {
        // A plain tar (or no index): what follows is read and dropped.
        io::copy(rest, &mut io::sink())?;
        return Ok(TailCheck::default());
    }
    let most = longest_tail(tar_end);
    // What follows the index may fail to read (garbage after a compressed stream): the
    // index before it is still used, and the failure returned after.
    let (spool, broke) = spool_tail(rest, &head, most)?;
    let checked = check_spooled(&spool, tar_end, reporter, hashes, outcome);
    match (checked, broke) {
        (Ok(check), None) => Ok(check),
        (Ok(_), Some(e)) => Err(e.into()),
        (Err(_), Some(e)) => Err(e.into()),
        (Err(e), None) => Err(e),
    }
}

/// Spools `head` and the rest of `rest`, at most `most` bytes, to a temporary file;
/// returns it with the error that stopped reading `rest`, if one did. More than `most`
/// bytes is an error of the index.
fn spool_tail(
    rest: &mut dyn Read,
    head: &[u8],
    most: u64,
) -> Result<(File, Option<io::Error>), TailError> {
    let mut spool = tempfile::tempfile()?;
    let mut out = BufWriter::new(&mut spool);
    out.write_all(head)?;
    let mut limited = (&mut *rest).take(most);
    let mut buf = vec![0u8; 64 << 10];
    let broke = loop {
        match limited.read(&mut buf) {
            Ok(0) => break None,
            Ok(n) => out.write_all(&buf[..n])?,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => break Some(e),
        }
    };
    // Flushed here, not on drop, which would let a full disk go unnoticed.
    out.flush()?;
    drop(out);
    let len = spool.seek(SeekFrom::End(0))?;
    if broke.is_none() && len >= most && rest.read(&mut [0u8; 1])? > 0 {
        return Err(IndexError(format!(
            "longer than {most} bytes, more than the tar data before it can need: not read on"
        ))
        .into());
    }
    Ok((spool, broke))
}

/// The index and footer spooled in `spool` checked, and the members in `hashes` with
/// them (see [`check_tail`]). The index is read through once to check it whole before
/// anything is done by what it says.
fn check_spooled(
    spool: &File,
    tar_end: u64,
    reporter: &dyn Reporter,
    hashes: StreamHashes,
    outcome: &mut dyn Outcome,
) -> Result<TailCheck, TailError> {
    let len = spool.metadata()?.len();
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
    let Some(footer) = Footer::parse_with(&last, tar_end + len, true)? else {
        return Err(IndexError("no footer after it".into()).into());
    };
    // The spool holds the archive from `tar_end` on; a packed index is read as the
    // plain one it stands for (see `index::packed`).
    let view = match footer.version == PACKED_VERSION {
        true => {
            let packed = PackedIndex::open(spool, &footer, tar_end)?;
            let footer = packed.footer();
            Spooled::Packed(packed, footer)
        }
        false => Spooled::Plain(spool, footer),
    };
    let footer = view.footer();
    for entry in Index::new(footer).entries(view.reader()) {
        entry?;
    }
    compare(&view, hashes, outcome)
}

/// The index after a stream, spooled: plain, or packed.
enum Spooled<'a> {
    /// The spool holds the index as it is, from `tar_end` on.
    Plain(&'a File, Footer),
    /// The spool holds a packed index, read as the plain one.
    Packed(PackedIndex, Footer),
}

impl Spooled<'_> {
    fn footer(&self) -> Footer {
        match self {
            Spooled::Plain(_, f) | Spooled::Packed(_, f) => *f,
        }
    }

    /// The index's entries' bytes, a window at a time.
    fn reader(&self) -> BufReader<Box<dyn Read + '_>> {
        let f = self.footer();
        let inner: Box<dyn Read + '_> = match self {
            Spooled::Plain(spool, _) => Box::new(At {
                file: *spool,
                pos: f.index_offset - f.tar_end,
            }),
            Spooled::Packed(packed, _) => Box::new(At {
                file: packed,
                pos: f.index_offset,
            }),
        };
        BufReader::with_capacity(256 << 10, inner)
    }
}

/// Whether `head`, the first 8 bytes of a packed index's marker, goes on (read from
/// `rest` into `head`) as the marker does.
fn packed_marker(rest: &mut dyn Read, head: &mut Vec<u8>) -> io::Result<bool> {
    (&mut *rest)
        .take((MARKER.len() - head.len()) as u64)
        .read_to_end(head)?;
    Ok(head[..] == MARKER[..])
}

/// The most bytes an index and footer after `tar_end` bytes of tar data can take. Every
/// variable part of an index entry (path, link target, xattrs, owner names) is in the
/// member's tar headers too, and is at most twice in the index (the entry, the tree
/// table), with fixed parts (about 140 and 128 bytes) a member: against a member's 512
/// bytes of tar header at least, an index is never more than three times the tar data
/// it describes; the zeros before the footer round it up to a [`TAR_RECORD`] at most. A
/// longer tail is not spooled to disk, however long the input goes on.
fn longest_tail(tar_end: u64) -> u64 {
    tar_end
        .saturating_mul(3)
        .saturating_add(FOOTER_LEN + TAR_RECORD)
}

/// The `tar_end` a footer's bytes give, before any check (see `Footer`).
fn footer_tar_end(footer: &[u8; FOOTER_LEN as usize]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&footer[24..32]);
    u64::from_le_bytes(word)
}

/// Goes through the index in `view` and the records of the members placed side by
/// side, both in archive order.
fn compare(
    view: &Spooled<'_>,
    mut hashes: StreamHashes,
    outcome: &mut dyn Outcome,
) -> Result<TailCheck, TailError> {
    let footer = view.footer();
    let superseded = std::mem::take(&mut hashes.last_of_repeated);
    let linked_to = std::mem::take(&mut hashes.linked_to);
    let mut records = hashes.into_records()?;
    let mut next = records.next()?;
    let mut check = TailCheck::default();
    for item in Index::new(footer).entries(view.reader()) {
        let (_, e) = item?;
        while next
            .as_ref()
            .is_some_and(|p| p.header_offset < e.header_offset)
        {
            next = records.next()?;
        }
        let Some(placed) = next.as_ref().filter(|p| p.header_offset == e.header_offset) else {
            continue;
        };
        // A later member placed at the same path has taken this one's place.
        if superseded
            .get(&placed.path)
            .is_some_and(|&last| last != placed.header_offset)
        {
            continue;
        }
        if let (Some(recorded), Some(streamed)) =
            (e.hash.filter(|_| e.kind == Kind::File), placed.hash)
        {
            check.checked += 1;
            if streamed != recorded {
                check.differed += 1;
                outcome.differs(&placed.path);
                continue;
            }
        }
        // Times the headers gave to the second, which the index gives exactly (in the
        // same second: see `TarEntry::times_agree`), from the version that keeps them
        // there. A hardlink has its target's; a file only where its data was written
        // now (all of it read); another node, or an empty file, only where it has no
        // names but its own and the archive's links to it (one found up to date may
        // be linked from outside the destination).
        let finer = e.mtime.1 != 0 || e.atime != (e.mtime.0, 0);
        let names = 1 + linked_to.get(&placed.path).copied().unwrap_or(0);
        let shared = Links::AtMost(names);
        let written = match e.kind {
            Kind::HardLink => None,
            Kind::File if e.size == 0 => placed.hash.map(|_| shared),
            Kind::File => placed.hash.map(|_| Links::Any),
            Kind::Dir => Some(Links::Any),
            _ => Some(shared),
        };
        let keeps_times = footer.version >= TIMES_IN_INDEX_SINCE;
        if let Some(links) = written.filter(|_| keeps_times && finer) {
            if placed.header_secs == Some(e.mtime.0) {
                outcome.times(&placed.path, (e.mtime, e.atime), links);
                check.retimed += 1;
            }
        }
    }
    Ok(check)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(content: &[u8]) -> u128 {
        xxhash_rust::xxh3::xxh3_128(content)
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
}
