//! What `pack` writes in place of what the source says, so that an archive comes out
//! the same wherever and whenever it is made: GNU tar's `--owner`, `--group`,
//! `--numeric-owner`, `--mtime` (with `--clamp-mtime`) and `--pax-option` ([`super::pax_delete`]),
//! and `--transform`'s new names (see [`super::transform`]). Together with a walk in
//! name order (`--sort=name`), two packs of one tree, or of two copies of it, are the
//! same bytes.

use super::pax_delete::PaxDelete;
use crate::read::convert::{safe_path, trim_trailing_slashes};
use crate::transform::Transform;
use ferry_core::entry::{Entry, EntryKind, RelPath, Timestamp};
use ferry_core::error::{Error, Result};
use std::borrow::Cow;
use std::sync::Arc;

/// An owner (user or group) given on the command line: `NAME`, `ID` or `NAME:ID`, as
/// GNU tar's `--owner` and `--group` take it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ForcedOwner {
    /// The id every member gets; None: each keeps its own (a name this machine does
    /// not know, given without an id).
    pub id: Option<u32>,
    /// The name every member's header gives; None: the name this machine has for the
    /// id.
    pub name: Option<Vec<u8>>,
}

/// The rewrites of `pack`; the default rewrites nothing.
#[derive(Clone, Debug, Default)]
pub struct Restamp {
    /// `--owner`.
    pub user: Option<ForcedOwner>,
    /// `--group`.
    pub group: Option<ForcedOwner>,
    /// `--numeric-owner`: headers carry ids, no names.
    pub numeric_owner: bool,
    /// `--mtime`: every member's modification time.
    pub mtime: Option<Timestamp>,
    /// `--clamp-mtime`: [`Restamp::mtime`] only for members modified after it.
    pub clamp_mtime: bool,
    /// `--pax-option=delete=PATTERN`: the keywords left out, and so what they carry.
    pub pax_delete: PaxDelete,
    /// `--pax-option=exthdr.mtime=DATE`: every pax header's own mtime (seconds).
    pub pax_header_mtime: Option<u64>,
    /// Extended attributes in the order of their names, not the filesystem's.
    pub sort_xattrs: bool,
    /// `--transform`: new names for members and link targets.
    pub transform: Option<Arc<Transform>>,
}

impl Restamp {
    /// Whether it changes nothing: every member is written as the source has it.
    pub fn is_identity(&self) -> bool {
        self.user.as_ref().is_none_or(|u| u.id.is_none())
            && self.group.as_ref().is_none_or(|g| g.id.is_none())
            && self.mtime.is_none()
            && self.pax_delete.is_empty()
            && !self.sort_xattrs
            && self.transform.is_none()
    }

    /// `entry` as the archive is to hold it (its name the tar name: see
    /// `pack_sink::tar_path`, a directory's ending in `/`). An error names the member
    /// whose new name cannot be stored.
    pub fn apply<'e>(&self, entry: &'e Entry) -> Result<Cow<'e, Entry>> {
        if self.is_identity() {
            return Ok(Cow::Borrowed(entry));
        }
        let mut e = entry.clone();
        let m = &mut e.meta;
        if let Some(id) = self.user.as_ref().and_then(|u| u.id) {
            m.uid = id;
        }
        if let Some(id) = self.group.as_ref().and_then(|g| g.id) {
            m.gid = id;
        }
        if let Some(t) = self.mtime {
            if !self.clamp_mtime || m.mtime > t {
                m.mtime = t;
            }
        }
        self.pax_delete.apply(m);
        if self.sort_xattrs {
            m.xattrs.sort_by(|a, b| a.name.cmp(&b.name));
        }
        if let Some(t) = &self.transform {
            self.rename(t, &mut e)?;
        }
        Ok(Cow::Owned(e))
    }

    /// Gives `e` its transformed name, and its symlink's target too where the
    /// transform says so (a hardlink's target is the name its first member was given).
    fn rename(&self, t: &Transform, e: &mut Entry) -> Result<()> {
        let refuse = |why: String| Error::new(&e.path, "transform", std::io::Error::other(why));
        let is_dir = e.path.as_bytes().ends_with(b"/");
        // A directory's name is renamed without its trailing `/`, as unpack renames it;
        // the root is `./`: a transform sees it as `.`, as GNU tar's `-C DIR .` has it.
        let bare = match trim_trailing_slashes(e.path.as_bytes()) {
            b"" => &b"."[..],
            bare => bare,
        };
        let renamed = t.member(bare);
        let mut stored = stored_name(&renamed).map_err(&refuse)?;
        if stored == b"." && !is_dir {
            return Err(refuse("the new name is the archive's root, `.`".into()));
        }
        if is_dir {
            stored.push(b'/');
        }
        if let EntryKind::Symlink { target } = &mut e.kind {
            *target = t.symlink_target(target).into_owned();
        }
        e.path = RelPath::from_bytes(stored);
        Ok(())
    }
}

