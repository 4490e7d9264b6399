//! A client's path, resolved beneath the daemon's root at the moment of use.
//!
//! The root is opened once, when the daemon starts ([`Root::open`]). A request's path
//! is never joined to the root's name and used later: each component is opened from
//! the directory before it with `O_NOFOLLOW | O_DIRECTORY` (made first where an upload
//! needs it, `mkdirat` then `openat`), so a symlink anywhere on the way is refused and
//! one put there later by another client or a local process changes nothing: the job
//! keeps the directory it opened ([`Held`]). The code that walks or fills that
//! directory takes a path, so it is given one that reaches the open descriptor
//! itself, `/proc/self/fd/N/.`: the kernel follows that link to the open directory,
//! not by name, and [`Root::open`] checks once that it does.
//!
//! A download of a single non-directory is given a private directory of the daemon's
//! holding one symlink to its descriptor, walked following that one link: its name
//! is never looked up again in a directory a client can change.

use crate::NetError;
use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::OsStr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

/// The daemon's root, open for as long as it serves.
pub struct Root {
    fd: OwnedFd,
    shown: PathBuf,
}

/// An open directory (or file) of the root, with a path that reaches it through its
/// descriptor, for code that takes a path. Dropping it closes the descriptor (and
/// removes the private directory of a single file).
pub struct Held {
    _fd: OwnedFd,
    path: PathBuf,
    private: Option<PathBuf>,
    /// This job made it (its last component).
    made: bool,
}

impl Held {
    /// The path that reaches what is held (never by a name a client can change).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this job made it.
    pub fn made(&self) -> bool {
        self.made
    }

    /// Whether it is a single non-directory, reached through the one symlink of a
    /// private directory, which its sender must follow.
    pub fn is_single(&self) -> bool {
        self.private.is_some()
    }

    fn of_dir(fd: OwnedFd) -> Held {
        Held {
            path: fd_path(&fd).join("."),
            _fd: fd,
            private: None,
            made: false,
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(dir) = &self.private {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// `/proc/self/fd/N` for `fd`.
fn fd_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

fn open_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// The path `raw` names beneath a root: a leading `/` is taken from the root, an empty
/// path is the root itself; `..`, a NUL or nothing at all is refused.
pub fn relative(raw: &[u8]) -> Result<PathBuf, NetError> {
    let start = raw.iter().position(|&b| b != b'/').unwrap_or(raw.len());
    match &raw[start..] {
        [] if raw.is_empty() => crate::serve::confined_path(raw),
        [] => Ok(PathBuf::from(".")),
        rel => crate::serve::confined_path(rel),
    }
}

impl Root {
    /// Opens the root `path` (once, when the daemon starts), and checks that a
    /// descriptor is reached through `/proc/self/fd` (procfs mounted).
    pub fn open(path: &Path) -> Result<Root, NetError> {
        let fail = |e: &dyn std::fmt::Display| {
            NetError::Refused(format!("the served root {}: {e}", path.display()))
        };
        let fd = rfs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| fail(&e))?;
        let via = rfs::open(fd_path(&fd).join("."), open_flags(), Mode::empty())
            .map_err(|e| fail(&format!("/proc/self/fd: {e} (is /proc mounted?)")))?;
        let (a, b) = (
            rfs::fstat(&fd).map_err(|e| fail(&e))?,
            rfs::fstat(&via).map_err(|e| fail(&e))?,
        );
        if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino) {
            return Err(fail(&"/proc/self/fd does not reach open descriptors"));
        }
        Ok(Root {
            fd,
            shown: path.to_path_buf(),
        })
    }

    /// The root's path, as given.
    pub fn path(&self) -> &Path {
        &self.shown
    }

    /// The directory at `rel` (from [`relative`]), each component opened from the one
    /// before without following a symlink; with `make`, missing ones are made (the
    /// last private until the tree's own mode is set, as `LocalTreeSink` makes a
    /// destination). `None` when it is missing and `make` is not set.
    pub fn dir(&self, rel: &Path, make: bool) -> Result<Option<Held>, NetError> {
        let parts = components(rel)?;
        let mut at = rfs::openat(&self.fd, c".", open_flags(), Mode::empty())
            .map_err(|e| refused(&self.shown, e))?;
        let mut shown = PathBuf::new();
        let mut made = false;
        for (i, name) in parts.iter().enumerate() {
            shown.push(name);
            let last = i + 1 == parts.len();
            (at, made) = match self.step(&at, name, &shown, make, last)? {
                Some(step) => step,
                None => return Ok(None),
            };
        }
        let mut held = Held::of_dir(at);
        held.made = made;
        Ok(Some(held))
    }

    /// The component `name` of `at` (at `shown`) opened as a directory, made first
    /// when missing if `make`; and whether it was made.
    fn step(
        &self,
        at: &OwnedFd,
        name: &OsStr,
        shown: &Path,
        make: bool,
        last: bool,
    ) -> Result<Option<(OwnedFd, bool)>, NetError> {
        let mut made = false;
        loop {
            match rfs::openat(at, name, open_flags(), Mode::empty()) {
                Ok(fd) => return Ok(Some((fd, made))),
                Err(Errno::NOENT) if make => {
                    let mode = if last { 0o700 } else { 0o777 };
                    match rfs::mkdirat(at, name, Mode::from_raw_mode(mode)) {
                        // Made, or made by another meanwhile: open what is there now.
                        Ok(()) => made = true,
                        Err(Errno::EXIST) => {}
                        Err(e) => {
                            return Err(NetError::Refused(format!(
                                "{}: create directory: {e}",
                                shown.display()
                            )))
                        }
                    }
                }
                Err(Errno::NOENT) => return Ok(None),
                Err(e @ (Errno::LOOP | Errno::NOTDIR)) => {
                    return Err(in_the_way(e, at, name, shown))
                }
                Err(e) => return Err(refused(shown, e)),
            }
        }
    }

    /// What a download sends: the directory at `rel`, or the single non-directory
    /// there, reached from an open descriptor (see the module's doc). A symlink on the
    /// way, or at `rel` itself, is refused.
    pub fn source(&self, rel: &Path) -> Result<Held, NetError> {
        let missing = || NetError::Refused(format!("{}: No such file or directory", rel.display()));
        let parts = components(rel)?;
        let Some((name, parents)) = parts.split_last() else {
            return self.dir(rel, false)?.ok_or_else(missing);
        };
        let parent: PathBuf = parents.iter().collect();
        let parent = self.dir(&parent, false)?.ok_or_else(missing)?;
        let at = &parent._fd;
        // The node itself, not what a name leads to: its kind is read from it.
        let node = rfs::openat(
            at,
            *name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            Errno::NOENT => missing(),
            e => refused(rel, e),
        })?;
        let st = rfs::fstat(&node).map_err(|e| refused(rel, e))?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Symlink => Err(symlink_refused(rel)),
            FileType::Directory => {
                let fd = rfs::openat(&node, c".", open_flags(), Mode::empty())
                    .map_err(|e| refused(rel, e))?;
                Ok(Held::of_dir(fd))
            }
            _ => single(node, name, rel),
        }
    }
}

