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
