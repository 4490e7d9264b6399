//! The manifest: what the receiver's destination already holds, streamed to the sender
//! before the data, so the sender leaves out what is up to date without a round trip
//! per file ([`UpToDate`], the [`Omit`] pack asks).
//!
//! One record per entry below the destination (not the root): kind, mode, size,
//! mtime, inode number (for entries with several names, so hardlinks are kept), path,
//! and a kind's extra: a symlink's target, a device's number, or with `--checksum` a
//! file's xxh3-128 content hash (holes read as zeros, as the archive index records it).
//!
//! Up to date means what `ferry copy` means: a file of the same size, mtime (and
//! mode); with `--checksum`, also the same content. A symlink with the same target, a
//! fifo, a device with the same number. A later name of an inode (a hardlink member)
//! is up to date when its first name was and both names share one inode there.
//! Directories are always sent (a header each), so their metadata is brought up to
//! date.

use crate::charge::Charge;
use crate::frame::{expect_frame, Fields, Kind, PutFields, MAX_FRAME};
use crate::proto::{unexpected, MAX_PATH};
use crate::stream::report_message;
use crate::NetError;
use ferry_archive::write::pack::Omit;
use ferry_core::entry::{Entry, EntryKind, RelPath};
use ferry_core::error::{Error, Reporter};
use ferry_core::sink::{FileData, TreeSink};
use ferry_core::walk::{walk, WalkConfig};
use ferry_core::Stats;
use std::collections::{HashMap, HashSet};
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Mutex, PoisonError};

/// Manifest bytes per frame.
const BATCH: usize = 256 << 10;

/// The most records a sender keeps: past that, the rest are sent whatever the
/// destination holds (the job stays right, only slower).
const MAX_RECORDS: usize = 32 << 20;

/// Bytes a kept record costs besides its path and extra: the path's and extra's own
/// vectors, the record, the hash table's slot.
const RECORD_COST: usize = 96;

/// What kind of entry a record describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum RecKind {
    File = 0,
    Dir = 1,
    Symlink = 2,
    Fifo = 4,
    CharDevice = 5,
    BlockDevice = 6,
}

/// One entry the destination holds.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Record {
    kind: RecKind,
    mode: u32,
    size: u64,
    mtime: (i64, u32),
    /// Its inode number when it has more than one name, else 0.
    ino: u64,
    /// A symlink's target, a device's number, a file's content hash (`--checksum`).
    extra: Vec<u8>,
}

fn encode(out: &mut Vec<u8>, path: &[u8], r: &Record) {
    out.put_u8(r.kind as u8);
    out.put_u32(r.mode);
    out.put_u64(r.size);
    out.put_u64(r.mtime.0 as u64);
    out.put_u32(r.mtime.1);
    out.put_u64(r.ino);
    out.put_bytes(path);
    out.put_bytes(&r.extra);
}

fn decode(f: &mut Fields<'_>) -> Result<(RelPath, Record), NetError> {
    let kind = match f.u8()? {
        0 => RecKind::File,
        1 => RecKind::Dir,
        2 => RecKind::Symlink,
        4 => RecKind::Fifo,
        5 => RecKind::CharDevice,
        6 => RecKind::BlockDevice,
        other => return Err(NetError::frame(format!("manifest: unknown kind {other}"))),
    };
    let mode = f.u32()?;
    let size = f.u64()?;
    let mtime = (f.u64()? as i64, f.u32()?);
    let ino = f.u64()?;
    let path = RelPath::from_bytes(f.bytes(MAX_PATH)?.to_vec());
    let extra = f.bytes(MAX_PATH)?.to_vec();
    Ok((
        path,
        Record {
            kind,
            mode,
            size,
            mtime,
            ino,
            extra,
        },
    ))
}

/// A record of `entry`, with its content hash from `data` when asked for.
fn record_of(entry: &Entry, data: Option<FileData<'_>>) -> Record {
    let (kind, size, extra) = match &entry.kind {
        EntryKind::File { size } => {
            let hash = match data {
                Some(FileData::File { fd, .. }) => {
                    ferry_core::data::hash_range(fd.as_fd(), 0, *size)
                        .map(|h| h.to_le_bytes().to_vec())
                        .unwrap_or_default()
                }
                _ => Vec::new(),
            };
            (RecKind::File, *size, hash)
        }
        EntryKind::Dir | EntryKind::HardLink { .. } => (RecKind::Dir, 0, Vec::new()),
        EntryKind::Symlink { target } => (RecKind::Symlink, 0, target.clone()),
        EntryKind::Fifo => (RecKind::Fifo, 0, Vec::new()),
        EntryKind::CharDevice { rdev } => (RecKind::CharDevice, 0, rdev.to_le_bytes().to_vec()),
        EntryKind::BlockDevice { rdev } => (RecKind::BlockDevice, 0, rdev.to_le_bytes().to_vec()),
    };
    Record {
        kind,
        mode: entry.meta.mode & 0o7777,
        size,
        mtime: (entry.meta.mtime.sec, entry.meta.mtime.nsec),
        ino: entry.links.map_or(0, |(key, _)| key.ino),
        extra,
    }
}

