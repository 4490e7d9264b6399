//! The sender's plan: what of its tree the receiver lacks, judged against the
//! receiver's manifest as the sender's walk meets each entry, without a round trip per
//! file. The pack asks it which members to leave out ([`Omit`]); besides, it tells
//! each entry that will be made or replaced (`-i`, `-v`: told once, whoever prints
//! them), keeps the metadata of entries whose data is up to date but whose mode,
//! owner, times or xattrs may differ (sent after the data, so their data is not sent
//! again), and once the walk is done names what the receiver has and the source does
//! not (`--delete`).
//!
//! Up to date means what `ferry copy` means: a file of the same size and mtime (with
//! `--checksum`, the same content), a symlink with the same target, a fifo, a device
//! with the same number. A later name of an inode (a hardlink member) is up to date
//! when its first name was and both names share one inode there. A directory the
//! receiver has with the same metadata is left out too (its header is most of what an
//! incremental run would send otherwise); where the job makes, replaces or removes
//! something in it, the receiver is told to give it back its times after the data
//! ([`MetaChange::restore`]), quietly: its metadata was never out of date.
//!
//! Whether metadata differs is judged here from the manifest, leaning to "it may": the
//! receiver compares again with what it can set (it knows whether it runs as root and
//! which groups it may give) and tells only what it changes. Owners are the same when
//! their names are, or else their numbers, as the receiver maps them by name.

use crate::deltas::{Candidate, DELTA_MIN};
use crate::frame::PutFields;
use crate::manifest::{DstListing, RecKind, Record};
use crate::meta_wire::WireMeta;
use ferry_archive::owners::OwnerNames;
use ferry_archive::write::pack::Omit;
use ferry_core::changes::{Changes, Kind, Reasons, What};
use ferry_core::entry::{Entry, EntryKind, RelPath};
use ferry_core::filter::Filter;
use ferry_core::Stats;
use std::collections::{HashMap, HashSet};
use std::os::fd::BorrowedFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Mutex, PoisonError};

/// How the sender plans.
#[derive(Clone, Copy, Default)]
pub struct PlanOptions<'a> {
    /// Compare content too.
    pub checksum: bool,
    /// Leave out a file the destination has with a later mtime (`-u`).
    pub keep_newer: bool,
    /// Send nothing: every member is left out once told and counted (`--dry-run`).
    pub dry_run: bool,
    /// Told of every entry to be made or replaced, and of directories' metadata.
    pub changes: Option<&'a dyn Changes>,
    /// Big files the receiver has another version of are left out of the archive, to
    /// be sent as deltas ([`crate::deltas`]).
    pub deltas: bool,
}

/// A metadata-only change: the entry's path, its kind, and the metadata to give it.
pub(crate) struct MetaChange {
    pub(crate) path: RelPath,
    pub(crate) kind: Kind,
    pub(crate) meta: WireMeta,
    /// A directory whose header was left out, up to date, given back the times the
    /// job's changes inside it moved: carried out without being told as a change.
    pub(crate) restore: bool,
}

/// The bit of a `Meta` record's kind byte that marks a [`MetaChange::restore`].
pub(crate) const RESTORE: u8 = 0x80;

impl MetaChange {
    /// Appends it to a `Meta` frame's payload.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let restore = if self.restore { RESTORE } else { 0 };
        out.put_u8(kind_byte(self.kind) | restore);
        out.put_bytes(self.path.as_bytes());
        self.meta.encode(out);
    }
}

/// A change listing's kind as one byte.
pub(crate) fn kind_byte(kind: Kind) -> u8 {
    match kind {
        Kind::File => 0,
        Kind::Dir => 1,
        Kind::Symlink => 2,
        Kind::Special => 3,
    }
}

/// The kind a byte names.
pub(crate) fn kind_of_byte(b: u8) -> Option<Kind> {
    Some(match b {
        0 => Kind::File,
        1 => Kind::Dir,
        2 => Kind::Symlink,
        3 => Kind::Special,
        _ => return None,
    })
}

/// The sender's plan against one manifest (see the module's doc).
pub struct Plan<'a> {
    manifest: &'a DstListing,
    opts: PlanOptions<'a>,
    stats: &'a Stats,
    /// Members left out as up to date that have other names (their later names may be
    /// left out too).
    omitted_firsts: Mutex<HashSet<RelPath>>,
    /// The names of this end's owners, looked up once each.
    names: Mutex<OwnerNames>,
    /// Metadata-only changes, sent after the data.
    metas: Mutex<Vec<MetaChange>>,
    /// Files to send as deltas after the plan.
    candidates: Mutex<Vec<Candidate>>,
    /// Directories of the destination where the source has something else: with
    /// `--delete` the receiver's unpack removes each with what it holds.
    replaced_dirs: Mutex<Vec<RelPath>>,
    /// Directories whose headers were left out, with their metadata here, and whether
    /// the receiver makes or replaces something in them (a member sent below).
    dirs_left_out: Mutex<HashMap<RelPath, (WireMeta, bool)>>,
}

