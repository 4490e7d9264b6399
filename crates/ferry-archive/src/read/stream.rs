//! Unpacking a tar read as a stream (a pipe, a compressed archive, a tar file without
//! a ferry index), its members placed by several workers as they arrive.
//!
//! One thread, the reader, reads the stream: it must, a pipe is read once and in order.
//! It reads each member's headers and stored data and hands runs of members of one
//! directory, their data in buffers from a pool of fixed size ([`Share`]: the caller's, or one of its own) (the data in flight
//! is bounded however fast the stream comes), to the workers, which place runs in any
//! order, as the workers of an unpack through an index do: [`Router`] applies the same
//! order rules (see [`super::order::OrderGuard`]). A member whose data does not fit in
//! a run's buffer goes to a worker alone, its data following in chunks from the pool
//! as the reader reads them, the worker writing each as it comes. Hardlinks wait until
//! the members before them are placed. From the first member whose outcome depends on
//! an earlier one's (a name given twice, a member below a symlink an earlier member
//! made, a hardlink to a name not given yet), the reader waits until the workers have
//! placed everything handed out, then places the rest itself, in archive order, from
//! the stream: the tree is the one a sequential extraction makes, on every run.
//!
//! The reader hashes file data as it reads it, for the check against the index that
//! follows a ferry archive ([`super::tail`]); a member the workers did not write from
//! those bytes (up to date already, or failed) is left out of that check, as it was
//! when members were placed in order.
//!
//! A file is written under its final name, its times set last (see the local-tree
//! sink), and removed if writing it fails: a stream that breaks inside a member leaves
//! no file of it, and the reader reports the break once, naming the member.

use super::acl;
use super::convert::{from_tar, runs_of, STRIPPED};
use super::extract::{workers_within_open_files, DirCache, Extractor};
use super::order::Clash;
use super::schedule::{self, Batch, Handout, InFlight, Route, Router};
use super::select::Selection;
use super::tail::{ContentHasher, Hashing, StreamHashes};
use super::unpack::{refused, ByName, UnpackOptions};
use super::ArchiveError;
use crate::owners::LocalIds;
use crate::tar::{Reader, TarEntry};
use ferry_core::data::Mover;
use ferry_core::delete::DeleteOptions;
use ferry_core::entry::{Entry, EntryKind, RelPath};
use ferry_core::error::{Error, Reporter};
use ferry_core::pool::{PoolBuf, Share};
use ferry_core::sink::FileData;
use ferry_core::Stats;
use std::io::{self, BufRead, Read};
use std::ops::Range;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::{mpsc, Mutex, PoisonError};

/// Bytes of a pooled buffer: the data of a run of small members, or one chunk of a
/// large member's.
const BUFFER: usize = 1 << 20;

/// Buffers in the pool, so at most this many MiB of data are in flight (64 MiB).
const BUFFERS: usize = 64;

/// Members whose stored data is larger than this go to a worker alone, their data in
/// chunks; smaller ones share a run's buffer.
const SMALL: u64 = 256 << 10;

// A small member fits in a buffer of the pool an unpack makes for itself.
const _: () = assert!(BUFFER as u64 >= SMALL);

/// Hardlinks kept aside at most: then the reader waits for the workers and places them.
const LINKS: usize = 1024;

/// A buffer of the pool, given back when dropped.
type Buf<'p> = PoolBuf<'p>;

/// A member for the workers: what it says to make and where its stored data is.
struct Member<'p> {
    entry: Entry,
    header_offset: u64,
    runs: Vec<(u64, u64)>,
    data: Data<'p>,
}

enum Data<'p> {
    /// Not a file.
    None,
    /// Its stored bytes: this range of its run's buffer.
    Held(Range<usize>),
    /// Its stored bytes, in chunks as the reader reads them; `Err`: the stream broke
    /// inside it (the reader reports that).
    Chunks(mpsc::Receiver<Result<Buf<'p>, ()>>),
}

/// A run of members for one worker, and the buffer holding their data.
#[derive(Default)]
struct Run<'p> {
    members: Vec<Member<'p>>,
    buf: Option<Buf<'p>>,
}

impl Batch for Run<'_> {
    fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}

