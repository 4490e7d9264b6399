//! An upload's shards as one address space for the mount, read with ranged GETs
//! through a bounded cache of blocks.
//!
//! The shards follow one another in manifest order, each starting at a multiple of
//! [`ALIGN`] (the largest block size), so any block lies inside one shard and is
//! aligned within it, and the tree table built from the shards' indexes does not
//! depend on the block size ([`layout`]).
//!
//! Blocks are `block` bytes (a power of two) aligned within their shard; the last one
//! of a shard is shorter. The cache holds at most `cache_bytes` of them, least recently
//! used first out. A block is fetched once however many readers want it at the same
//! time: each is a [`OnceCell`] that the first reader fills and the others wait on.
//! When reads move from one block of a shard to the next, the [`READ_AHEAD`] blocks
//! after it are fetched in the background (readahead). A fetch that fails fails every
//! reader waiting on it, and the next read tries again.
//!
//! Every GET names the ETag the manifest recorded for its object (`If-Match`), so an
//! object replaced since is an error, not other bytes; a GET that does not end within
//! `timeout` (object_store's retries included) is an error too, so a server that stops
//! answering gives EIO, not a hung read.

use crate::store::{explain, Store};
use bytes::Bytes;
use ferry_mount::data::DataAt;
use lru::LruCache;
use object_store::aws::AmazonS3;
use object_store::path::Path as Key;
use object_store::{GetOptions, GetRange, ObjectStore};
use std::io;
use std::num::NonZeroUsize;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::OnceCell;

/// Each shard's addresses start at a multiple of this: the largest block size.
pub const ALIGN: u64 = 256 << 20;

/// Where each shard's addresses start, and where the last one's end, for shards of
/// these sizes (None if they do not fit in 64 bits).
pub fn layout(sizes: impl IntoIterator<Item = u64>) -> Option<(Vec<u64>, u64)> {
    let mut bases = Vec::new();
    let mut end = 0u64;
    for size in sizes {
        bases.push(end);
        end = end.checked_add(size)?.checked_next_multiple_of(ALIGN)?;
    }
    Some((bases, end))
}

/// Blocks fetched ahead of sequential reads.
pub const READ_AHEAD: u64 = 4;

/// One shard as the mount reads it.
#[derive(Clone, Debug)]
pub struct ShardObject {
    /// Its object.
    pub key: Key,
    /// Its length.
    pub size: u64,
    /// Its ETag when the manifest was written.
    pub etag: Option<String>,
}

/// How blocks are fetched and kept.
#[derive(Clone, Copy, Debug)]
pub struct BlockOptions {
    /// Bytes of blocks kept (at least four blocks are).
    pub cache_bytes: u64,
    /// Bytes per block: a power of two from 64 KiB to 256 MiB.
    pub block: u64,
    /// The longest one block's GET may take, retries included.
    pub timeout: Duration,
}

impl Default for BlockOptions {
    fn default() -> Self {
        BlockOptions {
            cache_bytes: 256 << 20,
            block: 4 << 20,
            timeout: Duration::from_secs(30),
        }
    }
}

impl BlockOptions {
    /// Checks the block size; the error says what is allowed.
    pub fn check(&self) -> Result<(), String> {
        if !self.block.is_power_of_two() || !(64 << 10..=256 << 20).contains(&self.block) {
            return Err(format!(
                "--block-size {}: a power of two from 64K to 256M",
                self.block
            ));
        }
        Ok(())
    }
}

/// A block being fetched, fetched, or whose fetch failed (every reader that waited on
/// that fetch gets its error; the slot then leaves the cache, so the next read tries
/// again).
type Slot = Arc<OnceCell<Result<Bytes, String>>>;

/// The cache of blocks by their first address.
type Cache = Arc<Mutex<LruCache<u64, Slot>>>;

/// Counts of the GETs made.
#[derive(Default)]
struct Fetched {
    gets: AtomicU64,
    bytes: AtomicU64,
}

