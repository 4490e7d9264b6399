//! Planning an upload: one walk of the tree (metadata only) lists its members, which
//! are then cut into shards.
//!
//! A shard of an earlier upload is kept when every one of its members is still there
//! with the same metadata (its fingerprint, recomputed from the walk, is unchanged) and
//! none of its inodes gained a name elsewhere. The members left are cut, in path order,
//! into shards of about `shard_size` bytes, each name of a multiply-linked inode going
//! with its first name, so a hardlink never points into another shard; a file larger
//! than a shard has one of its own. The directories form one last shard. A shard's
//! fingerprint is the xxh3-128 of its members' paths and metadata: the same members
//! give the same object key on every run, which is how a rerun finds shards already
//! sent.

use crate::manifest::{Manifest, Shard};
use crate::{Result, S3Error};
use ferry_core::entry::{Entry, EntryKind, InodeKey};
use ferry_core::error::Reporter;
use ferry_core::filter::Filter;
use ferry_core::sink::{FileData, TreeSink};
use ferry_core::walk::{walk, WalkConfig};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use xxhash_rust::xxh3::Xxh3;

/// One entry of the tree as the walk saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    /// Its path, relative to the root (empty for the root).
    pub path: Vec<u8>,
    /// Its kind, in the index's numbers.
    pub kind: u8,
    /// A file's size.
    pub size: u64,
    /// Its mtime.
    pub mtime: (i64, u32),
    /// Its atime (not part of a shard's fingerprint).
    pub atime: (i64, u32),
    /// Its permission bits.
    pub mode: u32,
    /// Owner and group.
    pub owner: (u32, u32),
    /// A symlink's target; a device's number, in decimal.
    pub link: Vec<u8>,
    /// Its inode, when it has more than one name.
    pub inode: Option<InodeKey>,
}

/// One shard to be.
#[derive(Clone, Debug)]
pub struct ShardPlan {
    /// Its members (indices into the walk's list), in path order.
    pub members: Vec<usize>,
    /// Their fingerprint, as 32 hex digits.
    pub fingerprint: String,
    /// Whether it is the directory shard.
    pub dirs: bool,
    /// The earlier upload's record of it, when it is kept.
    pub kept: Option<Shard>,
}

/// Bytes a member takes in a shard, roughly: headers, and data in 4 KiB blocks.
pub(crate) fn weight(p: &Planned) -> u64 {
    1024 + p.size.next_multiple_of(4096)
}

#[derive(Default)]
struct Collect {
    list: Mutex<Vec<Planned>>,
}

impl Collect {
    fn push(&self, e: &Entry) {
        let (kind, size, link) = match &e.kind {
            EntryKind::File { size } => (0, *size, Vec::new()),
            EntryKind::Dir => (1, 0, Vec::new()),
            EntryKind::Symlink { target } => (2, 0, target.clone()),
            EntryKind::HardLink { target } => (3, 0, target.as_bytes().to_vec()),
            EntryKind::Fifo => (4, 0, Vec::new()),
            EntryKind::CharDevice { rdev } => (5, 0, rdev.to_string().into_bytes()),
            EntryKind::BlockDevice { rdev } => (6, 0, rdev.to_string().into_bytes()),
        };
        let p = Planned {
            path: e.path.as_bytes().to_vec(),
            kind,
            size,
            mtime: (e.meta.mtime.sec, e.meta.mtime.nsec),
            atime: (e.meta.atime.sec, e.meta.atime.nsec),
            mode: e.meta.mode,
            owner: (e.meta.uid, e.meta.gid),
            link,
            inode: e.links.map(|l| l.0),
        };
        self.list
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(p);
    }
}

impl TreeSink for Collect {
    type Dir = ();
    fn wants_data(&self) -> bool {
        false
    }
    fn root(&self, e: &Entry) -> ferry_core::error::Result<()> {
        self.push(e);
        Ok(())
    }
    fn dir(&self, _: &(), e: &Entry) -> ferry_core::error::Result<()> {
        self.push(e);
        Ok(())
    }
    fn leaf(&self, _: &(), e: &Entry, _: Option<FileData<'_>>) -> ferry_core::error::Result<()> {
        self.push(e);
        Ok(())
    }
}

