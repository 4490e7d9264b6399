//! Checking a tree table against the tar it describes, before the table is served.
//!
//! A ferry archive carries its own table, and whoever made the archive made the table
//! and its checksums: a crafted one could point a member at another member's data, or
//! at bytes inside a member's data that look like a tar header (a tar stored in the
//! tar), and a mount would then serve bytes that no extraction of the archive gives.
//! So before a table an archive carries is served, or an EROFS image is made of it,
//! [`check_against_tar`] reads the tar's headers (never its data) and checks that:
//!
//! - the file nodes, taken in the order of their data, occupy disjoint extents (headers
//!   then stored data) inside the tar;
//! - walking the tar's headers from the end of one file's member to the next (what lies
//!   between them in an archive ferry wrote is header-only members: directories,
//!   symlinks, links; any member found there is stepped over by its own size) lands
//!   exactly on each file node's first header, so every file starts at a member
//!   boundary of the real archive, never inside another member's data;
//! - that member's headers say what the node says ([`header_agrees`]): the path it was
//!   first reached by, kind, sizes, place of the data, sparse map, mode, owner (ids,
//!   and names where the table keeps them), times and xattrs.
//!
//! It costs one read of a few hundred bytes to a few KiB per file (its headers and the
//! header-only members before it), about what listing the archive with `tar -t` reads.
//! What a table says of directories, symlinks and devices is not checked against the
//! tar (their members carry no data a node points at); nor whether the table leaves a
//! member out: a crafted table can show less than the archive holds, or other
//! attributes for entries without data, never another member's bytes.

use super::read::{Extras, Node, NodeKind, Table, TreeError};
use crate::read::archive::{fill_at, At, ReadAt, MAX_HEADERS};
use crate::read::convert::safe_path;
use crate::tar::{Reader, TarEntry, TarKind};
use ferry_core::entry::RelPath;
use std::collections::HashMap;
use std::io::{BufReader, Read};

/// Nodes read at once.
const BATCH: u32 = 4096;
/// Bytes between one file's data and the next file's data read in one piece; a larger
/// gap is walked by a reader that seeks over members' data.
const WINDOW: u64 = 1 << 20;

/// What a check read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checked {
    /// File nodes checked.
    pub files: u64,
    /// Tar members whose headers were read (the files' and those between them).
    pub members: u64,
}

/// One file node's extent in the tar: its first header, its data, its stored bytes.
#[derive(Clone, Copy, Debug)]
struct Extent {
    header: u64,
    data: u64,
    stored: u64,
    id: u32,
}

/// Checks every file node of `table` against the tar read from `tar`, whose data ends
/// at the table's `data_end` (see the module's doc). The error names the node's path
/// and what differs.
///
/// A table ferry wrote numbers files in archive order, so the nodes are taken a batch
/// at a time, as they are read, holding nothing but the batch and the directories'
/// paths; a table in another order is checked in the order of its files' data, each
/// node read again.
pub fn check_against_tar<R: ReadAt + Sync>(
    table: &Table<R>,
    tar: &(impl ReadAt + Sync + ?Sized),
) -> Result<Checked, TreeError> {
    check_against_tar_reporting(table, tar, &|_| ())
}

/// [`check_against_tar`], saying how far it has got as it goes: after `passed(n)`,
/// every file node numbered below `n` has passed (its member lies at a member boundary
/// of the real archive and its headers agree), so a mount can serve those files' data
/// before the whole check ends. A table whose files are not numbered in the order of
/// their data says nothing until the check returns. Until it returns `Ok`, nothing is
/// known of the other files: one of them may still lie inside a passed file's member,
/// which fails the check then (the passed file's bytes are its own all the same).
pub fn check_against_tar_reporting<R: ReadAt + Sync>(
    table: &Table<R>,
    tar: &(impl ReadAt + Sync + ?Sized),
    passed: &(dyn Fn(u32) + Sync),
) -> Result<Checked, TreeError> {
    let mut walk = Walk::new(table, tar);
    let count = u32::try_from(table.len()).unwrap_or(u32::MAX);
    let mut first = 0u32;
    while first < count {
        let n = BATCH.min(count - first);
        let batch = table.nodes(first, n)?;
        let files: Vec<&Node> = batch.iter().filter(|n| n.kind == NodeKind::File).collect();
        let mut extents = Vec::with_capacity(files.len());
        for f in &files {
            extents.push(extent_of(table, f)?);
        }
        if extents.iter().any(|e| e.header < walk.from) || !extents.is_sorted_by_key(|e| e.header) {
            return check_in_data_order(table, tar);
        }
        let names = table.names(&files)?;
        let extras = table.extras_of(&files)?;
        walk = walk.batch(&files, &extents, names, extras)?;
        passed(first + n);
        first += n;
    }
    Ok(walk.checked)
}

