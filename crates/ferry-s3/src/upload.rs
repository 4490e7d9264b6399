//! `ferry copy SRC s3://BUCKET/PREFIX`: plan ([`crate::plan`]), then pack shards one
//! after another on a thread, each going up as it is packed ([`crate::stream_put`]),
//! then the manifest, as a new snapshot ([`crate::snapshot`]) and then as the newest.
//! Nothing is deleted: what no snapshot names any more goes with `ferry prune`.
//!
//! What is in the bucket already is not sent again: members of the last upload whose
//! metadata is unchanged stay in their shards, and a shard a killed run finished (its
//! record, `shards/FP.json`, is written right after the shard itself) is found by its
//! fingerprint. Uploads a killed run left unfinished are aborted first
//! ([`crate::pending`]); while this one runs, its lease ([`crate::lease`]) tells a
//! prune to leave what it writes, and the snapshot it builds on, alone.

use crate::body::gather;
use crate::cat::fetch_manifest;
use crate::lease::{Kind, Lease};
use crate::manifest::{Manifest, Shard, FORMAT, MAX_RECORD, MAX_RECORD_DECODED};
use crate::pending;
use crate::plan::{walk_tree, Planned, Planner, ShardPlan};
use crate::shard::{pack_shard, part_size_for, PackShard};
use crate::store::Store;
use crate::stream_put::{put_stream, PartWriter};
use crate::{Result, S3Error};
use ferry_core::error::Reporter;
use ferry_core::filter::Filter;
use ferry_core::Stats;
use futures::StreamExt;
use object_store::{ObjectStoreExt, PutPayload};
use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Semaphore};

/// Times an upload goes on after the store dropped one of its shards' uploads.
const AGAIN_AFTER_DROPPED: usize = 3;

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
    /// Members left where they were (in shards of earlier uploads), and their bytes.
    pub members_kept: u64,
    /// Bytes of the members left where they were.
    pub bytes_kept: u64,
    /// Of those members, files found under another name (renamed or moved), and
    /// their bytes: not sent again.
    pub renamed: u64,
    /// Bytes of the renamed files.
    pub bytes_renamed: u64,
    /// The snapshot this upload is.
    pub snapshot: String,
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
    let aborted = store.rt.block_on(pending::abort_left(&store));
    if store.loc.snapshot.is_some() {
        return Err(S3Error::new(format!(
            "{}: a snapshot is read-only: upload to s3://{}/{} (every upload is a new \
             snapshot)",
            store.loc, store.loc.bucket, store.loc.prefix
        )));
    }
    // Read before the lease is taken, so a wrong key or a bad manifest is told as such;
    // and again once no prune runs (a conditional GET: the cached copy, unless a prune
    // or an upload changed it meanwhile), which is the one built on.
    store.rt.block_on(fetch_manifest(&store))?;
    let lease = store.rt.block_on(Lease::take(&store, Kind::Upload))?;
    let once = || {
        store
            .rt
            .block_on(wait_for_prunes(&store, &lease, reporter))
            .and_then(|()| store.rt.block_on(fetch_manifest(&store)))
            .and_then(|old| {
                send_and_name(
                    src,
                    &store,
                    old.as_ref(),
                    lease.began,
                    opts,
                    stats,
                    reporter,
                )
            })
    };
    // Another upload of the same tree at once may write the same shards: where the
    // store drops one of the two multipart uploads of a shard, this one goes on from
    // what is there now (the other's shards, found by their records).
    let counted = stats.snapshot();
    let mut done = once();
    for _ in 0..AGAIN_AFTER_DROPPED {
        match &done {
            Err(e) if e.0.contains(crate::put::DROPPED) => {
                reporter.warn(&format!("{e}; going on from what it wrote"));
                stats.restore(&counted);
                done = once();
            }
            _ => break,
        }
    }
    // Only now: until the snapshot is written, a prune must leave what it names alone.
    store.rt.block_on(lease.end(&store));
    let mut out = done?;
    out.aborted = aborted;
    Ok(out)
}

