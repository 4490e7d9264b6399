//! Reaching destination directories by path, for sources that name entries by path
//! (archives) rather than walking a tree: each component is opened without following a
//! symlink, and made where missing as [`Reach`] says, so a symlink made by an earlier
//! entry never redirects a later one.

use super::{has_default_acl, open_dir, other, DstDir, LocalTreeSink};
use crate::entry::{escaped, RelPath};
use crate::error::{Context, Error, Result};
use crate::stats::Stats;
use rustix::fs::{self as rfs, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// The error for a destination directory at `path` that could not be opened.
pub(super) fn dir_error(path: &RelPath, e: Errno) -> Error {
    match e {
        Errno::NOTDIR | Errno::LOOP => Error::dst(
            path,
            "create directory",
            io::Error::new(
                io::ErrorKind::NotADirectory,
                "something that is not a directory is in the way in the destination",
            ),
        ),
        e => Error::dst(path, "open destination directory", e),
    }
}

/// What stands where a directory is wanted, and stays there (see [`Reach::Make`] and
/// [`Reach::MakeKeeping`]): the error (inside the [`io::Error`] of an [`Error`]) of
/// reaching a directory through it, which a caller can tell apart, to say why.
#[derive(Debug)]
pub struct InTheWay {
    /// Where it points, if it is a symlink.
    pub symlink_to: Option<Vec<u8>>,
}

impl InTheWay {
    /// What it is, for a message: "a symlink to TARGET", or "not a directory".
    pub fn what(&self) -> String {
        match &self.symlink_to {
            Some(to) => format!("a symlink to {}", escaped(to)),
            None => "not a directory".into(),
        }
    }
}

impl std::fmt::Display for InTheWay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.symlink_to {
            Some(to) => write!(f, "a symlink (to {}) is in the way", escaped(to)),
            None => f.write_str("something that is not a directory is in the way"),
        }?;
        f.write_str(" in the destination")
    }
}

impl std::error::Error for InTheWay {}

/// The error for the non-directory at `name` in `parent` (at `path`) that stays where a
/// directory is wanted.
fn kept_in_the_way(parent: &DstDir, name: &CStr, path: &RelPath) -> Error {
    let symlink_to = rfs::readlinkat(&*parent.fd, name, Vec::new())
        .ok()
        .map(CString::into_bytes);
    let why = io::Error::new(io::ErrorKind::NotADirectory, InTheWay { symlink_to });
    Error::dst(path, "create directory", why)
}

/// How [`LocalTreeSink::dir_at`] reaches a directory that may not be there yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Only open it: it must exist. Where the job did not make it, its owner is let
    /// in (its own mode is set later, with its metadata).
    Open,
    /// Only open it, to reach or link from what is in it: it must exist, and its mode
    /// is left as it is, which may be final already (searching needs no more).
    Search,
    /// Make it when missing, because something below it is wanted. A non-directory
    /// in its way is replaced where the directory holding it was there before the job
    /// (it may be left from before); in one this job made, it came from the source
    /// itself (say a symlink, then a member below it), and stays. Where the source may
    /// have made it in a directory that was there before, see [`Reach::MakeKeeping`].
    Make,
    /// As [`Reach::Make`], but a non-directory in its way always stays: the source
    /// made one there (an archive's symlink, then a member below it), and nothing is
    /// placed through it or instead of it, whoever made the directory holding it.
    MakeKeeping,
    /// Make it because the source names it as a directory: that replaces any
    /// non-directory in its way, made by this job or not.
    Named,
}

