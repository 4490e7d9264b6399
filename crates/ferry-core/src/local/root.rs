//! The destination root: made when missing (as `mkdir -p`), opened, and given the
//! mode `mkdir` would when no entry describes it.

use super::{has_default_acl, DstDir, LocalTreeSink};
use crate::entry::RelPath;
use crate::error::{Context, Error, Result};
use crate::stats::Stats;
use rustix::fs::{self as rfs, Mode, OFlags};
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::sync::Arc;

/// The destination root.
impl LocalTreeSink<'_> {
    /// Makes the destination root when missing (with its missing parents, as `mkdir
    /// -p` would) and opens it; [`TreeSink::root`] does this for a whole tree, and a
    /// single entry is placed straight into it. Counts nothing.
    pub fn open_root(&self) -> Result<DstDir> {
        let shown = RelPath::root();
        // Private until its own mode is applied after the children; missing parents
        // are made as `mkdir -p` would.
        let mut builder = std::fs::DirBuilder::new();
        builder.mode(0o700);
        let made = match builder.create(&self.dst) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if let Some(parent) = self.dst.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| Error::dst(&shown, "create destination", e))?;
                }
                builder
                    .create(&self.dst)
                    .map_err(|e| Error::dst(&shown, "create destination", e))?;
                true
            }
            Err(e) => return Err(Error::dst(&shown, "create destination", e)),
        };
        let fd = rfs::open(
            &self.dst,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::dst(&shown, "open destination", e))?;
        // A root that was there but empty holds nothing to look up either: nothing is
        // looked for before each entry is made in it (a million files unpacked into
        // one directory that existed paid a failed stat each).
        let fresh = made || is_empty_dir(&fd);
        // A new root under a setgid parent inherits the bit; look rather than guess.
        let plain_owner = fresh && rfs::fstat(&fd).is_ok_and(|st| st.st_mode & 0o2000 == 0);
        self.root_made
            .store(made, std::sync::atomic::Ordering::Relaxed);
        let dir = DstDir {
            inherits_acl: has_default_acl(&fd),
            fd: Arc::new(fd),
            fresh,
            plain_owner,
        };
        let _ = self.root.set(dir.clone());
        Ok(dir)
    }

    /// Makes and opens the destination root of a whole tree, counted if made; once
    /// opened, the same directory again (a copy opens it before walking, to know its
    /// inode).
    pub fn tree_root(&self) -> Result<DstDir> {
        if let Some(dir) = self.root.get() {
            return Ok(dir.clone());
        }
        let dir = self.open_root()?;
        if self.root_made.load(std::sync::atomic::Ordering::Relaxed) {
            Stats::bump(&self.stats.dirs);
        }
        Ok(dir)
    }

    /// Gives a root this job created, and that no entry describes, the mode `mkdir`
    /// would have given it (it is created private until its own entry says otherwise).
    pub fn settle_unnamed_root(&self) -> Result<()> {
        match self.root.get() {
            Some(root) if self.root_made.load(std::sync::atomic::Ordering::Relaxed) => {
                let mode = 0o777 & !self.meta.umask();
                rfs::fchmod(&*root.fd, Mode::from_raw_mode(mode))
                    .at_dst(&RelPath::root(), "set mode")
            }
            _ => Ok(()),
        }
    }
}

/// Whether directory `fd` holds nothing but `.` and `..` (false when it cannot be read).
fn is_empty_dir(fd: &rustix::fd::OwnedFd) -> bool {
    let Ok(mut dir) = rfs::Dir::read_from(fd) else {
        return false;
    };
    dir.all(|e| e.is_ok_and(|e| matches!(e.file_name().to_bytes(), b"." | b"..")))
}
