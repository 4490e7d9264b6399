//! The archive file `ferry pack` writes.
//!
//! Where the archive's path names a regular file, or nothing yet, the archive is
//! written into a file without a name (`O_TMPFILE`) in the same directory, which is
//! given its name only once complete: linked in under the archive's path, or, to
//! replace an archive that is there, linked in beside it and renamed over it. A pack
//! that fails (a source that cannot be read, a full disk) or is killed (even with
//! `kill -9`) leaves an archive that was there as it was, and nothing where there was
//! none: the kernel frees a file without a name when it is closed. Truncating first,
//! as tar does, would lose the old archive to a typo in the source's name. A replaced
//! archive's mode is kept, and its owner when root.
//!
//! On a filesystem without `O_TMPFILE`, the file is made under a temporary name beside
//! the archive (`.NAME.XXXXXX.partial`) instead. Told to stop (SIGINT, SIGTERM, SIGHUP)
//! before the archive is complete, ferry removes it and exits with status 130; killed
//! outright, it leaves it.
//!
//! Anything else the path names (a symlink, a device, a fifo, or a file with other
//! hard links, which would stop sharing it) is written in place, as tar does.

use anyhow::Context;
use ferry_core::entry::InodeKey;
use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags, CWD};
use rustix::io::Errno;
use std::ffi::OsString;
use std::fs::{File, Permissions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use tempfile::NamedTempFile;

/// What a signal to stop finds. Held while the archive is put in place, so a signal
/// then waits for that to end: it never leaves a temporary name behind, and never
/// says "interrupted" about an archive already in place.
static INTERRUPTIBLE: Mutex<Interruptible> = Mutex::new(Interruptible {
    partial: None,
    in_place: false,
});

struct Interruptible {
    /// The temporary file to remove.
    partial: Option<PathBuf>,
    /// The archive is complete and in place: the job ends as it would have.
    in_place: bool,
}

fn interruptible() -> std::sync::MutexGuard<'static, Interruptible> {
    INTERRUPTIBLE.lock().unwrap_or_else(PoisonError::into_inner)
}

fn remove_on_interrupt(path: Option<PathBuf>) {
    interruptible().partial = path;
}

/// On SIGINT, SIGTERM or SIGHUP: removes the temporary file and exits, unless the
/// archive is in place by now.
fn on_interrupt() {
    let mut state = interruptible();
    if state.in_place {
        return;
    }
    if let Some(path) = state.partial.take() {
        let _ = std::fs::remove_file(path);
    }
    crate::report::to_stderr(format_args!("ferry: interrupted"));
    std::process::exit(130);
}

/// Bytes a pipe that carries an archive is made to hold (the most an ordinary user may
/// ask for, `/proc/sys/fs/pipe-max-size`, by default).
const PIPE_BYTES: usize = 1 << 20;

/// Makes the pipe `fd` is (if it is one) hold [`PIPE_BYTES`] instead of the default
/// 64 KiB, so writer and reader take turns every MiB, not every 64 KiB: `ferry pack
/// SRC - | cat >/dev/null` on the kernel tree took 0.94-1.01 s with a 1 MiB pipe
/// against 2.14-2.28 s with the default. Either end may do it; a failure (not a pipe,
/// or a smaller limit) leaves it as it was.
pub fn widen_pipe(fd: impl AsFd) {
    if rfs::fstat(&fd).is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Fifo) {
        let _ = rustix::pipe::fcntl_setpipe_size(&fd, PIPE_BYTES);
    }
}

/// An archive file being written.
pub struct ArchiveOut {
    path: PathBuf,
    target: Target,
    /// The archive being replaced, when it is not the file written.
    replaces: Option<InodeKey>,
}

enum Target {
    /// Written without a name, linked in when done.
    Unnamed {
        file: File,
        /// The directory it is linked into.
        dir: OwnedFd,
    },
    /// Written under a temporary name, renamed over `path` when done.
    Beside(NamedTempFile),
    /// Written at `path` itself.
    InPlace(File),
}

