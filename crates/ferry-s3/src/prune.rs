//! `ferry prune s3://B/P --keep N [--keep-within DURATION]`: deletes the snapshots
//! neither rule keeps, oldest first, compacts the shards the kept ones name little of
//! ([`crate::compact`]), and then deletes the shards (and their records) no kept
//! snapshot names, nor the newest manifest. The newest snapshot is always kept.
//!
//! Every kept manifest is read and checked before anything is written or deleted: one
//! that is missing or damaged stops the prune, naming it, so a shard it might name is
//! never taken for dead. A prune holds a lease ([`crate::lease`]) and does not run
//! beside an upload: one begun before it stops it, one begun meanwhile waits for it.
//! While a reader (a mount, a download) holds a lease, no shard is deleted: it may be
//! reading one through a manifest it read before; a later prune deletes them. Killed
//! midway, a prune has written some new shards (found again by the rerun), written
//! some snapshots again, deleted some snapshots no longer kept and some dead shards;
//! run again, it does the rest.

use crate::compact::{compact, sparse_shards, Compacted};
use crate::lease::{Kind, Lease};
use crate::manifest::Manifest;
use crate::store::Store;
use crate::{Result, S3Error};
use ferry_core::error::Reporter;
use object_store::ObjectStoreExt;
use std::collections::HashSet;
use std::sync::Arc;