/// Fills `slot`, the block at `addr`, with what `req` fetches (or waits for the fetch
/// already under way), counting the GET in `counts`; a failed slot leaves `cache`.
async fn fill(
    cache: &Cache,
    counts: &Fetched,
    addr: u64,
    slot: &Slot,
    req: Request,
) -> io::Result<Bytes> {
    let fetch = || async {
        let got = req.fetch().await.map_err(|e| e.to_string());
        counts.gets.fetch_add(1, Ordering::Relaxed);
        if let Ok(b) = &got {
            counts.bytes.fetch_add(b.len() as u64, Ordering::Relaxed);
        }
        got
    };
    match slot.get_or_init(fetch).await {
        Ok(b) => Ok(b.clone()),
        Err(e) => {
            let mut c = cache.lock().unwrap_or_else(|p| p.into_inner());
            if c.peek(&addr).is_some_and(|s| Arc::ptr_eq(s, slot)) {
                c.pop(&addr);
            }
            Err(io::Error::other(e.clone()))
        }
    }
}

/// The shards' bytes (see the module's doc).
pub struct Blocks {
    store: Arc<Store>,
    shards: Vec<ShardObject>,
    /// Where each shard's addresses start ([`layout`]).
    bases: Vec<u64>,
    opts: BlockOptions,
    /// Blocks by their first address.
    cache: Cache,
    /// Per shard: the block read last, for readahead.
    last: Vec<AtomicU64>,
    /// Ranged GETs that ended, and the bytes they brought.
    fetched: Arc<Fetched>,
    /// How many blocks are read ahead: [`READ_AHEAD`], or fewer in a small cache.
    ahead: u64,
    /// The mount's reader lease: no prune deletes a shard while it serves.
    lease: Option<crate::lease::ReadLease>,
}

impl Blocks {
    /// The blocks, holding the reader's lease `lease` for as long as they are read.
    pub fn holding(mut self, lease: Option<crate::lease::ReadLease>) -> Blocks {
        self.lease = lease;
        self
    }

    /// The shards `shards`, in manifest order, read from `store`; None when their
    /// sizes do not fit one address space.
    pub fn new(store: Arc<Store>, shards: Vec<ShardObject>, opts: BlockOptions) -> Option<Blocks> {
        let (bases, _) = layout(shards.iter().map(|s| s.size))?;
        let count = (opts.cache_bytes / opts.block).max(4) as usize;
        let last = shards.iter().map(|_| AtomicU64::new(u64::MAX)).collect();
        Some(Blocks {
            store,
            shards,
            bases,
            opts,
            ahead: READ_AHEAD.min(count as u64 / 2),
            lease: None,
            cache: Arc::new(Mutex::new(LruCache::new(
                NonZeroUsize::new(count).unwrap_or(NonZeroUsize::MIN),
            ))),
            last,
            fetched: Arc::default(),
        })
    }

    /// The bytes of all the shards.
    pub fn bytes(&self) -> u64 {
        self.shards.iter().map(|s| s.size).sum()
    }

    /// The slot of the block that starts at address `addr`, made if missing.
    fn slot(&self, addr: u64) -> Slot {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = cache.get(&addr) {
            return Arc::clone(s);
        }
        let s: Slot = Arc::new(OnceCell::new());
        cache.put(addr, Arc::clone(&s));
        s
    }

    /// What a GET of the block at `offset` of shard `shard` needs, as owned values
    /// (a background fetch outlives the read that started it).
    fn request(&self, shard: usize, offset: u64) -> Request {
        let s = &self.shards[shard];
        Request {
            s3: Arc::clone(&self.store.s3),
            bucket: self.store.loc.bucket.clone(),
            key: s.key.clone(),
            etag: s.etag.clone(),
            range: offset..(offset + self.opts.block).min(s.size),
            timeout: self.opts.timeout,
        }
    }

    /// The block at `offset` (a multiple of the block size) of shard `shard`.
    fn block(&self, shard: usize, offset: u64) -> io::Result<Bytes> {
        let addr = self.bases[shard] + offset;
        let slot = self.slot(addr);
        if let Some(Ok(b)) = slot.get() {
            return Ok(b.clone());
        }
        let req = self.request(shard, offset);
        self.store
            .rt
            .block_on(fill(&self.cache, &self.fetched, addr, &slot, req))
    }

    /// Notes that block `index` of `shard` is being read; when that follows a read of
    /// the block before, fetches the blocks after in the background.
    fn read_ahead(&self, shard: usize, index: u64) {
        let before = self.last[shard].swap(index, Ordering::Relaxed);
        if before.wrapping_add(1) == index {
            for next in index + 1..=index + self.ahead {
                self.prefetch(shard, next * self.opts.block);
            }
        }
    }

