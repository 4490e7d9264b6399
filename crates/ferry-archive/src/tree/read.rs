//! Reading a tree table in place: each node, dirent or name is read from the file
//! when it is asked for (by `pread`, so a file changed or cut short underneath is an
//! error, not a crash), and checked before it is returned. The file may be any
//! [`ReadAt`]: a plain archive, or a compressed one read through its seek table.
//!
//! A table is trusted as a whole (checked once when opened, or by whoever opens it),
//! or, opened with [`Table::open_paged`], page by page: each 64 KiB page is checked
//! against its sum the first time it is read, so a lookup reads and checks a few pages
//! and a damaged one is still an error, never a wrong answer.

use super::extras::parse_extras;
pub use super::extras::Extras;
use super::{Trailer, DIRENT_LEN, FLAG_HASH, FLAG_MADE, NODE_LEN, PAGE_LEN, TRAILER_LEN};
use crate::read::archive::{fill_at, ReadAt};
use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};

/// A tree table that is damaged, or could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeError(pub String);

impl TreeError {
    /// An error saying `why`.
    pub fn new(why: impl Into<String>) -> TreeError {
        TreeError(why.into())
    }
}

impl fmt::Display for TreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TreeError {}

/// What a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// Regular file.
    File,
    /// Directory.
    Dir,
    /// Symbolic link.
    Symlink,
    /// Named pipe.
    Fifo,
    /// Character device.
    CharDevice,
    /// Block device.
    BlockDevice,
}

impl NodeKind {
    /// The code a node or dirent stores.
    pub fn code(self) -> u8 {
        match self {
            NodeKind::File => 0,
            NodeKind::Dir => 1,
            NodeKind::Symlink => 2,
            NodeKind::Fifo => 4,
            NodeKind::CharDevice => 5,
            NodeKind::BlockDevice => 6,
        }
    }

    pub(crate) fn from_code(c: u8) -> Option<NodeKind> {
        Some(match c {
            0 => NodeKind::File,
            1 => NodeKind::Dir,
            2 => NodeKind::Symlink,
            4 => NodeKind::Fifo,
            5 => NodeKind::CharDevice,
            6 => NodeKind::BlockDevice,
            _ => return None,
        })
    }
}

/// One node of the tree (see the module's doc for the fields' meaning).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// Its number: 0 is the root.
    pub id: u32,
    /// What it is.
    pub kind: NodeKind,
    /// Permission bits including setuid, setgid, sticky.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Modification time (seconds, nanoseconds).
    pub mtime: (i64, u32),
    /// Access time (seconds, nanoseconds).
    pub atime: (i64, u32),
    /// Size: a file's logical size, a symlink's target length.
    pub size: u64,
    /// File: first byte of its stored data in the archive; directory: first dirent;
    /// symlink: heap offset of its target; device: device number.
    pub a: u64,
    /// File: stored bytes; directory: number of dirents; symlink: target length.
    pub b: u64,
    /// The directory it was first found in (the root's parent is itself).
    pub parent: u32,
    /// How many names it has (a directory: 2 plus its subdirectories).
    pub nlink: u32,
    /// Where its name (as first found) is in the heap, and how long.
    pub name: (u64, u16),
    /// Where its extras are in the heap, and how long (0: none).
    pub extras: (u64, u32),
    /// A file: bytes of its member's tar headers before its data (0: not recorded,
    /// as in a version 1 table).
    pub head: u32,
    /// xxh3-128 of its content, where it was recorded.
    pub hash: Option<u128>,
    /// A directory the archive needs but never names (made with the table's defaults;
    /// always false in a table from before this was recorded).
    pub made: bool,
}

impl Node {
    /// Its stored data runs `(offset in the file, length)`, given its extras: a file
    /// stored whole is one run (or none when empty or all hole).
    pub fn runs(&self, extras: &Extras) -> Vec<(u64, u64)> {
        if !extras.runs.is_empty() {
            extras.runs.clone()
        } else if self.b > 0 {
            vec![(0, self.size)]
        } else {
            Vec::new()
        }
    }
}

