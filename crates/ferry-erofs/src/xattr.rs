//! Inline xattrs: the 12-byte header, then one entry per xattr (a 4-byte head, the
//! name after its namespace prefix, the value, padded to 4 bytes).
//!
//! EROFS names the namespace by an index; an xattr outside the namespaces the kernel's
//! EROFS knows (`user.`, `trusted.`, `security.`, the POSIX ACLs) or with a value over
//! 65,535 bytes cannot be stored, and is reported instead.

use crate::format::{XATTR_ENTRY_LEN, XATTR_HEADER_LEN};

/// Namespace prefixes and their indexes (erofs_fs.h `EROFS_XATTR_INDEX_*`); the ACLs
/// are whole names with an empty suffix.
const PREFIXES: [(&[u8], u8); 5] = [
    (b"user.", 1),
    (b"system.posix_acl_access", 2),
    (b"system.posix_acl_default", 3),
    (b"trusted.", 4),
    (b"security.", 6),
];

/// The most bytes of entries an inline area holds (its size is a u16 count of 4-byte
/// units).
const MAX_ENTRIES_LEN: usize = 4 * (u16::MAX as usize - 1);

/// The inline xattr area of one inode.
#[derive(Debug, Default)]
pub struct XattrBody {
    /// The bytes (empty when there are no xattrs).
    pub bytes: Vec<u8>,
    /// The xattrs left out, with why.
    pub left_out: Vec<String>,
}

impl XattrBody {
    /// The inode's `i_xattr_icount` for this area.
    pub fn icount(&self) -> u16 {
        icount(self.bytes.len() as u64)
    }
}

/// The inode's `i_xattr_icount` for an inline xattr area of `len` bytes.
pub fn icount(len: u64) -> u16 {
    if len == 0 {
        0
    } else {
        ((len - XATTR_HEADER_LEN as u64) / 4 + 1) as u16
    }
}

/// The inline xattr area holding `xattrs` (name, value).
pub fn body(xattrs: &[(Vec<u8>, Vec<u8>)]) -> XattrBody {
    let mut out = XattrBody::default();
    let mut entries = Vec::new();
    for (name, value) in xattrs {
        let shown = String::from_utf8_lossy(name);
        let Some((index, suffix)) = PREFIXES
            .iter()
            .find(|(p, _)| name.starts_with(p))
            .map(|&(p, i)| (i, &name[p.len()..]))
        else {
            out.left_out
                .push(format!("xattr {shown}: a namespace EROFS cannot hold"));
            continue;
        };
        let (Ok(nlen), Ok(vlen)) = (u8::try_from(suffix.len()), u16::try_from(value.len())) else {
            out.left_out
                .push(format!("xattr {shown}: name or value too long for EROFS"));
            continue;
        };
        if (index == 2 || index == 3) && nlen != 0 {
            out.left_out
                .push(format!("xattr {shown}: a namespace EROFS cannot hold"));
            continue;
        }
        let len = (XATTR_ENTRY_LEN + suffix.len() + value.len()).next_multiple_of(4);
        // The area's size is counted in 4-byte units in a u16.
        if entries.len() + len > MAX_ENTRIES_LEN {
            out.left_out.push(format!(
                "xattr {shown}: more xattrs than EROFS holds inline"
            ));
            continue;
        }
        entries.push(nlen);
        entries.push(index);
        entries.extend_from_slice(&vlen.to_le_bytes());
        entries.extend_from_slice(suffix);
        entries.extend_from_slice(value);
        entries.resize(entries.len().next_multiple_of(XATTR_ENTRY_LEN), 0);
    }
    if !entries.is_empty() {
        // Header: name filter 0 (unused without the filter feature), no shared xattrs.
        out.bytes = vec![0u8; XATTR_HEADER_LEN];
        out.bytes.extend_from_slice(&entries);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_carry_the_index_the_suffix_and_the_value_padded() {
        let b = body(&[
            (b"user.test".to_vec(), b"value".to_vec()),
            (b"system.posix_acl_access".to_vec(), vec![2, 0, 0, 0]),
            (b"system.other".to_vec(), b"x".to_vec()),
        ]);
        let mut want = vec![0u8; 12];
        want.extend_from_slice(&[4, 1, 5, 0]);
        want.extend_from_slice(b"testvalue\0\0\0");
        want.extend_from_slice(&[0, 2, 4, 0, 2, 0, 0, 0]);
        assert_eq!(b.bytes, want);
        assert_eq!(b.icount() as usize, (want.len() - 12) / 4 + 1);
        assert_eq!(b.left_out.len(), 1);
        assert!(body(&[]).bytes.is_empty());
    }
}
