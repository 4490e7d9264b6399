//! The local-tree sink: makes the tree on disk, as `cp -a` would.
//!
//! Every node is made relative to its parent's descriptor with `O_NOFOLLOW`/`O_EXCL`, so
//! nothing is written through a symlink and paths deeper than `PATH_MAX` work. Into a
//! directory this sink created itself, files are created without looking first; into
//! one that existed, each name is checked: a file whose size and mtime (or, with
//! `checksum`, content) match is left alone, so rerunning an interrupted job resumes it.
//! A file's times are set last: a half-written file never looks complete.

use crate::changes::{Changes, Kind, Reasons, What};
use crate::data::Mover;
use crate::delete::{remove_in_the_way, DeleteOptions};
use crate::entry::{Entry, EntryKind, Metadata, RelPath, Timestamp, Xattr};
use crate::error::{Context, Error, Reporter, Result};
use crate::links::{Claim, Links, Made};
use crate::meta::{self, MetaNotice, MetaWriter};
use crate::sink::{FileData, TreeSink};
use crate::stats::Stats;
use crate::xattr;
use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

mod data_in;
mod dirs;
pub mod link_dest;
mod nodes;
mod reach;
mod reopen;
mod root;
pub use dirs::{is_plain, open_below};
pub(crate) use dirs::{open_dir, open_dir_following};
use reach::dir_error;
pub use reach::{InTheWay, Reach};
pub use reopen::DstMark;

/// How an existing destination is brought up to date.
#[derive(Clone, Copy, Debug, Default)]
pub struct Update {
    /// Compare content instead of size and mtime.
    pub checksum: bool,
    /// Re-read every file written and compare its hash with the source's.
    pub verify: bool,
    /// Leave alone a destination file whose mtime is newer than the source's (`-u`).
    pub keep_newer: bool,
    /// Replace nothing already in the destination but directories, each such name
    /// an error naming it (`unpack -k`, GNU tar's `--keep-old-files`).
    pub keep_old: bool,
    /// Keep what arrived of a file whose data stopped coming ([`KEEP_PARTIAL`] bytes
    /// or more), for a rerun to build on (a network copy's deltas, rsync's
    /// `--partial`): its size and mtime are not the source's, so it never looks
    /// complete. Otherwise it is removed.
    pub keep_partial: bool,
}

/// The least of a file cut short that `keep_partial` keeps.
pub const KEEP_PARTIAL: u64 = 1 << 20;

/// Writes a tree under a destination directory.
pub struct LocalTreeSink<'a> {
    dst: PathBuf,
    mover: &'a Mover,
    update: Update,
    meta: MetaWriter,
    links: Links,
    stats: &'a Stats,
    reporter: &'a dyn Reporter,
    /// The destination root, once [`TreeSink::root`] has made it.
    root: std::sync::OnceLock<DstDir>,
    /// The root was made by this job (it may also be fresh for being empty).
    root_made: std::sync::atomic::AtomicBool,
    /// When the job began, by the clock of file timestamps: a node changed since was
    /// written by this job (or beside it).
    started: Timestamp,
    /// Told about every entry made, replaced or given new metadata (`-i`, `-v`).
    changes: Option<&'a dyn Changes>,
    /// With `--delete`: how a directory in the way of a non-directory is removed with
    /// what it holds (else that is an error, as without `--delete` in rsync).
    in_the_way: Option<DeleteOptions<'a>>,
    /// `--link-dest`, `--reflink-dest`: where unchanged files are taken from, opened
    /// once the destination is there.
    link_dests: link_dest::Lazy,
}

/// What [`LocalTreeSink::settle`] did with an existing node that holds the right data.
enum Settled {
    /// Its metadata is as the entry's now (it was, or was set).
    Done,
    /// Its metadata differs for these reasons, and it must be replaced to change it.
    Replace(Reasons),
}

