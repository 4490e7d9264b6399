//! Leases: `leases/ID.json`, written when an upload, a prune or a reader (a mount, a
//! download) begins and deleted when it ends, so an upload and a prune never overlap,
//! and a prune deletes no shard a reader may still be reading. A prune that finds an upload's lease stops
//! before it deletes anything (the upload may build on any snapshot, and its new
//! shards are named by none yet); an upload that finds a prune's waits for it to end.
//! A lease a killed upload left is removed by the next upload from the same machine
//! (it is recorded beside the multipart uploads in progress, [`crate::pending`]); one
//! older than its kind's [`Kind::stale_after`] is taken for a killed run's and holds
//! nothing. A reader's lease is written again every [`READ_REFRESH`] seconds while it
//! reads (a mount may stay for weeks), so a killed reader's goes stale within
//! minutes; a reader whose keys may not write reads without one.

use crate::store::Store;
use crate::Result;
use object_store::path::Path as Key;
use object_store::{ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};

/// The folder of leases under the prefix.
pub const DIR: &str = "leases";

/// What [`crate::pending`] records a lease as, in place of a multipart upload's id.
pub const PENDING_ID: &str = "lease";

/// How often a reader writes its lease again, in seconds.
pub const READ_REFRESH: u64 = 300;

/// The most bytes of a lease read.
const MAX_LEASE: u64 = 4 << 10;

/// What holds a lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// An upload of shards.
    Upload,
    /// A prune.
    Prune,
    /// A mount or a download, reading shards a manifest named when it began.
    Read,
}

impl Kind {
    /// How long a lease of this kind holds after it was written: an upload's a week (it
    /// may run for days), a prune's an hour (it only lists, reads manifests and
    /// deletes), a reader's three times [`READ_REFRESH`] after it was last written.
    pub fn stale_after(self) -> i64 {
        match self {
            Kind::Upload => 7 * 86_400,
            Kind::Prune => 3600,
            Kind::Read => 3 * READ_REFRESH as i64,
        }
    }
}

/// What a lease says.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Body {
    kind: Kind,
}

/// A lease held now.
pub struct Lease {
    key: Key,
    /// When it was taken, by this machine's clock (seconds after the epoch).
    pub began: i64,
    /// The task writing a reader's lease again, stopped when it ends.
    refresh: Option<tokio::task::AbortHandle>,
}

/// Seconds after the epoch, now.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A number no other process, here or elsewhere, draws at the same moment: the time,
/// this process and a monotonic clock's reading, hashed.
pub fn random() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let seed = format!(
        "{t:?}\0{}\0{:?}",
        std::process::id(),
        std::time::Instant::now()
    );
    xxhash_rust::xxh3::xxh3_64(seed.as_bytes())
}

/// A name for a lease or a claim: [`random`] in 16 hex digits.
pub fn unique_id() -> String {
    format!("{:016x}", random())
}

impl Lease {
    /// Writes a lease of `kind`.
    pub async fn take(store: &Store, kind: Kind) -> Result<Lease> {
        let began = now();
        let id = unique_id();
        let key = store.key(&format!("{DIR}/{id}.json"));
        let json = serde_json::to_vec(&Body { kind }).unwrap_or_default();
        // A killed upload's or prune's lease goes with the next run from this machine.
        if kind != Kind::Read {
            crate::pending::begun(store, &key, PENDING_ID);
        }
        store
            .s3
            .put(&key, PutPayload::from(json))
            .await
            .map_err(|e| store.error(&key, "write the lease", &e))?;
        Ok(Lease {
            key,
            began,
            refresh: None,
        })
    }

    /// The other leases held now, of `kind`: now by the store's clock, as it stamped
    /// this lease (a machine whose clock runs ahead takes no live lease for stale).
    pub async fn others(&self, store: &Store, kind: Kind) -> Result<Vec<Held>> {
        let all = held(store, now(), Some(&self.key)).await?;
        Ok(all
            .into_iter()
            .filter(|h| h.kind == kind && h.key != self.key)
            .collect())
    }

