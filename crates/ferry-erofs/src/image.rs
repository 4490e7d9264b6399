//! Laying the walked tree out as an image, then writing it.
//!
//! ```text
//! bytes 0..1024     zero (left to boot sectors by the format)
//! 1024..1152        superblock
//! 1152..1280        the device table: one slot, the archive
//! 1536..            inodes, each followed by its inline xattrs and chunk indexes,
//!                   32-byte aligned, the root first; a group that fits a block does
//!                   not cross one
//! then              directory blocks and symlink targets (whole 512-byte blocks)
//! ```
//!
//! Files are chunk-based, their chunks on device 1 (the archive); directories and
//! symlinks are flat, their data in the image.

use crate::chunks;
use crate::dir::{self, Entry};
use crate::format::{self, file_type, Inode, Layout, Super, BLOCK, INODE_LEN, INODE_SLOT};
use crate::walk::Walked;
use crate::xattr;
use crate::{ErofsError, Options};
use ferry_archive::tree::{Here, Node, NodeKind, Shown, Table};
use ferry_core::entry::escaped;
use std::io::Write;

/// Where the device table starts.
const DEVICE_TABLE_AT: u64 = format::SUPER_OFFSET + format::SUPER_LEN as u64;
/// Where the first inode (the root) starts.
const INODES_AT: u64 = 3 * BLOCK;
/// The archive's device id in chunk indexes.
const ARCHIVE_DEVICE: u16 = 1;

/// One shown node, laid out: where its inode goes and what follows it. Only sizes are
/// kept; the bytes (xattrs, chunk indexes, directory blocks) are made again as they are
/// written, so the image is never held whole.
struct Placed {
    nid: u64,
    /// Bytes of its inline xattrs.
    xattr_len: u64,
    /// A file's chunks: log2 of their size over the block size, and their number.
    chunks: Option<(u32, u64)>,
    /// Directory or symlink data: its first block in the image, and its length.
    data: Option<(u32, u64)>,
}

/// Bytes the image may hold beyond the archive's own size (superblock, the root, a few
/// blocks): an image is smaller than its archive (an inode and a directory entry
/// against a member's 512-byte header at least) unless chunk indexes for holes swell
/// it, which a few bytes of sparse map can ask for by the million.
pub const IMAGE_SLACK: u64 = 1 << 20;

/// What [`write`] made.
pub struct Written {
    /// The image's length.
    pub len: u64,
    /// What it leaves out (xattrs EROFS cannot hold), with the path.
    pub left_out: Vec<String>,
}

