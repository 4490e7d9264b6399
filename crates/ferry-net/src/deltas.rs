//! Deltas for big changed files: after the archive and the plan, the sender sends
//! only what changed in each file the receiver has an older version of
//! ([`crate::plan`] keeps them out of the archive), by ferry's delta engine
//! ([`ferry_delta`]: rsync's rolling checksum over fixed blocks; see docs/network.md).
//!
//! One file at a time, in lockstep, so neither end ever waits on the other while its
//! own writes are blocked: the sender names the file and its new size (`DeltaWant`);
//! the receiver answers with the signature of the version it has (`Signature`
//! frames, then `SignatureEnd`; no usable version: an empty one, and everything comes
//! as literals); the sender scans its file against it and sends the ops
//! (`DeltaOps`), then `DeltaEnd` with the content hash of what it read and the file's
//! metadata. `DeltasEnd` ends the phase.
//!
//! The receiver rebuilds the file into a new one beside it, cloning the unchanged
//! ranges where the filesystem can (XFS, btrfs) and copying them elsewhere, writing
//! only the new bytes; checks its content hash; gives it its metadata; and only then
//! renames it over the old one, whose directory keeps its times. A failure anywhere
//! leaves the old file as it was and the new one removed, and is reported naming the
//! path.

use crate::frame::{Fields, Frame, Kind, PutFields, MAX_FRAME};
use crate::meta_wire::{LocalOwners, WireMeta};
use crate::proto::{unexpected, MAX_PATH};
use crate::stream::{lock, Shared};
use crate::transfer::Source;
use crate::NetError;
use ferry_core::entry::RelPath;
use ferry_core::error::{Error, Reporter};
use ferry_core::local::{is_plain, open_below};
use ferry_core::meta::{self, MetaWriter};
use ferry_core::Stats;
use ferry_delta::{Apply, Op, Signature};
use rustix::fs::{self as rfs, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::CString;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Files at least this big that the receiver has another version of travel as deltas.
/// Smaller ones go whole in the archive: what a delta saves there is less than the
/// round trip it costs.
pub const DELTA_MIN: u64 = 1 << 20;

/// Bytes of ops or signature a frame is filled to before it is sent.
const BATCH: usize = 256 << 10;

/// The largest piece of a literal put in one op on the wire (a frame holds whole ops).
const LITERAL_PIECE: usize = 256 << 10;

// A batch and one more op (or a piece of signature) fit in a frame.
const _: () = assert!(BATCH + LITERAL_PIECE + 64 <= MAX_FRAME);

/// A file to send as a delta: where it is in the tree, and the metadata it gets.
pub(crate) struct Candidate {
    pub(crate) path: RelPath,
    pub(crate) meta: WireMeta,
}

/// The most signature bytes the sender takes at all: the most blocks a signature may
/// have, and a little for the header.
const MAX_SIGNATURE: u64 = (ferry_delta::MAX_BLOCKS + 2) * ferry_delta::SUM_LEN as u64 + 64;

/// The most signature bytes the sender takes for a basis of `size` bytes: the blocks
/// the smallest block size gives, and a little for the header.
fn signature_cap(size: u64) -> usize {
    let blocks = size / ferry_delta::MIN_BLOCK as u64 + 2;
    let cap = blocks.saturating_mul(ferry_delta::SUM_LEN as u64) + 64;
    cap.min(MAX_SIGNATURE) as usize
}

/// Where the member `path` is in `src`.
fn local_path(src: Source<'_>, path: &RelPath) -> Option<PathBuf> {
    let rel = Path::new(std::ffi::OsStr::from_bytes(path.as_bytes()));
    match src {
        Source::Tree(root) => Some(root.join(rel)),
        Source::Named(named) => {
            let mut parts = path.as_bytes().splitn(2, |&b| b == b'/');
            let top = parts.next()?;
            let (_, at) = named.iter().find(|(n, _)| n.as_slice() == top)?;
            match parts.next() {
                None => Some(at.clone()),
                Some(rest) => Some(at.join(std::ffi::OsStr::from_bytes(rest))),
            }
        }
    }
}

use std::os::unix::ffi::OsStrExt;

/// The sender's half: each candidate in turn, then `DeltasEnd`. `replies` gives the
/// receiver's next frame that is not a message (messages it reports itself).
pub(crate) fn send_deltas<W: Write>(
    src: Source<'_>,
    candidates: &[Candidate],
    out: &Shared<W>,
    replies: &mut dyn FnMut() -> Result<Frame, NetError>,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<(), NetError> {
    for c in candidates {
        send_one(src, c, out, replies, stats, reporter)?;
    }
    lock(out).frame(Kind::DeltasEnd, &[])?;
    Ok(())
}

fn send_one<W: Write>(
    src: Source<'_>,
    c: &Candidate,
    out: &Shared<W>,
    replies: &mut dyn FnMut() -> Result<Frame, NetError>,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<(), NetError> {
    let fail = |op: &'static str, e: io::Error| reporter.error(&Error::new(&c.path, op, e));
    let Some(local) = local_path(src, &c.path) else {
        return Ok(());
    };
    let file = match open_source(&local) {
        Ok(f) => f,
        // Gone or unreadable since the walk: reported, and not asked for.
        Err(e) => {
            fail("open", e);
            return Ok(());
        }
    };
    let size = match rfs::fstat(&file) {
        Ok(st) => st.st_size as u64,
        Err(e) => {
            fail("stat", e.into());
            return Ok(());
        }
    };
    let mut want = Vec::new();
    want.put_bytes(c.path.as_bytes());
    want.put_u64(size);
    lock(out).frame(Kind::DeltaWant, &want)?;
    let sig = read_signature(replies)?;
    let sig = match sig {
        Some(sig) => sig,
        None => ferry_delta::signature(&file, 0, ferry_delta::MIN_BLOCK)
            .map_err(|e| NetError::frame(format!("empty signature: {e}")))?,
    };
    let mut batch = Vec::with_capacity(BATCH + LITERAL_PIECE + 32);
    let flush = |batch: &mut Vec<u8>, all: bool| -> io::Result<()> {
        if batch.len() >= BATCH || (all && !batch.is_empty()) {
            lock(out).frame(Kind::DeltaOps, batch)?;
            batch.clear();
        }
        Ok(())
    };
    let scanned = ferry_delta::delta::<io::Error>(&file, size, &sig, |op| {
        match op {
            Op::Literal(bytes) => {
                for piece in bytes.chunks(LITERAL_PIECE) {
                    Op::Literal(piece).encode(&mut batch);
                    flush(&mut batch, false)?;
                }
            }
            copy => {
                copy.encode(&mut batch);
                flush(&mut batch, false)?;
            }
        }
        Ok(())
    });
    let mut end = Vec::new();
    match scanned {
        Ok(done) => {
            flush(&mut batch, true)?;
            end.put_u8(0);
            end.extend_from_slice(&done.hash.to_le_bytes());
            c.meta.encode(&mut end);
            stats.bytes.fetch_add(done.literal, Relaxed);
        }
        Err(e) => {
            // The file could not be read (or changed under the scan): the receiver
            // drops what it built. A failed connection fails the next frame too.
            fail("read", e);
            end.put_u8(1);
        }
    }
    lock(out).frame(Kind::DeltaEnd, &end)?;
    Ok(())
}

/// Opens a file to read, without moving its atime where that is allowed.
fn open_source(path: &Path) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::CLOEXEC;
    match rfs::open(path, flags | OFlags::NOATIME, Mode::empty()) {
        Err(Errno::PERM) => rfs::open(path, flags, Mode::empty()),
        other => other,
    }
    .map_err(io::Error::from)
}

/// Reads the receiver's signature frames: the signature, or None where it has no
/// version to build from.
fn read_signature(
    replies: &mut dyn FnMut() -> Result<Frame, NetError>,
) -> Result<Option<Signature>, NetError> {
    let mut bytes = Vec::new();
    loop {
        let frame = replies()?;
        match frame.kind {
            Kind::Signature => {
                bytes.extend_from_slice(&frame.payload);
                if bytes.len() as u64 > MAX_SIGNATURE {
                    return Err(NetError::frame("a signature past any file's size"));
                }
            }
            Kind::SignatureEnd if frame.payload == [1] => {
                let sig = Signature::decode(&bytes)
                    .map_err(|e| NetError::frame(format!("signature: {e}")))?;
                if bytes.len() > signature_cap(sig.basis_size()) {
                    return Err(NetError::frame("a signature longer than its file needs"));
                }
                return Ok(Some(sig));
            }
            Kind::SignatureEnd if frame.payload == [0] && bytes.is_empty() => return Ok(None),
            _ => return Err(unexpected(frame, "a signature")),
        }
    }
}

/// How the receiver rebuilds.
pub(crate) struct Rebuilding<'a> {
    /// The destination's root (None: a dry run into nothing; no deltas come then).
    pub(crate) root: Option<&'a OwnedFd>,
    pub(crate) stats: &'a Stats,
    pub(crate) reporter: &'a dyn Reporter,
}

/// The receiver's half: answers each `DeltaWant` and rebuilds its file, up to
/// `DeltasEnd`. `frames` gives the sender's next frame that is not a message; `reply`
/// sends one frame back.
pub(crate) fn receive_deltas(
    frames: &mut dyn FnMut() -> Result<Frame, NetError>,
    reply: &mut dyn FnMut(Kind, &[u8]) -> io::Result<()>,
    how: &Rebuilding<'_>,
) -> Result<(), NetError> {
    let writer = MetaWriter::new();
    let mut owners = LocalOwners::default();
    loop {
        let frame = frames()?;
        match frame.kind {
            Kind::DeltasEnd => return Ok(()),
            Kind::DeltaWant => {
                let mut f = Fields::new(&frame.payload, "delta want");
                let path = RelPath::from_bytes(f.bytes(MAX_PATH)?.to_vec());
                let size = f.u64()?;
                f.end()?;
                let root = how
                    .root
                    .ok_or_else(|| NetError::frame("a delta in a dry run"))?;
                let mut one = OneFile::start(root, &path, size, how.reporter);
                one.answer(reply)?;
                one.rebuild(frames, &writer, &mut owners, how)?;
            }
            _ => return Err(unexpected(frame, "a delta or the end of the deltas")),
        }
    }
}

/// One file being rebuilt: its directory, the version there, the new file.
struct OneFile<'a> {
    path: &'a RelPath,
    size: u64,
    reporter: &'a dyn Reporter,
    /// Its directory, with the times it had (given back after the rename).
    dir: Option<(OwnedFd, Option<rfs::Stat>)>,
    basis: Option<(OwnedFd, u64)>,
    /// The new file and its name, once made.
    new: Option<(OwnedFd, CString)>,
    failed: std::cell::Cell<bool>,
}

