//! Renamed and moved files, found in the last upload so they are not sent again.
//!
//! A file the walk sees under a name the last upload did not keep, with exactly the
//! metadata of one of that upload's members that stays nowhere under its own name
//! (kind, size, mtime, mode, owner, xattrs: a rename or a move changes none of them,
//! nor does `cp -a`), is a candidate. Its content is then hashed (the xxh3-128 the
//! shard's index records, see `ferry_core::content`), and when that is the member's
//! recorded hash, the new snapshot names the member where it is, under the new name
//! ([`crate::manifest::Member::renamed`]): nothing of it is sent. The file is opened
//! beneath the source without following a symlink (and with `O_NOATIME` where
//! allowed), and its size and mtime are checked before and after it is hashed, so the
//! hash is of the content the walk described. Like any member kept where it is, it
//! keeps the atime it was stored with.
//!
//! Only files with one name and some content take part (a hardlinked file is packed
//! again with its other names; an empty one costs its header alone). A stored member
//! is claimed once: a copy of a file whose original stays is sent. A candidate that
//! proves not to be the stored file has been read once more than it would have been
//! (hashed, then packed); one that cannot be opened so (`openat2`, Linux 5.6 on) is
//! packed as new.

use crate::manifest::Manifest;
use crate::plan::{member_fingerprint, Planned, Planner};
use rustix::fs::{self as rfs, Mode, OFlags, ResolveFlags};
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The files that may be members of the last upload under another name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Candidates {
    /// The free members of the last upload, grouped by their metadata: (the index of
    /// their shard in its manifest, their index in it).
    pub groups: Vec<Vec<(usize, usize)>>,
    /// Each candidate: its index in the walk's list, and the group of members it may
    /// be one of.
    pub files: Vec<(usize, usize)>,
}

/// The files of `list` not yet placed by `planner` whose metadata is that of a member
/// of the last upload no one keeps under its own name.
pub fn candidates(planner: &Planner<'_>, list: &[Planned]) -> Candidates {
    let Some(old) = planner.old() else {
        return Candidates::default();
    };
    let kept = planner.kept_places();
    let mut out = Candidates::default();
    let mut group_of: HashMap<&str, usize> = HashMap::new();
    for (at, s) in old.shards.iter().enumerate().filter(|(_, s)| !s.dirs) {
        for (j, m) in s.members.iter().enumerate() {
            let free = m.k == 0 && m.s > 0 && m.hash().is_some() && !kept.contains(&(at, m.o));
            if let (true, Some(f)) = (free, m.f.as_deref()) {
                let next = out.groups.len();
                let g = *group_of.entry(f).or_insert(next);
                if g == next {
                    out.groups.push(Vec::new());
                }
                out.groups[g].push((at, j));
            }
        }
    }
    if out.groups.is_empty() {
        return out;
    }
    out.files = list
        .iter()
        .enumerate()
        .filter(|&(i, p)| !planner.is_taken(i) && p.kind == 0 && p.size > 0 && p.inode.is_none())
        .filter_map(|(i, p)| Some((i, *group_of.get(member_fingerprint(p).as_str())?)))
        .collect();
    out
}

/// Of the `candidates`, those whose content (read beneath `src`, `threads` at a time)
/// is the recorded hash of a member of their group: `(entry, shard, member)` for
/// [`Planner::finish`], each member claimed once, in the list's order.
pub fn confirm(
    src: &Path,
    list: &[Planned],
    old: &Manifest,
    candidates: &Candidates,
    threads: usize,
) -> Vec<(usize, usize, usize)> {
    if candidates.files.is_empty() {
        return Vec::new();
    }
    let Ok(root) = rfs::open(
        src,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return Vec::new();
    };
    let hashes: Vec<Option<u128>> = hash_all(&root, list, &candidates.files, threads);
    // The members of the groups asked about, by group and recorded hash; a member is
    // taken out once claimed.
    let mut free: HashMap<(usize, u128), Vec<(usize, usize)>> = HashMap::new();
    let asked: HashSet<usize> = candidates.files.iter().map(|&(_, g)| g).collect();
    for g in asked {
        for &(at, j) in &candidates.groups[g] {
            if let Some(h) = old.shards[at].members[j].hash() {
                free.entry((g, h)).or_default().push((at, j));
            }
        }
    }
    for places in free.values_mut() {
        places.reverse();
    }
    let mut out = Vec::new();
    for (&(entry, g), hash) in candidates.files.iter().zip(hashes) {
        let place = hash.and_then(|h| free.get_mut(&(g, h))?.pop());
        if let Some((at, j)) = place {
            out.push((entry, at, j));
        }
    }
    out
}

