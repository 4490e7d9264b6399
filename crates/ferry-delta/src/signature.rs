//! A basis's signature: its block size, its size, and per block a weak rolling checksum
//! and a strong hash; made by reading the basis once, and its wire form.
//!
//! Wire form: the magic `FDS1`, the basis size and the block size as LEB128 numbers,
//! then for each block (their count follows from the two sizes, the last block may be
//! short) the weak checksum as a little-endian `u32` and the strong hash (xxh3-64) as a
//! little-endian `u64`. Decoding checks the magic, the block size, the block count
//! against [`MAX_BLOCKS`](crate::MAX_BLOCKS) and that exactly that many sums follow, so
//! what it allocates is bounded by the bytes it was given.

use crate::block::{block_count, check_block};
use crate::error::{Error, Result};
use crate::rolling::weak;
use crate::varint;
use ferry_core::data::read_up_to;
use std::io;
use std::os::fd::AsFd;

/// The first bytes of an encoded signature.
pub const MAGIC: &[u8; 4] = b"FDS1";

/// Bytes one block's sums take on the wire.
pub const SUM_LEN: usize = 12;

/// Bytes of basis read at a time while making a signature.
const READ: usize = 4 << 20;

/// One block's checksums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockSum {
    /// The rolling weak checksum.
    pub weak: u32,
    /// The strong hash ([`strong`]).
    pub strong: u64,
}

/// The signature of a basis file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    basis_size: u64,
    block: u32,
    sums: Vec<BlockSum>,
}

/// The strong hash of a block: xxh3-64.
pub fn strong(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// Makes the signature of the first `size` bytes of `basis` in blocks of `block` bytes
/// (see [`block_size_for`](crate::block_size_for)). Fails if the block size is not one a
/// signature may have, if the basis has too many blocks, or if it ends before `size`.
pub fn signature(basis: impl AsFd, size: u64, block: u32) -> Result<Signature> {
    let basis = basis.as_fd();
    let block = check_block(u64::from(block))?;
    let count = block_count(size, block)?;
    let mut sums = Vec::with_capacity(count);
    let chunk = (READ / block as usize).max(1) * block as usize;
    let mut buf = vec![0u8; chunk.min(size.try_into().unwrap_or(usize::MAX))];
    let mut at = 0u64;
    while at < size {
        let want = (size - at).min(buf.len() as u64) as usize;
        let got = read_up_to(basis, &mut buf[..want], at)?;
        if got < want {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "the basis ended at {} bytes, before its size {size}",
                    at + got as u64
                ),
            )
            .into());
        }
        sums.extend(buf[..want].chunks(block as usize).map(|b| BlockSum {
            weak: weak(b),
            strong: strong(b),
        }));
        at += want as u64;
    }
    Ok(Signature {
        basis_size: size,
        block,
        sums,
    })
}

impl Signature {
    /// The block size.
    pub fn block_size(&self) -> u32 {
        self.block
    }

    /// The size of the basis it describes.
    pub fn basis_size(&self) -> u64 {
        self.basis_size
    }

    /// Its blocks' sums, in basis order.
    pub fn sums(&self) -> &[BlockSum] {
        &self.sums
    }

    /// The length of block `i` (the last may be short; 0 past the last).
    pub fn block_len(&self, i: usize) -> u64 {
        let start = self.block_offset(i);
        self.basis_size
            .saturating_sub(start)
            .min(u64::from(self.block))
    }

    /// The basis offset of block `i`.
    pub fn block_offset(&self, i: usize) -> u64 {
        (i as u64).saturating_mul(u64::from(self.block))
    }

    /// The bytes [`encode_into`](Self::encode_into) appends.
    pub fn encoded_len(&self) -> usize {
        let mut head = Vec::with_capacity(24);
        self.encode_head(&mut head);
        head.len() + self.sums.len() * SUM_LEN
    }

    /// The wire form.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut out);
        out
    }

    /// Appends the wire form to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        self.encode_head(out);
        for s in &self.sums {
            out.extend_from_slice(&s.weak.to_le_bytes());
            out.extend_from_slice(&s.strong.to_le_bytes());
        }
    }

    fn encode_head(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(MAGIC);
        varint::put(out, self.basis_size);
        varint::put(out, u64::from(self.block));
    }

    /// Reads a signature from its whole wire form (untrusted: every field is checked).
    pub fn decode(bytes: &[u8]) -> Result<Signature> {
        const WHAT: &str = "signature";
        let rest = bytes
            .strip_prefix(MAGIC)
            .ok_or(if bytes.len() < MAGIC.len() {
                Error::Truncated(WHAT)
            } else {
                Error::BadMagic
            })?;
        let (basis_size, n) = varint::get(rest, WHAT)?.ok_or(Error::Truncated(WHAT))?;
        let rest = &rest[n..];
        let (block, n) = varint::get(rest, WHAT)?.ok_or(Error::Truncated(WHAT))?;
        let rest = &rest[n..];
        let block = check_block(block)?;
        let count = block_count(basis_size, block)?;
        let want = count as u64 * SUM_LEN as u64;
        if rest.len() as u64 != want {
            return Err(Error::SumsLength {
                want,
                got: rest.len() as u64,
            });
        }
        let sums = rest
            .chunks_exact(SUM_LEN)
            .map(|c| {
                let (w, s) = c.split_at(4);
                BlockSum {
                    weak: u32::from_le_bytes(w.try_into().unwrap_or_default()),
                    strong: u64::from_le_bytes(s.try_into().unwrap_or_default()),
                }
            })
            .collect();
        Ok(Signature {
            basis_size,
            block,
            sums,
        })
    }
}