/// Path-based access, for sources that name entries by path (archives) rather than
/// walking a tree. No component is opened through a symlink (`O_NOFOLLOW` one at a
/// time, or `openat2` with `RESOLVE_NO_SYMLINKS` for several), so a symlink made by an
/// earlier entry can never redirect a later one outside the destination.
impl LocalTreeSink<'_> {
    /// The directory at `path` below the root (which [`TreeSink::root`] must have made),
    /// reached as `reach` says. `path` must be clean: no `..`, `.` or empty components.
    pub fn dir_at(&self, path: &RelPath, reach: Reach) -> Result<DstDir> {
        let root = self.root.get().cloned().ok_or_else(|| {
            Error::dst(
                path,
                "open destination",
                other("the destination root is not open"),
            )
        })?;
        self.dir_below(&root, &RelPath::root(), path, reach, |_, _| {})
    }

    /// The directory at `path`, walked down from `from`, the open directory at
    /// `from_path`, which must be an ancestor of `path` (or `path` itself). Each
    /// directory opened on the way is passed to `opened` with its path. `reach` applies
    /// to `path`; the components above it are made when it makes anything.
    pub fn dir_below(
        &self,
        from: &DstDir,
        from_path: &RelPath,
        path: &RelPath,
        reach: Reach,
        mut opened: impl FnMut(&RelPath, &DstDir),
    ) -> Result<DstDir> {
        let skip = from_path.as_bytes().len();
        let rest = path.as_bytes().get(skip..).unwrap_or_default();
        let mut comps: Vec<&[u8]> = rest
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty())
            .collect();
        let mut cur = from.clone();
        let mut walked = from_path.clone();
        // Most often every directory on the way is there already: one open then takes
        // the whole way down instead of one per component (all but the last when the
        // source names it: that one is usually still to be made).
        let whole_way = comps.len() - usize::from(reach == Reach::Named && !comps.is_empty());
        if whole_way >= 2 {
            let down = comps[..whole_way].join(&b'/');
            let there = walked.join(&down);
            if let Some(dir) = self.open_below(&cur, &down, &there, reach)? {
                (walked, cur) = (there, dir);
                opened(&walked, &cur);
                comps.drain(..whole_way);
            }
        }
        let mut comps = comps.into_iter().peekable();
        while let Some(comp) = comps.next() {
            walked = walked.join(comp);
            let here = match reach {
                Reach::Named if comps.peek().is_some() => Reach::Make,
                r => r,
            };
            cur = self.subdir(&cur, &walked, comp, here)?;
            opened(&walked, &cur);
        }
        Ok(cur)
    }

    /// The existing directory `below` (several components) in `parent` (it is at
    /// `path`), opened in one call that follows no symlink on the way and cannot leave
    /// `parent`. `None` when that fails for any reason (a component missing or not a
    /// directory, or a kernel without `openat2`): the caller walks down one component
    /// at a time, which deals with each case. `reach` as for [`Self::found_dir`].
    fn open_below(
        &self,
        parent: &DstDir,
        below: &[u8],
        path: &RelPath,
        reach: Reach,
    ) -> Result<Option<DstDir>> {
        let Ok(fd) = rfs::openat2(
            &*parent.fd,
            below,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_XDEV,
        ) else {
            return Ok(None);
        };
        self.found_dir(parent, fd, path, reach).map(Some)
    }

    /// A directory found (not made) below `parent`, opened as `fd`, on the way to a
    /// directory reached as `reach`. Below one this job made it was made by this job
    /// too, and its mode lets the owner in; elsewhere the owner is let in, unless it
    /// is only searched.
    fn found_dir(
        &self,
        parent: &DstDir,
        fd: OwnedFd,
        path: &RelPath,
        reach: Reach,
    ) -> Result<DstDir> {
        if !parent.fresh && reach != Reach::Search {
            self.let_owner_in(&fd, path)?;
        }
        let inherits_acl = match parent.fresh {
            true => parent.inherits_acl,
            false => has_default_acl(&fd),
        };
        Ok(DstDir {
            fd: Arc::new(fd),
            fresh: parent.fresh,
            plain_owner: parent.fresh && parent.plain_owner,
            inherits_acl,
        })
    }

    /// The directory `name` in `parent` (it is at `path`), opened without following a
    /// symlink, and made as `reach` allows. A directory found in one this job made was
    /// made by this job too: it counts as fresh, so nothing is looked up before
    /// creating in it.
    pub fn subdir(
        &self,
        parent: &DstDir,
        path: &RelPath,
        name: &[u8],
        reach: Reach,
    ) -> Result<DstDir> {
        let name = CString::new(name)
            .map_err(|_| Error::dst(path, "open", other("contains a NUL byte")))?;
        // In a directory this job made, a directory the source names is most often
        // not there yet: making it first saves a look. (One wanted only because
        // something lies below it has most often been made already.)
        if parent.fresh && reach == Reach::Named {
            match rfs::mkdirat(&*parent.fd, name.as_c_str(), Mode::from_raw_mode(0o777)) {
                Ok(()) => return self.made_dir(parent, &name, path, true),
                Err(Errno::EXIST) => {}
                Err(e) => return Err(Error::dst(path, "create directory", e)),
            }
        }
        match open_dir(&parent.fd, &name) {
            Ok(fd) => return self.found_dir(parent, fd, path, reach),
            Err(Errno::NOENT)
                if matches!(reach, Reach::Make | Reach::MakeKeeping | Reach::Named) => {}
            // Something else in the way (a file, a symlink, never followed) is
            // replaced, as rsync and GNU tar replace it: where this job did not make
            // it, or where the source names this directory after it (an archive may
            // hold a file, then a directory of the same name: the last one wins).
            Err(Errno::NOTDIR | Errno::LOOP)
                if reach == Reach::Named || (reach == Reach::Make && !parent.fresh) =>
            {
                self.clear_for_dir(parent, &name, path)?
            }
            Err(Errno::NOTDIR | Errno::LOOP)
                if matches!(reach, Reach::Make | Reach::MakeKeeping) =>
            {
                return Err(kept_in_the_way(parent, &name, path))
            }
            Err(e) => return Err(dir_error(path, e)),
        }
        // A directory made here only because a member lies below it gets the mode
        // `mkdir -p` would give it; one the source names gets its own at the end.
        let made_here = match rfs::mkdirat(&*parent.fd, name.as_c_str(), Mode::from_raw_mode(0o777))
        {
            Ok(()) => true,
            // Another worker made it meanwhile: it is this job's all the same, and
            // that worker counts it.
            Err(Errno::EXIST) => false,
            Err(e) => return Err(Error::dst(path, "create directory", e)),
        };
        self.made_dir(parent, &name, path, made_here)
    }

    /// Opens the directory `name` this job just made in `parent`, and counts it if
    /// `made_here` (this call, not another worker, made it).
    fn made_dir(
        &self,
        parent: &DstDir,
        name: &CStr,
        path: &RelPath,
        made_here: bool,
    ) -> Result<DstDir> {
        let fd = open_dir(&parent.fd, name).at_dst(path, "open destination directory")?;
        if made_here {
            Stats::bump(&self.stats.dirs);
        }
        Ok(DstDir {
            fd: Arc::new(fd),
            fresh: true,
            plain_owner: parent.plain_owner,
            inherits_acl: parent.inherits_acl,
        })
    }
}
