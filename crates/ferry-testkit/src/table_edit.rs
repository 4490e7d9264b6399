//! Editing the tree table a ferry archive carries, as an attacker would: change node
//! records, then make every checksum over them match again (the table's page sums and
//! trailer, the index's checksum in the footer), so what is tested is what a reader
//! does with a table that is well formed but lies.
//!
//! Offsets follow docs/format.md (the footer) and `ferry_archive::tree` (the table).

use xxhash_rust::xxh3::xxh3_64;

/// Bytes of a node record, a trailer, the footer; bytes one page sum covers.
const NODE_LEN: usize = 112;
const TRAILER_LEN: usize = 64;
const FOOTER_LEN: usize = 64;
const PAGE_LEN: usize = 64 << 10;

/// A ferry archive held in memory, its table located.
pub struct TableEdit {
    /// The whole archive.
    pub bytes: Vec<u8>,
    index_at: usize,
    index_len: usize,
    table_at: usize,
    nodes: usize,
    records_len: usize,
}

/// A node record's fields, as the table lays them out.
pub mod field {
    /// u8 kind (0 file, 1 dir, 2 symlink ...).
    pub const KIND: usize = 0;
    /// u8 flags (1: a content hash is recorded).
    pub const FLAGS: usize = 1;
    /// u64 logical size.
    pub const SIZE: usize = 40;
    /// u64 `a`: a file's first byte of data in the tar.
    pub const A: usize = 48;
    /// u64 `b`: a file's stored bytes.
    pub const B: usize = 56;
    /// u32 parent node.
    pub const PARENT: usize = 64;
    /// u32 bytes of tar headers before a file's data.
    pub const HEAD: usize = 92;
    /// u128 content hash.
    pub const HASH: usize = 96;
}

fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl TableEdit {
    /// The archive `bytes`, which must be a ferry archive with a version 2 table.
    pub fn new(bytes: Vec<u8>) -> TableEdit {
        let f = bytes.len() - FOOTER_LEN;
        assert_eq!(&bytes[f..f + 8], b"FERRYEND", "not a ferry archive");
        let (index_at, index_len) = (word(&bytes, f + 8) as usize, word(&bytes, f + 16) as usize);
        let t = index_at + index_len - TRAILER_LEN;
        assert_eq!(&bytes[t..t + 8], b"FERRYTRE", "no tree table");
        let (nodes, dirents, heap) = (
            word(&bytes, t + 16) as usize,
            word(&bytes, t + 24) as usize,
            word(&bytes, t + 32) as usize,
        );
        let records_len = nodes * NODE_LEN + dirents * 16 + heap;
        let body = records_len + records_len.div_ceil(PAGE_LEN) * 8;
        TableEdit {
            table_at: t - body,
            bytes,
            index_at,
            index_len,
            nodes,
            records_len,
        }
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// Node `id`'s 112-byte record.
    pub fn node(&mut self, id: usize) -> &mut [u8] {
        assert!(id < self.nodes, "node {id} of {}", self.nodes);
        let at = self.table_at + id * NODE_LEN;
        &mut self.bytes[at..at + NODE_LEN]
    }

    /// The table's records (nodes, dirents, heap), to be changed at will.
    pub fn records(&mut self) -> &mut [u8] {
        &mut self.bytes[self.table_at..self.table_at + self.records_len]
    }

    /// Reads a u64 field of node `id`.
    pub fn get(&mut self, id: usize, field: usize) -> u64 {
        word(self.node(id), field)
    }

    /// Sets a u64 field of node `id`.
    pub fn set(&mut self, id: usize, field: usize, value: u64) {
        self.node(id)[field..field + 8].copy_from_slice(&value.to_le_bytes());
    }

    /// Sets a u32 field of node `id`.
    pub fn set32(&mut self, id: usize, field: usize, value: u32) {
        self.node(id)[field..field + 4].copy_from_slice(&value.to_le_bytes());
    }

    /// The id of the first file node whose heap name is `name` (names are looked up
    /// by the name offset and length the record holds).
    pub fn find(&mut self, name: &[u8]) -> Option<usize> {
        let heap_at = self.records_len - self.heap_len();
        (0..self.nodes).find(|&id| {
            let rec = self.node(id).to_vec();
            let len = u16::from_le_bytes([rec[2], rec[3]]) as usize;
            let off = word(&rec, 72) as usize;
            let at = self.table_at + heap_at + off;
            self.bytes.get(at..at + len) == Some(name)
        })
    }

    fn heap_len(&self) -> usize {
        let t = self.index_at + self.index_len - TRAILER_LEN;
        word(&self.bytes, t + 32) as usize
    }

    /// The archive with every checksum made to match its records again.
    pub fn sealed(mut self) -> Vec<u8> {
        let sums_at = self.table_at + self.records_len;
        let pages = self.records_len.div_ceil(PAGE_LEN);
        for p in 0..pages {
            let from = self.table_at + p * PAGE_LEN;
            let to = (from + PAGE_LEN).min(sums_at);
            let sum = xxh3_64(&self.bytes[from..to]);
            self.bytes[sums_at + 8 * p..sums_at + 8 * p + 8].copy_from_slice(&sum.to_le_bytes());
        }
        let t = sums_at + pages * 8;
        let body_hash = xxh3_64(&self.bytes[sums_at..t]);
        self.bytes[t + 48..t + 56].copy_from_slice(&body_hash.to_le_bytes());
        let own = xxh3_64(&self.bytes[t..t + 56]);
        self.bytes[t + 56..t + 64].copy_from_slice(&own.to_le_bytes());
        let index = xxh3_64(&self.bytes[self.index_at..self.index_at + self.index_len]);
        let f = self.bytes.len() - FOOTER_LEN;
        self.bytes[f + 40..f + 48].copy_from_slice(&index.to_le_bytes());
        let own = xxh3_64(&self.bytes[f..f + 56]);
        self.bytes[f + 56..].copy_from_slice(&own.to_le_bytes());
        self.bytes
    }
}