/// A large member's data as a worker reads it: the chunks the reader sends.
struct Chunks<'p> {
    chunks: mpsc::Receiver<Result<Buf<'p>, ()>>,
    current: Option<Buf<'p>>,
    at: usize,
    /// The reader said the stream broke.
    broke: bool,
}

impl Read for Chunks<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let left = self.fill_buf()?;
        let n = left.len().min(out.len());
        out[..n].copy_from_slice(&left[..n]);
        self.consume(n);
        Ok(n)
    }
}

/// The chunks are the writer's buffers: a worker writes straight from them.
impl BufRead for Chunks<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        loop {
            let has_more = self
                .current
                .as_ref()
                .is_some_and(|cur| self.at < cur.bytes.len());
            if has_more {
                break;
            }
            // Back to the pool before the next one is waited for.
            self.current = None;
            match self.chunks.recv() {
                Ok(Ok(chunk)) => (self.current, self.at) = (Some(chunk), 0),
                Ok(Err(())) => {
                    self.broke = true;
                    return Err(io::Error::other("the stream broke"));
                }
                // Every chunk was sent.
                Err(mpsc::RecvError) => return Ok(&[]),
            }
        }
        Ok(self
            .current
            .as_ref()
            .and_then(|cur| cur.bytes.get(self.at..))
            .unwrap_or_default())
    }

    fn consume(&mut self, n: usize) {
        self.at += n;
    }
}

impl Chunks<'_> {
    /// Whether every byte was read; reads and drops what was not (the reader waits
    /// for its buffers), noting whether the stream broke.
    fn finish(&mut self) -> bool {
        let whole = matches!(self.read(&mut [0u8; 1]), Ok(0));
        self.current = None;
        while let Ok(chunk) = self.chunks.recv() {
            self.broke |= chunk.is_err();
        }
        whole && !self.broke
    }
}

/// What the workers share.
struct Workers<'x> {
    ex: &'x Extractor<'x>,
    /// Header offsets of members not placed (or, for a file, whose data was not
    /// written from the stream's bytes), so not checked against the index after it.
    unchecked: Mutex<Vec<u64>>,
}

impl Workers<'_> {
    fn place_run(&self, run: Run<'_>, cache: &mut DirCache) {
        let held = run.buf.as_ref().map_or(&[][..], |b| &b.bytes[..]);
        for member in run.members {
            self.place(member, held, cache);
        }
    }

    /// Places `member`, whose data (if held) is in `held`.
    fn place(&self, member: Member<'_>, held: &[u8], cache: &mut DirCache) {
        let Member {
            entry,
            header_offset,
            runs,
            data,
        } = member;
        let none = Clash::default();
        if entry.kind == EntryKind::Dir {
            // Made now; its metadata is set at the end.
            if let Err(err) = self.ex.make_dir(&entry, none, cache) {
                self.ex.reporter.error(&err);
                self.not_checked(header_offset);
            }
            return;
        }
        let written = match data {
            Data::None => self.ex.put(&entry, None, none, cache).map(|()| false),
            Data::Held(range) => {
                let mut bytes = held.get(range).unwrap_or_default();
                let data = FileData::Buffered {
                    reader: &mut bytes,
                    runs: &runs,
                };
                let put = self.ex.put(&entry, Some(data), none, cache);
                put.map(|()| bytes.is_empty())
            }
            Data::Chunks(chunks) => {
                let mut chunks = Chunks {
                    chunks,
                    current: None,
                    at: 0,
                    broke: false,
                };
                let data = FileData::Buffered {
                    reader: &mut chunks,
                    runs: &runs,
                };
                let put = self.ex.put(&entry, Some(data), none, cache);
                let whole = chunks.finish();
                if chunks.broke {
                    // Said once, by the reader, naming the member; the file is gone.
                    self.not_checked(header_offset);
                    return;
                }
                put.map(|()| whole)
            }
        };
        let is_file = matches!(entry.kind, EntryKind::File { .. });
        match written {
            Ok(true) => {}
            Ok(false) if !is_file => {}
            Ok(false) => self.not_checked(header_offset),
            Err(err) => {
                self.ex.reporter.error(&err);
                self.not_checked(header_offset);
            }
        }
    }

    fn not_checked(&self, header_offset: u64) {
        let mut unchecked = self
            .unchecked
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        unchecked.push(header_offset);
    }
}

