//! The tree the image shows, walked from the table's root: every node reached through
//! directory entries, in the order first reached (so a directory's entries get
//! neighbouring inodes), with the link counts the walk finds.
//!
//! The table is not trusted to be a tree: a directory reached twice (which would make
//! a loop, or a directory with two parents), an entry name the kernel cannot hold, or
//! entries out of order are errors naming the directory. Nodes no entry reaches are
//! not shown.

use crate::ErofsError;
use ferry_archive::tree::{Node, NodeKind, Table};
use ferry_core::entry::escaped;

/// The longest name a directory entry may have.
const NAME_MAX: usize = crate::format::NAME_MAX;

/// Nodes read from the table at once.
const BATCH: u32 = 8192;

/// The walked tree.
pub struct Walked {
    /// Every node of the table, by id.
    pub nodes: Vec<Node>,
    /// The nodes shown, in the order first reached; the root first.
    pub order: Vec<u32>,
    /// Each node's place in `order` (`u32::MAX`: not shown).
    pub place: Vec<u32>,
    /// Each node's link count.
    pub nlink: Vec<u32>,
    /// Each directory's entries (name, node), sorted by name, by node id (empty for
    /// the rest).
    pub entries: Vec<Vec<(Vec<u8>, u32)>>,
    /// Each directory's parent (the root's is itself).
    pub parent: Vec<u32>,
}

/// Walks `table` from its root.
pub fn walk(table: &Table) -> Result<Walked, ErofsError> {
    let count = u32::try_from(table.len())
        .map_err(|_| ErofsError("the tree has more nodes than an image may hold".into()))?;
    let mut nodes = Vec::with_capacity(count as usize);
    let mut first = 0u32;
    while first < count {
        let n = BATCH.min(count - first);
        nodes.extend(table.nodes(first, n).map_err(damaged)?);
        first += n;
    }
    if nodes.first().map(|n| n.kind) != Some(NodeKind::Dir) {
        return Err(ErofsError("the tree's root is not a directory".into()));
    }
    let mut w = Walked {
        order: vec![0],
        place: vec![u32::MAX; nodes.len()],
        nlink: vec![0; nodes.len()],
        entries: vec![Vec::new(); nodes.len()],
        parent: vec![0; nodes.len()],
        nodes,
    };
    w.place[0] = 0;
    let mut at = 0usize;
    while at < w.order.len() {
        let id = w.order[at];
        at += 1;
        if w.nodes[id as usize].kind == NodeKind::Dir {
            w.enter(table, id)?;
        }
    }
    Ok(w)
}

impl Walked {
    /// Reads directory `id`'s entries, checks them, and queues what they reach.
    fn enter(&mut self, table: &Table, id: u32) -> Result<(), ErofsError> {
        let dir = &self.nodes[id as usize];
        let here = || escaped(&table.path_of(id));
        let listed = table
            .dirents(dir, 0, usize::try_from(dir.b).unwrap_or(usize::MAX))
            .map_err(damaged)?;
        let mut subdirs = 0u32;
        let mut entries = Vec::with_capacity(listed.len());
        for d in listed {
            if d.name.len() > NAME_MAX {
                return Err(ErofsError(format!(
                    "{}: an entry's name is longer than {NAME_MAX} bytes",
                    here()
                )));
            }
            if entries
                .last()
                .is_some_and(|(prev, _): &(Vec<u8>, u32)| *prev >= d.name)
            {
                return Err(ErofsError(format!(
                    "{}: damaged tree: entries out of order",
                    here()
                )));
            }
            let child = d.node as usize;
            let seen = self.place[child] != u32::MAX;
            if self.nodes[child].kind == NodeKind::Dir {
                if seen {
                    return Err(ErofsError(format!(
                        "{}/{}: damaged tree: a directory reached twice",
                        here(),
                        escaped(&d.name)
                    )));
                }
                subdirs += 1;
                self.parent[child] = id;
            }
            if !seen {
                self.place[child] = self.order.len() as u32;
                self.order.push(d.node);
            }
            self.nlink[child] = self.nlink[child].saturating_add(1);
            entries.push((d.name, d.node));
        }
        self.nlink[id as usize] = subdirs.saturating_add(2);
        self.entries[id as usize] = entries;
        Ok(())
    }
}

