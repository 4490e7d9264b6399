//! `ferry copy SRC s3://BUCKET/PREFIX`: plan ([`crate::plan`]), then pack shards one
//! after another on a thread, each going up as it is packed ([`crate::stream_put`]),
//! then the manifest, then the deletion of shards no manifest names any more.
//!
//! A shard already in the bucket is not sent again: one the last manifest names with
//! unchanged members, or one a killed run finished (its record, `shards/FP.json`, is
//! written right after the shard itself). Uploads a killed run left unfinished are
//! aborted first ([`crate::pending`]).

use crate::body::gather;
use crate::cat::fetch_manifest;
use crate::manifest::{Manifest, Shard, FORMAT, MAX_RECORD, MAX_RECORD_DECODED, NAME};
use crate::pending;
use crate::plan::{plan, walk_tree, Planned, ShardPlan};
use crate::shard::{pack_shard, part_size_for, PackShard};
use crate::store::Store;
use crate::stream_put::{put_stream, PartWriter};
use crate::{Result, S3Error};
use ferry_core::error::Reporter;
use ferry_core::filter::Filter;
use ferry_core::Stats;
use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Semaphore};

/// Records of shards sent before read at once (each at most [`MAX_RECORD`] stored).
const RECORDS_AT_ONCE: usize = 8;

/// How packing a shard ended: its record, or why not.
type Packed = oneshot::Receiver<Result<Shard>>;

/// How to upload.
#[derive(Clone, Debug)]
pub struct UploadOptions {
    /// About this many bytes per shard.
    pub shard_size: u64,
    /// Parts in flight at once, over all shards.
    pub parts_in_flight: usize,
    /// How shards are packed.
    pub pack: PackShard,
    /// Walker threads for the plan.
    pub threads: usize,
    /// What of the tree goes up (`--exclude`, `--include`); None: all of it.
    pub filter: Option<Arc<Filter>>,
}

/// What an upload did.
#[derive(Clone, Debug, Default)]
pub struct Uploaded {
    /// Shards in the manifest.
    pub shards: usize,
    /// Shards packed and sent by this run.
    pub sent: usize,
    /// Bytes of them.
    pub bytes_sent: u64,
    /// Shards found in the bucket already.
    pub kept: usize,
    /// Objects of earlier uploads deleted.
    pub deleted: usize,
    /// Unfinished multipart uploads of a killed run aborted.
    pub aborted: usize,
}