/// Unpacks the members `select` asks for of a tar stream (any tar: ferry's, GNU tar's,
/// bsdtar's) into `dst`, by `opts.threads` workers (see the module's doc). A hardlink
/// whose target was not selected is an error: the target's data has gone by. Returns
/// the content hashes of the file members unpacked, for
/// [`check_tail`](super::tail::check_tail) to compare with a ferry archive's index,
/// which follows in the stream; `input` is left just past the end-of-archive blocks.
pub fn unpack_stream(
    input: impl Read,
    dst: &Path,
    opts: &UnpackOptions,
    select: &Selection,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<StreamHashes, ArchiveError> {
    let pool = Share::private(BUFFERS, BUFFER);
    unpack_stream_pooled(input, dst, opts, select, &pool, stats, reporter)
}

/// As [`unpack_stream`], the data in flight in buffers of `pool` (a server's share
/// of its one pool): buffers of at least 256 KiB; the reader holds at most one while
/// it waits for another.
pub fn unpack_stream_pooled(
    input: impl Read,
    dst: &Path,
    opts: &UnpackOptions,
    select: &Selection,
    pool: &Share,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<StreamHashes, ArchiveError> {
    unpack_stream_mirroring(input, dst, opts, select, Some(pool), None, stats, reporter)
}

/// As [`unpack_stream_pooled`] (or, without a pool, [`unpack_stream`]), for a copy
/// that deletes (`--delete`): a directory in the way of a member that is not one is
/// removed by `in_the_way`'s rules, as a local copy removes it ([`LocalTreeSink::deleting_in_the_way`](ferry_core::local::LocalTreeSink::deleting_in_the_way)).
#[allow(clippy::too_many_arguments)]
pub fn unpack_stream_mirroring(
    input: impl Read,
    dst: &Path,
    opts: &UnpackOptions,
    select: &Selection,
    pool: Option<&Share>,
    in_the_way: Option<DeleteOptions<'_>>,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<StreamHashes, ArchiveError> {
    let private;
    let pool = match pool {
        Some(pool) => pool,
        None => {
            private = Share::private(BUFFERS, BUFFER);
            &private
        }
    };
    let mover = Mover::new(opts.reflink, opts.sparse);
    let mut reader = Reader::new(input);
    // Nothing is made before the input shows it is an archive.
    let first = reader.next_entry();
    super::warnings::report(&mut reader, reporter);
    let first = first?;
    let workers = workers_within_open_files(opts.threads, reporter);
    // The workers, and the reader once members come in order.
    let ex = Extractor::new(dst, &mover, opts, workers + 1, stats, reporter)?
        .deleting_in_the_way(in_the_way);
    let shared = Workers {
        ex: &ex,
        unchecked: Mutex::default(),
    };
    let in_flight = InFlight::default();
    let (handout, queue) = schedule::channel::<Run<'_>>(workers, &in_flight);
    let (result, tar_end, mut dirs, dir_offsets, mut hashes) = std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                let mut cache = DirCache::new();
                while let Some(run) = queue.next() {
                    shared.place_run(run, &mut cache);
                    in_flight.done();
                }
            });
        }
        let mut walk = Walk {
            reader,
            select,
            reporter,
            by_name: ByName::for_unpack(opts),
            acl_ids: LocalIds::default(),
            ex: &ex,
            cache: DirCache::new(),
            router: Router::with_room_for(0),
            handout,
            pool,
            run: Run::default(),
            links: Vec::new(),
            dirs: Vec::new(),
            dir_offsets: Vec::new(),
            hashes: StreamHashes::default(),
        };
        let result = walk.walk(first);
        // Whatever ended the walk, what was handed out and the links before are placed,
        // as they were when the reader placed every member as it came.
        walk.place_after_workers();
        let offset = walk.reader.offset();
        // Dropping the handout with the rest of `walk` ends the workers.
        (result, offset, walk.dirs, walk.dir_offsets, walk.hashes)
    });
    // In descending byte order of paths, which puts each directory after its
    // descendants (a path sorts after its proper prefixes) and keeps a subtree
    // together, so the cache of open ancestors serves it. A directory named twice
    // keeps its members' order, so the last one's metadata is set last, and wins.
    dirs.sort_by(|a: &Entry, b| b.path.as_bytes().cmp(a.path.as_bytes()));
    let root_named = dirs.iter().any(|e| e.path.is_root());
    let unset = ex.finish(dirs, root_named, result.is_err());
    if result.is_ok() {
        select.report_unmatched("unpack", reporter);
    }
    let mut unchecked = shared
        .unchecked
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    // A directory whose metadata failed (said then) gets no times after the stream.
    let unset: std::collections::HashSet<RelPath> = unset.into_iter().collect();
    unchecked.extend(
        dir_offsets
            .into_iter()
            .filter(|(path, _)| unset.contains(path))
            .map(|(_, at)| at),
    );
    hashes.leave_out(unchecked);
    hashes.set_tar_end(tar_end);
    result.map(|()| hashes)
}

