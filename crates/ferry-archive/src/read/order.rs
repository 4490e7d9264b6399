//! Whether the members of an archive can be placed in any order.
//!
//! A parallel unpack places runs of members on several workers at once, so two members
//! land in no fixed order. That is right only while no member's outcome depends on an
//! earlier one: tar's rule is that the last member of a name wins, and a member below a
//! name an earlier member made a symlink or a file meets that symlink or file. An archive
//! pack writes never does either (each path once, a directory before what it holds);
//! a hostile or appended-to one can. [`OrderGuard`] finds the first member that does,
//! from there on the unpack places members in archive order. It also tells which
//! members give a name again: an earlier member's file may stand there, which no size
//! and mtime check can tell from this one's.

use ferry_core::entry::{EntryKind, RelPath};
use std::collections::HashSet;
use xxhash_rust::xxh3::xxh3_64;

/// The paths the members so far named or need as directories, each as a 64-bit hash
/// with its lowest bit telling whether it is a directory (8 bytes a path, however long:
/// an index of a million members costs some 16 MiB here). Two paths with one hash
/// only make the guard see a clash where there is none: members are then placed in
/// order, which is always right.
#[derive(Default)]
pub struct OrderGuard {
    seen: HashSet<u64>,
}

/// `path`'s key: its hash, with the lowest bit set for a directory.
fn key(path: &[u8], dir: bool) -> u64 {
    (xxh3_64(path) & !1) | u64::from(dir)
}

/// How a member's outcome depends on the members before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clash {
    /// Not at all: it may be placed in any order with them.
    None,
    /// Its path is one an earlier member named, or one of the directories above an
    /// earlier member.
    Repeat,
    /// A directory above it is a path an earlier member named as something other than
    /// a directory.
    Below,
}

impl OrderGuard {
    /// Records the member at `path` of kind `kind`, and tells whether where it ends up
    /// may depend on the order it is placed in relative to the members recorded
    /// before it.
    pub fn clashes(&mut self, path: &RelPath, kind: &EntryKind) -> Clash {
        let bytes = path.as_bytes();
        if self.holds(bytes) {
            return Clash::Repeat;
        }
        self.seen.insert(key(bytes, *kind == EntryKind::Dir));
        match self.above_clashes(bytes) {
            true => Clash::Below,
            false => Clash::None,
        }
    }

    /// Whether any member named `path` (or needed it as a directory).
    fn holds(&self, path: &[u8]) -> bool {
        self.seen.contains(&key(path, false)) || self.seen.contains(&key(path, true))
    }

    /// Records the directories above `path` as needed; true if one of them was named as
    /// something else. Stops at the first one already recorded as a directory: those
    /// above it were recorded with it.
    fn above_clashes(&mut self, path: &[u8]) -> bool {
        let mut at = path;
        while let Some(cut) = at.iter().rposition(|&b| b == b'/') {
            at = &at[..cut];
            if self.seen.contains(&key(at, false)) {
                return true;
            }
            if !self.seen.insert(key(at, true)) {
                return false;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> RelPath {
        RelPath::from_bytes(p.as_bytes().to_vec())
    }

    fn file() -> EntryKind {
        EntryKind::File { size: 0 }
    }

    #[test]
    fn members_as_pack_writes_them_never_clash() {
        let mut g = OrderGuard::default();
        for (p, k) in [
            ("", EntryKind::Dir),
            ("a", EntryKind::Dir),
            ("a/f", file()),
            ("a/b", EntryKind::Dir),
            ("a/b/g", file()),
            ("a/h", file()),
            ("c", file()),
        ] {
            assert_eq!(g.clashes(&path(p), &k), Clash::None, "{p}");
        }
    }

    #[test]
    fn a_name_given_again_clashes() {
        let mut g = OrderGuard::default();
        assert_eq!(g.clashes(&path("h"), &file()), Clash::None);
        assert_eq!(g.clashes(&path("h"), &file()), Clash::Repeat);
        let mut g = OrderGuard::default();
        assert_eq!(g.clashes(&path("d"), &EntryKind::Dir), Clash::None);
        assert_eq!(g.clashes(&path("d"), &EntryKind::Dir), Clash::Repeat);
    }

    #[test]
    fn a_member_below_a_file_or_symlink_clashes() {
        let mut g = OrderGuard::default();
        let link = EntryKind::Symlink {
            target: b"x".to_vec(),
        };
        assert_eq!(g.clashes(&path("l"), &link), Clash::None);
        assert_eq!(g.clashes(&path("l/deep/pwn"), &file()), Clash::Below);
    }

    #[test]
    fn a_member_naming_a_directory_an_earlier_one_needed_clashes() {
        let mut g = OrderGuard::default();
        assert_eq!(g.clashes(&path("a/b/f"), &file()), Clash::None);
        assert_eq!(g.clashes(&path("a"), &file()), Clash::Repeat);
        let mut g = OrderGuard::default();
        assert_eq!(g.clashes(&path("a/b/f"), &file()), Clash::None);
        assert_eq!(g.clashes(&path("a/b"), &EntryKind::Dir), Clash::Repeat);
    }
}
