//! Packing one shard: ferry-archive's `pack` (the one tar writer) run over the tree
//! with a filter that opens only the shard's members and their directories, and an
//! [`Omit`] hook that keeps exactly the shard's members. The archive is written as a
//! stream into a [`PartWriter`], which sends it as it goes, and its index, kept aside
//! by the writer, gives each member's place for the manifest.

use crate::manifest::{Member, Shard};
use crate::plan::{member_fingerprint, weight, Planned, ShardPlan};
use crate::stream_put::{PartWriter, Tail};
use crate::{Result, S3Error};
use ferry_archive::index::{Footer, Index, Kind, FOOTER_LEN};
use ferry_archive::write::pack::{pack_omitting, Omit, Output, PackOptions};
use ferry_core::entry::Entry;
use ferry_core::error::Reporter;
use ferry_core::filter::Filter;
use ferry_core::Stats;
use std::collections::{HashMap, HashSet};
use std::os::fd::BorrowedFd;
use std::path::Path;
use std::sync::Arc;

/// Keeps the members of one shard; the directory shard keeps directories alone (pack
/// asks only about the others).
struct InShard {
    paths: HashSet<Vec<u8>>,
    dirs: bool,
}

impl Omit for InShard {
    fn omit(&self, member: &Entry, _: Option<BorrowedFd<'_>>) -> bool {
        self.dirs || !self.paths.contains(member.path.as_bytes())
    }
}

/// The filter that walks only to `members`: exactly their paths and the directories
/// above them (of a directory shard too: a directory the upload's rules leave out, or
/// one made since the walk, is in none).
fn filter_for(list: &[Planned], plan: &ShardPlan) -> Arc<ferry_core::filter::Filter> {
    let mut paths = HashSet::new();
    let mut dirs = HashSet::new();
    for &i in &plan.members {
        let path = &list[i].path;
        paths.insert(path.clone());
        // Above a directory already in, all are.
        for at in crate::plan::parents(path) {
            if !dirs.insert(at.to_vec()) {
                break;
            }
        }
    }
    Arc::new(Filter::exactly(paths, dirs))
}

/// How shards are packed.
#[derive(Clone, Debug)]
pub struct PackShard {
    /// The pack options (threads, clone policy); `hash` and `filter` are set here.
    pub pack: PackOptions,
}

/// The part size to send the shard `plan` in: the limits' choice for twice what its
/// members should take (headers, 4 KiB-aligned data, index), so files that grow a
/// little while packed still fit in the parts allowed.
pub fn part_size_for(list: &[Planned], plan: &ShardPlan) -> u64 {
    let members = plan.members.iter().map(|&i| &list[i]);
    let planned: u64 = members
        .map(|p| weight(p) + 2 * (p.path.len() as u64 + 256))
        .sum();
    crate::parts::part_size(planned.saturating_mul(2)).unwrap_or(crate::parts::MAX_PART)
}

/// Packs the shard `plan` of the tree `src` (walked into `list`) into `out`, which
/// sends it as it goes; returns the shard's record (its ETag not yet known) read from
/// the index `out` kept aside (`tail`).
#[allow(clippy::too_many_arguments)]
pub fn pack_shard(
    src: &Path,
    list: &[Planned],
    plan: &ShardPlan,
    out: PartWriter,
    tail: Tail,
    opts: &PackShard,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<Shard> {
    let omit = InShard {
        paths: plan.members.iter().map(|&i| list[i].path.clone()).collect(),
        dirs: plan.dirs,
    };
    let pack = PackOptions {
        hash: true,
        filter: Some(filter_for(list, plan)),
        // Nothing clones out of a shard (downloads unpack it as a stream, mounts read
        // ranges): 4 KiB padding would only be bytes to send, store and fetch.
        align: false,
        ..opts.pack.clone()
    };
    let scratch = Stats::default();
    let size = pack_omitting(
        src,
        Output::Stream(Box::new(out)),
        &[],
        &pack,
        Some(&omit),
        &scratch,
        reporter,
    )
    .map_err(|e| S3Error::new(e.to_string()))?;
    add_counts(stats, &scratch, plan);
    let tail = tail.lock().map(|mut t| t.take()).unwrap_or_default();
    let mut members = members_of(&tail.unwrap_or_default(), size, plan.dirs)?;
    // Each member's metadata as the plan saw it, by which a rerun keeps it.
    let planned: HashMap<&[u8], &Planned> = plan
        .members
        .iter()
        .map(|&i| (list[i].path.as_slice(), &list[i]))
        .collect();
    // A directory shard of some directories holds those above them too: they are the
    // members of another.
    if plan.dirs {
        members.retain(|m| planned.contains_key(m.path().as_slice()));
    }
    for m in &mut members {
        m.f = planned
            .get(m.path().as_slice())
            .map(|p| member_fingerprint(p));
    }
    Ok(Shard {
        fingerprint: plan.fingerprint.clone(),
        size,
        etag: None,
        dirs: plan.dirs,
        held: Some(members.len() as u64),
        members,
    })
}

/// The manifest's members of a shard of `size` bytes from `tail`, its bytes from the
/// index on: what the index says of each, but, in a shard of files, the directories
/// above the members (a directory shard lists them) and the root.
fn members_of(tail: &[u8], size: u64, dirs: bool) -> Result<Vec<Member>> {
    let bad = |what: &str| S3Error::new(format!("the packed shard's index: {what}"));
    let at = tail.len().saturating_sub(FOOTER_LEN as usize);
    let footer = Footer::parse(&tail[at..], size)
        .map_err(|e| bad(&e.to_string()))?
        .ok_or_else(|| bad("no footer"))?;
    if footer.index_offset != size - tail.len() as u64 {
        return Err(bad("not where the tar data ended"));
    }
    let mut members = Vec::new();
    for e in Index::new(footer).entries(tail) {
        let (_, e) = e.map_err(|e| bad(&e.to_string()))?;
        let path = crate::manifest::member_path(&e.path);
        // Of a shard of files, the directories above them and the root are not
        // members; of a directory shard, the root is one (of empty path).
        if !dirs && (e.kind == Kind::Dir || path.is_empty()) {
            continue;
        }
        let mut m = Member::with_path(path);
        m.k = e.kind as u8;
        m.s = e.size;
        m.m = e.mtime;
        m.mode = e.mode;
        m.o = e.header_offset;
        m.e = e.data_offset + e.stored;
        m.x = e.hash.map(|h| format!("{h:032x}"));
        members.push(m);
    }
    Ok(members)
}

/// Adds what packing one shard did to the job's counts: directories only from a
/// directory shard, its members (every shard holds those above its members, the root
/// among them).
fn add_counts(stats: &Stats, shard: &Stats, plan: &ShardPlan) {
    use std::sync::atomic::Ordering::Relaxed;
    let s = shard.snapshot();
    if plan.dirs {
        stats
            .dirs
            .fetch_add((plan.members.len() as u64).min(s.dirs), Relaxed);
        return;
    }
    stats.files.fetch_add(s.files, Relaxed);
    stats.others.fetch_add(s.others, Relaxed);
    stats.bytes.fetch_add(s.bytes, Relaxed);
    stats.errors.fetch_add(s.errors, Relaxed);
}
