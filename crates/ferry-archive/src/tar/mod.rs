//! Reading tar streams: headers, pax records, GNU extensions, sparse maps.
//!
//! [`Reader`] reads a tar stream written by ferry, GNU tar or bsdtar, one entry at a time,
//! from any [`std::io::Read`]: it never seeks and holds at most one extension header in
//! memory. It is strict, because an extractor's input is hostile by default and a
//! difference between two tar parsers is a security bug:
//!
//! - every header checksum is verified (unsigned or signed sum, as GNU tar accepts);
//! - numeric fields are octal (leading spaces/NULs and trailing space/NUL terminators
//!   allowed, nothing else) or GNU base-256; anything else is an error;
//! - a pax `x` header applies only to the next entry, a `g` header to all the following
//!   ones; a pax `size` overrides the ustar size; records are validated byte for byte;
//! - entries that carry no data (directories, links, devices, fifos) must declare size 0,
//!   because GNU tar and libarchive disagree about skipping such data; the one exception
//!   is GNU tar's incremental directory (`D`), whose data (the names it held) both
//!   tools skip, and so does this reader, taking it for a directory;
//! - sparse maps (GNU old `S`, pax 0.0, 0.1 and 1.0) are validated: runs sorted,
//!   non-overlapping, inside the file, adding up to the stored data;
//! - a truncated stream is an "unexpected end of archive" error, never a short success;
//! - sizes of everything kept in memory are capped (see the `MAX_*` constants).
//!
//! Every error names the stream offset where it was found.
//!
//! Decisions where tar readers differ (documented so that callers know):
//!
//! - End of archive is a zero block. The second zero block is read if present; a single
//!   zero block followed by the end of the stream is accepted, and so is the end of the
//!   stream exactly at a header boundary (GNU tar and bsdtar accept both silently). A
//!   zero block followed by a non-zero block is an error (GNU tar warns "A lone zero
//!   block" and stops; we refuse rather than guess). Bytes after the end marker are not
//!   read: ferry's index lives there.
//! - Unknown type flags are errors (GNU tar and bsdtar extract them as regular files,
//!   which would turn e.g. an unknown kind of link into a file). GNU volume labels (`V`)
//!   are skipped, as both tools do.
//! - A regular file whose path ends in `/` and whose size is 0 is a directory (as in
//!   both tools); with a non-zero size it is an error.
//! - A pax `g` header may not set `path`, `linkpath`, `size` or `GNU.sparse.*`: those
//!   describe one file, and bsdtar ignores global headers altogether while GNU tar
//!   applies them. Other global keys (times, owners, xattrs) are applied, as GNU tar
//!   does.
//! - Two `x` headers, two `L` or two `K` headers before one entry are an error.
//! - An xattr given twice (bsdtar writes both `LIBARCHIVE.xattr` and `SCHILY.xattr`) is
//!   reported once, with the value of the last record, which is what both tools apply.
//! - Zero-length runs in sparse maps (GNU tar ends a map that ends in a hole with one)
//!   are validated and then dropped from [`TarEntry::sparse`].
//!
//! ```
//! use ferry_archive::tar::{Reader, TarKind};
//!
//! # fn main() -> Result<(), ferry_archive::tar::TarError> {
//! let archive: &[u8] = &[0u8; 1024]; // an empty archive: two zero blocks
//! let mut reader = Reader::new(archive);
//! while let Some(entry) = reader.next_entry()? {
//!     if entry.kind == TarKind::File {
//!         let mut buf = [0u8; 8192];
//!         while reader.read_data(&mut buf)? > 0 {}
//!     }
//! }
//! assert_eq!(reader.offset(), 1024);
//! # Ok(())
//! # }
//! ```

mod entry;
mod error;
mod header;
mod pax;
mod reader;
mod sparse;
pub(crate) mod xattr;

pub use entry::{TarEntry, TarKind};
pub use error::{TarError, TarErrorKind};
pub use reader::{DataReader, Reader};

/// The tar block size: headers are one block, data is padded to a whole block.
pub const BLOCK_SIZE: u64 = 512;

/// Whether `bytes` start with a tar header block whose checksum holds: what every
/// archive with a member starts with, and what compressed data does not (whatever its
/// first bytes look like).
pub fn starts_with_header(bytes: &[u8]) -> bool {
    bytes
        .first_chunk::<{ BLOCK_SIZE as usize }>()
        .is_some_and(header::checksum_ok)
}

/// Largest pax extended header (`x` or `g`) body accepted, in bytes.
pub const MAX_PAX_HEADER: u64 = 1 << 20;

/// Largest total size of the pax global records in force, in bytes. Kept small because
/// every following entry carries a copy of them (in [`TarEntry::pax`], and the global
/// xattrs in [`TarEntry::xattrs`]): a 512-byte entry must not cost megabytes. Real
/// global headers (git's commit id, GNU tar's `--pax-option`) are tens of bytes.
/// Together with [`MAX_PAX_HEADER`] this also bounds the xattrs of one entry.
pub const MAX_PAX_GLOBAL: u64 = 64 << 10;

/// Largest GNU long name or long link (`L`, `K`) body accepted, in bytes.
pub const MAX_LONG_NAME: u64 = 64 << 10;

/// Largest number of runs in one sparse map.
pub const MAX_SPARSE_RUNS: u64 = 1_000_000;
