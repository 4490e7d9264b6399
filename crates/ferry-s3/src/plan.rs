//! Planning an upload: one walk of the tree (metadata only) lists its members, which
//! are then cut into shards.
//!
//! A member of the last upload stays where it is, in its shard, when the walk sees it
//! with the same metadata ([`member_fingerprint`]: kind, size, mtime, mode, owner, link
//! target, xattrs) and it has one name (the names of a multiply-linked inode are packed
//! again together, so a hardlink always points into its own shard). A shard the last
//! upload wrote with [`crate::manifest::FORMAT_V1`], whose members carry no
//! fingerprint, is kept only whole: when every one of its members is unchanged (its
//! fingerprint, recomputed from the walk, is the same) and none of its inodes gained a
//! name elsewhere. The members left are cut, in path order,
//! into shards of about `shard_size` bytes, each name of a multiply-linked inode going
//! with its first name, so a hardlink never points into another shard; a file larger
//! than a shard has one of its own. The directories form one last shard. A shard's
//! fingerprint is the xxh3-128 of its members' paths and metadata: the same members
//! give the same object key on every run, which is how a rerun finds shards already
//! sent.

use crate::manifest::{Manifest, Member, Shard};
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
    /// The xxh3-64 of its extended attributes (names and values, as the walk read them).
    pub xattrs: u64,
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
            // Never given: this walk takes no sockets (a shard cannot hold one).
            EntryKind::Socket => return,
        };
        let p = Planned {
            path: e.path.as_bytes().to_vec(),
            kind,
            size,
            mtime: (e.meta.mtime.sec, e.meta.mtime.nsec),
            atime: (e.meta.atime.sec, e.meta.atime.nsec),
            mode: e.meta.mode,
            owner: (e.meta.uid, e.meta.gid),
            xattrs: xattr_hash(&e.meta.xattrs),
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
    // A change of xattrs alone is a change to upload.
    fn wants_xattrs(&self) -> bool {
        true
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

/// The hash of `xattrs` for [`Planned::xattrs`].
fn xattr_hash(xattrs: &[ferry_core::entry::Xattr]) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for x in xattrs {
        for part in [&x.name, &x.value] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part);
        }
    }
    h.digest()
}

/// Feeds `p`'s kind, size, mtime, mode, owner and link target to `h`.
fn hash_meta(h: &mut Xxh3, p: &Planned) {
    h.update(&[p.kind]);
    h.update(&p.size.to_le_bytes());
    h.update(&p.mtime.0.to_le_bytes());
    h.update(&p.mtime.1.to_le_bytes());
    h.update(&p.mode.to_le_bytes());
    h.update(&p.owner.0.to_le_bytes());
    h.update(&p.owner.1.to_le_bytes());
    h.update(&(p.link.len() as u64).to_le_bytes());
    h.update(&p.link);
}

/// The fingerprint of one member's metadata, as [`crate::manifest::Member::f`] keeps
/// it: a rerun leaves the member where it is when the walk gives the same.
pub fn member_fingerprint(p: &Planned) -> String {
    let mut h = Xxh3::new();
    h.update(b"ferry-s3 member 2");
    hash_meta(&mut h, p);
    h.update(&p.xattrs.to_le_bytes());
    format!("{:016x}", h.digest())
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
    fingerprint_of(members, dirs, true)
}

/// As [`fingerprint`]; `xattrs`: with the members' xattrs (without them, as an
/// earlier ferry made them: a change of xattrs alone then found the shard of before,
/// holding the old ones).
fn fingerprint_of<'a>(
    members: impl IntoIterator<Item = &'a Planned>,
    dirs: bool,
    xattrs: bool,
) -> String {
    let mut h = Xxh3::new();
    h.update(match xattrs {
        true => b"ferry-s3 shard 2",
        false => b"ferry-s3 shard 1",
    });
    h.update(&[dirs as u8]);
    let mut first_names: HashMap<InodeKey, &[u8]> = HashMap::new();
    for p in members {
        h.update(&(p.path.len() as u64).to_le_bytes());
        h.update(&p.path);
        hash_meta(&mut h, p);
        if xattrs {
            h.update(&p.xattrs.to_le_bytes());
        }
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
    Planner::new(list, old).finish(&[], shard_size)
}

/// A plan in the making: the members of the last upload kept where they are found
/// first, then (once the caller has checked which files were renamed, see
/// [`crate::renames`]) those found under another name, then the rest cut into shards.
pub struct Planner<'a> {
    list: &'a [Planned],
    old: Option<&'a Manifest>,
    by_path: HashMap<&'a [u8], usize>,
    names: HashMap<InodeKey, Vec<usize>>,
    /// Which entries of `list` have a place.
    taken: Vec<bool>,
    /// The kept shards so far, by the index of the old manifest's shard.
    shards: Vec<(usize, ShardPlan)>,
}