/// A tree sink that streams a record of each entry out in batches.
struct ManifestSink<'a> {
    checksum: bool,
    batch: Mutex<(Vec<u8>, Option<io::Error>)>,
    send: &'a (dyn Fn(&[u8]) -> io::Result<()> + Sync),
}

impl ManifestSink<'_> {
    fn push(&self, entry: &Entry, data: Option<FileData<'_>>) {
        let record = record_of(entry, data);
        let mut b = self.batch.lock().unwrap_or_else(PoisonError::into_inner);
        let (buf, failed) = &mut *b;
        if failed.is_some() || entry.path.as_bytes().len() > MAX_PATH {
            return;
        }
        encode(buf, entry.path.as_bytes(), &record);
        if buf.len() >= BATCH {
            if let Err(e) = (self.send)(buf) {
                *failed = Some(e);
            }
            buf.clear();
        }
    }
}

impl TreeSink for ManifestSink<'_> {
    type Dir = ();
    fn wants_data(&self) -> bool {
        self.checksum
    }
    fn root(&self, _: &Entry) -> ferry_core::error::Result<()> {
        Ok(())
    }
    fn dir(&self, _: &(), entry: &Entry) -> ferry_core::error::Result<()> {
        self.push(entry, None);
        Ok(())
    }
    fn leaf(&self, _: &(), e: &Entry, data: Option<FileData<'_>>) -> ferry_core::error::Result<()> {
        self.push(e, data);
        Ok(())
    }
}

/// Entries the walk of the destination could not read are left out of the manifest
/// (and so sent again), not reported.
struct Quiet;

impl Reporter for Quiet {
    fn error(&self, _: &Error) {}
    fn warn(&self, _: &str) {}
}

/// Walks `dst` (nothing when it is missing or not a directory) with `threads` workers
/// and passes the manifest's frame payloads to `send`, each at most a frame; with
/// `checksum`, every file is read to record its content hash.
pub fn send_manifest(
    dst: &Path,
    checksum: bool,
    threads: usize,
    send: &(dyn Fn(&[u8]) -> io::Result<()> + Sync),
) -> io::Result<()> {
    if !std::fs::symlink_metadata(dst).is_ok_and(|m| m.is_dir()) {
        return Ok(());
    }
    let sink = ManifestSink {
        checksum,
        batch: Mutex::new((Vec::with_capacity(BATCH + MAX_PATH * 3), None)),
        send,
    };
    let cfg = WalkConfig {
        threads: threads.max(1),
        ..WalkConfig::default()
    };
    // A destination that cannot be read has nothing to offer: everything is sent.
    let _ = walk(dst, &sink, &cfg, &Quiet);
    let (buf, failed) = sink
        .batch
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(e) = failed {
        return Err(e);
    }
    debug_assert!(buf.len() <= MAX_FRAME);
    match buf.is_empty() {
        true => Ok(()),
        false => send(&buf),
    }
}

/// What the receiver's destination holds, as its manifest said.
#[derive(Default)]
pub struct Manifest {
    records: HashMap<RelPath, Record>,
}

impl Manifest {
    /// Reads manifest frames up to `ManifestEnd`; messages between them go to
    /// `reporter`.
    pub fn read(r: &mut impl Read, reporter: &dyn Reporter) -> Result<Manifest, NetError> {
        Self::read_charged(r, reporter, None)
    }

    /// As [`Manifest::read`], each record kept counted in `charge` (the daemon's
    /// memory budget): past what it allows, an error saying so.
    pub fn read_charged(
        r: &mut impl Read,
        reporter: &dyn Reporter,
        mut charge: Option<&mut Charge>,
    ) -> Result<Manifest, NetError> {
        let mut m = Manifest::default();
        loop {
            let frame = expect_frame(r)?;
            match frame.kind {
                Kind::Manifest => {
                    let mut f = Fields::new(&frame.payload, "manifest");
                    while !f.is_empty() {
                        let (path, rec) = decode(&mut f)?;
                        if m.records.len() < MAX_RECORDS {
                            if let Some(charge) = charge.as_deref_mut() {
                                let kept = RECORD_COST + path.as_bytes().len() + rec.extra.len();
                                charge.add(kept, "the manifest (what the client holds)")?;
                            }
                            m.records.insert(path, rec);
                        }
                    }
                }
                Kind::ManifestEnd => return Ok(m),
                kind => {
                    if !report_message(kind, &frame.payload, reporter)? {
                        return Err(unexpected(frame, "the manifest"));
                    }
                }
            }
        }
    }

