//! Letting go of destination directories deep in a tree and opening them again (see
//! [`DirHandle`]): a directory is known again by its inode, never reached through a
//! symlink, and what the job knew of it (made by it, owner, inherited ACL) is kept.

use super::{open_dir, other, DstDir};
use crate::entry::{InodeKey, RelPath};
use crate::error::{Context, Error, Result};
use crate::sink::DirHandle;
use rustix::fs as rfs;
use std::ffi::CStr;
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// What is kept of a destination directory a walk let go of (see [`DirHandle`]): its
/// inode, to know it again, and what the job knew of it.
pub struct DstMark {
    key: InodeKey,
    fresh: bool,
    plain_owner: bool,
    inherits_acl: bool,
}

impl DirHandle for DstDir {
    type Mark = DstMark;

    fn mark(&self, path: &RelPath) -> Result<DstMark> {
        let st = rfs::fstat(&*self.fd).at_dst(path, "stat destination directory")?;
        Ok(DstMark {
            key: InodeKey::of(&st),
            fresh: self.fresh,
            plain_owner: self.plain_owner,
            inherits_acl: self.inherits_acl,
        })
    }

    fn reopen_parent(child: &DstDir, mark: &DstMark, path: &RelPath) -> Result<DstDir> {
        DstDir::reopened(open_dir(&child.fd, c".."), mark, path)
    }

    fn reopen_child(
        parent: &DstDir,
        name: &CStr,
        mark: &DstMark,
        path: &RelPath,
    ) -> Result<DstDir> {
        DstDir::reopened(open_dir(&parent.fd, name), mark, path)
    }
}

impl DstDir {
    /// The directory `mark` once more, as `opened` (at `path`) if that is it: something
    /// else there now (the directory moved or replaced during the job) is an error.
    fn reopened(
        opened: rustix::io::Result<OwnedFd>,
        mark: &DstMark,
        path: &RelPath,
    ) -> Result<DstDir> {
        const OP: &str = "reopen destination directory";
        let fd = opened.at_dst(path, OP)?;
        let st = rfs::fstat(&fd).at_dst(path, OP)?;
        if InodeKey::of(&st) != mark.key {
            return Err(Error::dst(
                path,
                OP,
                other("another directory is there now: it was moved or replaced during the job"),
            ));
        }
        Ok(DstDir {
            fd: Arc::new(fd),
            fresh: mark.fresh,
            plain_owner: mark.plain_owner,
            inherits_acl: mark.inherits_acl,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// The directory at `path`, as the sink would hold it.
    fn dst_dir(path: &Path) -> DstDir {
        let fd = rfs::open(
            path,
            rfs::OFlags::RDONLY | rfs::OFlags::DIRECTORY | rfs::OFlags::CLOEXEC,
            rfs::Mode::empty(),
        )
        .expect("open directory");
        DstDir {
            fd: Arc::new(fd),
            fresh: true,
            plain_owner: true,
            inherits_acl: false,
        }
    }

    fn same_dir(a: &DstDir, b: &DstDir) -> bool {
        let key = |d: &DstDir| InodeKey::of(&rfs::fstat(&*d.fd).expect("fstat"));
        key(a) == key(b)
    }

    #[test]
    fn a_directory_let_go_of_is_opened_again_only_if_it_is_the_same_one() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (a, b) = (tmp.path().join("a"), tmp.path().join("a/b"));
        std::fs::create_dir_all(&b).expect("mkdir");
        let (root, a_dir, b_dir) = (dst_dir(tmp.path()), dst_dir(&a), dst_dir(&b));
        let path = RelPath::from_bytes(b"a".to_vec());
        let mark = a_dir.mark(&path).expect("mark");
        assert!(mark.fresh && mark.plain_owner && !mark.inherits_acl);
        drop(a_dir);
        let up = DstDir::reopen_parent(&b_dir, &mark, &path).expect("through ..");
        assert!(same_dir(&up, &dst_dir(&a)));
        let down = DstDir::reopen_child(&root, c"a", &mark, &path).expect("by name");
        assert!(same_dir(&down, &up) && down.fresh && down.plain_owner);

        // Moved away, another directory in its place: by name is not it any more, and
        // a symlink to it is not followed; through `..` of `b` it still is.
        std::fs::rename(&a, tmp.path().join("moved")).expect("rename");
        std::fs::create_dir(&a).expect("mkdir");
        let err = DstDir::reopen_child(&root, c"a", &mark, &path)
            .err()
            .expect("another directory is not it");
        assert!(err.to_string().contains("moved or replaced"), "{err}");
        std::fs::remove_dir(&a).expect("rmdir");
        std::os::unix::fs::symlink("moved", &a).expect("symlink");
        assert!(DstDir::reopen_child(&root, c"a", &mark, &path).is_err());
        assert!(DstDir::reopen_parent(&b_dir, &mark, &path).is_ok());

        // `b` moved out of it: its `..` is not it either.
        std::fs::rename(tmp.path().join("moved/b"), tmp.path().join("b")).expect("rename");
        let err = DstDir::reopen_parent(&b_dir, &mark, &path)
            .err()
            .expect("the parent `b` has now is not it");
        assert!(err.to_string().contains("moved or replaced"), "{err}");
    }
}