impl<'a> Planner<'a> {
    /// The plan of `list` with the members of `old` kept where they are unchanged.
    pub fn new(list: &'a [Planned], old: Option<&'a Manifest>) -> Planner<'a> {
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
        let olds = old.iter().flat_map(|m| m.shards.iter().enumerate());
        for (at, old) in olds {
            // Unchanged members (of a directory shard, directories) stay in the shard
            // they are in; a shard of files of the first format, only whole.
            if old.members.iter().all(|m| m.f.is_some()) {
                if let Some(plan) = kept_members(list, &by_path, &mut taken, old) {
                    shards.push((at, plan));
                }
            } else if !old.dirs {
                if let Some(members) = kept(list, &by_path, &names, &taken, old) {
                    for &i in &members {
                        taken[i] = true;
                    }
                    let plan = ShardPlan {
                        members,
                        fingerprint: old.fingerprint.clone(),
                        dirs: false,
                        kept: Some(old.clone()),
                    };
                    shards.push((at, plan));
                }
            }
        }
        Planner {
            list,
            old,
            by_path,
            names,
            taken,
            shards,
        }
    }

    /// The last upload's manifest.
    pub fn old(&self) -> Option<&'a Manifest> {
        self.old
    }

    /// Whether entry `i` of the list has a place yet.
    pub fn is_taken(&self, i: usize) -> bool {
        self.taken[i]
    }

    /// Where the members of the last upload that stay under their own names are:
    /// (the index of their shard in its manifest, their offset).
    pub fn kept_places(&self) -> HashSet<(usize, u64)> {
        let kept = self
            .shards
            .iter()
            .filter_map(|(at, p)| Some((*at, p.kept.as_ref()?)));
        kept.flat_map(|(at, k)| k.members.iter().map(move |m| (at, m.o)))
            .collect()
    }

    /// The plan, with each `(entry, shard, member)` of `renamed` kept where the last
    /// upload's shard `shard` holds its member `member` (the caller has made sure it
    /// holds that file's content, and that neither is taken), and the rest cut into
    /// shards of about `shard_size` bytes.
    pub fn finish(mut self, renamed: &[(usize, usize, usize)], shard_size: u64) -> Vec<ShardPlan> {
        let list = self.list;
        for &(i, at, member) in renamed {
            let Some(old) = self.old.and_then(|m| m.shards.get(at)) else {
                continue;
            };
            let Some(record) = old.members.get(member) else {
                continue;
            };
            if self.taken[i] {
                continue;
            }
            self.taken[i] = true;
            let record = record.renamed(&list[i].path);
            match self.shards.iter_mut().find(|(a, _)| *a == at) {
                Some((_, plan)) => {
                    plan.members.push(i);
                    if let Some(kept) = plan.kept.as_mut() {
                        kept.members.push(record);
                    }
                }
                None => self
                    .shards
                    .push((at, kept_plan(old, vec![i], vec![record]))),
            }
        }
        let (taken, names) = (&mut self.taken, &self.names);
        // Each kept shard's entries in path order, its records in archive order.
        let (kept_dirs, mut shards): (Vec<ShardPlan>, Vec<ShardPlan>) =
            std::mem::take(&mut self.shards)
                .into_iter()
                .map(|(_, mut plan)| {
                    plan.members
                        .sort_by(|&a, &b| list[a].path.cmp(&list[b].path));
                    if let Some(kept) = plan.kept.as_mut() {
                        kept.members.sort_by_key(|m| m.o);
                    }
                    plan
                })
                .partition(|plan| plan.dirs);
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
        // The directory shards last: those kept, then one of the directories new or
        // changed (of them all on a first upload, even none).
        let dirs: Vec<usize> = (0..list.len())
            .filter(|&i| list[i].kind == 1 && !taken[i])
            .collect();
        let none_kept = kept_dirs.is_empty();
        shards.extend(kept_dirs);
        if !dirs.is_empty() || none_kept {
            shards.push(ShardPlan {
                fingerprint: dir_shard_fingerprint(list, &self.by_path, &dirs),
                members: dirs,
                dirs: true,
                kept: None,
            });
        }
        shards
    }
}

