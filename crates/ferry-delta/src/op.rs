//! The ops a delta is made of and their wire form.
//!
//! - `C` (0x43), basis offset, length (LEB128 numbers): copy that many basis bytes.
//! - `L` (0x4c), length (LEB128, 1..=[`MAX_LITERAL`]), then that many bytes: new data.
//!
//! Ops say nothing of where their bytes go: each continues the output where the one
//! before it ended. Framing (where the ops of one file end) is the caller's.

use crate::error::{Error, Result};
use crate::varint;

/// The longest literal an op carries (the scan emits at most this much at once).
pub const MAX_LITERAL: usize = 1 << 20;

const COPY: u8 = b'C';
const LITERAL: u8 = b'L';
const WHAT: &str = "op";

/// One step of rebuilding the new file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op<'a> {
    /// `len` bytes of the basis from `basis_offset`.
    Copy {
        /// Where they start in the basis.
        basis_offset: u64,
        /// How many.
        len: u64,
    },
    /// New bytes.
    Literal(&'a [u8]),
}

impl<'a> Op<'a> {
    /// The bytes of output the op gives.
    pub fn len(&self) -> u64 {
        match self {
            Op::Copy { len, .. } => *len,
            Op::Literal(b) => b.len() as u64,
        }
    }

    /// Whether the op gives no output (never so for a decoded op).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the wire form to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Op::Copy { basis_offset, len } => {
                out.push(COPY);
                varint::put(out, *basis_offset);
                varint::put(out, *len);
            }
            Op::Literal(bytes) => {
                out.push(LITERAL);
                varint::put(out, bytes.len() as u64);
                out.extend_from_slice(bytes);
            }
        }
    }

    /// Reads the op at the start of `buf` (untrusted): `Ok(None)` if `buf` ends inside
    /// it, else the op and the bytes it took. Refuses unknown tags, empty ops, literals
    /// over [`MAX_LITERAL`] and copies whose end overflows.
    pub fn decode(buf: &'a [u8]) -> Result<Option<(Op<'a>, usize)>> {
        let Some((&tag, rest)) = buf.split_first() else {
            return Ok(None);
        };
        match tag {
            COPY => {
                let Some((basis_offset, n1)) = varint::get(rest, WHAT)? else {
                    return Ok(None);
                };
                let Some((len, n2)) = varint::get(&rest[n1..], WHAT)? else {
                    return Ok(None);
                };
                if len == 0 {
                    return Err(Error::EmptyOp("copy"));
                }
                if basis_offset.checked_add(len).is_none() {
                    return Err(Error::Overflow {
                        offset: basis_offset,
                        len,
                    });
                }
                Ok(Some((Op::Copy { basis_offset, len }, 1 + n1 + n2)))
            }
            LITERAL => {
                let Some((len, n)) = varint::get(rest, WHAT)? else {
                    return Ok(None);
                };
                if len == 0 {
                    return Err(Error::EmptyOp("literal"));
                }
                if len > MAX_LITERAL as u64 {
                    return Err(Error::LiteralTooLong(len));
                }
                let start = 1 + n;
                let end = start + len as usize;
                Ok(buf.get(start..end).map(|b| (Op::Literal(b), end)))
            }
            other => Err(Error::UnknownOp(other)),
        }
    }
}
