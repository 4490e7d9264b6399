//! The tree table: the tree an archive extracts to, laid out so that a reader can look
//! a path up, list a directory or find a file's data with a few small reads, without
//! loading the table (what `ferry mount` serves from).
//!
//! An archive lists members in archive order; a mounted filesystem needs the opposite
//! view: for a directory, its children by name. The table is that view, resolved the
//! way an extraction would resolve it (the last member of a name wins, hardlinks share
//! one node, directories a member needs but the archive never names are made), and
//! written once, at pack time into a ferry archive's index or by `ferry index` into a
//! cache file for any other tar.
//!
//! Layout (all integers little-endian):
//!
//! ```text
//! nodes    node count x 112 bytes; node 0 is the root. Numbered in the order the
//!          archive makes them (a directory it needs but does not name, just before
//!          the member that needs it), so a directory's members are mostly a run.
//! dirents  dirent count x 16 bytes: each directory's entries together, sorted by
//!          name (bytewise), so a lookup is a binary search.
//! heap     names, symlink targets and each node's extras (sparse runs, xattrs).
//! sums     (version 2) a u64 xxh3-64 of each 64 KiB page of nodes, dirents and heap
//!          together (the last page as long as what is left).
//! trailer  64 bytes: "FERRYTRE" u32 version u32 node size, u64 node count,
//!          u64 dirent count, u64 heap length, u64 data end, u64 xxh3-64 of the sums
//!          (version 1: of all the bytes before the trailer), u64 xxh3-64 of the
//!          trailer's first 56 bytes.
//! ```
//!
//! The page sums let a reader check only what it reads: one lookup (`ferry cat`)
//! reads the trailer, the sums and the few pages its path goes through, each checked
//! before it is used, instead of reading the whole table. Version 1 (no sums) is
//! still read, checked whole.
//!
//! A node (112 bytes): u8 kind (the index's codes: 0 file, 1 dir, 2 symlink, 4 fifo,
//! 5 char device, 6 block device), u8 flags (1: has a content hash; 2: a directory the
//! archive needs but never names), u16 name length,
//! u32 mode, u32 uid, u32 gid, i64 mtime seconds, u32 mtime nanoseconds, u32 atime
//! nanoseconds, i64 atime seconds, u64 size, u64 `a`, u64 `b`, u32 parent node,
//! u32 link count, u64 name offset (in the heap: the name under which it was first
//! reached), u64 extras offset, u32 extras length, u32 head (version 2, a file: how
//! many bytes of tar headers its member has before its data, so its headers start at
//! `a` minus that; 0 otherwise), u128 xxh3-128 content hash. `a` and `b` are, for a file, where its stored data starts in the (uncompressed)
//! archive and how many bytes are stored; for a directory, its first dirent and how many;
//! for a symlink, where its target is in the heap and its length; for a device, its
//! device number (in `a`).
//!
//! A dirent (16 bytes): u64 name offset in the heap, u16 name length, u8 kind, u8 zero,
//! u32 node.
//!
//! Extras: u32 run count, then u64 offset and u64 length per run (a sparse file's data
//! runs, stored one after another; none for a file stored whole), u32 xattr count, then
//! u16 name length, name, u32 value length, value per xattr; then, where the archive
//! names the owner, u16 length and the user name, u16 length and the group name (empty
//! where it gives none; tables written before have no names and are read without). The
//! node keeps the archive's numeric owner (what its tar header says, as
//! [`check`] holds it to); what the tree shows is decided from both by [`shown`].
//!
//! Nothing in a table is trusted: [`read::Table`] checks its trailer and, when asked, the
//! checksum of the body when it is opened, and every node, range and name when it is
//! used, so a damaged table is an error naming what is wrong, never a panic or a read
//! outside it.

pub mod build;
pub mod check;
mod extras;
pub(crate) mod lean;
mod nodes;
pub mod read;
pub mod shown;

pub use build::{entry_of_tar, entry_of_tar_here, DirDefaults, Skipped, TreeBuilder};
pub use check::{check_against_tar, check_against_tar_reporting};
pub use read::{Dirent, Node, NodeKind, Table, TableFile, TreeError};
pub use shown::{mode_here, Here, Shown};

