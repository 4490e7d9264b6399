//! The crate's one error type: an I/O error, or input (a signature or ops read from the
//! network) that breaks a rule of the format, each told in one line.

use std::io;

/// What went wrong making, reading or applying a delta.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// A signature that does not start with the format's magic bytes.
    #[error("delta signature: not a ferry signature (bad magic)")]
    BadMagic,
    /// Input that ends in the middle of a field.
    #[error("delta {0}: truncated")]
    Truncated(&'static str),
    /// A number longer than 64 bits.
    #[error("delta {0}: a number is longer than 64 bits")]
    Varint(&'static str),
    /// A block size that is zero, not a multiple of 4096, or too large.
    #[error("delta signature: block size {0} is not a multiple of 4096 in 4096..=1048576")]
    BlockSize(u64),
    /// A basis so large its signature would hold more blocks than allowed.
    #[error(
        "delta signature: a {size}-byte basis in {block}-byte blocks has more than {max} blocks"
    )]
    TooManyBlocks {
        /// The basis size claimed.
        size: u64,
        /// The block size.
        block: u64,
        /// The most blocks a signature may hold.
        max: u64,
    },
    /// A signature whose block sums are more or fewer than its basis size implies.
    #[error("delta signature: {got} bytes of block sums where {want} were expected")]
    SumsLength {
        /// Bytes the basis size and block size imply.
        want: u64,
        /// Bytes present.
        got: u64,
    },
    /// An op whose tag is not one the format knows.
    #[error("delta op: unknown tag {0:#04x}")]
    UnknownOp(u8),
    /// A copy or literal of no bytes.
    #[error("delta op: empty {0}")]
    EmptyOp(&'static str),
    /// A literal longer than [`crate::MAX_LITERAL`].
    #[error("delta op: literal of {0} bytes is longer than the 1048576 allowed")]
    LiteralTooLong(u64),
    /// A copy whose range does not fit in 64 bits.
    #[error("delta op: copy of {len} bytes at {offset} overflows")]
    Overflow {
        /// Its basis offset.
        offset: u64,
        /// Its length.
        len: u64,
    },
    /// A copy of bytes the basis does not have.
    #[error("delta op: copy of {len} bytes at {offset} lies outside the {basis}-byte basis")]
    OutsideBasis {
        /// Its basis offset.
        offset: u64,
        /// Its length.
        len: u64,
        /// The basis size.
        basis: u64,
    },
    /// An op that would grow the output past its declared size.
    #[error("delta op: {len} bytes at {at} would grow the output past its declared {size} bytes")]
    PastSize {
        /// Where the op would write.
        at: u64,
        /// How much it would write.
        len: u64,
        /// The declared size.
        size: u64,
    },
    /// Ops that ended before the output reached its declared size.
    #[error("delta: the ops ended at {at} bytes, short of the declared {size}")]
    Short {
        /// Bytes the ops gave.
        at: u64,
        /// The declared size.
        size: u64,
    },
}

/// The crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
