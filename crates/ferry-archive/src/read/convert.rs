//! From what an archive says to what ferry writes: member paths made safe, tar and
//! index entries turned into [`Entry`]s.

use crate::index::{IndexEntry, Kind};
use crate::tar::{TarEntry, TarKind};
use crate::transform::Transform;
use ferry_core::entry::{Entry, EntryKind, Metadata, RelPath, Timestamp, Xattr};
use std::collections::HashMap;

/// A member path made relative and clean: leading `/` and `./`, empty and `.`
/// components are dropped; `..` anywhere is refused (a member must not reach outside
/// the destination, and GNU tar refuses such members too). The empty result is the
/// root of the destination.
pub fn safe_path(raw: &[u8]) -> Result<RelPath, &'static str> {
    let mut out = RelPath::root();
    for comp in raw.split(|&b| b == b'/') {
        match comp {
            b"" | b"." => {}
            b".." => return Err("member path contains '..'"),
            c if c.contains(&0) => return Err("member path contains a NUL byte"),
            c => out = out.join(c),
        }
    }
    Ok(out)
}

/// Why a member is left out without a word: `--strip-components` took its whole name
/// (as GNU tar skips such members).
pub const STRIPPED: &str = "no name left once its leading components are stripped";

/// A member path with its first `strip` components dropped (as `tar
/// --strip-components` counts them: `.` is one, empty ones are not), then made safe
/// as [`safe_path`] makes it. A path with nothing left but the root is [`STRIPPED`].
pub fn stripped_path(raw: &[u8], strip: usize) -> Result<RelPath, &'static str> {
    if strip == 0 {
        return safe_path(raw);
    }
    let mut rest = raw;
    for _ in 0..strip {
        while let Some(r) = rest.strip_prefix(b"/") {
            rest = r;
        }
        match rest.iter().position(|&b| b == b'/') {
            Some(at) => rest = &rest[at..],
            None => return Err(STRIPPED),
        }
    }
    let path = safe_path(rest)?;
    match path.is_root() {
        true => Err(STRIPPED),
        false => Ok(path),
    }
}

/// How members' names change on the way out: names given by where a member's headers
/// start first (a download whose manifest names a stored file otherwise), then
/// `--transform`'s expressions, then `--strip-components` (GNU tar's order: `s,^,X/,`
/// with a strip of 1 leaves `d/f` as `d/f`).
#[derive(Clone, Copy, Default)]
pub struct Rename<'a> {
    /// Leading components dropped.
    pub strip: usize,
    /// The expressions, if any.
    pub transform: Option<&'a Transform>,
    /// Names in place of the archive's, by the offset of a member's headers.
    pub at: Option<&'a HashMap<u64, Vec<u8>>>,
}

impl Rename<'_> {
    /// No change: the names as the archive gives them (made safe).
    pub const NONE: Rename<'static> = Rename {
        strip: 0,
        transform: None,
        at: None,
    };

    /// The path of the member named `raw` whose headers start at `header_offset`.
    fn member(self, raw: &[u8], header_offset: u64) -> Result<RelPath, &'static str> {
        match self.at.and_then(|at| at.get(&header_offset)) {
            Some(name) => self.path(name),
            None => self.path(raw),
        }
    }

    /// The member path `raw` renamed, then made safe (see [`stripped_path`]); a name
    /// the transform empties is skipped as one stripped to nothing.
    pub fn path(self, raw: &[u8]) -> Result<RelPath, &'static str> {
        match self.transform {
            None => stripped_path(raw, self.strip),
            // A directory's name is renamed without its trailing `/`s, as GNU tar
            // renames it (`s/\.b$/.c/` renames the directory `a.b/`).
            Some(t) => match t.member(trim_trailing_slashes(raw)) {
                renamed if renamed.is_empty() => Err(STRIPPED),
                renamed => stripped_path(&renamed, self.strip),
            },
        }
    }

    /// A symlink's target as the transform makes it (never stripped, as GNU tar's).
    fn symlink_target(self, target: &[u8]) -> Vec<u8> {
        match self.transform {
            Some(t) => t.symlink_target(target).into_owned(),
            None => target.to_vec(),
        }
    }
}

/// `raw` without the `/`s it ends in (all of it, if that is all it is).
pub(crate) fn trim_trailing_slashes(raw: &[u8]) -> &[u8] {
    let end = raw.iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1);
    &raw[..end]
}

fn time((sec, nsec): (i64, u32)) -> Timestamp {
    Timestamp { sec, nsec }
}

