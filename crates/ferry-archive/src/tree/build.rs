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
//! The builder keeps every node in memory (about 100 bytes each plus names), then
//! writes the table out in one pass.

use super::{read::NodeKind, Trailer, DIRENT_LEN, FLAG_HASH, MAX_NODES, NODE_LEN};
use crate::index::{IndexEntry, Kind};
use crate::read::convert::safe_path;
use crate::tar::{TarEntry, TarKind};
use ferry_core::entry::escaped;
use std::collections::HashMap;
use std::fmt;
use std::io::{self, Write};
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

/// A node as the builder keeps it.
#[derive(Clone)]
struct BNode {
    kind: NodeKind,
    mode: u32,
    uid: u32,
    gid: u32,
    mtime: (i64, u32),
    atime: (i64, u32),
    size: u64,
    /// File: data offset; device: device number.
    a: u64,
    /// File: stored bytes.
    b: u64,
    hash: Option<u128>,
    /// Where its symlink target and then its extras are in `blobs`.
    blob: u64,
    target_len: u32,
    extras_len: u32,
}

/// A name in a directory, as the builder keeps it.
struct BDirent {
    dir: u32,
    name_at: u64,
    name_len: u16,
    node: u32,
    /// The next dirent whose (directory, name) hashes the same, or `NONE`.
    next: u32,
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

/// Builds a tree table (see the module's doc).
pub struct TreeBuilder {
    nodes: Vec<BNode>,
    dirents: Vec<BDirent>,
    /// Hash of (directory, name) -> first dirent with that hash.
    by_name: HashMap<u64, u32>,
    names: Vec<u8>,
    blobs: Vec<u8>,
    defaults: DirDefaults,
}

impl TreeBuilder {
    /// An empty tree: a root directory with `defaults`.
    pub fn new(defaults: DirDefaults) -> TreeBuilder {
        let mut b = TreeBuilder {
            nodes: Vec::new(),
            dirents: Vec::new(),
            by_name: HashMap::new(),
            names: Vec::new(),
            blobs: Vec::new(),
            defaults,
        };
        b.nodes.push(b.implicit_dir());
        b
    }

    fn implicit_dir(&self) -> BNode {
        let d = self.defaults;
        BNode {
            kind: NodeKind::Dir,
            mode: d.mode,
            uid: d.uid,
            gid: d.gid,
            mtime: d.mtime,
            atime: d.mtime,
            size: 0,
            a: 0,
            b: 0,
            hash: None,
            blob: 0,
            target_len: 0,
            extras_len: 0,
        }
    }

