//! `unpack`: an archive as a source, pushing its members into the same local-tree sink
//! `copy` uses, so metadata, holes, hardlinks, resume and errors behave the same.
//!
//! A ferry archive file is read through its index: each member's tar header is checked
//! against its index entry, then its data is moved straight from the archive file:
//! cloned where the filesystem allows (the data is block-aligned), else copied. Any
//! other tar, or an archive on a pipe, is streamed through the strict tar reader.
//!
//! Nothing is written outside the destination: member paths are made relative and
//! refused if they contain `..`, and directories are opened one component at a time
//! without following symlinks, so a symlink in the archive cannot redirect a later
//! member. Directory metadata is applied last, deepest first.

use super::archive::{Archive, ArchiveError};
use super::convert::{from_index, from_tar, runs_of};
use crate::index::IndexEntry;
use crate::tar::Reader;
use ferry_core::data::{Mover, Reflink, Sparse};
use ferry_core::entry::{Entry, EntryKind, Metadata, RelPath};
use ferry_core::error::{Error, Reporter};
use ferry_core::local::{DstDir, LocalTreeSink, Update};
use ferry_core::sink::{FileData, TreeSink};
use ferry_core::Stats;
use std::io::{self, BufReader, Read};
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::{mpsc, Mutex};

/// How to unpack.
#[derive(Clone, Copy, Debug)]
pub struct UnpackOptions {
    /// Clone policy for member data.
    pub reflink: Reflink,
    /// Hole policy.
    pub sparse: Sparse,
    /// Compare content, not size and mtime, to decide an existing file is up to date.
    pub checksum: bool,
    /// Re-read every written file and compare its hash with the member's.
    pub verify: bool,
    /// Workers for an archive read through its index.
    pub threads: usize,
}

/// Places entries given by path under the destination; shared by the workers of a
/// parallel unpack, each with its own cache of the directory it is filling.
struct Extractor<'a> {
    sink: LocalTreeSink<'a>,
    root: DstDir,
    reporter: &'a dyn Reporter,
}

/// Open directories a worker used last, each an ancestor of the next, with their paths:
/// the next member most likely lies in the same directory or near it, so finding its
/// directory opens only the components below the deepest one it shares.
type DirCache = Vec<(RelPath, DstDir)>;

/// At most this many open directories in a worker's cache (the shallowest go first),
/// so a very deep path does not run out of descriptors.
const CACHED_DIRS: usize = 32;

/// `dir` is `path` or one of its ancestors.
fn is_within(path: &RelPath, dir: &RelPath) -> bool {
    let (p, d) = (path.as_bytes(), dir.as_bytes());
    p.starts_with(d) && (p.len() == d.len() || p[d.len()] == b'/')
}

fn parent_of(path: &RelPath) -> RelPath {
    let b = path.as_bytes();
    let cut = b.len() - path.file_name().len();
    RelPath::from_bytes(b[..cut.saturating_sub(1)].to_vec())
}

impl<'a> Extractor<'a> {
    fn new(
        dst: &Path,
        mover: &'a Mover,
        opts: &UnpackOptions,
        stats: &'a Stats,
        reporter: &'a dyn Reporter,
    ) -> Result<Self, ArchiveError> {
        let sink = LocalTreeSink::new(
            dst,
            mover,
            Update {
                checksum: opts.checksum,
                verify: opts.verify,
            },
            stats,
            reporter,
        );
        let root_entry = Entry {
            path: RelPath::root(),
            kind: EntryKind::Dir,
            meta: Metadata::default(),
        };
        let root = sink.root(&root_entry).map_err(|e| {
            ArchiveError::Io(io::Error::other(format!("{}: {}", dst.display(), e.os)))
        })?;
        Ok(Extractor {
            sink,
            root,
            reporter,
        })
    }

    /// The directory at `path` (made if missing when `create` is set), found from the
    /// worker's cache.
    fn dir(&self, path: &RelPath, create: bool, cache: &mut DirCache) -> Result<DstDir, Error> {
        while cache.last().is_some_and(|(p, _)| !is_within(path, p)) {
            cache.pop();
        }
        let (at, from) = match cache.last() {
            Some((p, d)) => (p.clone(), d.clone()),
            None => (RelPath::root(), self.root.clone()),
        };
        self.sink.dir_below(&from, &at, path, create, |p, d| {
            if cache.len() == CACHED_DIRS {
                cache.remove(0);
            }
            cache.push((p.clone(), d.clone()));
        })
    }

    /// Makes a directory member (its metadata waits for [`Extractor::finish`]).
    fn make_dir(&self, entry: &Entry, cache: &mut DirCache) -> Result<(), Error> {
        self.dir(&entry.path, true, cache).map(drop)
    }