/// New files' names get a number each, so no two rebuilds share one.
static MADE: AtomicU64 = AtomicU64::new(0);

impl<'a> OneFile<'a> {
    fn start(root: &OwnedFd, path: &'a RelPath, size: u64, reporter: &'a dyn Reporter) -> Self {
        let mut one = OneFile {
            path,
            size,
            reporter,
            dir: None,
            basis: None,
            new: None,
            failed: std::cell::Cell::new(false),
        };
        if !is_plain(path) {
            let why = io::Error::other("not a path of plain names below the destination");
            one.fail("rebuild", why);
            return one;
        }
        let Ok(name) = CString::new(path.file_name()) else {
            return one;
        };
        let dir = match open_below(root, &path.parent()) {
            Ok(Some(dir)) => dir,
            Ok(None) => return one,
            Err(e) => {
                one.fail("open directory", e.into());
                return one;
            }
        };
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let basis = rfs::openat(&dir, &name, flags, Mode::empty()).and_then(|fd| {
            let st = rfs::fstat(&fd)?;
            Ok((fd, st))
        });
        if let Ok((fd, st)) = basis {
            if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile {
                one.basis = Some((fd, st.st_size as u64));
            }
        }
        let times = rfs::fstat(&dir).ok();
        let tmp = format!(
            ".ferry-delta.{}.{}",
            std::process::id(),
            MADE.fetch_add(1, Relaxed)
        );
        let tmp = CString::new(tmp).unwrap_or_default();
        let flags =
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match rfs::openat(&dir, &tmp, flags, Mode::from_raw_mode(0o600)) {
            Ok(fd) => one.new = Some((fd, tmp)),
            Err(e) => one.fail("make file", e.into()),
        }
        one.dir = Some((dir, times));
        one
    }

