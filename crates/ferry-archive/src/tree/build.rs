//! Building a tree table from an archive's members, in archive order, resolved as an
//! extraction resolves them:
//!
//! - paths are made safe as `unpack` makes them (a leading `/` dropped); a member with
//!   `..`, or one whose name no directory can hold (over 255 bytes), is left out and
//!   reported;
//! - a path given again replaces what was there (the last member wins), except that a
//!   directory member given again only updates the directory's metadata;
//! - a member below something that is not a directory is left out and reported, as
//!   `unpack` refuses to write through a symlink;
//! - directories a member needs but the archive never names are made with the
//!   defaults given (as tar makes them);
//! - a hardlink names the node of its target, which must already be there and not be a
//!   directory.
//!
//! See [`TreeBuilder`] for what it keeps in memory.

use super::nodes::{dirent, finish_record, member_parts, Finish, HashingWriter, Meta, NodeStore};
use super::{read::NodeKind, MAX_NODES, NODE_LEN};
use crate::index::{IndexEntry, Kind, Names};
use crate::owners::LocalIds;
use crate::read::acl;
use crate::read::convert::safe_path;
use crate::tar::{TarEntry, TarKind};
use ferry_core::entry::escaped;
use std::fmt;
use std::io::{self, Read, Write};
use xxhash_rust::xxh3::Xxh3;

/// A member the table leaves out, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// The member's path as the archive gives it, escaped for display.
    pub path: String,
    /// Why it is left out.
    pub why: String,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "member {}: {}", self.path, self.why)
    }
}

/// A name in a directory, as the builder keeps it.
#[derive(Clone, Copy)]
struct BDirent {
    dir: u32,
    node: u32,
    /// Where the name is in `names`, and its length (at most 255).
    name_at: u32,
    name_len: u8,
}

const NONE: u32 = u32::MAX;

/// Metadata for directories the archive needs but never names, and for the root until
/// a `./` member gives its own.
#[derive(Clone, Copy, Debug)]
pub struct DirDefaults {
    /// Permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Modification (and access) time.
    pub mtime: (i64, u32),
}

/// How much of the node records and of the targets and extras a builder holds in
/// memory before moving the rest to temporary files.
const SPILL_AT: usize = 4 << 20;

/// Builds a tree table (see the module's doc).
///
/// Nodes are numbered as they are made, in archive order. What a node's record holds
/// that the archive gives (kind, metadata, data, target, extras) goes out at once, to a
/// [`Spill`] that keeps only its newest part in memory; what is only known at the end
/// (its parent, link count, name, a directory's entries) is filled in by
/// [`TreeBuilder::write`]. So the memory kept per member is its name and about 30 bytes
/// (its dirent, its slot in the name table, its kind and parent), and a few words more
/// per node while the table is written.
pub struct TreeBuilder {
    /// Per node: its kind's code.
    kinds: Vec<u8>,
    /// Per node: the directory it was made in.
    parents: Vec<u32>,
    /// Node records and the blobs they point to.
    nodes: NodeStore,
    dirents: Vec<BDirent>,
    names: Vec<u8>,
    /// Open-addressing table of dirent numbers (`NONE`: empty), by (directory, name).
    slots: Vec<u32>,
    defaults: DirDefaults,
}

impl TreeBuilder {
    /// An empty tree: a root directory with `defaults`.
    pub fn new(defaults: DirDefaults) -> TreeBuilder {
        Self::with_memory(defaults, SPILL_AT)
    }

    /// [`TreeBuilder::new`] holding at most about `limit` bytes of records (and as many
    /// of targets and extras) in memory.
    pub fn with_memory(defaults: DirDefaults, limit: usize) -> TreeBuilder {
        let mut b = TreeBuilder {
            kinds: Vec::new(),
            parents: Vec::new(),
            nodes: NodeStore::new(limit),
            dirents: Vec::new(),
            names: Vec::new(),
            slots: vec![NONE; 64],
            defaults,
        };
        b.implicit_dir(0);
        b
    }

    /// Makes a directory with the defaults in `parent`; returns its node.
    fn implicit_dir(&mut self, parent: u32) -> u32 {
        self.push_node(parent, &Meta::implicit_dir(&self.defaults), &[], &[])
    }

    /// How many nodes the tree has so far (the root and nodes later replaced included).
    pub fn len(&self) -> usize {
        self.kinds.len()
    }

