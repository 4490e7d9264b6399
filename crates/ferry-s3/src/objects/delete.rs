//! `--delete` with `--layout=objects`: once the upload is done, removes the objects
//! under the prefix that SRC no longer makes, as `ferry copy --delete` removes from a
//! local DST what SRC does not have, so that a later download does not bring back
//! files deleted from SRC.
//!
//! The caller runs this only when SRC was read without error (a directory that could
//! not be read would otherwise empty the prefix below it). An object whose path the
//! filter rules exclude (the path, or a directory above it) is kept unless
//! `delete_excluded`; an object whose key is no path ferry would make is kept, with a
//! warning naming it. A zero-length object standing for a directory SRC has (a
//! directory marker) is kept. One that is not found by its listed name is a `dir/`
//! marker (see [`super::listing`]): object_store cannot name keys ending in `/`, so it
//! is left, with a warning, rather than counted as deleted when it is not. The rest go
//! in bulk deletes (up to 1,000 keys a request); in a dry run, nowhere (they are
//! counted, and told to `-i`/`-v`, as if they had gone).

use super::keys::{listed, Listed};
use super::listing::{ask, Got, Wanted};
use crate::store::Store;
use crate::Result;
use ferry_core::changes::{Changes, Kind, What};
use ferry_core::entry::RelPath;
use ferry_core::error::{Error, Reporter};
use ferry_core::filter::Filter;
use ferry_core::Stats;
use futures::StreamExt;
use object_store::{ObjectMeta, ObjectStore};
use std::collections::HashSet;
use std::sync::atomic::Ordering::Relaxed;

/// What SRC makes, against which the listing is compared.
pub(crate) struct Made<'a> {
    /// The keys of every object SRC makes (sent or already there).
    pub(crate) keys: &'a HashSet<String>,
    /// The paths of SRC's directories.
    pub(crate) dirs: &'a HashSet<Vec<u8>>,
}

/// How to delete.
#[derive(Clone, Copy)]
pub(crate) struct Deleting<'a> {
    /// The upload's filter rules: what they exclude is kept (unless `excluded`).
    pub(crate) filter: Option<&'a Filter>,
    /// Delete what the rules exclude too (`--delete-excluded`).
    pub(crate) excluded: bool,
    /// Delete nothing: only count (and tell `changes`) what would go (`--dry-run`).
    pub(crate) dry_run: bool,
    /// Told about every object deleted.
    pub(crate) changes: Option<&'a dyn Changes>,
}

/// Whether the rules exclude `path` or a directory above it.
fn excluded(filter: &Filter, path: &RelPath, maybe_dir: bool) -> bool {
    let mut dir = path.parent();
    while !dir.is_root() {
        if filter.excludes(dir.as_bytes(), true) {
            return true;
        }
        dir = dir.parent();
    }
    filter.excludes(path.as_bytes(), false) || (maybe_dir && filter.excludes(path.as_bytes(), true))
}

/// Deletes the objects of `listed` (the prefix's listing) that `made` does not
/// hold; returns how many went.
pub(crate) fn delete_extraneous(
    store: &Store,
    all: Vec<ObjectMeta>,
    made: &Made<'_>,
    how: Deleting<'_>,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<usize> {
    let mut doomed = Vec::new();
    for meta in all {
        let key = meta.location.to_string();
        if made.keys.contains(&key) {
            continue;
        }
        let node = match listed(&store.loc.prefix, &key) {
            Ok(node) => node,
            Err(why) => {
                reporter.warn(&format!(
                    "s3://{}/{key}: left alone by --delete: not a path ferry makes ({why})",
                    store.loc.bucket
                ));
                continue;
            }
        };
        let w = Wanted { node, meta };
        let empty = w.meta.size == 0;
        if empty && made.dirs.contains(w.path().as_bytes()) {
            continue;
        }
        let kept = how
            .filter
            .is_some_and(|f| !how.excluded && excluded(f, w.path(), empty));
        if !kept {
            doomed.push(w);
        }
    }
    let markers: Vec<bool> = store.rt.block_on(
        futures::stream::iter(&doomed)
            .map(|w| async move {
                w.meta.size == 0 && matches!(ask(store, w, true).await, Ok(Got::Marker))
            })
            .buffered(16)
            .collect(),
    );
    let mut keys = Vec::new();
    for (w, marker) in doomed.into_iter().zip(markers) {
        match marker {
            true => reporter.warn(&format!(
                "s3://{}/{}/: a directory marker: left alone by --delete (object_store, \
                 ferry's S3 client, cannot name keys ending in `/`)",
                store.loc.bucket, w.meta.location
            )),
            false => keys.push(w),
        }
    }
    let gone = |w: &Wanted| {
        stats.deleted.fetch_add(1, Relaxed);
        if let Some(c) = how.changes {
            let kind = match w.node {
                Listed::File(_) => Kind::File,
                Listed::Symlink(_) => Kind::Symlink,
            };
            c.change(w.path(), kind, What::Deleted);
        }
    };
    if how.dry_run {
        keys.iter().for_each(gone);
        return Ok(keys.len());
    }
    let locations = futures::stream::iter(
        keys.iter()
            .map(|w| Ok(w.meta.location.clone()))
            .collect::<Vec<_>>(),
    )
    .boxed();
    let results: Vec<_> = store
        .rt
        .block_on(store.s3.delete_stream(locations).collect());
    // One result a key, in order; fewer when a whole request failed (the job stops).
    if results.len() != keys.len() {
        if let Some(Err(e)) = results.iter().find(|r| r.is_err()) {
            return Err(store.error(&keys[0].meta.location, "delete", e));
        }
    }
    let mut deleted = 0;
    for (w, result) in keys.iter().zip(results) {
        match result {
            Ok(_) | Err(object_store::Error::NotFound { .. }) => {
                deleted += 1;
                gone(w);
            }
            Err(e) => reporter.error(&Error::dst(
                w.path(),
                "delete",
                std::io::Error::other(store.error(&w.meta.location, "delete", &e).0),
            )),
        }
    }
    Ok(deleted)
}