/// A name in a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dirent {
    /// The name (one path component).
    pub name: Vec<u8>,
    /// What the node it names is.
    pub kind: NodeKind,
    /// The node.
    pub node: u32,
}

/// What a table is read from: a file of its own, or anything read at an offset,
/// shared (a compressed archive's decompressed stream).
pub enum TableFile {
    /// A file (an archive, or a cache file).
    File(File),
    /// Shared with others (the archive's data readers).
    Shared(Arc<dyn ReadAt + Send + Sync>),
}

impl From<File> for TableFile {
    fn from(f: File) -> TableFile {
        TableFile::File(f)
    }
}

impl ReadAt for TableFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        match self {
            TableFile::File(f) => ReadAt::read_at(f, buf, offset),
            TableFile::Shared(r) => r.read_at(buf, offset),
        }
    }
}

/// A tree table opened for reading (see the module's doc).
pub struct Table<R: ReadAt = TableFile> {
    file: R,
    /// Where the table starts in `file`, and its bytes before the trailer.
    base: u64,
    body: u64,
    /// Where nodes, dirents and the heap start in `file`.
    nodes_at: u64,
    dirents_at: u64,
    heap_at: u64,
    trailer: Trailer,
    checked: Checked,
    /// Content hashes of files larger than this are not given out (see
    /// [`Table::hashes_up_to`]).
    hashes_up_to: u64,
}

/// How what is read of a table is checked.
enum Checked {
    /// Not on each read: the table was checked whole (or is trusted by its opener).
    Whole,
    /// Page by page, each the first time it is read, against these sums; the pages
    /// checked are kept (at most [`PAGES_KEPT`]).
    Pages {
        sums: Vec<u64>,
        kept: Mutex<HashMap<u64, Arc<[u8]>>>,
    },
}

/// Checked pages kept at most (4 MiB): a lookup touches a few.
const PAGES_KEPT: usize = 64;

/// Directories with at most this many entries are read whole for a lookup.
const SMALL_DIR: u64 = 256;
/// Largest block of names read at once when listing a directory.
const NAME_BLOCK: u64 = 256 << 10;

impl<R: ReadAt> Table<R> {
    /// Opens the table that occupies `len` bytes of `file` from `base` (its trailer is
    /// the last 64). With `verify`, the whole body is read once and its checksums
    /// compared (reading, not keeping it: the memory used does not grow with the table).
    pub fn open(
        file: impl Into<R>,
        base: u64,
        len: u64,
        verify: bool,
    ) -> Result<Table<R>, TreeError> {
        let table = Table::open_unchecked(file.into(), base, len)?;
        if verify {
            table.verify()?;
        }
        table.check_root()
    }

    /// Opens the table as [`Table::open`] does, to be checked as it is read: each page
    /// the first time it is read (a table from before page sums is checked whole now).
    pub fn open_paged(file: impl Into<R>, base: u64, len: u64) -> Result<Table<R>, TreeError> {
        let mut table = Table::open_unchecked(file.into(), base, len)?;
        match table.trailer.version {
            1 => table.verify()?,
            _ => {
                table.checked = Checked::Pages {
                    sums: table.sums()?,
                    kept: Mutex::default(),
                }
            }
        }
        table.check_root()
    }

    fn check_root(self) -> Result<Table<R>, TreeError> {
        let root = self.node(0)?;
        if root.kind != NodeKind::Dir {
            return Err(TreeError::new("tree table: the root is not a directory"));
        }
        Ok(self)
    }

    /// The table with its trailer read and checked, nothing else.
    fn open_unchecked(file: R, base: u64, len: u64) -> Result<Table<R>, TreeError> {
        if len < TRAILER_LEN {
            return Err(TreeError::new("tree table: shorter than its trailer"));
        }
        let mut raw = [0u8; TRAILER_LEN as usize];
        let trailer_at = base + len - TRAILER_LEN;
        fill_at(&file, &mut raw, trailer_at)
            .map_err(|e| io_error("read the tree table's trailer", e))?;
        let trailer = Trailer::decode(&raw)?;
        let body = trailer
            .body_len()
            .filter(|&b| b == len - TRAILER_LEN)
            .ok_or_else(|| TreeError::new("tree table: its trailer does not fit its length"))?;
        let nodes_at = base;
        let dirents_at = nodes_at + trailer.nodes * NODE_LEN;
        let heap_at = dirents_at + trailer.dirents * DIRENT_LEN;
        Ok(Table {
            file,
            base,
            body,
            nodes_at,
            dirents_at,
            heap_at,
            trailer,
            checked: Checked::Whole,
            hashes_up_to: u64::MAX,
        })
    }

