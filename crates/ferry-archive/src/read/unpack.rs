//! `unpack`: an archive as a source, pushing its members into the same local-tree sink
//! `copy` uses, so metadata, holes, hardlinks, resume and errors behave the same.
//!
//! A ferry archive file is read through its index: each member's tar header is checked
//! against its index entry, then its data is moved straight from the archive file:
//! cloned where the filesystem allows (the data is block-aligned), else copied. Any
//! other tar, or an archive on a pipe, is streamed through the strict tar reader (see
//! [`super::stream`]). Both hand members to several workers by the same order rules
//! ([`super::schedule`]).
//!
//! Nothing is written outside the destination: member paths are made relative and
//! refused if they contain `..`, and directories are opened without following symlinks
//! (one component at a time, or all at once with `openat2` refusing symlinks and
//! escapes), so a symlink in the archive cannot redirect a later member. Directory
//! metadata is applied last, each directory after all below it.

use super::archive::{header_len, member_in, Archive, ArchiveError, At};
use super::convert::{from_index, runs_of, STRIPPED};
use super::extract::{workers_within_open_files, DirCache, Extractor};
use super::order::Clash;
use super::schedule::{self, Batch, Handout, InFlight, Route, Router, GROUP};
use super::select::Selection;
use crate::index::{IndexEntry, Kind, Names};
use crate::owners::LocalIds;
use ferry_core::data::{Mover, Reflink, Sparse};
use ferry_core::entry::{Entry, EntryKind, RelPath};
use ferry_core::error::{Error, Reporter};
use ferry_core::sink::FileData;
use ferry_core::Stats;
use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

pub use super::stream::{unpack_stream, unpack_stream_mirroring, unpack_stream_pooled};

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
    /// Keep the archive's numeric owners even where its user and group names name
    /// others here (as root; see [`crate::owners`]).
    pub numeric_owner: bool,
    /// Set directories' metadata (modes, owners, times) after their contents; false
    /// leaves it for a caller that unpacks several archives into one tree and sets it
    /// with the last (S3 shards: a 0500 directory set early would refuse the next
    /// shard's files).
    pub dir_metadata: bool,
    /// Replace no file already in the destination: each is an error naming it (`-k`,
    /// GNU tar's `--keep-old-files`).
    pub keep_old: bool,
    /// Keep what arrived of a big file whose data stopped coming, for a rerun's delta
    /// to build on (a network copy; see `ferry_core::local::Update::keep_partial`).
    pub keep_partial: bool,
}

/// Owners by name (see [`crate::owners`]), for an unpack that sets them so: the ids
/// names have here, looked up once each.
#[derive(Default)]
pub(super) struct ByName {
    ids: Mutex<LocalIds>,
}

impl ByName {
    /// For an unpack that sets owners by name: as root (only root sets owners),
    /// unless told to keep the numbers.
    pub(super) fn for_unpack(opts: &UnpackOptions) -> Option<ByName> {
        crate::owners::by_name_here(opts.numeric_owner).then(ByName::default)
    }

    /// `entry` with the owner the names `user` and `group` (its member's) have here, if
    /// that is not the one it has.
    pub(super) fn owned(
        &self,
        user: Option<&[u8]>,
        group: Option<&[u8]>,
        entry: &Entry,
    ) -> Option<Entry> {
        let (uid, gid) = self
            .ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .owner(user, group, &entry.meta)?;
        let mut owned = entry.clone();
        (owned.meta.uid, owned.meta.gid) = (uid, gid);
        Some(owned)
    }

    /// Directory `entry` (what index entry `e` converts to), with the owner its names
    /// have here: the index's names, or in an index of version 1, which kept none, its
    /// header's (checked against `e` once more).
    fn dir(&self, archive: &Archive, e: &IndexEntry, entry: Entry) -> Entry {
        let names = e.names.clone().or_else(|| {
            let tar = archive.check_member(e).ok()?;
            Some(Names {
                user: tar.uname,
                group: tar.gname,
            })
        });
        names
            .and_then(|n| self.owned(n.user.as_deref(), n.group.as_deref(), &entry))
            .unwrap_or(entry)
    }
}