/// [`check_against_tar`] for a table whose files are not numbered in the order of
/// their data: all their extents, sorted.
fn check_in_data_order<R: ReadAt + Sync>(
    table: &Table<R>,
    tar: &(impl ReadAt + Sync + ?Sized),
) -> Result<Checked, TreeError> {
    let mut extents = Vec::new();
    let count = u32::try_from(table.len()).unwrap_or(u32::MAX);
    let mut first = 0u32;
    while first < count {
        let n = BATCH.min(count - first);
        for node in table.nodes(first, n)? {
            if node.kind == NodeKind::File {
                extents.push(extent_of(table, &node)?);
            }
        }
        first += n;
    }
    extents.sort_unstable_by_key(|e| e.header);
    let mut walk = Walk::new(table, tar);
    for e in &extents {
        walk.file(&table.node(e.id)?, e, None, None)?;
    }
    Ok(walk.checked)
}

/// The walk along the tar, from one file's member to the next.
struct Walk<'a, R: ReadAt, T: ReadAt + ?Sized> {
    table: &'a Table<R>,
    tar: &'a T,
    paths: DirPaths,
    /// Where the walk stands: the end of the last file's member.
    from: u64,
    /// The last file checked.
    before: Option<u32>,
    checked: Checked,
}

impl<'a, R: ReadAt + Sync, T: ReadAt + Sync + ?Sized> Walk<'a, R, T> {
    /// Checks a batch of files (numbered in the order of their data), its two halves
    /// on two threads: the second half's walk starts where the first half's last file
    /// ends by what the table says, which the first half then checks.
    fn batch(
        mut self,
        files: &[&Node],
        extents: &[Extent],
        mut names: Vec<Vec<u8>>,
        mut extras: Vec<Extras>,
    ) -> Result<Self, TreeError> {
        let half = files.len() / 2;
        if half < 64 {
            for (((node, e), name), x) in files.iter().zip(extents).zip(names).zip(extras) {
                self.file(node, e, Some(name), Some(x))?;
            }
            return Ok(self);
        }
        let last = &extents[half - 1];
        let mut second = Walk {
            table: self.table,
            tar: self.tar,
            paths: DirPaths::default(),
            from: (last.data + last.stored).next_multiple_of(512),
            before: Some(last.id),
            checked: Checked::default(),
        };
        let (later, later_extras) = (names.split_off(half), extras.split_off(half));
        let run = move |w: &mut Walk<'a, R, T>,
                        range: std::ops::Range<usize>,
                        names: Vec<Vec<u8>>,
                        extras: Vec<Extras>| {
            let nodes = files[range.clone()].iter().zip(&extents[range]);
            for (((node, e), name), x) in nodes.zip(names).zip(extras) {
                w.file(node, e, Some(name), Some(x))?;
            }
            Ok::<(), TreeError>(())
        };
        let (a, b, second) = std::thread::scope(|scope| {
            let other = scope.spawn(move || {
                let done = run(&mut second, half..files.len(), later, later_extras);
                (done, second)
            });
            let mine = run(&mut self, 0..half, names, extras);
            match other.join() {
                Ok((done, walked)) => (mine, done, Some(walked)),
                Err(_) => (
                    mine,
                    Err(TreeError::new("tree table check: a thread panicked")),
                    None,
                ),
            }
        });
        let second = second.ok_or_else(|| TreeError::new("tree table check: a thread panicked"))?;
        a.and(b)?;
        self.checked.files += second.checked.files;
        self.checked.members += second.checked.members;
        self.from = second.from;
        self.before = second.before;
        Ok(self)
    }