/// A single non-directory `node` named `name`: a private directory holding the
/// symlink `name` to its descriptor, which the sender follows (and nothing else).
fn single(node: OwnedFd, name: &OsStr, rel: &Path) -> Result<Held, NetError> {
    let fail = |e: &dyn std::fmt::Display| {
        NetError::Refused(format!("{}: private directory: {e}", rel.display()))
    };
    let base = std::env::temp_dir();
    let mut n = 0u32;
    let private = loop {
        let dir = base.join(format!(
            "ferry-serve-{}-{}-{n}",
            std::process::id(),
            node.as_raw_fd()
        ));
        match rfs::mkdir(&dir, Mode::from_raw_mode(0o700)) {
            Ok(()) => break dir,
            Err(Errno::EXIST) if n < 100 => n += 1,
            Err(e) => return Err(fail(&e)),
        }
    };
    let link = private.join(name);
    let held = Held {
        path: link.clone(),
        _fd: node,
        private: Some(private),
        made: false,
    };
    std::os::unix::fs::symlink(fd_path(&held._fd), &link).map_err(|e| fail(&e))?;
    Ok(held)
}

/// The normal components of `rel` (a `.` is skipped; `..` or a root was refused by
/// [`relative`], and is refused again here).
fn components(rel: &Path) -> Result<Vec<&OsStr>, NetError> {
    rel.components()
        .filter(|c| *c != Component::CurDir)
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(NetError::Refused(format!(
                "{}: refused: a remote path may not contain `..`",
                rel.display()
            ))),
        })
        .collect()
}

fn refused(shown: &Path, e: Errno) -> NetError {
    NetError::Refused(format!("{}: {e}", shown.display()))
}

fn symlink_refused(shown: &Path) -> NetError {
    NetError::Refused(format!(
        "{}: refused: a symlink on the way leads out of, or around in, the served root",
        shown.display()
    ))
}

/// The error for the `name` of `at` (at `shown`) that `openat` found in the way of a
/// directory (`e`): a symlink (`ELOOP`, or `ENOTDIR` for one to a directory), or
/// something else that is not a directory.
fn in_the_way(e: Errno, at: &OwnedFd, name: &OsStr, shown: &Path) -> NetError {
    let st = rfs::statat(at, name, AtFlags::SYMLINK_NOFOLLOW);
    match st.map(|st| FileType::from_raw_mode(st.st_mode)) {
        // A directory now: it was swapped meanwhile, from a symlink.
        Ok(FileType::Symlink | FileType::Directory) | Err(_) => symlink_refused(shown),
        Ok(_) if e == Errno::LOOP => symlink_refused(shown),
        Ok(_) => NetError::Refused(format!(
            "{}: refused: something that is not a directory is in the way",
            shown.display()
        )),
    }
}
