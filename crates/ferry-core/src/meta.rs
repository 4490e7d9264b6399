//! Reading metadata from the source and applying it to the destination, in the order a
//! correct copy needs: owner first (a chown clears setuid bits and `security.capability`),
//! then mode, then xattrs, and the times last, so a half-written file never looks complete.
//!
//! Not as root, the owner cannot be given away, but the group can be set to any group
//! the process is in, as `cp -a` does.

use crate::entry::{Metadata, Timestamp, Xattr};
use crate::xattr;
use rustix::fs::{self as rfs, AtFlags, Gid, Mode, Stat, Timestamps, Uid};
use rustix::io::Errno;
use std::borrow::Cow;
use std::ffi::CStr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// The metadata in a `stat`, without xattrs.
pub fn from_stat(st: &Stat) -> Metadata {
    Metadata {
        mode: st.st_mode & 0o7777,
        uid: st.st_uid,
        gid: st.st_gid,
        atime: Timestamp {
            sec: st.st_atime,
            nsec: st.st_atime_nsec as u32,
        },
        mtime: Timestamp {
            sec: st.st_mtime,
            nsec: st.st_mtime_nsec as u32,
        },
        xattrs: Vec::new(),
    }
}

/// The modification time in a `stat`.
pub fn mtime_of(st: &Stat) -> Timestamp {
    Timestamp {
        sec: st.st_mtime,
        nsec: st.st_mtime_nsec as u32,
    }
}

/// All extended attributes of an open file or directory. A filesystem without xattr
/// support yields none.
pub fn read_xattrs(fd: impl AsFd) -> std::io::Result<Vec<Xattr>> {
    xattr::read(&xattr::Node::Fd(fd.as_fd()))
}

/// The access time in a `stat`.
pub fn atime_of(st: &Stat) -> Timestamp {
    Timestamp {
        sec: st.st_atime,
        nsec: st.st_atime_nsec as u32,
    }
}

/// Applies metadata to created nodes; remembers what the destination refuses so a
/// filesystem without xattrs costs one warning, not one per file.
#[derive(Debug)]
pub struct MetaWriter {
    /// Running as root: owners can be set and all xattr namespaces written.
    pub privileged: bool,
    /// The owner new nodes get (in a directory without the setgid bit).
    creator: (u32, u32),
    /// The groups this process is in, and so may give its files when not root.
    groups: Vec<u32>,
    umask: u32,
    xattrs_refused: AtomicBool,
}

/// What went wrong applying metadata that the user should hear about once.
#[derive(Debug, PartialEq, Eq)]
pub enum MetaNotice {
    /// Nothing to report.
    None,
    /// The destination filesystem refused xattrs for the first time in this job.
    XattrsUnsupported,
}

impl MetaWriter {
    /// A writer for this process; reads the umask once.
    pub fn new() -> Self {
        // umask can only be read by setting it; put it straight back.
        let old = rustix::process::umask(Mode::empty());
        rustix::process::umask(old);
        let egid = rustix::process::getegid();
        let mut groups: Vec<u32> = rustix::process::getgroups()
            .unwrap_or_default()
            .iter()
            .map(|g| g.as_raw())
            .collect();
        groups.push(egid.as_raw());
        MetaWriter {
            privileged: rustix::process::geteuid().is_root(),
            creator: (rustix::process::geteuid().as_raw(), egid.as_raw()),
            groups,
            umask: old.bits(),
            xattrs_refused: AtomicBool::new(false),
        }
    }

    /// The process's umask.
    pub fn umask(&self) -> u32 {
        self.umask
    }

    /// Whether this process may give its nodes the group `gid`: as root any, else one
    /// it is in.
    fn may_give_group(&self, gid: u32) -> bool {
        self.privileged || self.groups.contains(&gid)
    }

    /// The mode to give a node for `meta`. Not as root, as `cp -a` does: without the
    /// setuid bit when the node cannot be given `meta`'s user (it would run as this
    /// process's), and without setgid when it cannot be given its group.
    pub fn mode_for(&self, meta: &Metadata) -> u32 {
        let mut mode = meta.mode;
        if !self.privileged {
            if meta.uid != self.creator.0 {
                mode &= !0o4000;
            }
            if !self.may_give_group(meta.gid) {
                mode &= !0o2000;
            }
        }
        mode
    }