/// A destination directory the sink has entered.
#[derive(Clone)]
pub struct DstDir {
    fd: Arc<OwnedFd>,
    /// Created by this job, or (the root) empty when the job began: no need to look
    /// before creating.
    fresh: bool,
    /// Created by this job below directories also created by it, so no setgid bit was
    /// inherited and new nodes in it belong to this process's user and group.
    plain_owner: bool,
    /// It has a default ACL, so new nodes in it are given an ACL of its making and a
    /// mode masked by it: their xattrs must be read back and their mode set.
    inherits_acl: bool,
}

impl DstDir {
    /// The open directory.
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Whether this job made it, so that nothing in it is left from before.
    pub fn is_fresh(&self) -> bool {
        self.fresh
    }
}

/// Whether the directory `fd` has a default ACL, which its new nodes inherit.
fn has_default_acl(fd: &OwnedFd) -> bool {
    let mut none: [u8; 0] = [];
    rfs::fgetxattr(fd, c"system.posix_acl_default", &mut none[..]).is_ok()
}

/// The start of the next tick of the clock file timestamps are taken from (the coarse
/// one, a few milliseconds a tick), once it has come: every node changed by the job
/// after this has a ctime at or after it, every node changed before it one before it.
fn job_start() -> Timestamp {
    let coarse = || {
        let now = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
        Timestamp {
            sec: now.tv_sec,
            nsec: now.tv_nsec as u32,
        }
    };
    let began = coarse();
    loop {
        let now = coarse();
        if now != began {
            return now;
        }
        std::thread::sleep(std::time::Duration::from_micros(250));
    }
}

/// The xattrs `node` has now (at `path`), so those the source lacks can be removed.
fn xattrs_now(node: &xattr::Node<'_>, path: &RelPath) -> Result<Vec<Xattr>> {
    xattr::read(node).at_dst(path, "read xattrs")
}

/// How many names the source inode of `entry` has.
fn source_links(entry: &Entry) -> u64 {
    entry.links.map_or(1, |(_, nlink)| nlink)
}

/// Why `entry` replaces the node whose status was `st`: of another kind, or not up to
/// date (its size, else its mtime or, with `checksum`, its content; its target, its
/// device), as the dry run (preview.rs) says it.
fn replaced_why(st: &Stat, entry: &Entry, checksum: bool) -> Reasons {
    let kind = FileType::from_raw_mode(st.st_mode);
    match entry.kind {
        EntryKind::File { size } if kind == FileType::RegularFile => match st.st_size as u64 {
            s if s != size => Reasons::SIZE,
            _ if !checksum && meta::mtime_of(st) != entry.meta.mtime => Reasons::MTIME,
            _ => Reasons::CONTENT,
        },
        EntryKind::Symlink { .. } if kind == FileType::Symlink => Reasons::TARGET,
        EntryKind::CharDevice { .. } | EntryKind::BlockDevice { .. }
            if kind == FileType::CharacterDevice || kind == FileType::BlockDevice =>
        {
            Reasons::DEVICE
        }
        EntryKind::Fifo if kind == FileType::Fifo => Reasons::LINKS,
        _ => Reasons::KIND,
    }
}

fn cname(path: &RelPath) -> Result<CString> {
    CString::new(path.file_name())
        .map_err(|_| Error::dst(path, "name", io::Error::other("contains a NUL byte")))
}

/// What a file whose data differs from the hash its source recorded is told to be.
const DAMAGED: &str = "content differs from the hash recorded in the source (damaged after \
                       packing, or on the way); the file is not kept";

fn other(msg: &str) -> io::Error {
    io::Error::other(msg.to_string())
}

impl<'a> LocalTreeSink<'a> {
    /// A sink writing under `dst`, which is created if missing.
    pub fn new(
        dst: &Path,
        mover: &'a Mover,
        update: Update,
        stats: &'a Stats,
        reporter: &'a dyn Reporter,
    ) -> Self {
        LocalTreeSink {
            dst: dst.to_path_buf(),
            mover,
            update,
            meta: MetaWriter::new(),
            links: Links::default(),
            stats,
            reporter,
            root: std::sync::OnceLock::new(),
            root_made: std::sync::atomic::AtomicBool::new(false),
            started: job_start(),
            changes: None,
            in_the_way: None,
            link_dests: link_dest::Lazy::new(link_dest::LinkDests::default(), dst),
        }
    }