/// Writes the image of `w` (walked from `table`), whose files' data is in an archive of
/// `archive_len` bytes, to `out` from its start, in one pass of increasing offsets.
/// An image that would be larger than the archive plus [`IMAGE_SLACK`] is refused,
/// naming the file whose chunk indexes take the most of it.
pub fn write(
    table: &Table,
    w: &Walked,
    archive_len: u64,
    opts: &Options,
    out: &mut dyn Write,
) -> Result<Written, ErofsError> {
    let path = |id: u32| escaped(&table.path_of(id));
    let (placed, block, left_out) = lay_out(table, w, archive_len)?;
    let len = block * BLOCK;
    if len > archive_len.saturating_add(IMAGE_SLACK) {
        let (worst, bytes) = placed
            .iter()
            .zip(&w.order)
            .filter_map(|(p, &id)| p.chunks.map(|(_, n)| (id, 8 * n)))
            .max_by_key(|&(_, b)| b)
            .unwrap_or((0, 0));
        return Err(ErofsError(format!(
            "{}: its holes would need {bytes} bytes of chunk indexes, and the kernel's \
             image {len} bytes, more than the archive's {archive_len}: mount it with \
             FUSE (--mode fuse)",
            path(worst)
        )));
    }
    let blocks =
        u32::try_from(block).map_err(|_| ErofsError("the image would pass 2 TiB".into()))?;
    let archive_blocks = u32::try_from(archive_len.div_ceil(BLOCK))
        .map_err(|_| ErofsError("the archive is over the 2 TiB EROFS can address".into()))?;
    let mut img = Out { out, pos: 0 };
    let sb = Super {
        root_nid: INODES_AT as u16 / INODE_SLOT as u16,
        inos: w.order.len() as u64,
        blocks,
        uuid: opts.uuid,
        volume_name: opts.volume_name,
        extra_devices: 1,
        devt_slotoff: (DEVICE_TABLE_AT / format::DEVICE_SLOT_LEN as u64) as u16,
    };
    img.put_at(format::SUPER_OFFSET, &sb.encode())?;
    img.put_at(DEVICE_TABLE_AT, &format::device_slot(archive_blocks))?;
    let here = Here::for_this_process(opts.numeric_owner);
    for (i, (p, &id)) in placed.iter().zip(&w.order).enumerate() {
        let n = &w.nodes[id as usize];
        let extras = table
            .extras(n)
            .map_err(|e| ErofsError(format!("{}: {e}", path(id))))?;
        let inode = inode_of(
            n,
            &here.shown(n, &extras),
            p,
            i as u32 + 1,
            w.nlink[id as usize],
        );
        img.put_at(p.nid * INODE_SLOT, &inode.encode())?;
        img.put(&xattr::body(&extras.xattrs).bytes)?;
        if p.chunks.is_some() {
            let c = chunks::map(n.size, n.a, &n.runs(&extras), archive_len)
                .map_err(|e| ErofsError(format!("{}: {e}", path(id))))?;
            img.put_at(img.pos.next_multiple_of(8), &[])?;
            for &b in &c.blocks {
                img.put(&format::chunk_index(ARCHIVE_DEVICE, b))?;
            }
        }
    }
    // Directory entries name inodes: every nid is known now.
    let nids: Vec<u64> = placed.iter().map(|p| p.nid).collect();
    for (p, &id) in placed.iter().zip(&w.order) {
        let Some((at, _)) = p.data else {
            continue;
        };
        let n = &w.nodes[id as usize];
        let bytes = match n.kind {
            NodeKind::Dir => dir_data(w, id, &nids),
            _ => table
                .target(n)
                .map_err(|e| ErofsError(format!("{}: {e}", path(id))))?,
        };
        img.put_at(u64::from(at) * BLOCK, &bytes)?;
    }
    img.put_at(len, &[])?;
    Ok(Written { len, left_out })
}

/// Lays the shown nodes out: each one's place, the image's length in blocks, and the
/// xattrs left out.
fn lay_out(
    table: &Table,
    w: &Walked,
    archive_len: u64,
) -> Result<(Vec<Placed>, u64, Vec<String>), ErofsError> {
    let path = |id: u32| escaped(&table.path_of(id));
    let mut placed = Vec::with_capacity(w.order.len());
    let mut left_out = Vec::new();
    let mut pos = INODES_AT;
    for &id in &w.order {
        let n = &w.nodes[id as usize];
        let extras = table
            .extras(n)
            .map_err(|e| ErofsError(format!("{}: {e}", path(id))))?;
        let xattrs = xattr::body(&extras.xattrs);
        left_out.extend(xattrs.left_out.iter().map(|l| format!("{}: {l}", path(id))));
        let chunks = match n.kind {
            NodeKind::File if n.size > 0 => Some(
                chunks::shape(n.size, n.a, &n.runs(&extras), archive_len)
                    .map_err(|e| ErofsError(format!("{}: {e}", path(id))))?,
            ),
            _ => None,
        };
        let xattr_len = xattrs.bytes.len() as u64;
        let mut group = INODE_LEN as u64 + xattr_len;
        if let Some((_, count)) = chunks {
            group = group.next_multiple_of(8) + 8 * count;
        }
        let group = group.next_multiple_of(INODE_SLOT);
        if pos % BLOCK + group > BLOCK && group <= BLOCK {
            pos = pos.next_multiple_of(BLOCK);
        }
        placed.push(Placed {
            nid: pos / INODE_SLOT,
            xattr_len,
            chunks,
            data: None,
        });
        pos += group;
    }
    let mut block = pos.div_ceil(BLOCK);
    for (p, &id) in placed.iter_mut().zip(&w.order) {
        let n = &w.nodes[id as usize];
        let len = match n.kind {
            NodeKind::Dir => dir_data(w, id, &[]).len() as u64,
            NodeKind::Symlink if n.b >= 4096 => {
                return Err(ErofsError(format!(
                    "{}: a symlink target over 4,095 bytes",
                    path(id)
                )))
            }
            NodeKind::Symlink => n.b,
            _ => continue,
        };
        let at =
            u32::try_from(block).map_err(|_| ErofsError("the image would pass 2 TiB".into()))?;
        block += len.div_ceil(BLOCK);
        p.data = Some((at, len));
    }
    Ok((placed, block, left_out))
}