    /// Places a member that is not a directory.
    fn put(
        &self,
        entry: &Entry,
        data: Option<FileData<'_>>,
        cache: &mut DirCache,
    ) -> Result<(), Error> {
        if entry.path.is_root() {
            return Err(Error::new(
                &entry.path,
                "unpack",
                io::Error::other("a member that is not a directory names the destination itself"),
            ));
        }
        let parent = self.dir(&parent_of(&entry.path), true, cache)?;
        self.sink.leaf(&parent, entry, data)
    }

    /// Applies directory metadata, every directory after all below it (so setting one
    /// never disturbs another): in descending byte order of paths, which puts each
    /// directory after its descendants (a path sorts after its proper prefixes) and keeps
    /// a subtree together, so the cache of open ancestors serves it.
    fn finish(&self, mut dirs: Vec<Entry>) {
        if !dirs.iter().any(|e| e.path.is_root()) {
            if let Err(err) = self.sink.settle_unnamed_root() {
                self.reporter.error(&err);
            }
        }
        dirs.sort_unstable_by(|a, b| b.path.as_bytes().cmp(a.path.as_bytes()));
        let mut cache = DirCache::new();
        for e in &dirs {
            let dir = self.dir(&e.path, false, &mut cache);
            if let Err(err) = dir.and_then(|d| self.sink.finish_dir(&d, e)) {
                self.reporter.error(&err);
            }
        }
    }
}

fn refused(raw: &[u8], why: &'static str) -> Error {
    Error::new(
        &RelPath::from_bytes(raw.to_vec()),
        "unpack",
        io::Error::other(why),
    )
}

/// Members handed to a worker at a time.
const GROUP: usize = 128;

/// Asks the kernel to read every member's headers (and the data of the small ones,
/// which is read with them) ahead, all at once, in as few ranges as they merge into: on
/// a cold cache the workers then wait on one batch of reads, not one random read each.
fn prefetch_headers(archive: &Archive, index: &crate::index::Index) {
    use rustix::fs::{fadvise, Advice};
    let fd = archive.file().as_fd();
    let advise = |(start, end): (u64, u64)| {
        let _ = fadvise(
            fd,
            start,
            std::num::NonZeroU64::new(end - start),
            Advice::WillNeed,
        );
    };
    let mut range: Option<(u64, u64)> = None;
    for e in &index.entries {
        let end = if e.stored <= SMALL_MEMBER {
            e.data_offset + e.stored
        } else {
            e.data_offset
        };
        range = match range {
            // Only near neighbours merge: a gap is data that may be cloned, not read.
            Some((start, last)) if e.header_offset <= last + 4096 => Some((start, end)),
            other => {
                other.map(advise);
                Some((e.header_offset, end))
            }
        };
    }
    range.map(advise);
}

/// Members up to this size are read with their headers in one call.
const SMALL_MEMBER: u64 = 32 << 10;

