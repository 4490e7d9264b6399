//! `ferry prune s3://B/P --keep N [--keep-within DURATION]`: deletes the snapshots
//! neither rule keeps, oldest first, and then the shards (and their records) no kept
//! snapshot names, nor the newest manifest. The newest snapshot is always kept.
//!
//! Every kept manifest is read and checked before anything is deleted: one that is
//! missing or damaged stops the prune, naming it, so a shard it might name is never
//! taken for dead. A prune holds a lease ([`crate::lease`]) and does not run beside an
//! upload: one begun before it stops it, one begun meanwhile waits for it. Killed
//! midway, a prune has deleted some snapshots no longer kept and some dead shards; run
//! again, it deletes the rest.

use crate::lease::{Kind, Lease};
use crate::manifest::Manifest;
use crate::store::Store;
use crate::{Result, S3Error};
use object_store::ObjectStoreExt;
use std::collections::HashSet;

/// Which snapshots to keep.
#[derive(Clone, Debug, Default)]
pub struct PruneOptions {
    /// The newest this many.
    pub keep: usize,
    /// And those begun less than this many seconds ago.
    pub keep_within: Option<i64>,
    /// Say what would go, delete nothing.
    pub dry_run: bool,
}

/// What a prune did (or, dry, would do).
#[derive(Clone, Debug, Default)]
pub struct Pruned {
    /// The snapshots kept, oldest first.
    pub kept: Vec<String>,
    /// The snapshots deleted, oldest first.
    pub deleted: Vec<String>,
    /// Shard objects (archives and records) deleted.
    pub objects: usize,
    /// Their bytes.
    pub bytes: u64,
}

/// Which of `names` (oldest first) the rules keep at `now`.
pub fn kept_names(names: &[String], opts: &PruneOptions, now: i64) -> Vec<String> {
    let newest = names.len().saturating_sub(opts.keep.max(1));
    names
        .iter()
        .enumerate()
        .filter(|(i, name)| {
            *i >= newest
                || opts.keep_within.is_some_and(|within| {
                    crate::snapshot::time_of(name).is_some_and(|t| now - t < within)
                })
        })
        .map(|(_, n)| n.clone())
        .collect()
}

/// Prunes the snapshots at `store`'s location.
pub fn prune(store: &Store, opts: &PruneOptions) -> Result<Pruned> {
    if store.loc.snapshot.is_some() {
        return Err(S3Error::new(format!(
            "{}: prune takes the prefix, not one snapshot",
            store.loc
        )));
    }
    store.rt.block_on(async {
        let lease = Lease::take(store, Kind::Prune).await?;
        let done = prune_leased(store, &lease, opts).await;
        lease.end(store).await;
        done
    })
}

async fn prune_leased(store: &Store, lease: &Lease, opts: &PruneOptions) -> Result<Pruned> {
    if let Some(upload) = lease.others(store, Kind::Upload).await?.first() {
        return Err(S3Error::new(format!(
            "{}: {upload} has not ended: nothing pruned; run prune again once it has (a \
             lease a killed upload left goes with the next upload from its machine, or \
             after a week)",
            store.loc
        )));
    }
    let names = crate::snapshot::list(store).await?;
    if names.is_empty() {
        return Err(S3Error::new(format!(
            "{}: no snapshots here (`ferry copy DIR {}` makes one)",
            store.loc, store.loc
        )));
    }
    let mut kept = kept_names(&names, opts, lease.began);
    // What a reader without @ reads stays, whichever snapshot `manifest.ferry` names
    // (the newest but for two uploads that ended at once), or the whole manifest an
    // upload from before snapshots left there.
    let newest = crate::cat::fetch_manifest(store).await?;
    if let Some(name) = newest.as_ref().and_then(|m| m.snapshot.clone()) {
        if names.contains(&name) && !kept.contains(&name) {
            kept.push(name);
            kept.sort_by(|a, b| crate::snapshot::order(a, b));
        }
    }
    let mut live: HashSet<String> = HashSet::new();
    for name in &kept {
        let m = crate::snapshot::read(store, name).await?;
        live.extend(names_of(&m));
    }
    live.extend(newest.iter().flat_map(names_of));
    let keep: HashSet<&String> = kept.iter().collect();
    let mut out = Pruned {
        deleted: names
            .iter()
            .filter(|n| !keep.contains(n))
            .cloned()
            .collect(),
        kept: kept.clone(),
        ..Pruned::default()
    };
    let listed = store.list_folder("shards").await?;
    let dead: Vec<_> = listed
        .into_iter()
        .filter(|meta| {
            let name = meta.location.filename().unwrap_or_default();
            let fp = name.split('.').next().unwrap_or_default();
            !live.contains(fp)
        })
        .collect();
    out.objects = dead.len();
    out.bytes = dead.iter().map(|m| m.size).sum();
    if opts.dry_run {
        return Ok(out);
    }
    // Snapshots first: a prune killed midway never leaves a snapshot that names a
    // shard already gone.
    for name in &out.deleted {
        let key = store.key(&crate::snapshot::object(name));
        store
            .s3
            .delete(&key)
            .await
            .map_err(|e| store.error(&key, "delete", &e))?;
    }
    for meta in &dead {
        store
            .s3
            .delete(&meta.location)
            .await
            .map_err(|e| store.error(&meta.location, "delete", &e))?;
    }
    Ok(out)
}

/// The fingerprints of the shards `m` names.
fn names_of(m: &Manifest) -> impl Iterator<Item = String> + '_ {
    m.shards.iter().map(|s| s.fingerprint.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_n_and_the_recent_are_kept() {
        let names: Vec<String> = [
            "20261101T000000Z",
            "20261120T000000Z",
            "20261125T000000Z",
            "20261130T000000Z",
            "20261130T000000Z.2",
        ]
        .map(String::from)
        .to_vec();
        let now = ferry_core::utc::parse_basic("20261201T000000Z").unwrap();
        let keep = |keep, within: Option<i64>| {
            let opts = PruneOptions {
                keep,
                keep_within: within.map(|d| d * 86_400),
                dry_run: false,
            };
            kept_names(&names, &opts, now)
        };
        assert_eq!(keep(2, None), names[3..]);
        // The newest is kept even when no rule asks for it.
        assert_eq!(keep(0, None), names[4..]);
        assert_eq!(keep(1, Some(10)), names[2..]);
        assert_eq!(keep(5, None), names);
    }
}