    fn new(table: &'a Table<R>, tar: &'a T) -> Self {
        Walk {
            table,
            tar,
            paths: DirPaths::default(),
            from: 0,
            before: None,
            checked: Checked::default(),
        }
    }

    /// Checks file `node` (its extent `e`, its name and extras if already read) and
    /// moves past it.
    fn file(
        &mut self,
        node: &Node,
        e: &Extent,
        name: Option<Vec<u8>>,
        extras: Option<Extras>,
    ) -> Result<(), TreeError> {
        let table = self.table;
        if let Some(prev) = self.before.filter(|_| e.header < self.from) {
            let why = format!(
                "its headers at byte {} lie inside the member of {}, which ends at byte {}",
                e.header,
                ferry_core::entry::escaped(&table.path_of(prev)),
                self.from
            );
            return Err(wrong(table, node, &why));
        }
        if e.data
            .checked_add(e.stored)
            .is_none_or(|end| end > table.trailer().data_end)
        {
            return Err(wrong(table, node, "its data lies past the end of the tar"));
        }
        let (member, walked) =
            walk_to(self.tar, self.from, e).map_err(|why| wrong(table, node, &why))?;
        self.checked.members += walked;
        let extras = match extras {
            Some(x) => x,
            None => table.extras(node)?,
        };
        let named = match node.nlink {
            // A file of one name: the path it was first reached by.
            0 | 1 => {
                let name = match name {
                    Some(n) => n,
                    None => table.name(node)?,
                };
                Some(self.paths.path_of(table, node, &name)?)
            }
            // Of several: its data is under one of them, which must lead to it.
            _ => {
                let leads_to = match safe_path(&member.path) {
                    Ok(path) => resolve(table, &path)?,
                    Err(_) => None,
                };
                if leads_to != Some(node.id) {
                    return Err(wrong(table, node, "its tar header names another file"));
                }
                None
            }
        };
        header_agrees(&member, node, &extras, named.as_deref())
            .map_err(|what| wrong(table, node, &format!("its tar header says another {what}")))?;
        self.checked.files += 1;
        self.from = (e.data + e.stored).next_multiple_of(512);
        self.before = Some(e.id);
        Ok(())
    }
}

/// The extent of file node `n`; an error for a node whose headers are not recorded
/// (a table from before they were: such a table cannot be checked).
fn extent_of<R: ReadAt>(table: &Table<R>, n: &Node) -> Result<Extent, TreeError> {
    let head = u64::from(n.head);
    if head == 0 || head > MAX_HEADERS || head > n.a {
        return Err(wrong(table, n, "its headers' place is not recorded"));
    }
    Ok(Extent {
        header: n.a - head,
        data: n.a,
        stored: n.b,
        id: n.id,
    })
}

/// Walks the tar's members from offset `from` (a member boundary) to the one whose
/// headers start at `e.header`, which must be one; returns it and how many members were
/// read. Members before it must end before it starts.
fn walk_to(tar: &(impl ReadAt + ?Sized), from: u64, e: &Extent) -> Result<(TarEntry, u64), String> {
    if e.data - from <= WINDOW {
        let mut bytes = vec![0u8; (e.data - from) as usize];
        fill_at(tar, &mut bytes, from).map_err(|err| format!("read its headers: {err}"))?;
        return walk(Reader::new(&bytes[..]), from, e);
    }
    let at = At {
        file: &tar,
        pos: from,
    };
    let r = Reader::with_skip(BufReader::with_capacity(64 << 10, at), |r, n| {
        r.seek_relative(n as i64)
    });
    walk(r, from, e)
}

fn walk<T: Read>(mut r: Reader<T>, from: u64, e: &Extent) -> Result<(TarEntry, u64), String> {
    let mut members = 0;
    loop {
        let t = r
            .next_entry()
            .map_err(|err| format!("reading the tar's headers before it: {err}"))?
            .ok_or("the tar ends before its headers")?;
        members += 1;
        let at = from + t.header_offset;
        if at == e.header {
            return Ok((t, members));
        }
        let end = (from + t.data_offset)
            .checked_add(t.stored)
            .map(|end| end.next_multiple_of(512));
        if at > e.header || end.is_none_or(|end| end > e.header) {
            return Err(format!(
                "its headers at byte {} lie inside member {} of the tar",
                e.header,
                ferry_core::entry::escaped(&t.path)
            ));
        }
    }
}

