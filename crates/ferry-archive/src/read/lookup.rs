//! `cat` of one member of an archive file through the tree table at the end of its
//! index: the path is looked up directory by directory (a binary search in each),
//! reading and checking only the table's pages the lookup goes through (see
//! [`crate::tree::read`]), then the member's tar headers, which must say what its node
//! says, then its data. Neither the index's entries nor the rest of the table are read,
//! so this costs the same for ten members or a million, plain or compressed.

use super::archive::{embedded_tree, ArchiveError, Source, MAX_HEADERS};
use super::convert::safe_path;
use super::list::{not_a_file, refused, write_runs, Hashing};
use crate::tar::{Reader, TarKind};
use crate::tree::{Node, NodeKind, Table, TreeError};
use ferry_core::content::ContentHash;
use std::io::Write;

/// Prints member `path` of the archive read from `source` (as [`super::list::cat`]
/// would) if the archive has a tree table with page sums; `Ok(false)` if it has none
/// (a plain tar, an archive from before them, one appended to since), for the caller
/// to read it the long way.
pub fn cat_by_tree(
    source: &Source,
    path: &[u8],
    out: &mut dyn Write,
) -> Result<bool, ArchiveError> {
    // A table without page sums (written before them) is read the long way.
    let Some(tree) = embedded_tree(source, source.data_len()?)?.filter(|t| t.paged) else {
        return Ok(false);
    };
    let table: Table<&Source> = Table::open_paged(source, tree.at, tree.len)
        .map_err(index_error)?
        .hashes_up_to(tree.hashes_up_to());
    let want = safe_path(path).map_err(|why| refused(path, why))?;
    let id = crate::tree::check::resolve(&table, &want)
        .map_err(index_error)?
        .ok_or_else(|| refused(path, "no such member"))?;
    let node = table.node(id).map_err(index_error)?;
    if node.kind != NodeKind::File {
        return Err(not_a_file(path, tar_kind(node.kind)));
    }
    let extras = table.extras(&node).map_err(index_error)?;
    check_headers(source, &node, &extras, path)?;
    let mut out = Hashing {
        out,
        hash: ContentHash::new(),
    };
    write_runs(&node.runs(&extras), node.size, &mut out, |stored, buf| {
        source.read_exact_at(buf, node.a + stored).map_err(|e| {
            std::io::Error::new(e.kind(), format!("member {want}: read its data: {e}"))
        })
    })?;
    match node.hash {
        Some(recorded) if recorded != out.digest() => Err(refused(
            path,
            "content differs from the hash recorded when it was packed (printed anyway)",
        )),
        _ => Ok(true),
    }
}

/// Reads the tar headers before a file node's data and checks they say what the node
/// says (as a member's headers must agree with its index entry), so a table that
/// points at another member's data is an error, not another file's bytes.
fn check_headers(
    source: &Source,
    node: &Node,
    extras: &crate::tree::read::Extras,
    path: &[u8],
) -> Result<(), ArchiveError> {
    let head = u64::from(node.head);
    let at = node.a - head;
    let mismatch = |what| ArchiveError::Mismatch { offset: at, what };
    if head == 0 || head > MAX_HEADERS {
        return Err(mismatch("headers larger than a reader accepts"));
    }
    let mut bytes = vec![0u8; head as usize];
    source
        .read_exact_at(&mut bytes, at)
        .map_err(|e| refused(path, format!("read its headers: {e}")))?;
    // Whatever lies there, it is not this member's headers: the index is wrong.
    let t = Reader::new(&bytes[..])
        .next_entry()
        .ok()
        .flatten()
        .ok_or_else(|| mismatch("no tar header where the index puts the member's"))?;
    // A file with several names holds its data under the first; the others are links.
    let path = safe_path(path).map_err(|why| refused(path, why))?;
    let named = (node.nlink <= 1).then_some(path.as_bytes());
    crate::tree::check::header_agrees(&t, node, extras, named).map_err(mismatch)?;
    Ok(())
}

/// The tar kind of a node's kind.
fn tar_kind(k: NodeKind) -> TarKind {
    match k {
        NodeKind::File => TarKind::File,
        NodeKind::Dir => TarKind::Dir,
        NodeKind::Symlink => TarKind::Symlink,
        NodeKind::Fifo => TarKind::Fifo,
        NodeKind::CharDevice => TarKind::CharDevice,
        NodeKind::BlockDevice => TarKind::BlockDevice,
    }
}

/// A damaged or unreadable tree table, told as a damaged index.
fn index_error(e: TreeError) -> ArchiveError {
    crate::index::IndexError(format!("index: {e}")).into()
}