/// The image being written, front to back.
struct Out<'a> {
    out: &'a mut dyn Write,
    pos: u64,
}

impl Out<'_> {
    /// Writes `bytes` at `at`, zeros from where the image stands to there.
    fn put_at(&mut self, at: u64, bytes: &[u8]) -> Result<(), ErofsError> {
        if at < self.pos {
            return Err(ErofsError(format!(
                "image layout: byte {at} written after byte {}",
                self.pos
            )));
        }
        const ZEROS: [u8; 4096] = [0; 4096];
        while self.pos < at {
            let n = ZEROS.len().min((at - self.pos) as usize);
            self.put(&ZEROS[..n])?;
        }
        self.put(bytes)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), ErofsError> {
        self.out
            .write_all(bytes)
            .map_err(|e| ErofsError(format!("write the image: {e}")))?;
        self.pos += bytes.len() as u64;
        Ok(())
    }
}

/// Directory `id`'s data, with its entries pointing at `nids` (by place; when empty,
/// at nothing: for its size only).
fn dir_data(w: &Walked, id: u32, nids: &[u64]) -> Vec<u8> {
    let nid = |node: u32| {
        nids.get(w.place[node as usize] as usize)
            .copied()
            .unwrap_or(0)
    };
    let mut entries: Vec<Entry> = w.entries[id as usize]
        .iter()
        .map(|(name, node)| Entry {
            name: name.clone(),
            nid: nid(*node),
            file_type: file_type_of(w.nodes[*node as usize].kind),
        })
        .collect();
    for (name, node) in [(&b"."[..], id), (&b".."[..], w.parent[id as usize])] {
        entries.push(Entry {
            name: name.to_vec(),
            nid: nid(node),
            file_type: file_type::DIR,
        });
    }
    entries.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    dir::encode(&entries)
}

fn file_type_of(k: NodeKind) -> u8 {
    match k {
        NodeKind::File => file_type::REG,
        NodeKind::Dir => file_type::DIR,
        NodeKind::Symlink => file_type::SYMLINK,
        NodeKind::Fifo => file_type::FIFO,
        NodeKind::CharDevice => file_type::CHR,
        NodeKind::BlockDevice => file_type::BLK,
    }
}

/// The inode of node `n`, shown as `shown` (what `unpack` makes of it), laid out as `p`.
fn inode_of(n: &Node, shown: &Shown, p: &Placed, ino: u32, nlink: u32) -> Inode {
    let kind_bits: u32 = match n.kind {
        NodeKind::File => 0o100000,
        NodeKind::Dir => 0o040000,
        NodeKind::Symlink => 0o120000,
        NodeKind::Fifo => 0o010000,
        NodeKind::CharDevice => 0o020000,
        NodeKind::BlockDevice => 0o060000,
    };
    let (layout, size, u) = match (p.chunks, p.data, n.kind) {
        (Some((bits, _)), _, _) => (Layout::ChunkBased, n.size, format::chunk_info(bits)),
        (None, Some((b, len)), _) => (Layout::FlatPlain, len, b),
        (None, None, NodeKind::CharDevice | NodeKind::BlockDevice) => (
            Layout::FlatPlain,
            0,
            format::encode_rdev(rustix::fs::major(n.a), rustix::fs::minor(n.a)),
        ),
        _ => (Layout::FlatPlain, 0, 0),
    };
    Inode {
        layout: layout as u8,
        xattr_icount: xattr::icount(p.xattr_len),
        mode: (kind_bits | shown.mode) as u16,
        size,
        u,
        ino,
        uid: shown.uid,
        gid: shown.gid,
        mtime: n.mtime.0,
        mtime_nsec: n.mtime.1,
        nlink,
    }
}
