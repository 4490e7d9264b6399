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

use crate::chunks::{self, ChunkMap};
use crate::dir::{self, Entry};
use crate::format::{self, file_type, Inode, Layout, Super, BLOCK, INODE_LEN, INODE_SLOT};
use crate::walk::Walked;
use crate::xattr::{self, XattrBody};
use crate::{ErofsError, Options};
use ferry_archive::tree::{Node, NodeKind, Table};
use ferry_core::entry::escaped;

/// Where the device table starts.
const DEVICE_TABLE_AT: u64 = format::SUPER_OFFSET + format::SUPER_LEN as u64;
/// Where the first inode (the root) starts.
const INODES_AT: u64 = 3 * BLOCK;
/// The archive's device id in chunk indexes.
const ARCHIVE_DEVICE: u16 = 1;

/// One shown node, laid out.
struct Placed {
    nid: u64,
    xattrs: XattrBody,
    chunks: Option<ChunkMap>,
    /// Directory or symlink data: its first block in the image, and its bytes.
    data: Option<(u32, Vec<u8>)>,
}

/// The image of `w` (walked from `table`), whose files' data is in an archive of
/// `archive_len` bytes; with the xattrs left out.
pub fn write(
    table: &Table,
    w: &Walked,
    archive_len: u64,
    opts: &Options,
) -> Result<(Vec<u8>, Vec<String>), ErofsError> {
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
                chunks::map(n.size, n.a, &n.runs(&extras), archive_len)
                    .map_err(|e| ErofsError(format!("{}: {e}", path(id))))?,
            ),
            _ => None,
        };
        let mut group = INODE_LEN as u64 + xattrs.bytes.len() as u64;
        if let Some(c) = &chunks {
            group = group.next_multiple_of(8) + 8 * c.blocks.len() as u64;
        }
        let group = group.next_multiple_of(INODE_SLOT);
        if pos % BLOCK + group > BLOCK && group <= BLOCK {
            pos = pos.next_multiple_of(BLOCK);
        }
        placed.push(Placed {
            nid: pos / INODE_SLOT,
            xattrs,
            chunks,
            data: None,
        });
        pos += group;
    }
    let mut block = pos.div_ceil(BLOCK);
    for (p, &id) in placed.iter_mut().zip(&w.order) {
        let n = &w.nodes[id as usize];
        let data = match n.kind {
            NodeKind::Dir => Some(dir_data(w, id, &[])),
            NodeKind::Symlink => {
                let t = table
                    .target(n)
                    .map_err(|e| ErofsError(format!("{}: {e}", path(id))))?;
                if t.len() >= 4096 {
                    return Err(ErofsError(format!(
                        "{}: a symlink target over 4,095 bytes",
                        path(id)
                    )));
                }
                Some(t)
            }
            _ => None,
        };
        if let Some(d) = data {
            let at = u32::try_from(block)
                .map_err(|_| ErofsError("the image would pass 2 TiB".into()))?;
            block += (d.len() as u64).div_ceil(BLOCK);
            p.data = Some((at, d));
        }
    }
    // Directory entries name inodes: written now that every nid is known.
    let nids: Vec<u64> = placed.iter().map(|p| p.nid).collect();
    for (p, &id) in placed.iter_mut().zip(&w.order) {
        if w.nodes[id as usize].kind == NodeKind::Dir {
            if let Some((_, d)) = &mut p.data {
                *d = dir_data(w, id, &nids);
            }
        }
    }
    let blocks =
        u32::try_from(block).map_err(|_| ErofsError("the image would pass 2 TiB".into()))?;
    let archive_blocks = u32::try_from(archive_len.div_ceil(BLOCK))
        .map_err(|_| ErofsError("the archive is over the 2 TiB EROFS can address".into()))?;
    let mut img = vec![0u8; block as usize * BLOCK as usize];
    let sb = Super {
        root_nid: INODES_AT as u16 / INODE_SLOT as u16,
        inos: w.order.len() as u64,
        blocks,
        uuid: opts.uuid,
        volume_name: opts.volume_name,
        extra_devices: 1,
        devt_slotoff: (DEVICE_TABLE_AT / format::DEVICE_SLOT_LEN as u64) as u16,
    };
    put(&mut img, format::SUPER_OFFSET, &sb.encode());
    put(
        &mut img,
        DEVICE_TABLE_AT,
        &format::device_slot(archive_blocks),
    );
    for (i, (p, &id)) in placed.iter().zip(&w.order).enumerate() {
        let n = &w.nodes[id as usize];
        let at = p.nid * INODE_SLOT;
        let inode = inode_of(n, p, i as u32 + 1, w.nlink[id as usize]);
        put(&mut img, at, &inode.encode());
        let mut end = at + INODE_LEN as u64;
        put(&mut img, end, &p.xattrs.bytes);
        end += p.xattrs.bytes.len() as u64;
        if let Some(c) = &p.chunks {
            end = end.next_multiple_of(8);
            for &b in &c.blocks {
                put(&mut img, end, &format::chunk_index(ARCHIVE_DEVICE, b));
                end += 8;
            }
        }
        if let Some((b, d)) = &p.data {
            put(&mut img, u64::from(*b) * BLOCK, d);
        }
    }
    Ok((img, left_out))
}

fn put(img: &mut [u8], at: u64, bytes: &[u8]) {
    let at = at as usize;
    img[at..at + bytes.len()].copy_from_slice(bytes);
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

/// The inode of node `n`, laid out as `p`.
fn inode_of(n: &Node, p: &Placed, ino: u32, nlink: u32) -> Inode {
    let kind_bits: u32 = match n.kind {
        NodeKind::File => 0o100000,
        NodeKind::Dir => 0o040000,
        NodeKind::Symlink => 0o120000,
        NodeKind::Fifo => 0o010000,
        NodeKind::CharDevice => 0o020000,
        NodeKind::BlockDevice => 0o060000,
    };
    let (layout, size, u) = match (&p.chunks, &p.data, n.kind) {
        (Some(c), _, _) => (Layout::ChunkBased, n.size, format::chunk_info(c.bits)),
        (None, Some((b, d)), _) => (Layout::FlatPlain, d.len() as u64, *b),
        (None, None, NodeKind::CharDevice | NodeKind::BlockDevice) => (
            Layout::FlatPlain,
            0,
            format::encode_rdev(rustix::fs::major(n.a), rustix::fs::minor(n.a)),
        ),
        _ => (Layout::FlatPlain, 0, 0),
    };
    Inode {
        layout: layout as u8,
        xattr_icount: p.xattrs.icount(),
        mode: (kind_bits | (n.mode & 0o7777)) as u16,
        size,
        u,
        ino,
        uid: n.uid,
        gid: n.gid,
        mtime: n.mtime.0,
        mtime_nsec: n.mtime.1,
        nlink,
    }
}
