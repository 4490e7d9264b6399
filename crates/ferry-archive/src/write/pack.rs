//! `pack`: the local walker pushing a tree into a ferry archive.
//!
//! Into an archive file, each entry's region is reserved under a lock (its headers,
//! padding and data are laid out at once), and the data is moved outside the lock by the
//! cheapest path: cloned into the aligned region where the filesystem allows, else
//! copied in the kernel, else through memory. Into a pipe, entries are written in
//! order through memory. Either way the index and footer follow the end-of-archive
//! blocks.

use super::header::{encode, pad_block, DataShape, ALIGN};
use crate::index::{Index, IndexEntry, Kind};
use ferry_core::data::{data_runs, with_buffer, write_full, Mover, Reflink, Segment, Sparse};
use ferry_core::entry::{Entry, EntryKind, InodeKey, RelPath};
use ferry_core::error::{Error, Reporter, Result};
use ferry_core::sink::{FileData, TreeSink};
use ferry_core::walk::{walk, WalkConfig};
use ferry_core::Stats;
use std::collections::HashMap;
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;

/// Where the archive goes.
pub enum Output {
    /// A regular file: regions are written in place, data may be cloned into it.
    File(OwnedFd),
    /// A pipe or terminal: everything is written in order.
    Stream(Box<dyn Write + Send>),
}

/// How to pack.
#[derive(Clone, Debug)]
pub struct PackOptions {
    /// Walker threads. One keeps each directory's entries together in the archive.
    pub threads: usize,
    /// Clone policy for file data.
    pub reflink: Reflink,
    /// Hash every file's content into the index even where the data never passes
    /// through memory (clones and kernel copies).
    pub hash: bool,
}

impl Default for PackOptions {
    fn default() -> Self {
        PackOptions {
            threads: 1,
            reflink: Reflink::Auto,
            hash: false,
        }
    }
}

struct State {
    /// Next free archive offset.
    pos: u64,
    index: Vec<IndexEntry>,
    /// The first name written for each multiply-linked inode.
    first_names: HashMap<InodeKey, RelPath>,
    stream: Option<Box<dyn Write + Send>>,
    /// The first failure to write the archive: everything after it is moot.
    failed: Option<io::Error>,
}

/// A tree sink that writes a ferry archive.
pub struct ArchiveSink<'a> {
    file: Option<OwnedFd>,
    state: Mutex<State>,
    mover: Mover,
    hash: bool,
    stats: &'a Stats,
}