    /// How many nodes the tree has so far (the root and nodes later replaced included).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Never true: there is always the root.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Adds the member `e` (the next in archive order); `Err` says why it is left out.
    pub fn add(&mut self, e: &IndexEntry) -> Result<(), Skipped> {
        let skip = |why: &str| Skipped {
            path: escaped(&e.path),
            why: why.to_string(),
        };
        let path = safe_path(&e.path).map_err(skip)?;
        let comps: Vec<&[u8]> = if path.is_root() {
            Vec::new()
        } else {
            path.as_bytes().split(|&b| b == b'/').collect()
        };
        let Some((&name, parents)) = comps.split_last() else {
            if e.kind != Kind::Dir {
                return Err(skip("the root of the tree is not a directory"));
            }
            self.set_meta(0, e);
            return Ok(());
        };
        if comps.iter().any(|c| c.len() > 255) {
            return Err(skip("a name longer than 255 bytes"));
        }
        if self.nodes.len() as u64 >= MAX_NODES {
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
                if self.nodes[node as usize].kind == NodeKind::Dir {
                    return Err(skip("hardlink to a directory"));
                }
                node
            }
            Kind::Dir => {
                if let Some(existing) = self.find(dir, name).map(|d| self.dirents[d as usize].node)
                {
                    if self.nodes[existing as usize].kind == NodeKind::Dir {
                        self.set_meta(existing, e);
                        return Ok(());
                    }
                }
                self.push_node(e).map_err(skip)?
            }
            _ => self.push_node(e).map_err(skip)?,
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
                Some(n) if self.nodes[n as usize].kind == NodeKind::Dir => n,
                Some(n) => {
                    let what = match self.nodes[n as usize].kind {
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
                    let node = self.nodes.len() as u32;
                    self.nodes.push(self.implicit_dir());
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
            if self.nodes[node as usize].kind != NodeKind::Dir {
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
        &self.names[d.name_at as usize..d.name_at as usize + usize::from(d.name_len)]
    }

    /// The dirent named `name` in `dir`.
    fn find(&self, dir: u32, name: &[u8]) -> Option<u32> {
        let mut at = *self.by_name.get(&Self::key(dir, name))?;
        while at != NONE {
            let d = &self.dirents[at as usize];
            if d.dir == dir && self.name_of(d) == name {
                return Some(at);
            }
            at = d.next;
        }
        None
    }

    /// Makes `name` in `dir` name `node`, replacing what it named before.
    fn set_entry(&mut self, dir: u32, name: &[u8], node: u32) {
        if let Some(d) = self.find(dir, name) {
            self.dirents[d as usize].node = node;
            return;
        }
        let key = Self::key(dir, name);
        let at = self.dirents.len() as u32;
        let next = self.by_name.insert(key, at).unwrap_or(NONE);
        let name_at = self.names.len() as u64;
        self.names.extend_from_slice(name);
        self.dirents.push(BDirent {
            dir,
            name_at,
            name_len: name.len() as u16,
            node,
            next,
        });
    }

    fn set_meta(&mut self, node: u32, e: &IndexEntry) {
        let n = &mut self.nodes[node as usize];
        n.mode = e.mode;
        n.uid = e.uid;
        n.gid = e.gid;
        n.mtime = e.mtime;
        n.atime = e.atime;
        let blob = self.blobs.len() as u64;
        let extras = encode_extras(&[], &e.xattrs);
        n.blob = blob;
        n.target_len = 0;
        n.extras_len = extras.len() as u32;
        self.blobs.extend_from_slice(&extras);
    }

    /// A new node for member `e`.
    fn push_node(&mut self, e: &IndexEntry) -> Result<u32, &'static str> {
        let kind = match e.kind {
            Kind::File => NodeKind::File,
            Kind::Dir => NodeKind::Dir,
            Kind::Symlink => NodeKind::Symlink,
            Kind::Fifo => NodeKind::Fifo,
            Kind::CharDevice => NodeKind::CharDevice,
            Kind::BlockDevice => NodeKind::BlockDevice,
            Kind::HardLink => return Err("a hardlink is not a node"),
        };
        let target: &[u8] = match kind {
            NodeKind::Symlink if e.link.is_empty() => return Err("symlink without a target"),
            NodeKind::Symlink if e.link.len() > 1 << 20 => return Err("symlink target too long"),
            NodeKind::Symlink => &e.link,
            _ => &[],
        };
        let extras = encode_extras(&e.runs, &e.xattrs);
        let blob = self.blobs.len() as u64;
        self.blobs.extend_from_slice(target);
        self.blobs.extend_from_slice(&extras);
        let (size, a, b) = match kind {
            NodeKind::File => (e.size, e.data_offset, e.stored),
            NodeKind::Symlink => (target.len() as u64, 0, target.len() as u64),
            NodeKind::CharDevice | NodeKind::BlockDevice => (0, e.rdev, 0),
            _ => (0, 0, 0),
        };
        self.nodes.push(BNode {
            kind,
            mode: e.mode,
            uid: e.uid,
            gid: e.gid,
            mtime: e.mtime,
            atime: e.atime,
            size,
            a,
            b,
            hash: e.hash.filter(|_| kind == NodeKind::File),
            blob,
            target_len: target.len() as u32,
            extras_len: extras.len() as u32,
        });
        Ok(self.nodes.len() as u32 - 1)
    }

    /// Writes the table (body and trailer) to `out`; `data_end` bounds every file's
    /// stored data (the end of the tar data). Returns the bytes written.
    pub fn write(self, data_end: u64, out: &mut dyn Write) -> io::Result<u64> {
        let plan = self.plan();
        let mut hashing = HashingWriter {
            out,
            hash: Xxh3::new(),
            written: 0,
        };
        let w = &mut hashing;
        // Nodes.
        let blobs_base = plan.names_len;
        let mut blob_at = blobs_base;
        let mut rec = [0u8; NODE_LEN as usize];
        for (new, &old) in plan.order.iter().enumerate() {
            let n = &self.nodes[old as usize];
            let (a, b) = match n.kind {
                NodeKind::Dir => plan.dir_spans[new],
                NodeKind::Symlink => (blob_at, n.b),
                _ => (n.a, n.b),
            };
            let extras = (blob_at + u64::from(n.target_len), n.extras_len);
            blob_at += u64::from(n.target_len) + u64::from(n.extras_len);
            let (name_at, name_len) = plan.first_name[new];
            rec.fill(0);
            rec[0] = n.kind.code();
            rec[1] = if n.hash.is_some() { FLAG_HASH } else { 0 };
            rec[2..4].copy_from_slice(&name_len.to_le_bytes());
            rec[4..8].copy_from_slice(&n.mode.to_le_bytes());
            rec[8..12].copy_from_slice(&n.uid.to_le_bytes());
            rec[12..16].copy_from_slice(&n.gid.to_le_bytes());
            rec[16..24].copy_from_slice(&n.mtime.0.to_le_bytes());
            rec[24..28].copy_from_slice(&n.mtime.1.to_le_bytes());
            rec[28..32].copy_from_slice(&n.atime.1.to_le_bytes());
            rec[32..40].copy_from_slice(&n.atime.0.to_le_bytes());
            rec[40..48].copy_from_slice(&n.size.to_le_bytes());
            rec[48..56].copy_from_slice(&a.to_le_bytes());
            rec[56..64].copy_from_slice(&b.to_le_bytes());
            rec[64..68].copy_from_slice(&plan.parent[new].to_le_bytes());
            rec[68..72].copy_from_slice(&plan.nlink[new].to_le_bytes());
            rec[72..80].copy_from_slice(&name_at.to_le_bytes());
            rec[80..88].copy_from_slice(&extras.0.to_le_bytes());
            rec[88..92].copy_from_slice(&extras.1.to_le_bytes());
            rec[96..112].copy_from_slice(&n.hash.unwrap_or(0).to_le_bytes());
            w.write_all(&rec)?;
        }
        // Dirents, then their names in the same order.
        let mut name_at = 0u64;
        for &d in &plan.emitted {
            let d = &self.dirents[d as usize];
            let node = plan.new_id[d.node as usize];
            let mut r = [0u8; DIRENT_LEN as usize];
            r[..8].copy_from_slice(&name_at.to_le_bytes());
            r[8..10].copy_from_slice(&d.name_len.to_le_bytes());
            r[10] = self.nodes[d.node as usize].kind.code();
            r[12..16].copy_from_slice(&node.to_le_bytes());
            w.write_all(&r)?;
            name_at += u64::from(d.name_len);
        }
        for &d in &plan.emitted {
            w.write_all(self.name_of(&self.dirents[d as usize]))?;
        }
        for &old in &plan.order {
            let n = &self.nodes[old as usize];
            let len = (n.target_len + n.extras_len) as usize;
            w.write_all(&self.blobs[n.blob as usize..n.blob as usize + len])?;
        }
        let trailer = Trailer {
            nodes: plan.order.len() as u64,
            dirents: plan.emitted.len() as u64,
            heap: blob_at,
            data_end,
            body_hash: w.hash.digest(),
        };
        let written = w.written;
        out_trailer(hashing.out, &trailer)?;
        Ok(written + super::TRAILER_LEN)
    }

    /// Numbers the nodes reachable from the root breadth first, each directory's
    /// entries in name order, and works out where everything goes.
    fn plan(&self) -> Plan {
        // Dirents grouped by directory, each group sorted by name.
        let mut sorted: Vec<u32> = (0..self.dirents.len() as u32).collect();
        sorted.sort_unstable_by(|&x, &y| {
            let (dx, dy) = (&self.dirents[x as usize], &self.dirents[y as usize]);
            dx.dir
                .cmp(&dy.dir)
                .then_with(|| self.name_of(dx).cmp(self.name_of(dy)))
        });
        let mut first_child = vec![NONE; self.nodes.len()];
        for (i, &d) in sorted.iter().enumerate().rev() {
            first_child[self.dirents[d as usize].dir as usize] = i as u32;
        }
        let mut p = Plan {
            order: vec![0],
            new_id: vec![NONE; self.nodes.len()],
            parent: vec![0],
            nlink: vec![2],
            first_name: vec![(0, 0)],
            dir_spans: Vec::new(),
            emitted: Vec::new(),
            names_len: 0,
        };
        p.new_id[0] = 0;
        let mut next = 0usize;
        while next < p.order.len() {
            let new_dir = next as u32;
            let old_dir = p.order[next];
            next += 1;
            if self.nodes[old_dir as usize].kind != NodeKind::Dir {
                p.dir_spans.push((0, 0));
                continue;
            }
            let start = p.emitted.len() as u64;
            let mut at = first_child[old_dir as usize] as usize;
            while let Some(&d) = sorted.get(at) {
                let de = &self.dirents[d as usize];
                if de.dir != old_dir {
                    break;
                }
                at += 1;
                let child = de.node as usize;
                let is_dir = self.nodes[child].kind == NodeKind::Dir;
                if p.new_id[child] == NONE {
                    p.new_id[child] = p.order.len() as u32;
                    p.order.push(child as u32);
                    p.parent.push(new_dir);
                    p.nlink.push(if is_dir { 2 } else { 0 });
                    p.first_name.push((p.names_len, de.name_len));
                } else if is_dir {
                    // A directory is never reached twice; a damaged builder state
                    // must not make a cycle.
                    continue;
                }
                let new_child = p.new_id[child] as usize;
                if is_dir {
                    p.nlink[new_dir as usize] += 1;
                } else {
                    p.nlink[new_child] += 1;
                }
                p.emitted.push(d);
                p.names_len += u64::from(de.name_len);
            }
            p.dir_spans.push((start, p.emitted.len() as u64 - start));
        }
        p
    }
}

/// Where the table's pieces go (see [`TreeBuilder::plan`]); indexed by new node number.
struct Plan {
    /// Builder node of each new node.
    order: Vec<u32>,
    /// New number of each builder node (`NONE`: not reachable).
    new_id: Vec<u32>,
    parent: Vec<u32>,
    nlink: Vec<u32>,
    /// Where the name a node was first reached by is in the heap, and its length.
    first_name: Vec<(u64, u16)>,
    /// A directory's first dirent and count (others: zeros).
    dir_spans: Vec<(u64, u64)>,
    /// The dirents written, in order.
    emitted: Vec<u32>,
    /// Bytes of names at the heap's start.
    names_len: u64,
}

fn encode_extras(runs: &[(u64, u64)], xattrs: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    if runs.is_empty() && xattrs.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    out.extend_from_slice(&(runs.len() as u32).to_le_bytes());
    for (o, l) in runs {
        out.extend_from_slice(&o.to_le_bytes());
        out.extend_from_slice(&l.to_le_bytes());
    }
    let kept: Vec<_> = xattrs
        .iter()
        .filter(|(n, v)| n.len() <= usize::from(u16::MAX) && v.len() <= u32::MAX as usize)
        .collect();
    out.extend_from_slice(&(kept.len() as u32).to_le_bytes());
    for (n, v) in kept {
        out.extend_from_slice(&(n.len() as u16).to_le_bytes());
        out.extend_from_slice(n);
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(v);
    }
    out
}

fn out_trailer(out: &mut dyn Write, t: &Trailer) -> io::Result<()> {
    out.write_all(&t.encode())
}

/// Passes writes on, hashing and counting them.
struct HashingWriter<'a> {
    out: &'a mut dyn Write,
    hash: Xxh3,
    written: u64,
}

impl HashingWriter<'_> {
    fn write_all(&mut self, b: &[u8]) -> io::Result<()> {
        self.out.write_all(b)?;
        self.hash.update(b);
        self.written += b.len() as u64;
        Ok(())
    }
}

/// The index entry that stands for tar member `t`, for a [`TreeBuilder`] (the header
/// offset and names are those of the member; no content hash).
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
        names: None,
    }
}
