//! `ferry copy s3://BUCKET/PREFIX DST`: the manifest, then the shards, each fetched
//! with ranged GETs in parallel, in order, and unpacked as the bytes arrive by the
//! stream unpacker (`ferry unpack -`'s code: the hostile-input rules, metadata, holes,
//! the parallel workers, the up-to-date check), every file's content then checked
//! against the shard's own index, which ends the stream. Nothing is written twice: no
//! temporary file. Every member a shard holds is checked against the manifest before
//! the unpacker sees it ([`crate::checked`]). The directory shard comes last, so directory metadata is set after
//! everything below. A shard whose members DST already has (same size and mtime) is not
//! fetched.

use crate::cat::need_manifest;
use crate::checked::{Checked, Expected};
use crate::manifest::{Member, Shard};
use crate::store::Store;
use crate::{Result, S3Error};
use ferry_archive::read::select::Selection;
use ferry_archive::read::stream::unpack_stream_pooled;
use ferry_archive::read::tail::{check_recorded_removing, check_tail_removing};
use ferry_archive::read::unpack::UnpackOptions;
use ferry_core::entry::RelPath;
use ferry_core::error::Reporter;
use ferry_core::pool::Share;
use ferry_core::Stats;
use futures::{StreamExt, TryStreamExt};
use object_store::{GetOptions, GetRange, ObjectStore};
use std::collections::HashSet;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Buffers of 1 MiB the unpacking holds in flight: with the ranges in flight, a
/// download of the kernel tree stays under 128 MiB.
const UNPACK_BUFFERS: usize = 32;

/// What a file whose content does not match its shard's index is told as.
const DAMAGED: &str = "content differs from the hash the shard's index records for it: \
                       removed, so a rerun downloads it again";

/// Bytes per ranged GET.
const RANGE: u64 = 4 << 20;

/// How to download.
#[derive(Clone, Debug)]
pub struct DownloadOptions {
    /// How each shard is unpacked.
    pub unpack: UnpackOptions,
    /// Ranged GETs in flight ahead of the unpacking (memory: this many times 4 MiB, and
    /// two fetched ones waiting).
    pub ranges_in_flight: usize,
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

/// The hashes the manifest records for the files of `view`, by their offsets in it.
fn recorded_hashes(view: &Shard) -> Vec<(u64, u128, RelPath)> {
    view.members
        .iter()
        .filter(|m| m.k == 0)
        .filter_map(|m| Some((m.o, m.hash()?, RelPath::from_bytes(m.path()))))
        .collect()
}

/// A shard's chunks as they arrive, or why they stopped.
type Chunks = tokio::sync::mpsc::Receiver<std::result::Result<bytes::Bytes, String>>;

/// A shard's bytes as one stream, from ranged GETs made ahead by a feeding task.
struct Ranges {
    rx: Chunks,
    current: bytes::Bytes,
    /// Bytes handed out.
    read: u64,
}

impl Read for Ranges {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(Ok(bytes)) => self.current = bytes,
                Some(Err(e)) => return Err(io::Error::other(e)),
                None => return Ok(0),
            }
        }
        let n = out.len().min(self.current.len());
        out[..n].copy_from_slice(&self.current.split_to(n));
        self.read += n as u64;
        Ok(n)
    }
}

/// What of a shard is fetched, and how the stream of it is checked.
#[derive(Clone, Debug)]
struct Fetch {
    /// The shard as the stream reads it: the shard itself, or (some members named) a
    /// shard of those members alone, one after another, each at its offset in the
    /// stream.
    view: Shard,
    /// The byte ranges of the shard fetched, in order, each at most [`RANGE`].
    pieces: Vec<std::ops::Range<u64>>,
    /// Whether end-of-archive blocks follow them (members fetched without the shard's
    /// end and index); their hashes are then checked against the manifest's.
    end_blocks: bool,
}

