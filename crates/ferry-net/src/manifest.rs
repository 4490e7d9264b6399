//! The manifest: what the receiver's destination already holds, streamed to the sender
//! before the data, so the sender plans without a round trip per file
//! ([`crate::plan`]): it leaves out what is up to date, sends only the metadata of what
//! is up to date but for its metadata, and names what the source no longer has.
//!
//! One record per entry of the destination (the root's path empty): kind, size, inode number
//! and link count (for entries with several names, so hardlinks are kept), path, a
//! kind's extra (a symlink's target, a device's number, or with `--checksum` a file's
//! xxh3-128 content hash, holes read as zeros, as the archive index records it), and
//! its metadata with the names of its owner there ([`crate::meta_wire`]).

use crate::charge::Charge;
use crate::frame::{expect_frame, Fields, Kind, PutFields, MAX_FRAME};

// A batch and one more record, compressed (zstd's bound), fit in a frame.
const _: () = assert!(BATCH + MAX_RECORD + (BATCH + MAX_RECORD) / 128 + 1024 <= MAX_FRAME);
use crate::meta_wire::WireMeta;
use crate::proto::{unexpected, MAX_PATH};
use crate::stream::report_message;
use crate::NetError;
use ferry_archive::owners::OwnerNames;
use ferry_core::entry::{Entry, EntryKind, RelPath};
use ferry_core::error::{Error, Reporter};
use ferry_core::sink::{FileData, TreeSink};
use ferry_core::walk::{walk, walk_one, WalkConfig};
use std::collections::HashMap;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Mutex, PoisonError};

/// Manifest bytes per frame.
const BATCH: usize = 256 << 10;

/// The most bytes one record takes: a batch of [`BATCH`] bytes and one more record fit
/// in a frame.
const MAX_RECORD: usize = MAX_PATH * 2 + 4096 + crate::meta_wire::MAX_XATTR_BYTES;

/// The most records a sender keeps: past that, the rest are sent whatever the
/// destination holds (the job stays right, only slower).
const MAX_RECORDS: usize = 32 << 20;

/// Bytes a kept record costs besides its path and extra: the path's and extra's own
/// vectors, the record, the hash table's slot.
const RECORD_COST: usize = 96;

/// What kind of entry a record describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum RecKind {
    File = 0,
    Dir = 1,
    Symlink = 2,
    Fifo = 4,
    CharDevice = 5,
    BlockDevice = 6,
}

/// One entry the destination holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) kind: RecKind,
    pub(crate) size: u64,
    /// Its inode number when it has more than one name, else 0.
    pub(crate) ino: u64,
    /// How many names it has.
    pub(crate) nlink: u32,
    /// A symlink's target, a device's number, a file's content hash (`--checksum`).
    pub(crate) extra: Vec<u8>,
    /// Mode, owner, times, xattrs.
    pub(crate) meta: WireMeta,
}

impl Record {
    /// Its mtime, as the entries' are compared.
    pub(crate) fn mtime(&self) -> (i64, u32) {
        (self.meta.meta.mtime.sec, self.meta.meta.mtime.nsec)
    }
}

fn encode(out: &mut Vec<u8>, path: &[u8], r: &Record) {
    out.put_u8(r.kind as u8);
    out.put_u64(r.size);
    out.put_u64(r.ino);
    out.put_u32(r.nlink);
    out.put_bytes(path);
    out.put_bytes(&r.extra);
    r.meta.encode(out);
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
    let size = f.u64()?;
    let ino = f.u64()?;
    let nlink = f.u32()?;
    let path = RelPath::from_bytes(f.bytes(MAX_PATH)?.to_vec());
    let extra = f.bytes(MAX_PATH)?.to_vec();
    let meta = WireMeta::decode(f)?;
    Ok((
        path,
        Record {
            kind,
            size,
            ino,
            nlink,
            extra,
            meta,
        },
    ))
}

