//! What a node keeps in the heap besides its name: a sparse file's data runs, its
//! extended attributes and its owner's names, and how they are read back (checked
//! against the node: runs sorted, inside its size, adding up to its stored bytes).

use super::read::{Node, TreeError};

/// What a node keeps in the heap besides its name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Extras {
    /// A sparse file's data runs (offset, length), in order; empty for a file stored
    /// whole.
    pub runs: Vec<(u64, u64)>,
    /// Extended attributes (name, value).
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// The owner's user name as the archive gives it (empty: none; tables written
    /// before names were kept have none).
    pub user: Vec<u8>,
    /// The owner's group name as the archive gives it (empty: none).
    pub group: Vec<u8>,
}

/// Node `n`'s extras from their heap bytes `raw` (none: no extras), checked against
/// the node (runs inside its size, in any order, adding up to its stored bytes).
pub(super) fn parse_extras(n: &Node, raw: &[u8]) -> Result<Extras, TreeError> {
    let mut x = Extras::default();
    if raw.is_empty() {
        return Ok(x);
    }
    let bad = || TreeError::new(format!("tree table: node {}: damaged extras", n.id));
    let mut p = Parser { b: raw };
    let runs = p.u32().ok_or_else(bad)?;
    let mut total = 0u64;
    for _ in 0..runs {
        let (o, l) = (p.u64().ok_or_else(bad)?, p.u64().ok_or_else(bad)?);
        // In any order, as a tar from elsewhere may store them (ferry_core::sparse).
        if o.checked_add(l).ok_or_else(bad)? > n.size {
            return Err(bad());
        }
        total = total.checked_add(l).ok_or_else(bad)?;
        x.runs.push((o, l));
    }
    if runs > 0 && total != n.b {
        return Err(bad());
    }
    let xattrs = p.u32().ok_or_else(bad)?;
    for _ in 0..xattrs {
        let nl = p.u16().ok_or_else(bad)?;
        let name = p.take(usize::from(nl)).ok_or_else(bad)?.to_vec();
        let vl = p.u32().ok_or_else(bad)?;
        let value = p.take(vl as usize).ok_or_else(bad)?.to_vec();
        x.xattrs.push((name, value));
    }
    // The owner's names, in a table that keeps them.
    if !p.b.is_empty() {
        for name in [&mut x.user, &mut x.group] {
            let len = p.u16().ok_or_else(bad)?;
            *name = p.take(usize::from(len)).ok_or_else(bad)?.to_vec();
        }
    }
    Ok(x)
}

/// Reads little-endian numbers and byte strings off the front of a slice.
struct Parser<'a> {
    b: &'a [u8],
}

impl<'a> Parser<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.b.len() {
            return None;
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Some(head)
    }

    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}
