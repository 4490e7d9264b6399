//! Packing one shard: ferry-archive's `pack` (the one tar writer) run over the tree
//! with a filter that opens only the shard's members and their directories, and an
//! [`Omit`] hook that keeps exactly the shard's members. The archive goes to a
//! temporary file (where the filesystem allows, file data is cloned into it), and its
//! index gives each member's place for the manifest.

use crate::manifest::{Member, Shard};
use crate::plan::{Planned, ShardPlan};
use crate::{Result, S3Error};
use ferry_archive::read::archive::Archive;
use ferry_archive::write::pack::{pack_omitting, Omit, Output, PackOptions};
use ferry_core::entry::Entry;
use ferry_core::error::Reporter;
use ferry_core::filter::{Action, Filter, Rules};
use ferry_core::Stats;
use std::collections::HashSet;
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
/// above them (the directory shard: every directory).
fn filter_for(list: &[Planned], plan: &ShardPlan) -> Result<Arc<ferry_core::filter::Filter>> {
    if plan.dirs {
        let mut rules = Rules::new();
        for (action, pattern) in [(Action::Include, "*/"), (Action::Exclude, "*")] {
            rules
                .add(action, pattern.as_bytes())
                .map_err(|e| S3Error::new(e.to_string()))?;
        }
        let filter = rules
            .compile()
            .map_err(|e| S3Error::new(e.to_string()))?
            .ok_or_else(|| S3Error::new("no filter rules"))?;
        return Ok(Arc::new(filter));
    }
    let mut paths = HashSet::new();
    let mut dirs = HashSet::new();
    for &i in &plan.members {
        let path = &list[i].path;
        paths.insert(path.clone());
        let mut at = path.as_slice();
        while let Some(slash) = at.iter().rposition(|&b| b == b'/') {
            at = &at[..slash];
            if !dirs.insert(at.to_vec()) {
                break;
            }
        }
    }
    Ok(Arc::new(Filter::exactly(paths, dirs)))
}

/// How shards are packed.
#[derive(Clone, Debug)]
pub struct PackShard {
    /// The pack options (threads, clone policy); `hash` and `filter` are set here.
    pub pack: PackOptions,
}

/// Packs the shard `plan` of the tree `src` (walked into `list`) into a temporary
/// file in `tmp`; returns it with the shard's record (size and ETag not yet known:
/// the size is the file's).
pub fn pack_shard(
    src: &Path,
    list: &[Planned],
    plan: &ShardPlan,
    tmp: &Path,
    opts: &PackShard,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<(tempfile::NamedTempFile, Shard)> {
    let file = tempfile::NamedTempFile::new_in(tmp)
        .map_err(|e| S3Error::new(format!("{}: make a temporary file: {e}", tmp.display())))?;
    let fd = file
        .as_file()
        .try_clone()
        .map_err(|e| S3Error::new(format!("{}: {e}", file.path().display())))?;
    let omit = InShard {
        paths: plan.members.iter().map(|&i| list[i].path.clone()).collect(),
        dirs: plan.dirs,
    };
    let pack = PackOptions {
        hash: true,
        filter: Some(filter_for(list, plan)?),
        ..opts.pack.clone()
    };
    let scratch = Stats::default();
    pack_omitting(
        src,
        Output::File(fd.into()),
        &[],
        &pack,
        Some(&omit),
        &scratch,
        reporter,
    )
    .map_err(|e| S3Error::new(e.to_string()))?;
    add_counts(stats, &scratch, plan.dirs);
    let archive = Archive::open(file.path())
        .map_err(|e| S3Error::new(format!("{}: {e}", file.path().display())))?;
    let size = archive.len();
    let mut members = Vec::with_capacity(plan.members.len());
    for e in archive.entries().into_iter().flatten() {
        let e = e.map_err(|e| S3Error::new(format!("{}: {e}", file.path().display())))?;
        let above = !plan.dirs && e.kind == ferry_archive::index::Kind::Dir;
        if above || e.path.is_empty() || e.path == b"." || e.path == b"./" {
            // Directories above the members: the directory shard lists them.
            continue;
        }
        let mut m = Member::with_path(e.path.strip_suffix(b"/").unwrap_or(&e.path));
        m.k = e.kind as u8;
        m.s = e.size;
        m.m = e.mtime;
        m.mode = e.mode;
        m.o = e.header_offset;
        m.e = e.data_offset + e.stored;
        members.push(m);
    }
    let shard = Shard {
        fingerprint: plan.fingerprint.clone(),
        size,
        etag: None,
        dirs: plan.dirs,
        members,
    };
    Ok((file, shard))
}

/// Adds what packing one shard did to the job's counts: directories only from the
/// directory shard (every shard holds those above its members).
fn add_counts(stats: &Stats, shard: &Stats, dirs: bool) {
    use std::sync::atomic::Ordering::Relaxed;
    let s = shard.snapshot();
    if dirs {
        stats.dirs.fetch_add(s.dirs, Relaxed);
        return;
    }
    stats.files.fetch_add(s.files, Relaxed);
    stats.others.fetch_add(s.others, Relaxed);
    stats.bytes.fetch_add(s.bytes, Relaxed);
    stats.errors.fetch_add(s.errors, Relaxed);
}