/// Magic bytes that open the trailer.
pub const TREE_MAGIC: &[u8; 8] = b"FERRYTRE";
/// The table version written (with page sums); version 1 (without) is read too.
pub const TREE_VERSION: u32 = 2;
/// Bytes of body each page sum covers (version 2).
pub const PAGE_LEN: u64 = 64 << 10;
/// Size of one node record.
pub const NODE_LEN: u64 = 112;
/// Size of one dirent record.
pub const DIRENT_LEN: u64 = 16;
/// Size of the trailer at the end of a table.
pub const TRAILER_LEN: u64 = 64;
/// The most nodes a table holds: node numbers are u32, and the mount adds one.
pub const MAX_NODES: u64 = u32::MAX as u64 - 1;
/// Flag: the node records a content hash.
const FLAG_HASH: u8 = 1;
/// Flag: a directory the archive needs but never names (made as an extraction makes
/// it; see [`shown`]). Readers from before it ignore it.
const FLAG_MADE: u8 = 2;

/// The trailer of a table: what its body holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trailer {
    /// The table's version: 1 without page sums, 2 with.
    pub version: u32,
    /// Number of nodes.
    pub nodes: u64,
    /// Number of dirents.
    pub dirents: u64,
    /// Bytes of heap.
    pub heap: u64,
    /// No file's stored data reaches past this offset of the (uncompressed) archive.
    pub data_end: u64,
    /// Version 2: xxh3-64 of the page sums; version 1: of the whole body.
    pub body_hash: u64,
}

impl Trailer {
    /// Bytes of nodes, dirents and heap.
    pub fn records_len(&self) -> Option<u64> {
        self.nodes
            .checked_mul(NODE_LEN)?
            .checked_add(self.dirents.checked_mul(DIRENT_LEN)?)?
            .checked_add(self.heap)
    }

    /// How many page sums follow the heap (none in version 1).
    pub fn pages(&self) -> Option<u64> {
        match self.version {
            1 => Some(0),
            _ => Some(self.records_len()?.div_ceil(PAGE_LEN)),
        }
    }

    /// Bytes of body before the trailer: the records, then the page sums.
    pub fn body_len(&self) -> Option<u64> {
        self.records_len()?
            .checked_add(self.pages()?.checked_mul(8)?)
    }

    /// The trailer's 64 bytes.
    pub fn encode(&self) -> [u8; TRAILER_LEN as usize] {
        let mut out = [0u8; TRAILER_LEN as usize];
        out[..8].copy_from_slice(TREE_MAGIC);
        out[8..12].copy_from_slice(&self.version.to_le_bytes());
        out[12..16].copy_from_slice(&(NODE_LEN as u32).to_le_bytes());
        let words = [
            self.nodes,
            self.dirents,
            self.heap,
            self.data_end,
            self.body_hash,
        ];
        for (i, w) in words.iter().enumerate() {
            out[16 + 8 * i..24 + 8 * i].copy_from_slice(&w.to_le_bytes());
        }
        let own = xxhash_rust::xxh3::xxh3_64(&out[..56]);
        out[56..].copy_from_slice(&own.to_le_bytes());
        out
    }

    /// Reads a trailer, checking its magic, version, node size, checksum and counts.
    pub fn decode(b: &[u8]) -> Result<Trailer, TreeError> {
        let b: &[u8; TRAILER_LEN as usize] = b
            .try_into()
            .map_err(|_| TreeError::new("tree table trailer: truncated"))?;
        if &b[..8] != TREE_MAGIC {
            return Err(TreeError::new("tree table trailer: no FERRYTRE magic"));
        }
        let word =
            |i: usize| u64::from_le_bytes(b[16 + 8 * i..24 + 8 * i].try_into().unwrap_or_default());
        if u64::from_le_bytes(b[56..].try_into().unwrap_or_default())
            != xxhash_rust::xxh3::xxh3_64(&b[..56])
        {
            return Err(TreeError::new("tree table trailer: checksum mismatch"));
        }
        let version = u32::from_le_bytes(b[8..12].try_into().unwrap_or_default());
        if version != 1 && version != TREE_VERSION {
            return Err(TreeError::new(format!(
                "tree table: unknown version {version}"
            )));
        }
        if u32::from_le_bytes(b[12..16].try_into().unwrap_or_default()) as u64 != NODE_LEN {
            return Err(TreeError::new("tree table: unknown node size"));
        }
        let t = Trailer {
            version,
            nodes: word(0),
            dirents: word(1),
            heap: word(2),
            data_end: word(3),
            body_hash: word(4),
        };
        if t.nodes == 0 || t.nodes > MAX_NODES {
            return Err(TreeError::new("tree table: node count out of range"));
        }
        t.body_len()
            .ok_or_else(|| TreeError::new("tree table: sizes overflow"))?;
        Ok(t)
    }
}

#[cfg(test)]
mod tests;
