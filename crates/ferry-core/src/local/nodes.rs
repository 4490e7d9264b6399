//! Making the nodes that are neither files nor directories: a hardlink to the copy of
//! an earlier name of the same inode (or, from a stream, to an earlier entry by name),
//! a symlink, a fifo or a device; each replaces what is in its way as a file would.

use super::{cname, other, DstDir, LocalTreeSink, Reach, Settled};
use crate::entry::{Entry, EntryKind, RelPath};
use crate::error::{Context, Error, Result};
use crate::links::Made;
use crate::stats::Stats;
use rustix::fs::{self as rfs, AtFlags, FileType, Mode};
use rustix::io::Errno;
use std::ffi::{CStr, CString};
use std::io;

impl LocalTreeSink<'_> {
    /// Makes `name` in `dir` (for `entry`) a hardlink to `made`, or, where that cannot
    /// be (too many links, the first copy gone, another filesystem), runs `copy`.
    pub(super) fn hardlink(
        &self,
        dir: &DstDir,
        name: &CStr,
        entry: &Entry,
        made: &Made,
        copy: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let path = &entry.path;
        // The first copy's directory, opened again if the job has closed it since.
        let made_dir = match made.dir.upgrade() {
            Some(fd) => fd,
            None => match self.dir_at(&made.dir_path, Reach::Search) {
                Ok(found) => found.fd,
                Err(_) => return copy(),
            },
        };
        let was = self.existing(dir, name, path)?;
        if let Some(st) = &was {
            let first = rfs::statat(&*made_dir, made.name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW);
            if matches!(&first, Ok(f) if f.st_ino == st.st_ino && f.st_dev == st.st_dev) {
                Stats::bump(&self.stats.skipped);
                return Ok(());
            }
            self.remove(dir, name, path, st)?;
        }
        match rfs::linkat(
            &*made_dir,
            made.name.as_c_str(),
            &*dir.fd,
            name,
            AtFlags::empty(),
        ) {
            Ok(()) => {
                self.count_link(matches!(entry.kind, EntryKind::File { .. }));
                self.tell(entry, was.as_ref(), None);
                Ok(())
            }
            Err(Errno::MLINK | Errno::NOENT | Errno::XDEV) => copy(),
            Err(e) => Err(Error::dst(path, "link", e)),
        }
    }

    pub(super) fn symlink(&self, dir: &DstDir, entry: &Entry, target: &[u8]) -> Result<()> {
        let path = &entry.path;
        let name = cname(path)?;
        let was = self.existing(dir, &name, path)?;
        let mut why = None;
        if let Some(st) = &was {
            let same = FileType::from_raw_mode(st.st_mode) == FileType::Symlink
                && rfs::readlinkat(&*dir.fd, name.as_c_str(), Vec::new())
                    .is_ok_and(|t| t.as_bytes() == target);
            if same {
                match self.settle(dir, &name, st, entry, true)? {
                    Settled::Done => {
                        Stats::bump(&self.stats.skipped);
                        return Ok(());
                    }
                    Settled::Replace(r) => why = Some(r),
                }
            }
            self.remove(dir, &name, path, st)?;
        }
        let target = CString::new(target)
            .map_err(|_| Error::dst(path, "symlink", other("target contains a NUL byte")))?;
        self.replacing(dir, &name, path, || {
            rfs::symlinkat(target.as_c_str(), &*dir.fd, name.as_c_str())
        })?
        .at_dst(path, "create symlink")?;
        self.meta_at(dir, &name, entry, true)?;
        Stats::bump(&self.stats.others);
        self.tell(entry, was.as_ref(), why);
        Ok(())
    }

    pub(super) fn special(&self, dir: &DstDir, entry: &Entry) -> Result<()> {
        let path = &entry.path;
        let name = cname(path)?;
        let (kind, rdev) = match entry.kind {
            EntryKind::Fifo => (FileType::Fifo, 0),
            EntryKind::CharDevice { rdev } => (FileType::CharacterDevice, rdev),
            EntryKind::BlockDevice { rdev } => (FileType::BlockDevice, rdev),
            _ => (FileType::Socket, 0),
        };
        let was = self.existing(dir, &name, path)?;
        let mut why = None;
        if let Some(st) = &was {
            if FileType::from_raw_mode(st.st_mode) == kind && st.st_rdev == rdev {
                match self.settle(dir, &name, st, entry, false)? {
                    Settled::Done => {
                        Stats::bump(&self.stats.skipped);
                        return Ok(());
                    }
                    Settled::Replace(r) => why = Some(r),
                }
            }
            self.remove(dir, &name, path, st)?;
        }
        let mode = Mode::from_raw_mode(entry.meta.mode & 0o777);
        self.replacing(dir, &name, path, || {
            rfs::mknodat(&*dir.fd, name.as_c_str(), kind, mode, rdev)
        })?
        .at_dst(path, "create special file")?;
        self.meta_at(dir, &name, entry, false)?;
        Stats::bump(&self.stats.others);
        self.tell(entry, was.as_ref(), why);
        Ok(())
    }

    /// Makes `entry` another name for `target`, an earlier entry of the same stream.
    pub(super) fn link_by_name(
        &self,
        parent: &DstDir,
        entry: &Entry,
        target: &RelPath,
    ) -> Result<()> {
        let path = &entry.path;
        let name = cname(path)?;
        let tname = cname(target)?;
        let tparent = target.parent();
        // Named after the link, which is what failed; the target is in the message.
        let about_target = |e: io::Error| {
            Error::dst(
                path,
                "link",
                io::Error::new(e.kind(), format!("target {target}: {e}")),
            )
        };
        let tdir = self
            .dir_at(&tparent, Reach::Search)
            .map_err(|e| about_target(e.os))?;
        let first = rfs::statat(&*tdir.fd, tname.as_c_str(), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| about_target(e.into()))?;
        if FileType::from_raw_mode(first.st_mode) == FileType::Directory {
            return Err(Error::dst(
                path,
                "link",
                other("the link target is a directory"),
            ));
        }
        // A link to itself (tar writes one for a file named twice) has nothing to do.
        if target == path {
            Stats::bump(&self.stats.skipped);
            return Ok(());
        }
        if let Some(st) = self.existing(parent, &name, path)? {
            if st.st_ino == first.st_ino && st.st_dev == first.st_dev {
                Stats::bump(&self.stats.skipped);
                return Ok(());
            }
            self.remove(parent, &name, path, &st)?;
        }
        self.replacing(parent, &name, path, || {
            rfs::linkat(&*tdir.fd, &tname, &*parent.fd, &name, AtFlags::empty())
        })?
        .at_dst(path, "link")?;
        self.count_link(FileType::from_raw_mode(first.st_mode) == FileType::RegularFile);
        Ok(())
    }

    /// Counts a hardlink made: with the files when it names a regular file, else with
    /// the other kinds.
    pub(super) fn count_link(&self, regular: bool) {
        Stats::bump(if regular {
            &self.stats.files
        } else {
            &self.stats.others
        });
    }
}
