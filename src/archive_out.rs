//! The archive file `ferry pack` writes.
//!
//! Where the archive's path names a regular file, or nothing yet, the archive is
//! written under a temporary name beside it (`.NAME.XXXXXX.partial`) and renamed over
//! it only once complete. A pack that fails (a source that cannot be read, a full
//! disk) leaves an archive that was there as it was, and no partial one where there
//! was none; truncating first, as tar does, would lose the old archive to a typo in
//! the source's name. A replaced archive's mode is kept, and its owner when root.
//!
//! Told to stop (SIGINT, SIGTERM, SIGHUP) before the archive is complete, ferry
//! removes the temporary file and exits with status 130; killed outright, it leaves it
//! (as it would a signal in the microseconds between creating the file and noting its
//! name).
//!
//! Anything else the path names (a symlink, a device, a fifo, or a file with other
//! hard links, which would stop sharing it) is written in place, as tar does.

use anyhow::Context;
use ferry_core::entry::InodeKey;
use std::fs::{File, Permissions};
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use tempfile::NamedTempFile;

/// The temporary file to remove if the process is told to stop.
static PARTIAL: Mutex<Option<PathBuf>> = Mutex::new(None);

fn remove_on_interrupt(path: Option<PathBuf>) {
    *PARTIAL.lock().unwrap_or_else(PoisonError::into_inner) = path;
}

/// On SIGINT, SIGTERM or SIGHUP: removes the temporary file and exits.
fn on_interrupt() {
    if let Some(path) = PARTIAL
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
    {
        let _ = std::fs::remove_file(path);
    }
    crate::report::to_stderr(format_args!("ferry: interrupted"));
    std::process::exit(130);
}

/// An archive file being written.
pub struct ArchiveOut {
    path: PathBuf,
    target: Target,
    /// The archive being replaced, when it is not the file written.
    replaces: Option<InodeKey>,
}

enum Target {
    /// Written under a temporary name, renamed over `path` when done.
    Beside(NamedTempFile),
    /// Written at `path` itself.
    InPlace(File),
}

impl ArchiveOut {
    /// Creates the file to write the archive at `path` into (see the module doc).
    pub fn create(path: &Path) -> anyhow::Result<ArchiveOut> {
        let old = match std::fs::symlink_metadata(path) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(|| format!("{}: stat archive", path.display())),
        };
        let target = match &old {
            Some(m) if !m.file_type().is_file() || m.nlink() > 1 => Target::InPlace(
                File::create(path)
                    .with_context(|| format!("{}: create archive", path.display()))?,
            ),
            _ => {
                // Before the file exists, so no signal finds it there unhandled.
                ctrlc::set_handler(on_interrupt).context("handle interrupts")?;
                Target::Beside(
                    beside(path, old.as_ref())
                        .with_context(|| format!("{}: create archive", path.display()))?,
                )
            }
        };
        let replaces = match (&target, &old) {
            (Target::Beside(_), Some(m)) => Some(InodeKey::of_metadata(m)),
            _ => None,
        };
        Ok(ArchiveOut {
            path: path.to_path_buf(),
            target,
            replaces,
        })
    }

    /// The file to write.
    pub fn file(&self) -> &File {
        match &self.target {
            Target::Beside(temp) => temp.as_file(),
            Target::InPlace(file) => file,
        }
    }

    /// Inodes a walk of the source must not pack: the file written, and the archive it
    /// replaces, should either lie in the source.
    pub fn inodes(&self) -> io::Result<Vec<InodeKey>> {
        let written = InodeKey::of_metadata(&self.file().metadata()?);
        Ok(std::iter::once(written).chain(self.replaces).collect())
    }

    /// The archive is complete: puts it at its path.
    pub fn commit(self) -> anyhow::Result<()> {
        match self.target {
            Target::Beside(temp) => {
                let persisted = temp.persist(&self.path);
                remove_on_interrupt(None);
                persisted
                    .map(drop)
                    .map_err(|e| e.error)
                    .with_context(|| format!("{}: rename archive into place", self.path.display()))
            }
            Target::InPlace(_) => Ok(()),
        }
    }
}

/// A temporary file in `path`'s directory, with the mode (and, when root, the owner)
/// of the file `old` it is to replace; a new file's mode is 0666 less the umask.
fn beside(path: &Path, old: Option<&std::fs::Metadata>) -> io::Result<NamedTempFile> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(path.file_name().unwrap_or_default());
    prefix.push(".");
    let temp = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".partial")
        .permissions(Permissions::from_mode(0o666))
        .tempfile_in(dir)?;
    remove_on_interrupt(Some(temp.path().to_path_buf()));
    if let Some(m) = old {
        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::fchown(temp.as_file(), Some(m.uid()), Some(m.gid()))?;
        }
        // After the owner: a chown clears setuid and setgid bits.
        temp.as_file()
            .set_permissions(Permissions::from_mode(m.mode() & 0o7777))?;
    }
    Ok(temp)
}