    /// Never true: there is always the root.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    fn kind(&self, node: u32) -> NodeKind {
        NodeKind::from_code(self.kinds[node as usize]).unwrap_or(NodeKind::File)
    }

    /// Adds the member `e` (the next in archive order); `Err` says why it is left out.
    pub fn add(&mut self, e: &IndexEntry) -> Result<(), Skipped> {
        let skip = |why: &str| Skipped {
            path: escaped(&e.path),
            why: why.to_string(),
        };
        let path = safe_path(&e.path).map_err(skip)?;
        let comps = super::nodes::components(&path);
        let Some((&name, parents)) = comps.split_last() else {
            if e.kind != Kind::Dir {
                return Err(skip("the root of the tree is not a directory"));
            }
            self.nodes.set_dir_meta(0, e);
            return Ok(());
        };
        if comps.iter().any(|c| c.len() > 255) {
            return Err(skip("a name longer than 255 bytes"));
        }
        let room = (self.names.len() + path.as_bytes().len()) as u64;
        if self.len() as u64 + comps.len() as u64 >= MAX_NODES || room >= u64::from(NONE) {
            return Err(skip("too many members for one tree"));
        }
        let dir = self.make_dirs(parents).map_err(|why| skip(&why))?;
        let node = match e.kind {
            Kind::HardLink => {
                let target = safe_path(&e.link).map_err(skip)?;
                let node = self.resolve(target.as_bytes()).ok_or_else(|| {
                    skip(&format!(
                        "hardlink to {}: no such member before it",
                        escaped(target.as_bytes())
                    ))
                })?;
                if self.kind(node) == NodeKind::Dir {
                    return Err(skip("hardlink to a directory"));
                }
                node
            }
            Kind::Dir => {
                let existing = self.find(dir, name).map(|d| self.dirents[d as usize].node);
                if let Some(n) = existing.filter(|&n| self.kind(n) == NodeKind::Dir) {
                    self.nodes.set_dir_meta(n, e);
                    return Ok(());
                }
                self.member_node(dir, e).map_err(skip)?
            }
            _ => self.member_node(dir, e).map_err(skip)?,
        };
        self.set_entry(dir, name, node);
        Ok(())
    }

    /// Walks (making what is missing) the directories `parents` below the root; the
    /// last one's node, or why a member cannot go there.
    fn make_dirs(&mut self, parents: &[&[u8]]) -> Result<u32, String> {
        let mut dir = 0u32;
        for (i, &comp) in parents.iter().enumerate() {
            dir = match self.find(dir, comp).map(|d| self.dirents[d as usize].node) {
                Some(n) if self.kind(n) == NodeKind::Dir => n,
                Some(n) => {
                    let what = match self.kind(n) {
                        NodeKind::Symlink => "a symlink",
                        NodeKind::File => "a file",
                        _ => "something that is not a directory",
                    };
                    return Err(format!(
                        "below {}, which is {what} in the archive",
                        escaped(&parents[..=i].join(&b'/'))
                    ));
                }
                None => {
                    let node = self.implicit_dir(dir);
                    self.set_entry(dir, comp, node);
                    node
                }
            };
        }
        Ok(dir)
    }

    /// The node at `path` (relative, clean), if the tree has one there now.
    fn resolve(&self, path: &[u8]) -> Option<u32> {
        let mut node = 0u32;
        for comp in path.split(|&b| b == b'/').filter(|c| !c.is_empty()) {
            if self.kind(node) != NodeKind::Dir {
                return None;
            }
            node = self.dirents[self.find(node, comp)? as usize].node;
        }
        Some(node)
    }

    fn key(dir: u32, name: &[u8]) -> u64 {
        let mut h = Xxh3::new();
        h.update(&dir.to_le_bytes());
        h.update(name);
        h.digest()
    }

    fn name_of(&self, d: &BDirent) -> &[u8] {
        let at = d.name_at as usize;
        &self.names[at..at + usize::from(d.name_len)]
    }

    /// The first slot for `key`, then each next one (linear probing).
    fn probe(&self, key: u64) -> impl Iterator<Item = usize> {
        let mask = self.slots.len() - 1;
        let start = key as usize & mask;
        (0..self.slots.len()).map(move |i| (start + i) & mask)
    }

    /// The dirent named `name` in `dir`.
    fn find(&self, dir: u32, name: &[u8]) -> Option<u32> {
        for slot in self.probe(Self::key(dir, name)) {
            let at = self.slots[slot];
            if at == NONE {
                return None;
            }
            let d = &self.dirents[at as usize];
            if d.dir == dir && self.name_of(d) == name {
                return Some(at);
            }
        }
        None
    }

    /// Makes `name` in `dir` name `node`, replacing what it named before.
    fn set_entry(&mut self, dir: u32, name: &[u8], node: u32) {
        if let Some(d) = self.find(dir, name) {
            self.dirents[d as usize].node = node;
            return;
        }
        let at = self.dirents.len() as u32;
        let name_at = self.names.len() as u32;
        self.names.extend_from_slice(name);
        self.dirents.push(BDirent {
            dir,
            node,
            name_at,
            name_len: name.len() as u8,
        });
        if self.dirents.len() * 2 > self.slots.len() {
            self.grow();
        } else {
            self.insert(at);
        }
    }

    /// Puts dirent `at` in its slot.
    fn insert(&mut self, at: u32) {
        let d = self.dirents[at as usize];
        let key = Self::key(d.dir, self.name_of(&d));
        if let Some(slot) = self.probe(key).find(|&s| self.slots[s] == NONE) {
            self.slots[slot] = at;
        }
    }

    /// Doubles the table and puts every dirent back.
    fn grow(&mut self) {
        self.slots = vec![NONE; self.slots.len() * 2];
        for at in 0..self.dirents.len() as u32 {
            self.insert(at);
        }
    }

    /// A new node in `dir` for member `e`.
    fn member_node(&mut self, dir: u32, e: &IndexEntry) -> Result<u32, &'static str> {
        let (meta, target, extras) = member_parts(e)?;
        Ok(self.push_node(dir, &meta, target, &extras))
    }

    /// Appends a node's record (and its target and extras) made in `dir`.
    fn push_node(&mut self, dir: u32, meta: &Meta, target: &[u8], extras: &[u8]) -> u32 {
        self.kinds.push(meta.kind.code());
        self.parents.push(dir);
        self.nodes.push(dir, meta, target, extras)
    }

    /// Writes the table (body and trailer) to `out`; `data_end` bounds every file's
    /// stored data (the end of the tar data). Returns the bytes written.
    pub fn write(mut self, data_end: u64, out: &mut dyn Write) -> io::Result<u64> {
        self.nodes.take_failed()?;
        self.slots = Vec::new();
        let plan = self.plan();
        let names_len = self.names.len() as u64;
        let mut w = HashingWriter::new(out);
        // Nodes: the records as made, with what is known now filled in.
        let mut records = self.nodes.records();
        let mut rec = [0u8; NODE_LEN as usize];
        for node in 0..self.kinds.len() {
            records.read_exact(&mut rec)?;
            let first = plan.first_name[node];
            let name = self
                .dirents
                .get(first as usize)
                .map(|d| (d.name_len, plan.name_at[first as usize]));
            let finish = Finish {
                name,
                parent: self.parents[node],
                nlink: plan.nlink[node],
                span: plan.spans[node],
            };
            finish_record(&mut rec, &finish, names_len);
            w.write_all(&rec)?;
        }
        drop(records);
        // Dirents, grouped by directory and sorted by name; then the heap.
        for &i in &plan.sorted {
            let d = self.dirents[i as usize];
            let kind = self.kinds[d.node as usize];
            w.write_all(&dirent(plan.name_at[i as usize], d.name_len, kind, d.node))?;
        }
        // Each directory's names together, in listing order: a listing reads them at
        // once.
        for &i in &plan.sorted {
            w.write_all(self.name_of(&self.dirents[i as usize]))?;
        }
        self.nodes.write_blobs(&mut w)?;
        let heap = names_len + self.nodes.blobs_len();
        w.finish(
            self.kinds.len() as u64,
            plan.sorted.len() as u64,
            heap,
            data_end,
        )
    }

    /// Sorts the dirents by directory and name, and walks the tree from the root to
    /// find the directories still reachable (what is not, left by a member given again,
    /// is written but never found); then gives each node reachable from them its
    /// parent, name (its first dirent in that order) and link count.
    fn plan(&mut self) -> Plan {
        let mut sorted: Vec<u32> = (0..self.dirents.len() as u32).collect();
        sorted.sort_unstable_by(|&x, &y| {
            let (dx, dy) = (&self.dirents[x as usize], &self.dirents[y as usize]);
            dx.dir
                .cmp(&dy.dir)
                .then_with(|| self.name_of(dx).cmp(self.name_of(dy)))
        });
        let nodes = self.kinds.len();
        let mut name_at = vec![0u32; self.dirents.len()];
        let mut at = 0u32;
        for &d in &sorted {
            name_at[d as usize] = at;
            at += u32::from(self.dirents[d as usize].name_len);
        }
        let mut p = Plan {
            spans: vec![(0, 0); nodes],
            first_name: vec![NONE; nodes],
            nlink: vec![0; nodes],
            sorted,
            name_at,
        };
        for (i, &d) in p.sorted.iter().enumerate() {
            let span = &mut p.spans[self.dirents[d as usize].dir as usize];
            if span.1 == 0 {
                span.0 = i as u32;
            }
            span.1 += 1;
        }
        // Reachable directories: a directory is reached by its first name only (a
        // second would make a cycle).
        let mut reached = vec![false; nodes];
        reached[0] = true;
        let mut queue = vec![0u32];
        while let Some(dir) = queue.pop() {
            let (start, count) = p.spans[dir as usize];
            for &d in &p.sorted[start as usize..(start + count) as usize] {
                let child = self.dirents[d as usize].node;
                if self.kind(child) == NodeKind::Dir && !reached[child as usize] {
                    reached[child as usize] = true;
                    queue.push(child);
                }
            }
        }
        p.nlink[0] = 2;
        self.parents[0] = 0;
        for &d in &p.sorted {
            let de = self.dirents[d as usize];
            let (dir, child) = (de.dir as usize, de.node as usize);
            if !reached[dir] {
                continue;
            }
            let is_dir = self.kind(de.node) == NodeKind::Dir;
            if p.first_name[child] == NONE {
                p.first_name[child] = d;
                self.parents[child] = de.dir;
                if is_dir {
                    p.nlink[child] += 2;
                }
            } else if is_dir {
                continue;
            }
            if is_dir {
                p.nlink[dir] += 1;
            } else {
                p.nlink[child] += 1;
            }
        }
        p
    }
}