    /// The sink, taking a file missing from the destination from `dests` where one of
    /// them holds it unchanged (see [`link_dest`]).
    pub fn with_link_dests(mut self, dests: link_dest::LinkDests) -> Self {
        self.link_dests = link_dest::Lazy::new(dests, &self.dst);
        self
    }

    /// Where `entry`, a file missing from the destination, is found unchanged in a
    /// `--link-dest` or `--reflink-dest` DIR. A DIR that cannot be opened is reported
    /// once, and files are then copied.
    fn in_link_dests(&self, entry: &Entry, name: &CStr) -> Option<link_dest::Found> {
        self.link_dests
            .find(entry, name, &self.meta, &|why| self.reporter.warn(why))
    }

    /// The sink, removing a directory that stands where a non-directory is to go, with
    /// everything below it, by `delete`'s rules (`--delete`; see
    /// [`crate::delete::remove_in_the_way`]).
    pub fn deleting_in_the_way(mut self, delete: Option<DeleteOptions<'a>>) -> Self {
        self.in_the_way = delete;
        self
    }

    /// The sink, telling `changes` about every entry it makes, replaces or gives new
    /// metadata.
    pub fn with_changes(mut self, changes: Option<&'a dyn Changes>) -> Self {
        self.changes = changes;
        self
    }

    /// Tells of a change to `entry`: made where nothing was (`was` None), else
    /// replacing what had status `was`, for the reasons `why` where [`Self::settle`]
    /// gave them (else as [`replaced_why`] finds them).
    fn tell(&self, entry: &Entry, was: Option<&Stat>, why: Option<Reasons>) {
        let Some(c) = self.changes else { return };
        let what = match was {
            None => What::Created,
            Some(st) => {
                What::Updated(why.unwrap_or_else(|| replaced_why(st, entry, self.update.checksum)))
            }
        };
        c.change(&entry.path, Kind::of_entry(&entry.kind), what);
    }

    fn notice(&self, n: MetaNotice) {
        if n == MetaNotice::XattrsUnsupported {
            self.reporter.warn(
                "destination filesystem does not support extended attributes; not copying them",
            );
        }
    }

    /// Applies `meta` to the node `fd` just made in `dir`: where `dir` passed an ACL on
    /// to it, its xattrs are read back (to remove what the source lacks) and its mode
    /// set whatever the umask.
    fn apply_new(
        &self,
        fd: impl AsFd,
        dir: &DstDir,
        path: &RelPath,
        meta: &Metadata,
        chmod: bool,
    ) -> Result<()> {
        let fd = fd.as_fd();
        let have = if dir.inherits_acl {
            xattrs_now(&xattr::Node::Fd(fd), path)?
        } else {
            Vec::new()
        };
        let n = self
            .meta
            .apply_fd(fd, meta, chmod || dir.inherits_acl, dir.plain_owner, &have)
            .map_err(|(op, e)| Error::dst(path, op, e))?;
        self.notice(n);
        Ok(())
    }

    /// Looks at what is already at `name` in a directory that existed before the job.
    /// Returns it unless it was removed to make room.
    /// With `keep_old`, anything there is an error instead (and stays).
    fn existing(&self, dir: &DstDir, name: &CStr, path: &RelPath) -> Result<Option<Stat>> {
        if dir.fresh {
            return Ok(None);
        }
        match rfs::statat(&*dir.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(_) if self.update.keep_old => Err(Error::dst(
                path,
                "extract",
                other("already there: kept (-k, --keep-old-files)"),
            )),
            Ok(st) => Ok(Some(st)),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(Error::dst(path, "stat destination", e)),
        }
    }