/// The node the (safe) member path `path` leads to in `table`, if any.
pub(crate) fn resolve<R: ReadAt>(
    table: &Table<R>,
    path: &RelPath,
) -> Result<Option<u32>, TreeError> {
    let mut node = table.node(0)?;
    if path.is_root() {
        return Ok(Some(0));
    }
    for name in path.as_bytes().split(|&b| b == b'/') {
        // A lookup in anything but a directory finds nothing.
        match table.lookup(&node, name)? {
            Some(d) => node = table.node(d.node)?,
            None => return Ok(None),
        }
    }
    Ok(Some(node.id))
}

/// Whether member `t`'s headers say what file node `n` (with `extras`) says; `path`,
/// when given, is the path the node was first reached by. What differs, if not.
pub fn header_agrees(
    t: &TarEntry,
    n: &Node,
    extras: &Extras,
    path: Option<&[u8]>,
) -> Result<(), &'static str> {
    if let Some(path) = path {
        if safe_path(&t.path).ok().as_ref().map(|p| p.as_bytes()) != Some(path) {
            return Err("path");
        }
    }
    if t.kind != TarKind::File {
        return Err("kind");
    }
    if (t.size, t.stored, t.data_offset - t.header_offset) != (n.size, n.b, u64::from(n.head)) {
        return Err("data size or place");
    }
    if t.sparse.as_deref().unwrap_or_default() != extras.runs.as_slice() {
        return Err("sparse map");
    }
    if (t.mode, t.uid, t.gid) != (n.mode, n.uid, n.gid) {
        return Err("mode or owner");
    }
    t.times_agree(n.mtime, n.atime)?;
    if t.xattrs != extras.xattrs {
        return Err("set of xattrs");
    }
    // A table from before names were kept has none (the mount then shows the ids,
    // checked above); one that names an owner names the header's.
    let named =
        |kept: &[u8], header: &Option<Vec<u8>>| kept.is_empty() || header.as_deref() == Some(kept);
    if !named(&extras.user, &t.uname) || !named(&extras.group, &t.gname) {
        return Err("owner or group name");
    }
    Ok(())
}

/// A table error naming node `n`'s path.
fn wrong<R: ReadAt>(table: &Table<R>, n: &Node, why: &str) -> TreeError {
    TreeError::new(format!(
        "tree table: {}: {why} (the table does not describe this archive)",
        ferry_core::entry::escaped(&table.path_of(n.id))
    ))
}

/// The paths of directories, as found (each resolved once).
#[derive(Default)]
struct DirPaths {
    known: HashMap<u32, Vec<u8>>,
}

impl DirPaths {
    /// The path node `n` (named `name`) was first reached by: its parent's path and
    /// its name.
    fn path_of<R: ReadAt>(
        &mut self,
        table: &Table<R>,
        n: &Node,
        name: &[u8],
    ) -> Result<Vec<u8>, TreeError> {
        let mut path = self.dir(table, n.parent)?.clone();
        if !path.is_empty() {
            path.push(b'/');
        }
        path.extend_from_slice(name);
        Ok(path)
    }

    /// The path of directory `id` (the root's is empty).
    fn dir<R: ReadAt>(&mut self, table: &Table<R>, id: u32) -> Result<&Vec<u8>, TreeError> {
        if !self.known.contains_key(&id) {
            // Up to a directory already known (or the root), then back down.
            let mut chain = Vec::new();
            let mut at = id;
            while at != 0 && !self.known.contains_key(&at) {
                if chain.len() as u64 > table.len() {
                    return Err(TreeError::new("tree table: a directory is its own parent"));
                }
                let d = table.node(at)?;
                chain.push((at, table.name(&d)?));
                at = d.parent;
            }
            let mut path = self.known.get(&at).cloned().unwrap_or_default();
            for (d, name) in chain.into_iter().rev() {
                if !path.is_empty() {
                    path.push(b'/');
                }
                path.extend_from_slice(&name);
                self.known.insert(d, path.clone());
            }
        }
        Ok(self.known.entry(id).or_default())
    }
}
