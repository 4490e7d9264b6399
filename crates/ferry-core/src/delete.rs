//! `--delete`: once a copy is done, removes from the destination what the source does
//! not have, as `rsync --delete` does.
//!
//! Source and destination are walked side by side from their roots, one directory at
//! a time, by directory descriptor (no `PATH_MAX` limit): each destination directory's
//! names are compared with its source directory's, and a name the source lacks is
//! removed, a directory with everything below it. A name the filter rules exclude is
//! kept (with everything below it, which is not looked at), unless `delete_excluded`:
//! then it is removed, even where the source has it. Directories are opened with
//! `O_NOFOLLOW`, and a symlink is removed as a link: nothing outside the destination is
//! ever reached through one. A source directory that cannot be read is an error, and
//! nothing in its destination is removed.
//!
//! The caller runs this only after a copy whose source was read without error (see
//! [`SourceErrors`]): a directory that could not be read is copied empty, and would
//! otherwise empty its copy.

use crate::changes::{Changes, Kind, What};
use crate::entry::RelPath;
use crate::error::{Context, Error, Reporter, Result, Side};
use crate::filter::Filter;
use crate::local::open_dir;
use crate::meta;
use crate::stats::Stats;
use crate::walk::{read_names, Name};
use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// How to delete.
#[derive(Clone, Copy, Debug, Default)]
pub struct DeleteOptions<'a> {
    /// The copy's filter rules: what they exclude is kept (see `excluded`).
    pub filter: Option<&'a Filter>,
    /// Remove what the rules exclude too (`--delete-excluded`).
    pub excluded: bool,
    /// Remove nothing, only tell `changes` what would go (`--dry-run`).
    pub dry_run: bool,
    /// Told about every entry removed.
    pub changes: Option<&'a dyn Changes>,
    /// Remove at most this many entries in all (`--max-delete`), counting with
    /// `Stats::deleted`; what is past it is kept.
    pub limit: Option<&'a DeleteLimit>,
}

/// `--max-delete N`: at most `N` removals in a job, then none. The first one refused
/// is an error naming its path (the job ends with status 1); the rest are counted.
#[derive(Debug, Default)]
pub struct DeleteLimit {
    /// Removals allowed.
    pub max: u64,
    /// Removals begun (a failed one is not given back).
    taken: AtomicU64,
    /// Removals refused because `max` was reached.
    pub refused: AtomicU64,
}

impl DeleteLimit {
    /// A limit of `max` removals.
    pub fn new(max: u64) -> Self {
        DeleteLimit {
            max,
            ..DeleteLimit::default()
        }
    }

    /// Warns of the removals refused, if any.
    pub fn warn_refused(&self, reporter: &dyn Reporter) {
        let refused = self.refused.load(Ordering::Relaxed);
        if refused > 0 {
            reporter.warn(&format!(
                "--max-delete {}: {refused} entries that would go were kept",
                self.max
            ));
        }
    }

    /// Whether one more removal (of `path`) is allowed, taking it if so; a refusal is
    /// counted, and the first reported.
    fn allows(&self, path: &RelPath, reporter: &dyn Reporter) -> bool {
        let taken = self
            .taken
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.max).then_some(n + 1)
            });
        if taken.is_ok() {
            return true;
        }
        if self.refused.fetch_add(1, Ordering::Relaxed) == 0 {
            let why = format!(
                "--max-delete {} reached: kept, with whatever else would go",
                self.max
            );
            reporter.error(&Error::dst(path, "delete", std::io::Error::other(why)));
        }
        false
    }
}

/// The warning when `--delete` deletes nothing because some of SRC could not be read
/// (rsync: "IO error encountered -- skipping file deletion").
pub const NOTHING_DELETED: &str = "some of SRC could not be read: nothing deleted from DST \
     (--delete), so that what could not be read is not taken for gone";

/// Passes messages on, noting whether any error was on the source's side.
pub struct SourceErrors<'a> {
    /// Where the messages go.
    pub inner: &'a dyn Reporter,
    seen: AtomicBool,
}

impl<'a> SourceErrors<'a> {
    /// Notes the errors passed on to `inner`.
    pub fn new(inner: &'a dyn Reporter) -> Self {
        SourceErrors {
            inner,
            seen: AtomicBool::new(false),
        }
    }

