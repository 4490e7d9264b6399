//! The sink of `pack` (see [`super::pack`]): lays each entry out at the end of the
//! archive under a lock (its headers, padding and data region at once), records it in
//! the index, and hands the bytes to the fillers (an archive file) or writes them in
//! order (a stream). Then the end-of-archive blocks, the index and the footer.

use super::fill::{read_or_zeros, Block, Fillers, Job, Large, Small};
use super::header::{pad_block, DataShape, HeaderEncoder, ALIGN};
use super::restamp::Restamp;
use super::stream_out::StreamOut;
use crate::index::{HashSlot, IndexEntry, IndexWriter, Kind};
use ferry_core::content::ContentHash;
use ferry_core::data::{data_runs, with_buffer, write_full, Segment};
use ferry_core::entry::{Entry, EntryKind, InodeKey, RelPath};
use ferry_core::error::{Error, Reporter, Result};
use ferry_core::sink::{FileData, TreeSink};
use ferry_core::stamp::Stamp;
use ferry_core::Stats;
use std::borrow::Cow;
use std::collections::hash_map::Entry::{Occupied, Vacant};
use std::collections::HashMap;
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU32};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

struct State {
    /// Next free archive offset.
    pos: u64,
    index: IndexWriter,
    headers: HeaderEncoder,
    /// The first name written for each multiply-linked inode.
    first_names: HashMap<InodeKey, RelPath>,
    /// The stretch of the archive being laid out, up to `pos`.
    block: Block,
    /// The first failure to write the stream or the index: everything after it is moot.
    failed: Option<io::Error>,
    /// A small file has been laid out since the last large one: the fillers are busy
    /// writing blocks into the archive.
    small_since_large: bool,
    /// The archive file's length as last set to the end of the layout (see
    /// [`ArchiveSink::keep_length_ahead`]); None once setting it failed.
    length_set: Option<u64>,
}

impl State {
    /// The path written first for `entry`'s source inode, when that has other names
    /// and one was written; otherwise notes `entry` as the first. (Checked and noted
    /// under the lock that also places the entry, so the first name always comes first
    /// in the archive.)
    fn earlier_name(&mut self, entry: &Entry) -> Option<RelPath> {
        let (key, _) = entry.links?;
        match self.first_names.entry(key) {
            Occupied(first) => Some(first.get().clone()),
            Vacant(slot) => {
                slot.insert(entry.path.clone());
                None
            }
        }
    }
}

/// `entry` as a hardlink member naming `first`.
fn hardlink_to(entry: &Entry, first: RelPath) -> Entry {
    Entry {
        path: entry.path.clone(),
        kind: EntryKind::HardLink { target: first },
        meta: entry.meta.clone(),
        links: None,
    }
}

/// The two zero blocks that end a tar archive.
const END_BLOCKS: [u8; 1024] = [0; 1024];

/// Files smaller than this are read into memory and written with their headers.
const SMALL: u64 = 64 << 10;

/// A tree sink that lays out a ferry archive; the bytes are moved by fillers (into a
/// file) or in order (into a stream).
pub(super) struct ArchiveSink<'s, 'env> {
    state: Mutex<State>,
    /// The archive file's fillers; None for a stream.
    fillers: Option<Fillers<'s, 'env>>,
    /// The thread writing a stream; None for an archive file.
    stream: Option<StreamOut<'s, 'env>>,
    inline_clones: InlineClones,
    /// A block is sent once it holds this many files (see [`files_per_block`]).
    files_per_block: usize,
    stats: &'env Stats,
    /// Members the receiver of the archive already has (see [`Omit`]).
    omit: Option<&'env dyn Omit>,
    /// What members get in place of what the source says.
    restamp: Option<&'env Restamp>,
    /// Write the index packed (see [`crate::index::packed`]).
    pack_index: bool,
}