fn meta(
    mode: u32,
    uid: u32,
    gid: u32,
    mtime: (i64, u32),
    atime: (i64, u32),
    xattrs: &[(Vec<u8>, Vec<u8>)],
) -> Metadata {
    Metadata {
        mode,
        uid,
        gid,
        mtime: time(mtime),
        atime: time(atime),
        xattrs: xattrs
            .iter()
            .map(|(n, v)| Xattr {
                name: n.clone(),
                value: v.clone(),
            })
            .collect(),
    }
}

fn kind(
    k: TarKind,
    size: u64,
    link: Option<&[u8]>,
    rdev: u64,
    rename: Rename<'_>,
) -> Result<EntryKind, &'static str> {
    let target = || {
        link.filter(|l| !l.is_empty())
            .ok_or("link without a target")
    };
    Ok(match k {
        TarKind::File => EntryKind::File { size },
        TarKind::Dir => EntryKind::Dir,
        TarKind::Symlink => EntryKind::Symlink {
            target: rename.symlink_target(target()?),
        },
        TarKind::HardLink => {
            let t = rename.path(target()?)?;
            if t.is_root() {
                return Err("hardlink to the destination root");
            }
            EntryKind::HardLink { target: t }
        }
        TarKind::Fifo => EntryKind::Fifo,
        TarKind::CharDevice => EntryKind::CharDevice { rdev },
        TarKind::BlockDevice => EntryKind::BlockDevice { rdev },
    })
}

/// The entry a tar member describes, renamed by `rename` with a safe path (see
/// [`Rename::path`]; a hardlink's target too).
pub fn from_tar(t: &TarEntry, rename: Rename<'_>) -> Result<Entry, &'static str> {
    let rdev = t.rdev.map_or(0, |(ma, mi)| rustix::fs::makedev(ma, mi));
    Ok(Entry {
        path: rename.member(&t.path, t.header_offset)?,
        kind: kind(t.kind, t.size, t.link_target.as_deref(), rdev, rename)?,
        meta: meta(
            t.mode,
            t.uid,
            t.gid,
            t.mtime,
            t.atime.unwrap_or(t.mtime),
            &t.xattrs,
        ),
        // Archives name other names by hardlink members.
        links: None,
    })
}

/// The tar kind an index kind stands for.
fn tar_kind(k: Kind) -> TarKind {
    crate::read::archive::tar_kind(k)
}

/// The entry an index entry describes, renamed by `rename` with a safe path (see
/// [`Rename::path`]; a hardlink's target too).
pub fn from_index(e: &IndexEntry, rename: Rename<'_>) -> Result<Entry, &'static str> {
    Ok(Entry {
        path: rename.member(&e.path, e.header_offset)?,
        kind: kind(tar_kind(e.kind), e.size, Some(&e.link), e.rdev, rename)?,
        meta: meta(e.mode, e.uid, e.gid, e.mtime, e.atime, &e.xattrs),
        links: None,
    })
}

/// The runs of a member's stored data: its sparse map, or all of it.
pub fn runs_of(sparse: Option<&[(u64, u64)]>, size: u64) -> Vec<(u64, u64)> {
    match sparse {
        Some(r) => r.to_vec(),
        None if size > 0 => vec![(0, size)],
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_made_safe() {
        assert_eq!(
            safe_path(b"/etc/passwd").map(|p| p.as_bytes().to_vec()),
            Ok(b"etc/passwd".to_vec())
        );
        assert_eq!(
            safe_path(b"./a//b/./c/").map(|p| p.as_bytes().to_vec()),
            Ok(b"a/b/c".to_vec())
        );
        assert!(safe_path(b"./").is_ok_and(|p| p.is_root()));
        assert!(safe_path(b"a/../../x").is_err());
        assert!(safe_path(b"..").is_err());
        assert!(safe_path(b"a/..b/c").is_ok());
    }

    #[test]
    fn stripping_counts_components_as_gnu_tar_does() {
        let strip = |raw: &[u8], n| stripped_path(raw, n).map(|p| p.as_bytes().to_vec());
        assert_eq!(
            strip(b"./d/f", 1),
            Ok(b"d/f".to_vec()),
            "`.` is a component"
        );
        assert_eq!(strip(b"/a//b/c", 2), Ok(b"c".to_vec()));
        assert_eq!(strip(b"a/b/", 1), Ok(b"b".to_vec()));
        assert_eq!(strip(b"a/", 1), Err(STRIPPED), "nothing left: skipped");
        assert_eq!(strip(b"./", 1), Err(STRIPPED));
        assert_eq!(strip(b"a/.", 1), Err(STRIPPED), "only the root left");
        assert_eq!(strip(b"a", 3), Err(STRIPPED));
        assert!(
            strip(b"a/../../x", 1).is_err(),
            "`..` after stripping is refused"
        );
        assert_eq!(
            strip(b"../x", 1),
            Ok(b"x".to_vec()),
            "stripped away with the rest"
        );
    }
}