/// Where the pieces known only at the end go; per node, or per dirent for `sorted`.
struct Plan {
    /// A directory's first dirent (in `sorted`) and how many.
    spans: Vec<(u32, u32)>,
    /// The dirent a node was first reached by (`NONE`: never).
    first_name: Vec<u32>,
    nlink: Vec<u32>,
    /// The dirents, by directory and name.
    sorted: Vec<u32>,
    /// Per dirent: where its name goes in the heap (names are written in `sorted`
    /// order; all of them fit in `names`, which is at most 4 GiB).
    name_at: Vec<u32>,
}

/// [`entry_of_tar`] with the ACLs member `t`'s pax records hold as text (GNU tar's and
/// bsdtar's `--acls`) as the attributes `unpack` makes of them ([`crate::read::acl`]:
/// a name takes the id it has here), where it has no attribute of that name already,
/// so that a mount shows the ACLs an unpack sets. The second part says why an ACL was
/// left out (the entry is made without it, as unpack warns and goes on).
pub fn entry_of_tar_here(t: &TarEntry, ids: &mut LocalIds) -> (IndexEntry, Option<String>) {
    let mut e = entry_of_tar(t);
    if !t.pax.iter().any(|(key, _)| acl::is_acl_key(key)) {
        return (e, None);
    }
    match acl::acl_xattrs(&t.pax, ids) {
        Ok(acls) => {
            for a in acls {
                if !e.xattrs.iter().any(|(name, _)| *name == a.name) {
                    e.xattrs.push((a.name, a.value));
                }
            }
            (e, None)
        }
        Err(why) => (e, Some(format!("ACL not set: {why}"))),
    }
}