    /// How an existing node's metadata (its status `st`, its xattrs `have`) differs
    /// from `m` as this writer would set it: nothing when it need not change. Atimes
    /// are left out (see below), and a symlink's mode (it has none of its own).
    pub fn differences(
        &self,
        st: &Stat,
        m: &Metadata,
        have: &[crate::entry::Xattr],
        kind: crate::changes::Kind,
    ) -> crate::changes::Reasons {
        use crate::changes::{Kind, Reasons};
        // Not the atime: reading the source moves it where `O_NOATIME` cannot be had
        // (a symlink's `readlink`, another user's file), so comparing it would find
        // work after every copy. It is set when the node is written, as rsync's
        // `--atimes` sets it, and not compared, as rsync does not compare it.
        let times = mtime_of(st) != m.mtime;
        Reasons::none()
            .with_if(
                kind != Kind::Symlink && st.st_mode & 0o7777 != self.mode_for(m),
                Reasons::MODE,
            )
            .with_if(!self.owner_matches(st.st_uid, st.st_gid, m), Reasons::OWNER)
            .with_if(times, Reasons::TIMES)
            .with_if(!crate::xattr::same(have, &m.xattrs), Reasons::XATTRS)
    }

    /// Whether a node owned by `(uid, gid)` has the owner `meta` asks for, as far as
    /// this process can set it: both ids as root, else the group where it may give it.
    pub fn owner_matches(&self, uid: u32, gid: u32, meta: &Metadata) -> bool {
        let uid_ok = !self.privileged || uid == meta.uid;
        let gid_ok = gid == meta.gid || !self.may_give_group(meta.gid);
        uid_ok && gid_ok
    }

    /// The owner to set on a node, if any: both ids as root, unless `created` (made by
    /// this process where new nodes are its own) already gives them; else the group
    /// alone, where this process is in it. `None` for either id leaves it as it is.
    fn owner_to_set(&self, meta: &Metadata, created: bool) -> Option<(Option<Uid>, Gid)> {
        let gid = Gid::from_raw(meta.gid);
        if self.privileged {
            let given = created && (meta.uid, meta.gid) == self.creator;
            return (!given).then_some((Some(Uid::from_raw(meta.uid)), gid));
        }
        let given = created && meta.gid == self.creator.1;
        (!given && self.may_give_group(meta.gid)).then_some((None, gid))
    }

    /// Sets the owner `owner_to_set` chose with `chown`; true if it was set. Not as
    /// root a refusal is no error: `cp -a` too keeps what it may.
    fn set_owner(
        &self,
        owner: Option<(Option<Uid>, Gid)>,
        chown: impl FnOnce(Option<Uid>, Gid) -> rustix::io::Result<()>,
    ) -> Result<bool, (&'static str, std::io::Error)> {
        let Some((uid, gid)) = owner else {
            return Ok(false);
        };
        match chown(uid, gid) {
            Ok(()) => Ok(true),
            Err(Errno::PERM) if !self.privileged => Ok(false),
            Err(e) => Err(("set owner", e.into())),
        }
    }

    /// The mode to create a file with, and whether an explicit chmod is still needed after
    /// the owner is set (setuid/setgid/sticky bits, or a umask that would mask bits).
    /// Not as root, a file whose `user.*` xattrs are to be set is made writable by its
    /// owner until they are: the kernel asks for write permission to set them.
    pub fn create_mode(&self, meta: &Metadata) -> (Mode, bool) {
        let perm = meta.mode & 0o777;
        let needs_chmod = self.mode_for(meta) & 0o7000 != 0 || perm & self.umask != 0;
        let user_xattrs = meta.xattrs.iter().any(|x| x.name.starts_with(b"user."));
        if !self.privileged && user_xattrs && perm & 0o200 == 0 {
            return (Mode::from_raw_mode(perm | 0o200), true);
        }
        (Mode::from_raw_mode(perm), needs_chmod)
    }

    /// Sets owner, mode, xattrs and times on an open file or directory, times last.
    /// `have` is the xattrs it has now (those not wanted are removed).
    /// `chmod` says whether the mode must be set explicitly; `created` that this process
    /// just created the node in a directory without the setgid bit, so it is owned by
    /// this process's user and group and a chown to those would change nothing.
    pub fn apply_fd(
        &self,
        fd: impl AsFd,
        meta: &Metadata,
        chmod: bool,
        created: bool,
        have: &[Xattr],
    ) -> Result<MetaNotice, (&'static str, std::io::Error)> {
        let fd = fd.as_fd();
        let owner = self.owner_to_set(meta, created);
        let chowned = self.set_owner(owner, |uid, gid| rfs::fchown(fd, uid, Some(gid)))?;
        // Xattrs before the mode: setting `user.*` ones needs write permission, which
        // the final mode may take away.
        let have = after_chown(have, chowned);
        let notice = self
            .set_xattrs(&xattr::Node::Fd(fd), &meta.xattrs, &have)
            .map_err(|e| ("set xattr", e))?;
        if chmod {
            rfs::fchmod(fd, Mode::from_raw_mode(self.mode_for(meta)))
                .map_err(|e| ("set mode", e.into()))?;
        }
        rfs::futimens(fd, &timestamps(meta)).map_err(|e| ("set times", e.into()))?;
        Ok(notice)
    }