    /// Deletes the lease: the job is over.
    pub async fn end(&self, store: &Store) {
        if let Some(task) = &self.refresh {
            task.abort();
        }
        if store.s3.delete(&self.key).await.is_ok() {
            crate::pending::ended(store, &self.key, PENDING_ID);
        }
    }
}

/// A lease someone holds.
#[derive(Clone, Debug)]
pub struct Held {
    /// Its object.
    pub key: Key,
    /// Whose.
    pub kind: Kind,
    /// When it was written, by the store's clock (seconds after the epoch).
    pub written: i64,
}

impl std::fmt::Display for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            Kind::Upload => "an upload",
            Kind::Prune => "a prune",
            Kind::Read => "a reader (a mount or a download)",
        };
        let at = ferry_core::utc::basic(self.written);
        write!(f, "{what} begun at {at} (its lease {})", self.key)
    }
}

/// The leases under the prefix that hold at `now` (seconds after the epoch), or at the
/// time the store stamped the lease `mine` when it is listed; one that cannot be read is
/// taken for an upload's.
pub async fn held(store: &Store, now: i64, mine: Option<&Key>) -> Result<Vec<Held>> {
    let listed = store.list_folder(DIR).await?;
    let now = listed
        .iter()
        .find(|m| Some(&m.location) == mine)
        .map_or(now, |m| m.last_modified.timestamp());
    let mut out = Vec::new();
    for meta in listed {
        let written = meta.last_modified.timestamp();
        let body = match store.s3.get(&meta.location).await {
            Ok(got) => crate::body::gather(store, &meta.location, "read", got, MAX_LEASE)
                .await
                .ok()
                .and_then(|b| serde_json::from_slice::<Body>(&b).ok()),
            Err(object_store::Error::NotFound { .. }) => continue,
            Err(e) => return Err(store.error(&meta.location, "read the lease", &e)),
        };
        let kind = body.map_or(Kind::Upload, |b| b.kind);
        if now - written <= kind.stale_after() {
            out.push(Held {
                key: meta.location,
                kind,
                written,
            });
        }
    }
    Ok(out)
}

/// A reader's lease, written again every [`READ_REFRESH`] seconds on the store's
/// runtime and ended when dropped: a mount holds one for as long as it serves, a
/// download while it runs.
pub struct ReadLease {
    store: std::sync::Arc<Store>,
    lease: Option<Lease>,
}

impl ReadLease {
    /// Takes a reader's lease on `store`'s prefix; none when it could not be written
    /// (keys that may only read): the reader reads without one.
    pub fn take(store: &std::sync::Arc<Store>) -> ReadLease {
        let lease = store.rt.block_on(Lease::take(store, Kind::Read)).ok();
        let lease = lease.map(|mut lease| {
            // The task holds the client alone, not the store: the store (and its
            // runtime) must never be dropped last on one of the runtime's threads.
            let (s3, key) = (store.s3.clone(), lease.key.clone());
            let json = serde_json::to_vec(&Body { kind: Kind::Read }).unwrap_or_default();
            let task = store.rt.spawn(async move {
                loop {
                    tokio::time::sleep(std::time::Duration::from_secs(READ_REFRESH)).await;
                    let _ = s3.put(&key, PutPayload::from(json.clone())).await;
                }
            });
            lease.refresh = Some(task.abort_handle());
            lease
        });
        ReadLease {
            store: store.clone(),
            lease,
        }
    }
}

impl Drop for ReadLease {
    fn drop(&mut self) {
        let Some(lease) = self.lease.take() else {
            return;
        };
        // On a thread of its own: this may be dropped on one of the runtime's.
        let store = &self.store;
        std::thread::scope(|s| {
            s.spawn(|| store.rt.block_on(lease.end(store)));
        });
    }
}