/// The fingerprint of a directory shard of the directories `dirs` (indices into
/// `list`, in path order): theirs, and that of the directories above them and the
/// root, which its tar holds too (a download and a mount take their metadata from
/// it), so a shard found by its fingerprint holds those as they are now.
fn dir_shard_fingerprint(
    list: &[Planned],
    by_path: &HashMap<&[u8], usize>,
    dirs: &[usize],
) -> String {
    let mut all: HashSet<usize> = dirs.iter().copied().collect();
    if !dirs.is_empty() {
        all.extend(by_path.get(&b""[..]));
    }
    for &i in dirs {
        // Parents come before their children: above one already in, all are.
        let above = parents(&list[i].path).filter_map(|at| by_path.get(at));
        for &j in above {
            if !all.insert(j) {
                break;
            }
        }
    }
    let mut all: Vec<usize> = all.into_iter().collect();
    all.sort_by(|&a, &b| list[a].path.cmp(&list[b].path));
    fingerprint(all.iter().map(|&i| &list[i]), true)
}

/// The directories above `path`, nearest first, the root aside.
pub(crate) fn parents(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut at = path;
    std::iter::from_fn(move || {
        let slash = at.iter().rposition(|&b| b == b'/')?;
        at = &at[..slash];
        Some(at)
    })
}

/// The plan of keeping `records`, members of `old` (for the entries `members` of the
/// walk's list), where `old` holds them.
fn kept_plan(old: &Shard, members: Vec<usize>, records: Vec<Member>) -> ShardPlan {
    let kept = Shard {
        fingerprint: old.fingerprint.clone(),
        size: old.size,
        etag: old.etag.clone(),
        dirs: old.dirs,
        held: Some(old.held.unwrap_or(old.members.len() as u64)),
        members: records,
    };
    ShardPlan {
        members,
        fingerprint: old.fingerprint.clone(),
        dirs: old.dirs,
        kept: Some(kept),
    }
}

/// The members of `old` that stay where they are (marked `taken`), as the shard's plan;
/// None when none does.
fn kept_members(
    list: &[Planned],
    by_path: &HashMap<&[u8], usize>,
    taken: &mut [bool],
    old: &Shard,
) -> Option<ShardPlan> {
    let mut members = Vec::new();
    let mut records = Vec::new();
    for m in &old.members {
        let Some(&i) = by_path.get(m.path().as_slice()) else {
            continue;
        };
        let p = &list[i];
        let same = m.f.as_deref() == Some(member_fingerprint(p).as_str());
        // A directory shard keeps directories; another, files of one name.
        let fits = match old.dirs {
            true => p.kind == 1 && m.k == 1,
            false => p.kind != 1 && p.kind != 3 && m.k != 3 && p.inode.is_none(),
        };
        if taken[i] || !fits || !same {
            continue;
        }
        taken[i] = true;
        members.push(i);
        records.push(m.clone());
    }
    (!members.is_empty()).then(|| kept_plan(old, members, records))
}

