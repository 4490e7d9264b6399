//! A tree table for an archive that names every path once, as `pack` writes them, built
//! with memory bound by its directories instead of its members.
//!
//! [`TreeBuilder`](super::TreeBuilder) keeps every name in memory, to find the one a
//! later member replaces: about 50 bytes a member, 50 MiB for a million. When no name
//! comes twice there is nothing to replace, and only directories need finding (to place
//! the members below them) and the targets of hardlinks (named in a first pass over the
//! members). So this builder keeps those in memory and writes every dirent to a
//! temporary file as it is made; at the end it sorts them by directory and name in runs
//! of bounded size, merges the runs, and learns from the merge each node's name, each
//! directory's span and link count. What stays in memory is 5 bytes a node (where its
//! name went) and the directories.
//!
//! The builder gives up, with [`NotLean`], as soon as the archive turns out not to be
//! such an archive: a name given twice (found in the merge, before anything is
//! written), a member replacing a directory, more names than one table holds. The table
//! it writes is the one [`TreeBuilder`](super::TreeBuilder) writes, byte for byte (a
//! test holds them to that), so the caller falls back to that builder on [`NotLean`].

use super::nodes::{dirent, finish_record, member_parts, Finish, HashingWriter, Meta, NodeStore};
use super::read::NodeKind;
use super::{DirDefaults, MAX_NODES, NODE_LEN};
use crate::index::{IndexEntry, Kind};
use crate::read::convert::safe_path;
use crate::spill::Spill;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, Write};

/// The archive names something twice (or is otherwise beyond this builder).
#[derive(Debug)]
pub struct NotLean;

/// What adding a member came to.
pub enum Added {
    /// It is in the tree.
    Placed,
    /// It is left out (as [`TreeBuilder`](super::TreeBuilder) leaves it out).
    Skipped,
}

/// Bytes of records and blobs held in memory before the rest goes to temporary files.
const HELD: usize = 1 << 20;
/// Bytes of dirents sorted in memory at a time: one run.
const RUN_BYTES: usize = 2 << 20;
/// Read buffer of each run while they are merged.
const RUN_READ: usize = 64 << 10;
const NONE: u32 = u32::MAX;

/// See the module's doc.
pub struct LeanBuilder {
    nodes: NodeStore,
    defaults: DirDefaults,
    /// Directories by (directory, name).
    dirs: HashMap<(u32, Box<[u8]>), u32>,
    /// The paths hardlinks name as targets, and the node (and its kind code) at each
    /// once a member made it.
    targets: HashMap<Box<[u8]>, (u32, u8)>,
    wanted: HashSet<Box<[u8]>>,
    /// Nodes named by hardlinks too.
    linked: HashSet<u32>,
    /// Dirents as made: u32 directory, u32 node, u8 kind, u8 name length, the name.
    dirents: Spill,
    dirent_count: u64,
    names_len: u64,
    /// Bytes of dirents sorted in memory at a time.
    run_bytes: usize,
}

impl LeanBuilder {
    /// An empty tree with a root directory with `defaults`; `link_targets` are the
    /// paths hardlinks name (as [`safe_path`] makes them).
    pub fn new(defaults: DirDefaults, link_targets: HashSet<Box<[u8]>>) -> LeanBuilder {
        let mut b = LeanBuilder {
            nodes: NodeStore::new(HELD),
            defaults,
            dirs: HashMap::new(),
            targets: HashMap::new(),
            wanted: link_targets,
            linked: HashSet::new(),
            dirents: Spill::new(HELD, "the tree table"),
            dirent_count: 0,
            names_len: 0,
            run_bytes: RUN_BYTES,
        };
        b.nodes.push(0, &Meta::implicit_dir(&defaults), &[], &[]);
        b
    }

    /// Sorts dirents in runs of `bytes` (for tests: many runs from few members).
    #[cfg(test)]
    pub fn with_run_bytes(mut self, bytes: usize) -> LeanBuilder {
        self.run_bytes = bytes;
        self
    }

