//! Mounting and unmounting: the FUSE session runs on its own threads while the caller
//! waits for a request to stop (Ctrl-C, SIGTERM) or for the filesystem to be unmounted
//! from outside (`ferry umount`, `fusermount3 -u`).

use crate::fs::ArchiveFs;
use crate::fusermount;
use crate::MountError;
use fuser::{Config, MountOption, Session, SessionACL};
use std::path::Path;
use std::process::Command;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

/// How to mount.
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// Let other users in (`allow_other`; for a user other than root, needs
    /// `user_allow_other` in /etc/fuse.conf).
    pub allow_other: bool,
    /// FUSE threads answering requests.
    pub threads: usize,
    /// What `mount` shows as the source.
    pub fsname: String,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            allow_other: false,
            threads: 4,
            fsname: "ferry".to_string(),
        }
    }
}

/// Mounts `fs` on `mountpoint`, calls `ready` once the kernel has answered the mount,
/// and serves until `stop` receives (or its sender is dropped) or the filesystem is
/// unmounted from outside; then unmounts if still mounted.
///
/// The mount is made by `fusermount3` (as libfuse makes it, so an ordinary user can
/// mount) with `auto_unmount`: fusermount3 stays behind, holding one end of a socket,
/// and unmounts the filesystem when this process ends however it ends, so a killed
/// mount leaves no dead mountpoint behind. Where fusermount3 is missing, root mounts
/// directly.
pub fn serve(
    fs: ArchiveFs,
    mountpoint: &Path,
    opts: &MountOptions,
    ready: impl FnOnce(),
    stop: Receiver<()>,
) -> Result<(), MountError> {
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::RO,
        MountOption::NoDev,
        MountOption::NoSuid,
        MountOption::DefaultPermissions,
        MountOption::FSName(opts.fsname.clone()),
        MountOption::Subtype("ferry".to_string()),
    ];
    config.acl = if opts.allow_other {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    config.n_threads = Some(opts.threads.max(1));
    config.clone_fd = true;
    let mount_error = |e: std::io::Error| MountError::at(mountpoint, format!("mount: {e}"));
    let notifier = fs.notifier_slot();
    let (session, helper) = match fusermount::mount(mountpoint, &fusermount::options(opts)) {
        Ok((fd, helper)) => (
            Session::from_fd(fs, fd, config.acl, config.clone()).map_err(mount_error)?,
            Some(helper),
        ),
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound && rustix::process::geteuid().is_root() =>
        {
            (
                Session::new(fs, mountpoint, &config).map_err(mount_error)?,
                None,
            )
        }
        Err(e) => return Err(mount_error(e)),
    };
    let _ = notifier.set(session.notifier());
    ready();
    let background = session
        .spawn()
        .map_err(|e| MountError::at(mountpoint, format!("start serving: {e}")))?;
    loop {
        match stop.recv_timeout(Duration::from_millis(200)) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                if helper.is_some() {
                    // The session loop ends once the kernel lets the mount go.
                    unmount(mountpoint, true)?;
                    drop(helper);
                    return background
                        .join()
                        .map_err(|e| MountError::at(mountpoint, format!("serving: {e}")));
                }
                return background
                    .umount_and_join()
                    .map_err(|e| MountError::at(mountpoint, format!("unmount: {e}")));
            }
            Err(RecvTimeoutError::Timeout) if background.guard.is_finished() => {
                drop(helper);
                return background
                    .join()
                    .map_err(|e| MountError::at(mountpoint, format!("serving: {e}")));
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
}

/// Unmounts the FUSE filesystem at `mountpoint`, also one whose process has died:
/// `fusermount3 -u` (which an ordinary user may run); as root, `umount2` directly when
/// fusermount3 is missing. A busy mount (a process has a file open in it, or its
/// working directory there) is refused, as `umount` refuses it, unless `lazy`: then it
/// is detached now and let go once no longer used (`-z`, `MNT_DETACH`).
pub fn unmount(mountpoint: &Path, lazy: bool) -> Result<(), MountError> {
    if !is_mounted(mountpoint) {
        return Err(MountError::at(mountpoint, "not mounted"));
    }
    let tries: &[&[&str]] = match lazy {
        true => &[&["-u"], &["-u", "-z"]],
        false => &[&["-u"]],
    };
    let mut last = String::new();
    for args in tries {
        match Command::new("fusermount3")
            .args(*args)
            .arg(mountpoint)
            .output()
        {
            Ok(out) if out.status.success() => return Ok(()),
            Ok(out) => last = String::from_utf8_lossy(&out.stderr).trim().to_string(),
            Err(e) => {
                last = format!("run fusermount3: {e}");
                break;
            }
        }
    }
    if rustix::process::geteuid().is_root() {
        let flags = [
            rustix::mount::UnmountFlags::empty(),
            rustix::mount::UnmountFlags::DETACH,
        ];
        for f in &flags[..if lazy { 2 } else { 1 }] {
            match rustix::mount::unmount(mountpoint, *f) {
                Ok(()) => return Ok(()),
                Err(e) => last = e.to_string(),
            }
        }
    }
    if !lazy && last.contains("busy") {
        return Err(busy(mountpoint));
    }
    Err(MountError::at(mountpoint, format!("unmount: {last}")))
}

/// The error for a mount in use.
pub(crate) fn busy(mountpoint: &Path) -> MountError {
    MountError::at(
        mountpoint,
        "busy (a process has a file open in it, or its working directory there): close \
         them, or unmount it lazily with --lazy",
    )
}

/// What made the mount at a path, as far as ferry's `umount` is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MadeBy {
    /// `ferry mount` with FUSE (type `fuse.ferry`).
    FerryFuse,
    /// `ferry mount --kernel`: EROFS over an image ferry wrote.
    FerryKernel,
}

