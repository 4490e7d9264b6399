//! Telling a file that changed while it was read, as GNU tar does: its size, mtime and
//! ctime when it was opened and statted ([`Stamp`]) are compared with what `fstat`
//! says once its data has been read, and a difference is the error "file changed as
//! we read it" naming it (exit status 1). The bytes read may then be a version of the
//! file that never existed, under the metadata of the one before.

use crate::entry::RelPath;
use crate::error::Error;
use rustix::fs::Stat;
use std::io;
use std::os::fd::BorrowedFd;

/// What a change to a file changes: its size, mtime and ctime (a write that keeps the
/// size and sets the mtime back still moves the ctime).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    size: i64,
    mtime: (i64, u32),
    ctime: (i64, u32),
}

impl Stamp {
    /// The stamp of a file as `st` describes it.
    pub fn of(st: &Stat) -> Stamp {
        Stamp {
            size: st.st_size,
            mtime: (st.st_mtime, st.st_mtime_nsec as u32),
            ctime: (st.st_ctime, st.st_ctime_nsec as u32),
        }
    }

    /// Fails, naming `path`, if `fd` no longer has this stamp (one `fstat`).
    pub fn check(&self, fd: BorrowedFd<'_>, path: &RelPath) -> Result<(), Error> {
        let now = rustix::fs::fstat(fd).map_err(|e| Error::new(path, "stat after reading", e))?;
        if Stamp::of(&now) != *self {
            return Err(changed(path));
        }
        Ok(())
    }
}

/// The error for `path`, which changed while it was read.
pub fn changed(path: &RelPath) -> Error {
    Error::new(path, "read", io::Error::other(CHANGED))
}

/// What a file that changed while it was read is told to have done (GNU tar's words).
pub const CHANGED: &str = "file changed as we read it";

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;

    #[test]
    fn a_write_after_the_stat_is_a_change_naming_the_file() {
        let mut f = tempfile::tempfile().expect("tempfile");
        f.write_all(b"before").unwrap();
        let stamp = Stamp::of(&rustix::fs::fstat(&f).unwrap());
        let path = RelPath::from_bytes(b"d/f".to_vec());
        assert!(stamp.check(f.as_fd(), &path).is_ok());
        f.write_all(b", after").unwrap();
        let e = stamp.check(f.as_fd(), &path).unwrap_err();
        assert!(
            e.to_string().contains("d/f") && e.to_string().contains(CHANGED),
            "{e}"
        );
    }
}