    /// Adds the member `e`, the next in archive order.
    pub fn add(&mut self, e: &IndexEntry) -> Result<Added, NotLean> {
        let Ok(path) = safe_path(&e.path) else {
            return Ok(Added::Skipped);
        };
        let comps = super::nodes::components(&path);
        let Some((&name, parents)) = comps.split_last() else {
            if e.kind != Kind::Dir {
                return Ok(Added::Skipped);
            }
            self.nodes.set_dir_meta(0, e);
            return Ok(Added::Placed);
        };
        if comps.iter().any(|c| c.len() > 255) {
            return Ok(Added::Skipped);
        }
        let room = self.names_len + path.as_bytes().len() as u64;
        if u64::from(self.nodes.len()) + comps.len() as u64 >= MAX_NODES || room >= u64::from(NONE)
        {
            return Err(NotLean);
        }
        let mut dir = 0u32;
        for &comp in parents {
            dir = match self.dirs.get(&(dir, comp.into())) {
                Some(&n) => n,
                None => {
                    let meta = Meta::implicit_dir(&self.defaults);
                    let node = self.nodes.push(dir, &meta, &[], &[]);
                    self.name(dir, comp, node, NodeKind::Dir.code())?;
                    node
                }
            };
        }
        let existing = self.dirs.get(&(dir, name.into())).copied();
        let (node, kind) = match (e.kind, existing) {
            (Kind::Dir, Some(n)) => {
                self.nodes.set_dir_meta(n, e);
                return Ok(Added::Placed);
            }
            // Something else in a directory's place replaces it.
            (_, Some(_)) => return Err(NotLean),
            (Kind::HardLink, None) => {
                let Ok(target) = safe_path(&e.link) else {
                    return Ok(Added::Skipped);
                };
                match self.targets.get(target.as_bytes()) {
                    Some(&(_, kind)) if kind == NodeKind::Dir.code() => return Ok(Added::Skipped),
                    Some(&(node, kind)) => {
                        self.linked.insert(node);
                        (node, kind)
                    }
                    None => return Ok(Added::Skipped),
                }
            }
            (_, None) => {
                let Ok((meta, target, extras)) = member_parts(e) else {
                    return Ok(Added::Skipped);
                };
                (
                    self.nodes.push(dir, &meta, target, &extras),
                    meta.kind.code(),
                )
            }
        };
        self.name(dir, name, node, kind)?;
        if self.wanted.contains(path.as_bytes()) {
            self.targets.insert(path.as_bytes().into(), (node, kind));
        }
        Ok(Added::Placed)
    }

    /// Records `name` in `dir` naming `node` (of kind code `kind`).
    fn name(&mut self, dir: u32, name: &[u8], node: u32, kind: u8) -> Result<(), NotLean> {
        if kind == NodeKind::Dir.code() {
            self.dirs.insert((dir, name.into()), node);
        }
        let pushed = self.dirents.push_with(|out| {
            out.extend_from_slice(&dir.to_le_bytes());
            out.extend_from_slice(&node.to_le_bytes());
            out.push(kind);
            out.push(name.len() as u8);
            out.extend_from_slice(name);
        });
        self.dirent_count += 1;
        self.names_len += name.len() as u64;
        pushed.map_err(|_| NotLean)
    }

    /// Writes the table (body and trailer) to `out` as
    /// [`TreeBuilder::write`](super::TreeBuilder::write) does; `Ok(Err(NotLean))`, with
    /// nothing written, when a name turns out to come twice.
    pub fn write(mut self, data_end: u64, out: &mut dyn Write) -> io::Result<Result<u64, NotLean>> {
        self.nodes.take_failed()?;
        let runs = sorted_runs(&self.dirents, self.run_bytes)?;
        self.dirents = Spill::new(1, "the tree table");
        let count = self.nodes.len() as usize;
        let mut plan = Plan {
            name_at: vec![NONE; count],
            name_len: vec![0; count],
            dirs: HashMap::new(),
            parents: HashMap::new(),
            nlink: HashMap::new(),
            dirents: Spill::new(HELD, "the tree table"),
            names: Spill::new(HELD, "the tree table"),
        };
        if merge(runs, |d| plan.take(d, &self.linked))?.is_err() {
            return Ok(Err(NotLean));
        }
        let mut w = HashingWriter::new(out);
        let mut records = self.nodes.records();
        let mut rec = [0u8; NODE_LEN as usize];
        for node in 0..count {
            records.read_exact(&mut rec)?;
            let made_in = u32::from_le_bytes([rec[64], rec[65], rec[66], rec[67]]);
            let id = node as u32;
            let dir = plan.dirs.get(&id).copied().unwrap_or_default();
            let finish = Finish {
                name: (plan.name_at[node] != NONE)
                    .then(|| (plan.name_len[node], plan.name_at[node])),
                parent: plan.parents.get(&id).copied().unwrap_or(made_in),
                nlink: if rec[0] == NodeKind::Dir.code() {
                    2 + dir.subdirs
                } else {
                    plan.nlink.get(&id).copied().unwrap_or(1)
                },
                span: (dir.first, dir.count),
            };
            finish_record(&mut rec, &finish, self.names_len);
            w.write_all(&rec)?;
        }
        drop(records);
        plan.dirents.copy_to(|b| w.write_all(b))?;
        plan.names.copy_to(|b| w.write_all(b))?;
        self.nodes.write_blobs(&mut w)?;
        let heap = self.names_len + self.nodes.blobs_len();
        w.finish(count as u64, self.dirent_count, heap, data_end)
            .map(Ok)
    }
}

/// A directory's dirents and subdirectories.
#[derive(Clone, Copy, Default)]
struct DirSpan {
    first: u32,
    count: u32,
    subdirs: u32,
}

/// What the merge learns, and the dirents and names it writes.
struct Plan {
    /// Per node: where its name is in the heap (`NONE`: it has none) and how long.
    name_at: Vec<u32>,
    name_len: Vec<u8>,
    dirs: HashMap<u32, DirSpan>,
    /// Nodes named by hardlinks: their parent (the directory of their first name in
    /// dirent order) and link count.
    parents: HashMap<u32, u32>,
    nlink: HashMap<u32, u32>,
    dirents: Spill,
    names: Spill,
}

