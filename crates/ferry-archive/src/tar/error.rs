//! The tar reader's error: what went wrong and at which offset of the stream.

use std::fmt;

/// A tar stream could not be read: `kind` says why, `offset` where, and `member`
/// which member it concerns.
///
/// Displays as one line, e.g. `archive offset 1536, after member d/f: bad header
/// checksum`.
#[derive(Debug, thiserror::Error)]
#[error("archive offset {offset}{}: {kind}", Around(.member))]
pub struct TarError {
    /// Absolute offset in the stream (from its first byte) of the header, record or
    /// byte at fault; for an unexpected end, the offset where the stream ended.
    pub offset: u64,
    /// What went wrong.
    pub kind: TarErrorKind,
    /// The member the error concerns, where the reader knows it (errors in a header:
    /// see [`Member`]); None for an error in a member's data (the caller names the
    /// member it was reading) or before the first member.
    pub member: Option<Member>,
}

/// Which member an error in the headers concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Member {
    /// The name the header at fault gives.
    In(Vec<u8>),
    /// The header at fault gives no usable name: the last member read before it.
    After(Vec<u8>),
}

/// Shows the member of an error, if known, after its offset.
struct Around<'a>(&'a Option<Member>);

impl fmt::Display for Around<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => Ok(()),
            Some(Member::In(name)) => write!(f, ", member {}", escaped(name)),
            Some(Member::After(name)) => write!(f, ", after member {}", escaped(name)),
        }
    }
}

impl TarError {
    /// An error of `kind` at `offset`.
    pub fn new(offset: u64, kind: TarErrorKind) -> Self {
        TarError {
            offset,
            kind,
            member: None,
        }
    }

    /// The error, saying which member it concerns.
    pub(crate) fn about(mut self, member: Option<Member>) -> Self {
        if self.member.is_none() {
            self.member = member;
        }
        self
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
    /// A numeric header field holds something other than an octal or base-256 number
    /// (as GNU tar reads them), or a value out of range for it: the field's name and its
    /// bytes, escaped.
    #[error("invalid numeric field '{0}' in header: \"{1}\"")]
    BadNumber(&'static str, String),
    /// A pax extended header is malformed.
    #[error("malformed pax header: {0}")]
    BadPax(&'static str),
    /// A pax record has a value that is invalid for its key: the key and the value,
    /// escaped.
    #[error("invalid value for pax key '{}': \"{}\"", escaped(.0), escaped(.1))]
    BadPaxValue(Vec<u8>, Vec<u8>),
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

/// Bytes of a value shown in a message at most (a pax value may be megabytes).
const SHOWN: usize = 64;

impl TarErrorKind {
    /// A numeric header field `field` holding `bytes`.
    pub(crate) fn bad_number(field: &'static str, bytes: &[u8]) -> Self {
        let end = bytes.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
        TarErrorKind::BadNumber(field, escaped(bytes.get(..end).unwrap_or_default()))
    }

    /// A pax record `key` whose `value` is invalid for it (the value cut short for the
    /// message).
    pub(crate) fn bad_pax_value(key: &[u8], value: &[u8]) -> Self {
        let mut shown = value.get(..SHOWN).unwrap_or(value).to_vec();
        if value.len() > SHOWN {
            shown.extend_from_slice(b"...");
        }
        TarErrorKind::BadPaxValue(key.to_vec(), shown)
    }
}

/// Shows a type flag as a character when printable, else as a number.
pub(crate) struct TypeFlag(pub(crate) u8);

impl fmt::Display for TypeFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_ascii_graphic() {
            write!(f, "'{}'", char::from(self.0))
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// Bytes of a name or field value for a message: what is not printable UTF-8 escaped.
pub(crate) fn escaped(bytes: &[u8]) -> String {
    ferry_core::entry::escaped(bytes)
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