/// The reader's side of [`unpack_stream`].
struct Walk<'a, 'p, R: Read> {
    reader: Reader<R>,
    select: &'a Selection,
    reporter: &'a dyn Reporter,
    by_name: Option<ByName>,
    acl_ids: LocalIds,
    ex: &'a Extractor<'a>,
    /// The reader's own, for the members it places.
    cache: DirCache,
    router: Router,
    handout: Handout<'a, Run<'p>>,
    pool: &'p Share,
    /// The run being gathered.
    run: Run<'p>,
    /// Hardlinks kept aside (see [`Route::Aside`]).
    links: Vec<Entry>,
    /// Directory members, for their metadata at the end.
    dirs: Vec<Entry>,
    /// The paths and header offsets of the directory members noted in `hashes`.
    dir_offsets: Vec<(RelPath, u64)>,
    hashes: StreamHashes,
}

impl<'p, R: Read> Walk<'_, 'p, R> {
    /// Reads the members from `first` on to the end of the archive, or to the first
    /// error that stops it.
    fn walk(&mut self, first: Option<TarEntry>) -> Result<(), ArchiveError> {
        let mut next: Result<_, crate::tar::TarError> = Ok(first);
        loop {
            let t = match next {
                Ok(Some(t)) => t,
                Ok(None) => {
                    if self.reader.unterminated() {
                        super::tail::report_cut_short(self.reporter, self.reader.offset());
                    }
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            };
            if let Some(entry) = self.entry(&t) {
                let mut t = t;
                let dir = Some(self.ex.root.fd().as_fd());
                let laid = match entry.kind {
                    EntryKind::File { .. } => self.reader.lay_out(&mut t, dir),
                    _ => Ok(()),
                };
                match laid {
                    Ok(()) => self.member(&t, entry)?,
                    Err(e) if self.reader.has_failed() => return Err(broken(&entry, e.into())),
                    // No room for the laid-out copy: this member is left out.
                    Err(e) => self.reporter.error(&Error::new(
                        &entry.path,
                        "unpack",
                        io::Error::other(format!("lay out its sparse map: {e}")),
                    )),
                }
            }
            next = self.reader.next_entry();
            super::warnings::report(&mut self.reader, self.reporter);
        }
    }

    /// What member `t` says to make, if it is to be made: converted, selected, with
    /// its ACLs and owner; None after reporting why not, or if not selected.
    fn entry(&mut self, t: &TarEntry) -> Option<Entry> {
        let entry = match from_tar(t, self.select.renaming()) {
            Ok(entry) => entry,
            Err(STRIPPED) => return None,
            Err(why) => {
                self.reporter.error(&refused(&t.path, why));
                return None;
            }
        };
        if !self.select.selects(&entry.path) {
            return None;
        }
        if let EntryKind::HardLink { target } = &entry.kind {
            if !self.select.covers(target) {
                self.reporter.error(&Error::new(
                    &entry.path,
                    "unpack",
                    io::Error::other(format!(
                        "a hardlink to {target}, which was not asked for: name it too"
                    )),
                ));
                return None;
            }
        }
        let entry = with_acls(entry, &t.pax, &mut self.acl_ids, self.reporter);
        let (user, group) = (t.uname.as_deref(), t.gname.as_deref());
        Some(
            match self
                .by_name
                .as_ref()
                .and_then(|b| b.owned(user, group, &entry))
            {
                Some(owned) => owned,
                None => entry,
            },
        )
    }

    /// Sends `entry` (member `t`, its data next in the stream) where the order rules
    /// say (see [`Router`]).
    fn member(&mut self, t: &TarEntry, entry: Entry) -> Result<(), ArchiveError> {
        let depends = self.router.links_ahead(&entry);
        let (route, clash) = self.router.route(&entry, self.run.members.len(), depends);
        if clash.repeat {
            self.hashes.placed_again(&entry.path, t.header_offset);
        }
        if let EntryKind::HardLink { target } = &entry.kind {
            self.hashes.linked(target);
        }
        if route == (Route::InOrder { first: true }) {
            self.place_after_workers();
        }
        if entry.kind == EntryKind::Dir {
            self.dirs.push(entry.clone());
        }
        match route {
            Route::InOrder { .. } => return self.place_here(t, entry, clash),
            Route::Aside => {
                self.links.push(entry);
                if self.links.len() >= LINKS {
                    self.place_after_workers();
                }
            }
            Route::Workers { new_run } => {
                if new_run {
                    self.handout.send(&mut self.run);
                }
                self.hand_out(t, entry)?;
            }
        }
        Ok(())
    }

    /// Adds `entry` to the run, with its data read into the run's buffer, or hands it
    /// out alone with its data following in chunks.
    fn hand_out(&mut self, t: &TarEntry, entry: Entry) -> Result<(), ArchiveError> {
        let runs = runs_of(t.sparse.as_deref(), t.size);
        let header_offset = t.header_offset;
        if !matches!(entry.kind, EntryKind::File { .. }) {
            self.note_other(t, &entry);
            self.run.members.push(Member {
                entry,
                header_offset,
                runs,
                data: Data::None,
            });
            return Ok(());
        }
        let mut hasher = ContentHasher::new(&runs);
        let data = if t.stored > SMALL {
            self.hand_out_chunked(t, &entry, runs.clone(), &mut hasher)?;
            None
        } else {
            // At most `SMALL` bytes: they fit in a buffer.
            let len = t.stored as usize;
            let filled = self.run.buf.as_ref().map(|b| b.bytes.len());
            let room = self.pool.buffer_size();
            if len > 0 && filled.is_none_or(|filled| filled + len > room) {
                self.handout.send(&mut self.run);
                // Given back before another is taken (a run left empty may hold one).
                self.run.buf = None;
                self.run.buf = Some(self.pool.take());
            }
            let start = self.run.buf.as_ref().map_or(0, |b| b.bytes.len());
            if let Some(buf) = self.run.buf.as_mut() {
                let read = read_into(&mut self.reader, &mut buf.bytes, len, &mut hasher);
                if let Err(err) = read {
                    buf.bytes.truncate(start);
                    return Err(broken(&entry, err));
                }
            }
            Some(Data::Held(start..start + len))
        };
        self.hashes
            .note_placed(t, hasher.finish(t.size), &entry.path);
        if let Some(data) = data {
            self.run.members.push(Member {
                entry,
                header_offset,
                runs,
                data,
            });
        }
        Ok(())
    }

    /// Notes member `t`, not a file, placed as `entry`, for its times after the stream
    /// (a directory only where directories get their metadata).
    fn note_other(&mut self, t: &TarEntry, entry: &Entry) {
        if entry.kind == EntryKind::Dir {
            if !self.ex.sets_dir_metadata() {
                return;
            }
            self.dir_offsets.push((entry.path.clone(), t.header_offset));
        }
        self.hashes.note_placed(t, None, &entry.path);
    }

    /// Hands file member `t` (as `entry`, its data stored as `runs`) to a worker alone,
    /// then its data in chunks from the pool as they are read, each hashed into
    /// `hasher`.
    fn hand_out_chunked(
        &mut self,
        t: &TarEntry,
        entry: &Entry,
        runs: Vec<(u64, u64)>,
        hasher: &mut ContentHasher<'_>,
    ) -> Result<(), ArchiveError> {
        let (send, chunks) = mpsc::channel();
        self.handout.send(&mut self.run);
        // A run left empty may hold a buffer: given back before chunks are taken.
        self.run.buf = None;
        self.run.members.push(Member {
            entry: entry.clone(),
            header_offset: t.header_offset,
            runs,
            data: Data::Chunks(chunks),
        });
        self.handout.send(&mut self.run);
        let mut left = t.stored;
        while left > 0 {
            let mut chunk = self.pool.take();
            let len = left.min(self.pool.buffer_size() as u64) as usize;
            if let Err(err) = read_into(&mut self.reader, &mut chunk.bytes, len, hasher) {
                let _ = send.send(Err(()));
                return Err(broken(entry, err));
            }
            left -= len as u64;
            // The worker takes every chunk (it reads on to the end, whatever it
            // writes), and gives each back to the pool.
            let _ = send.send(Ok(chunk));
        }
        Ok(())
    }

    /// Hands out the run gathered, waits until the workers have placed every run
    /// handed out, then places the hardlinks kept aside, whose targets are now in
    /// place, in archive order.
    fn place_after_workers(&mut self) {
        self.handout.send(&mut self.run);
        self.handout.in_flight.wait_all_placed();
        for link in std::mem::take(&mut self.links) {
            if let Err(err) = self.ex.put(&link, None, Clash::default(), &mut self.cache) {
                self.reporter.error(&err);
            }
        }
    }

    /// Places member `t` (as `entry`, clashing as `clash` says) on this thread, its
    /// data read from the stream as it is written.
    fn place_here(&mut self, t: &TarEntry, entry: Entry, clash: Clash) -> Result<(), ArchiveError> {
        if entry.kind == EntryKind::Dir {
            match self.ex.make_dir(&entry, clash, &mut self.cache) {
                Ok(()) => self.note_other(t, &entry),
                Err(err) => self.reporter.error(&err),
            }
            return Ok(());
        }
        let runs = runs_of(t.sparse.as_deref(), t.size);
        let mut hasher = ContentHasher::new(&runs);
        let mut body = self.reader.data();
        let mut hashing = Hashing {
            inner: &mut body,
            hasher: &mut hasher,
        };
        let is_file = matches!(entry.kind, EntryKind::File { .. });
        let data = is_file.then_some(FileData::Stream {
            reader: &mut hashing,
            runs: &runs,
        });
        let put = self.ex.put(&entry, data, clash, &mut self.cache);
        if put.is_ok() {
            let hash = hasher.finish(t.size).filter(|_| is_file);
            self.hashes.note_placed(t, hash, &entry.path);
        }
        match put {
            // Reading its data failed, and the stream cannot be read on: that ends
            // the unpack, said once, naming the member.
            Err(err) if self.reader.has_failed() => Err(ArchiveError::Member {
                path: entry.path.to_string(),
                why: err.os.to_string(),
            }),
            Err(err) => {
                self.reporter.error(&err);
                Ok(())
            }
            Ok(()) => Ok(()),
        }
    }
}