    /// The table with the content hashes of files larger than `max` bytes left out (as
    /// if not recorded): a table made with an index older than
    /// [`crate::index::SKIPPING_HASH_SINCE`] may hold a hash over holes that the
    /// current hash skips, and such a hash is left unchecked rather than wrongly failed.
    pub fn hashes_up_to(mut self, max: u64) -> Table<R> {
        self.hashes_up_to = max;
        self
    }

    /// Reads the whole body once and compares its checksums with the trailer's (the
    /// memory used does not grow with the table).
    pub fn verify(&self) -> Result<(), TreeError> {
        let records = self.records_len();
        let sums = match self.trailer.version {
            1 => None,
            _ => Some(self.sums()?),
        };
        let mut whole = xxhash_rust::xxh3::Xxh3::new();
        let mut buf = vec![0u8; PAGE_LEN.min(self.body).max(1) as usize];
        let mut at = 0;
        let end = if sums.is_some() { records } else { self.body };
        while at < end {
            let n = buf.len().min((end - at) as usize);
            self.read_raw(&mut buf[..n], self.base + at, "body")?;
            match &sums {
                Some(sums) => {
                    if sums.get((at / PAGE_LEN) as usize)
                        != Some(&xxhash_rust::xxh3::xxh3_64(&buf[..n]))
                    {
                        return Err(damaged());
                    }
                }
                None => whole.update(&buf[..n]),
            }
            at += n as u64;
        }
        if sums.is_none() && whole.digest() != self.trailer.body_hash {
            return Err(damaged());
        }
        Ok(())
    }

    /// Bytes of nodes, dirents and heap.
    fn records_len(&self) -> u64 {
        self.trailer.records_len().unwrap_or(self.body)
    }

    /// The page sums, checked against the trailer.
    fn sums(&self) -> Result<Vec<u64>, TreeError> {
        let records = self.records_len();
        let mut raw = vec![0u8; (self.body - records) as usize];
        self.read_raw(&mut raw, self.base + records, "page sums")?;
        if xxhash_rust::xxh3::xxh3_64(&raw) != self.trailer.body_hash {
            return Err(damaged());
        }
        Ok(raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect())
    }