/// One dirent as the runs hold it.
struct Dirent {
    dir: u32,
    node: u32,
    kind: u8,
    name: Vec<u8>,
}

impl Plan {
    /// Takes the next dirent in (directory, name) order.
    fn take(&mut self, d: &Dirent, linked: &HashSet<u32>) -> io::Result<()> {
        let index = self.dirents.len() / 16;
        let name_at = self.names.len() as u32;
        let span = self.dirs.entry(d.dir).or_insert(DirSpan {
            first: index as u32,
            ..DirSpan::default()
        });
        span.count += 1;
        let node = d.node as usize;
        if self.name_at[node] == NONE {
            self.name_at[node] = name_at;
            self.name_len[node] = d.name.len() as u8;
            if d.kind == NodeKind::Dir.code() {
                span.subdirs += 1;
            }
            if linked.contains(&d.node) {
                self.parents.insert(d.node, d.dir);
            }
        }
        if linked.contains(&d.node) {
            *self.nlink.entry(d.node).or_insert(0) += 1;
        }
        let len = d.name.len() as u8;
        self.dirents.push(&dirent(name_at, len, d.kind, d.node))?;
        self.names.push(&d.name)
    }
}

/// Reads the next dirent from `r`, or None at its end.
fn read_dirent(r: &mut impl Read) -> io::Result<Option<Dirent>> {
    let mut head = [0u8; 10];
    match r.read_exact(&mut head) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut name = vec![0u8; usize::from(head[9])];
    r.read_exact(&mut name)?;
    Ok(Some(Dirent {
        dir: u32::from_le_bytes([head[0], head[1], head[2], head[3]]),
        node: u32::from_le_bytes([head[4], head[5], head[6], head[7]]),
        kind: head[8],
        name,
    }))
}

fn write_dirent(w: &mut impl Write, d: &Dirent) -> io::Result<()> {
    w.write_all(&d.dir.to_le_bytes())?;
    w.write_all(&d.node.to_le_bytes())?;
    w.write_all(&[d.kind, d.name.len() as u8])?;
    w.write_all(&d.name)
}

/// A sorted run of dirents: in memory when there is only one, else in a file.
enum Run {
    Held(std::vec::IntoIter<Dirent>),
    File(BufReader<File>),
}

impl Run {
    fn next(&mut self) -> io::Result<Option<Dirent>> {
        match self {
            Run::Held(it) => Ok(it.next()),
            Run::File(r) => read_dirent(r),
        }
    }
}

/// Sorts `dirents` by (directory, name) in runs of about `run_bytes` of memory.
fn sorted_runs(dirents: &Spill, run_bytes: usize) -> io::Result<Vec<Run>> {
    let mut r = dirents.reader();
    let mut runs = Vec::new();
    let mut chunk = Vec::new();
    let mut bytes = 0;
    loop {
        let next = read_dirent(&mut r)?;
        let end = next.is_none();
        if let Some(d) = next {
            bytes += 10 + d.name.len() + 32;
            chunk.push(d);
        }
        if (end || bytes >= run_bytes) && !chunk.is_empty() {
            chunk.sort_unstable_by(|a, b| (a.dir, &a.name).cmp(&(b.dir, &b.name)));
            if end && runs.is_empty() {
                runs.push(Run::Held(std::mem::take(&mut chunk).into_iter()));
            } else {
                let mut w = BufWriter::with_capacity(RUN_READ, tempfile::tempfile()?);
                for d in chunk.drain(..) {
                    write_dirent(&mut w, &d)?;
                }
                let mut f = w.into_inner().map_err(|e| e.into_error())?;
                f.rewind()?;
                runs.push(Run::File(BufReader::with_capacity(RUN_READ, f)));
            }
            bytes = 0;
        }
        if end {
            return Ok(runs);
        }
    }
}

/// Merges the runs, passing each dirent in (directory, name) order to `take`;
/// `Ok(Err(NotLean))` at the first (directory, name) that comes twice.
fn merge(
    mut runs: Vec<Run>,
    mut take: impl FnMut(&Dirent) -> io::Result<()>,
) -> io::Result<Result<(), NotLean>> {
    let mut heads = BinaryHeap::new();
    let mut held: Vec<Option<Dirent>> = Vec::with_capacity(runs.len());
    for (i, run) in runs.iter_mut().enumerate() {
        let d = run.next()?;
        if let Some(d) = &d {
            heads.push(Reverse((d.dir, d.name.clone(), i)));
        }
        held.push(d);
    }
    let mut last: Option<(u32, Vec<u8>)> = None;
    while let Some(Reverse((dir, name, i))) = heads.pop() {
        if last
            .as_ref()
            .is_some_and(|(ld, ln)| *ld == dir && *ln == name)
        {
            return Ok(Err(NotLean));
        }
        if let Some(d) = held[i].take() {
            take(&d)?;
        }
        last = Some((dir, name));
        let next = runs[i].next()?;
        if let Some(d) = &next {
            heads.push(Reverse((d.dir, d.name.clone(), i)));
        }
        held[i] = next;
    }
    Ok(Ok(()))
}
