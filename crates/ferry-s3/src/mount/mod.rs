//! `ferry mount s3://BUCKET/PREFIX MOUNTPOINT`: an upload served by ferry-mount's own
//! filesystem, read-only, with ranged GETs.
//!
//! There is no second filesystem: ferry-mount serves a tree table and reads member data
//! through its [`DataAt`](ferry_mount::data::DataAt) trait; this module gives it both.
//!
//! - The data: the shards' bytes as one address space, through a bounded cache of
//!   blocks fetched with ranged GETs ([`blocks`]).
//! - The table: one table for the whole upload, built from the shards' own indexes
//!   ([`tree`]) the first time a manifest is mounted and kept in the mount cache
//!   (`s3-HASH.ftree`, named after the endpoint and location) keyed by the manifest's
//!   ETag, with the list of shards beside it. A later mount of the same upload costs a
//!   conditional GET of the manifest (answered 304 when `ferry cat` or an earlier mount
//!   left it in the manifest cache) and opening that file: no shard is read and the
//!   manifest is not parsed, so a mount is usable as fast as a local archive's,
//!   whatever the number of files or shards. (Merging the shards' own tables at each
//!   mount would read every shard's table, megabytes for a large tree, every time.)

pub mod blocks;
pub mod tree;

use crate::cat::{fetch_bytes, no_upload, remember};
use crate::manifest::{Manifest, Member};
use crate::store::Store;
use crate::{Result, S3Error};
use blocks::{BlockOptions, Blocks, ShardObject};
use ferry_archive::index::{IndexEntry, Kind};
use ferry_archive::tree::Table;
use ferry_mount::cache::{self, Stamp, SHARD_LIST};
use ferry_mount::source::{keep_table, Opened, Origin};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tree::Named;

/// How to mount.
#[derive(Clone, Debug, Default)]
pub struct MountOptions {
    /// The block cache.
    pub blocks: BlockOptions,
    /// Where the table is kept (ferry-mount's cache directory); None: not kept.
    pub cache_dir: Option<PathBuf>,
}

/// A shard as the cache file lists it.
#[derive(Serialize, Deserialize)]
struct Listed {
    key: String,
    size: u64,
    etag: Option<String>,
}

/// The cache file of the upload at `store`'s location in `dir`.
fn cache_path(store: &Store, dir: &Path) -> PathBuf {
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap_or_default();
    let h = xxhash_rust::xxh3::xxh3_64(format!("{endpoint}\0{}", store.loc).as_bytes());
    dir.join(format!("s3-{h:016x}.ftree"))
}

/// The shard list kept in a cache file, if it reads as one.
fn unlist(blob: &[u8]) -> Option<Vec<ShardObject>> {
    let listed: Vec<Listed> = serde_json::from_slice(blob).ok()?;
    listed
        .into_iter()
        .map(|l| {
            (l.size <= crate::parts::MAX_OBJECT).then(|| ShardObject {
                key: l.key.into(),
                size: l.size,
                etag: l.etag,
            })
        })
        .collect()
}

fn list(shards: &[ShardObject]) -> Vec<u8> {
    let listed: Vec<Listed> = shards
        .iter()
        .map(|s| Listed {
            key: s.key.to_string(),
            size: s.size,
            etag: s.etag.clone(),
        })
        .collect();
    serde_json::to_vec(&listed).unwrap_or_default()
}

