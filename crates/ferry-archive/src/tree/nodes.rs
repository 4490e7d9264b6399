//! What both tree builders share: the node records and heap blobs (symlink targets,
//! extras) written as members arrive, kept in [`Spill`]s so that only their newest part
//! stays in memory, and the fields of a record filled in at the end.

use super::{read::NodeKind, DirDefaults, FLAG_HASH, FLAG_MADE, NODE_LEN};
use crate::index::{IndexEntry, Kind, Names};
use crate::spill::Spill;
use ferry_core::entry::RelPath;
use std::io::{self, Read, Write};
use xxhash_rust::xxh3::Xxh3;

/// One node record.
pub(super) type Record = [u8; NODE_LEN as usize];

/// What is known of a node when it is made.
pub(super) struct Meta {
    pub kind: NodeKind,
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
    /// File: bytes of its member's headers, before its data (0: too many to say).
    head: u32,
    hash: Option<u128>,
    /// A directory the archive needs but never names.
    made: bool,
}

impl Meta {
    /// Member `e`'s metadata as a node of `kind`.
    pub fn of(e: &IndexEntry, kind: NodeKind) -> Meta {
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
            head: match kind {
                NodeKind::File => {
                    u32::try_from(e.data_offset.saturating_sub(e.header_offset)).unwrap_or(0)
                }
                _ => 0,
            },
            hash: e.hash.filter(|_| kind == NodeKind::File),
            made: false,
        }
    }

    /// A directory the archive needs but never names.
    pub fn implicit_dir(d: &DirDefaults) -> Meta {
        Meta {
            kind: NodeKind::Dir,
            mode: d.mode,
            uid: d.uid,
            gid: d.gid,
            mtime: d.mtime,
            atime: d.mtime,
            size: 0,
            a: 0,
            b: 0,
            head: 0,
            hash: None,
            made: true,
        }
    }
}

/// The components of a member's (safe) path; none for the root.
pub(super) fn components(path: &RelPath) -> Vec<&[u8]> {
    if path.is_root() {
        Vec::new()
    } else {
        path.as_bytes().split(|&b| b == b'/').collect()
    }
}

/// The node a member that is not a hardlink makes: its metadata, symlink target and
/// extras; `Err` says why it makes none.
pub(super) fn member_parts(e: &IndexEntry) -> Result<(Meta, &[u8], Vec<u8>), &'static str> {
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
    Ok((Meta::of(e, kind), target, encode_extras(e)))
}

/// The node records, in node order, and the blobs they point to.
pub(super) struct NodeStore {
    /// Node records, [`NODE_LEN`] bytes each.
    records: Spill,
    /// Symlink targets and extras, which the records point to (from its start).
    blobs: Spill,
    count: u32,
    /// The first error moving records to their temporary files: reported at the end.
    failed: Option<io::Error>,
}

impl NodeStore {
    /// An empty store holding at most about `limit` bytes of records (and as many of
    /// blobs) in memory.
    pub fn new(limit: usize) -> NodeStore {
        NodeStore {
            records: Spill::new(limit, "the tree table"),
            blobs: Spill::new(limit, "the tree table"),
            count: 0,
            failed: None,
        }
    }

    /// How many nodes there are.
    pub fn len(&self) -> u32 {
        self.count
    }

    /// Appends the record (and the target and extras) of a node made in directory
    /// `parent`; returns its number.
    pub fn push(&mut self, parent: u32, meta: &Meta, target: &[u8], extras: &[u8]) -> u32 {
        let mut record = self.record(meta, target, extras);
        record[64..68].copy_from_slice(&parent.to_le_bytes());
        if let Err(err) = self.records.push(&record) {
            self.failed.get_or_insert(err);
        }
        self.count += 1;
        self.count - 1
    }

    /// Rewrites the record of directory `node` with member `e`'s metadata.
    /// (Its parent, set when it was made, stays.)
    pub fn set_dir_meta(&mut self, node: u32, e: &IndexEntry) {
        let meta = Meta::of(e, NodeKind::Dir);
        let record = self.record(&meta, &[], &encode_extras(e));
        let at = u64::from(node) * NODE_LEN;
        for (from, to) in [(0, 64), (80, NODE_LEN as usize)] {
            if let Err(err) = self.records.patch(at + from as u64, &record[from..to]) {
                self.failed.get_or_insert(err);
            }
        }
    }

    /// The first error met moving records to their files, if any.
    pub fn take_failed(&mut self) -> io::Result<()> {
        self.failed.take().map_or(Ok(()), Err)
    }

    /// The records, in node order.
    pub fn records(&self) -> impl Read + '_ {
        self.records.reader()
    }

    /// How many bytes of blobs there are.
    pub fn blobs_len(&self) -> u64 {
        self.blobs.len()
    }

    /// Writes the blobs to `w`.
    pub fn write_blobs(&self, w: &mut HashingWriter<'_>) -> io::Result<()> {
        self.blobs.copy_to(|b| w.write_all(b))
    }

    /// A record for `meta` with `target` and `extras` appended to the blobs (the fields
    /// known only at the end left zero).
    fn record(&mut self, meta: &Meta, target: &[u8], extras: &[u8]) -> Record {
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
        if meta.made {
            rec[1] |= FLAG_MADE;
        }
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
        rec[92..96].copy_from_slice(&meta.head.to_le_bytes());
        rec[96..112].copy_from_slice(&meta.hash.unwrap_or(0).to_le_bytes());
        rec
    }
}