/// Where one entry's bytes go, decided under the lock.
struct Placed {
    header_at: u64,
    header: Vec<u8>,
    data_at: u64,
    slot: usize,
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

impl<'a> ArchiveSink<'a> {
    /// A sink writing to `out`.
    pub fn new(out: Output, opts: &PackOptions, stats: &'a Stats) -> Self {
        let (file, stream) = match out {
            Output::File(fd) => (Some(fd), None),
            Output::Stream(w) => (None, Some(w)),
        };
        // Holes in the source are found here and stored as sparse runs; zero blocks in
        // dense files are not looked for, so the kernel may move the data.
        let mover = Mover::new(opts.reflink, Sparse::Never);
        let state = State {
            pos: 0,
            index: Vec::new(),
            first_names: HashMap::new(),
            stream,
            failed: None,
        };
        ArchiveSink {
            file,
            state: Mutex::new(state),
            mover,
            hash: opts.hash,
            stats,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Lays out `entry` at the end of the archive and records it in the index.
    fn place(st: &mut State, entry: &Entry, shape: Option<&DataShape<'_>>) -> Placed {
        let enc = encode(entry, shape, st.pos);
        let header_at = st.pos;
        let data_at = header_at + enc.data_start;
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
        st.index.push(IndexEntry {
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
        });
        Placed {
            header_at,
            header: enc.bytes,
            data_at,
            slot: st.index.len() - 1,
        }
    }

    fn fail(&self, path: &RelPath, e: io::Error) -> Error {
        let err = Error::dst(
            path,
            "write archive",
            io::Error::new(e.kind(), e.to_string()),
        );
        let mut st = self.lock();
        if st.failed.is_none() {
            st.failed = Some(e);
        }
        err
    }

    /// Writes an entry that has no data.
    fn write_plain(&self, entry: &Entry) -> Result<()> {
        let mut st = self.lock();
        if st.failed.is_some() {
            return Ok(());
        }
        let placed = Self::place(&mut st, entry, None);
        let written = match (&self.file, st.stream.as_mut()) {
            (Some(fd), _) => write_full(fd.as_fd(), &placed.header, placed.header_at),
            (None, Some(w)) => w.write_all(&placed.header),
            (None, None) => Ok(()),
        };
        drop(st);
        written.map_err(|e| self.fail(&entry.path, e))
    }

    fn write_file(&self, entry: &Entry, fd: BorrowedFd<'_>, maybe_sparse: bool) -> Result<()> {
        let EntryKind::File { size, links } = &entry.kind else {
            return Ok(());
        };
        let runs = stored_runs(fd, *size, maybe_sparse)
            .map_err(|e| Error::new(&entry.path, "find holes", e))?;
        let stored = runs.as_ref().map_or(*size, |r| r.iter().map(|x| x.1).sum());
        let shape = DataShape {
            stored,
            runs: runs.as_deref(),
        };
        let mut st = self.lock();
        if st.failed.is_some() {
            return Ok(());
        }
        if let Some((key, _)) = links {
            if let Some(first) = st.first_names.get(key).cloned() {
                drop(st);
                let link = Entry {
                    path: entry.path.clone(),
                    kind: EntryKind::HardLink { target: first },
                    meta: entry.meta.clone(),
                };
                self.stats.files.fetch_add(1, Relaxed);
                return self.write_plain(&link);
            }
            st.first_names.insert(*key, entry.path.clone());
        }
        let placed = Self::place(&mut st, entry, Some(&shape));
        let segs: Vec<Segment> = {
            let mut at = placed.data_at;
            runs.clone()
                .unwrap_or_else(|| vec![(0, *size)])
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
                .collect()
        };
        let hash = match (&self.file, st.stream.as_mut()) {
            (Some(out), _) => {
                drop(st);
                write_full(out.as_fd(), &placed.header, placed.header_at)
                    .and_then(|()| {
                        self.mover
                            .transfer(fd, out.as_fd(), &segs, *size, self.hash)
                    })
                    .map(|m| {
                        self.stats.count_method(m.method);
                        m.hash
                    })
            }
            (None, Some(w)) => {
                let r = w
                    .write_all(&placed.header)
                    .and_then(|()| stream_runs(fd, &segs, *size, w.as_mut()));
                self.stats.count_method(ferry_core::data::Method::Buffered);
                drop(st);
                r.map(Some)
            }
            (None, None) => Ok(None),
        };
        let hash = hash.map_err(|e| self.fail(&entry.path, e))?;
        self.lock().index[placed.slot].hash = hash;
        self.stats.files.fetch_add(1, Relaxed);
        self.stats.bytes.fetch_add(*size, Relaxed);
        Ok(())
    }

    /// Ends the archive: end-of-archive blocks, index and footer.
    pub fn finish(self) -> io::Result<u64> {
        let mut st = self.state.into_inner().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = st.failed.take() {
            return Err(e);
        }
        let tar_end = st.pos + 1024;
        let index = Index {
            entries: std::mem::take(&mut st.index),
            tar_end,
        };
        let mut tail = vec![0u8; 1024];
        tail.extend_from_slice(&index.encode(tar_end));
        match (&self.file, st.stream.as_mut()) {
            (Some(fd), _) => {
                write_full(fd.as_fd(), &tail, st.pos)?;
                rustix::fs::ftruncate(fd, st.pos + tail.len() as u64)?;
            }
            (None, Some(w)) => {
                w.write_all(&tail)?;
                w.flush()?;
            }
            (None, None) => {}
        }
        Ok(st.pos + tail.len() as u64)
    }
}

/// Writes a file's runs to a stream through memory, padded to a tar block; returns the
/// content hash (free here: the bytes pass through memory anyway).
fn stream_runs(
    fd: BorrowedFd<'_>,
    segs: &[Segment],
    size: u64,
    w: &mut dyn Write,
) -> io::Result<u128> {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut covered = 0u64;
    let mut stored = 0u64;
    for seg in segs {
        feed_zeros(&mut h, seg.file_off - covered);
        with_buffer(seg.len, |buf| {
            let mut done = 0;
            while done < seg.len {
                let want = (seg.len - done).min(buf.len() as u64) as usize;
                let got = rustix::io::pread(fd, &mut buf[..want], seg.src + done)?;
                if got == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file shrank while being packed",
                    ));
                }
                h.update(&buf[..got]);
                w.write_all(&buf[..got])?;
                done += got as u64;
            }
            Ok(())
        })?;
        covered = seg.file_off + seg.len;
        stored += seg.len;
    }
    feed_zeros(&mut h, size - covered);
    w.write_all(&vec![0u8; (pad_block(stored) - stored) as usize])?;
    Ok(h.digest128())
}

fn feed_zeros(h: &mut xxhash_rust::xxh3::Xxh3, mut n: u64) {
    let zeros = [0u8; 4096];
    while n > 0 {
        let k = n.min(4096) as usize;
        h.update(&zeros[..k]);
        n -= k as u64;
    }
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

impl TreeSink for ArchiveSink<'_> {
    type Dir = ();

    fn root(&self, entry: &Entry) -> Result<()> {
        self.stats.dirs.fetch_add(1, Relaxed);
        self.write_plain(&tar_path(entry))
    }

    fn dir(&self, _: &(), entry: &Entry) -> Result<()> {
        self.stats.dirs.fetch_add(1, Relaxed);
        self.write_plain(&tar_path(entry))
    }

    fn leaf(&self, _: &(), entry: &Entry, data: Option<FileData<'_>>) -> Result<()> {
        match (&entry.kind, data) {
            (EntryKind::File { .. }, Some(FileData::File { fd, maybe_sparse })) => {
                self.write_file(entry, fd, maybe_sparse)
            }
            (EntryKind::File { .. }, _) => Err(Error::new(
                &entry.path,
                "pack",
                io::Error::other("file data is not a local file"),
            )),
            _ => {
                self.stats.others.fetch_add(1, Relaxed);
                self.write_plain(entry)
            }
        }
    }
}

/// Packs the tree `src` into `out`. Per-path failures go to `reporter` (and count in
/// `stats.errors` only if the reporter counts them); a failure to write the archive
/// ends the job with an error.
pub fn pack(
    src: &Path,
    out: Output,
    skip: Option<InodeKey>,
    opts: &PackOptions,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<u64> {
    let sink = ArchiveSink::new(out, opts, stats);
    let cfg = WalkConfig {
        threads: opts.threads.max(1),
        skip,
        ..WalkConfig::default()
    };
    walk(src, &sink, &cfg, reporter)?;
    sink.finish()
        .map_err(|e| Error::dst(&RelPath::root(), "write archive", e))
}
