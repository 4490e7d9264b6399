//! Placing members under the destination by path: the [`Extractor`] the workers of an
//! unpack share, each with its own cache of the directories it is filling. It reaches
//! directories through the local-tree sink, which never follows a symlink, and tells a
//! failure to reach a member's directory as that member's own.

use super::archive::ArchiveError;
use super::order::Clash;
use super::select::is_within;
use super::unpack::UnpackOptions;
use ferry_core::data::Mover;
use ferry_core::delete::DeleteOptions;
use ferry_core::entry::{Entry, EntryKind, Metadata, RelPath};
use ferry_core::error::{Error, Reporter};
use ferry_core::limits::{open_files_each, workers_within};
use ferry_core::local::{DstDir, InTheWay, LocalTreeSink, Reach, Update};
use ferry_core::sink::{FileData, TreeSink};
use ferry_core::Stats;
use std::collections::HashSet;
use std::io;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

/// Places entries given by path under the destination; shared by the workers of a
/// parallel unpack, each with its own cache of the directory it is filling.
pub(super) struct Extractor<'a> {
    sink: LocalTreeSink<'a>,
    pub(super) root: DstDir,
    pub(super) reporter: &'a dyn Reporter,
    /// At most this many open directories in a worker's cache.
    cached_dirs: usize,
    /// Directory members that could not be made, each reported then: finishing them
    /// is no second error (onto a read-only filesystem, every directory was one).
    unmade: Mutex<HashSet<RelPath>>,
    /// Whether [`Extractor::finish`] sets directory metadata.
    dir_metadata: bool,
}

/// Open directories a worker used last, each an ancestor of the next, with their paths:
/// the next member most likely lies in the same directory or near it, so finding its
/// directory opens only the components below the deepest one it shares.
pub(super) type DirCache = Vec<(RelPath, DstDir)>;

/// At most this many open directories in a worker's cache (the shallowest go first),
/// so a very deep path does not run out of descriptors; fewer when the limit on open
/// files is low (kernel tree, 16 workers: `ulimit -n 128` failed with 32 each).
const CACHED_DIRS: usize = 32;

/// Descriptors each worker holds besides its directory cache: the file being written,
/// a directory being opened, one just dropped from the cache and still in use.
const WORKER_DESCRIPTORS: u64 = 3;

/// Descriptors kept for the rest: the archive, the destination, the standard streams.
const OTHER_DESCRIPTORS: u64 = 16;

/// At most `asked` workers, as many as the limit on open files leaves room for with
/// one cached directory each. Under `ulimit -n 64` with 32 descriptors inherited,
/// 16 workers failed with "Too many open files".
pub(super) fn workers_within_open_files(asked: usize, reporter: &dyn Reporter) -> usize {
    workers_within(asked, WORKER_DESCRIPTORS + 1, OTHER_DESCRIPTORS, reporter)
}

impl<'a> Extractor<'a> {
    /// An extractor for `workers` workers (each with a directory cache).
    pub(super) fn new(
        dst: &Path,
        mover: &'a Mover,
        opts: &UnpackOptions,
        workers: usize,
        stats: &'a Stats,
        reporter: &'a dyn Reporter,
    ) -> Result<Self, ArchiveError> {
        let workers_own = WORKER_DESCRIPTORS * workers as u64;
        let cached_dirs = open_files_each(workers, OTHER_DESCRIPTORS + workers_own, CACHED_DIRS);
        let sink = LocalTreeSink::new(
            dst,
            mover,
            Update {
                checksum: opts.checksum,
                verify: opts.verify,
                keep_newer: false,
                keep_old: opts.keep_old,
                keep_partial: opts.keep_partial,
            },
            stats,
            reporter,
        );
        let root_entry = Entry {
            path: RelPath::root(),
            kind: EntryKind::Dir,
            meta: Metadata::default(),
            links: None,
        };
        let root = sink.root(&root_entry).map_err(|e| {
            ArchiveError::Destination(format!("{}: {}: {}", dst.display(), e.op, e.os))
        })?;
        Ok(Extractor {
            sink,
            root,
            reporter,
            cached_dirs,
            unmade: Mutex::default(),
            dir_metadata: opts.dir_metadata,
        })
    }

    /// A directory in the way of a member that is not one is removed by `delete`'s
    /// rules (`--delete`; see [`LocalTreeSink::deleting_in_the_way`]).
    pub(super) fn deleting_in_the_way(mut self, delete: Option<DeleteOptions<'a>>) -> Self {
        self.sink = self.sink.deleting_in_the_way(delete);
        self
    }

    /// The directory at `path`, reached as `reach` says, found from the
    /// worker's cache.
    fn dir(&self, path: &RelPath, reach: Reach, cache: &mut DirCache) -> Result<DstDir, Error> {
        while cache.last().is_some_and(|(p, _)| !is_within(path, p)) {
            cache.pop();
        }
        let (at, from) = match cache.last() {
            Some((p, d)) => (p.clone(), d.clone()),
            None => (RelPath::root(), self.root.clone()),
        };
        self.sink.dir_below(&from, &at, path, reach, |p, d| {
            if cache.len() >= self.cached_dirs {
                cache.remove(0);
            }
            cache.push((p.clone(), d.clone()));
        })
    }