    /// Whether some error was on the source's side.
    pub fn any(&self) -> bool {
        self.seen.load(Ordering::Relaxed)
    }
}

impl Reporter for SourceErrors<'_> {
    fn error(&self, err: &Error) {
        if err.side == Side::Source {
            self.seen.store(true, Ordering::Relaxed);
        }
        self.inner.error(err);
    }
    fn warn(&self, msg: &str) {
        self.inner.warn(msg);
    }
}

/// Removes from the tree `dst` what the tree `src` does not have. Per-path failures go
/// to `reporter` and the rest goes on; the returned error means nothing could be done.
pub fn delete_extraneous(
    src: &Path,
    dst: &Path,
    opts: &DeleteOptions<'_>,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<()> {
    let root = RelPath::root();
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let src_fd = rfs::open(src, flags, Mode::empty()).at(&root, "open source")?;
    let dst_fd = match rfs::open(dst, flags | OFlags::NOATIME, Mode::empty()).or_else(|e| match e {
        Errno::PERM => rfs::open(dst, flags, Mode::empty()),
        e => Err(e),
    }) {
        // A dry run into nothing: nothing to delete.
        Err(Errno::NOENT) if opts.dry_run => return Ok(()),
        other => other.at_dst(&root, "open destination")?,
    };
    let deleter = Deleter {
        opts,
        stats,
        reporter,
    };
    // Depth first, each level's directories still to compare kept with its descriptors.
    let mut stack = vec![Level {
        src: src_fd,
        dst: dst_fd,
        path: root,
        below: Vec::new(),
    }];
    deleter.compare(&mut stack[0]);
    while let Some(level) = stack.last_mut() {
        let Some(name) = level.below.pop() else {
            stack.pop();
            continue;
        };
        let path = level.path.join(name.as_bytes());
        let opened = open_dir(&level.src, &name)
            .at(&path, "open directory")
            .and_then(|s| {
                Ok((
                    s,
                    open_dst_dir(&level.dst, &name).at_dst(&path, "open directory")?,
                ))
            });
        match opened {
            Ok((src, dst)) => {
                let mut next = Level {
                    src,
                    dst,
                    path,
                    below: Vec::new(),
                };
                deleter.compare(&mut next);
                stack.push(next);
            }
            Err(e) => reporter.error(&e),
        }
    }
    Ok(())
}

/// Removes the directory `name` of `dir` (at `path`) with everything below it, as
/// [`delete_extraneous`] removes a directory the source lacks: never through a symlink,
/// keeping what the rules exclude (and the directories holding it) unless
/// `opts.excluded`, each removal counted and told. With `--delete`, this is how a copy
/// clears a directory standing where the source has a file, a symlink or another
/// non-directory, as `rsync --delete` does. Failures go to `reporter`; whether the
/// name is gone is for the caller to look.
pub fn remove_in_the_way(
    dir: &OwnedFd,
    name: &CStr,
    path: &RelPath,
    opts: &DeleteOptions<'_>,
    stats: &Stats,
    reporter: &dyn Reporter,
) {
    let deleter = Deleter {
        opts,
        stats,
        reporter,
    };
    deleter.remove(dir, name, path, FileType::Directory);
}

/// Removes `path` from the tree whose root is open as `root`, with everything below
/// it, by [`remove_in_the_way`]'s rules (never through a symlink, keeping what the
/// rules exclude unless `opts.excluded`, each removal counted and told): how a
/// receiver carries out the deletions a network copy's sender found (the sender's
/// walk did not meet `path`). Each directory leading to it is opened from `root`
/// without following a symlink: where one is missing, or is not a directory, there is
/// nothing to delete. The directory `path` was in keeps its times. `path` must be a
/// relative path of plain names (no `.`, `..` or empty component): one that is not is
/// an error naming it, and nothing is removed.
pub fn remove_below(
    root: &OwnedFd,
    path: &RelPath,
    opts: &DeleteOptions<'_>,
    stats: &Stats,
    reporter: &dyn Reporter,
) {
    if !crate::local::is_plain(path) {
        let why = std::io::Error::other("not a path of plain names below the destination");
        return reporter.error(&Error::dst(path, "delete", why));
    }
    let parent_path = path.parent();
    let parent = match crate::local::open_below(root, &parent_path) {
        Ok(Some(fd)) => fd,
        Ok(None) => return,
        Err(e) => return reporter.error(&Error::dst(&parent_path, "open directory", e)),
    };
    let dir = &parent;
    let Ok(name) = CString::new(path.file_name()) else {
        return;
    };
    let kind = match rfs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => FileType::from_raw_mode(st.st_mode),
        Err(Errno::NOENT) => return,
        Err(e) => return reporter.error(&Error::dst(path, "delete", e)),
    };
    let times = rfs::fstat(dir);
    let before = stats.deleted.load(Ordering::Relaxed);
    let deleter = Deleter {
        opts,
        stats,
        reporter,
    };
    deleter.remove(dir, &name, path, kind);
    // Removing names changed the directory's times: give it those it had.
    if !opts.dry_run && stats.deleted.load(Ordering::Relaxed) != before {
        let set = times.and_then(|st| rfs::futimens(dir, &meta::timestamps(&meta::from_stat(&st))));
        if let Err(e) = set {
            reporter.error(&Error::dst(&parent_path, "set times", e));
        }
    }
}