/// How `shard` is fetched: whole when the manifest names all it holds as it holds
/// them, else the ranges of the members it names.
fn fetch_of(shard: &Shard) -> Fetch {
    let split = |r: std::ops::Range<u64>| {
        let n = (r.end - r.start).div_ceil(RANGE);
        (0..n).map(move |i| r.start + i * RANGE..(r.start + (i + 1) * RANGE).min(r.end))
    };
    if shard.whole() && !shard.members.iter().any(Member::is_renamed) {
        return Fetch {
            view: shard.clone(),
            pieces: split(0..shard.size).collect(),
            end_blocks: false,
        };
    }
    let mut view = Shard {
        members: Vec::with_capacity(shard.members.len()),
        held: None,
        ..shard.clone()
    };
    let mut runs: Vec<std::ops::Range<u64>> = Vec::new();
    let mut at = 0;
    for (i, m) in shard.members.iter().enumerate() {
        // A member's headers and data, padded to its tar block; never past the next.
        let next = shard.members.get(i + 1).map_or(shard.size, |n| n.o);
        let end = m.e.next_multiple_of(512).min(next).min(shard.size);
        view.members.push(Member {
            o: at,
            e: at + (m.e - m.o),
            ..m.clone()
        });
        at += end - m.o;
        match runs.last_mut() {
            Some(run) if run.end == m.o => run.end = end,
            _ => runs.push(m.o..end),
        }
    }
    view.size = at + 1024;
    Fetch {
        view,
        pieces: runs.into_iter().flat_map(split).collect(),
        end_blocks: true,
    }
}

/// Feeds the bytes of `fetch`, in order, to `tx`: `ranges` GETs of at most 4 MiB in
/// flight. Stops at the first failure (sent on) or when the reader has gone.
async fn feed(
    store: &Store,
    shard: &Shard,
    fetch: Fetch,
    ranges: usize,
    tx: tokio::sync::mpsc::Sender<std::result::Result<bytes::Bytes, String>>,
) {
    let key = store.key(&shard.name());
    let parts = fetch.pieces.clone();
    // Every range must come from the object the manifest names (its ETag): a shard
    // replaced since is refused before a byte of it is unpacked.
    // A range's body is kept as the chunks it arrived in, not gathered into one
    // buffer: a 4 MiB buffer is mapped fresh each time (large ones are not kept in
    // malloc's arenas), its every page faulted in and zeroed, then copied into.
    let get = |r: std::ops::Range<u64>| {
        let opts = GetOptions {
            if_match: shard.etag.clone(),
            range: Some(GetRange::Bounded(r)),
            ..GetOptions::default()
        };
        let key = &key;
        async move {
            let body = store.s3.get_opts(key, opts).await?.into_stream();
            body.try_collect::<Vec<bytes::Bytes>>().await
        }
    };
    let mut gets = futures::stream::iter(parts)
        .map(get)
        .buffered(ranges.max(1));
    while let Some(got) = gets.next().await {
        let got = got.map_err(|e| match e {
            object_store::Error::Precondition { .. } => format!(
                "s3://{}/{key}: not the shard the manifest names (its ETag differs): \
                 replaced since the upload",
                store.loc.bucket
            ),
            e => store.error(&key, "read", &e).to_string(),
        });
        let chunks = match got {
            Ok(chunks) => chunks.into_iter().map(Ok).collect(),
            Err(e) => vec![Err(e)],
        };
        for chunk in chunks {
            let failed = chunk.is_err();
            if tx.send(chunk).await.is_err() || failed {
                return;
            }
        }
    }
    if fetch.end_blocks {
        let _ = tx.send(Ok(bytes::Bytes::from_static(&[0; 1024]))).await;
    }
}

/// Starts feeding `shard`'s bytes (`fetch`) on the runtime: the chunks' receiver, and
/// the task.
fn start_feed(
    store: &Arc<Store>,
    shard: &Shard,
    fetch: Fetch,
    ranges: usize,
) -> (Chunks, tokio::task::JoinHandle<()>) {
    // Fetched chunks wait here for the unpacker (a range's, as it arrived).
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let (store2, shard) = (store.clone(), shard.clone());
    let task = store
        .rt
        .spawn(async move { feed(&store2, &shard, fetch, ranges, tx).await });
    (rx, task)
}

/// The directory shard's feed, started early; however the download ends, it is
/// stopped and waited for here, on this thread. Its task holds the store, and so its
/// runtime: left running, it could drop the last reference inside the runtime, which
/// tokio refuses with a panic (seen when an earlier shard was refused).
struct Early<'a> {
    store: &'a Store,
    fed: Option<(Chunks, tokio::task::JoinHandle<()>)>,
}

impl Drop for Early<'_> {
    fn drop(&mut self) {
        if let Some((mut rx, feeder)) = self.fed.take() {
            rx.close();
            let _ = self.store.rt.block_on(feeder);
        }
    }
}