    /// Makes a directory member (its metadata waits for [`Extractor::finish`]), as
    /// `clash` allows (see [`Extractor::put`]).
    pub(super) fn make_dir(
        &self,
        entry: &Entry,
        clash: Clash,
        cache: &mut DirCache,
    ) -> Result<(), Error> {
        let made = match clash.below {
            true => self.parent(entry, clash, cache).map(drop),
            false => Ok(()),
        };
        let made = made.and_then(|()| {
            self.dir(&entry.path, Reach::Named, cache)
                .map(drop)
                .map_err(|e| as_member_error(entry, e))
        });
        let mut unmade = self.unmade.lock().unwrap_or_else(PoisonError::into_inner);
        match &made {
            Err(_) => drop(unmade.insert(entry.path.clone())),
            // Named again, and made this time.
            Ok(()) if !unmade.is_empty() => drop(unmade.remove(&entry.path)),
            Ok(()) => {}
        }
        made
    }

    /// The directory `entry` goes into, made where missing. Below a path an earlier
    /// member named as something other than a directory (`clash.below`), what stands
    /// there stays, whoever made the directory holding it: no member is placed through
    /// a symlink (or instead of a file) the archive made, as bsdtar refuses to. Nor
    /// is one replaced in a directory this unpack made, where only members put things.
    fn parent(&self, entry: &Entry, clash: Clash, cache: &mut DirCache) -> Result<DstDir, Error> {
        let reach = match clash.below {
            true => Reach::MakeKeeping,
            false => Reach::Make,
        };
        self.dir(&entry.path.parent(), reach, cache)
            .map_err(|e| as_member_error(entry, e))
    }

    /// Places a member that is not a directory, as `clash` says: where it gives the
    /// name of an earlier member, a file there is replaced however up to date it looks
    /// (it may be that member's, left by an interrupted unpack that this one resumes);
    /// below something an earlier member made, see [`Extractor::parent`].
    pub(super) fn put(
        &self,
        entry: &Entry,
        data: Option<FileData<'_>>,
        clash: Clash,
        cache: &mut DirCache,
    ) -> Result<(), Error> {
        if entry.path.is_root() {
            return Err(Error::new(
                &entry.path,
                "unpack",
                io::Error::other("a member that is not a directory names the destination itself"),
            ));
        }
        let parent = self.parent(entry, clash, cache)?;
        match clash.repeat {
            true => self.sink.leaf_again(&parent, entry, data),
            false => self.sink.leaf(&parent, entry, data),
        }
    }

    /// Applies directory metadata, in the order of `dirs`, which puts every directory
    /// after all below it (so setting one never disturbs another). `root_named`: one
    /// of them is the destination itself; if none is, it is settled as copy does.
    /// `stopped`: the unpack ended early, so some directories were never made; their
    /// absence is no further error. Nor is a directory whose making failed (reported
    /// then): each member gets one error at most. Returns the directories whose
    /// metadata could not be set.
    pub(super) fn finish(
        &self,
        dirs: impl IntoIterator<Item = Entry>,
        root_named: bool,
        stopped: bool,
    ) -> Vec<RelPath> {
        let mut failed = Vec::new();
        if !root_named {
            if let Err(err) = self.sink.settle_unnamed_root() {
                self.reporter.error(&err);
            }
        }
        if !self.dir_metadata {
            return failed;
        }
        let mut cache = DirCache::new();
        let unmade =
            std::mem::take(&mut *self.unmade.lock().unwrap_or_else(PoisonError::into_inner));
        for e in dirs.into_iter().filter(|e| !unmade.contains(&e.path)) {
            let dir = self.dir(&e.path, Reach::Open, &mut cache);
            // A later member of that name, not a directory, has taken its place: the
            // last one wins, as in tar.
            let replaced =
                |err: &Error| err.path == e.path && err.os.kind() == io::ErrorKind::NotADirectory;
            if dir.as_ref().is_err_and(replaced) {
                continue;
            }
            let dir = dir.map_err(|err| as_member_error(&e, err));
            match dir.and_then(|d| self.sink.finish_dir(&d, &e)) {
                Err(err) if stopped && err.os.kind() == io::ErrorKind::NotFound => {}
                Err(err) => {
                    self.reporter.error(&err);
                    failed.push(e.path);
                }
                Ok(()) => {}
            }
        }
        failed
    }

    /// Whether directories get their metadata (see [`UnpackOptions::dir_metadata`]).
    pub(super) fn sets_dir_metadata(&self) -> bool {
        self.dir_metadata
    }
}

/// A failure to reach a directory above `entry`, told as `entry`'s own: each member
/// below a directory that could not be made (or opened, to finish it) gets its own
/// line, naming it; one below a symlink (or other non-directory) that stays says so,
/// naming it.
fn as_member_error(entry: &Entry, e: Error) -> Error {
    if e.path == entry.path {
        return e;
    }
    if let Some(way) = e.os.get_ref().and_then(|os| os.downcast_ref::<InTheWay>()) {
        let why = format!(
            "not extracted through {}, {} that an earlier member made",
            e.path,
            way.what()
        );
        return Error::dst(&entry.path, "unpack", io::Error::other(why));
    }
    let why = format!("{}: {}: {}", e.path, e.op, e.os);
    Error::dst(
        &entry.path,
        "reach its directory",
        io::Error::new(e.os.kind(), why),
    )
}