/// A record of `entry` (status `nlink` names), with its content hash from `data` when
/// asked for, and its owner's names from `names`.
fn record_of(entry: &Entry, data: Option<FileData<'_>>, names: &mut OwnerNames) -> Record {
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
        // Never given: the listing's walk takes no sockets.
        EntryKind::Socket => (RecKind::Fifo, 0, Vec::new()),
    };
    let (user, group) = names.of(entry.meta.uid, entry.meta.gid);
    Record {
        kind,
        size,
        ino: entry.links.map_or(0, |(key, _)| key.ino),
        nlink: entry
            .links
            .map_or(1, |(_, n)| n.min(u32::MAX as u64) as u32),
        extra,
        meta: WireMeta::new(&entry.meta, user, group),
    }
}

/// A tree sink that streams a record of each entry out in batches.
struct ManifestSink<'a> {
    checksum: bool,
    batch: Mutex<Batch>,
    send: &'a (dyn Fn(&[u8]) -> io::Result<()> + Sync),
}

impl ManifestSink<'_> {
    fn push(&self, entry: &Entry, data: Option<FileData<'_>>) {
        let mut b = self.batch.lock().unwrap_or_else(PoisonError::into_inner);
        let Batch { buf, failed, names } = &mut *b;
        if failed.is_some() || entry.path.as_bytes().len() > MAX_PATH {
            return;
        }
        let record = record_of(entry, data.filter(|_| self.checksum), names);
        encode(buf, entry.path.as_bytes(), &record);
        if buf.len() >= BATCH {
            if let Err(e) = send_batch(self.send, buf) {
                *failed = Some(e);
            }
            buf.clear();
        }
    }
}

impl TreeSink for ManifestSink<'_> {
    type Dir = ();
    /// Every file opened, so its xattrs are read (and, with `--checksum`, its data).
    fn wants_data(&self) -> bool {
        true
    }
    fn root(&self, entry: &Entry) -> ferry_core::error::Result<()> {
        // The root's own record (its path empty): its metadata is compared too.
        self.push(entry, None);
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

/// The records not yet sent, and the names of the owners met so far.
struct Batch {
    buf: Vec<u8>,
    failed: Option<io::Error>,
    names: OwnerNames,
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
        batch: Mutex::new(Batch {
            buf: Vec::with_capacity(BATCH + MAX_RECORD),
            failed: None,
            names: OwnerNames::default(),
        }),
        send,
    };
    let cfg = WalkConfig {
        threads: threads.max(1),
        ..WalkConfig::default()
    };
    // A destination that cannot be read has nothing to offer: everything is sent.
    let _ = walk(dst, &sink, &cfg, &Quiet);
    let Batch { buf, failed, .. } = sink
        .batch
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(e) = failed {
        return Err(e);
    }
    match buf.is_empty() {
        true => Ok(()),
        false => send_batch(send, &buf),
    }
}

/// Sends one batch of records, compressed with zstd: a manifest is mostly paths and
/// repeated fields (the kernel tree's, 10 MB, goes in about a fifth of that).
fn send_batch(send: &(dyn Fn(&[u8]) -> io::Result<()> + Sync), batch: &[u8]) -> io::Result<()> {
    debug_assert!(batch.len() <= BATCH + MAX_RECORD);
    send(&zstd::bulk::compress(batch, 1)?)
}

/// A manifest frame's records: its payload decompressed, never to more than a batch
/// and a record.
fn records_of(payload: &[u8]) -> Result<Vec<u8>, NetError> {
    zstd::bulk::decompress(payload, BATCH + MAX_RECORD).map_err(|e| {
        NetError::frame(format!(
            "manifest: does not decompress within its bound: {e}"
        ))
    })
}

/// As [`send_manifest`], for one file copied: the record of the entry `name` in the
/// directory `dir`, if there is one (and it is not a directory: a file's copy replaces
/// only what is not one).
pub fn send_manifest_one(
    dir: &Path,
    name: &[u8],
    checksum: bool,
    send: &(dyn Fn(&[u8]) -> io::Result<()> + Sync),
) -> io::Result<()> {
    let path = dir.join(std::ffi::OsStr::from_bytes(name));
    if std::fs::symlink_metadata(&path).map_or(true, |m| m.is_dir()) {
        return Ok(());
    }
    let sink = ManifestSink {
        checksum,
        batch: Mutex::new(Batch {
            buf: Vec::new(),
            failed: None,
            names: OwnerNames::default(),
        }),
        send,
    };
    let _ = walk_one(&path, Some(name), &sink, (), &WalkConfig::default(), &Quiet);
    let Batch { buf, failed, .. } = sink
        .batch
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    match (failed, buf.is_empty()) {
        (Some(e), _) => Err(e),
        (None, true) => Ok(()),
        (None, false) => send_batch(send, &buf),
    }
}