    /// Fetches the block holding byte `offset` of shard `shard` in the background,
    /// unless it is cached, being fetched, or past the shard's end.
    pub fn prefetch(&self, shard: usize, offset: u64) {
        let Some(s) = self.shards.get(shard) else {
            return;
        };
        if offset >= s.size {
            return;
        }
        let start = offset / self.opts.block * self.opts.block;
        let addr = self.bases[shard] + start;
        let slot = self.slot(addr);
        if slot.initialized() {
            return;
        }
        let (req, cache) = (self.request(shard, start), Arc::clone(&self.cache));
        let counts = Arc::clone(&self.fetched);
        self.store.rt.spawn(async move {
            // A failure is for the reads waiting on it to report; later ones retry.
            let _ = fill(&cache, &counts, addr, &slot, req).await;
        });
    }
}

impl DataAt for Blocks {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            let at = offset + done as u64;
            let Some(shard) = self.bases.partition_point(|&b| b <= at).checked_sub(1) else {
                break;
            };
            let s = &self.shards[shard];
            let within = at - self.bases[shard];
            if within >= s.size {
                break;
            }
            let index = within / self.opts.block;
            let start = index * self.opts.block;
            let block = self.block(shard, start)?;
            self.read_ahead(shard, index);
            let from = (within - start) as usize;
            if from >= block.len() {
                break;
            }
            let n = (block.len() - from).min(buf.len() - done);
            buf[done..done + n].copy_from_slice(&block[from..from + n]);
            done += n;
        }
        Ok(done)
    }

    fn summary(&self) -> Option<String> {
        Some(format!(
            "{} ranged GETs, {} bytes fetched",
            self.fetched.gets.load(Ordering::Relaxed),
            self.fetched.bytes.load(Ordering::Relaxed)
        ))
    }
}

/// One ranged GET. (It holds the client, not the [`Store`]: a background fetch must
/// not hold the runtime it runs on.)
struct Request {
    s3: Arc<AmazonS3>,
    bucket: String,
    key: Key,
    etag: Option<String>,
    range: Range<u64>,
    timeout: Duration,
}

impl Request {
    /// The bytes of the range, all of them, or an error naming the object.
    async fn fetch(self) -> io::Result<Bytes> {
        let opts = GetOptions {
            if_match: self.etag.clone(),
            range: Some(GetRange::Bounded(self.range.clone())),
            ..GetOptions::default()
        };
        let get = async { self.s3.get_opts(&self.key, opts).await?.bytes().await };
        let shown = format!("s3://{}/{}", self.bucket, self.key);
        let fail = |why: String| io::Error::other(format!("{shown}: {why}"));
        let bytes = match tokio::time::timeout(self.timeout, get).await {
            Err(_) => {
                return Err(fail(format!(
                    "no answer within {} s",
                    self.timeout.as_secs_f32()
                )))
            }
            Ok(Err(object_store::Error::Precondition { .. })) => return Err(fail(
                "the object changed since the manifest was written (its ETag differs): mount again"
                    .into(),
            )),
            Ok(Err(object_store::Error::NotFound { .. })) => {
                return Err(fail(
                    "the object is gone (a newer upload deletes the shards it no longer uses): mount again"
                        .into(),
                ))
            }
            Ok(Err(e)) => return Err(fail(explain(&e))),
            Ok(Ok(b)) => b,
        };
        if bytes.len() as u64 != self.range.end - self.range.start {
            return Err(fail(format!(
                "asked for bytes {}..{}, got {}",
                self.range.start,
                self.range.end,
                bytes.len()
            )));
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_sizes_are_powers_of_two_within_bounds() {
        let with = |block| BlockOptions {
            block,
            ..BlockOptions::default()
        };
        for ok in [64 << 10, 4 << 20, 256 << 20] {
            assert!(with(ok).check().is_ok(), "{ok}");
        }
        for bad in [0, 3 << 20, 32 << 10, 512 << 20, u64::MAX] {
            let e = with(bad).check().unwrap_err();
            assert!(e.contains("a power of two from 64K to 256M"), "{e}");
        }
    }

    #[test]
    fn shards_follow_one_another_aligned_for_any_block_size() {
        let (bases, end) = layout([1, ALIGN, ALIGN + 1, 0, 5]).unwrap();
        assert_eq!(bases, [0, ALIGN, 2 * ALIGN, 4 * ALIGN, 4 * ALIGN]);
        assert_eq!(end, 5 * ALIGN);
        assert_eq!(layout([u64::MAX - 10, 1]), None);
        assert_eq!(layout([]), Some((vec![], 0)));
    }
}