/// Walks `src` (a directory) and returns its entries sorted by path, the root first;
/// only those `filter` takes, when there is one.
pub fn walk_tree(
    src: &Path,
    threads: usize,
    filter: Option<Arc<Filter>>,
    reporter: &dyn Reporter,
) -> Result<Vec<Planned>> {
    let sink = Collect::default();
    let cfg = WalkConfig {
        threads,
        filter,
        ..WalkConfig::default()
    };
    walk(src, &sink, &cfg, reporter).map_err(|e| S3Error::new(e.to_string()))?;
    let mut list = sink
        .list
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    list.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(list)
}

/// The fingerprint of `members` (in path order) as a shard.
pub fn fingerprint<'a>(members: impl IntoIterator<Item = &'a Planned>, dirs: bool) -> String {
    let mut h = Xxh3::new();
    h.update(b"ferry-s3 shard 1");
    h.update(&[dirs as u8]);
    let mut first_names: HashMap<InodeKey, &[u8]> = HashMap::new();
    for p in members {
        h.update(&(p.path.len() as u64).to_le_bytes());
        h.update(&p.path);
        h.update(&[p.kind]);
        h.update(&p.size.to_le_bytes());
        h.update(&p.mtime.0.to_le_bytes());
        h.update(&p.mtime.1.to_le_bytes());
        h.update(&p.mode.to_le_bytes());
        h.update(&p.owner.0.to_le_bytes());
        h.update(&p.owner.1.to_le_bytes());
        h.update(&(p.link.len() as u64).to_le_bytes());
        h.update(&p.link);
        // Which names share an inode: each later name hashes its first name.
        let first = p.inode.map(|i| *first_names.entry(i).or_insert(&p.path));
        let first = first.unwrap_or(b"");
        h.update(&(first.len() as u64).to_le_bytes());
        h.update(first);
    }
    format!("{:032x}", h.digest128())
}

/// Cuts `list` (from [`walk_tree`]) into shards of about `shard_size` bytes, keeping
/// the shards of `old` whose members are unchanged.
pub fn plan(list: &[Planned], old: Option<&Manifest>, shard_size: u64) -> Vec<ShardPlan> {
    let by_path: HashMap<&[u8], usize> = list
        .iter()
        .enumerate()
        .map(|(i, p)| (p.path.as_slice(), i))
        .collect();
    let mut names: HashMap<InodeKey, Vec<usize>> = HashMap::new();
    for (i, p) in list.iter().enumerate() {
        if let Some(ino) = p.inode {
            names.entry(ino).or_default().push(i);
        }
    }
    let mut taken = vec![false; list.len()];
    let mut shards = Vec::new();
    for old in old.iter().flat_map(|m| &m.shards).filter(|s| !s.dirs) {
        if let Some(members) = kept(list, &by_path, &names, &taken, old) {
            for &i in &members {
                taken[i] = true;
            }
            shards.push(ShardPlan {
                members,
                fingerprint: old.fingerprint.clone(),
                dirs: false,
                kept: Some(old.clone()),
            });
        }
    }
    let mut cur: Vec<usize> = Vec::new();
    let mut bytes = 0;
    let close = |cur: &mut Vec<usize>, shards: &mut Vec<ShardPlan>| {
        if !cur.is_empty() {
            cur.sort_by(|&a, &b| list[a].path.cmp(&list[b].path));
            shards.push(ShardPlan {
                fingerprint: fingerprint(cur.iter().map(|&i| &list[i]), false),
                members: std::mem::take(cur),
                dirs: false,
                kept: None,
            });
        }
    };
    for i in 0..list.len() {
        if taken[i] || list[i].kind == 1 {
            continue;
        }
        let group = match list[i].inode {
            Some(ino) => names.get(&ino).cloned().unwrap_or_else(|| vec![i]),
            None => vec![i],
        };
        let w: u64 = group.iter().map(|&j| weight(&list[j])).sum();
        if bytes > 0 && bytes + w > shard_size {
            close(&mut cur, &mut shards);
            bytes = 0;
        }
        for j in group {
            if !taken[j] {
                taken[j] = true;
                cur.push(j);
            }
        }
        bytes += w;
    }
    close(&mut cur, &mut shards);
    let dirs: Vec<usize> = (0..list.len()).filter(|&i| list[i].kind == 1).collect();
    shards.push(ShardPlan {
        fingerprint: fingerprint(dirs.iter().map(|&i| &list[i]), true),
        members: dirs,
        dirs: true,
        kept: None,
    });
    shards
}