/// Leaves out of the archive members its receiver already has: a network copy's
/// sender asks the receiver's list of what its destination holds. Called for every
/// member that is not a directory, as it would be written (a later name of a file's
/// inode as a hardlink member naming the first), under the lock that orders the
/// members, so a first name is decided before its later names; `data` is a file's
/// open data. A member left out counts as nothing packed; the implementation counts
/// it as skipped if it wants.
pub trait Omit: Sync {
    /// Whether to leave `member` out.
    fn omit(&self, member: &Entry, data: Option<BorrowedFd<'_>>) -> bool;

    /// Told of each directory the walk meets, the root too (its path as the walk gives
    /// it, without tar's trailing `/`; the root's empty); whether to leave out its
    /// header (the walk goes on below it either way: only the directory's own header,
    /// which carries its metadata, is not written).
    fn dir(&self, _member: &Entry) -> bool {
        false
    }
}

/// Whether the walker clones large files into the archive itself (one after another,
/// with no small files between). Clones into one file run one at a time in the kernel,
/// so with a warm cache (tens of microseconds a clone) handing them to fillers only adds
/// hand-offs. With a cold one a clone waits on the disk for metadata, and fillers wait
/// on many at once: after a few slow clones in a row, or one that stalled, large files
/// go to the fillers for the rest of the job.
#[derive(Default)]
struct InlineClones {
    slow_in_a_row: AtomicU32,
    off: AtomicBool,
}

/// A clone slower than this waited on the disk.
const SLOW_CLONE: Duration = Duration::from_millis(1);

/// This many slow clones in a row send large files to the fillers.
const SLOW_CLONES: u32 = 4;

/// One clone this slow sends large files to the fillers at once. On a cold cache the
/// first clone into each allocation group waits 0.1-0.3 s for its metadata (by hand,
/// 1,024 x 4 MiB on XFS); warm clones take tens of microseconds.
const STALLED_CLONE: Duration = Duration::from_millis(20);

impl InlineClones {
    fn wanted(&self) -> bool {
        !self.off.load(Relaxed)
    }

    /// Notes how long the walker's last clone took.
    fn took(&self, time: Duration) {
        if time >= STALLED_CLONE {
            self.off.store(true, Relaxed);
        } else if time < SLOW_CLONE {
            self.slow_in_a_row.store(0, Relaxed);
        } else if self.slow_in_a_row.fetch_add(1, Relaxed) + 1 >= SLOW_CLONES {
            self.off.store(true, Relaxed);
        }
    }
}

/// Where one entry's data goes, decided under the lock.
struct Placed {
    data_at: u64,
    slot: HashSlot,
}

fn index_kind(kind: &EntryKind) -> Kind {
    match kind {
        EntryKind::File { .. } => Kind::File,
        EntryKind::Dir => Kind::Dir,
        EntryKind::Symlink { .. } => Kind::Symlink,
        EntryKind::HardLink { .. } => Kind::HardLink,
        EntryKind::Fifo => Kind::Fifo,
        EntryKind::CharDevice { .. } => Kind::CharDevice,
        EntryKind::BlockDevice { .. } => Kind::BlockDevice,
        // Refused before it is written (`leaf`).
        EntryKind::Socket => Kind::Fifo,
    }
}

/// The runs of a file worth storing: its data runs widened to [`ALIGN`] boundaries, so
/// each stored run starts aligned in the archive and can be cloned in and out. None
/// for a dense file.
fn stored_runs(
    fd: BorrowedFd<'_>,
    size: u64,
    maybe_sparse: bool,
) -> io::Result<Option<Vec<(u64, u64)>>> {
    if !maybe_sparse {
        return Ok(None);
    }
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for (o, l) in data_runs(fd, 0, size)? {
        let start = o / ALIGN * ALIGN;
        let end = (o + l).div_ceil(ALIGN).saturating_mul(ALIGN).min(size);
        match runs.last_mut() {
            Some(last) if last.0 + last.1 >= start => last.1 = end - last.0,
            _ => runs.push((start, end - start)),
        }
    }
    if runs.len() == 1 && runs[0] == (0, size) {
        return Ok(None);
    }
    Ok(Some(runs))
}

impl<'s, 'env> ArchiveSink<'s, 'env> {
    pub(super) fn new(
        stream: Option<StreamOut<'s, 'env>>,
        fillers: Option<Fillers<'s, 'env>>,
        (index, headers): (IndexWriter, HeaderEncoder),
        files_per_block: usize,
        stats: &'env Stats,
        omit: Option<&'env dyn Omit>,
    ) -> Self {
        let state = State {
            pos: 0,
            index,
            headers,
            first_names: HashMap::new(),
            block: Block::new(0, Vec::new()),
            failed: None,
            small_since_large: false,
            length_set: Some(0),
        };
        ArchiveSink {
            state: Mutex::new(state),
            fillers,
            stream,
            inline_clones: InlineClones::default(),
            files_per_block,
            stats,
            omit,
            restamp: None,
            pack_index: false,
        }
    }

