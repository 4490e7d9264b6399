//! The objects under a prefix as the nodes they stand for, and what each one's
//! metadata says: one LIST, then a GET (download) or a HEAD (`ls`, `--delete`) per
//! object, read by the same code here whatever asked.
//!
//! Each listed key is checked first ([`super::keys`]): one that is no plain relative
//! path below the prefix is refused, naming it. A zero-length object whose name is
//! also a directory of other keys is a directory marker of that directory (dropped:
//! the directory exists anyway). A `dir/` marker of an empty directory (rclone's
//! `--s3-directory-markers`, `aws s3api put-object --key dir/`) is listed without its
//! trailing slash (object_store's keys cannot end in `/`), so it looks like an empty
//! file `dir`; asked for by that name it is not found: that is how it is told apart
//! (`Got::Marker`), at no request of its own.

use super::keys::{listed, Listed};
use super::metadata::{decode, is_kind, S_IFLNK, S_IFREG};
use crate::store::Store;
use crate::Result;
use ferry_core::entry::{Entry, EntryKind, Metadata, RelPath, Timestamp};
use ferry_core::error::{Error, Reporter};
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as Key;
use object_store::{Attributes, GetOptions, GetResult, ObjectMeta, ObjectStore};
use std::collections::HashSet;

/// The prefix as a key, None for the whole bucket.
pub(crate) fn prefix_key(store: &Store) -> Option<Key> {
    (!store.loc.prefix.is_empty()).then(|| Key::from(store.loc.prefix.as_str()))
}

/// Whether the prefix holds plain objects (one LIST, of the first page only): see
/// `plain_objects_in`.
pub fn plain_objects_here(store: &Store) -> Result<()> {
    let prefix = prefix_key(store);
    let first = store.rt.block_on(async {
        match store.s3.list(prefix.as_ref()).next().await {
            None => Ok(None),
            Some(Ok(meta)) => Ok(Some(meta)),
            Some(Err(e)) => Err(store.error(&prefix.clone().unwrap_or_default(), "list", &e)),
        }
    })?;
    plain_objects_in(store, first.as_ref())
}

/// Whether a prefix whose listing starts with `first` holds plain objects: an error
/// when it holds none, or when the first of them is a shard of a ferry upload that was
/// never finished (shards are written before the manifest), which is no tree of files.
pub(crate) fn plain_objects_in(store: &Store, first: Option<&ObjectMeta>) -> Result<()> {
    let Some(first) = first.map(|m| m.location.to_string()) else {
        return Err(super::nothing_here(store));
    };
    let rel = match store.loc.prefix.is_empty() {
        true => Some(first.as_str()),
        false => first
            .strip_prefix(store.loc.prefix.as_str())
            .and_then(|r| r.strip_prefix('/')),
    };
    let hex =
        |x: &str, digits: usize| x.len() == digits && x.bytes().all(|b| b.is_ascii_hexdigit());
    let shard = rel
        .and_then(|r| r.strip_prefix("shards/"))
        .and_then(|r| r.strip_suffix(".far").or_else(|| r.strip_suffix(".json")))
        .is_some_and(|fp| hex(fp, 32));
    // The lease of an upload under way (or killed) lists before its shards.
    let lease = rel
        .and_then(|r| r.strip_prefix("leases/"))
        .and_then(|r| r.strip_suffix(".json"))
        .is_some_and(|id| hex(id, 16));
    let shard = shard || lease;
    match shard {
        true => Err(crate::S3Error::new(format!(
            "{}: no ferry upload here (no {}): only the shards of an upload that has not \
             finished; run it again",
            store.loc,
            crate::manifest::NAME
        ))),
        false => Ok(()),
    }
}

/// Every object under the prefix, as listed.
pub(crate) async fn list_all(store: &Store) -> Result<Vec<ObjectMeta>> {
    let prefix = prefix_key(store);
    store
        .s3
        .list(prefix.as_ref())
        .try_collect()
        .await
        .map_err(|e| store.error(&prefix.clone().unwrap_or_default(), "list", &e))
}

/// One listed object and the node it stands for.
pub(crate) struct Wanted {
    pub(crate) node: Listed,
    pub(crate) meta: ObjectMeta,
}

impl Wanted {
    /// The node's path below the prefix.
    pub(crate) fn path(&self) -> &RelPath {
        match &self.node {
            Listed::File(p) | Listed::Symlink(p) => p,
        }
    }
}