    fn fail(&self, op: &'static str, e: io::Error) {
        if !self.failed.replace(true) {
            self.reporter.error(&Error::dst(self.path, op, e));
        }
    }

    /// Sends the signature of the version here (none: an empty answer).
    fn answer(
        &mut self,
        reply: &mut dyn FnMut(Kind, &[u8]) -> io::Result<()>,
    ) -> Result<(), NetError> {
        let sig = match (&self.basis, &self.new) {
            (Some((fd, size)), Some(_)) => {
                let block = ferry_delta::block_size_for(*size);
                ferry_delta::signature(fd, *size, block).ok()
            }
            _ => None,
        };
        let Some(sig) = sig else {
            self.basis = None;
            reply(Kind::SignatureEnd, &[0])?;
            return Ok(());
        };
        let bytes = sig.encode();
        for piece in bytes.chunks(BATCH) {
            reply(Kind::Signature, piece)?;
        }
        reply(Kind::SignatureEnd, &[1])?;
        Ok(())
    }

    /// Applies the ops up to `DeltaEnd`, then checks, gives metadata and renames.
    fn rebuild(
        mut self,
        frames: &mut dyn FnMut() -> Result<Frame, NetError>,
        writer: &MetaWriter,
        owners: &mut LocalOwners,
        how: &Rebuilding<'_>,
    ) -> Result<(), NetError> {
        let mut apply = match (&self.new, &self.basis) {
            (Some((out, _)), Some((basis, size))) => {
                Some(Apply::new(basis.as_fd(), *size, out.as_fd(), self.size))
            }
            (Some((out, _)), None) => Some(Apply::new(out.as_fd(), 0, out.as_fd(), self.size)),
            (None, _) => None,
        };
        let end = loop {
            let frame = frames()?;
            match frame.kind {
                Kind::DeltaOps => {
                    if let Some(a) = apply.as_mut() {
                        let used = a.push_encoded(&frame.payload);
                        match used {
                            Ok(n) if n == frame.payload.len() => {}
                            Ok(_) => return Err(NetError::frame("delta ops cut between frames")),
                            Err(ferry_delta::Error::Io(e)) => {
                                apply = None;
                                self.fail("write", e);
                            }
                            Err(e) => return Err(NetError::frame(format!("delta ops: {e}"))),
                        }
                    }
                }
                Kind::DeltaEnd => break frame,
                _ => return Err(unexpected(frame, "delta ops")),
            }
        };
        let mut f = Fields::new(&end.payload, "delta end");
        let ok = f.u8()? == 0;
        let finished = match (ok, apply) {
            (true, Some(a)) => {
                let mut hash = [0u8; 16];
                for b in hash.iter_mut() {
                    *b = f.u8()?;
                }
                let mut wire = WireMeta::decode(&mut f)?;
                f.end()?;
                owners.map(&mut wire);
                match a.finish() {
                    Ok(done) => Some((u128::from_le_bytes(hash), wire, done)),
                    Err(ferry_delta::Error::Io(e)) => {
                        self.fail("write", e);
                        None
                    }
                    Err(e) => return Err(NetError::frame(format!("delta ops: {e}"))),
                }
            }
            _ => None,
        };
        match finished {
            Some((hash, wire, done)) => self.replace(hash, &wire, done, writer, how),
            None => self.drop_new(),
        }
        Ok(())
    }

