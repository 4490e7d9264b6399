//! Naming a snapshot when uploads end at once: two uploads that end in the same second
//! must not take one name, or the later PUT would replace the earlier's snapshot. S3
//! has no create-only write that every store keeps (Garage 2.5 ignores `If-None-Match`
//! on PUT), so a name is claimed: an upload writes `claims/NAME/ID`, lists
//! `claims/NAME/`, and takes the name only when its claim is the only one there and no
//! snapshot has the name yet; otherwise it withdraws its claim, waits a moment at
//! random and tries the next name (`NAME.2`, ...).
//!
//! At most one upload takes a name. Each writes its claim before it lists: of two
//! uploads, the one that lists second sees the other's claim, unless that one has
//! withdrawn it already, which it does only after writing its snapshot, and then the
//! check that follows the listing finds the snapshot. (Both may withdraw; their random
//! waits part them on the next try.) A claim a killed upload left is one name skipped,
//! and goes with the next prune once it is an hour old.
//!
//! `manifest.ferry` then names the newest snapshot there is ([`name_newest`]): each
//! upload writes it with the newest name it lists, and lists again until what it wrote
//! is still the newest, so the last to finish leaves the newest of all named.

use crate::manifest::Manifest;
use crate::store::Store;
use crate::{Result, S3Error};
use object_store::{ObjectStoreExt, PutPayload};
use std::time::Duration;

/// The folder of claims under the prefix.
pub const DIR: &str = "claims";

/// How long a claim may stand before a prune takes it for a killed upload's, in seconds.
pub const STALE_AFTER: i64 = 3600;

/// Names tried before giving up.
const TRIES: u32 = 64;

/// Writes `manifest` as the first snapshot name for an upload begun at `began` that no
/// other upload has or takes meanwhile; returns the name.
pub async fn write_snapshot(store: &Store, began: i64, manifest: &Manifest) -> Result<String> {
    let id = crate::lease::unique_id();
    let names = crate::snapshot::list(store).await?;
    let mut after = names.last().cloned();
    for attempt in 0..TRIES {
        let name = crate::snapshot::next_name(began, after.as_deref());
        let mine = store.key(&format!("{DIR}/{name}/{id}"));
        store
            .s3
            .put(&mine, PutPayload::from_static(b""))
            .await
            .map_err(|e| store.error(&mine, "write a claim", &e))?;
        let taken = taken(store, &name, &mine).await;
        let wrote = match taken {
            Ok(false) => {
                let named = Manifest {
                    snapshot: Some(name.clone()),
                    ..manifest.clone()
                };
                crate::snapshot::write(store, &name, &named)
                    .await
                    .map(|()| true)
            }
            Ok(true) => Ok(false),
            Err(e) => Err(e),
        };
        // Withdrawn whatever happened: only after the snapshot is there.
        let _ = store.s3.delete(&mine).await;
        if wrote? {
            return Ok(name);
        }
        let wait = 20 + crate::lease::random() % 200;
        tokio::time::sleep(Duration::from_millis(wait * u64::from(attempt.min(4) + 1))).await;
        after = Some(name);
    }
    Err(S3Error::new(format!(
        "{}: no snapshot name could be claimed in {TRIES} tries: too many uploads at once",
        store.loc
    )))
}

/// Whether `name` is taken: claimed by another upload (`mine` aside), or a snapshot.
async fn taken(store: &Store, name: &str, mine: &object_store::path::Path) -> Result<bool> {
    let claims = store.list_folder(&format!("{DIR}/{name}")).await?;
    if claims.iter().any(|m| &m.location != mine) {
        return Ok(true);
    }
    let key = store.key(&crate::snapshot::object(name));
    match store.s3.head(&key).await {
        Ok(_) => Ok(true),
        Err(object_store::Error::NotFound { .. }) => Ok(false),
        Err(e) => Err(store.error(&key, "look for the snapshot", &e)),
    }
}

/// How many times an upload writes `manifest.ferry` again while newer snapshots appear.
const NEWEST_TRIES: usize = 8;

/// Writes `manifest.ferry` naming the newest snapshot under the prefix (`mine`, just
/// written, or a newer one another upload wrote meanwhile), again while a newer one
/// appears after it was written.
pub async fn name_newest(store: &Store, mine: &str) -> Result<()> {
    let newest = |names: Vec<String>| names.last().cloned().unwrap_or_else(|| mine.to_string());
    let mut name = newest(crate::snapshot::list(store).await?);
    for _ in 0..NEWEST_TRIES {
        crate::snapshot::write_newest(store, &name, None).await?;
        let now = newest(crate::snapshot::list(store).await?);
        if now == name {
            break;
        }
        name = now;
    }
    Ok(())
}