    /// This sink, its index packed (see [`crate::index::packed`]) where `on`.
    pub(super) fn packing_index(self, on: bool) -> Self {
        ArchiveSink {
            pack_index: on,
            ..self
        }
    }

    /// This sink, giving members what `restamp` says (nothing to do when it is the
    /// identity).
    pub(super) fn restamping(self, restamp: &'env Restamp) -> Self {
        let restamp = (!restamp.is_identity()).then_some(restamp);
        ArchiveSink { restamp, ..self }
    }

    /// `entry` as the archive holds it.
    fn restamped<'e>(&self, entry: &'e Entry) -> Result<Cow<'e, Entry>> {
        match self.restamp {
            Some(r) => r.apply(entry),
            None => Ok(Cow::Borrowed(entry)),
        }
    }

    /// Writes the header of the directory `entry` (the root too), unless [`Omit::dir`]
    /// leaves it out.
    fn dir_header(&self, entry: &Entry) -> Result<()> {
        if self.omit.is_some_and(|o| o.dir(entry)) {
            return Ok(());
        }
        self.stats.dirs.fetch_add(1, Relaxed);
        self.write_plain(&*self.restamped(&tar_path(entry))?)
    }

    /// Whether `member` is to be left out (see [`Omit`]).
    fn omitted(&self, member: &Entry, data: Option<BorrowedFd<'_>>) -> bool {
        self.omit.is_some_and(|o| o.omit(member, data))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether writing the archive has failed, so nothing more need be laid out.
    fn has_failed(&self, st: &State) -> bool {
        st.failed.is_some()
            || self
                .fillers
                .as_ref()
                .is_some_and(|f| f.shared().has_failed())
            || self
                .stream
                .as_ref()
                .is_some_and(|s| s.shared().has_failed())
    }

    /// Lays out `entry` at the end of the archive, records it in the index and puts
    /// its headers into the current block. None when the index failed (recorded in
    /// `st.failed`).
    fn place(st: &mut State, entry: &Entry, shape: Option<&DataShape<'_>>) -> Option<Placed> {
        debug_assert_eq!(st.pos, st.block.at + st.block.len() as u64);
        let (header, names) = st.headers.encode(entry, shape, st.pos);
        let header_at = st.pos;
        let data_at = header_at + header.len() as u64;
        let stored = shape.map_or(0, |s| s.stored);
        st.pos = data_at + pad_block(stored);
        let (size, link, rdev) = match &entry.kind {
            EntryKind::File { size, .. } => (*size, Vec::new(), 0),
            EntryKind::Symlink { target } => (0, target.clone(), 0),
            EntryKind::HardLink { target } => (0, target.as_bytes().to_vec(), 0),
            EntryKind::CharDevice { rdev } | EntryKind::BlockDevice { rdev } => {
                (0, Vec::new(), *rdev)
            }
            _ => (0, Vec::new(), 0),
        };
        let m = &entry.meta;
        let pushed = st.index.push(&IndexEntry {
            path: entry.path.as_bytes().to_vec(),
            kind: index_kind(&entry.kind),
            mode: m.mode,
            uid: m.uid,
            gid: m.gid,
            mtime: (m.mtime.sec, m.mtime.nsec),
            atime: (m.atime.sec, m.atime.nsec),
            size,
            header_offset: header_at,
            data_offset: data_at,
            stored,
            rdev,
            hash: None,
            link,
            runs: shape
                .and_then(|s| s.runs)
                .map(<[_]>::to_vec)
                .unwrap_or_default(),
            xattrs: m
                .xattrs
                .iter()
                .map(|x| (x.name.clone(), x.value.clone()))
                .collect(),
            names: Some(names),
        });
        match pushed {
            Ok(slot) => {
                st.block.push_bytes(header);
                Some(Placed { data_at, slot })
            }
            Err(e) => {
                st.failed.get_or_insert(e);
                None
            }
        }
    }

    /// Sends the current block on and starts the next at `pos`.
    fn send_block(&self, st: &mut State) {
        let buf = match (&self.fillers, &self.stream) {
            (Some(f), _) => f.shared().buffer(),
            (None, Some(s)) => s.shared().buffer(),
            (None, None) => Vec::new(),
        };
        let block = std::mem::replace(&mut st.block, Block::new(st.pos, buf));
        if block.is_empty() {
            return;
        }
        match &self.fillers {
            Some(fillers) => {
                self.keep_length_ahead(st);
                fillers.send(Job::Block(block));
                st.record_hashes(fillers.shared().take_hashes());
            }
            None => {
                if let Some(out) = &self.stream {
                    out.send(Job::Block(block));
                    st.record_hashes(out.shared().take_hashes());
                }
            }
        }
    }

    /// Writes an entry that has no data (or, for a later name of its inode, a
    /// hardlink member).
    fn write_plain(&self, entry: &Entry) -> Result<()> {
        let mut st = self.lock();
        if self.has_failed(&st) {
            return Ok(());
        }
        let link = st
            .earlier_name(entry)
            .map(|first| hardlink_to(entry, first));
        let member = link.as_ref().unwrap_or(entry);
        if member.kind != EntryKind::Dir && self.omitted(member, None) {
            return Ok(());
        }
        self.place_plain(&mut st, member);
        Ok(())
    }

    /// Lays out an entry that has no data.
    fn place_plain(&self, st: &mut State, entry: &Entry) {
        if Self::place(st, entry, None).is_some() && st.block.is_full(self.files_per_block) {
            self.send_block(st);
        }
    }

    fn write_file(
        &self,
        entry: &Entry,
        fd: OwnedFd,
        maybe_sparse: bool,
        stamp: Option<Stamp>,
    ) -> Result<()> {
        let EntryKind::File { size } = &entry.kind else {
            return Ok(());
        };
        let size = *size;
        let runs = stored_runs(fd.as_fd(), size, maybe_sparse)
            .map_err(|e| Error::new(&entry.path, "find holes", e))?;
        let stored = runs.as_ref().map_or(size, |r| r.iter().map(|x| x.1).sum());
        let shape = DataShape {
            stored,
            runs: runs.as_deref(),
        };
        let mut st = self.lock();
        if self.has_failed(&st) {
            return Ok(());
        }
        if let Some(first) = st.earlier_name(entry) {
            let link = hardlink_to(entry, first);
            if self.omitted(&link, None) {
                return Ok(());
            }
            self.stats.files.fetch_add(1, Relaxed);
            self.place_plain(&mut st, &link);
            return Ok(());
        }
        if self.omitted(entry, Some(fd.as_fd())) {
            return Ok(());
        }
        let Some(placed) = Self::place(&mut st, entry, Some(&shape)) else {
            return Ok(());
        };
        if runs.is_none() && size < SMALL {
            // Its content is read into the block by whoever writes the block.
            let within = st.block.push_slot(size as usize);
            st.block.files.push(Small {
                fd,
                within,
                len: size as usize,
                slot: placed.slot,
                path: entry.path.clone(),
                stamp,
            });
            st.small_since_large = true;
            if st.block.is_full(self.files_per_block) {
                self.send_block(&mut st);
            }
        } else {
            // The headers go with the block; the data region is moved on its own.
            self.send_block(&mut st);
            let mut at = placed.data_at;
            let segs = runs
                .unwrap_or_else(|| vec![(0, size)])
                .into_iter()
                .map(|(o, l)| {
                    let seg = Segment {
                        file_off: o,
                        src: o,
                        dst: at,
                        len: l,
                    };
                    at += l;
                    seg
                })
                .collect();
            let large = Large {
                fd,
                segs,
                size,
                slot: placed.slot,
                path: entry.path.clone(),
                stamp,
            };
            // A clone into the archive waits for the archive's writes in flight: the
            // walker clones itself only between large files, when the fillers have no
            // blocks of small files to write.
            let inline =
                !std::mem::replace(&mut st.small_since_large, false) && self.inline_clones.wanted();
            self.keep_length_ahead(&mut st);
            match &self.fillers {
                Some(fillers) if inline && fillers.shared().clones() => {
                    drop(st);
                    let started = Instant::now();
                    fillers.shared().run(Job::Large(large));
                    self.inline_clones.took(started.elapsed());
                    st = self.lock();
                }
                Some(fillers) => fillers.send(Job::Large(large)),
                None => {
                    if let Some(out) = &self.stream {
                        out.send(Job::Large(large));
                    }
                }
            }
        }
        drop(st);
        self.stats.files.fetch_add(1, Relaxed);
        self.stats.bytes.fetch_add(size, Relaxed);
        Ok(())
    }

    /// Keeps the archive file at least as long as what has been laid out, so the
    /// fillers' writes never extend it and no data is cloned or copied past its end.
    /// Both are slow on XFS: a clone past the end first flushes and unmaps the archive
    /// from its end to the clone's (by hand, kernel tree warm, pack took 1.15-1.26 s
    /// with the length kept ahead against 1.66-1.90 s without, 4 alternating runs
    /// each), and setting the length of a file that writes have extended first writes
    /// back everything written since the last time.
    ///
    /// The length is set ahead of the layout by as many bytes as the index holds so
    /// far, and so never past the archive's final length (the end-of-archive blocks
    /// and the whole index come after the layout): XFS starts writing back all of a
    /// file that was cut shorter when it is closed (0.12-0.22 s of a 1 s pack of the
    /// kernel tree, by hand, when the length was kept 256 MiB ahead and cut back).
    fn keep_length_ahead(&self, st: &mut State) {
        let (Some(fillers), Some(len)) = (&self.fillers, st.length_set) else {
            return;
        };
        if st.pos > len {
            let ahead = st.pos + END_BLOCKS.len() as u64 + st.index.bytes_so_far();
            // Only a matter of speed: writes extend the file anyway.
            st.length_set = fillers.shared().set_len(ahead).ok().map(|()| ahead);
        }
    }

    /// Ends the archive: the last block, end-of-archive blocks, index and footer.
    pub(super) fn finish(self, file: Option<BorrowedFd<'_>>) -> io::Result<u64> {
        self.send_block(&mut self.lock());
        let ArchiveSink {
            state,
            fillers,
            stream,
            ..
        } = self;
        let mut st = state.into_inner().unwrap_or_else(PoisonError::into_inner);
        let mut out = None;
        let last_hashes = match (fillers, stream) {
            (Some(fillers), _) => fillers.finish(),
            (None, Some(stream)) => stream.finish().map(|(w, hashes)| {
                out = Some(w);
                hashes
            }),
            (None, None) => Ok(Vec::new()),
        };
        if let Ok(hashes) = last_hashes.as_ref() {
            st.record_hashes(hashes.iter().copied());
        }
        if let Some(e) = last_hashes.err().or_else(|| st.failed.take()) {
            // What was laid out stays, as tar leaves what it wrote.
            return Err(e);
        }
        // The end-of-archive blocks, then the index.
        let tar_end = st.pos + END_BLOCKS.len() as u64;
        let index = std::mem::take(&mut st.index);
        let end = match (file, out.as_mut()) {
            (Some(fd), _) => {
                write_full(fd, &END_BLOCKS, st.pos)?;
                let mut at = tar_end;
                let len = index.finish_as(self.pack_index, tar_end, |bytes| {
                    write_full(fd, bytes, at)?;
                    at += bytes.len() as u64;
                    Ok(())
                })?;
                // The last write ended the file, unless its length was set further
                // (it never is: see `keep_length_ahead`). Setting it again without
                // need would count as cutting it short, which XFS makes costly.
                if st.length_set.is_some_and(|set| set > tar_end + len) {
                    rustix::fs::ftruncate(fd, tar_end + len)?;
                }
                tar_end + len
            }
            (None, Some(w)) => {
                w.write_all(&END_BLOCKS)?;
                // The tar data ends here: a compressing writer may end its frame, so
                // the index is read without decompressing members (`pack --zstd`).
                w.flush()?;
                let len = index.finish_as(self.pack_index, tar_end, |bytes| w.write_all(bytes))?;
                w.flush()?;
                tar_end + len
            }
            (None, None) => tar_end + index.finish(tar_end, |_| Ok(()))?,
        };
        Ok(end)
    }
}