/// The index entry that stands for tar member `t`, for a [`TreeBuilder`] (the header
/// offset and owner names are those of the member; no content hash).
pub fn entry_of_tar(t: &TarEntry) -> IndexEntry {
    let kind = match t.kind {
        TarKind::File => Kind::File,
        TarKind::Dir => Kind::Dir,
        TarKind::Symlink => Kind::Symlink,
        TarKind::HardLink => Kind::HardLink,
        TarKind::Fifo => Kind::Fifo,
        TarKind::CharDevice => Kind::CharDevice,
        TarKind::BlockDevice => Kind::BlockDevice,
    };
    IndexEntry {
        path: t.path.clone(),
        kind,
        mode: t.mode,
        uid: t.uid,
        gid: t.gid,
        mtime: t.mtime,
        atime: t.atime.unwrap_or(t.mtime),
        size: if kind == Kind::File { t.size } else { 0 },
        header_offset: t.header_offset,
        data_offset: t.data_offset,
        stored: if kind == Kind::File { t.stored } else { 0 },
        rdev: t.rdev.map_or(0, |(ma, mi)| rustix::fs::makedev(ma, mi)),
        hash: None,
        link: t.link_target.clone().unwrap_or_default(),
        runs: t.sparse.clone().unwrap_or_default(),
        xattrs: t.xattrs.clone(),
        names: Some(Names {
            user: t.uname.clone(),
            group: t.gname.clone(),
        }),
    }
}
