//! The differences the rounds of tests/common/rounds_check.rs know and let pass, each
//! named, with whose it is and why, and a matcher that recognises it and nothing else:
//! rsync's documented behaviour where ferry is right ([`Whose::Rsync`]), and ferry
//! bugs found by the rounds and reported, not fixed yet ([`Whose::Ferry`]: delete the
//! entry with the fix, and the rounds check the fix). Every one met is counted and
//! printed, so a test run shows which still occur.
//!
//! Also [`Links`], which names share an inode on each side of a comparison, which the
//! matchers and the check of `-i`'s listing need.

use super::compare::Difference;
use super::fdwalk;
use std::collections::HashMap;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Whose behaviour a known difference is.
#[derive(Debug, PartialEq, Eq)]
pub enum Whose {
    /// rsync's, as its manual says; ferry does what a fresh copy would leave.
    Rsync,
    /// A ferry bug, reported; the entry goes when it is fixed.
    Ferry,
}

/// One known difference.
#[derive(Debug)]
pub struct Known {
    pub name: &'static str,
    pub whose: Whose,
    pub why: &'static str,
}

/// rsync leaves DST's names linked where SRC now holds them apart, data and times the
/// same; later metadata changes made through one name then show on the other too.
pub const RSYNC_KEEPS_LINKS: Known = Known {
    name: "rsync keeps hard links that SRC no longer has",
    whose: Whose::Rsync,
    why: "rsync(1), --hard-links: \"It does NOT currently endeavor to break already \
          existing hard links on the destination that do not exist between the source \
          files\" (a name with changed data is unlinked when updated); a fresh copy has \
          them apart",
};

/// ferry, too, leaves DST's names linked where SRC now holds them apart and the node
/// is otherwise up to date (LocalTreeSink::settle only replaces a node with more names
/// than its source when its metadata must change); docs/copy.md says `--delete` makes
/// DST "SRC exactly".
pub const FERRY_KEEPS_LINKS: Known = Known {
    name: "ferry keeps hard links that SRC no longer has",
    whose: Whose::Ferry,
    why: "reported: a name SRC broke off a hardlink, data, owner, mode, xattrs and times \
          kept, stays linked in DST and `-n -i` does not list it (as rsync -H)",
};

/// `-n -i` lists every name of a hardlinked node whose metadata changes; the real run
/// sets it through the first name, finds the others up to date, and lists one.
pub const DRY_RUN_LISTS_EVERY_NAME: Known = Known {
    name: "the dry run lists each name of a node whose metadata changes",
    whose: Whose::Ferry,
    why: "reported: `meta` lines of the dry run for the second and later names of an \
          inode, which the real run does not print",
};

/// A name SRC gave an inode DST already has, walked before DST's names of it, gets a
/// fresh copy of the data, and DST's up-to-date names are then replaced by links to
/// it: the tree ends right, but the data is copied again and the real run lists
/// `updated file OLD (content)`, which the dry run does not.
pub const NEW_NAME_COPIED_AGAIN: Known = Known {
    name: "a new name of an inode DST has is copied afresh, its old names relinked",
    whose: Whose::Ferry,
    why: "reported: the first name of a source inode that the walk meets is copied \
          (Claim::Copy) even when DST holds the inode under another name, up to date",
};

/// A node DST has with more names than SRC's, whose metadata changed, is replaced;
/// the dry run gives the metadata fields as why (`mode`), the real run `content` (a
/// file), `target` (a symlink) or `links` (a fifo); docs/copy.md says `links`. And
/// where the real run has replaced another name of the inode first, the node is left
/// with no more names than the source's and only given its metadata (`meta`), which
/// the dry run, looking at DST as it was, lists as `updated`.
pub const LINKS_REASON: Known = Known {
    name: "a node with names SRC's has not is listed otherwise by the two runs",
    whose: Whose::Ferry,
    why: "reported: preview.rs says the metadata reasons, local.rs's replaced_why the \
          data's, for a node replaced because of its extra names; and what the real run \
          does to one name changes what it does to the next",
};

/// Replacing a name of an inode that has other names in DST (its data or kind
/// changed in SRC, or it lies in a directory replaced by a non-directory) unlinks it,
/// which moves the inode's ctime; its other names, up to date, are then taken for
/// files this job wrote (local/data_in.rs, `up_to_date`: ctime at or after the job's
/// start) and copied again, listed `updated file P (content)` by the real run only.
pub const UNLINKING_MOVES_CTIME: Known = Known {
    name: "other names of an inode a replaced name was unlinked from are copied again",
    whose: Whose::Ferry,
    why: "reported: up_to_date's ctime test (for a name an archive gives twice) takes \
          an inode this job only unlinked a name of for one it wrote",
};