impl State {
    /// Patches content hashes into the index; a failure to is the pack's failure.
    fn record_hashes(&mut self, hashes: impl IntoIterator<Item = (HashSlot, u128)>) {
        for (slot, hash) in hashes {
            if let Err(e) = self.index.set_hash(slot, hash) {
                self.failed.get_or_insert(e);
                return;
            }
        }
    }
}

/// Writes a large file's stored runs to a stream through memory, padded to a tar
/// block; returns the content hash (free here: the bytes pass through memory anyway).
/// A file that shrank is reported and its missing bytes written as zeros, so the
/// stream keeps the laid-out shape; only a failure to write the stream is returned.
pub(super) fn stream_runs(
    f: &Large,
    w: &mut dyn Write,
    reporter: &dyn Reporter,
) -> io::Result<u128> {
    let mut h = ContentHash::new();
    let mut stored = 0u64;
    let mut shrank = None;
    for seg in &f.segs {
        h.zeros(seg.file_off.saturating_sub(h.at()));
        with_buffer(seg.len, |buf| {
            let mut done = 0;
            while done < seg.len {
                let want = (seg.len - done).min(buf.len() as u64) as usize;
                let chunk = &mut buf[..want];
                if shrank.is_some() {
                    chunk.fill(0);
                } else if let Err(e) = read_or_zeros(f.fd.as_fd(), chunk, seg.src + done) {
                    shrank = Some(e);
                }
                h.update(chunk);
                w.write_all(chunk)?;
                done += want as u64;
            }
            io::Result::Ok(())
        })?;
        stored += seg.len;
    }
    w.write_all(&vec![0u8; (pad_block(stored) - stored) as usize])?;
    if let Some(e) = shrank {
        reporter.error(&Error::new(&f.path, "read", e));
    } else {
        f.check_unchanged(reporter);
    }
    Ok(h.finish(f.size))
}