pub(super) fn refused(raw: &[u8], why: &'static str) -> Error {
    Error::new(
        &RelPath::from_bytes(raw.to_vec()),
        "unpack",
        io::Error::other(why),
    )
}

/// Asks the kernel to read every member's headers (and the data of the small ones,
/// which is read with them) ahead, all at once, in as few ranges as they merge into: on
/// a cold cache the workers then wait on one batch of reads, not one random read each.
fn prefetch_headers(archive: &Archive) {
    use rustix::fs::{fadvise, Advice};
    // A compressed archive is read by decompressing: nothing for the kernel to read.
    let Some(file) = archive.file() else {
        return;
    };
    let fd = file.as_fd();
    let advise = |(start, end): (u64, u64)| {
        let _ = fadvise(
            fd,
            start,
            std::num::NonZeroU64::new(end - start),
            Advice::WillNeed,
        );
    };
    let mut range: Option<(u64, u64)> = None;
    // An index that fails now is reported by the walk through it that follows.
    for e in archive
        .entries()
        .into_iter()
        .flatten()
        .map_while(Result::ok)
    {
        let end = read_end(&e);
        range = match range {
            // Only near neighbours merge: a gap is data that may be cloned, not read.
            Some((start, last)) if e.header_offset <= last + BLOCK => Some((start, end)),
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

/// Bytes of a compressed archive's member data decompressed at a time for one file.
const STREAM_BUFFER: usize = 256 << 10;

/// Whether a member's data is read with its headers.
fn read_whole(e: &IndexEntry) -> bool {
    e.stored <= SMALL_MEMBER
}

/// Where what is read of a member with its headers ends: after its data when that is
/// read too, else where the data starts.
fn read_end(e: &IndexEntry) -> u64 {
    if read_whole(e) {
        e.data_offset + e.stored
    } else {
        e.data_offset
    }
}

/// Unpacks the members `select` asks for of an archive file into `dst`. Per-member
/// failures go to `reporter` and the rest goes on, as does a name that selected no
/// member; an archive that cannot be read on is an error.
///
/// A ferry archive is unpacked from its index by `opts.threads` workers (fewer if the
/// limit on open files leaves no room for them), handed runs
/// of members sharing a directory as this thread goes through the index (a directory
/// is made by whichever worker needs it first: its member, or a member below it); then
/// come hardlinks, whose targets now exist (see [`place_links`] for those whose target
/// was not selected, and [`walk_index`] for archives whose order matters); then
/// directory metadata.
pub fn unpack_file(
    archive: &Archive,
    dst: &Path,
    opts: &UnpackOptions,
    select: &Selection,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<(), ArchiveError> {
    if archive.index().is_none() {
        return unpack_stream(archive.scan(), dst, opts, select, stats, reporter).map(drop);
    }
    let mover = Mover::new(opts.reflink, opts.sparse);
    let workers = workers_within_open_files(opts.threads, reporter);
    let ex = Extractor::new(dst, &mover, opts, workers, stats, reporter)?;
    let by_name = ByName::for_unpack(opts);
    let failed: Mutex<Option<ArchiveError>> = Mutex::new(None);
    let fail = |err: ArchiveError| {
        if let Ok(mut f) = failed.lock() {
            f.get_or_insert(err);
        }
    };
    let has_failed = || failed.lock().map_or(true, |f| f.is_some());
    let place = |group: &Group, cache: &mut DirCache, buf: &mut Vec<u8>| {
        let mut done = 0;
        while let Some(first) = group.index.get(done) {
            // Bounds the first member's headers before its bytes are read.
            header_len(first)?;
            let (n, start, end) = span(&group.index[done..]);
            let bytes = match archive.read_into(start, end - start, buf) {
                Ok(bytes) => bytes,
                // Data that cannot be read (a damaged frame of a compressed archive) is
                // an error of each member it holds; the others are placed.
                Err(ArchiveError::Io(err)) => {
                    for (_, entry, _) in group.members(done).take(n) {
                        let why = io::Error::new(err.kind(), format!("read archive: {err}"));
                        ex.reporter.error(&Error::new(&entry.path, "unpack", why));
                    }
                    done += n;
                    continue;
                }
                Err(other) => return Err(other),
            };
            for (e, entry, clash) in group.members(done).take(n) {
                let at = (e.header_offset - start) as usize;
                let bytes = bytes.get(at..).unwrap_or_default();
                let member = ToPlace {
                    index: e,
                    entry,
                    clash,
                };
                place_member(archive, member, bytes, &ex, cache, by_name.as_ref())?;
            }
            done += n;
        }
        Ok::<(), ArchiveError>(())
    };
    let in_flight = InFlight::default();
    let (handout, queue) = schedule::channel::<Group>(workers, &in_flight);
    let mut later = Later::default();
    let walked = std::thread::scope(|s| {
        // Beside the workers, not before them: on a warm cache it only costs time.
        s.spawn(|| prefetch_headers(archive));
        for _ in 0..workers {
            s.spawn(|| {
                let mut cache = DirCache::new();
                let mut buf = Vec::new();
                // Until the queue closes (all handed out, or the walk stopped). After a
                // failure runs are still taken, and dropped, so the walk never waits.
                while let Some(group) = queue.next() {
                    if !has_failed() {
                        if let Err(err) = place(&group, &mut cache, &mut buf) {
                            fail(err);
                        }
                    }
                    in_flight.done();
                }
            });
        }
        // Hardlinks, and members whose order matters, are placed by this thread.
        let (mut cache, mut buf) = (DirCache::new(), Vec::new());
        let mut place_here = |run: Run<'_>| match run {
            Run::Members(group) => place(group, &mut cache, &mut buf),
            Run::Links(links, clashes) => {
                place_links(archive, (links, clashes), select, reporter, |group| {
                    place(group, &mut cache, &mut buf)
                })
            }
        };
        walk_index(
            archive,
            select,
            reporter,
            handout,
            &has_failed,
            &mut place_here,
            &mut later,
        )
    });
    let result = match failed.into_inner().ok().flatten() {
        Some(err) => Err(err),
        None => walked,
    };
    // In reverse archive order: a directory's member comes before everything below it
    // (pack writes it on entering the directory), so each now comes after all below
    // it, and a subtree stays together for the cache of open ancestors.
    // A directory named twice (only once members were placed in order) takes its last
    // member's metadata, the first met here.
    let mut unread = None;
    let mut finished = HashSet::new();
    let dirs = later.dirs.into_iter().rev().filter_map(|pos| {
        match archive.entry_at(pos) {
            // Converted once already; a member that failed then was reported.
            Ok(e) => from_index(&e, select.renaming())
                .ok()
                .filter(|entry| !later.in_order || finished.insert(entry.path.clone()))
                .map(|entry| match &by_name {
                    Some(by_name) => by_name.dir(archive, &e, entry),
                    None => entry,
                }),
            Err(err) => {
                unread.get_or_insert(err);
                None
            }
        }
    });
    ex.finish(dirs, later.root_named, result.is_err());
    let result = result.and(unread.map_or(Ok(()), Err));
    if result.is_ok() {
        select.report_unmatched("unpack", reporter);
    }
    result
}

/// Places the hardlinks at index positions `links` a group at a time through `place`
/// (one group in memory however many links there are), each as its clash in `clashes`
/// says (none where that is shorter, as it is for links placed before members were
/// placed in order, which clash with none). A link whose target the
/// selection left out cannot link to it: the first such link of each target is made
/// from the target's member instead (the last of that name before the link, as a whole
/// extraction would have it; its data under the link's name), and the target's other
/// links link to that one, so they still share an inode.
fn place_links(
    archive: &Archive,
    (links, clashes): (&[u64], &[Clash]),
    select: &Selection,
    reporter: &dyn Reporter,
    mut place: impl FnMut(&Group) -> Result<(), ArchiveError>,
) -> Result<(), ArchiveError> {
    let target_of = |entry: &Entry| match &entry.kind {
        EntryKind::HardLink { target } if !select.covers(target) => Some(target.clone()),
        _ => None,
    };
    // Each left-out target, with where its first link is in the index.
    let mut first_links = HashMap::<RelPath, u64>::new();
    for &pos in links {
        let e = archive.entry_at(pos)?;
        if let Some(target) = from_index(&e, select.renaming())
            .ok()
            .as_ref()
            .and_then(target_of)
        {
            first_links.entry(target).or_insert(pos);
        }
    }
    let members = match first_links.is_empty() {
        true => HashMap::new(),
        false => archive.last_named(&first_links, select.renaming())?,
    };
    // The link made from each target's member, which its other links link to.
    let mut made = HashMap::<RelPath, RelPath>::new();
    for (n, chunk) in links.chunks(GROUP).enumerate() {
        let mut group = Group::default();
        for (i, &pos) in chunk.iter().enumerate() {
            let clash = clashes.get(n * GROUP + i).copied().unwrap_or_default();
            let e = archive.entry_at(pos)?;
            // Converted once already; a member that failed then was reported.
            let Ok(mut entry) = from_index(&e, select.renaming()) else {
                continue;
            };
            let Some(target) = target_of(&entry) else {
                group.push_clashing(e, entry, clash);
                continue;
            };
            if let Some(first) = made.get(&target) {
                entry.kind = EntryKind::HardLink {
                    target: first.clone(),
                };
                group.push_clashing(e, entry, clash);
                continue;
            }
            let member = members.get(&target).map(|(_, t)| t);
            match member
                .filter(|t| t.kind != Kind::HardLink)
                .map(|t| (t, from_index(t, select.renaming())))
            {
                Some((t, Ok(copy))) => {
                    made.insert(target, entry.path.clone());
                    let path = entry.path;
                    group.push_clashing(t.clone(), Entry { path, ..copy }, clash);
                }
                _ => reporter.error(&Error::new(
                    &entry.path,
                    "unpack",
                    io::Error::other(format!(
                        "a hardlink to {target}, with no member of that name before it to \
                         copy"
                    )),
                )),
            }
        }
        place(&group)?;
    }
    Ok(())
}

/// What the walk through the index leaves for after the workers, as where each entry
/// starts in the index (not the entries: memory stays small however many members
/// there are): directories, for their metadata at the end, and hardlinks, placed once
/// their targets exist.
#[derive(Default)]
struct Later {
    dirs: Vec<u64>,
    links: Vec<u64>,
    /// A directory member names the destination itself.
    root_named: bool,
    /// From some member on, members were placed in archive order (see [`OrderGuard`](super::order::OrderGuard)):
    /// a name may be given twice.
    in_order: bool,
}

/// A run of members for one worker: their index entries, what each says to make
/// (converted and checked once, by the walk), and how each depends on earlier members
/// (see [`Extractor::put`]).
#[derive(Default)]
struct Group {
    index: Vec<IndexEntry>,
    entries: Vec<Entry>,
    clashes: Vec<Clash>,
}

impl Group {
    fn push(&mut self, index: IndexEntry, entry: Entry) {
        self.push_clashing(index, entry, Clash::default());
    }

    fn push_clashing(&mut self, index: IndexEntry, entry: Entry, clash: Clash) {
        self.index.push(index);
        self.entries.push(entry);
        self.clashes.push(clash);
    }

    /// The members from the `skip`th on: index entry, entry, and how it clashes.
    fn members(&self, skip: usize) -> impl Iterator<Item = (&IndexEntry, &Entry, Clash)> {
        let clashes = self.clashes.iter().copied();
        self.index
            .iter()
            .zip(&self.entries)
            .zip(clashes)
            .skip(skip)
            .map(|((i, e), a)| (i, e, a))
    }

    fn len(&self) -> usize {
        self.index.len()
    }
}

impl Batch for Group {
    fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
}

/// What the walking thread places itself once order matters: a run of members, or of
/// hardlinks (by index position, with how each clashes: see [`place_links`]).
enum Run<'r> {
    Members(&'r Group),
    Links(&'r [u64], &'r [Clash]),
}

/// Members the walking thread places in archive order, gathered into runs of one kind
/// (a run is placed before the next one starts).
struct InOrder<'p> {
    members: Group,
    links: Vec<u64>,
    link_clashes: Vec<Clash>,
    place: &'p mut dyn FnMut(Run<'_>) -> Result<(), ArchiveError>,
}

impl<'p> InOrder<'p> {
    fn new(place: &'p mut dyn FnMut(Run<'_>) -> Result<(), ArchiveError>) -> Self {
        InOrder {
            members: Group::default(),
            links: Vec::new(),
            link_clashes: Vec::new(),
            place,
        }
    }

    fn member(
        &mut self,
        index: IndexEntry,
        entry: Entry,
        clash: Clash,
    ) -> Result<(), ArchiveError> {
        if !self.links.is_empty() || self.members.len() >= GROUP {
            self.flush()?;
        }
        self.members.push_clashing(index, entry, clash);
        Ok(())
    }

    fn link(&mut self, pos: u64, clash: Clash) -> Result<(), ArchiveError> {
        if !self.members.is_empty() || self.links.len() >= GROUP {
            self.flush()?;
        }
        self.links.push(pos);
        self.link_clashes.push(clash);
        Ok(())
    }

    /// Places what was gathered.
    fn flush(&mut self) -> Result<(), ArchiveError> {
        if !self.members.is_empty() {
            (self.place)(Run::Members(&std::mem::take(&mut self.members)))?;
        }
        if !self.links.is_empty() {
            let clashes = std::mem::take(&mut self.link_clashes);
            (self.place)(Run::Links(&std::mem::take(&mut self.links), &clashes))?;
        }
        Ok(())
    }
}