/// Every known difference.
pub const ALL: &[&Known] = &[
    &RSYNC_KEEPS_LINKS,
    &FERRY_KEEPS_LINKS,
    &DRY_RUN_LISTS_EVERY_NAME,
    &NEW_NAME_COPIED_AGAIN,
    &LINKS_REASON,
    &UNLINKING_MOVES_CTIME,
];

/// Which names share an inode, on each side of a comparison.
pub struct Links {
    /// Each non-directory's inode (device, number) on the two sides, where it has one.
    inodes: HashMap<Vec<u8>, [Option<(u64, u64)>; 2]>,
}

impl Links {
    /// The inodes of the non-directories of the trees at `src` and `dst`.
    pub fn of(src: &Path, dst: &Path) -> Links {
        let mut inodes: HashMap<Vec<u8>, [Option<(u64, u64)>; 2]> = HashMap::new();
        for (side, root) in [src, dst].into_iter().enumerate() {
            let fd = fdwalk::open_dir(root);
            fdwalk::walk_post_order(fd.as_fd(), b"", &mut |dir, name, rel| {
                let m = std::fs::symlink_metadata(fdwalk::at(dir, name)).expect("lstat");
                if !m.is_dir() {
                    inodes.entry(rel.to_vec()).or_default()[side] = Some((m.dev(), m.ino()));
                }
            });
        }
        Links { inodes }
    }

    /// Every non-directory's name, on either side.
    pub fn names(&self) -> impl Iterator<Item = &[u8]> {
        self.inodes.keys().map(|r| r.as_slice())
    }

    /// The names sharing an inode with `rel` on either side, `rel` itself included.
    pub fn group<'a>(&'a self, rel: &'a [u8]) -> Vec<&'a [u8]> {
        let Some(mine) = self.inodes.get(rel) else {
            return vec![rel];
        };
        let shares = |theirs: &[Option<(u64, u64)>; 2]| {
            (0..2).any(|s| mine[s].is_some() && mine[s] == theirs[s])
        };
        self.inodes
            .iter()
            .filter(|(_, theirs)| shares(theirs))
            .map(|(r, _)| r.as_slice())
            .collect()
    }

    /// Whether DST's inode at `rel` has more names in DST than SRC's at `rel` in SRC.
    pub fn more_names_in_dst(&self, rel: &[u8]) -> bool {
        let Some(mine) = self.inodes.get(rel) else {
            return false;
        };
        let names = |side: usize| {
            self.inodes
                .values()
                .filter(|o| mine[side].is_some() && o[side] == mine[side])
                .count()
        };
        names(1) > names(0)
    }

    /// Whether DST has `rel` sharing an inode with a name that SRC has apart from it.
    pub fn joined_in_dst_only(&self, rel: &[u8]) -> bool {
        let Some([Some(s), Some(d)]) = self.inodes.get(rel) else {
            return false;
        };
        self.inodes
            .values()
            .any(|other| other[1] == Some(*d) && other[0].is_some_and(|o| o != *s))
    }
}

/// Whether a difference is one of link structure only (link counts, shared inodes).
pub fn is_link(d: &Difference) -> bool {
    d.what.starts_with("nlink:") || d.what.starts_with("hardlink:")
}

/// Splits `diffs` into those `known` recognises (as lines naming it) and the others.
pub fn split(
    diffs: &[Difference],
    known: impl Fn(&Difference) -> Option<&'static Known>,
) -> (Vec<String>, Vec<&Difference>) {
    let mut met = Vec::new();
    let mut others = Vec::new();
    for d in diffs {
        match known(d) {
            Some(k) => met.push(format!("{}: {d}", k.name)),
            None => others.push(d),
        }
    }
    (met, others)
}

/// The known difference between SRC and a mirror of it that `d` is: a link
/// difference where the mirror kept names linked that SRC holds apart.
pub fn in_mirror(d: &Difference, links: &Links) -> Option<&'static Known> {
    (is_link(d) && links.joined_in_dst_only(&d.rel)).then_some(&FERRY_KEEPS_LINKS)
}

/// The known difference between ferry's DST (the comparison's SRC) and rsync's that
/// `d` is: anything on a name rsync's DST has linked to one ferry's has apart.
pub fn in_rsync_copy(d: &Difference, links: &Links) -> Option<&'static Known> {
    links
        .joined_in_dst_only(&d.rel)
        .then_some(&RSYNC_KEEPS_LINKS)
}
