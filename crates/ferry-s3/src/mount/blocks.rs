//! An upload's shards as one address space for the mount, read with ranged GETs
//! through a bounded cache of blocks.
//!
//! Shard `i` takes the addresses from `i << 40` on ([`SPAN_BITS`]; a shard is at most
//! 5 GiB), so an address says its shard and its offset in it with two bit operations,
//! and the tree table built from the shards' indexes does not depend on the block size.
//!
//! Blocks are `block` bytes (a power of two) aligned within their shard; the last one
//! of a shard is shorter. The cache holds at most `cache_bytes` of them, least recently
//! used first out. A block is fetched once however many readers want it at the same
//! time: each is a [`OnceCell`] that the first reader fills and the others wait on.
//! When reads move from one block of a shard to the next, the block after that is
//! fetched in the background (readahead). Every GET names the ETag the manifest
//! recorded for its object (`If-Match`), so an object replaced since is an error, not
//! other bytes; a GET that does not end within `timeout` (retries included) is an
//! error too, so a server that stops answering gives EIO, not a hung read.

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

/// Each shard's addresses start at a multiple of `1 << SPAN_BITS`.
pub const SPAN_BITS: u32 = 40;

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

/// A block being fetched or fetched.
type Slot = Arc<OnceCell<Bytes>>;

/// The shards' bytes (see the module's doc).
pub struct Blocks {
    store: Arc<Store>,
    shards: Vec<ShardObject>,
    opts: BlockOptions,
    /// Blocks by their first address.
    cache: Mutex<LruCache<u64, Slot>>,
    /// Per shard: the block read last, for readahead.
    last: Vec<AtomicU64>,
}

impl Blocks {
    /// The shards `shards`, in manifest order, read from `store`.
    pub fn new(store: Arc<Store>, shards: Vec<ShardObject>, opts: BlockOptions) -> Blocks {
        let count = (opts.cache_bytes / opts.block).max(4) as usize;
        let last = shards.iter().map(|_| AtomicU64::new(u64::MAX)).collect();
        Blocks {
            store,
            shards,
            opts,
            cache: Mutex::new(LruCache::new(
                NonZeroUsize::new(count).unwrap_or(NonZeroUsize::MIN),
            )),
            last,
        }
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
        let slot = self.slot(((shard as u64) << SPAN_BITS) | offset);
        if let Some(b) = slot.get() {
            return Ok(b.clone());
        }
        let req = self.request(shard, offset);
        let got = self
            .store
            .rt
            .block_on(slot.get_or_try_init(|| req.fetch()))?;
        Ok(got.clone())
    }

    /// Notes that block `index` of `shard` is being read; when that follows a read of
    /// the block before, fetches the block after in the background.
    fn read_ahead(&self, shard: usize, index: u64) {
        let before = self.last[shard].swap(index, Ordering::Relaxed);
        if before.wrapping_add(1) == index {
            self.prefetch(shard, (index + 1) * self.opts.block);
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
        let slot = self.slot(((shard as u64) << SPAN_BITS) | start);
        if slot.initialized() {
            return;
        }
        let req = self.request(shard, start);
        self.store.rt.spawn(async move {
            // A failure here is left for the read that wants the block to retry.
            let _ = slot.get_or_try_init(|| req.fetch()).await;
        });
    }
}

impl DataAt for Blocks {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            let at = offset + done as u64;
            let shard = (at >> SPAN_BITS) as usize;
            let within = at & ((1 << SPAN_BITS) - 1);
            let Some(s) = self.shards.get(shard) else {
                break;
            };
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
