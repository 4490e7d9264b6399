//! `copy`: a local tree into another local tree, the walker feeding the local-tree sink
//! directly (no serialisation in between).

use crate::changes::Changes;
use crate::data::{Mover, Reflink, Sparse};
use crate::delete::{delete_extraneous, DeleteLimit, DeleteOptions, SourceErrors, NOTHING_DELETED};
use crate::entry::{InodeKey, RelPath};
use crate::error::{Counting, Error, OneEntry, Reporter, Result};
use crate::filter::Filter;
use crate::local::link_dest::LinkDests;
use crate::local::{LocalTreeSink, Update};
use crate::preview::{PreviewDir, PreviewSink};
use crate::stats::Stats;
use crate::walk::{held_levels_within, walk, walk_one, WalkConfig};
use rustix::fs::{Mode, OFlags};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Everything a copy can be asked to do differently.
#[derive(Clone, Debug)]
pub struct CopyOptions {
    /// Worker threads.
    pub threads: usize,
    /// Clone policy.
    pub reflink: Reflink,
    /// Hole policy.
    pub sparse: Sparse,
    /// Compare content, not size and mtime, to decide a file is up to date.
    pub checksum: bool,
    /// Re-read every written file and compare hashes.
    pub verify: bool,
    /// Check data for all-zero blocks (off only to measure what the check costs).
    pub zero_scan: bool,
    /// Which entries to copy (`--exclude`, `--include`); None: all.
    pub filter: Option<Arc<Filter>>,
    /// After the copy, remove from the destination what the source does not have
    /// (see [`crate::delete`]); not when some of the source could not be read.
    pub delete: bool,
    /// With `delete`, remove what `filter` excludes too.
    pub delete_excluded: bool,
    /// Told about every entry the copy changes in the destination.
    pub changes: Option<Arc<dyn Changes>>,
    /// Write nothing: only tell `changes` (and count) what the copy would do
    /// (`--dry-run`; see [`crate::preview`]).
    pub dry_run: bool,
    /// Leave alone a file in the destination whose mtime is newer than the source's
    /// (`-u`, `--update`, as rsync and `cp -u` keep it).
    pub keep_newer: bool,
    /// Stay on the source root's filesystem (see [`WalkConfig::one_file_system`]).
    pub one_file_system: bool,
    /// Follow symlinks (see [`WalkConfig::dereference`]).
    pub dereference: bool,
    /// With `delete`, remove at most this many entries (`--max-delete`).
    pub max_delete: Option<Arc<DeleteLimit>>,
    /// Where files missing from the destination are taken from when unchanged there
    /// (`--link-dest`, `--reflink-dest`; see [`crate::local::link_dest`]).
    pub link_dests: LinkDests,
}

impl Default for CopyOptions {
    fn default() -> Self {
        CopyOptions {
            threads: default_threads(),
            reflink: Reflink::Auto,
            sparse: Sparse::Auto,
            checksum: false,
            verify: false,
            zero_scan: true,
            filter: None,
            delete: false,
            delete_excluded: false,
            changes: None,
            dry_run: false,
            keep_newer: false,
            one_file_system: false,
            dereference: false,
            max_delete: None,
            link_dests: LinkDests::default(),
        }
    }
}

/// Workers to use when not told: eight per core. A warm copy is CPU-bound and the
/// count hardly matters from one per core up to eight; a cold one waits on the disk
/// and gains up to about eight per core (a -j sweep in docs/benchmarks.md).
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()) * 8
}

/// Whether the walk of `src` never enters `dst`, a directory below it (both resolved):
/// the rules exclude it or a directory on the way to it, or with `-x` it (or a
/// directory on the way) is on another filesystem than `src`, as a backup disk
/// mounted below `/` is for `ferry copy -x / /mnt/backup/root`.
fn walk_leaves_out(src: &Path, dst: &Path, opts: &CopyOptions) -> bool {
    let Ok(rel) = dst.strip_prefix(src) else {
        return false;
    };
    let src_dev = std::fs::metadata(src).map(|m| m.dev());
    let mut at = src.to_path_buf();
    let mut path = Vec::new();
    for part in rel.components() {
        let name = part.as_os_str().as_encoded_bytes();
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(name);
        at.push(part);
        if opts
            .filter
            .as_ref()
            .is_some_and(|f| f.excludes(&path, true))
        {
            return true;
        }
        let elsewhere =
            std::fs::metadata(&at).is_ok_and(|m| src_dev.as_ref().is_ok_and(|&dev| m.dev() != dev));
        if opts.one_file_system && elsewhere {
            return true;
        }
    }
    false
}