    /// Removes what is in the way of a new node: anything but a directory that is not
    /// empty, which is an error (as rsync and GNU tar do; cp refuses any directory)
    /// unless the sink deletes (`--delete`): then it goes with what it holds, except
    /// what the rules keep, which keeps it and is the error. With `--delete` even an
    /// empty directory goes by the deletion's rules, itemized and counted, as the dry
    /// run (preview.rs) tells it.
    fn remove(&self, dir: &DstDir, name: &CStr, path: &RelPath, st: &Stat) -> Result<()> {
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return rfs::unlinkat(&*dir.fd, name, AtFlags::empty())
                .at_dst(path, "remove old destination");
        }
        if let Some(delete) = &self.in_the_way {
            remove_in_the_way(&dir.fd, name, path, delete, self.stats, self.reporter);
            return match rfs::statat(&*dir.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                Err(Errno::NOENT) => Ok(()),
                _ => Err(Error::dst(
                    path,
                    "replace",
                    other(
                        "a directory in the way in the destination holds what the rules \
                         keep (or could not be removed)",
                    ),
                )),
            };
        }
        match rfs::unlinkat(&*dir.fd, name, AtFlags::REMOVEDIR) {
            Err(Errno::NOTEMPTY | Errno::EXIST) => Err(Error::dst(
                path,
                "replace",
                other(
                    "a directory that is not empty is in the way in the destination \
                     (--delete removes it)",
                ),
            )),
            other => other.at_dst(path, "remove old destination"),
        }
    }

    /// Places `entry` as [`TreeSink::leaf`] does, except that a file already at its
    /// name is replaced even if it looks up to date: an archive that gives a name
    /// twice may have left an earlier member's file there, and two members of one
    /// size and mtime cannot be told apart by them (the last member wins).
    pub fn leaf_again(
        &self,
        parent: &DstDir,
        entry: &Entry,
        data: Option<FileData<'_>>,
    ) -> Result<()> {
        if let EntryKind::File { .. } = entry.kind {
            let name = cname(&entry.path)?;
            if let Some(st) = self.existing(parent, &name, &entry.path)? {
                if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile {
                    self.remove(parent, &name, &entry.path, &st)?;
                }
            }
        }
        self.leaf(parent, entry, data)
    }

    /// Places `entry`, of a kind made from scratch, as one more name of the copy of
    /// an earlier entry of its source inode where there is one (see [`Links`]).
    fn new_or_linked(&self, dir: &DstDir, entry: &Entry, data: Option<FileData<'_>>) -> Result<()> {
        let Some((key, nlink)) = entry.links else {
            return self.new_leaf(dir, entry, data);
        };
        let name = cname(&entry.path)?;
        match self.links.claim(key) {
            Claim::Link(made) => {
                self.hardlink(dir, &name, entry, &made, || self.new_leaf(dir, entry, data))
            }
            Claim::Copy => {
                let result = self.new_leaf(dir, entry, data);
                match &result {
                    Ok(()) => self.links.made(
                        key,
                        Made {
                            dir: Arc::downgrade(&dir.fd),
                            dir_path: entry.path.parent(),
                            name,
                        },
                        nlink,
                    ),
                    Err(_) => self.links.failed(key),
                }
                result
            }
        }
    }

    /// Makes (or finds up to date) a file, symlink, fifo, device or socket.
    fn new_leaf(&self, dir: &DstDir, entry: &Entry, data: Option<FileData<'_>>) -> Result<()> {
        match &entry.kind {
            EntryKind::File { size } => {
                let Some(data) = data else {
                    return Err(Error::dst(
                        &entry.path,
                        "copy",
                        other("no data given for a file"),
                    ));
                };
                self.file_data(dir, &cname(&entry.path)?, entry, *size, data)
            }
            EntryKind::Symlink { target } => self.symlink(dir, entry, target),
            EntryKind::Fifo
            | EntryKind::CharDevice { .. }
            | EntryKind::BlockDevice { .. }
            | EntryKind::Socket => self.special(dir, entry),
            EntryKind::HardLink { .. } | EntryKind::Dir => Err(Error::dst(
                &entry.path,
                "copy",
                other("not a kind that is made from scratch"),
            )),
        }
    }

    fn file_data(
        &self,
        dir: &DstDir,
        name: &CStr,
        entry: &Entry,
        size: u64,
        data: FileData<'_>,
    ) -> Result<()> {
        let path = &entry.path;
        let was = self.existing(dir, name, path)?;
        let mut why = None;
        if let Some(st) = &was {
            let is_file = FileType::from_raw_mode(st.st_mode) == FileType::RegularFile;
            if is_file && self.update.keep_newer && meta::mtime_of(st) > entry.meta.mtime {
                Stats::bump(&self.stats.skipped);
                self.stats.skipped_bytes.fetch_add(size, Relaxed);
                return Ok(());
            }
            if is_file && self.up_to_date(dir, name, st, entry, &data)? {
                match self.settle(dir, name, st, entry, false)? {
                    Settled::Done => {
                        Stats::bump(&self.stats.skipped);
                        self.stats.skipped_bytes.fetch_add(size, Relaxed);
                        return Ok(());
                    }
                    Settled::Replace(r) => why = Some(r),
                }
            }
            self.remove(dir, name, path, st)?;
        }
        if was.is_none() {
            if let Some(found) = self.in_link_dests(entry, name) {
                if self.take_from_link_dest(dir, name, entry, &found)? {
                    // Unchanged since the DIR's copy: no data moved, as rsync counts it.
                    Stats::bump(&self.stats.skipped);
                    self.stats.skipped_bytes.fetch_add(size, Relaxed);
                    return Ok(());
                }
            }
        }
        let (mode, chmod) = self.meta.create_mode(&entry.meta);
        let fd = self.create(dir, name, path, mode)?;
        let written = self
            .write_data(&fd, path, size, data)
            .and_then(|()| self.apply_new(&fd, dir, path, &entry.meta, chmod));
        if let Err(e) = written {
            // Leave no partial file behind that could be taken for a copy (unless
            // asked to keep it, not looking complete, for a rerun).
            let arrived = rfs::fstat(&fd).map_or(0, |st| st.st_size as u64);
            if !(self.update.keep_partial && arrived >= KEEP_PARTIAL && arrived < size) {
                let _ = rfs::unlinkat(&*dir.fd, name, AtFlags::empty());
            }
            return Err(e);
        }
        Stats::bump(&self.stats.files);
        self.stats.bytes.fetch_add(size, Relaxed);
        self.tell(entry, was.as_ref(), why);
        Ok(())
    }

    /// Creates a new file, never through a symlink. Something unexpectedly in the way
    /// (a name given twice in an archive, or made meanwhile) is replaced once.
    fn create(&self, dir: &DstDir, name: &CStr, path: &RelPath, mode: Mode) -> Result<OwnedFd> {
        let access = if self.update.verify {
            OFlags::RDWR
        } else {
            OFlags::WRONLY
        };
        let flags = access | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        self.replacing(dir, name, path, || rfs::openat(&*dir.fd, name, flags, mode))?
            .at_dst(path, "create")
    }

    /// Runs `make`, which creates `name` in `dir`. Where something already has that
    /// name (a name given twice in an archive, or made meanwhile), removes it as
    /// [`Self::remove`] does and runs `make` once more.
    fn replacing<T>(
        &self,
        dir: &DstDir,
        name: &CStr,
        path: &RelPath,
        make: impl Fn() -> rustix::io::Result<T>,
    ) -> Result<rustix::io::Result<T>> {
        match make() {
            Err(Errno::EXIST) => {
                let st = rfs::statat(&*dir.fd, name, AtFlags::SYMLINK_NOFOLLOW)
                    .at_dst(path, "stat destination")?;
                self.remove(dir, name, path, &st)?;
                Ok(make())
            }
            other => Ok(other),
        }
    }

    /// Brings an existing node's owner, mode, xattrs and times in line with `entry`
    /// without touching its data; does nothing when they already match.
    /// [`Settled::Replace`]: they differ, but the node has more names than the source's
    /// inode, which may lie outside the destination (a snapshot made with `cp -al`), so
    /// it must not change: the caller replaces it with a new node instead, as `cp -a`
    /// does, and tells the change for these reasons (as the dry run does).
    fn settle(
        &self,
        dir: &DstDir,
        name: &CStr,
        st: &Stat,
        entry: &Entry,
        is_symlink: bool,
    ) -> Result<Settled> {
        let m = &entry.meta;
        let have = xattrs_now(&xattr::Node::named(dir.fd.as_fd(), name), &entry.path)?;
        let kind = Kind::of_entry(&entry.kind);
        let differs = self.meta.differences(st, m, &have, kind);
        if differs.is_empty() {
            return Ok(Settled::Done);
        }
        if st.st_nlink > source_links(entry) {
            return Ok(Settled::Replace(differs));
        }
        let n = self
            .meta
            .apply_at(&*dir.fd, name, m, is_symlink, &have)
            .map_err(|(op, e)| Error::dst(&entry.path, op, e))?;
        self.notice(n);
        if let Some(c) = self.changes {
            c.change(&entry.path, kind, What::Meta(differs));
        }
        Ok(Settled::Done)
    }

    /// Applies `entry`'s metadata to the node `name` just made in `dir` (a symlink, a
    /// fifo or a device), removing an ACL `dir` passed on to it.
    fn meta_at(&self, dir: &DstDir, name: &CStr, entry: &Entry, is_symlink: bool) -> Result<()> {
        let have = if dir.inherits_acl && !is_symlink {
            xattrs_now(&xattr::Node::named(dir.fd.as_fd(), name), &entry.path)?
        } else {
            Vec::new()
        };
        let n = self
            .meta
            .apply_at(&*dir.fd, name, &entry.meta, is_symlink, &have)
            .map_err(|(op, e)| Error::dst(&entry.path, op, e))?;
        self.notice(n);
        Ok(())
    }

    /// Opens an existing destination directory, making sure this job can fill it. `None`:
    /// something else was in the way (never followed) and has been removed.
    fn open_existing_dir(
        &self,
        parent: &DstDir,
        name: &CStr,
        path: &RelPath,
    ) -> Result<Option<OwnedFd>> {
        match open_dir(&parent.fd, name) {
            Ok(fd) => {
                self.let_owner_in(&fd, path)?;
                Ok(Some(fd))
            }
            Err(Errno::NOTDIR | Errno::LOOP) => {
                self.clear_for_dir(parent, name, path)?;
                Ok(None)
            }
            Err(e) => Err(dir_error(path, e)),
        }
    }

    /// Removes the non-directory at `name` where a directory is to be made, as rsync and
    /// GNU tar replace it. Workers sharing a directory's members may race here: what is
    /// gone, or is a directory by now, another worker has already dealt with (and a
    /// directory it made must not be removed again).
    fn clear_for_dir(&self, parent: &DstDir, name: &CStr, path: &RelPath) -> Result<()> {
        match rfs::statat(&*parent.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Err(Errno::NOENT) => Ok(()),
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => Ok(()),
            Ok(_) => match rfs::unlinkat(&*parent.fd, name, AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT | Errno::ISDIR) => Ok(()),
                Err(e) => Err(Error::dst(path, "remove old destination", e)),
            },
            Err(e) => Err(Error::dst(path, "stat destination", e)),
        }
    }

    /// Gives the owner full access to a directory this job did not make, so it can fill
    /// it (root needs no such help). A directory of another owner is left as it is:
    /// each entry that cannot be made in it then fails on its own, naming it, as with
    /// `cp -a`.
    fn let_owner_in(&self, fd: &OwnedFd, path: &RelPath) -> Result<()> {
        if !self.meta.privileged {
            let st = rfs::fstat(fd).at_dst(path, "stat destination")?;
            if st.st_mode & 0o700 != 0o700 {
                match rfs::fchmod(fd, Mode::from_raw_mode((st.st_mode & 0o7777) | 0o700)) {
                    Ok(()) | Err(Errno::PERM) => {}
                    Err(e) => return Err(Error::dst(path, "set mode", e)),
                }
            }
        }
        Ok(())
    }
}