/// Opens the upload at `store`'s location for mounting (see the module's doc).
pub fn open(store: Arc<Store>, opts: &MountOptions) -> Result<Opened> {
    opts.blocks.check().map_err(S3Error::new)?;
    let shown = PathBuf::from(store.loc.to_string());
    // Taken before the manifest is read: a prune that compacts meanwhile either sees
    // it and deletes no shard, or has written every snapshot again before it is read.
    let mut lease = Some(crate::lease::ReadLease::take(&store));
    let fetched = store
        .rt
        .block_on(fetch_bytes(&store))?
        .ok_or_else(|| no_upload(&store))?;
    let kept = match (&opts.cache_dir, &fetched.etag) {
        (Some(dir), Some(_)) => Some(cache_path(&store, dir)),
        _ => None,
    };
    let stamp = Stamp::tagged(fetched.etag.as_deref().unwrap_or_default().as_bytes());
    if let Some(c) = kept.as_ref().and_then(|p| cache::load(p, stamp)) {
        // A cache file that does not read back whole is built again, like a stale one.
        let shards = (c.codec == SHARD_LIST).then(|| unlist(&c.seek)).flatten();
        let table = Table::open(c.file, c.table.0, c.table.1, true);
        if let (Some(shards), Ok(table)) = (shards, table) {
            let origin = Origin::Cached(kept.clone().unwrap_or_default());
            if let Some(blocks) = Blocks::new(store.clone(), shards, opts.blocks) {
                let blocks = blocks.holding(lease.take());
                return Ok(opened(shown, blocks, table, origin, Vec::new()));
            }
        }
    }
    let manifest = crate::cat::decode(&store, &fetched)?;
    remember(&store, &fetched);
    let shards: Vec<ShardObject> = manifest
        .shards
        .iter()
        .map(|s| ShardObject {
            key: store.key(&s.name()),
            size: s.size,
            etag: s.etag.clone(),
        })
        .collect();
    let blocks = Blocks::new(Arc::clone(&store), shards.clone(), opts.blocks)
        .ok_or_else(|| S3Error::new(format!("{}: the shards are too large", shown.display())))?
        .holding(lease.take());
    // Every shard's index is at its end: fetch those blocks side by side.
    for (i, s) in shards.iter().enumerate() {
        blocks.prefetch(i, s.size.saturating_sub(1));
    }
    let shown_shard = |i: usize| format!("s3://{}/{}", store.loc.bucket, shards[i].key);
    let built =
        tree::build(&blocks, &shards, shown_shard, named_by(&manifest)).map_err(S3Error::new)?;
    let (table, origin) = keep_table(
        built.builder,
        built.data_end,
        stamp,
        (SHARD_LIST, &list(&shards)),
        kept,
        &shown,
    )
    .map_err(|e| S3Error::new(e.to_string()))?;
    // The blocks read to build the table (the shards' ends) stay cached.
    Ok(opened(shown, blocks, table, origin, built.skipped))
}

/// Which entries of shard `i`'s index the manifest `m` names, and as what: the members
/// it lists for a shard it does not name whole (a renamed file under its new name),
/// every member of one it does, and of the directories above them, those the
/// directory shard lists (and the root).
fn named_by(m: &Manifest) -> impl Fn(usize, &IndexEntry) -> Named + '_ {
    let dirs: HashSet<Vec<u8>> = m
        .shards
        .iter()
        .filter(|s| s.dirs)
        .flat_map(|s| &s.members)
        .map(|x| x.path())
        .collect();
    // Of a shard named whole, all but its renamed files are named as it holds them.
    let live: Vec<(bool, HashMap<u64, &Member>)> = m
        .shards
        .iter()
        .map(|s| {
            let listed = s.members.iter().filter(|x| !s.whole() || x.is_renamed());
            (s.whole(), listed.map(|x| (x.o, x)).collect())
        })
        .collect();
    move |i, e| {
        let Some(shard) = m.shards.get(i) else {
            return Named::Not;
        };
        let path = crate::manifest::member_path(&e.path);
        if e.kind == Kind::Dir && !shard.dirs {
            return match path.is_empty() || dirs.contains(path) {
                true => Named::AsStored,
                false => Named::Not,
            };
        }
        let (whole, listed) = &live[i];
        match listed.get(&e.header_offset) {
            // Not the file the manifest says it keeps there: left out.
            Some(x) if x.stored_path() != path => Named::Not,
            Some(x) if x.is_renamed() => Named::As(x.path()),
            Some(_) => Named::AsStored,
            None if *whole => Named::AsStored,
            None => Named::Not,
        }
    }
}

/// What ferry-mount serves: `table`, and the shards' bytes through `blocks`.
fn opened(
    path: PathBuf,
    blocks: Blocks,
    table: Table,
    origin: Origin,
    skipped: Vec<ferry_archive::tree::Skipped>,
) -> Opened {
    Opened {
        path,
        archive: None,
        stamp: Stamp {
            size: blocks.bytes(),
            mtime: (0, 0),
        },
        table,
        data: Arc::new(blocks),
        origin,
        skipped,
        warnings: Vec::new(),
        advice: None,
        check_later: None,
    }
}
