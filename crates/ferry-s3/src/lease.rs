//! Leases: `leases/ID.json`, written when an upload or a prune begins and deleted
//! when it ends, so the two never overlap. A prune that finds an upload's lease stops
//! before it deletes anything (the upload may build on any snapshot, and its new
//! shards are named by none yet); an upload that finds a prune's waits for it to end.
//! A lease a killed upload left is removed by the next upload from the same machine
//! (it is recorded beside the multipart uploads in progress, [`crate::pending`]); one
//! older than its kind's [`Kind::stale_after`] is taken for a killed run's and holds
//! nothing.

use crate::store::Store;
use crate::Result;
use object_store::path::Path as Key;
use object_store::{ObjectStoreExt, PutPayload};
use serde::{Deserialize, Serialize};

/// The folder of leases under the prefix.
pub const DIR: &str = "leases";

/// What [`crate::pending`] records a lease as, in place of a multipart upload's id.
pub const PENDING_ID: &str = "lease";

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
}

impl Kind {
    /// How long a lease of this kind holds after it was written: an upload's a week (it
    /// may run for days), a prune's an hour (it only lists, reads manifests and
    /// deletes).
    pub fn stale_after(self) -> i64 {
        match self {
            Kind::Upload => 7 * 86_400,
            Kind::Prune => 3600,
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
}

/// Seconds after the epoch, now.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl Lease {
    /// Writes a lease of `kind`.
    pub async fn take(store: &Store, kind: Kind) -> Result<Lease> {
        let began = now();
        let id = format!(
            "{:016x}",
            xxhash_rust::xxh3::xxh3_64(
                format!(
                    "{began}\0{}\0{:?}",
                    std::process::id(),
                    std::time::Instant::now()
                )
                .as_bytes()
            )
        );
        let key = store.key(&format!("{DIR}/{id}.json"));
        let json = serde_json::to_vec(&Body { kind }).unwrap_or_default();
        if kind == Kind::Upload {
            crate::pending::begun(store, &key, PENDING_ID);
        }
        store
            .s3
            .put(&key, PutPayload::from(json))
            .await
            .map_err(|e| store.error(&key, "write the lease", &e))?;
        Ok(Lease { key, began })
    }

    /// The other leases held now, of `kind`.
    pub async fn others(&self, store: &Store, kind: Kind) -> Result<Vec<Held>> {
        let all = held(store, now()).await?;
        Ok(all
            .into_iter()
            .filter(|h| h.kind == kind && h.key != self.key)
            .collect())
    }

    /// Deletes the lease: the upload is over.
    pub async fn end(&self, store: &Store) {
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
        };
        let at = ferry_core::utc::basic(self.written);
        write!(f, "{what} begun at {at} (its lease {})", self.key)
    }
}

/// The leases under the prefix that hold at `now` (seconds after the epoch); one that
/// cannot be read is taken for an upload's.
pub async fn held(store: &Store, now: i64) -> Result<Vec<Held>> {
    let listed = store.list_folder(DIR).await?;
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