    /// Sets owner, mode (unless a symlink), xattrs and times on `name` in `dir`, never
    /// following a symlink: for nodes that cannot be opened (symlinks, fifos, devices)
    /// and for existing nodes brought up to date. `have` is the xattrs the node has now.
    pub fn apply_at(
        &self,
        dir: impl AsFd,
        name: &CStr,
        meta: &Metadata,
        is_symlink: bool,
        have: &[Xattr],
    ) -> Result<MetaNotice, (&'static str, std::io::Error)> {
        let dir = dir.as_fd();
        let owner = self.owner_to_set(meta, false);
        let chowned = self.set_owner(owner, |uid, gid| {
            rfs::chownat(dir, name, uid, Some(gid), AtFlags::SYMLINK_NOFOLLOW)
        })?;
        // Xattrs before the mode, as in `apply_fd`.
        let have = after_chown(have, chowned);
        let notice = if meta.xattrs.is_empty() && have.is_empty() {
            MetaNotice::None
        } else {
            self.set_xattrs(&xattr::Node::named(dir, name), &meta.xattrs, &have)
                .map_err(|e| ("set xattr", e))?
        };
        if !is_symlink {
            rfs::chmodat(
                dir,
                name,
                Mode::from_raw_mode(self.mode_for(meta)),
                AtFlags::empty(),
            )
            .map_err(|e| ("set mode", e.into()))?;
        }
        rfs::utimensat(dir, name, &timestamps(meta), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| ("set times", e.into()))?;
        Ok(notice)
    }

    /// Sets `want` on `node` and removes the attributes of `have` (what the node has
    /// now) that `want` lacks.
    pub fn set_xattrs(
        &self,
        node: &xattr::Node<'_>,
        want: &[Xattr],
        have: &[Xattr],
    ) -> std::io::Result<MetaNotice> {
        let refused = || {
            if self.xattrs_refused.swap(true, Relaxed) {
                MetaNotice::None
            } else {
                MetaNotice::XattrsUnsupported
            }
        };
        for x in want.iter().filter(|x| !have.contains(x)) {
            let Ok(name) = std::ffi::CString::new(x.name.clone()) else {
                continue;
            };
            match node.set(name.as_c_str(), &x.value) {
                Ok(()) => {}
                Err(Errno::NOTSUP) => return Ok(refused()),
                // trusted.* and some security.* need privileges we may not have.
                Err(Errno::PERM) if !self.privileged => {}
                Err(e) => return Err(e.into()),
            }
        }
        for x in have
            .iter()
            .filter(|h| !want.iter().any(|w| w.name == h.name))
        {
            let Ok(name) = std::ffi::CString::new(x.name.clone()) else {
                continue;
            };
            match node.remove(name.as_c_str()) {
                Ok(()) | Err(Errno::NODATA) => {}
                Err(Errno::PERM) if !self.privileged => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(MetaNotice::None)
    }
}

impl Default for MetaWriter {
    fn default() -> Self {
        Self::new()
    }
}

/// The xattrs a node that had `have` still has after a chown, if `chowned`: every
/// chown drops a file capability (`security.capability`), so it must be set again.
fn after_chown(have: &[Xattr], chowned: bool) -> Cow<'_, [Xattr]> {
    let capability = |x: &Xattr| x.name == b"security.capability";
    if chowned && have.iter().any(capability) {
        Cow::Owned(have.iter().filter(|x| !capability(x)).cloned().collect())
    } else {
        Cow::Borrowed(have)
    }
}

/// The atime and mtime of `meta`, as `utimensat` takes them.
pub fn timestamps(meta: &Metadata) -> Timestamps {
    let ts = |t: Timestamp| rfs::Timespec {
        tv_sec: t.sec,
        tv_nsec: t.nsec as _,
    };
    Timestamps {
        last_access: ts(meta.atime),
        last_modification: ts(meta.mtime),
    }
}
