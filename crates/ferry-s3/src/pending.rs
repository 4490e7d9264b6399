//! Multipart uploads in progress, recorded on local disk (`$XDG_CACHE_HOME/ferry/s3-uploads`,
//! one small file each) from their creation until they are completed or aborted, so
//! the next upload to the same place aborts those a killed run left behind instead of
//! leaving their parts billed in the bucket (and deletes the lease it left,
//! [`crate::lease`]). Each record names the process that wrote it: those of an upload
//! still running are left alone.

use crate::store::Store;
use object_store::multipart::MultipartStore;
use object_store::path::Path as Key;
use std::path::PathBuf;

fn dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("ferry").join("s3-uploads"))
}

fn record_path(bucket: &str, key: &Key, id: &str) -> Option<PathBuf> {
    let h = xxhash_rust::xxh3::xxh3_64(format!("{bucket}\0{key}\0{id}").as_bytes());
    Some(dir()?.join(format!("{h:016x}")))
}

/// Records that upload `id` of `key` has begun. The record is written beside its name
/// and renamed into place, so a run killed while writing it leaves a whole record or
/// none (a reader never takes a half-written one for nothing to abort).
pub fn begun(store: &Store, key: &Key, id: &str) {
    if let Some(path) = record_path(&store.loc.bucket, key, id) {
        let _ = std::fs::create_dir_all(path.parent().unwrap_or(&path));
        let partial = path.with_extension("partial");
        let text = format!(
            "{}\n{key}\n{id}\n{}\n",
            store.loc.bucket,
            std::process::id()
        );
        if std::fs::write(&partial, text).is_ok() {
            let _ = std::fs::rename(&partial, &path);
        }
    }
}

/// Records that upload `id` of `key` is over (completed or aborted).
pub fn ended(store: &Store, key: &Key, id: &str) {
    if let Some(path) = record_path(&store.loc.bucket, key, id) {
        let _ = std::fs::remove_file(path);
    }
}

/// Whether process `pid` is running.
fn running(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Aborts the uploads recorded under `store`'s bucket and prefix; returns how many.
pub async fn abort_left(store: &Store) -> usize {
    let Some(entries) = dir().and_then(|d| std::fs::read_dir(d).ok()) else {
        return 0;
    };
    let prefix = store.key("");
    let mut aborted = 0;
    for entry in entries.flatten() {
        if entry.path().extension().is_some_and(|e| e == "partial") {
            // One being written now is young; an old one is a killed run's.
            let age = entry.metadata().and_then(|m| m.modified()).ok();
            let old = age
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|a| a.as_secs() > 60);
            if old {
                let _ = std::fs::remove_file(entry.path());
            }
            continue;
        }
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        let mut lines = text.lines();
        let (Some(bucket), Some(key), Some(id)) = (lines.next(), lines.next(), lines.next()) else {
            continue;
        };
        if bucket != store.loc.bucket || !key.starts_with(prefix.as_ref()) {
            continue;
        }
        // One of an upload running beside this one (another ferry on this machine) is
        // left to it.
        let pid = lines.next().and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|p| p != std::process::id() && running(p)) {
            continue;
        }
        let key = Key::from(key);
        let id = id.to_string();
        // Already gone (completed, or aborted by the server) counts as done.
        if id == crate::lease::PENDING_ID {
            // A killed upload's lease: nothing of it runs any more.
            let _ = object_store::ObjectStoreExt::delete(&*store.s3, &key).await;
            ended(store, &key, &id);
            continue;
        }
        let _ = store.s3.abort_multipart(&key, &id).await;
        ended(store, &key, &id);
        aborted += 1;
    }
    aborted
}
