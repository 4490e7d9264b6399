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
use ferry_core::data::{
    data_runs, with_buffer, write_full, Method, Mover, Reflink, Segment, Sparse,
};
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
    /// Bytes of the archive from `gathered_at` on, laid out but not yet written: headers
    /// and small files, written in large pieces.
    gathered: Vec<u8>,
    gathered_at: u64,
}

/// Files smaller than this are read into memory and written with their headers.
const SMALL: u64 = 64 << 10;
/// Gathered bytes are written once there are this many.
const GATHER: usize = 1 << 20;

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
            gathered: Vec::with_capacity(GATHER + SMALL as usize * 2),
            gathered_at: 0,
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
        // Everything before `pos` is written or gathered: entries follow each other.
        debug_assert_eq!(st.pos, st.gathered_at + st.gathered.len() as u64);
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

    /// Writes out what has been gathered; the next gathered byte follows it.
    fn flush(&self, st: &mut State) -> io::Result<()> {
        if !st.gathered.is_empty() {
            match (&self.file, st.stream.as_mut()) {
                (Some(fd), _) => write_full(fd.as_fd(), &st.gathered, st.gathered_at)?,
                (None, Some(w)) => w.write_all(&st.gathered)?,
                (None, None) => {}
            }
            st.gathered_at += st.gathered.len() as u64;
            st.gathered.clear();
        }
        Ok(())
    }

    /// Appends the next bytes of the archive, writing them out once there are enough.
    fn gather(&self, st: &mut State, bytes: &[u8]) -> io::Result<()> {
        st.gathered.extend_from_slice(bytes);
        if st.gathered.len() >= GATHER {
            self.flush(st)?;
        }
        Ok(())
    }

    /// Writes an entry that has no data.
    fn write_plain(&self, entry: &Entry) -> Result<()> {
        let mut st = self.lock();
        if st.failed.is_some() {
            return Ok(());
        }
        let placed = Self::place(&mut st, entry, None);
        let written = self.gather(&mut st, &placed.header);
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
        // A small file is read before the lock is taken, so workers read in parallel.
        let small = match runs {
            None if *size < SMALL => {
                Some(read_small(fd, *size).map_err(|e| Error::new(&entry.path, "read", e))?)
            }
            _ => None,
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
        let written = match small {
            Some(data) => {
                st.index[placed.slot].hash = Some(xxhash_rust::xxh3::xxh3_128(&data));
                let padding = [0u8; 512];
                let pad = (pad_block(stored) - stored) as usize;
                let r = self
                    .gather(&mut st, &placed.header)
                    .and_then(|()| self.gather(&mut st, &data))
                    .and_then(|()| self.gather(&mut st, &padding[..pad]));
                drop(st);
                self.stats.count_method(Method::Buffered);
                r
            }
            None => self.write_large(st, &placed, fd, runs.as_deref(), *size),
        };
        written.map_err(|e| self.fail(&entry.path, e))?;
        self.stats.files.fetch_add(1, Relaxed);
        self.stats.bytes.fetch_add(*size, Relaxed);
        Ok(())
    }

    /// Writes a large file placed at `placed`: its headers now, then its data, into a
    /// file outside the lock by the cheapest path, into a stream in order.
    fn write_large<'s>(
        &'s self,
        mut st: std::sync::MutexGuard<'s, State>,
        placed: &Placed,
        fd: BorrowedFd<'_>,
        runs: Option<&[(u64, u64)]>,
        size: u64,
    ) -> io::Result<()> {
        st.gathered.extend_from_slice(&placed.header);
        self.flush(&mut st)?;
        // The data region is written directly; gathering resumes after it.
        st.gathered_at = st.pos;
        let mut at = placed.data_at;
        let segs: Vec<Segment> = runs
            .map_or_else(|| vec![(0, size)], <[_]>::to_vec)
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
        let (hash, method) = match (&self.file, st.stream.as_mut()) {
            (Some(out), _) => {
                drop(st);
                let moved = self
                    .mover
                    .transfer(fd, out.as_fd(), &segs, size, self.hash)?;
                st = self.lock();
                (moved.hash, moved.method)
            }
            (None, Some(w)) => (
                Some(stream_runs(fd, &segs, size, w.as_mut())?),
                Method::Buffered,
            ),
            (None, None) => (None, Method::Buffered),
        };
        st.index[placed.slot].hash = hash;
        self.stats.count_method(method);
        Ok(())
    }

    /// Ends the archive: end-of-archive blocks, index and footer.
    pub fn finish(self) -> io::Result<u64> {
        let mut st = self.lock();
        if let Some(e) = st.failed.take() {
            return Err(e);
        }
        self.flush(&mut st)?;
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

/// The whole content of a small file, which must still be `size` bytes long.
fn read_small(fd: BorrowedFd<'_>, size: u64) -> io::Result<Vec<u8>> {
    let mut data = vec![0u8; size as usize];
    read_exact_at(fd, &mut data, 0)?;
    Ok(data)
}

/// Fills `buf` from `fd` at `at`; a file that ends sooner shrank while being packed.
fn read_exact_at(fd: BorrowedFd<'_>, buf: &mut [u8], at: u64) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match rustix::io::pread(fd, &mut buf[got..], at + got as u64) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file shrank while being packed",
                ))
            }
            Ok(n) => got += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
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
                read_exact_at(fd, &mut buf[..want], seg.src + done)?;
                h.update(&buf[..want]);
                w.write_all(&buf[..want])?;
                done += want as u64;
            }
            io::Result::Ok(())
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
    let threads = opts.threads.max(1);
    let cfg = WalkConfig {
        threads,
        skip,
        // One worker reads one file at a time: read ahead for it.
        prefetch: if threads == 1 {
            ferry_core::copy::default_threads()
        } else {
            0
        },
        ..WalkConfig::default()
    };
    walk(src, &sink, &cfg, reporter)?;
    sink.finish()
        .map_err(|e| Error::dst(&RelPath::root(), "write archive", e))
}