/// The error that ends the unpack when reading `entry`'s data failed: the stream
/// cannot be read on.
fn broken(entry: &Entry, err: io::Error) -> ArchiveError {
    ArchiveError::Member {
        path: entry.path.to_string(),
        why: err.to_string(),
    }
}

/// Reads the `len` next bytes of the current member's stored data onto the end of
/// `buf`, hashing them.
fn read_into<R: Read>(
    reader: &mut Reader<R>,
    buf: &mut Vec<u8>,
    len: usize,
    hasher: &mut ContentHasher<'_>,
) -> io::Result<()> {
    let start = buf.len();
    buf.resize(start + len, 0);
    reader.data().read_exact(&mut buf[start..])?;
    hasher.update(&buf[start..]);
    Ok(())
}

/// `entry` with the ACLs its member's pax records `pax` hold as text (GNU tar's and
/// bsdtar's `--acls`; see [`acl`]), where it has no attribute of that name already. An
/// ACL that cannot be made is left out, with a warning naming the member, as GNU tar
/// warns and goes on.
fn with_acls(
    mut entry: Entry,
    pax: &[(Vec<u8>, Vec<u8>)],
    ids: &mut LocalIds,
    reporter: &dyn Reporter,
) -> Entry {
    if !pax.iter().any(|(key, _)| acl::is_acl_key(key)) {
        return entry;
    }
    match acl::acl_xattrs(pax, ids) {
        Ok(acls) => {
            for acl in acls {
                if !entry.meta.xattrs.iter().any(|x| x.name == acl.name) {
                    entry.meta.xattrs.push(acl);
                }
            }
        }
        Err(why) => reporter.warn(&format!("{}: ACL not set: {why}", entry.path)),
    }
    entry
}