/// The members of `old` if it can be kept as it is.
fn kept(
    list: &[Planned],
    by_path: &HashMap<&[u8], usize>,
    names: &HashMap<InodeKey, Vec<usize>>,
    taken: &[bool],
    old: &Shard,
) -> Option<Vec<usize>> {
    let mut members = Vec::with_capacity(old.members.len());
    for m in &old.members {
        let i = *by_path.get(m.path().as_slice())?;
        if taken[i] || list[i].kind == 1 {
            return None;
        }
        members.push(i);
    }
    members.sort_by(|&a, &b| list[a].path.cmp(&list[b].path));
    let set: HashSet<usize> = members.iter().copied().collect();
    let whole = members.iter().all(|&i| {
        list[i].inode.is_none_or(|ino| {
            names
                .get(&ino)
                .is_none_or(|n| n.iter().all(|j| set.contains(j)))
        })
    });
    let same = fingerprint(members.iter().map(|&i| &list[i]), false) == old.fingerprint;
    (whole && same && !members.is_empty()).then_some(members)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, size: u64, inode: Option<u64>) -> Planned {
        Planned {
            path: path.as_bytes().to_vec(),
            kind: 0,
            size,
            mtime: (1, 0),
            atime: (1, 0),
            mode: 0o644,
            owner: (0, 0),
            link: Vec::new(),
            inode: inode.map(|ino| InodeKey { dev: 1, ino }),
        }
    }

    #[test]
    fn cuts_by_size_and_keeps_hardlinks_together() {
        let list = vec![
            file("a", 3 << 20, Some(7)),
            file("b", 3 << 20, None),
            file("c", 3 << 20, None),
            file("z", 0, Some(7)),
        ];
        let shards = plan(&list, None, 5 << 20);
        let sets: Vec<Vec<usize>> = shards.iter().map(|s| s.members.clone()).collect();
        assert_eq!(sets, vec![vec![0, 3], vec![1], vec![2], vec![]]);
        assert!(shards.last().unwrap().dirs);
    }

    #[test]
    fn unchanged_shards_are_kept() {
        let mut list = vec![file("a", 3 << 20, None), file("b", 3 << 20, None)];
        let first = plan(&list, None, 4 << 20);
        let manifest = Manifest {
            format: crate::manifest::FORMAT.into(),
            shards: first
                .iter()
                .map(|s| Shard {
                    fingerprint: s.fingerprint.clone(),
                    size: 1,
                    etag: None,
                    dirs: s.dirs,
                    members: s
                        .members
                        .iter()
                        .map(|&i| crate::manifest::Member::with_path(&list[i].path))
                        .collect(),
                })
                .collect(),
        };
        list[1].mtime = (2, 0);
        list.push(file("c", 1, None));
        let second = plan(&list, Some(&manifest), 4 << 20);
        assert!(second[0].kept.is_some());
        assert_eq!(second[0].fingerprint, first[0].fingerprint);
        assert!(second[1].kept.is_none());
        assert_eq!(second[1].members, vec![1, 2]);
        assert_ne!(second[1].fingerprint, first[1].fingerprint);
    }
}