/// Which snapshots to keep, and how shards are compacted.
#[derive(Clone, Debug, Default)]
pub struct PruneOptions {
    /// The newest this many.
    pub keep: usize,
    /// And those begun less than this many seconds ago.
    pub keep_within: Option<i64>,
    /// Say what would go, delete nothing.
    pub dry_run: bool,
    /// Leave sparse shards as they are.
    pub no_compact: bool,
    /// About this many bytes per compacted shard.
    pub shard_size: u64,
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
    /// Shards compacted (their live members copied into new shards, they then dead).
    pub compacted: usize,
    /// Bytes of members copied.
    pub copied: u64,
    /// New shards written.
    pub written: usize,
    /// Kept snapshots written again to name the new shards.
    pub rewritten: usize,
    /// The reader whose lease left the dead shards for a later prune.
    pub left_for: Option<String>,
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
pub fn prune(store: &Arc<Store>, opts: &PruneOptions, reporter: &dyn Reporter) -> Result<Pruned> {
    if store.loc.snapshot.is_some() {
        return Err(S3Error::new(format!(
            "{}: prune takes the prefix, not one snapshot",
            store.loc
        )));
    }
    // What a killed run (upload or prune) from this machine left: its multipart
    // uploads and its lease.
    store.rt.block_on(crate::pending::abort_left(store));
    let lease = store.rt.block_on(Lease::take(store, Kind::Prune))?;
    let done = prune_leased(store, &lease, opts, reporter);
    store.rt.block_on(lease.end(store));
    done
}

/// What a prune reads before it changes anything.
struct Read {
    /// Every snapshot's name, oldest first.
    names: Vec<String>,
    /// Those kept, and their manifests.
    kept: Vec<(String, Manifest)>,
    /// What `manifest.ferry` leads to, and whether it names a snapshot.
    newest: Option<Manifest>,
}

async fn read_all(store: &Store, lease: &Lease, opts: &PruneOptions) -> Result<Read> {
    // Two prunes at once would each delete what the other's compaction now names.
    if let Some(prune) = lease.others(store, Kind::Prune).await?.first() {
        return Err(S3Error::new(format!(
            "{}: {prune} has not ended: nothing pruned; run prune again once it has (a \
             lease a killed prune left goes with the next run from its machine, or after \
             an hour)",
            store.loc
        )));
    }
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
    let mut read = Vec::with_capacity(kept.len());
    for name in kept {
        let m = crate::snapshot::read(store, &name).await?;
        read.push((name, m));
    }
    Ok(Read {
        names,
        kept: read,
        newest,
    })
}

fn prune_leased(
    store: &Arc<Store>,
    lease: &Lease,
    opts: &PruneOptions,
    reporter: &dyn Reporter,
) -> Result<Pruned> {
    let Read {
        names,
        mut kept,
        newest,
    } = store.rt.block_on(read_all(store, lease, opts))?;
    // The shards of a manifest from before snapshots stay where they are: nothing
    // writes that manifest again.
    let pointer = newest.as_ref().and_then(|m| m.snapshot.clone());
    let legacy: HashSet<String> = match &pointer {
        Some(_) => HashSet::new(),
        None => newest.iter().flat_map(names_of).collect(),
    };
    let keep: HashSet<&String> = kept.iter().map(|(n, _)| n).collect();
    let mut out = Pruned {
        deleted: names
            .iter()
            .filter(|n| !keep.contains(n))
            .cloned()
            .collect(),
        kept: kept.iter().map(|(n, _)| n.clone()).collect(),
        ..Pruned::default()
    };
    let manifests: Vec<&Manifest> = kept.iter().map(|(_, m)| m).collect();
    let sparse = match opts.no_compact {
        true => Vec::new(),
        false => sparse_shards(&manifests, &legacy),
    };
    out.compacted = sparse.len();
    out.copied = sparse.iter().map(|s| s.live).sum();
    let compacted: HashSet<String> = sparse.iter().map(|s| s.shard.fingerprint.clone()).collect();
    if !opts.dry_run && !sparse.is_empty() {
        let c = compact(store, sparse, opts.shard_size.max(1), reporter)?;
        out.compacted = c.old.len();
        out.copied = c.copied;
        out.written = c.new.len();
        out.rewritten = rewrite_kept(store, &mut kept, &c)?;
    }
    let mut live: HashSet<String> = kept.iter().flat_map(|(_, m)| names_of(m)).collect();
    live.extend(legacy);
    if opts.dry_run {
        live.retain(|fp| !compacted.contains(fp));
    }
    let listed = store.rt.block_on(store.list_folder("shards"))?;
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
    let readers = store.rt.block_on(lease.others(store, Kind::Read))?;
    if let Some(reader) = readers.first() {
        out.left_for = Some(reader.to_string());
    }
    if opts.dry_run {
        return Ok(out);
    }
    // Before any shard goes, `manifest.ferry` is written again: readers keep their copy
    // of the newest snapshot by its ETag, and that snapshot may have been written again
    // (by this prune, or by one killed before it got here).
    if let (Some(name), false) = (&pointer, dead.is_empty() && out.rewritten == 0) {
        let when = ferry_core::utc::basic(crate::lease::now());
        let written = crate::snapshot::write_newest(store, name, Some(&when));
        store.rt.block_on(written)?;
    }
    store.rt.block_on(async {
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
        // Claims of snapshot names a killed upload left.
        let now = crate::lease::now();
        for meta in store.list_folder(crate::claim::DIR).await? {
            if now - meta.last_modified.timestamp() > crate::claim::STALE_AFTER {
                let _ = store.s3.delete(&meta.location).await;
            }
        }
        if out.left_for.is_some() {
            return Ok(());
        }
        for meta in &dead {
            store
                .s3
                .delete(&meta.location)
                .await
                .map_err(|e| store.error(&meta.location, "delete", &e))?;
        }
        Ok::<_, S3Error>(())
    })?;
    Ok(out)
}

/// Writes again each kept snapshot that names a shard `c` compacted, naming the new
/// shards instead; returns how many.
fn rewrite_kept(store: &Store, kept: &mut [(String, Manifest)], c: &Compacted) -> Result<usize> {
    let mut n = 0;
    for (name, m) in kept.iter_mut() {
        let Some(new) = c.rewrite(m)? else { continue };
        store
            .rt
            .block_on(crate::snapshot::write(store, name, &new))?;
        *m = new;
        n += 1;
    }
    Ok(n)
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
                ..PruneOptions::default()
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