/// The root is stored as `./`, directories with a trailing `/`, as tar does.
fn tar_path(entry: &Entry) -> Entry {
    let mut e = entry.clone();
    if e.path.is_root() {
        e.path = RelPath::from_bytes(b"./".to_vec());
    } else if e.kind == EntryKind::Dir {
        let mut p = e.path.as_bytes().to_vec();
        p.push(b'/');
        e.path = RelPath::from_bytes(p);
    }
    e
}

impl TreeSink for ArchiveSink<'_, '_> {
    type Dir = ();

    fn root(&self, entry: &Entry) -> Result<()> {
        self.dir_header(entry)
    }

    fn dir(&self, _: &(), entry: &Entry) -> Result<()> {
        self.dir_header(entry)
    }

    fn leaf(&self, _: &(), entry: &Entry, data: Option<FileData<'_>>) -> Result<()> {
        let entry = &*self.restamped(entry)?;
        match (&entry.kind, data) {
            (
                EntryKind::File { .. },
                Some(FileData::File {
                    fd,
                    maybe_sparse,
                    stamp,
                }),
            ) => self.write_file(entry, fd, maybe_sparse, stamp),
            (EntryKind::File { .. }, _) => Err(Error::new(
                &entry.path,
                "pack",
                io::Error::other("file data is not a local file"),
            )),
            // Tar has no form for a socket (the walk gives none to this sink).
            (EntryKind::Socket, _) => Err(Error::new(
                &entry.path,
                "pack",
                io::Error::other("a socket has no tar form"),
            )),
            _ => {
                self.stats.others.fetch_add(1, Relaxed);
                self.write_plain(entry)
            }
        }
    }
}

#[cfg(test)]
#[path = "pack_tests.rs"]
mod tests;
