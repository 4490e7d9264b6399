//! ferry-delta: send what changed in a big file, and rebuild it by sharing the blocks
//! that did not.
//!
//! The receiver has an old version of a file (the *basis*), the sender the new one.
//! The receiver sends a [`Signature`] of the basis; the sender scans the new file
//! against it ([`delta`]) and sends [`Op`]s, copies of basis ranges and literals of new
//! bytes; the receiver [`Apply`]s them into a new file and checks its content hash.
//!
//! ```
//! use ferry_delta::{block_size_for, delta, signature, Apply, Op, Signature};
//! use std::io::Write;
//! use std::os::fd::AsFd;
//!
//! let old: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
//! let mut new = old.clone();
//! new.splice(50_000..50_000, *b"inserted");
//! let (mut basis, mut newf) = (tempfile::tempfile()?, tempfile::tempfile()?);
//! basis.write_all(&old)?;
//! newf.write_all(&new)?;
//!
//! // Receiver: the basis's signature, sent over.
//! let wire = signature(&basis, old.len() as u64, block_size_for(old.len() as u64))?.encode();
//! // Sender: ops against it, sent back.
//! let mut ops = Vec::new();
//! let sent = delta(&newf, new.len() as u64, &Signature::decode(&wire)?, |op: Op<'_>| {
//!     op.encode(&mut ops);
//!     Ok::<_, std::io::Error>(())
//! })?;
//! assert!(sent.literal < 10_000);
//! // Receiver: the new file rebuilt, checked against the hash the sender sends.
//! let out = tempfile::tempfile()?;
//! let mut apply = Apply::new(basis.as_fd(), old.len() as u64, out.as_fd(), new.len() as u64);
//! assert_eq!(apply.push_encoded(&ops)?, ops.len());
//! apply.finish()?;
//! assert_eq!(ferry_delta::hash_range(&out, 0, new.len() as u64)?, sent.hash);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Choices
//!
//! - **rsync's matching.** Fixed-size blocks of the basis, each with rsync's rolling
//!   weak checksum and a strong hash (xxh3-64), so a block is found in the new file at
//!   any byte offset: data shifted by an insertion or a deletion still matches. The
//!   scan rolls the weak checksum byte by byte and tests it against a bit filter (32
//!   bits per block) before a hash table; only a weak hit costs a strong hash. After a
//!   match it first tries the next basis block at the next offset, which costs one
//!   strong hash per block and no rolling, so unchanged stretches go at hashing speed.
//!   The strong hash is 64 bits, not 128: a false match is already a 96-bit
//!   coincidence per probe, and the whole result is checked with the 128-bit content
//!   hash anyway (a mismatch there means sending the file whole).
//! - **Block size: about √size, a multiple of 4 KiB, 4 KiB to 1 MiB**
//!   ([`block_size_for`]). The signature costs 12 bytes per block and a changed region
//!   costs about one block of literal, so √size balances the two for a handful of
//!   changes. A 256 MiB file with 64 scattered changed 4 KiB blocks (the test
//!   `cost.rs`) gets 16 KiB blocks and costs 1,246,005 bytes of signature and delta
//!   (rsync: about 1.2 MB); 8 KiB blocks would cost 918,260, 4 KiB 1,049,332, 32 KiB
//!   2,196,276. The 4 KiB multiple is what makes cloning possible: a block matched at
//!   an aligned offset starts and ends on filesystem block boundaries on both sides.
//! - **Clone, don't copy.** On XFS and btrfs the rebuild clones each copy
//!   (FICLONERANGE) when offsets and length are block-aligned (or the copy runs to the
//!   end of both files), so unchanged blocks are shared with the basis rather than
//!   written again; elsewhere `copy_file_range`, then read and write. Copies of
//!   consecutive blocks are merged into one op so a long unchanged stretch is one
//!   clone call. (The output must be a new file, not the basis itself.)
//! - **Hostile input.** Signatures and ops come from the network. Decoding checks every
//!   field and never sizes an allocation from a count it was sent: a signature's block
//!   count follows from its sizes and must match the bytes actually present, a literal
//!   is at most [`MAX_LITERAL`] bytes and borrows the input. [`Apply`] refuses copies
//!   outside the basis, offsets that overflow and output past the declared size.
//! - **No framing.** Ops continue the output in order; where one file's ops end is
//!   the protocol's business, as is the hash check ([`hash_range`] of the output
//!   against [`DeltaStats::hash`], which the scan computes from the bytes it reads).
#![deny(missing_docs)]

mod apply;
mod block;
mod delta;
mod error;
mod op;
mod rolling;
mod signature;
mod table;
mod varint;

pub use apply::{Applied, Apply};
pub use block::{block_size_for, ALIGN, MAX_BLOCK, MAX_BLOCKS, MIN_BLOCK};
pub use delta::{delta, DeltaStats};
pub use error::{Error, Result};
/// The content hash of a file's range, as ferry computes it everywhere (xxh3-128 of the
/// content for all but very sparse files): check a rebuilt file with it.
pub use ferry_core::data::hash_range;
pub use ferry_core::data::Reflink;
pub use op::{Op, MAX_LITERAL};
pub use signature::{signature, strong, BlockSum, Signature, MAGIC, SUM_LEN};