/// What only the end of a build knows of a node.
pub(super) struct Finish {
    /// Its first name: length, and offset in the heap's names.
    pub name: Option<(u8, u32)>,
    pub parent: u32,
    pub nlink: u32,
    /// A directory's first dirent and how many.
    pub span: (u32, u32),
}

/// Fills `rec` in with `f`, and moves its heap offsets past the `names_len` bytes of
/// names that open the heap.
pub(super) fn finish_record(rec: &mut Record, f: &Finish, names_len: u64) {
    if let Some((len, at)) = f.name {
        rec[2..4].copy_from_slice(&u16::from(len).to_le_bytes());
        rec[72..80].copy_from_slice(&u64::from(at).to_le_bytes());
    }
    rec[64..68].copy_from_slice(&f.parent.to_le_bytes());
    rec[68..72].copy_from_slice(&f.nlink.to_le_bytes());
    let shift = |rec: &mut Record, at: usize| {
        let v = u64::from_le_bytes(rec[at..at + 8].try_into().unwrap_or_default());
        rec[at..at + 8].copy_from_slice(&(v + names_len).to_le_bytes());
    };
    match NodeKind::from_code(rec[0]) {
        Some(NodeKind::Dir) => {
            rec[48..56].copy_from_slice(&u64::from(f.span.0).to_le_bytes());
            rec[56..64].copy_from_slice(&u64::from(f.span.1).to_le_bytes());
        }
        Some(NodeKind::Symlink) => shift(rec, 48),
        _ => {}
    }
    if rec[88..92] != [0; 4] {
        shift(rec, 80);
    }
}

/// A dirent record.
pub(super) fn dirent(name_at: u32, name_len: u8, kind: u8, node: u32) -> [u8; 16] {
    let mut r = [0u8; 16];
    r[..8].copy_from_slice(&u64::from(name_at).to_le_bytes());
    r[8..10].copy_from_slice(&u16::from(name_len).to_le_bytes());
    r[10] = kind;
    r[12..16].copy_from_slice(&node.to_le_bytes());
    r
}

/// Member `e`'s extras (see the module [`super`]'s layout): its sparse runs, its xattrs
/// and its owner's names; nothing when it has none of them.
pub(super) fn encode_extras(e: &IndexEntry) -> Vec<u8> {
    let names = owner_names(e.names.as_ref());
    if e.runs.is_empty() && e.xattrs.is_empty() && names.is_none() {
        return Vec::new();
    }
    let mut out = Vec::new();
    out.extend_from_slice(&(e.runs.len() as u32).to_le_bytes());
    for (o, l) in &e.runs {
        out.extend_from_slice(&o.to_le_bytes());
        out.extend_from_slice(&l.to_le_bytes());
    }
    let kept: Vec<_> = e
        .xattrs
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
    if let Some((user, group)) = names {
        for name in [user, group] {
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(name);
        }
    }
    out
}

/// The user and group names worth keeping (empty where missing); `None` when neither
/// is. A name longer than [`MAX_OWNER_NAME`] is not kept: no system has one, and the
/// owner is then the archive's number.
fn owner_names(names: Option<&Names>) -> Option<(&[u8], &[u8])> {
    fn keep(n: &Option<Vec<u8>>) -> &[u8] {
        n.as_deref()
            .filter(|n| n.len() <= MAX_OWNER_NAME)
            .unwrap_or_default()
    }
    let names = names?;
    let (user, group) = (keep(&names.user), keep(&names.group));
    (!user.is_empty() || !group.is_empty()).then_some((user, group))
}

/// The longest owner name a table keeps.
pub(super) const MAX_OWNER_NAME: usize = 255;

/// Passes writes on, counting them and summing each page of them (see the module
/// [`super`]'s layout: a sum per [`super::PAGE_LEN`] bytes).
pub(super) struct HashingWriter<'a> {
    out: &'a mut dyn Write,
    page: Xxh3,
    in_page: u64,
    sums: Vec<u8>,
    written: u64,
}

impl<'a> HashingWriter<'a> {
    pub fn new(out: &'a mut dyn Write) -> Self {
        HashingWriter {
            out,
            page: Xxh3::new(),
            in_page: 0,
            sums: Vec::new(),
            written: 0,
        }
    }

    pub fn write_all(&mut self, mut b: &[u8]) -> io::Result<()> {
        self.out.write_all(b)?;
        self.written += b.len() as u64;
        while !b.is_empty() {
            let n = b.len().min((super::PAGE_LEN - self.in_page) as usize);
            self.page.update(&b[..n]);
            self.in_page += n as u64;
            b = &b[n..];
            if self.in_page == super::PAGE_LEN {
                self.end_page();
            }
        }
        Ok(())
    }

    fn end_page(&mut self) {
        self.sums.extend(self.page.digest().to_le_bytes());
        self.page.reset();
        self.in_page = 0;
    }

    /// Writes the page sums and the trailer for a table of `nodes`, `dirents` and
    /// `heap` bytes; returns the table's length.
    pub fn finish(mut self, nodes: u64, dirents: u64, heap: u64, data_end: u64) -> io::Result<u64> {
        if self.in_page > 0 {
            self.end_page();
        }
        let trailer = super::Trailer {
            version: super::TREE_VERSION,
            nodes,
            dirents,
            heap,
            data_end,
            body_hash: xxhash_rust::xxh3::xxh3_64(&self.sums),
        };
        self.out.write_all(&self.sums)?;
        self.out.write_all(&trailer.encode())?;
        Ok(self.written + self.sums.len() as u64 + super::TRAILER_LEN)
    }
}
