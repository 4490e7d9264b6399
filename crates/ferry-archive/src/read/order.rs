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
use xxhash_rust::xxh3::xxh3_64;

/// The paths the members so far named or need as directories, each as a 64-bit hash
/// with its lowest bit telling whether it is a directory, in a [`KeySet`]: about 9
/// bytes a path, however long (an index of a million members costs some 9 MiB here).
/// Two paths with one hash only make the guard see a clash where there is none:
/// members are then placed in order, which is always right.
#[derive(Default)]
pub struct OrderGuard {
    seen: KeySet,
    /// Some member named as something other than a directory a path already needed as
    /// one: from then on every directory above a member is looked at, not only those
    /// up to the first one recorded before.
    relabelled: bool,
}

/// A set of 64-bit hashes, open addressing with linear probing in one array, filled to
/// at most nine tenths: 8 bytes a slot, where a general hash table (a control byte a
/// slot, at most seven eighths full, doubling as it grows) took 19 MiB for a million
/// paths, 28 MiB at its peak. Keys are hashes already, so a key's slot is the key
/// scaled to the table.
#[derive(Default)]
struct KeySet {
    /// 0 marks an empty slot (the key 0 is kept as [`ZERO`]).
    slots: Vec<u64>,
    len: usize,
}

/// What the key 0 is kept as (a path whose hash is that is only ever confused with one
/// whose hash is this, with no harm but order).
const ZERO: u64 = 2;

impl KeySet {
    /// A set with room for `n` keys before it grows.
    fn with_room_for(n: usize) -> Self {
        KeySet {
            slots: vec![0; Self::slots_for(n)],
            len: 0,
        }
    }

    /// Slots for `n` keys at nine tenths full.
    fn slots_for(n: usize) -> usize {
        n.saturating_mul(10) / 9 + 16
    }

    /// The slot where the search for `key` starts.
    fn home(&self, key: u64) -> usize {
        ((u128::from(key) * self.slots.len() as u128) >> 64) as usize
    }

    /// The slot holding `key`, or the empty one where it would go.
    fn find(&self, key: u64) -> usize {
        let mut i = self.home(key);
        while self.slots[i] != 0 && self.slots[i] != key {
            i = (i + 1) % self.slots.len();
        }
        i
    }

    /// `key` as it is kept: 0 marks an empty slot.
    fn kept(key: u64) -> u64 {
        if key == 0 {
            ZERO
        } else {
            key
        }
    }

    fn contains(&self, key: u64) -> bool {
        let key = Self::kept(key);
        !self.slots.is_empty() && self.slots[self.find(key)] == key
    }

    /// Adds `key`; false if it was there already.
    fn insert(&mut self, key: u64) -> bool {
        let key = Self::kept(key);
        if (self.len + 1) * 10 > self.slots.len() * 9 {
            self.grow();
        }
        let i = self.find(key);
        if self.slots[i] == key {
            return false;
        }
        self.slots[i] = key;
        self.len += 1;
        true
    }

    /// Twice the room, every key moved to its place in the larger table.
    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        *self = KeySet::with_room_for(self.len.max(16) * 2);
        for key in old.into_iter().filter(|&k| k != 0) {
            let i = self.find(key);
            self.slots[i] = key;
            self.len += 1;
        }
    }
}

/// `path`'s key: its hash, with the lowest bit set for a directory.
fn key(path: &[u8], dir: bool) -> u64 {
    (xxh3_64(path) & !1) | u64::from(dir)
}

/// At most this much room is made ahead (64 Mi paths): an index may lie about its size.
const MOST_ROOM: usize = 64 << 20;

/// How a member's outcome depends on the members before it; the default: not at all,
/// so it may be placed in any order with them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Clash {
    /// Its path is one an earlier member named, or one of the directories above an
    /// earlier member.
    pub repeat: bool,
    /// A directory above it is a path an earlier member named as something other than
    /// a directory (a later directory member of that name may have replaced it since:
    /// what is there tells).
    pub below: bool,
}

impl Clash {
    /// Whether its outcome depends on an earlier member's at all.
    pub fn any(self) -> bool {
        self.repeat || self.below
    }
}

impl OrderGuard {
    /// A guard with room for the paths of `members` members (an index says how many)
    /// made at once, rather than grown a step at a time.
    pub fn with_room_for(members: u64) -> Self {
        let room = usize::try_from(members).unwrap_or(0).min(MOST_ROOM);
        OrderGuard {
            seen: KeySet::with_room_for(room),
            relabelled: false,
        }
    }

    /// Records the member at `path` of kind `kind`, and tells whether where it ends up
    /// may depend on the order it is placed in relative to the members recorded
    /// before it, and whether it lies below a path one of them named as something
    /// other than a directory.
    pub fn clashes(&mut self, path: &RelPath, kind: &EntryKind) -> Clash {
        let bytes = path.as_bytes();
        let dir = *kind == EntryKind::Dir;
        let repeat = self.holds(bytes);
        if repeat && !dir && self.seen.contains(key(bytes, true)) {
            self.relabelled = true;
        }
        self.seen.insert(key(bytes, dir));
        Clash {
            repeat,
            below: self.above_clashes(bytes),
        }
    }