/// The content hash of each candidate's file, on `threads` threads; None where it
/// could not be read as the walk saw it.
fn hash_all(
    root: &OwnedFd,
    list: &[Planned],
    candidates: &[(usize, usize)],
    threads: usize,
) -> Vec<Option<u128>> {
    let next = AtomicUsize::new(0);
    let mut out = vec![None; candidates.len()];
    let found = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, candidates.len()) {
            scope.spawn(|| {
                let mut mine = Vec::new();
                loop {
                    let i = next.fetch_add(1, Relaxed);
                    let Some(&(entry, _)) = candidates.get(i) else {
                        break;
                    };
                    mine.push((i, hash_as_walked(root, &list[entry])));
                }
                found
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .extend(mine);
            });
        }
    });
    let found = found
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for (i, hash) in found {
        out[i] = hash;
    }
    out
}

/// The content hash of the file `p` beneath `root`, if it is still the regular file
/// the walk saw (same size and mtime, before and after it is read).
fn hash_as_walked(root: &OwnedFd, p: &Planned) -> Option<u128> {
    // Read without moving its atime where that is allowed (its owner, or root), as
    // the walk reads.
    let open = |noatime: OFlags| {
        rfs::openat2(
            root,
            OsStr::from_bytes(&p.path),
            // Non-blocking: a fifo swapped in for the file never hangs the open (and
            // is then no regular file).
            OFlags::RDONLY
                | OFlags::NOFOLLOW
                | OFlags::CLOEXEC
                | OFlags::NOCTTY
                | OFlags::NONBLOCK
                | noatime,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
        )
    };
    let fd = match open(OFlags::NOATIME) {
        Err(rustix::io::Errno::PERM) => open(OFlags::empty()),
        other => other,
    }
    .ok()?;
    let as_walked = |fd: &OwnedFd| {
        rfs::fstat(fd).ok().is_some_and(|st| {
            rfs::FileType::from_raw_mode(st.st_mode) == rfs::FileType::RegularFile
                && st.st_size as u64 == p.size
                && (st.st_mtime, st.st_mtime_nsec as u32) == p.mtime
        })
    };
    if !as_walked(&fd) {
        return None;
    }
    let hash = ferry_core::content::hash_range(fd.as_fd(), 0, p.size).ok()?;
    as_walked(&fd).then_some(hash)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{Member, Shard, FORMAT};
    use ferry_core::entry::InodeKey;

    fn file(path: &str, size: u64, mtime: i64) -> Planned {
        Planned {
            path: path.as_bytes().to_vec(),
            kind: 0,
            size,
            mtime: (mtime, 0),
            atime: (1, 0),
            mode: 0o644,
            owner: (0, 0),
            xattrs: 0,
            link: Vec::new(),
            inode: None,
        }
    }

    /// A manifest of one shard holding `list`, one member per 4 KiB, each hashed.
    fn stored(list: &[Planned]) -> Manifest {
        let members = list
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mut m = Member::with_path(&p.path);
                (m.s, m.o, m.e) = (p.size, i as u64 * 4096, i as u64 * 4096 + 512 + p.size);
                m.f = Some(member_fingerprint(p));
                m.x = Some(format!("{:032x}", i + 1));
                m
            })
            .collect();
        Manifest {
            format: FORMAT.into(),
            snapshot: None,
            shards: vec![Shard {
                fingerprint: "0".repeat(32),
                size: 1 << 20,
                etag: None,
                dirs: false,
                held: Some(list.len() as u64),
                members,
            }],
        }
    }

    #[test]
    fn a_moved_file_is_a_candidate_and_a_copy_whose_original_stays_is_not() {
        let before = vec![file("a", 10, 1), file("b", 10, 2), file("c", 0, 3)];
        let old = stored(&before);
        // a moved to z/a, b copied to b2 (b stays), c (empty) moved, a new file with
        // a's metadata, and one hardlinked.
        let mut linked = file("l", 10, 1);
        linked.inode = Some(InodeKey { dev: 1, ino: 5 });
        let after = vec![
            file("b", 10, 2),
            file("b2", 10, 2),
            file("c2", 0, 3),
            linked,
            file("y", 10, 1),
            file("z/a", 10, 1),
        ];
        let planner = Planner::new(&after, Some(&old));
        assert!(planner.is_taken(0), "b stays where it is");
        let found = candidates(&planner, &after);
        // y and z/a may both be a: the hash decides; b2 may not be b, which stays.
        assert_eq!(found.groups, vec![vec![(0, 0)]]);
        assert_eq!(found.files, vec![(4, 0), (5, 0)]);
        // z/a proved to be a: kept in the old shard, under its new name.
        let plans = planner.finish(&[(5, 0, 0)], 1 << 20);
        let kept = plans[0].kept.as_ref().expect("kept");
        assert_eq!(plans[0].members, vec![0, 5]);
        let names: Vec<(Vec<u8>, Vec<u8>)> = kept
            .members
            .iter()
            .map(|m| (m.path(), m.stored_path()))
            .collect();
        assert_eq!(
            names,
            vec![
                (b"z/a".to_vec(), b"a".to_vec()),
                (b"b".to_vec(), b"b".to_vec())
            ]
        );
        assert!(!kept.whole(), "c is not named");
        let packed: Vec<usize> = plans[1..]
            .iter()
            .filter(|p| !p.dirs)
            .flat_map(|p| p.members.clone())
            .collect();
        assert_eq!(packed, vec![1, 2, 3, 4]);
    }

    #[test]
    fn only_a_file_whose_content_has_the_recorded_hash_is_confirmed() {
        let dir = tempfile::tempdir().unwrap();
        let content = b"the same bytes".to_vec();
        for (name, bytes) in [("moved", &content), ("other", &b"other  bytes!!".to_vec())] {
            std::fs::write(dir.path().join(name), bytes).unwrap();
        }
        let walked = |name: &str| {
            let st = std::fs::metadata(dir.path().join(name)).unwrap();
            use std::os::unix::fs::MetadataExt;
            let mut p = file(name, st.len(), st.mtime());
            p.mtime.1 = st.mtime_nsec() as u32;
            p
        };
        let list = vec![walked("moved"), walked("other")];
        let mut old = stored(&[file("was", content.len() as u64, 0)]);
        old.shards[0].members[0].x =
            Some(format!("{:032x}", ferry_core::content::hash_of(&content)));
        let asked = |files: Vec<(usize, usize)>| Candidates {
            groups: vec![vec![(0, 0)]],
            files,
        };
        let got = confirm(dir.path(), &list, &old, &asked(vec![(0, 0), (1, 0)]), 2);
        assert_eq!(got, vec![(0, 0, 0)]);
        // Claimed once: a second file of that content is not that member too.
        let twice = confirm(dir.path(), &list, &old, &asked(vec![(0, 0), (0, 0)]), 1);
        assert_eq!(twice, vec![(0, 0, 0)]);
        // Changed since the walk (its size): not confirmed.
        std::fs::write(dir.path().join("moved"), b"the same bytes, and more").unwrap();
        assert!(confirm(dir.path(), &list, &old, &asked(vec![(0, 0)]), 1).is_empty());
    }
}