/// The members of `old` (of [`crate::manifest::FORMAT_V1`]) if it can be kept whole.
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
    // A shard of that format was fingerprinted without xattrs.
    let same = fingerprint_of(members.iter().map(|&i| &list[i]), false, false) == old.fingerprint;
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
            xattrs: 0,
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

    /// The manifest of an upload of `list` as `plans`; `by_member`: with each member's
    /// fingerprint (this version), else as version 1 wrote it.
    fn record(plans: &[ShardPlan], list: &[Planned], by_member: bool) -> Manifest {
        let member = |i: usize, at: usize| {
            let mut m = crate::manifest::Member::with_path(&list[i].path);
            (m.k, m.o, m.e) = (list[i].kind, at as u64 * 1024, at as u64 * 1024 + 512);
            m.f = by_member.then(|| member_fingerprint(&list[i]));
            m
        };
        Manifest {
            format: crate::manifest::FORMAT.into(),
            snapshot: None,
            shards: plans
                .iter()
                .map(|s| Shard {
                    fingerprint: s.fingerprint.clone(),
                    size: 1 << 30,
                    etag: None,
                    dirs: s.dirs,
                    held: None,
                    members: s
                        .members
                        .iter()
                        .enumerate()
                        .map(|(at, &i)| member(i, at))
                        .collect(),
                })
                .collect(),
        }
    }

    #[test]
    fn unchanged_members_stay_in_their_shards() {
        let mut list: Vec<Planned> = (0..6)
            .map(|i| file(&format!("f{i}"), 1 << 20, None))
            .collect();
        list.push(file("l1", 5, Some(9)));
        list.push(file("l2", 5, Some(9)));
        let first = plan(&list, None, 3 << 20);
        let manifest = record(&first, &list, true);
        list[1].mtime = (2, 0);
        list[4].mode = 0o600;
        list.remove(2);
        list.push(file("g", 1, None));
        list.sort_by(|a, b| a.path.cmp(&b.path));
        let second = plan(&list, Some(&manifest), 3 << 20);
        let kept: Vec<&ShardPlan> = second.iter().filter(|s| s.kept.is_some()).collect();
        // Four unchanged single-name files stay, in their two shards; the hardlinked
        // pair, the changed two and the new one are packed again.
        let stayed: Vec<&[u8]> = kept
            .iter()
            .flat_map(|s| &s.members)
            .map(|&i| list[i].path.as_slice())
            .collect();
        assert_eq!(stayed, vec![&b"f0"[..], b"f3", b"f5"]);
        for s in &kept {
            let k = s.kept.as_ref().unwrap();
            assert!(!k.whole() && k.held > Some(k.members.len() as u64), "{k:?}");
            assert!(first.iter().any(|f| f.fingerprint == s.fingerprint));
        }
        let packed: Vec<&[u8]> = second
            .iter()
            .filter(|s| s.kept.is_none() && !s.dirs)
            .flat_map(|s| &s.members)
            .map(|&i| list[i].path.as_slice())
            .collect();
        assert_eq!(packed, vec![&b"f1"[..], b"f4", b"g", b"l1", b"l2"]);
    }

    #[test]
    fn unchanged_directories_stay_in_their_shard_and_directory_shards_come_last() {
        let dir = |path: &str, mtime: i64| Planned {
            kind: 1,
            mtime: (mtime, 0),
            ..file(path, 0, None)
        };
        let mut list = vec![dir("", 1), dir("a", 1), dir("b", 1), file("a/f", 10, None)];
        let first = plan(&list, None, 1 << 20);
        assert!(first.last().unwrap().dirs && first.last().unwrap().members == vec![0, 1, 2]);
        let manifest = record(&first, &list, true);
        // b changes, a file is added: b's directory shard is new, a and the root stay.
        list[2].mtime = (2, 0);
        list.push(file("b/g", 5, None));
        let second = plan(&list, Some(&manifest), 1 << 20);
        let dirs: Vec<&ShardPlan> = second.iter().filter(|s| s.dirs).collect();
        assert_eq!(dirs.len(), 2);
        assert!(
            second.iter().rev().take(2).all(|s| s.dirs),
            "directory shards last"
        );
        assert!(dirs[0].kept.is_some() && dirs[0].members == vec![0, 1]);
        assert!(dirs[1].kept.is_none() && dirs[1].members == vec![2]);
        // Nothing changed since: the directory shard is kept and no other is made.
        let manifest = record(&second, &list, true);
        let third = plan(&list, Some(&manifest), 1 << 20);
        assert!(third.iter().all(|s| s.kept.is_some()), "{third:?}");
    }

    #[test]
    fn unchanged_shards_are_kept() {
        let mut list = vec![file("a", 3 << 20, None), file("b", 3 << 20, None)];
        let first = plan(&list, None, 4 << 20);
        let mut manifest = record(&first, &list, false);
        // Fingerprinted as the ferry that wrote that format did: without xattrs.
        for (s, p) in manifest.shards.iter_mut().zip(&first) {
            s.fingerprint = fingerprint_of(p.members.iter().map(|&i| &list[i]), p.dirs, false);
        }
        list[1].mtime = (2, 0);
        list.push(file("c", 1, None));
        let second = plan(&list, Some(&manifest), 4 << 20);
        assert!(second[0].kept.is_some());
        assert_eq!(second[0].fingerprint, manifest.shards[0].fingerprint);
        assert!(second[1].kept.is_none());
        assert_eq!(second[1].members, vec![1, 2]);
        assert_ne!(second[1].fingerprint, first[1].fingerprint);
    }
}
