//! A node's metadata on the wire: mode, owner (ids and the names they have on the end
//! that sends them, so the other end can map them by name as `rsync` and `tar` do),
//! times and xattrs. The manifest's records carry it ([`crate::manifest`]), and so do
//! the sender's metadata-only changes ([`crate::plan`]).
//!
//! Decoding never sizes an allocation from a count the peer sent: the xattrs are read
//! one by one from a payload the frame already bounds.

use crate::frame::{Fields, PutFields};
use crate::NetError;
use ferry_archive::owners::{by_name_here, LocalIds};
use ferry_core::entry::{Metadata, Timestamp, Xattr};

/// Longest owner name kept.
const MAX_NAME: usize = 256;

/// Longest xattr name (Linux: 255 bytes).
const MAX_XATTR_NAME: usize = 255;

/// Longest xattr value (Linux: 64 KiB).
const MAX_XATTR_VALUE: usize = 64 << 10;

/// The most xattr bytes (with their lengths) one node's metadata carries: past it, its xattrs are said to
/// be unknown and the other end reads them itself.
pub const MAX_XATTR_BYTES: usize = 128 << 10;

/// What an xattr costs on the wire besides its name and value (their lengths).
const XATTR_OVERHEAD: usize = 8;

/// A node's metadata as one end tells it to the other.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WireMeta {
    /// Mode, owner, times, xattrs (empty when `xattrs_known` is false).
    pub meta: Metadata,
    /// The name of `meta.uid` on the end that sent it (empty: none there).
    pub user: Vec<u8>,
    /// The name of `meta.gid` on the end that sent it (empty: none there).
    pub group: Vec<u8>,
    /// Whether `meta.xattrs` is all the node has (false: too many to carry).
    pub xattrs_known: bool,
}

impl WireMeta {
    /// `meta` with its owner's names, its xattrs dropped when too many to carry.
    pub fn new(meta: &Metadata, user: Option<&[u8]>, group: Option<&[u8]>) -> Self {
        let bytes: usize = meta
            .xattrs
            .iter()
            .map(|x| x.name.len() + x.value.len() + XATTR_OVERHEAD)
            .sum();
        let fits = bytes <= MAX_XATTR_BYTES
            && meta
                .xattrs
                .iter()
                .all(|x| x.name.len() <= MAX_XATTR_NAME && x.value.len() <= MAX_XATTR_VALUE);
        let mut meta = meta.clone();
        if !fits {
            meta.xattrs.clear();
        }
        let name = |n: Option<&[u8]>| n.filter(|n| n.len() <= MAX_NAME).unwrap_or(b"").to_vec();
        WireMeta {
            meta,
            user: name(user),
            group: name(group),
            xattrs_known: fits,
        }
    }

    /// Appends it to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let m = &self.meta;
        out.put_u32(m.mode);
        out.put_u32(m.uid);
        out.put_u32(m.gid);
        for t in [m.atime, m.mtime] {
            out.put_u64(t.sec as u64);
            out.put_u32(t.nsec);
        }
        out.put_bytes(&self.user);
        out.put_bytes(&self.group);
        out.put_u8(self.xattrs_known as u8);
        out.put_u32(m.xattrs.len() as u32);
        for x in &m.xattrs {
            out.put_bytes(&x.name);
            out.put_bytes(&x.value);
        }
    }

    /// Reads one from `f`.
    pub fn decode(f: &mut Fields<'_>) -> Result<WireMeta, NetError> {
        let mode = f.u32()?;
        if mode & !0o7777 != 0 {
            return Err(NetError::frame(format!("metadata: mode {mode:#o}")));
        }
        let uid = f.u32()?;
        let gid = f.u32()?;
        let mut time = || -> Result<Timestamp, NetError> {
            let sec = f.u64()? as i64;
            let nsec = f.u32()?;
            if nsec >= 1_000_000_000 {
                return Err(NetError::frame(format!(
                    "metadata: {nsec} nanoseconds, past a second"
                )));
            }
            Ok(Timestamp { sec, nsec })
        };
        let atime = time()?;
        let mtime = time()?;
        let user = f.bytes(MAX_NAME)?.to_vec();
        let group = f.bytes(MAX_NAME)?.to_vec();
        let xattrs_known = match f.u8()? {
            0 => false,
            1 => true,
            other => return Err(NetError::frame(format!("metadata: flag {other}"))),
        };
        let count = f.u32()?;
        let mut xattrs = Vec::new();
        let mut bytes = 0usize;
        for _ in 0..count {
            let name = f.bytes(MAX_XATTR_NAME)?;
            let value = f.bytes(MAX_XATTR_VALUE)?;
            bytes += name.len() + value.len() + XATTR_OVERHEAD;
            if bytes > MAX_XATTR_BYTES || name.is_empty() || name.contains(&0) {
                return Err(NetError::frame(
                    "metadata: xattrs past their bounds, or an empty name",
                ));
            }
            xattrs.push(Xattr {
                name: name.to_vec(),
                value: value.to_vec(),
            });
        }
        Ok(WireMeta {
            meta: Metadata {
                mode,
                uid,
                gid,
                atime,
                mtime,
                xattrs,
            },
            user,
            group,
            xattrs_known,
        })
    }

    /// Whether a node with this metadata has the owner `theirs` has, as the end that
    /// sent `theirs` would map it: by name where both ends have one, else by number.
    pub fn same_owner(&self, theirs: &WireMeta) -> bool {
        let same = |ours: u32, their: u32, name: &[u8], their_name: &[u8]| {
            (!name.is_empty() && name == their_name) || ours == their
        };
        same(self.meta.uid, theirs.meta.uid, &self.user, &theirs.user)
            && same(self.meta.gid, theirs.meta.gid, &self.group, &theirs.group)
    }
}