/// Uploads the tree `src` to `store`'s location.
pub fn upload(
    src: &Path,
    store: Arc<Store>,
    opts: &UploadOptions,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<Uploaded> {
    let mut out = Uploaded {
        aborted: store.rt.block_on(pending::abort_left(&store)),
        ..Uploaded::default()
    };
    let old = store.rt.block_on(fetch_manifest(&store))?;
    let list = walk_tree(src, opts.threads, opts.filter.clone(), reporter)?;
    let plans = plan(&list, old.as_ref(), opts.shard_size);
    // At most RECORDS_AT_ONCE records read at a time: each may take MAX_RECORD bytes.
    let mut done: Vec<Option<Shard>> = store.rt.block_on(
        futures::stream::iter(plans.iter().map(|p| sent_before(&store, p)))
            .buffered(RECORDS_AT_ONCE)
            .collect(),
    );
    out.kept = done.iter().filter(|d| d.is_some()).count();
    let to_send: Vec<usize> = (0..plans.len()).filter(|&i| done[i].is_none()).collect();
    let sent = send_shards(src, &list, &plans, &to_send, &store, opts, stats, reporter)?;
    for (i, shard) in sent {
        out.sent += 1;
        out.bytes_sent += shard.size;
        done[i] = Some(shard);
    }
    let manifest = Manifest {
        format: FORMAT.into(),
        shards: done.into_iter().flatten().collect(),
    };
    out.shards = manifest.shards.len();
    let key = store.key(NAME);
    store
        .rt
        .block_on(store.s3.put(&key, PutPayload::from(manifest.encode())))
        .map_err(|e| store.error(&key, "write the manifest", &e))?;
    // The upload is now the new tree: what the last one had and it lacks is gone.
    stats
        .deleted
        .fetch_add(gone_since(old.as_ref(), &list), Relaxed);
    out.deleted = store.rt.block_on(delete_unreferenced(&store, &manifest))?;
    Ok(out)
}

/// How many members of the last upload's manifest `list` (this one's tree) lacks.
fn gone_since(old: Option<&Manifest>, list: &[Planned]) -> u64 {
    let now: HashSet<&[u8]> = list.iter().map(|p| p.path.as_slice()).collect();
    let members = old.iter().flat_map(|m| &m.shards).flat_map(|s| &s.members);
    members
        .filter(|m| !now.contains(m.path().as_slice()))
        .count() as u64
}

/// The record of a shard already in the bucket: the last manifest's, or the one a
/// killed run wrote beside the shard.
async fn sent_before(store: &Store, plan: &ShardPlan) -> Option<Shard> {
    if let Some(kept) = &plan.kept {
        return Some(kept.clone());
    }
    let name = crate::manifest::shard_name(&plan.fingerprint);
    let record = store.key(&format!("{}.json", name.trim_end_matches(".far")));
    // A record too large to be one is not one: the shard is sent again.
    let got = store.s3.get(&record).await.ok()?;
    let bytes = gather(store, &record, "read the shard's record", got, MAX_RECORD)
        .await
        .ok()?;
    let m = Manifest::decode_within(&bytes, record.as_ref(), MAX_RECORD_DECODED).ok()?;
    let shard = m.shards.into_iter().next()?;
    let meta = store.s3.head(&store.key(&name)).await.ok()?;
    (shard.fingerprint == plan.fingerprint && meta.size == shard.size).then_some(shard)
}

/// Packs the shards `which` of `plans` one after another on a thread of their own,
/// each sent as it is packed ([`put_stream`]), its record written once it is whole.
#[allow(clippy::too_many_arguments)]
fn send_shards(
    src: &Path,
    list: &[Planned],
    plans: &[ShardPlan],
    which: &[usize],
    store: &Arc<Store>,
    opts: &UploadOptions,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<Vec<(usize, Shard)>> {
    // Each shard begun: its index, its parts, and how its packing ended.
    let (tx, mut rx) = mpsc::channel::<(usize, mpsc::Receiver<Vec<u8>>, Packed)>(1);
    std::thread::scope(|scope| {
        let packer = scope.spawn(move || {
            for &i in which {
                let (parts_tx, parts_rx) = mpsc::channel(1);
                let (ended_tx, ended_rx) = oneshot::channel();
                if tx.blocking_send((i, parts_rx, ended_rx)).is_err() {
                    break;
                }
                let part = part_size_for(list, &plans[i]);
                let (out, tail) = PartWriter::new(part, parts_tx);
                let packed =
                    pack_shard(src, list, &plans[i], out, tail, &opts.pack, stats, reporter);
                let failed = packed.is_err();
                if ended_tx.send(packed).is_err() || failed {
                    break;
                }
            }
        });
        let sent = store.rt.block_on(async {
            let parts = Arc::new(Semaphore::new(opts.parts_in_flight.max(1)));
            let mut tasks = tokio::task::JoinSet::new();
            let mut sent = Vec::new();
            let mut failed = None;
            while let Some((i, pieces, ended)) = rx.recv().await {
                let (store, parts) = (store.clone(), parts.clone());
                let name = crate::manifest::shard_name(&plans[i].fingerprint);
                tasks.spawn(async move {
                    let key = store.key(&name);
                    let (put, mut shard) = put_stream(&store, &key, pieces, ended, &parts).await?;
                    shard.etag = put.e_tag;
                    let record = Manifest {
                        format: FORMAT.into(),
                        shards: vec![shard.clone()],
                    };
                    let rkey = store.key(&format!("{}.json", name.trim_end_matches(".far")));
                    store
                        .s3
                        .put(&rkey, PutPayload::from(record.encode()))
                        .await
                        .map_err(|e| store.error(&rkey, "put", &e))?;
                    Ok::<_, S3Error>((i, shard))
                });
                while let Some(r) = tasks.try_join_next() {
                    collect(r, &mut sent, &mut failed);
                }
                if failed.is_some() {
                    break;
                }
            }
            // The packer stops at its next shard.
            drop(rx);
            while let Some(r) = tasks.join_next().await {
                collect(r, &mut sent, &mut failed);
            }
            match failed {
                Some(e) => Err(e),
                None => Ok(sent),
            }
        });
        let _ = packer.join();
        sent
    })
}

/// Keeps a shard task's result: the shard sent, or the first failure.
fn collect(
    r: std::result::Result<Result<(usize, Shard)>, tokio::task::JoinError>,
    sent: &mut Vec<(usize, Shard)>,
    failed: &mut Option<S3Error>,
) {
    match r.map_err(|e| S3Error::new(e.to_string())).and_then(|r| r) {
        Ok(s) => sent.push(s),
        Err(e) => {
            failed.get_or_insert(e);
        }
    }
}

/// Deletes the shards under the prefix that `manifest` does not name; returns how many
/// objects went.
async fn delete_unreferenced(store: &Store, manifest: &Manifest) -> Result<usize> {
    let keep: HashSet<&str> = manifest
        .shards
        .iter()
        .map(|s| s.fingerprint.as_str())
        .collect();
    let dir = store.key("shards");
    let listed: Vec<_> = store
        .s3
        .list(Some(&dir))
        .try_collect()
        .await
        .map_err(|e| store.error(&dir, "list", &e))?;
    let mut deleted = 0;
    for meta in listed {
        let name = meta.location.filename().unwrap_or_default();
        let fp = name.split('.').next().unwrap_or_default();
        if !keep.contains(fp) {
            store
                .s3
                .delete(&meta.location)
                .await
                .map_err(|e| store.error(&meta.location, "delete", &e))?;
            deleted += 1;
        }
    }
    Ok(deleted)
}
