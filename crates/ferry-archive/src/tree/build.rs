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

use super::{read::NodeKind, Trailer, DIRENT_LEN, FLAG_HASH, MAX_NODES, NODE_LEN};
use crate::index::{IndexEntry, Kind};
use crate::read::convert::safe_path;
use crate::spill::Spill;
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
    /// Node records, [`NODE_LEN`] bytes each, in node order.
    records: Spill,
    /// Symlink targets and extras, which the records point to (from its start).
    blobs: Spill,
    dirents: Vec<BDirent>,
    names: Vec<u8>,
    /// Open-addressing table of dirent numbers (`NONE`: empty), by (directory, name).
    slots: Vec<u32>,
    defaults: DirDefaults,
    /// The first error moving records to their temporary files: reported by `write`.
    failed: Option<io::Error>,
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
            records: Spill::new(limit, "the tree table"),
            blobs: Spill::new(limit, "the tree table"),
            dirents: Vec::new(),
            names: Vec::new(),
            slots: vec![NONE; 64],
            defaults,
            failed: None,
        };
        b.implicit_dir(0);
        b
    }

    /// Makes a directory with the defaults in `parent`; returns its node.
    fn implicit_dir(&mut self, parent: u32) -> u32 {
        let d = self.defaults;
        let meta = Meta {
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
        };
        self.push_node(parent, &meta, &[], &[])
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
                    self.set_meta(n, e);
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

    /// Rewrites the record of directory `node` with member `e`'s metadata.
    fn set_meta(&mut self, node: u32, e: &IndexEntry) {
        let meta = Meta::of(e, NodeKind::Dir);
        let record = self.record(&meta, &[], &e.xattrs);
        let at = u64::from(node) * NODE_LEN;
        if let Err(err) = self.records.patch(at, &record) {
            self.failed.get_or_insert(err);
        }
    }

    /// A new node in `dir` for member `e`.
    fn member_node(&mut self, dir: u32, e: &IndexEntry) -> Result<u32, &'static str> {
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
        Ok(self.push_node(dir, &Meta::of(e, kind), target, &extras))
    }

    /// Appends a node's record (and its target and extras) made in `dir`.
    fn push_node(&mut self, dir: u32, meta: &Meta, target: &[u8], extras: &[u8]) -> u32 {
        let node = self.kinds.len() as u32;
        self.kinds.push(meta.kind.code());
        self.parents.push(dir);
        let record = self.record_with(meta, target, extras);
        if let Err(err) = self.records.push(&record) {
            self.failed.get_or_insert(err);
        }
        node
    }

    /// A record for `meta` whose extras (runs, `xattrs`) are appended to the blobs.
    fn record(
        &mut self,
        meta: &Meta,
        runs: &[(u64, u64)],
        xattrs: &[(Vec<u8>, Vec<u8>)],
    ) -> [u8; NODE_LEN as usize] {
        let extras = encode_extras(runs, xattrs);
        self.record_with(meta, &[], &extras)
    }

    /// A record for `meta` with `target` and `extras` appended to the blobs (the fields
    /// known only at the end left zero).
    fn record_with(
        &mut self,
        meta: &Meta,
        target: &[u8],
        extras: &[u8],
    ) -> [u8; NODE_LEN as usize] {
        let at = self.blobs.len();
        for part in [target, extras] {
            if let Err(err) = self.blobs.push(part) {
                self.failed.get_or_insert(err);
            }
        }
        let (a, b) = match meta.kind {
            NodeKind::Symlink => (at, target.len() as u64),
            _ => (meta.a, meta.b),
        };
        let mut rec = [0u8; NODE_LEN as usize];
        rec[0] = meta.kind.code();
        rec[1] = if meta.hash.is_some() { FLAG_HASH } else { 0 };
        rec[4..8].copy_from_slice(&meta.mode.to_le_bytes());
        rec[8..12].copy_from_slice(&meta.uid.to_le_bytes());
        rec[12..16].copy_from_slice(&meta.gid.to_le_bytes());
        rec[16..24].copy_from_slice(&meta.mtime.0.to_le_bytes());
        rec[24..28].copy_from_slice(&meta.mtime.1.to_le_bytes());
        rec[28..32].copy_from_slice(&meta.atime.1.to_le_bytes());
        rec[32..40].copy_from_slice(&meta.atime.0.to_le_bytes());
        rec[40..48].copy_from_slice(&meta.size.to_le_bytes());
        rec[48..56].copy_from_slice(&a.to_le_bytes());
        rec[56..64].copy_from_slice(&b.to_le_bytes());
        if !extras.is_empty() {
            rec[80..88].copy_from_slice(&(at + target.len() as u64).to_le_bytes());
            rec[88..92].copy_from_slice(&(extras.len() as u32).to_le_bytes());
        }
        rec[96..112].copy_from_slice(&meta.hash.unwrap_or(0).to_le_bytes());
        rec
    }

    /// Writes the table (body and trailer) to `out`; `data_end` bounds every file's
    /// stored data (the end of the tar data). Returns the bytes written.
    pub fn write(mut self, data_end: u64, out: &mut dyn Write) -> io::Result<u64> {
        if let Some(err) = self.failed.take() {
            return Err(err);
        }
        self.slots = Vec::new();
        let plan = self.plan();
        let names_len = self.names.len() as u64;
        let mut w = HashingWriter {
            out,
            hash: Xxh3::new(),
            written: 0,
        };
        // Nodes: the records as made, with what is known now filled in.
        let mut records = self.records.reader();
        let mut rec = [0u8; NODE_LEN as usize];
        for node in 0..self.kinds.len() {
            records.read_exact(&mut rec)?;
            let kind = self.kind(node as u32);
            let first = plan.first_name[node];
            if let Some(d) = self.dirents.get(first as usize) {
                rec[2..4].copy_from_slice(&u16::from(d.name_len).to_le_bytes());
                let at = plan.name_at[first as usize];
                rec[72..80].copy_from_slice(&u64::from(at).to_le_bytes());
            }
            rec[64..68].copy_from_slice(&self.parents[node].to_le_bytes());
            rec[68..72].copy_from_slice(&plan.nlink[node].to_le_bytes());
            let shift = |rec: &mut [u8; NODE_LEN as usize], at: usize| {
                let v = u64::from_le_bytes(rec[at..at + 8].try_into().unwrap_or_default());
                rec[at..at + 8].copy_from_slice(&(v + names_len).to_le_bytes());
            };
            match kind {
                NodeKind::Dir => {
                    let (start, count) = plan.spans[node];
                    rec[48..56].copy_from_slice(&u64::from(start).to_le_bytes());
                    rec[56..64].copy_from_slice(&u64::from(count).to_le_bytes());
                }
                NodeKind::Symlink => shift(&mut rec, 48),
                _ => {}
            }
            if rec[88..92] != [0; 4] {
                shift(&mut rec, 80);
            }
            w.write_all(&rec)?;
        }
        drop(records);
        // Dirents, grouped by directory and sorted by name; then the heap.
        for &i in &plan.sorted {
            let d = self.dirents[i as usize];
            let mut r = [0u8; DIRENT_LEN as usize];
            r[..8].copy_from_slice(&u64::from(plan.name_at[i as usize]).to_le_bytes());
            r[8..10].copy_from_slice(&u16::from(d.name_len).to_le_bytes());
            r[10] = self.kinds[d.node as usize];
            r[12..16].copy_from_slice(&d.node.to_le_bytes());
            w.write_all(&r)?;
        }
        // Each directory's names together, in listing order: a listing reads them at
        // once.
        for &i in &plan.sorted {
            w.write_all(self.name_of(&self.dirents[i as usize]))?;
        }
        self.blobs.copy_to(|b| w.write_all(b))?;
        let trailer = Trailer {
            nodes: self.kinds.len() as u64,
            dirents: plan.sorted.len() as u64,
            heap: names_len + self.blobs.len(),
            data_end,
            body_hash: w.hash.digest(),
        };
        let written = w.written;
        w.out.write_all(&trailer.encode())?;
        Ok(written + super::TRAILER_LEN)
    }

    /// Sorts the dirents by directory and name, and walks the tree from the root to
    /// find each node's parent, name and link count (what is no longer reachable, left
    /// by a member given again, is written but never found).
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
        let mut queue = vec![0u32];
        p.nlink[0] = 2;
        self.parents[0] = 0;
        while let Some(dir) = queue.pop() {
            let (start, count) = p.spans[dir as usize];
            for &d in &p.sorted[start as usize..(start + count) as usize] {
                let de = self.dirents[d as usize];
                let child = de.node as usize;
                let is_dir = self.kind(de.node) == NodeKind::Dir;
                if p.first_name[child] == NONE {
                    p.first_name[child] = d;
                    self.parents[child] = dir;
                    if is_dir {
                        p.nlink[child] = 2;
                        queue.push(de.node);
                    }
                } else if is_dir {
                    // A directory has one name: a second would make a cycle.
                    continue;
                }
                if is_dir {
                    p.nlink[dir as usize] += 1;
                } else {
                    p.nlink[child] += 1;
                }
            }
        }
        p
    }
}

/// What is known of a node when it is made.
struct Meta {
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
}

impl Meta {
    fn of(e: &IndexEntry, kind: NodeKind) -> Meta {
        let (size, a, b) = match kind {
            NodeKind::File => (e.size, e.data_offset, e.stored),
            NodeKind::Symlink => (e.link.len() as u64, 0, 0),
            NodeKind::CharDevice | NodeKind::BlockDevice => (0, e.rdev, 0),
            _ => (0, 0, 0),
        };
        Meta {
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
        }
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