/// Whether the topmost mount at `path` is one `ferry mount` made: a FUSE mount of
/// subtype `ferry`, or an EROFS mount whose image (the file, or the loop device's
/// backing file) carries ferry's image header. `Err` names what is mounted there.
pub fn made_by_ferry(path: &Path) -> Result<MadeBy, MountError> {
    let Ok(abs) = std::fs::canonicalize(path) else {
        // A FUSE mount whose process died cannot be entered, so not resolved either.
        return match is_mounted(path) {
            true => Ok(MadeBy::FerryFuse),
            false => Err(MountError::at(path, "not mounted")),
        };
    };
    let Some(line) = mountinfo_line(&abs) else {
        return Err(MountError::at(path, "not mounted"));
    };
    let (kind, source) = type_and_source(&line).unwrap_or_default();
    match kind.as_str() {
        "fuse.ferry" => Ok(MadeBy::FerryFuse),
        "erofs" if crate::kernel::image::is_ferry_image(&image_behind(&source)) => {
            Ok(MadeBy::FerryKernel)
        }
        _ => Err(MountError::at(
            path,
            format!(
                "not a mount ferry made (a {kind} filesystem from {}): ferry umount \
                 leaves it alone; use umount",
                String::from_utf8_lossy(source.as_os_str().as_encoded_bytes())
            ),
        )),
    }
}

/// The file a mount's source names: itself, or for a loop device its backing file.
fn image_behind(source: &Path) -> std::path::PathBuf {
    let name = source.file_name().map(|n| n.to_string_lossy().into_owned());
    match name {
        Some(n) if source.starts_with("/dev") && n.starts_with("loop") => {
            std::fs::read_to_string(format!("/sys/block/{n}/loop/backing_file"))
                .map(|b| std::path::PathBuf::from(b.trim_end_matches('\n')))
                .unwrap_or_default()
        }
        _ => source.to_path_buf(),
    }
}

/// A path field of /proc/self/mountinfo with its octal escapes undone.
fn unescape_mountinfo(field: &[u8]) -> std::path::PathBuf {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field.get(i + 1..i + 4).and_then(|d| {
            std::str::from_utf8(d)
                .ok()
                .and_then(|d| u8::from_str_radix(d, 8).ok())
        });
        match (field[i], octal) {
            (b'\\', Some(b)) => {
                out.push(b);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    use std::os::unix::ffi::OsStringExt;
    std::path::PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// Whether something is mounted at `path`: a dead FUSE mount (its process gone) cannot
/// be entered and counts as mounted; else /proc/self/mountinfo says.
pub fn is_mounted(path: &Path) -> bool {
    let Ok(abs) = std::fs::canonicalize(path) else {
        return path.parent().is_some_and(|p| p.exists());
    };
    mountinfo_line(&abs).is_some()
}

/// The filesystem type of what is mounted at `path` (the topmost mount), as
/// /proc/self/mountinfo names it (`fuse.ferry`, `erofs` ...).
pub fn fs_type(path: &Path) -> Option<String> {
    let abs = std::fs::canonicalize(path).ok()?;
    Some(type_and_source(&mountinfo_line(&abs)?)?.0)
}

/// The filesystem type and the source (its escapes undone) of a mountinfo line.
fn type_and_source(line: &[u8]) -> Option<(String, std::path::PathBuf)> {
    // Fields after the optional ones: "-", the type, the source, the options.
    let mut fields = line.split(|&b| b == b' ').skip_while(|f| *f != b"-");
    fields.next()?;
    let kind = String::from_utf8_lossy(fields.next()?).into_owned();
    Some((kind, unescape_mountinfo(fields.next().unwrap_or_default())))
}

/// The line of /proc/self/mountinfo of the topmost mount at `path`, if any.
pub fn mountinfo_of(path: &Path) -> Option<Vec<u8>> {
    mountinfo_line(&std::fs::canonicalize(path).ok()?)
}

/// The last line of /proc/self/mountinfo whose mountpoint is `abs`.
fn mountinfo_line(abs: &Path) -> Option<Vec<u8>> {
    let info = std::fs::read("/proc/self/mountinfo").unwrap_or_default();
    let want = escape_mountinfo(abs.as_os_str().as_encoded_bytes());
    info.split(|&b| b == b'\n')
        .rfind(|l| l.split(|&b| b == b' ').nth(4) == Some(want.as_slice()))
        .map(<[u8]>::to_vec)
}

/// A path as /proc/self/mountinfo writes it: space, tab, newline and backslash as
/// octal escapes.
fn escape_mountinfo(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in path {
        match b {
            b' ' | b'\t' | b'\n' | b'\\' => out.extend_from_slice(format!("\\{b:03o}").as_bytes()),
            _ => out.push(b),
        }
    }
    out
}