/// Downloads the upload at `store`'s location into `dst`.
pub fn download(
    store: Arc<Store>,
    dst: &Path,
    opts: &DownloadOptions,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<Downloaded> {
    // Taken before the manifest is read, held to the end (see `crate::prune`).
    let _lease = crate::lease::ReadLease::take(&store);
    let manifest = store.rt.block_on(need_manifest(&store))?;
    let mut out = Downloaded {
        shards: manifest.shards.len(),
        ..Downloaded::default()
    };
    // Every directory the manifest names: those above each shard's members, which
    // every shard holds, must be among them.
    let dirs: HashSet<Vec<u8>> = manifest
        .shards
        .iter()
        .filter(|s| s.dirs)
        .flat_map(|s| &s.members)
        .filter(|m| m.k == 1)
        .map(|m| m.path())
        .collect();
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
    // The directory shard, small and unpacked last, is asked for at once beside the
    // first shard: its GET then overlaps the data instead of waiting its turn (on a
    // reused connection Garage sends a small body ~40 ms after its headers).
    let mut early = Early {
        store: &store,
        fed: match wanted.last() {
            Some(last) if wanted.len() > 1 && last.size <= RANGE => Some(start_feed(
                &store,
                last,
                fetch_of(last),
                opts.ranges_in_flight,
            )),
            _ => None,
        },
    };
    // With several directory shards, every directory is made before the first of them
    // (see `crate::dirs_first`).
    let mut dirs_made = manifest.shards.iter().filter(|s| s.dirs).count() < 2;
    for (i, shard) in wanted.iter().enumerate() {
        if shard.dirs && !dirs_made {
            crate::dirs_first::make_dirs(dst, &dirs, &opts.unpack, reporter)
                .map_err(|e| S3Error::new(e.to_string()))?;
            dirs_made = true;
        }
        let key = store.key(&shard.name());
        let named = |e: &dyn std::fmt::Display| {
            S3Error::new(format!("s3://{}/{key}: {e}", store.loc.bucket))
        };
        let fetch = fetch_of(shard);
        let (rx, feeder) = match early.fed.take() {
            Some(fed) if i + 1 == wanted.len() => fed,
            other => {
                early.fed = other;
                start_feed(&store, shard, fetch.clone(), opts.ranges_in_flight)
            }
        };
        let mut ranges = Ranges {
            rx,
            current: bytes::Bytes::new(),
            read: 0,
        };

        // Directory metadata only from the directory shard, unpacked last.
        let unpack = UnpackOptions {
            dir_metadata: shard.dirs,
            keep_old: false,
            keep_partial: false,
            ..opts.unpack
        };
        let done: Result<bool> = (|| {
            let shown = format!("s3://{}/{key}", store.loc.bucket);
            let expected = Expected::new(&fetch.view, &dirs);
            let mut stream = Checked::new(&mut ranges, expected, shown, reporter);
            let pool = Share::private(UNPACK_BUFFERS, 1 << 20);
            // Files stored under an earlier name are made under the one named now.
            let renamed = fetch.view.members.iter().filter(|m| m.is_renamed());
            let all = Selection::all().naming_at(renamed.map(|m| (m.o, m.path())).collect());
            let unpacked =
                unpack_stream_pooled(&mut stream, dst, &unpack, &all, &pool, stats, reporter)
                    .map_err(|e| named(&e))
                    .and_then(|hashes| {
                        match fetch.end_blocks {
                            false => {
                                check_tail_removing(&mut stream, hashes, dst, DAMAGED, reporter)
                            }
                            true => {
                                let recorded = recorded_hashes(&fetch.view);
                                check_recorded_removing(hashes, &recorded, dst, DAMAGED, reporter)
                            }
                        }
                        .map_err(|e| named(&e))
                    });
            // A member that did not pass ended the unpacking; each was reported.
            let refused = stream.refused();
            // The feeder ends once the reader is gone (or all is sent).
            drop(stream);
            ranges.rx.close();
            let _ = store.rt.block_on(feeder);
            if refused {
                return Ok(false);
            }
            unpacked?;
            if ranges.read != fetch.view.size {
                return Err(named(&format_args!(
                    "{} bytes where the manifest says {}: not the shard it names",
                    ranges.read, fetch.view.size
                )));
            }
            Ok(true)
        })();
        if done? {
            out.fetched += 1;
            out.bytes += fetch.pieces.iter().map(|r| r.end - r.start).sum::<u64>();
        }
    }
    Ok(out)
}