/// Unpacks an archive file into `dst`. Per-member failures go to `reporter` and the
/// rest goes on; an archive that cannot be read on is an error.
///
/// A ferry archive is unpacked from its index by `opts.threads` workers, handed runs
/// of members sharing a directory as this thread goes through the index (a directory
/// is made by whichever worker needs it first: its member, or a member below it); then
/// come hardlinks, whose targets now exist; then directory metadata.
pub fn unpack_file(
    archive: &Archive,
    dst: &Path,
    opts: &UnpackOptions,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<(), ArchiveError> {
    let Some(index) = archive.index() else {
        let r = BufReader::with_capacity(
            1 << 20,
            super::archive::At {
                file: archive.file(),
                pos: 0,
            },
        );
        return unpack_stream(r, dst, opts, stats, reporter);
    };
    let mover = Mover::new(opts.reflink, opts.sparse);
    let ex = Extractor::new(dst, &mover, opts, stats, reporter)?;
    prefetch_headers(archive, index);
    let failed: Mutex<Option<ArchiveError>> = Mutex::new(None);
    let fail = |err: ArchiveError| {
        if let Ok(mut f) = failed.lock() {
            f.get_or_insert(err);
        }
    };
    let has_failed = || failed.lock().map_or(true, |f| f.is_some());
    let place = |members: &[usize], cache: &mut DirCache| -> Result<(), ArchiveError> {
        for &i in members {
            place_member(archive, &index.entries[i], &ex, cache)?;
        }
        Ok(())
    };
    let (groups, queue) = mpsc::channel::<Vec<usize>>();
    let queue = Mutex::new(queue);
    let (dirs, links) = std::thread::scope(|s| {
        for _ in 0..opts.threads.max(1) {
            s.spawn(|| {
                let mut cache = DirCache::new();
                while !has_failed() {
                    // A closed queue (all handed out, or the walk stopped) ends the worker.
                    let Some(group) = queue.lock().ok().and_then(|q| q.recv().ok()) else {
                        return;
                    };
                    if let Err(err) = place(&group, &mut cache) {
                        fail(err);
                    }
                }
            });
        }
        walk_index(index, reporter, groups, &has_failed)
    });
    let result = match failed.into_inner().ok().flatten() {
        Some(err) => Err(err),
        None => place(&links, &mut DirCache::new()),
    };
    ex.finish(dirs);
    result
}

/// Goes through the index in order and sends runs of members sharing a directory to
/// the workers (runs are cut so a big directory is shared by several workers); returns
/// the directories, for their metadata at the end, and the hardlinks, placed once their
/// targets exist. Groups hold member numbers, not entries, so memory stays the index's
/// whatever its size.
fn walk_index(
    index: &crate::index::Index,
    reporter: &dyn Reporter,
    groups: mpsc::Sender<Vec<usize>>,
    stop: &dyn Fn() -> bool,
) -> (Vec<Entry>, Vec<usize>) {
    let mut dirs = Vec::new();
    let mut links = Vec::new();
    let mut group: Vec<usize> = Vec::new();
    let mut last_parent = None;
    let send = |group: &mut Vec<usize>| {
        if !group.is_empty() {
            // Workers gone (they stop only after a failure) leave nothing to do.
            let _ = groups.send(std::mem::take(group));
        }
    };
    for (i, e) in index.entries.iter().enumerate() {
        if i % GROUP == 0 && stop() {
            break;
        }
        let entry = match from_index(e) {
            Ok(entry) => entry,
            Err(why) => {
                reporter.error(&refused(&e.path, why));
                continue;
            }
        };
        if let EntryKind::HardLink { .. } = entry.kind {
            links.push(i);
            continue;
        }
        let parent = parent_of(&entry.path);
        if last_parent.as_ref() != Some(&parent) || group.len() >= GROUP {
            send(&mut group);
            last_parent = Some(parent);
        }
        group.push(i);
        if entry.kind == EntryKind::Dir {
            dirs.push(entry);
        }
    }
    send(&mut group);
    (dirs, links)
}

/// Checks one member against its index entry and places it.
fn place_member(
    archive: &Archive,
    e: &IndexEntry,
    ex: &Extractor<'_>,
    cache: &mut DirCache,
) -> Result<(), ArchiveError> {
    // Converted once already; a member that failed then was reported and left out.
    let Ok(entry) = from_index(e) else {
        return Ok(());
    };
    if entry.kind == EntryKind::Dir {
        archive.check_member(e)?;
        if let Err(err) = ex.make_dir(&entry, cache) {
            ex.reporter.error(&err);
        }
        return Ok(());
    }
    let member = archive.read_member(e, SMALL_MEMBER)?;
    let runs = runs_of((!e.runs.is_empty()).then_some(e.runs.as_slice()), e.size);
    let data = match (&entry.kind, member.data()) {
        (EntryKind::File { .. }, Some(bytes)) => Some(FileData::Bytes { bytes, runs: &runs }),
        (EntryKind::File { .. }, None) => Some(FileData::Range {
            fd: archive.file().as_fd(),
            offset: e.data_offset,
            runs: &runs,
        }),
        _ => None,
    };
    if let Err(err) = ex.put(&entry, data, cache) {
        ex.reporter.error(&err);
    }
    Ok(())
}

/// Unpacks a tar stream (any tar: ferry's, GNU tar's, bsdtar's) into `dst`.
pub fn unpack_stream(
    input: impl Read,
    dst: &Path,
    opts: &UnpackOptions,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<(), ArchiveError> {
    let mover = Mover::new(opts.reflink, opts.sparse);
    let ex = Extractor::new(dst, &mover, opts, stats, reporter)?;
    let mut reader = Reader::new(input);
    let mut dirs = Vec::new();
    let mut cache = DirCache::new();
    let result = loop {
        let t = match reader.next_entry() {
            Ok(Some(t)) => t,
            Ok(None) => break Ok(()),
            Err(e) => break Err(e.into()),
        };
        let entry = match from_tar(&t) {
            Ok(entry) => entry,
            Err(why) => {
                reporter.error(&refused(&t.path, why));
                continue;
            }
        };
        if entry.kind == EntryKind::Dir {
            if let Err(err) = ex.make_dir(&entry, &mut cache) {
                reporter.error(&err);
            }
            dirs.push(entry);
            continue;
        }
        let runs = runs_of(t.sparse.as_deref(), t.size);
        let mut body = reader.data();
        let data = matches!(entry.kind, EntryKind::File { .. }).then_some(FileData::Stream {
            reader: &mut body,
            runs: &runs,
        });
        if let Err(err) = ex.put(&entry, data, &mut cache) {
            reporter.error(&err);
        }
    };
    ex.finish(dirs);
    result
}