    /// Checks the new file's content, gives it its metadata and puts it in place.
    fn replace(
        mut self,
        hash: u128,
        wire: &WireMeta,
        done: ferry_delta::Applied,
        writer: &MetaWriter,
        how: &Rebuilding<'_>,
    ) {
        let Some((out, tmp)) = self.new.take() else {
            return;
        };
        match self.place(&out, &tmp, hash, wire, writer) {
            Ok(()) => {
                Stats::bump(&how.stats.files);
                how.stats.bytes.fetch_add(done.written, Relaxed);
                how.stats
                    .cloned
                    .fetch_add(u64::from(done.cloned > 0), Relaxed);
                self.restore_times();
            }
            Err((op, e)) => {
                self.fail(op, e);
                self.new = Some((out, tmp));
            }
        }
    }

    /// Checks `out` (named `tmp`) against `hash`, gives it `wire`'s metadata and
    /// renames it over the old version.
    fn place(
        &self,
        out: &OwnedFd,
        tmp: &CString,
        hash: u128,
        wire: &WireMeta,
        writer: &MetaWriter,
    ) -> Result<(), (&'static str, io::Error)> {
        let Some((dir, _)) = &self.dir else {
            return Err(("rebuild", io::Error::other("no directory")));
        };
        let name = CString::new(self.path.file_name()).map_err(|e| ("name", e.into()))?;
        match ferry_delta::hash_range(out.as_fd(), 0, self.size) {
            Ok(h) if h == hash => {}
            Ok(_) => return Err(("verify", io::Error::other(crate::transfer::DAMAGED))),
            Err(e) => return Err(("read", e)),
        }
        let mut m = wire.meta.clone();
        if !wire.xattrs_known {
            m.xattrs.clear();
        }
        writer.apply_fd(out, &m, true, true, &[])?;
        rfs::renameat(dir, tmp.as_c_str(), dir, &name).map_err(|e| ("rename", e.into()))
    }

    /// Gives the directory back the times it had before the new file was made.
    fn restore_times(&self) {
        if let Some((dir, Some(st))) = &self.dir {
            let _ = rfs::futimens(dir, &meta::timestamps(&meta::from_stat(st)));
        }
    }