fn damaged(e: ferry_archive::tree::TreeError) -> ErofsError {
    ErofsError(format!("the archive's tree: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_archive::tree::{Trailer, TRAILER_LEN};
    use std::io::Write;

    /// A table of `nodes` (kind code, `a`, `b`, size) and `dirents` (name, kind code,
    /// node), names in the heap, with valid checksums: what a crafted archive may carry.
    fn table(nodes: &[(u8, u64, u64, u64)], dirents: &[(&[u8], u8, u32)]) -> Table {
        let mut heap = Vec::new();
        let mut body = Vec::new();
        for &(kind, a, b, size) in nodes {
            let mut n = [0u8; 112];
            n[0] = kind;
            n[4..8].copy_from_slice(&0o755u32.to_le_bytes());
            n[40..48].copy_from_slice(&size.to_le_bytes());
            n[48..56].copy_from_slice(&a.to_le_bytes());
            n[56..64].copy_from_slice(&b.to_le_bytes());
            n[68..72].copy_from_slice(&1u32.to_le_bytes());
            body.extend_from_slice(&n);
        }
        for &(name, kind, node) in dirents {
            let mut d = [0u8; 16];
            d[..8].copy_from_slice(&(heap.len() as u64).to_le_bytes());
            d[8..10].copy_from_slice(&(name.len() as u16).to_le_bytes());
            d[10] = kind;
            d[12..16].copy_from_slice(&node.to_le_bytes());
            heap.extend_from_slice(name);
            body.extend_from_slice(&d);
        }
        body.extend_from_slice(&heap);
        let trailer = Trailer {
            version: 1,
            nodes: nodes.len() as u64,
            dirents: dirents.len() as u64,
            heap: heap.len() as u64,
            data_end: 1 << 20,
            body_hash: xxhash_rust::xxh3::xxh3_64(&body),
        };
        let mut f = tempfile::tempfile().expect("temp");
        f.write_all(&body)
            .and_then(|()| f.write_all(&trailer.encode()))
            .expect("write");
        Table::open(f, 0, body.len() as u64 + TRAILER_LEN, true).expect("a well-formed table")
    }

    #[test]
    fn a_tree_is_walked_with_the_link_counts_it_has() {
        // / holds a (dir) and f, g (one file under two names); a holds nothing.
        let t = table(
            &[(1, 0, 3, 0), (1, 3, 0, 0), (0, 0, 5, 5)],
            &[(b"a", 1, 1), (b"f", 0, 2), (b"g", 0, 2)],
        );
        let w = walk(&t).expect("walk");
        assert_eq!(w.order, [0, 1, 2]);
        assert_eq!(w.nlink, [3, 2, 2]);
        assert_eq!(w.parent[1], 0);
    }

    #[test]
    fn a_directory_reached_twice_is_refused() {
        // / names directory 1 as a and as b: a loop or a second parent for the kernel.
        let t = table(&[(1, 0, 2, 0), (1, 2, 0, 0)], &[(b"a", 1, 1), (b"b", 1, 1)]);
        let e = walk(&t).err().expect("refused").to_string();
        assert!(e.contains("/b") && e.contains("reached twice"), "{e}");
        // / -> a -> / again (the root is never an entry; a cycle through a child is).
        let t = table(
            &[(1, 0, 1, 0), (1, 1, 1, 0), (1, 2, 1, 0)],
            &[(b"a", 1, 1), (b"b", 1, 2), (b"c", 1, 1)],
        );
        assert!(walk(&t).is_err());
    }

    #[test]
    fn names_out_of_order_or_too_long_are_refused() {
        let t = table(&[(1, 0, 2, 0), (0, 0, 0, 0)], &[(b"b", 0, 1), (b"a", 0, 1)]);
        assert!(walk(&t)
            .err()
            .expect("refused")
            .to_string()
            .contains("out of order"));
        let long = [b'x'; 256];
        let t = table(&[(1, 0, 1, 0), (0, 0, 0, 0)], &[(&long, 0, 1)]);
        assert!(walk(&t)
            .err()
            .expect("refused")
            .to_string()
            .contains("255 bytes"));
    }
}
