//! `ferry copy s3://BUCKET/PREFIX DST`: the manifest, then the shards, each fetched
//! with ranged GETs in parallel into a temporary file and unpacked from there by
//! unpack's code (through its index: the hostile-input rules, metadata, holes, the
//! parallel workers, the up-to-date check), while the next shards are fetched. The
//! directory shard comes last, so directory metadata is set after everything below.
//! A shard whose members DST already has (same size and mtime) is not fetched.

use crate::cat::need_manifest;
use crate::manifest::{Member, Shard};
use crate::store::Store;
use crate::{Result, S3Error};
use ferry_archive::read::archive::Archive;
use ferry_archive::read::select::Selection;
use ferry_archive::read::unpack::{unpack_file, UnpackOptions};
use ferry_core::error::Reporter;
use ferry_core::Stats;
use futures::StreamExt;
use object_store::ObjectStoreExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Bytes per ranged GET.
const RANGE: u64 = 4 << 20;

/// How to download.
#[derive(Clone, Debug)]
pub struct DownloadOptions {
    /// How each shard is unpacked.
    pub unpack: UnpackOptions,
    /// Shards fetched ahead of the one being unpacked.
    pub shards_in_flight: usize,
    /// Ranged GETs in flight, over all the shards being fetched (memory: this many
    /// times 4 MiB).
    pub ranges_in_flight: usize,
    /// Where the fetched shards wait to be unpacked.
    pub tmp: PathBuf,
}

/// What a download did.
#[derive(Clone, Debug, Default)]
pub struct Downloaded {
    /// Shards in the manifest.
    pub shards: usize,
    /// Shards fetched.
    pub fetched: usize,
    /// Bytes fetched.
    pub bytes: u64,
}

/// Whether `dst` holds every member of `shard` as it is there.
fn has_all(dst: &Path, shard: &Shard) -> bool {
    let has = |m: &Member| {
        let path = dst.join(std::ffi::OsStr::from_bytes(&m.path()));
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            return false;
        };
        match m.k {
            0 => {
                meta.is_file()
                    && meta.len() == m.s
                    && (meta.mtime(), meta.mtime_nsec() as u32) == (m.m.0, m.m.1)
            }
            _ => true,
        }
    };
    !shard.dirs && shard.members.iter().all(has)
}

/// Fetches `shard` into a temporary file in `tmp`.
async fn fetch(
    store: &Store,
    shard: &Shard,
    tmp: &Path,
    ranges: usize,
) -> Result<tempfile::NamedTempFile> {
    let file = tempfile::NamedTempFile::new_in(tmp)
        .map_err(|e| S3Error::new(format!("{}: make a temporary file: {e}", tmp.display())))?;
    let key = store.key(&shard.name());
    let f = file.as_file();
    let parts =
        (0..shard.size.div_ceil(RANGE)).map(|i| i * RANGE..((i + 1) * RANGE).min(shard.size));
    let mut gets = futures::stream::iter(parts)
        .map(|r| {
            let key = &key;
            async move { (r.start, store.s3.get_range(key, r).await) }
        })
        .buffer_unordered(ranges.max(1));
    while let Some((at, got)) = gets.next().await {
        let bytes = got.map_err(|e| store.error(&key, "read", &e))?;
        f.write_all_at(&bytes, at)
            .map_err(|e| S3Error::new(format!("{}: write: {e}", file.path().display())))?;
    }
    Ok(file)
}

/// Downloads the upload at `store`'s location into `dst`.
pub fn download(
    store: Arc<Store>,
    dst: &Path,
    opts: &DownloadOptions,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<Downloaded> {
    let manifest = store.rt.block_on(need_manifest(&store))?;
    let mut out = Downloaded {
        shards: manifest.shards.len(),
        ..Downloaded::default()
    };
    let mut wanted = Vec::new();
    for shard in &manifest.shards {
        if has_all(dst, shard) {
            stats.skipped.fetch_add(shard.members.len() as u64, Relaxed);
            stats
                .skipped_bytes
                .fetch_add(shard.members.iter().map(|m| m.s).sum(), Relaxed);
        } else {
            wanted.push(shard);
        }
    }
    let per_shard = (opts.ranges_in_flight / opts.shards_in_flight.max(1)).max(1);
    let (tx, mut rx) = tokio::sync::mpsc::channel(1);
    std::thread::scope(|scope| {
        let store2 = store.clone();
        let wanted2 = &wanted;
        scope.spawn(move || {
            store2.rt.block_on(async {
                let mut fetched = futures::stream::iter(wanted2.iter())
                    .map(|s| fetch(&store2, s, &opts.tmp, per_shard))
                    .buffered(opts.shards_in_flight.max(1));
                while let Some(f) = fetched.next().await {
                    let failed = f.is_err();
                    if tx.send(f).await.is_err() || failed {
                        break;
                    }
                }
            })
        });
        for shard in wanted.iter() {
            let Some(file) = rx.blocking_recv() else {
                return Err(S3Error::new("the fetching thread ended early"));
            };
            let file = file?;
            let key = store.key(&shard.name());
            let named = |e: &dyn std::fmt::Display| {
                S3Error::new(format!("s3://{}/{key}: {e}", store.loc.bucket))
            };
            let archive = Archive::open(file.path()).map_err(|e| named(&e))?;
            if archive.index().is_none() || archive.len() != shard.size {
                return Err(named(&"not the ferry archive the manifest names"));
            }
            // Directory metadata only from the directory shard, unpacked last.
            let unpack = UnpackOptions {
                dir_metadata: shard.dirs,
                ..opts.unpack
            };
            unpack_file(&archive, dst, &unpack, &Selection::all(), stats, reporter)
                .map_err(|e| named(&e))?;
            out.fetched += 1;
            out.bytes += shard.size;
        }
        Ok(())
    })?;
    Ok(out)
}