impl<'a> Plan<'a> {
    /// A plan against `manifest`, counting in `stats`.
    pub fn new(manifest: &'a DstListing, opts: PlanOptions<'a>, stats: &'a Stats) -> Self {
        Plan {
            manifest,
            opts,
            stats,
            omitted_firsts: Mutex::default(),
            names: Mutex::default(),
            metas: Mutex::default(),
            replaced_dirs: Mutex::default(),
            candidates: Mutex::default(),
            dirs_left_out: Mutex::default(),
        }
    }

    /// Notes that `member` is sent: its directory's contents change there (a
    /// directory comes before what it holds, so a left-out one is known by now).
    fn sent(&self, member: &Entry) {
        let mut left_out = self
            .dirs_left_out
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if left_out.is_empty() || member.path.is_root() {
            return;
        }
        if let Some((_, touched)) = left_out.get_mut(&member.path.parent()) {
            *touched = true;
        }
    }

    /// The directories left out whose times the job's changes in them move, to be
    /// given them back after the data ([`MetaChange::restore`]); deletions give back
    /// their directories' times themselves.
    pub(crate) fn take_restores(&self) -> Vec<MetaChange> {
        let left_out = std::mem::take(
            &mut *self
                .dirs_left_out
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        let mut restores: Vec<MetaChange> = left_out
            .into_iter()
            .filter(|(_, (_, touched))| *touched)
            .map(|(path, (meta, _))| MetaChange {
                path,
                kind: Kind::Dir,
                meta,
                restore: true,
            })
            .collect();
        restores.sort_unstable_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
        restores
    }

    /// Whether `member`, whose data differs from the receiver's `rec`, goes as a delta:
    /// a big file the receiver has a version of, each of one name only.
    fn goes_as_delta(&self, member: &Entry, rec: &Record) -> bool {
        let EntryKind::File { size } = member.kind else {
            return false;
        };
        self.opts.deltas
            && !self.opts.dry_run
            && size >= DELTA_MIN
            && rec.kind == RecKind::File
            && rec.size > 0
            && rec.nlink <= 1
            && member.links.is_none()
    }

    /// The files to send as deltas.
    pub(crate) fn take_candidates(&self) -> Vec<Candidate> {
        std::mem::take(
            &mut *self
                .candidates
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// Tells `entry` as made (`what`); in a dry run, counts it as the copy would.
    fn made(&self, entry: &Entry, what: What) {
        if let Some(c) = self.opts.changes {
            c.change(&entry.path, Kind::of_entry(&entry.kind), what);
        }
        if self.opts.dry_run {
            match entry.kind {
                EntryKind::File { size } => {
                    Stats::bump(&self.stats.files);
                    self.stats.bytes.fetch_add(size, Relaxed);
                }
                EntryKind::HardLink { .. } => Stats::bump(&self.stats.files),
                EntryKind::Dir => Stats::bump(&self.stats.dirs),
                _ => Stats::bump(&self.stats.others),
            }
        }
    }

    /// Counts `entry` as skipped: up to date, or kept newer there.
    fn skipped(&self, entry: &Entry) {
        Stats::bump(&self.stats.skipped);
        if let EntryKind::File { size } = entry.kind {
            self.stats.skipped_bytes.fetch_add(size, Relaxed);
        }
    }

    /// `entry`'s metadata as it goes on the wire, with its owner's names here.
    fn wire_meta(&self, entry: &Entry) -> WireMeta {
        let mut names = self.names.lock().unwrap_or_else(PoisonError::into_inner);
        let (user, group) = names.of(entry.meta.uid, entry.meta.gid);
        WireMeta::new(&entry.meta, user, group)
    }

    /// Whether `member` is a file the destination has with a later mtime, to keep
    /// there (`-u`, as a local copy keeps it).
    fn newer_there(&self, member: &Entry, rec: &Record) -> bool {
        let m = &member.meta.mtime;
        self.opts.keep_newer
            && matches!(member.kind, EntryKind::File { .. })
            && rec.kind == RecKind::File
            && rec.mtime() > (m.sec, m.nsec)
    }

    /// Why the destination's node (`rec`) does not hold what `member` holds: none when
    /// it does.
    fn content_reasons(
        &self,
        member: &Entry,
        rec: &Record,
        data: Option<BorrowedFd<'_>>,
    ) -> Reasons {
        let m = &member.meta;
        match &member.kind {
            EntryKind::File { .. } if rec.kind != RecKind::File => Reasons::KIND,
            EntryKind::File { size } if rec.size != *size => Reasons::SIZE,
            EntryKind::File { size } if self.opts.checksum => {
                let same = data.is_some_and(|fd| {
                    ferry_core::data::hash_range(fd, 0, *size)
                        .is_ok_and(|h| h.to_le_bytes().as_slice() == rec.extra)
                });
                Reasons::none().with_if(!same, Reasons::CONTENT)
            }
            EntryKind::File { .. } => {
                Reasons::none().with_if(rec.mtime() != (m.mtime.sec, m.mtime.nsec), Reasons::MTIME)
            }
            EntryKind::HardLink { target } => {
                let linked = rec.ino != 0
                    && self
                        .manifest
                        .get(target)
                        .is_some_and(|t| t.rec.ino == rec.ino)
                    && self
                        .omitted_firsts
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .contains(target);
                Reasons::none().with_if(!linked, Reasons::LINKS)
            }
            EntryKind::Symlink { target } => match rec.kind {
                RecKind::Symlink => Reasons::none().with_if(rec.extra != *target, Reasons::TARGET),
                _ => Reasons::KIND,
            },
            EntryKind::Fifo => Reasons::none().with_if(rec.kind != RecKind::Fifo, Reasons::KIND),
            EntryKind::CharDevice { rdev } | EntryKind::BlockDevice { rdev } => {
                let kind = match member.kind {
                    EntryKind::CharDevice { .. } => RecKind::CharDevice,
                    _ => RecKind::BlockDevice,
                };
                match rec.kind == kind {
                    true => {
                        Reasons::none().with_if(rec.extra != rdev.to_le_bytes(), Reasons::DEVICE)
                    }
                    false => Reasons::KIND,
                }
            }
            EntryKind::Dir => Reasons::none().with_if(rec.kind != RecKind::Dir, Reasons::KIND),
            // A stream of tar members holds none.
            EntryKind::Socket => Reasons::KIND,
        }
    }

    /// How `member`'s metadata (`ours`, on the wire) may differ from the destination
    /// node's (`rec`): the mode (not a symlink's), the owner, the times (a file's mtime
    /// is part of its data), the xattrs.
    fn meta_reasons(&self, member: &Entry, ours: &WireMeta, rec: &Record) -> Reasons {
        let theirs = &rec.meta;
        let kind = Kind::of_entry(&member.kind);
        let mtime_counts = !matches!(member.kind, EntryKind::File { .. });
        Reasons::none()
            .with_if(
                kind != Kind::Symlink && ours.meta.mode != theirs.meta.mode,
                Reasons::MODE,
            )
            .with_if(!ours.same_owner(theirs), Reasons::OWNER)
            .with_if(
                mtime_counts && ours.meta.mtime != theirs.meta.mtime,
                Reasons::TIMES,
            )
            .with_if(
                !ours.xattrs_known
                    || !theirs.xattrs_known
                    || !ferry_core::xattr::same(&ours.meta.xattrs, &theirs.meta.xattrs),
                Reasons::XATTRS,
            )
    }

    /// The metadata-only changes found, in the order met.
    pub(crate) fn take_metas(&self) -> Vec<MetaChange> {
        std::mem::take(&mut *self.metas.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// What the receiver has that the source's walk did not meet, to delete: each the
    /// top of what goes (what is below a deleted directory goes with it), sorted.
    /// What `filter` excludes is kept with everything below it, unless `excluded`
    /// (`--delete-excluded`); the receiver applies the rules again below each top.
    /// What is below a directory the source has something else in place of goes with
    /// it as the receiver places that (in a dry run, it is named here, to be told).
    /// `within`: only what lies below these top-level names is deleted (several
    /// sources, each under its name).
    pub fn deletions(
        &self,
        filter: Option<&Filter>,
        excluded: bool,
        within: Option<&[&[u8]]>,
    ) -> Vec<RelPath> {
        let mut unseen: Vec<(&RelPath, &Record)> = self.manifest.unseen().collect();
        unseen.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let replaced = self.take_replaced_dirs();
        // Directories met so far whose contents the source lacks: true, deleted with
        // what is below; false, kept.
        let mut dirs: HashMap<&[u8], bool> = HashMap::new();
        for path in &replaced {
            dirs.insert(path.as_bytes(), true);
        }
        let mut tops = match self.opts.dry_run {
            true => replaced.clone(),
            false => Vec::new(),
        };
        for (path, rec) in unseen {
            if path.is_root() {
                continue;
            }
            let is_dir = rec.kind == RecKind::Dir;
            let parent = path.parent();
            let top = path
                .as_bytes()
                .split(|&b| b == b'/')
                .next()
                .unwrap_or_default();
            // A parent comes before its children in byte order: its fate is known.
            let goes = match dirs.get(parent.as_bytes()) {
                Some(&below) => below,
                None if within.is_some_and(|names| !names.contains(&top)) => false,
                None if filter.is_some_and(|f| f.excludes(path.as_bytes(), is_dir)) => excluded,
                None => true,
            };
            let inside = dirs.contains_key(parent.as_bytes());
            if is_dir {
                dirs.insert(path.as_bytes(), goes);
            }
            if goes && !inside {
                tops.push(path.clone());
            }
        }
        tops.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        tops
    }

    fn take_replaced_dirs(&self) -> Vec<RelPath> {
        std::mem::take(
            &mut *self
                .replaced_dirs
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }
}

impl Omit for Plan<'_> {
    fn omit(&self, member: &Entry, data: Option<BorrowedFd<'_>>) -> bool {
        let left_out = self.leave_out(member, data);
        if !left_out {
            self.sent(member);
        }
        left_out
    }

    fn dir(&self, member: &Entry) -> bool {
        let left_out = self.leave_out_dir(member);
        if !left_out {
            self.sent(member);
        }
        left_out
    }
}

impl Plan<'_> {
    /// Whether to leave out `member`, not a directory (see [`Omit::omit`]).
    fn leave_out(&self, member: &Entry, data: Option<BorrowedFd<'_>>) -> bool {
        let Some(kept) = self.manifest.get(&member.path) else {
            self.made(member, What::Created);
            return self.opts.dry_run;
        };
        kept.see();
        let rec = &kept.rec;
        if self.newer_there(member, rec) {
            self.skipped(member);
            return true;
        }
        let why = self.content_reasons(member, rec, data);
        if rec.kind == RecKind::Dir && !why.is_empty() {
            let mut replaced = self
                .replaced_dirs
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            replaced.push(member.path.clone());
        }
        if !why.is_empty() && self.goes_as_delta(member, rec) {
            self.made(member, What::Updated(why));
            let candidate = Candidate {
                path: member.path.clone(),
                meta: self.wire_meta(member),
            };
            let mut all = self
                .candidates
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            all.push(candidate);
            return true;
        }
        if !why.is_empty() {
            self.made(member, What::Updated(why));
            return self.opts.dry_run;
        }
        if !matches!(member.kind, EntryKind::HardLink { .. }) {
            let ours = self.wire_meta(member);
            let meta = self.meta_reasons(member, &ours, rec);
            let source_links = member.links.map_or(1, |(_, n)| n);
            if !meta.is_empty() && u64::from(rec.nlink) > source_links {
                // Its other names may be outside DST: replaced, not changed.
                self.made(member, What::Updated(meta.with(Reasons::LINKS)));
                return self.opts.dry_run;
            }
            if !meta.is_empty() {
                let change = MetaChange {
                    path: member.path.clone(),
                    kind: Kind::of_entry(&member.kind),
                    meta: ours,
                    restore: false,
                };
                let mut metas = self.metas.lock().unwrap_or_else(PoisonError::into_inner);
                metas.push(change);
            }
        }
        if member.links.is_some() {
            self.omitted_firsts
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(member.path.clone());
        }
        self.skipped(member);
        true
    }

    /// Whether to leave out the header of the directory `member`: when the receiver
    /// has it with the same metadata (see [`Omit::dir`]).
    fn leave_out_dir(&self, member: &Entry) -> bool {
        let Some(kept) = self.manifest.get(&member.path) else {
            self.made(member, What::Created);
            return self.opts.dry_run;
        };
        kept.see();
        if kept.rec.kind != RecKind::Dir {
            self.made(member, What::Updated(Reasons::KIND));
            return self.opts.dry_run;
        }
        let ours = self.wire_meta(member);
        let meta = self.meta_reasons(member, &ours, &kept.rec);
        if !meta.is_empty() {
            if let Some(c) = self.opts.changes {
                c.change(&member.path, Kind::Dir, What::Meta(meta));
            }
            return self.opts.dry_run;
        }
        if !self.opts.dry_run {
            let mut left_out = self
                .dirs_left_out
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            left_out.insert(member.path.clone(), (ours, false));
        }
        true
    }
}