/// `dst` made absolute and free of symlinks as far as it exists.
fn resolve_partly(dst: &Path) -> io::Result<PathBuf> {
    let mut rest = Vec::new();
    let mut cur = std::path::absolute(dst)?;
    loop {
        match cur.canonicalize() {
            Ok(c) => {
                let mut out = c;
                out.extend(rest.iter().rev());
                return Ok(out);
            }
            Err(_) => match (cur.file_name().map(|n| n.to_owned()), cur.parent()) {
                (Some(name), Some(parent)) => {
                    rest.push(name);
                    cur = parent.to_path_buf();
                }
                _ => return Err(io::Error::other("no existing ancestor")),
            },
        }
    }
}

/// Copies the tree `src` into `dst` (created if missing) like `cp -a src/. dst`; a
/// `src` that is not a directory, or is a symlink to one named without a trailing
/// slash, is copied on its own (see [`copy_one`], [`is_tree`]). Per-path
/// failures go to `reporter` and are counted in `stats.errors`; the returned error
/// means the copy could not start.
pub fn copy_tree(
    src: &Path,
    dst: &Path,
    opts: &CopyOptions,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<()> {
    let not_there = |e| Error::new(&RelPath::root(), "open source", e);
    std::fs::symlink_metadata(src).map_err(not_there)?;
    let following = WalkConfig {
        dereference: opts.dereference,
        ..WalkConfig::default()
    };
    if !following.walks_as_tree(src) {
        return copy_one(src, dst, opts, stats, reporter);
    }
    let src_real = src.canonicalize().map_err(not_there)?;
    let dst_real =
        resolve_partly(dst).map_err(|e| Error::dst(&RelPath::root(), "resolve destination", e))?;
    if dst_real.starts_with(&src_real) && !walk_leaves_out(&src_real, &dst_real, opts) {
        return Err(Error::dst(
            &RelPath::root(),
            "copy",
            io::Error::other("cannot copy a directory into itself"),
        ));
    }
    if opts.delete && src_real.starts_with(&dst_real) {
        return Err(Error::dst(
            &RelPath::root(),
            "delete",
            io::Error::other("SRC is inside DST: --delete would remove it"),
        ));
    }
    let counting = Counting {
        inner: reporter,
        stats,
    };
    let noted = SourceErrors::new(&counting);
    let threads = workers_within_open_files(opts.threads, reporter);
    let cfg = |skip: Option<&rustix::fs::Stat>| WalkConfig {
        threads,
        skip: skip.map(InodeKey::of).into_iter().collect(),
        held_levels: held_levels_for(threads),
        unreadable_dirs: true,
        filter: opts.filter.clone(),
        one_file_system: opts.one_file_system,
        dereference: opts.dereference,
        ..WalkConfig::default()
    };
    let stat_dst = |fd| {
        rustix::fs::fstat(fd)
            .map_err(|e| Error::dst(&RelPath::root(), "stat destination", io::Error::from(e)))
    };
    // With --delete, a directory where SRC has a non-directory goes (as rsync does).
    let in_the_way = opts.delete.then_some(DeleteOptions {
        filter: opts.filter.as_deref(),
        excluded: opts.delete_excluded,
        dry_run: opts.dry_run,
        changes: opts.changes.as_deref(),
        limit: opts.max_delete.as_deref(),
    });
    if opts.dry_run {
        let root = match rustix::fs::open(
            dst,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => Some(fd),
            Err(rustix::io::Errno::NOENT) => None,
            Err(e) => return Err(Error::dst(&RelPath::root(), "open destination", e)),
        };
        let st = root.as_ref().map(stat_dst).transpose()?;
        let changes = opts.changes.as_deref();
        let sink = PreviewSink::new(PreviewDir::new(root), opts.checksum, stats, changes)
            .keeping_newer(opts.keep_newer)
            .with_link_dests(opts.link_dests.clone(), dst)
            .deleting_in_the_way(in_the_way);
        walk(src, &sink, &cfg(st.as_ref()), &noted)?;
    } else {
        let mover = mover(opts);
        let sink = LocalTreeSink::new(dst, &mover, update(opts), stats, &noted)
            .with_changes(opts.changes.as_deref())
            .with_link_dests(opts.link_dests.clone())
            .deleting_in_the_way(in_the_way);
        // The destination may still be reachable from inside the source through a bind
        // mount, even one made by this job: it is made first, and the walker skips it by
        // inode.
        let st = stat_dst(sink.tree_root()?.fd())?;
        walk(src, &sink, &cfg(Some(&st)), &noted)?;
    }
    let Some(delete) = in_the_way else {
        return Ok(());
    };
    if noted.any() {
        noted.warn(NOTHING_DELETED);
        return Ok(());
    }
    delete_extraneous(src, dst, &delete, stats, &noted)?;
    if let Some(limit) = &opts.max_delete {
        limit.warn_refused(&noted);
    }
    Ok(())
}

/// Copies `src`, which is not a directory (a symlink is copied as a link), as `cp -a
/// src dst` does: into `dst` when that is a directory, else to `dst` itself, its
/// missing parents made. An up-to-date target is skipped. A failure to copy it is
/// reported and counted like a file's in a tree.
fn copy_one(
    src: &Path,
    dst: &Path,
    opts: &CopyOptions,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<()> {
    let root = RelPath::root();
    let into_dir = std::fs::metadata(dst).is_ok_and(|m| m.is_dir());
    let (dir, name) = if into_dir {
        (dst, src.file_name())
    } else if dst.as_os_str().as_encoded_bytes().ends_with(b"/") {
        // `cp` too: a trailing slash promises a directory.
        return Err(Error::dst(&root, "copy", io::Error::from_raw_os_error(20)));
    } else {
        let parent = dst.parent().filter(|p| !p.as_os_str().is_empty());
        (parent.unwrap_or(Path::new(".")), dst.file_name())
    };
    let name = name
        .ok_or_else(|| Error::dst(&root, "copy", io::Error::other("names no file")))?
        .as_encoded_bytes();
    let target = dir.join(std::ffi::OsStr::from_bytes(name));
    if let (Ok(a), Ok(b)) = (
        std::fs::symlink_metadata(src),
        std::fs::symlink_metadata(&target),
    ) {
        if InodeKey::of_metadata(&a) == InodeKey::of_metadata(&b) {
            return Err(Error::dst(
                &root,
                "copy",
                io::Error::other("is the source itself"),
            ));
        }
    }
    let one = OneEntry {
        inner: reporter,
        dst_is_entry: !into_dir,
    };
    let counting = Counting { inner: &one, stats };
    let cfg = WalkConfig {
        filter: opts.filter.clone(),
        ..WalkConfig::default()
    };
    if opts.dry_run {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let into = match rustix::fs::open(dir, flags, Mode::empty()) {
            Ok(fd) => PreviewDir::new(Some(fd)),
            Err(rustix::io::Errno::NOENT) => PreviewDir::new(None),
            Err(e) => return Err(one.named(Error::dst(&root, "open destination", e))),
        };
        let changes = opts.changes.as_deref();
        let sink = PreviewSink::new(into.clone(), opts.checksum, stats, changes)
            .keeping_newer(opts.keep_newer);
        if let Err(e) = walk_one(src, Some(name), &sink, into, &cfg, &counting) {
            counting.error(&e);
        }
        return Ok(());
    }
    let mover = mover(opts);
    let sink = LocalTreeSink::new(dir, &mover, update(opts), stats, &counting)
        .with_changes(opts.changes.as_deref())
        .with_link_dests(opts.link_dests.clone());
    let made = sink.open_root().map_err(|e| one.named(e))?;
    if let Err(e) = walk_one(src, Some(name), &sink, made, &cfg, &counting) {
        counting.error(&e);
    }
    sink.settle_unnamed_root().map_err(|e| one.named(e))
}

/// The data mover `opts` asks for.
fn mover(opts: &CopyOptions) -> Mover {
    let mut mover = Mover::new(opts.reflink, opts.sparse);
    mover.zero_scan = opts.zero_scan;
    mover
}

/// How `opts` asks an existing destination to be brought up to date.
fn update(opts: &CopyOptions) -> Update {
    Update {
        checksum: opts.checksum,
        verify: opts.verify,
        keep_newer: opts.keep_newer,
        keep_old: false,
        keep_partial: false,
    }
}

/// Each worker keeps its chain of directories open (the destination's for every level,
/// the source's too where subdirectories wait), as deep as the limit allows (see
/// [`held_levels_for`]), deeper ones only while it works in them, plus the file pair it
/// copies: room for at least 20 levels each.
const OPEN_FILES_PER_WORKER: u64 = 2 * 20 + 2;

/// Descriptors set aside for the rest of the process (standard streams, the roots).
const OPEN_FILES_RESERVED: u64 = 16;

/// At most `asked` workers, as many as the limit on open files leaves room for (at
/// least one). Under `ulimit -n 64`, 16 workers failed on a tree 10 deep; so did 4.
fn workers_within_open_files(asked: usize, reporter: &dyn Reporter) -> usize {
    crate::limits::workers_within(asked, OPEN_FILES_PER_WORKER, OPEN_FILES_RESERVED, reporter)
}

/// How many levels of directories each of `workers` workers keeps open: as many as its
/// share of the limit on open files holds (hundreds under the usual hard limits), so
/// only a tree deeper than the limit allows pays for letting go of them.
fn held_levels_for(workers: usize) -> usize {
    let each = crate::limits::open_files_each(workers, OPEN_FILES_RESERVED, usize::MAX);
    held_levels_within(each as u64)
}