/// A transformed name as a member's name, made safe as an unpack makes a member's name
/// ([`safe_path`]: leading `/`s and `./`s dropped, as GNU tar drops the `/`s, and empty
/// and `.` components); refused when it is empty or has a `..` component (the archive
/// would be one every careful reader refuses). Nothing but `.`s and `/`s is the root.
fn stored_name(name: &[u8]) -> std::result::Result<Vec<u8>, String> {
    if name.is_empty() {
        return Err("the new name is empty".into());
    }
    let shown = || String::from_utf8_lossy(name).into_owned();
    let path = safe_path(name).map_err(|why| format!("the new name {}: {why}", shown()))?;
    Ok(match path.is_root() {
        true => b".".to_vec(),
        false => path.as_bytes().to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_core::entry::Metadata;

    fn entry(path: &[u8], mtime: i64) -> Entry {
        Entry {
            path: RelPath::from_bytes(path.to_vec()),
            kind: EntryKind::Fifo,
            meta: Metadata {
                mode: 0o644,
                uid: 1000,
                gid: 1000,
                atime: Timestamp { sec: 5, nsec: 1 },
                mtime: Timestamp {
                    sec: mtime,
                    nsec: 7,
                },
                xattrs: Vec::new(),
            },
            links: None,
        }
    }

    #[test]
    fn the_default_borrows_every_entry_unchanged() {
        let e = entry(b"a", 10);
        assert!(matches!(Restamp::default().apply(&e), Ok(Cow::Borrowed(_))));
    }

    #[test]
    fn clamping_moves_only_later_times() {
        let r = Restamp {
            mtime: Some(Timestamp { sec: 100, nsec: 0 }),
            clamp_mtime: true,
            pax_delete: PaxDelete::new(&["atime".to_string()]).expect("a pattern"),
            ..Restamp::default()
        };
        let early = r.apply(&entry(b"a", 50)).expect("applies").into_owned();
        assert_eq!(early.meta.mtime, Timestamp { sec: 50, nsec: 7 });
        assert_eq!(early.meta.atime, early.meta.mtime);
        let late = r.apply(&entry(b"a", 500)).expect("applies").into_owned();
        assert_eq!(late.meta.mtime, Timestamp { sec: 100, nsec: 0 });
    }

    #[test]
    fn forced_ids_replace_the_sources_and_a_name_alone_keeps_them() {
        let r = Restamp {
            user: Some(ForcedOwner {
                id: Some(0),
                name: None,
            }),
            group: Some(ForcedOwner {
                id: None,
                name: Some(b"staff".to_vec()),
            }),
            ..Restamp::default()
        };
        let e = r.apply(&entry(b"a", 1)).expect("applies").into_owned();
        assert_eq!((e.meta.uid, e.meta.gid), (0, 1000));
    }

    #[test]
    fn stored_names_lose_leading_slashes_and_refuse_dot_dot() {
        assert_eq!(stored_name(b"/abs//x/./y/").as_deref(), Ok(&b"abs/x/y"[..]));
        assert_eq!(stored_name(b"./").as_deref(), Ok(&b"."[..]));
        assert!(stored_name(b"a/../../etc").is_err());
        assert!(stored_name(b"").is_err());
    }
}
