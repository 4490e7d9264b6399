//! ferry-mount: any tar as a read-only filesystem.
//!
//! A mount serves an archive's *tree table* ([`ferry_archive::tree`]): the tree the
//! archive extracts to, by directory and name, read in place a few records at a time.
//! Where the table comes from ([`source`]):
//!
//! - a ferry archive carries it in its index, so it mounts without reading the tar data
//!   and without loading the table: the time to mount does not grow with the archive;
//! - any other tar (and a ferry archive from before the table) is scanned once,
//!   headers only, and the table is kept in the user's cache ([`cache`]), reused while
//!   the archive's size and modification time are unchanged.
//!
//! The filesystem ([`fs`]) answers lookups and listings from the table (readdirplus,
//! long timeouts: the archive does not change under a mount), and reads by `pread` at
//! each member's offset, several FUSE threads at a time; a member whose content does
//! not match the hash its table records is an I/O error, never wrong bytes.
//! [`session`] mounts, waits for the kernel's first request and unmounts; [`watch`]
//! unmounts a mount whose process was killed.
//!
//! [`kernel`] is the other way to serve the same table: as root, an EROFS image of it
//! (built by `ferry-erofs`, kept in the same cache) mounted by the kernel itself, the
//! archive as its data device, with no process in between.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use ferry_mount::{fs, session, source};
//! let opened = source::open(std::path::Path::new("tree.far"), None)?;
//! let fs = fs::ArchiveFs::new(opened, fs::Options::default());
//! let (_stop, stop_rx) = std::sync::mpsc::channel();
//! // Serves until `_stop` sends or is dropped, or until unmounted from outside.
//! session::serve(fs, "/mnt/tree".as_ref(), &Default::default(), || {}, stop_rx)?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod cache;
pub mod data;
pub mod fs;
pub mod fusermount;
pub mod kernel;
pub mod scan;
pub mod session;
pub mod source;
pub mod watch;

/// Why an archive could not be mounted or indexed; the message names what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MountError(pub String);

impl MountError {
    /// An error saying `what` about `path`.
    pub fn at(path: &std::path::Path, what: impl std::fmt::Display) -> MountError {
        MountError(format!("{}: {what}", path.display()))
    }
}
