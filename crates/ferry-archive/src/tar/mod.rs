//! Reading tar streams: headers, pax records, GNU extensions, sparse maps.
//!
//! [`Reader`] reads a tar stream written by ferry, GNU tar, bsdtar or another tar, one
//! entry at a time, from any [`std::io::Read`]: it never seeks and holds at most one
//! extension header in memory. It reads every archive GNU tar 1.34 reads, as GNU tar
//! reads it, and is strict only where strictness protects the machine or where the
//! stream's framing would be a guess:
//!
//! - every header checksum is verified (unsigned or signed sum, as GNU tar accepts);
//! - numeric fields are read exactly as GNU tar's `from_header` reads them (octal
//!   with leading blanks and one leading NUL, ended by a NUL or blank; GNU base-256);
//!   anything else is an error naming the field and its bytes;
//! - a pax `x` header applies only to the next entry, a `g` header to all the following
//!   ones (every key, as GNU tar applies them, but sparse maps); a pax `size`
//!   overrides the ustar size; records are validated byte for byte;
//! - sparse maps (GNU old `S`, pax 0.0, 0.1 and 1.0) are validated: runs sorted,
//!   non-overlapping, inside the file, adding up to the stored data;
//! - a truncated stream is an "unexpected end of archive" error, never a short success;
//! - sizes of everything kept in memory are capped (see the `MAX_*` constants).
//!
//! Every error names the stream offset where it was found and the member: the one
//! whose header is at fault, or the last one read before. What is read liberally is
//! noted as a [`TarWarning`] for the caller to report ([`Reader::take_warnings`]).
//!
//! Decisions where tar readers differ (documented so that callers know; the user's
//! side of it is in docs/archives.md, "Reading other tars"):
//!
//! - End of archive is a zero block. The second zero block is read if present; a single
//!   zero block followed by the end of the stream is accepted, and so is the end of the
//!   stream exactly at a header boundary (GNU tar and bsdtar accept both silently). A
//!   zero block followed by anything else ends the archive too, with a warning (GNU
//!   tar's "A lone zero block"). Bytes after the end marker are not read: ferry's index
//!   lives there.
//! - Unknown type flags are regular files (POSIX; GNU tar and bsdtar extract them so),
//!   with a warning; so are Solaris ACL headers (`A`), as GNU tar extracts them.
//!   Solaris `X` headers are pax headers. GNU volume labels (`V`) are skipped; files
//!   continued from another volume (`M`) are skipped with a [`Severity::Error`]
//!   warning, as GNU tar without `-M` fails them.
//! - Directories, links, devices and fifos have no data, whatever their size field
//!   says (POSIX): if the block after such a header is not a header, the writer stored
//!   data there anyway and it is skipped, with a warning. A regular file whose path
//!   ends in `/` is a directory (old writers), its size read the same way.
//! - Two `x`, `L` or `K` headers before one entry: the last one wins, with a warning.
//! - A GNU long name ends at its first NUL.
//! - A pax time, uid, gid or device number that does not parse is ignored, with a
//!   warning, and the header field read instead, as GNU tar does.
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
mod warning;
pub(crate) mod xattr;

pub use entry::{TarEntry, TarKind};
pub use error::{Member, TarError, TarErrorKind};
pub use reader::{DataReader, Reader};
pub use warning::{Severity, TarWarning};

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

/// Largest pax extended header (`x` or `g`) body accepted, in bytes: real archives
/// carry headers of several MiB (one seen has 8 MB of xattrs), and one is held in
/// memory at most three times over (the body, its records, the entry's copy), so
/// reading one costs at most about 48 MiB.
pub const MAX_PAX_HEADER: u64 = 16 << 20;

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