    /// Page `page` of the records, checked against its sum (kept once checked).
    fn page(
        &self,
        page: u64,
        sums: &[u64],
        kept: &Mutex<HashMap<u64, Arc<[u8]>>>,
    ) -> Result<Arc<[u8]>, TreeError> {
        if let Some(p) = kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&page)
        {
            return Ok(p.clone());
        }
        let from = page * PAGE_LEN;
        let len = PAGE_LEN.min(self.records_len().saturating_sub(from));
        let mut raw = vec![0u8; len as usize];
        self.read_raw(&mut raw, self.base + from, "body")?;
        if sums.get(page as usize) != Some(&xxhash_rust::xxh3::xxh3_64(&raw)) {
            return Err(damaged());
        }
        let raw: Arc<[u8]> = raw.into();
        let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() >= PAGES_KEPT {
            kept.clear();
        }
        kept.insert(page, raw.clone());
        Ok(raw)
    }

    /// Bytes of the table, trailer included.
    pub fn byte_len(&self) -> u64 {
        self.body + TRAILER_LEN
    }

    /// What the trailer says.
    pub fn trailer(&self) -> &Trailer {
        &self.trailer
    }

    /// The number of nodes.
    pub fn len(&self) -> u64 {
        self.trailer.nodes
    }

    /// Never true: a table has at least its root.
    pub fn is_empty(&self) -> bool {
        self.trailer.nodes == 0
    }

    /// Node `id`, checked.
    pub fn node(&self, id: u32) -> Result<Node, TreeError> {
        Ok(self.nodes(id, 1)?.remove(0))
    }

    /// `count` nodes from `first` on, checked, read at once.
    pub fn nodes(&self, first: u32, count: u32) -> Result<Vec<Node>, TreeError> {
        let end = u64::from(first) + u64::from(count);
        if end > self.trailer.nodes || count == 0 {
            return Err(TreeError::new(format!(
                "tree table: node {first}..{end} past its {} nodes",
                self.trailer.nodes
            )));
        }
        let mut raw = vec![0u8; (u64::from(count) * NODE_LEN) as usize];
        self.read(
            &mut raw,
            self.nodes_at + u64::from(first) * NODE_LEN,
            "nodes",
        )?;
        raw.chunks_exact(NODE_LEN as usize)
            .zip(first..)
            .map(|(r, id)| self.decode_node(id, r))
            .collect()
    }

    fn decode_node(&self, id: u32, r: &[u8]) -> Result<Node, TreeError> {
        let bad = |why: &str| TreeError::new(format!("tree table: node {id}: {why}"));
        let (u16at, u32at, u64at) = (
            |i: usize| u16::from_le_bytes([r[i], r[i + 1]]),
            |i: usize| u32::from_le_bytes(r[i..i + 4].try_into().unwrap_or_default()),
            |i: usize| u64::from_le_bytes(r[i..i + 8].try_into().unwrap_or_default()),
        );
        let kind = NodeKind::from_code(r[0]).ok_or_else(|| bad("unknown kind"))?;
        let n = Node {
            id,
            kind,
            mode: u32at(4),
            uid: u32at(8),
            gid: u32at(12),
            mtime: (u64at(16) as i64, u32at(24)),
            atime: (u64at(32) as i64, u32at(28)),
            size: u64at(40),
            a: u64at(48),
            b: u64at(56),
            parent: u32at(64),
            nlink: u32at(68),
            name: (u64at(72), u16at(2)),
            extras: (u64at(80), u32at(88)),
            head: u32at(92),
            hash: (r[1] & FLAG_HASH != 0 && u64at(40) <= self.hashes_up_to)
                .then(|| u128::from_le_bytes(r[96..112].try_into().unwrap_or_default())),
            made: kind == NodeKind::Dir && r[1] & FLAG_MADE != 0,
        };
        if n.mode > 0o7777 || n.mtime.1 >= 1_000_000_000 || n.atime.1 >= 1_000_000_000 {
            return Err(bad("mode or time out of range"));
        }
        if u64::from(n.parent) >= self.trailer.nodes {
            return Err(bad("parent out of range"));
        }
        self.heap_range(n.name.0, u64::from(n.name.1))
            .and(self.heap_range(n.extras.0, u64::from(n.extras.1)))
            .map_err(|_| bad("name or extras outside the heap"))?;
        let within = |end: Option<u64>, limit: u64| end.is_some_and(|e| e <= limit);
        let fits = match kind {
            NodeKind::File => {
                within(n.a.checked_add(n.b), self.trailer.data_end)
                    && (n.extras.1 > 0 || n.b == n.size || n.b == 0)
                    && u64::from(n.head) <= n.a
            }
            NodeKind::Dir => within(n.a.checked_add(n.b), self.trailer.dirents),
            NodeKind::Symlink => {
                within(n.a.checked_add(n.b), self.trailer.heap) && n.b > 0 && n.b <= 1 << 20
            }
            _ => true,
        };
        if !fits {
            return Err(bad("data, entries or target out of range"));
        }
        Ok(n)
    }

    /// `len` bytes of heap from `off`, checked to lie inside it.
    fn heap_range(&self, off: u64, len: u64) -> Result<u64, TreeError> {
        match off.checked_add(len) {
            Some(end) if end <= self.trailer.heap => Ok(self.heap_at + off),
            _ => Err(TreeError::new(
                "tree table: a heap range lies outside the heap",
            )),
        }
    }

    /// Reads `len` heap bytes at `off`.
    pub fn heap_bytes(&self, off: u64, len: u64) -> Result<Vec<u8>, TreeError> {
        let at = self.heap_range(off, len)?;
        let mut out = vec![0u8; len as usize];
        self.read(&mut out, at, "heap")?;
        Ok(out)
    }

    /// A symlink's target.
    pub fn target(&self, n: &Node) -> Result<Vec<u8>, TreeError> {
        self.heap_bytes(n.a, n.b)
    }

    /// The names of `nodes` as first found, read at once where they lie together in
    /// the heap (as the names of nodes numbered together do).
    pub fn names(&self, nodes: &[&Node]) -> Result<Vec<Vec<u8>>, TreeError> {
        let ranges: Vec<(u64, u64)> = nodes
            .iter()
            .map(|n| (n.name.0, u64::from(n.name.1)))
            .collect();
        self.heap_pieces(&ranges)
    }

    /// The heap bytes of each `(offset, length)` range (an empty one: none), read in
    /// one piece where they lie within [`NAME_BLOCK`] of one another, else one at a time.
    fn heap_pieces(&self, ranges: &[(u64, u64)]) -> Result<Vec<Vec<u8>>, TreeError> {
        let used = || ranges.iter().filter(|r| r.1 > 0);
        let lo = used().map(|r| r.0).min().unwrap_or(0);
        let hi = used().map(|r| r.0.saturating_add(r.1)).max().unwrap_or(0);
        if hi.saturating_sub(lo) > NAME_BLOCK {
            return ranges.iter().map(|&(o, l)| self.heap_bytes(o, l)).collect();
        }
        let block = self.heap_bytes(lo, hi - lo)?;
        Ok(ranges
            .iter()
            .map(|&(o, l)| match l {
                0 => Vec::new(),
                _ => {
                    let at = (o - lo) as usize;
                    block[at..at + l as usize].to_vec()
                }
            })
            .collect())
    }

    /// The extras of `nodes` ([`Table::extras`]), read at once where they lie together
    /// in the heap.
    pub fn extras_of(&self, nodes: &[&Node]) -> Result<Vec<Extras>, TreeError> {
        let ranges: Vec<(u64, u64)> = nodes
            .iter()
            .map(|n| (n.extras.0, u64::from(n.extras.1)))
            .collect();
        let raw = self.heap_pieces(&ranges)?;
        nodes
            .iter()
            .zip(raw)
            .map(|(n, raw)| parse_extras(n, &raw))
            .collect()
    }

    /// A node's name as first found (empty for the root).
    pub fn name(&self, n: &Node) -> Result<Vec<u8>, TreeError> {
        self.heap_bytes(n.name.0, u64::from(n.name.1))
    }

    /// A node's sparse runs and xattrs, checked against the node (runs inside its
    /// size, in any order, adding up to its stored bytes).
    pub fn extras(&self, n: &Node) -> Result<Extras, TreeError> {
        if n.extras.1 == 0 {
            return Ok(Extras::default());
        }
        parse_extras(n, &self.heap_bytes(n.extras.0, u64::from(n.extras.1))?)
    }

    /// Up to `max` entries of directory `dir`, from its entry number `from` on.
    pub fn dirents(&self, dir: &Node, from: u64, max: usize) -> Result<Vec<Dirent>, TreeError> {
        if dir.kind != NodeKind::Dir || from >= dir.b {
            return Ok(Vec::new());
        }
        let count = (dir.b - from).min(max as u64);
        let mut raw = vec![0u8; (count * DIRENT_LEN) as usize];
        self.read(
            &mut raw,
            self.dirents_at + (dir.a + from) * DIRENT_LEN,
            "dirents",
        )?;
        let heads: Vec<(u64, u16, u8, u32)> = raw
            .chunks_exact(DIRENT_LEN as usize)
            .map(|r| {
                (
                    u64::from_le_bytes(r[..8].try_into().unwrap_or_default()),
                    u16::from_le_bytes([r[8], r[9]]),
                    r[10],
                    u32::from_le_bytes(r[12..16].try_into().unwrap_or_default()),
                )
            })
            .collect();
        // The names of one directory usually lie together: read them at once.
        let lo = heads.iter().map(|h| h.0).min().unwrap_or(0);
        let hi = heads
            .iter()
            .map(|h| h.0.saturating_add(u64::from(h.1)))
            .max()
            .unwrap_or(0);
        let block = if hi - lo <= NAME_BLOCK {
            Some((lo, self.heap_bytes(lo, hi - lo)?))
        } else {
            None
        };
        heads
            .into_iter()
            .map(|(off, len, kind, node)| {
                let name = match &block {
                    Some((lo, b)) => {
                        b[(off - lo) as usize..(off - lo) as usize + usize::from(len)].to_vec()
                    }
                    None => self.heap_bytes(off, u64::from(len))?,
                };
                self.dirent(dir, name, kind, node)
            })
            .collect()
    }

    fn dirent(&self, dir: &Node, name: Vec<u8>, kind: u8, node: u32) -> Result<Dirent, TreeError> {
        let kind = NodeKind::from_code(kind);
        match kind {
            Some(kind)
                if u64::from(node) < self.trailer.nodes
                    && node != 0
                    && !name.is_empty()
                    && name != b"."
                    && name != b".."
                    && !name.contains(&b'/')
                    && !name.contains(&0) =>
            {
                Ok(Dirent { name, kind, node })
            }
            _ => Err(TreeError::new(format!(
                "tree table: directory node {}: a damaged entry",
                dir.id
            ))),
        }
    }

    /// The entry of directory `dir` named `name`, if there is one.
    pub fn lookup(&self, dir: &Node, name: &[u8]) -> Result<Option<Dirent>, TreeError> {
        if dir.kind != NodeKind::Dir || dir.b == 0 {
            return Ok(None);
        }
        if dir.b <= SMALL_DIR {
            let all = self.dirents(dir, 0, SMALL_DIR as usize)?;
            return Ok(all
                .binary_search_by(|d| d.name.as_slice().cmp(name))
                .ok()
                .and_then(|i| all.into_iter().nth(i)));
        }
        let (mut lo, mut hi) = (0u64, dir.b);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let Some(d) = self.dirents(dir, mid, 1)?.pop() else {
                return Ok(None);
            };
            match d.name.as_slice().cmp(name) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(Some(d)),
            }
        }
        Ok(None)
    }

    /// The path of node `id` as first found, for messages (`?` where it cannot be
    /// told; never loops on a damaged table).
    pub fn path_of(&self, id: u32) -> Vec<u8> {
        let mut parts = Vec::new();
        let mut at = id;
        for _ in 0..4096 {
            if at == 0 {
                break;
            }
            match self.node(at).and_then(|n| Ok((self.name(&n)?, n.parent))) {
                Ok((name, parent)) => {
                    parts.push(name);
                    at = parent;
                }
                Err(_) => {
                    parts.push(b"?".to_vec());
                    break;
                }
            }
        }
        parts.reverse();
        parts.join(&b'/')
    }

    /// Reads `buf` at `at`, checked as the table is (see [`Checked`]).
    fn read(&self, buf: &mut [u8], at: u64, what: &str) -> Result<(), TreeError> {
        let Checked::Pages { sums, kept } = &self.checked else {
            return self.read_raw(buf, at, what);
        };
        let mut rel = at - self.base;
        let mut done = 0;
        while done < buf.len() {
            let page = self.page(rel / PAGE_LEN, sums, kept)?;
            let from = (rel % PAGE_LEN) as usize;
            let n = (buf.len() - done).min(page.len().saturating_sub(from));
            if n == 0 {
                return Err(io_error(
                    &format!("read the tree table's {what}"),
                    io::ErrorKind::UnexpectedEof.into(),
                ));
            }
            buf[done..done + n].copy_from_slice(&page[from..from + n]);
            done += n;
            rel += n as u64;
        }
        Ok(())
    }

    fn read_raw(&self, buf: &mut [u8], at: u64, what: &str) -> Result<(), TreeError> {
        fill_at(&self.file, buf, at)
            .map_err(|e| io_error(&format!("read the tree table's {what}"), e))
    }
}

fn damaged() -> TreeError {
    TreeError::new("tree table: checksum mismatch (damaged)")
}

fn io_error(what: &str, e: io::Error) -> TreeError {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        TreeError::new(format!("{what}: the file is shorter than the table says"))
    } else {
        TreeError::new(format!("{what}: {e}"))
    }
}