impl TreeSink for LocalTreeSink<'_> {
    type Dir = DstDir;

    // A socket is made again as a node, as `cp -a` and `rsync -a` make it.
    fn wants_sockets(&self) -> bool {
        true
    }

    fn root(&self, _entry: &Entry) -> Result<DstDir> {
        self.tree_root()
    }

    fn dir(&self, parent: &DstDir, entry: &Entry) -> Result<DstDir> {
        let path = &entry.path;
        let name = cname(path)?;
        let make = || -> Result<bool> {
            match rfs::mkdirat(&*parent.fd, name.as_c_str(), Mode::from_raw_mode(0o700)) {
                Ok(()) => Ok(true),
                Err(Errno::EXIST) => Ok(false),
                Err(e) => Err(Error::dst(path, "create directory", e)),
            }
        };
        let mut fresh = make()?;
        let mut existing = None;
        let mut replaced = false;
        if !fresh {
            existing = self.open_existing_dir(parent, &name, path)?;
            // Nothing there any more when something else was in the way: make it now.
            fresh = existing.is_none() && make()?;
            replaced = fresh;
        }
        let fd = match existing {
            Some(fd) => fd,
            None => open_dir(&parent.fd, &name).at_dst(path, "open destination directory")?,
        };
        if fresh {
            Stats::bump(&self.stats.dirs);
            match (replaced, self.changes) {
                // Told as the dry run tells it (preview.rs): another kind was in the way.
                (true, Some(c)) => c.change(path, Kind::Dir, What::Updated(Reasons::KIND)),
                _ => self.tell(entry, None, None),
            }
        }
        let inherits_acl = match fresh {
            true => parent.inherits_acl,
            false => has_default_acl(&fd),
        };
        Ok(DstDir {
            fd: Arc::new(fd),
            fresh,
            plain_owner: fresh && parent.plain_owner,
            inherits_acl,
        })
    }

    fn leaf(&self, parent: &DstDir, entry: &Entry, data: Option<FileData<'_>>) -> Result<()> {
        match &entry.kind {
            EntryKind::File { .. }
            | EntryKind::Symlink { .. }
            | EntryKind::Fifo
            | EntryKind::CharDevice { .. }
            | EntryKind::BlockDevice { .. }
            | EntryKind::Socket => self.new_or_linked(parent, entry, data),
            // Links by name come from archives: their targets are earlier members.
            EntryKind::HardLink { target } => self.link_by_name(parent, entry, target),
            EntryKind::Dir => Err(Error::dst(
                &entry.path,
                "copy",
                other("directory passed as a leaf"),
            )),
        }
    }

    fn finish_dir(&self, dir: &DstDir, entry: &Entry) -> Result<()> {
        // A directory that was there before may have xattrs the source lacks, and one
        // made here an ACL its parent passed on.
        // A root that was there, though empty (so fresh), was not made here.
        let made = dir.fresh
            && (!entry.path.is_root() || self.root_made.load(std::sync::atomic::Ordering::Relaxed));
        let have = if made && !dir.inherits_acl {
            Vec::new()
        } else {
            xattrs_now(&xattr::Node::Fd(dir.fd.as_fd()), &entry.path)?
        };
        if let (Some(c), false) = (self.changes, made) {
            let st = rfs::fstat(&*dir.fd).at_dst(&entry.path, "stat destination")?;
            let differs = self.meta.differences(&st, &entry.meta, &have, Kind::Dir);
            if !differs.is_empty() {
                c.change(&entry.path, Kind::Dir, What::Meta(differs));
            }
        }
        let n = self
            .meta
            .apply_fd(&*dir.fd, &entry.meta, true, false, &have)
            .map_err(|(op, e)| Error::dst(&entry.path, op, e))?;
        self.notice(n);
        Ok(())
    }
}