/// One directory of both trees, open, and its subdirectories still to compare.
struct Level {
    src: OwnedFd,
    dst: OwnedFd,
    path: RelPath,
    below: Vec<CString>,
}

struct Deleter<'a> {
    opts: &'a DeleteOptions<'a>,
    stats: &'a Stats,
    reporter: &'a dyn Reporter,
}

/// All the names of a directory, with their types.
fn names_of(dir: &OwnedFd, path: &RelPath) -> Result<Vec<Name>> {
    let mut all = Vec::new();
    read_names(dir, path, |batch| all.extend(batch))?;
    Ok(all)
}

impl Deleter<'_> {
    /// Removes what `level`'s destination directory has and its source directory does
    /// not, and notes the subdirectories both have, to compare next.
    fn compare(&self, level: &mut Level) {
        // Its times before listing it moves its atime.
        let src_stat = rfs::fstat(&level.src);
        let listed = names_of(&level.src, &level.path)
            .and_then(|src| Ok((src, names_of(&level.dst, &level.path).map_err(dst_side)?)));
        let (src, dst) = match listed {
            Ok(both) => both,
            Err(e) => return self.reporter.error(&e),
        };
        let src: HashMap<CString, FileType> = src.into_iter().map(|n| (n.name, n.kind)).collect();
        let before = self.stats.deleted.load(Ordering::Relaxed);
        for n in dst {
            let path = level.path.join(n.name.as_bytes());
            let is_dir = n.kind == FileType::Directory;
            let excluded = self
                .opts
                .filter
                .is_some_and(|f| f.excludes(path.as_bytes(), is_dir));
            if self.keeps(&path, is_dir) {
                continue;
            }
            match src.get(&n.name) {
                Some(_) if excluded => self.remove(&level.dst, &n.name, &path, n.kind),
                Some(&FileType::Directory) if is_dir => level.below.push(n.name),
                Some(_) => {}
                None => self.remove(&level.dst, &n.name, &path, n.kind),
            }
        }
        // Removing names changed the directory's times: give it the source's again.
        if !self.opts.dry_run && self.stats.deleted.load(Ordering::Relaxed) != before {
            let times = src_stat
                .and_then(|st| rfs::futimens(&level.dst, &meta::timestamps(&meta::from_stat(&st))));
            if let Err(e) = times {
                self.reporter
                    .error(&Error::dst(&level.path, "set times", e));
            }
        }
    }

    /// Removes `name` (of type `kind`, as listed) from `dir`: a directory with
    /// everything below it, depth first, never through a symlink. Below it too, what
    /// the rules exclude is kept (unless `excluded`), and so are the directories
    /// holding it, as rsync keeps them.
    fn remove(&self, dir: &OwnedFd, name: &CStr, path: &RelPath, kind: FileType) {
        if kind != FileType::Directory {
            self.unlink(dir, name, path, kind);
            return;
        }
        let top = match open_dst_dir(dir, name) {
            Ok(fd) => fd,
            // Not a directory any more (a symlink now): removed as what it is.
            Err(Errno::NOTDIR | Errno::LOOP) => {
                self.unlink(dir, name, path, FileType::Symlink);
                return;
            }
            Err(e) => return self.reporter.error(&Error::dst(path, "delete", e)),
        };
        let mut stack = vec![Doomed::new(top, path.clone(), name.to_owned())];
        while let Some(level) = stack.last_mut() {
            let left = match &mut level.left {
                Some(left) => left,
                None => match names_of(&level.fd, &level.path).map_err(dst_side) {
                    Ok(names) => level.left.insert(names),
                    Err(e) => {
                        self.reporter.error(&e);
                        stack.pop();
                        if let Some(up) = stack.last_mut() {
                            up.kept = true;
                        }
                        continue;
                    }
                },
            };
            let Some(n) = left.pop() else {
                if let Some(done) = stack.pop() {
                    let parent = stack.last_mut();
                    match (done.kept, parent) {
                        (true, Some(up)) => up.kept = true,
                        (true, None) => {}
                        (false, up) => {
                            let parent = up.as_ref().map_or(dir, |up| &up.fd);
                            let gone =
                                self.unlink(parent, &done.name, &done.path, FileType::Directory);
                            if let (false, Some(up)) = (gone, up) {
                                up.kept = true;
                            }
                        }
                    }
                }
                continue;
            };
            let child = level.path.join(n.name.as_bytes());
            let is_dir = n.kind == FileType::Directory;
            if self.keeps(&child, is_dir) {
                level.kept = true;
                continue;
            }
            if !is_dir {
                if !self.unlink(&level.fd, &n.name, &child, n.kind) {
                    level.kept = true;
                }
                continue;
            }
            match open_dst_dir(&level.fd, &n.name) {
                Ok(sub) => stack.push(Doomed::new(sub, child, n.name)),
                Err(Errno::NOTDIR | Errno::LOOP) => {
                    if !self.unlink(&level.fd, &n.name, &child, FileType::Symlink) {
                        level.kept = true;
                    }
                }
                Err(e) => {
                    self.reporter.error(&Error::dst(&child, "delete", e));
                    level.kept = true;
                }
            }
        }
    }

    /// Whether the rules keep `path` from being deleted.
    fn keeps(&self, path: &RelPath, is_dir: bool) -> bool {
        !self.opts.excluded
            && self
                .opts
                .filter
                .is_some_and(|f| f.excludes(path.as_bytes(), is_dir))
    }

    /// Removes the one node `name` of `dir` (a directory must be empty by now);
    /// whether it is gone (or, in a dry run, would be).
    fn unlink(&self, dir: &OwnedFd, name: &CStr, path: &RelPath, kind: FileType) -> bool {
        if let Some(limit) = self.opts.limit {
            if !limit.allows(path, self.reporter) {
                return false;
            }
        }
        if let Some(c) = self.opts.changes {
            c.change(path, Kind::of_type(kind), What::Deleted);
        }
        if self.opts.dry_run {
            Stats::bump(&self.stats.deleted);
            return true;
        }
        let flags = match kind {
            FileType::Directory => AtFlags::REMOVEDIR,
            _ => AtFlags::empty(),
        };
        match rfs::unlinkat(dir, name, flags) {
            Ok(()) => {
                Stats::bump(&self.stats.deleted);
                true
            }
            // Gone meanwhile: nothing left to delete.
            Err(Errno::NOENT) => true,
            Err(e) => {
                self.reporter.error(&Error::dst(path, "delete", e));
                false
            }
        }
    }
}

/// A directory being removed, open, with what is left to remove in it.
struct Doomed {
    fd: OwnedFd,
    path: RelPath,
    /// Its name in the directory above.
    name: CString,
    /// Its names not yet removed (None: not listed yet).
    left: Option<Vec<Name>>,
    /// Something in it stays (excluded, or failed): it stays too.
    kept: bool,
}

impl Doomed {
    fn new(fd: OwnedFd, path: RelPath, name: CString) -> Self {
        Doomed {
            fd,
            path,
            name,
            left: None,
            kept: false,
        }
    }
}

/// Opens the destination directory `name` in `parent` as [`open_dir`] does, without
/// moving its atime where that is allowed (listing it would: a dry run changes nothing).
fn open_dst_dir(parent: &OwnedFd, name: &CStr) -> rustix::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rfs::openat(parent, name, flags | OFlags::NOATIME, Mode::empty()) {
        Err(Errno::PERM) => rfs::openat(parent, name, flags, Mode::empty()),
        other => other,
    }
}

/// `e`, an error listing a destination directory, named as the destination's.
fn dst_side(e: Error) -> Error {
    Error::dst(&e.path, e.op, e.os)
}