/// Waits while a prune of the prefix runs (it would delete what this upload builds on),
/// once a second, for as long as a prune's lease holds at most.
async fn wait_for_prunes(store: &Store, lease: &Lease, reporter: &dyn Reporter) -> Result<()> {
    let mut told = false;
    for _ in 0..Kind::Prune.stale_after() {
        let prunes = lease.others(store, Kind::Prune).await?;
        let Some(first) = prunes.first() else {
            return Ok(());
        };
        if !std::mem::replace(&mut told, true) {
            reporter.warn(&format!("waiting for {first} to end"));
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    Err(S3Error::new(format!(
        "{}: a prune has not ended in an hour; its lease is under {}/",
        store.loc,
        crate::lease::DIR
    )))
}

/// Sends what is not in the bucket already, then writes the manifest as the snapshot
/// named for `began` and as the newest.
fn send_and_name(
    src: &Path,
    store: &Arc<Store>,
    old: Option<&Manifest>,
    began: i64,
    opts: &UploadOptions,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<Uploaded> {
    let (manifest, mut out, list) = send_all(src, store, old, opts, stats, reporter)?;
    // Named only now, so an upload that ended meanwhile has its name taken into
    // account; the snapshot first, then the name of the newest: a reader sees a whole
    // upload.
    let name = store
        .rt
        .block_on(crate::claim::write_snapshot(store, began, &manifest))?;
    store.rt.block_on(crate::claim::name_newest(store, &name))?;
    out.snapshot = name;
    // The upload is now the new tree: what the last one had and it lacks is gone.
    stats.deleted.fetch_add(gone_since(old, &list), Relaxed);
    Ok(out)
}

/// Plans the upload and sends what is not in the bucket already; returns the manifest
/// (not yet named), what was done, and the walk's list.
fn send_all(
    src: &Path,
    store: &Arc<Store>,
    old: Option<&Manifest>,
    opts: &UploadOptions,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<(Manifest, Uploaded, Vec<Planned>)> {
    let mut out = Uploaded::default();
    let list = walk_tree(src, opts.threads, opts.filter.clone(), reporter)?;
    let planner = Planner::new(&list, old);
    let renamed = match old {
        Some(old) => {
            let candidates = crate::renames::candidates(&planner, &list);
            crate::renames::confirm(src, &list, old, &candidates, opts.threads)
        }
        None => Vec::new(),
    };
    out.renamed = renamed.len() as u64;
    out.bytes_renamed = renamed.iter().map(|&(i, _, _)| list[i].size).sum();
    let plans = planner.finish(&renamed, opts.shard_size);
    // At most RECORDS_AT_ONCE records read at a time: each may take MAX_RECORD bytes.
    let mut done: Vec<Option<Shard>> = store.rt.block_on(
        futures::stream::iter(plans.iter().map(|p| sent_before(store, p)))
            .buffered(RECORDS_AT_ONCE)
            .collect(),
    );
    out.kept = done.iter().filter(|d| d.is_some()).count();
    for shard in done.iter().flatten().filter(|s| !s.dirs) {
        out.members_kept += shard.members.len() as u64;
        out.bytes_kept += shard.members.iter().map(|m| m.s).sum::<u64>();
    }
    // What is left where it was counts as a local copy counts what is up to date.
    stats.skipped.fetch_add(out.members_kept, Relaxed);
    stats.skipped_bytes.fetch_add(out.bytes_kept, Relaxed);
    let to_send: Vec<usize> = (0..plans.len()).filter(|&i| done[i].is_none()).collect();
    let sent = send_shards(src, &list, &plans, &to_send, store, opts, stats, reporter)?;
    for (i, shard) in sent {
        out.sent += 1;
        out.bytes_sent += shard.size;
        done[i] = Some(shard);
    }
    let manifest = Manifest {
        format: FORMAT.into(),
        snapshot: None,
        shards: done.into_iter().flatten().collect(),
    };
    out.shards = manifest.shards.len();
    Ok((manifest, out, list))
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
    recorded(store, &plan.fingerprint).await
}

/// The record of the shard with `fingerprint` written beside it, when the shard is
/// there, whole.
pub(crate) async fn recorded(store: &Store, fingerprint: &str) -> Option<Shard> {
    let name = crate::manifest::shard_name(fingerprint);
    let record = store.key(&crate::manifest::record_name(fingerprint));
    // A record too large to be one is not one: the shard is sent again.
    let got = store.s3.get(&record).await.ok()?;
    let bytes = gather(store, &record, "read the shard's record", got, MAX_RECORD)
        .await
        .ok()?;
    let m = Manifest::decode_within(&bytes, record.as_ref(), MAX_RECORD_DECODED).ok()?;
    let shard = m.shards.into_iter().next()?;
    let meta = store.s3.head(&store.key(&name)).await.ok()?;
    (shard.fingerprint == fingerprint && meta.size == shard.size).then_some(shard)
}

/// Writes `shard`'s record beside it (`shards/FP.json`): the shard is whole.
pub(crate) async fn write_record(store: &Store, shard: &Shard) -> Result<()> {
    let record = Manifest {
        format: FORMAT.into(),
        snapshot: None,
        shards: vec![shard.clone()],
    };
    let key = store.key(&crate::manifest::record_name(&shard.fingerprint));
    store
        .s3
        .put(&key, PutPayload::from(record.encode()))
        .await
        .map_err(|e| store.error(&key, "put", &e))?;
    Ok(())
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
                    write_record(&store, &shard).await?;
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