/// Goes through the index in order and hands runs of members sharing a directory to
/// the workers (runs are cut so a big directory is shared by several workers), leaving
/// in `later` what comes after them; an error if the index could not be read on.
///
/// From the first member whose outcome depends on the order of earlier ones (a name
/// given twice, a member below a symlink: see [`OrderGuard`](super::order::OrderGuard)) on, this thread places
/// the members itself, in archive order, once the workers have placed all handed out,
/// and the hardlinks among those: the same tree each time, and the one a sequential
/// extraction makes.
fn walk_index(
    archive: &Archive,
    select: &Selection,
    reporter: &dyn Reporter,
    handout: Handout<'_, Group>,
    stop: &dyn Fn() -> bool,
    place_here: &mut dyn FnMut(Run<'_>) -> Result<(), ArchiveError>,
    later: &mut Later,
) -> Result<(), ArchiveError> {
    let mut group = Group::default();
    let mut router = Router::with_room_for(archive.index().map_or(0, |i| i.len()));
    // Used once `later.in_order` is set.
    let mut ordered = InOrder::new(place_here);
    for (i, item) in archive.entries_at().into_iter().flatten().enumerate() {
        if i % GROUP == 0 && stop() {
            break;
        }
        let (pos, e) = match item {
            Ok(read) => read,
            Err(err) => {
                handout.send(&mut group);
                return Err(err.into());
            }
        };
        let entry = match from_index(&e, select.renaming()) {
            Ok(entry) => entry,
            Err(STRIPPED) => continue,
            Err(why) => {
                reporter.error(&refused(&e.path, why));
                continue;
            }
        };
        if !select.selects(&entry.path) {
            continue;
        }
        // A link whose target was left out is made from the target's member (see
        // `place_links`), wherever that is.
        let depends = router.links_ahead(&entry) && !select_leaves_out_target(select, &entry);
        let (route, clash) = router.route(&entry, group.len(), depends);
        if route == (Route::InOrder { first: true }) {
            // The links gathered so far link to the members before this one.
            if !place_after_workers(&handout, &mut group, later, &mut ordered, stop)? {
                return Ok(());
            }
            later.in_order = true;
        }
        let is_link = matches!(entry.kind, EntryKind::HardLink { .. });
        if entry.kind == EntryKind::Dir {
            later.root_named |= entry.path.is_root();
            later.dirs.push(pos);
        }
        match route {
            Route::InOrder { .. } if is_link => ordered.link(pos, clash)?,
            Route::InOrder { .. } => ordered.member(e, entry, clash)?,
            Route::Aside => later.links.push(pos),
            Route::Workers { new_run } => {
                if new_run {
                    handout.send(&mut group);
                }
                group.push(e, entry);
            }
        }
    }
    place_after_workers(&handout, &mut group, later, &mut ordered, stop).map(drop)
}

/// Hands `group` out and waits until the workers have placed every run handed out;
/// then, unless one failed (`stop`), places what `ordered` holds and the hardlinks in
/// `later`, whose targets are all in place by now. False when a worker failed: its
/// error ends the unpack.
fn place_after_workers(
    handout: &Handout<'_, Group>,
    group: &mut Group,
    later: &mut Later,
    ordered: &mut InOrder<'_>,
    stop: &dyn Fn() -> bool,
) -> Result<bool, ArchiveError> {
    handout.send(group);
    handout.in_flight.wait_all_placed();
    if stop() {
        return Ok(false);
    }
    // One of the two is empty: the links before members were placed in order, or
    // those among them.
    ordered.flush()?;
    if !later.links.is_empty() {
        (ordered.place)(Run::Links(&std::mem::take(&mut later.links), &[]))?;
    }
    Ok(true)
}

/// Whether `entry` is a hardlink whose target `select` leaves out.
fn select_leaves_out_target(select: &Selection, entry: &Entry) -> bool {
    matches!(&entry.kind, EntryKind::HardLink { target } if !select.covers(target))
}

/// How many of `entries` (members in archive order) to read in one call, and the range of the
/// archive that holds their headers and the data of the small ones: members are taken
/// while each follows the last across no more than padding, up to [`SPAN`] bytes, and
/// up to the first one whose data is not read with it (its data comes next).
fn span(entries: &[IndexEntry]) -> (usize, u64, u64) {
    let Some(first) = entries.first() else {
        return (0, 0, 0);
    };
    let start = first.header_offset;
    let (mut end, mut n, mut last) = (read_end(first), 1, first);
    for e in &entries[1..] {
        let next_end = read_end(e);
        let adjacent = e.header_offset >= end && e.header_offset - end < BLOCK;
        if !read_whole(last) || !adjacent || next_end - start > SPAN {
            break;
        }
        (end, n, last) = (next_end, n + 1, e);
    }
    (n, start, end)
}

/// The most bytes read at once for a run of members.
const SPAN: u64 = 256 << 10;

/// The largest gap between members' bytes that is still read through (or prefetched
/// through): alignment padding.
const BLOCK: u64 = 4096;

/// A member the walk handed out: its index entry, what that converts to, and how its
/// outcome depends on earlier members.
struct ToPlace<'m> {
    index: &'m IndexEntry,
    entry: &'m Entry,
    clash: Clash,
}