    /// Whether any member recorded named `path` (or needed it as a directory).
    pub fn holds(&self, path: &[u8]) -> bool {
        self.seen.contains(key(path, false)) || self.seen.contains(key(path, true))
    }

    /// Records the directories above `path` as needed; true if one of them was named as
    /// something else. Stops at the first one already recorded as a directory: those
    /// above it were recorded with it (unless a path was relabelled since).
    fn above_clashes(&mut self, path: &[u8]) -> bool {
        let mut at = path;
        let mut below = false;
        while let Some(cut) = at.iter().rposition(|&b| b == b'/') {
            at = &at[..cut];
            below |= self.seen.contains(key(at, false));
            if !self.seen.insert(key(at, true)) && !self.relabelled {
                break;
            }
        }
        below
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> RelPath {
        RelPath::from_bytes(p.as_bytes().to_vec())
    }

    const REPEAT: Clash = Clash {
        repeat: true,
        below: false,
    };
    const BELOW: Clash = Clash {
        repeat: false,
        below: true,
    };

    fn file() -> EntryKind {
        EntryKind::File { size: 0 }
    }

    /// Keys are found again after the set grew many times over, 0 among them; keys
    /// never added are not found.
    #[test]
    fn a_key_set_keeps_every_key_through_growing() {
        let mut set = KeySet::default();
        let keys: Vec<u64> = (0..50_000u64).map(|i| xxh3_64(&i.to_le_bytes())).collect();
        for &k in keys.iter().chain([0u64].iter()) {
            assert!(set.insert(k), "new key {k}");
        }
        assert!(!set.insert(keys[123]), "a key added twice");
        assert!(keys.iter().all(|&k| set.contains(k)) && set.contains(0));
        let absent = (50_000..60_000u64).map(|i| xxh3_64(&i.to_le_bytes()));
        assert!(absent.filter(|&k| set.contains(k)).count() == 0);
        assert!(
            set.slots.len() * 9 >= set.len * 10,
            "at most nine tenths full"
        );
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
            assert_eq!(g.clashes(&path(p), &k), Clash::default(), "{p}");
        }
    }

    #[test]
    fn a_name_given_again_clashes() {
        let mut g = OrderGuard::default();
        assert_eq!(g.clashes(&path("h"), &file()), Clash::default());
        assert_eq!(g.clashes(&path("h"), &file()), REPEAT);
        let mut g = OrderGuard::default();
        assert_eq!(g.clashes(&path("d"), &EntryKind::Dir), Clash::default());
        assert_eq!(g.clashes(&path("d"), &EntryKind::Dir), REPEAT);
    }

    #[test]
    fn a_member_below_a_file_or_symlink_clashes() {
        let mut g = OrderGuard::default();
        let link = EntryKind::Symlink {
            target: b"x".to_vec(),
        };
        assert_eq!(g.clashes(&path("l"), &link), Clash::default());
        assert_eq!(g.clashes(&path("l/deep/pwn"), &file()), BELOW);
    }

    /// Below a path named again as something other than a directory, even one needed
    /// as a directory before, deep or given again itself: the unpack then looks at
    /// what stands there (issue #21, item 3).
    #[test]
    fn a_member_below_a_path_named_again_as_a_symlink_is_below_it() {
        let link = EntryKind::Symlink {
            target: b"x".to_vec(),
        };
        let mut g = OrderGuard::default();
        assert_eq!(g.clashes(&path("a"), &EntryKind::Dir), Clash::default());
        assert_eq!(g.clashes(&path("a"), &link), REPEAT);
        assert_eq!(g.clashes(&path("a/x"), &file()), BELOW);
        let mut g = OrderGuard::default();
        assert_eq!(g.clashes(&path("a/b/f"), &file()), Clash::default());
        assert_eq!(g.clashes(&path("a"), &link), REPEAT);
        assert_eq!(g.clashes(&path("a/b/g"), &file()), BELOW);
        let mut g = OrderGuard::default();
        assert_eq!(g.clashes(&path("l"), &link), Clash::default());
        assert_eq!(g.clashes(&path("l/f"), &file()), BELOW);
        let both = Clash {
            repeat: true,
            below: true,
        };
        assert_eq!(g.clashes(&path("l/f"), &file()), both);
    }

    #[test]
    fn a_member_naming_a_directory_an_earlier_one_needed_clashes() {
        let mut g = OrderGuard::default();
        assert_eq!(g.clashes(&path("a/b/f"), &file()), Clash::default());
        assert_eq!(g.clashes(&path("a"), &file()), REPEAT);
        let mut g = OrderGuard::default();
        assert_eq!(g.clashes(&path("a/b/f"), &file()), Clash::default());
        assert_eq!(g.clashes(&path("a/b"), &EntryKind::Dir), REPEAT);
    }
}