    /// Removes the new file, if made: the old one stays as it was.
    fn drop_new(&mut self) {
        if let (Some((dir, _)), Some((_, tmp))) = (&self.dir, self.new.take()) {
            let _ = rfs::unlinkat(dir, &tmp, rfs::AtFlags::empty());
            self.restore_times();
        }
    }
}

impl Drop for OneFile<'_> {
    fn drop(&mut self) {
        self.drop_new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::write_frame;
    use crate::test_support::Collect;

    fn frame(kind: Kind, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        write_frame(&mut out, kind, payload).expect("frame");
        out
    }

    fn want(path: &[u8], size: u64) -> Vec<u8> {
        let mut p = Vec::new();
        p.put_bytes(path);
        p.put_u64(size);
        frame(Kind::DeltaWant, &p)
    }

    fn end_ok(hash: u128) -> Vec<u8> {
        let mut p = vec![0];
        p.extend_from_slice(&hash.to_le_bytes());
        WireMeta::new(
            &ferry_core::Metadata {
                mode: 0o644,
                ..Default::default()
            },
            None,
            None,
        )
        .encode(&mut p);
        frame(Kind::DeltaEnd, &p)
    }

    /// Runs the receiver on `wire` in `dst`: what it answered, and how it ended.
    fn receive(wire: &[u8], dst: &Path, seen: &Collect) -> (Vec<Kind>, Result<(), NetError>) {
        let root: OwnedFd = std::fs::File::open(dst).expect("open").into();
        let stats = Stats::default();
        let how = Rebuilding {
            root: Some(&root),
            stats: &stats,
            reporter: seen,
        };
        let mut r = wire;
        let mut frames = || crate::frame::expect_frame(&mut r);
        let mut answers = Vec::new();
        let mut reply = |kind: Kind, _: &[u8]| {
            answers.push(kind);
            Ok(())
        };
        let ended = receive_deltas(&mut frames, &mut reply, &how);
        (answers, ended)
    }

    /// A hostile sender cannot rebuild a file outside the destination, nor leave a
    /// file that differs from the hash it claims, nor copy from past the old version's
    /// end; each ends in an error, and nothing but the old files is left.
    #[test]
    fn hostile_deltas_change_nothing_outside_nor_leave_damage() {
        let dir = tempfile::tempdir().expect("tempdir");
        let dst = dir.path().join("dst");
        std::fs::create_dir(&dst).expect("mkdir");
        std::fs::write(dst.join("f"), vec![7u8; 10_000]).expect("write");
        std::fs::write(dir.path().join("outside"), b"o").expect("write");
        // Outside: refused, answered with no signature, the ops dropped.
        let mut lit = Vec::new();
        Op::Literal(b"evil").encode(&mut lit);
        let mut wire = want(b"../outside", 4);
        wire.extend(frame(Kind::DeltaOps, &lit));
        wire.extend(end_ok(ferry_core::content::hash_of(b"evil")));
        // A claimed hash that is not the content's: the old file stays.
        wire.extend(want(b"f", 4));
        wire.extend(frame(Kind::DeltaOps, &lit));
        wire.extend(end_ok(1234));
        wire.extend(frame(Kind::DeltasEnd, &[]));
        let seen = Collect::default();
        let (answers, ended) = receive(&wire, &dst, &seen);
        ended.expect("ended");
        assert_eq!(answers.first(), Some(&Kind::SignatureEnd));
        let said = seen.0.lock().expect("lock").clone();
        assert!(said[0].contains("plain names"), "{said:?}");
        assert!(said[1].starts_with("f: verify"), "{said:?}");
        assert_eq!(
            std::fs::read(dir.path().join("outside")).expect("read"),
            b"o"
        );
        assert_eq!(
            std::fs::read(dst.join("f")).expect("read"),
            vec![7u8; 10_000]
        );
        // A copy from past the old version's end is a malformed frame.
        let mut copy = Vec::new();
        Op::Copy {
            basis_offset: 9_000,
            len: 4_000,
        }
        .encode(&mut copy);
        let mut wire = want(b"f", 4_000);
        wire.extend(frame(Kind::DeltaOps, &copy));
        let seen = Collect::default();
        let (_, ended) = receive(&wire, &dst, &seen);
        assert!(matches!(ended, Err(NetError::Frame(_))), "{ended:?}");
        let names: Vec<_> = std::fs::read_dir(&dst).expect("list").collect();
        assert_eq!(names.len(), 1, "a rebuild was left behind");
        assert_eq!(
            std::fs::read(dst.join("f")).expect("read"),
            vec![7u8; 10_000]
        );
    }
}