    /// How many entries it lists.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether it lists nothing.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

/// Leaves out of the archive what the manifest shows up to date (see the module's
/// doc), counting each in `stats.skipped`.
pub struct UpToDate<'a> {
    /// What the destination holds.
    pub manifest: &'a Manifest,
    /// Compare content too.
    pub checksum: bool,
    /// Where the skipped entries are counted.
    pub stats: &'a Stats,
    /// Leave out a file the destination has with a later mtime (`-u`).
    pub keep_newer: bool,
    /// Members left out that have other names (their later names may be left out too).
    omitted_firsts: Mutex<HashSet<RelPath>>,
}

impl<'a> UpToDate<'a> {
    /// Against `manifest`; `keep_newer`: files the destination has newer are left out
    /// too.
    pub fn new(manifest: &'a Manifest, checksum: bool, keep_newer: bool, stats: &'a Stats) -> Self {
        UpToDate {
            manifest,
            checksum,
            stats,
            keep_newer,
            omitted_firsts: Mutex::default(),
        }
    }

    /// Whether `member` is a file the destination has with a later mtime, to keep
    /// there (`-u`, as a local copy keeps it).
    fn newer_there(&self, member: &Entry, rec: &Record) -> bool {
        let m = &member.meta.mtime;
        self.keep_newer
            && matches!(member.kind, EntryKind::File { .. })
            && rec.kind == RecKind::File
            && rec.mtime > (m.sec, m.nsec)
    }

    fn is_up_to_date(&self, member: &Entry, rec: &Record, data: Option<BorrowedFd<'_>>) -> bool {
        let m = &member.meta;
        let same_mode = rec.mode == m.mode & 0o7777;
        match &member.kind {
            EntryKind::File { size } => {
                rec.kind == RecKind::File
                    && rec.size == *size
                    && rec.mtime == (m.mtime.sec, m.mtime.nsec)
                    && same_mode
                    && (!self.checksum
                        || data.is_some_and(|fd| {
                            ferry_core::data::hash_range(fd, 0, *size)
                                .is_ok_and(|h| h.to_le_bytes().as_slice() == rec.extra)
                        }))
            }
            EntryKind::HardLink { target } => {
                rec.ino != 0
                    && self
                        .manifest
                        .records
                        .get(target)
                        .is_some_and(|t| t.ino == rec.ino)
                    && self
                        .omitted_firsts
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .contains(target)
            }
            EntryKind::Symlink { target } => rec.kind == RecKind::Symlink && rec.extra == *target,
            EntryKind::Fifo => rec.kind == RecKind::Fifo && same_mode,
            EntryKind::CharDevice { rdev } | EntryKind::BlockDevice { rdev } => {
                let kind = match member.kind {
                    EntryKind::CharDevice { .. } => RecKind::CharDevice,
                    _ => RecKind::BlockDevice,
                };
                rec.kind == kind && same_mode && rec.extra == rdev.to_le_bytes()
            }
            EntryKind::Dir => false,
        }
    }
}

impl Omit for UpToDate<'_> {
    fn omit(&self, member: &Entry, data: Option<BorrowedFd<'_>>) -> bool {
        let Some(rec) = self.manifest.records.get(&member.path) else {
            return false;
        };
        if !self.newer_there(member, rec) && !self.is_up_to_date(member, rec, data) {
            return false;
        }
        if member.links.is_some() {
            self.omitted_firsts
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(member.path.clone());
        }
        Stats::bump(&self.stats.skipped);
        if let EntryKind::File { size } = member.kind {
            self.stats.skipped_bytes.fetch_add(size, Relaxed);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_garbage_is_an_error() {
        let rec = Record {
            kind: RecKind::Symlink,
            mode: 0o777,
            size: 0,
            mtime: (-5, 7),
            ino: 9,
            extra: b"target".to_vec(),
        };
        let mut buf = Vec::new();
        encode(&mut buf, b"a/\xffb", &rec);
        let mut f = Fields::new(&buf, "manifest");
        let (path, back) = decode(&mut f).expect("decode");
        assert_eq!((path.as_bytes(), back), (&b"a/\xffb"[..], rec));
        for cut in 0..buf.len() {
            assert!(decode(&mut Fields::new(&buf[..cut], "manifest")).is_err());
        }
    }
}