/// The objects of `all` as nodes, in listing order: keys that are no plain path are
/// reported (naming them) and left out, and so are markers of non-empty directories.
pub(crate) fn nodes_of(
    store: &Store,
    all: Vec<ObjectMeta>,
    reporter: &dyn Reporter,
) -> Vec<Wanted> {
    let mut wanted = Vec::new();
    for meta in all {
        let key = meta.location.to_string();
        match listed(&store.loc.prefix, &key) {
            Ok(node) => wanted.push(Wanted { node, meta }),
            Err(why) => reporter.error(&Error::new(
                &RelPath::from_bytes(key.into_bytes()),
                "refuse object key",
                std::io::Error::other(why),
            )),
        }
    }
    let dirs = dirs_of(wanted.iter().map(Wanted::path));
    wanted.retain(|w| !(w.meta.size == 0 && dirs.contains(w.path())));
    wanted
}

/// The objects under the prefix as nodes (see [`nodes_of`]); `plain`: an error, as
/// [`plain_objects_in`] says, when the prefix holds no plain objects.
pub(crate) fn nodes(store: &Store, plain: bool, reporter: &dyn Reporter) -> Result<Vec<Wanted>> {
    let all = store.rt.block_on(list_all(store))?;
    if plain {
        plain_objects_in(store, all.first())?;
    }
    Ok(nodes_of(store, all, reporter))
}

/// Every directory above `paths`.
pub(crate) fn dirs_of<'a>(paths: impl Iterator<Item = &'a RelPath>) -> HashSet<RelPath> {
    let mut dirs = HashSet::new();
    for path in paths {
        let mut p = path.parent();
        while !p.is_root() && dirs.insert(p.clone()) {
            p = p.parent();
        }
    }
    dirs
}

/// What asking for a listed object brought.
pub(crate) enum Got {
    /// The object: its metadata, and its body unless only its head was asked for.
    Object(GetResult),
    /// A `dir/` marker of an empty directory (listed with size 0, not found by its
    /// name without the slash).
    Marker,
}

/// A GET of `w` (only its head when `head`).
pub(crate) async fn ask(store: &Store, w: &Wanted, head: bool) -> Result<Got> {
    let opts = GetOptions {
        head,
        ..GetOptions::default()
    };
    match store.s3.get_opts(&w.meta.location, opts).await {
        Ok(got) => Ok(Got::Object(got)),
        Err(object_store::Error::NotFound { .. }) if w.meta.size == 0 => Ok(Got::Marker),
        Err(e) => Err(store.error(&w.meta.location, "read", &e)),
    }
}

/// The entry object `w` stands for (of `kind`: a symlink's target is the caller's to
/// read), from what its GET or HEAD brought (`got`, `attributes`: the user metadata,
/// else the listing).
pub(crate) fn entry_of(
    w: &Wanted,
    kind: EntryKind,
    got: &ObjectMeta,
    attributes: &Attributes,
    umask: u32,
) -> Entry {
    let user = decode(attributes);
    let type_bits = match kind {
        EntryKind::Symlink { .. } => S_IFLNK,
        _ => S_IFREG,
    };
    let mtime = user.mtime.unwrap_or(written(got));
    let mode = user
        .mode
        .filter(|m| is_kind(*m, type_bits))
        .map_or(0o666 & !umask, |m| m & 0o7777);
    Entry {
        path: w.path().clone(),
        kind,
        meta: Metadata {
            mode,
            uid: user
                .uid
                .unwrap_or_else(|| rustix::process::geteuid().as_raw()),
            gid: user
                .gid
                .unwrap_or_else(|| rustix::process::getegid().as_raw()),
            atime: user.atime.unwrap_or(mtime),
            mtime,
            xattrs: Vec::new(),
        },
        links: None,
    }
}

/// When the object was written (its LastModified).
fn written(meta: &ObjectMeta) -> Timestamp {
    Timestamp {
        sec: meta.last_modified.timestamp(),
        nsec: meta.last_modified.timestamp_subsec_nanos().min(999_999_999),
    }
}

/// The entry of the `dir/` marker `w` (whose metadata cannot be asked for): the mode
/// a directory made now gets, the time the marker was written.
pub(crate) fn marker_entry(w: &Wanted, umask: u32) -> Entry {
    let mtime = written(&w.meta);
    Entry {
        path: w.path().clone(),
        kind: EntryKind::Dir,
        meta: Metadata {
            mode: 0o777 & !umask,
            uid: rustix::process::geteuid().as_raw(),
            gid: rustix::process::getegid().as_raw(),
            atime: mtime,
            mtime,
            xattrs: Vec::new(),
        },
        links: None,
    }
}