impl Target {
    /// The file the archive is written into.
    fn file(&self) -> &File {
        match self {
            Target::Unnamed { file, .. } | Target::InPlace(file) => file,
            Target::Beside(temp) => temp.as_file(),
        }
    }
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
                new_target(path, old.as_ref())
                    .with_context(|| format!("{}: create archive", path.display()))?
            }
        };
        let replaces = match (&target, &old) {
            (Target::InPlace(_), _) => None,
            (_, old) => old.as_ref().map(InodeKey::of_metadata),
        };
        Ok(ArchiveOut {
            path: path.to_path_buf(),
            target,
            replaces,
        })
    }

    /// The file to write.
    pub fn file(&self) -> &File {
        self.target.file()
    }

    /// Whether the archive can be written at offsets, not only in order (see
    /// [`is_positional`]).
    pub fn is_positional(&self) -> bool {
        self.file()
            .metadata()
            .is_ok_and(|m| is_positional(&m.file_type()))
    }

    /// Inodes a walk of the source must not pack: the file written, and the archive it
    /// replaces, should either lie in the source.
    pub fn inodes(&self) -> io::Result<Vec<InodeKey>> {
        let written = InodeKey::of_metadata(&self.file().metadata()?);
        Ok(std::iter::once(written).chain(self.replaces).collect())
    }

    /// The archive is complete: puts it at its path. A signal to stop waits until
    /// that is done (see [`INTERRUPTIBLE`]).
    pub fn commit(self) -> anyhow::Result<()> {
        let mut state = interruptible();
        let done = match self.target {
            Target::Unnamed { file, dir } => link_in(&file, &dir, &self.path)
                .with_context(|| format!("{}: put archive in place", self.path.display())),
            Target::Beside(temp) => temp
                .persist(&self.path)
                .map(drop)
                .map_err(|e| e.error)
                .with_context(|| format!("{}: rename archive into place", self.path.display())),
            Target::InPlace(_) => Ok(()),
        };
        state.in_place = done.is_ok();
        done
    }
}

/// Whether a file of this type can be read and written at offsets (a file or a block
/// device), not only in order (a fifo, a pipe, a terminal).
pub fn is_positional(kind: &std::fs::FileType) -> bool {
    use std::os::unix::fs::FileTypeExt;
    kind.is_file() || kind.is_block_device()
}

/// The directory `path` is in.
fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// A file to write the archive for `path` into, with the mode (and, when root, the
/// owner) of the file `old` it is to replace; a new file's mode is 0666 less the umask.
/// Without a name where the filesystem allows, else under a temporary one.
fn new_target(path: &Path, old: Option<&std::fs::Metadata>) -> io::Result<Target> {
    let target = match unnamed(dir_of(path))? {
        Some((file, dir)) => Target::Unnamed { file, dir },
        None => Target::Beside(beside(path)?),
    };
    let file = target.file();
    if let Some(m) = old {
        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::fchown(file, Some(m.uid()), Some(m.gid()))?;
        }
        // After the owner: a chown clears setuid and setgid bits.
        file.set_permissions(Permissions::from_mode(m.mode() & 0o7777))?;
    }
    Ok(target)
}

/// A file without a name in `dir`, and `dir` opened, or `None` where the filesystem
/// (or the kernel) cannot make one, or `/proc` is not there to give it a name later.
fn unnamed(dir: &Path) -> io::Result<Option<(File, OwnedFd)>> {
    let dir_fd = rfs::open(
        dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let file = match rfs::openat(
        &dir_fd,
        ".",
        OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o666),
    ) {
        Ok(fd) => File::from(fd),
        Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if std::fs::read_link(proc_path(&file)).is_err() {
        return Ok(None);
    }
    Ok(Some((file, dir_fd)))
}

/// `/proc/self/fd/N` for `file`: linking it gives the file behind it a name.
fn proc_path(file: &File) -> String {
    format!("/proc/self/fd/{}", file.as_raw_fd())
}

/// Gives the unnamed `file` in `dir` the name of `path`: linked in directly where
/// nothing has that name, else under a temporary name beside it and renamed over it.
fn link_in(file: &File, dir: &OwnedFd, path: &Path) -> io::Result<()> {
    let name = path.file_name().unwrap_or_default();
    let link =
        |to: &std::ffi::OsStr| rfs::linkat(CWD, proc_path(file), dir, to, AtFlags::SYMLINK_FOLLOW);
    match link(name) {
        Err(Errno::EXIST) => {}
        done => return Ok(done?),
    }
    let temp = loop {
        let mut temp = partial_prefix(path);
        temp.push(
            std::iter::repeat_with(fastrand::alphanumeric)
                .take(6)
                .collect::<String>(),
        );
        temp.push(".partial");
        match link(&temp) {
            Err(Errno::EXIST) => continue,
            done => break done.map(|()| temp)?,
        }
    };
    rfs::renameat(dir, &temp, dir, name).inspect_err(|_| {
        let _ = rfs::unlinkat(dir, &temp, AtFlags::empty());
    })?;
    Ok(())
}

/// `.NAME.`: how a temporary name for the archive at `path` starts.
fn partial_prefix(path: &Path) -> OsString {
    let mut prefix = OsString::from(".");
    prefix.push(path.file_name().unwrap_or_default());
    prefix.push(".");
    prefix
}

/// A temporary file named `.NAME.XXXXXX.partial` in `path`'s directory, removed if the
/// process is told to stop.
fn beside(path: &Path) -> io::Result<NamedTempFile> {
    let temp = tempfile::Builder::new()
        .prefix(&partial_prefix(path))
        .suffix(".partial")
        .permissions(Permissions::from_mode(0o666))
        .tempfile_in(dir_of(path))?;
    remove_on_interrupt(Some(temp.path().to_path_buf()));
    Ok(temp)
}
