//! The tar reader's error: what went wrong and at which offset of the stream.

use std::fmt;

/// A tar stream could not be read: `kind` says why, `offset` where.
///
/// Displays as one line, e.g. `archive offset 1536: bad header checksum`.
#[derive(Debug, thiserror::Error)]
#[error("archive offset {offset}: {kind}")]
pub struct TarError {
    /// Absolute offset in the stream (from its first byte) of the header, record or
    /// byte at fault; for an unexpected end, the offset where the stream ended.
    pub offset: u64,
    /// What went wrong.
    pub kind: TarErrorKind,
}

impl TarError {
    /// An error of `kind` at `offset`.
    pub fn new(offset: u64, kind: TarErrorKind) -> Self {
        TarError { offset, kind }
    }

    /// The I/O error underneath, if the stream itself failed.
    pub fn io_error(&self) -> Option<&std::io::Error> {
        match &self.kind {
            TarErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// Why a tar stream could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TarErrorKind {
    /// Reading the underlying stream failed.
    #[error("read error: {0}")]
    Io(std::io::Error),
    /// The stream ended inside a header, an extension or an entry's data.
    #[error("unexpected end of archive")]
    UnexpectedEof,
    /// A header's checksum matches neither the unsigned nor the signed sum.
    #[error("bad header checksum")]
    BadChecksum,
    /// A numeric header field holds something other than an octal or base-256 number,
    /// or a value out of range for it.
    #[error("invalid numeric field '{0}' in header")]
    BadNumber(&'static str),
    /// A type flag this reader does not extract.
    #[error("unsupported entry type {}", TypeFlag(*.0))]
    UnsupportedType(u8),
    /// A pax extended header is malformed.
    #[error("malformed pax header: {0}")]
    BadPax(&'static str),
    /// A pax record has a value that is invalid for its key.
    #[error("invalid value for pax key '{}'", String::from_utf8_lossy(.0))]
    BadPaxValue(Vec<u8>),
    /// An extension (pax header, long name) is larger than the reader accepts.
    #[error("{what} of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// What is too large.
        what: &'static str,
        /// Its declared size.
        size: u64,
        /// The largest size accepted.
        limit: u64,
    },
    /// A sparse map is malformed or inconsistent with the entry.
    #[error("bad sparse map: {0}")]
    BadSparse(&'static str),
    /// The headers are well formed but do not describe a valid entry or archive.
    #[error("{0}")]
    Invalid(&'static str),
    /// An earlier call returned an error; the stream position is no longer known.
    #[error("reader stopped after an earlier error")]
    Stopped,
}

/// Shows a type flag as a character when printable, else as a number.
struct TypeFlag(u8);

impl fmt::Display for TypeFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_ascii_graphic() {
            write!(f, "'{}'", char::from(self.0))
        } else {
            write!(f, "{}", self.0)
        }
    }
}

impl From<TarError> for std::io::Error {
    fn from(e: TarError) -> Self {
        let kind = match e.kind {
            TarErrorKind::Io(ref io) => io.kind(),
            TarErrorKind::UnexpectedEof => std::io::ErrorKind::UnexpectedEof,
            _ => std::io::ErrorKind::InvalidData,
        };
        std::io::Error::new(kind, e)
    }
}