/// What the receiver's destination holds, as its manifest frames said (named so as
/// not to be taken for an S3 upload's manifest, `ferry_s3::manifest::Manifest`).
#[derive(Default)]
pub struct DstListing {
    records: HashMap<RelPath, Kept>,
    /// For one file copied, the name the receiver wants it sent under (the payload of
    /// `ManifestEnd`).
    pub member: Option<Vec<u8>>,
}

/// A record, and whether the sender's walk met its path.
pub(crate) struct Kept {
    pub(crate) rec: Record,
    seen: AtomicBool,
}

impl Kept {
    /// Notes that the source has this path.
    pub(crate) fn see(&self) {
        self.seen.store(true, Relaxed);
    }
}

impl DstListing {
    /// Reads manifest frames up to `ManifestEnd`; messages between them go to
    /// `reporter`.
    pub fn read(r: &mut impl Read, reporter: &dyn Reporter) -> Result<DstListing, NetError> {
        Self::read_charged(r, reporter, None)
    }

    /// As [`DstListing::read`], each record kept counted in `charge` (the daemon's
    /// memory budget): past what it allows, an error saying so.
    pub fn read_charged(
        r: &mut impl Read,
        reporter: &dyn Reporter,
        mut charge: Option<&mut Charge>,
    ) -> Result<DstListing, NetError> {
        let mut m = DstListing::default();
        loop {
            let frame = expect_frame(r)?;
            match frame.kind {
                Kind::Manifest => {
                    let records = records_of(&frame.payload)?;
                    let mut f = Fields::new(&records, "manifest");
                    while !f.is_empty() {
                        let (path, rec) = decode(&mut f)?;
                        if m.records.len() < MAX_RECORDS {
                            if let Some(charge) = charge.as_deref_mut() {
                                let xattrs: usize = rec
                                    .meta
                                    .meta
                                    .xattrs
                                    .iter()
                                    .map(|x| x.name.len() + x.value.len() + 48)
                                    .sum();
                                let kept = RECORD_COST
                                    + path.as_bytes().len()
                                    + rec.extra.len()
                                    + rec.meta.user.len()
                                    + rec.meta.group.len()
                                    + xattrs;
                                charge.add(kept, "the manifest (what the client holds)")?;
                            }
                            let kept = Kept {
                                rec,
                                seen: AtomicBool::new(false),
                            };
                            m.records.insert(path, kept);
                        }
                    }
                }
                Kind::ManifestEnd if frame.payload.is_empty() => return Ok(m),
                Kind::ManifestEnd => {
                    m.member = Some(crate::proto::member_name(&frame.payload)?);
                    return Ok(m);
                }
                kind => {
                    if !report_message(kind, &frame.payload, reporter, None)? {
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

    /// The record of `path`.
    pub(crate) fn get(&self, path: &RelPath) -> Option<&Kept> {
        self.records.get(path)
    }

    /// The paths the sender's walk did not meet, with their records, in no order.
    pub(crate) fn unseen(&self) -> impl Iterator<Item = (&RelPath, &Record)> {
        self.records
            .iter()
            .filter(|(_, k)| !k.seen.load(Relaxed))
            .map(|(p, k)| (p, &k.rec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_garbage_is_an_error() {
        let meta = ferry_core::Metadata {
            mode: 0o777,
            mtime: ferry_core::entry::Timestamp { sec: -5, nsec: 7 },
            ..ferry_core::Metadata::default()
        };
        let rec = Record {
            kind: RecKind::Symlink,
            size: 0,
            ino: 9,
            nlink: 2,
            extra: b"target".to_vec(),
            meta: WireMeta::new(&meta, Some(b"root"), Some(b"wheel")),
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
