//! `ferry copy SRC s3://BUCKET/PREFIX`: plan ([`crate::plan`]), then pack shards on
//! one thread while earlier ones go up ([`crate::put`]), then the manifest, then the
//! deletion of shards no manifest names any more.
//!
//! A shard already in the bucket is not sent again: one the last manifest names with
//! unchanged members, or one a killed run finished (its record, `shards/FP.json`, is
//! written right after the shard itself). Uploads a killed run left unfinished are
//! aborted first ([`crate::pending`]).

use crate::cat::fetch_manifest;
use crate::manifest::{Manifest, Shard, FORMAT, NAME};
use crate::pending;
use crate::plan::{plan, walk_tree, Planned, ShardPlan};
use crate::put::put_file;
use crate::shard::{pack_shard, PackShard};
use crate::store::Store;
use crate::{Result, S3Error};
use ferry_core::error::Reporter;
use ferry_core::Stats;
use futures::TryStreamExt;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::Semaphore;

/// How to upload.
#[derive(Clone, Debug)]
pub struct UploadOptions {
    /// About this many bytes per shard.
    pub shard_size: u64,
    /// Parts in flight at once, over all shards.
    pub parts_in_flight: usize,
    /// Shards being sent at once (each a temporary file).
    pub shards_in_flight: usize,
    /// Where temporary shard files go.
    pub tmp: PathBuf,
    /// How shards are packed.
    pub pack: PackShard,
    /// Walker threads for the plan.
    pub threads: usize,
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
    let list = walk_tree(src, opts.threads, None, reporter)?;
    let plans = plan(&list, old.as_ref(), opts.shard_size);
    let mut done: Vec<Option<Shard>> = store.rt.block_on(futures::future::join_all(
        plans.iter().map(|p| sent_before(&store, p)),
    ));
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
    out.deleted = store.rt.block_on(delete_unreferenced(&store, &manifest))?;
    Ok(out)
}

/// The record of a shard already in the bucket: the last manifest's, or the one a
/// killed run wrote beside the shard.
async fn sent_before(store: &Store, plan: &ShardPlan) -> Option<Shard> {
    if let Some(kept) = &plan.kept {
        return Some(kept.clone());
    }
    let name = crate::manifest::shard_name(&plan.fingerprint);
    let record = store.key(&format!("{}.json", name.trim_end_matches(".far")));
    let bytes = store.s3.get(&record).await.ok()?.bytes().await.ok()?;
    let m = Manifest::decode(&bytes, record.as_ref()).ok()?;
    let shard = m.shards.into_iter().next()?;
    let meta = store.s3.head(&store.key(&name)).await.ok()?;
    (shard.fingerprint == plan.fingerprint && meta.size == shard.size).then_some(shard)
}

/// Packs the shards `which` of `plans` one after another on a thread of their own,
/// sending each as it is ready, a few at once.
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
    let (tx, mut rx) = tokio::sync::mpsc::channel(1);
    std::thread::scope(|scope| {
        let packer = scope.spawn(move || {
            for &i in which {
                let packed =
                    pack_shard(src, list, &plans[i], &opts.tmp, &opts.pack, stats, reporter);
                let failed = packed.is_err();
                if tx.blocking_send((i, packed)).is_err() || failed {
                    break;
                }
            }
        });
        let sent = store.rt.block_on(async {
            let parts = Arc::new(Semaphore::new(opts.parts_in_flight.max(1)));
            let slots = Arc::new(Semaphore::new(opts.shards_in_flight.max(1)));
            let mut tasks = tokio::task::JoinSet::new();
            let mut sent = Vec::new();
            let mut failed = None;
            loop {
                let slot = slots
                    .clone()
                    .acquire_owned()
                    .await
                    .map_err(|e| S3Error::new(e.to_string()))?;
                let Some((i, packed)) = rx.recv().await else {
                    break;
                };
                let (file, mut shard) = match packed {
                    Ok(p) => p,
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                };
                let (store, parts) = (store.clone(), parts.clone());
                tasks.spawn(async move {
                    let _slot = slot;
                    let key = store.key(&shard.name());
                    let handle =
                        Arc::new(file.reopen().map_err(|e| {
                            S3Error::new(format!("{}: {e}", file.path().display()))
                        })?);
                    let put =
                        put_file(&store, &key, handle, shard.size, &parts, Default::default())
                            .await?;
                    shard.etag = put.e_tag;
                    let record = Manifest {
                        format: FORMAT.into(),
                        shards: vec![shard.clone()],
                    };
                    let rkey =
                        store.key(&format!("{}.json", shard.name().trim_end_matches(".far")));
                    store
                        .s3
                        .put(&rkey, PutPayload::from(record.encode()))
                        .await
                        .map_err(|e| store.error(&rkey, "put", &e))?;
                    drop(file);
                    Ok::<_, S3Error>((i, shard))
                });
                while let Some(r) = tasks.try_join_next() {
                    match r.map_err(|e| S3Error::new(e.to_string())).and_then(|r| r) {
                        Ok(s) => sent.push(s),
                        Err(e) => {
                            failed.get_or_insert(e);
                        }
                    }
                }
                if failed.is_some() {
                    break;
                }
            }
            drop(rx);
            while let Some(r) = tasks.join_next().await {
                match r.map_err(|e| S3Error::new(e.to_string())).and_then(|r| r) {
                    Ok(s) => sent.push(s),
                    Err(e) => {
                        failed.get_or_insert(e);
                    }
                }
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