/// Checks one member, whose bytes from its first header on start `bytes` (its headers,
/// and its data when small), against its index entry and places it.
fn place_member(
    archive: &Archive,
    member: ToPlace<'_>,
    bytes: &[u8],
    ex: &Extractor<'_>,
    cache: &mut DirCache,
    by_name: Option<&ByName>,
) -> Result<(), ArchiveError> {
    let ToPlace {
        index: e,
        entry,
        clash,
    } = member;
    let (tar, small) = member_in(e, bytes, read_whole(e))?;
    if entry.kind == EntryKind::Dir {
        // Made now; its owner is set with the rest of its metadata, at the end.
        if let Err(err) = ex.make_dir(entry, clash, cache) {
            ex.reporter.error(&err);
        }
        return Ok(());
    }
    let (user, group) = (tar.uname.as_deref(), tar.gname.as_deref());
    let owned = by_name.and_then(|b| b.owned(user, group, entry));
    let entry = owned.as_ref().unwrap_or(entry);
    let mut runs = runs_of(e.sparse_map(), e.size);
    // A map out of order (a tar from elsewhere) is laid out in file order first.
    let laid_out = match (&entry.kind, ferry_core::sparse::in_order(&runs)) {
        (EntryKind::File { .. }, false) => {
            let source = archive.source();
            let dir = Some(ex.root.fd().as_fd());
            let laid = ferry_core::sparse::lay_out(&runs, dir, |stored, buf| {
                source.read_exact_at(buf, e.data_offset + stored)
            });
            match laid {
                Ok((file, map)) => {
                    runs = map;
                    Some(file)
                }
                Err(err) => {
                    ex.reporter
                        .error(&Error::new(&entry.path, "read its data", err));
                    return Ok(());
                }
            }
        }
        _ => None,
    };
    // A compressed archive's data is decompressed as it is read: never cloned.
    let mut decompressing = archive.file().is_none().then(|| {
        let at = At {
            file: archive.source(),
            pos: e.data_offset,
        };
        io::BufReader::with_capacity(STREAM_BUFFER, at)
    });
    let data = match (&entry.kind, small, archive.file(), &mut decompressing) {
        (EntryKind::File { .. }, ..) if laid_out.is_some() => {
            laid_out.as_ref().map(|file| FileData::Range {
                fd: file.as_fd(),
                offset: 0,
                runs: &runs,
                recorded_hash: e.hash,
            })
        }
        (EntryKind::File { .. }, Some(bytes), ..) => Some(FileData::Bytes {
            bytes,
            runs: &runs,
            recorded_hash: e.hash,
        }),
        (EntryKind::File { .. }, None, Some(file), _) => Some(FileData::Range {
            fd: file.as_fd(),
            offset: e.data_offset,
            runs: &runs,
            recorded_hash: e.hash,
        }),
        (EntryKind::File { .. }, None, None, Some(reader)) => Some(FileData::Stream {
            reader,
            runs: &runs,
        }),
        _ => None,
    };
    if let Err(err) = ex.put(entry, data, clash, cache) {
        ex.reporter.error(&err);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file member with `head` header bytes at `at` and `stored` data bytes.
    fn member(at: u64, head: u64, stored: u64) -> IndexEntry {
        IndexEntry {
            path: b"f".to_vec(),
            kind: Kind::File,
            mode: 0o644,
            uid: 0,
            gid: 0,
            mtime: (0, 0),
            atime: (0, 0),
            size: stored,
            header_offset: at,
            data_offset: at + head,
            stored,
            rdev: 0,
            hash: None,
            link: Vec::new(),
            runs: Vec::new(),
            xattrs: Vec::new(),
            names: None,
        }
    }

    #[test]
    fn a_span_stops_at_large_data_gaps_and_its_limit() {
        let big = SMALL_MEMBER + 1;
        let entries = vec![
            member(0, 1024, 100),       // small: ends at 1124
            member(1536, 512, 3000),    // after padding: ends at 5048
            member(5120, 3072, big),    // large: its header is read, its data is not
            member(8192 + big, 512, 1), // after the large data: a new span
            member(20 << 20, 512, 1),   // far away: a new span
        ];
        assert_eq!(span(&entries), (3, 0, 8192));
        assert_eq!(span(&entries[3..]), (1, 8192 + big, 8192 + big + 513));
        assert_eq!(span(&entries[4..]), (1, 20 << 20, (20 << 20) + 513));
        // Many adjacent small members: cut at SPAN bytes.
        let many: Vec<IndexEntry> = (0..200).map(|i| member(i * 8192, 512, 7680)).collect();
        let (n, start, end) = span(&many);
        assert_eq!((n as u64, start, end), (SPAN / 8192, 0, SPAN));
    }
}