/// How the receiving end gives owners: as root by the names the sender sent, where this
/// machine has them (as `unpack` and `tar` map them), else by number.
pub struct LocalOwners {
    ids: LocalIds,
    by_name: bool,
}

impl Default for LocalOwners {
    fn default() -> Self {
        LocalOwners {
            ids: LocalIds::default(),
            by_name: by_name_here(false),
        }
    }
}

impl LocalOwners {
    /// `wire`'s uid and gid made the ones its owner's names have here.
    pub fn map(&mut self, wire: &mut WireMeta) {
        if !self.by_name {
            return;
        }
        let name = |n: &[u8]| -> Option<Vec<u8>> { (!n.is_empty()).then(|| n.to_vec()) };
        let (user, group) = (name(&wire.user), name(&wire.group));
        let m = &mut wire.meta;
        (m.uid, m.gid) = self
            .ids
            .ids(user.as_deref(), group.as_deref(), m.uid, m.gid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips_and_cut_or_bad_fields_are_errors() {
        let meta = Metadata {
            mode: 0o4755,
            uid: 7,
            gid: 9,
            atime: Timestamp { sec: -3, nsec: 5 },
            mtime: Timestamp {
                sec: 1 << 40,
                nsec: 999_999_999,
            },
            xattrs: vec![Xattr {
                name: b"user.a".to_vec(),
                value: vec![0, 1, 2],
            }],
        };
        let w = WireMeta::new(&meta, Some(b"alice"), None);
        let mut buf = Vec::new();
        w.encode(&mut buf);
        let back = WireMeta::decode(&mut Fields::new(&buf, "meta")).expect("decode");
        assert_eq!(back, w);
        assert!(back.xattrs_known && back.group.is_empty());
        for cut in 0..buf.len() {
            assert!(WireMeta::decode(&mut Fields::new(&buf[..cut], "meta")).is_err());
        }
        // A count far past what follows is an error, not an allocation.
        let mut huge = buf.clone();
        let at = huge.len() - (4 + 6 + 4 + 3) - 4;
        huge[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(WireMeta::decode(&mut Fields::new(&huge, "meta")).is_err());
        // Too many xattr bytes to carry: said unknown, none carried.
        let mut big = meta.clone();
        big.xattrs = (0..3)
            .map(|i| Xattr {
                name: format!("user.{i}").into_bytes(),
                value: vec![0; MAX_XATTR_VALUE],
            })
            .collect();
        let w = WireMeta::new(&big, None, None);
        assert!(!w.xattrs_known && w.meta.xattrs.is_empty());
    }

    #[test]
    fn owners_are_the_same_by_name_or_by_number() {
        let m = |uid, user: &[u8]| {
            WireMeta::new(
                &Metadata {
                    uid,
                    ..Metadata::default()
                },
                Some(user),
                None,
            )
        };
        assert!(m(1, b"a").same_owner(&m(2, b"a")));
        assert!(m(1, b"a").same_owner(&m(1, b"b")));
        assert!(!m(1, b"a").same_owner(&m(2, b"b")));
        assert!(!m(1, b"").same_owner(&m(2, b"")));
    }
}
