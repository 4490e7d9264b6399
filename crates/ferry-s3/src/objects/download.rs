//! `ferry copy s3://BUCKET/PREFIX DST` where PREFIX holds plain objects (no ferry
//! manifest): one LIST, then every object fetched by one of `transfers` threads and
//! written by the local-tree sink (the one `copy` and `unpack` write with: nothing
//! through a symlink, nothing outside DST, metadata set, the up-to-date check).
//!
//! Each object's key is checked first ([`super::keys`]): one that is no plain relative
//! path below the prefix is refused, naming it, and nothing is written for it. The
//! object's user metadata ([`super::metadata`]) gives the file's mtime (else its
//! LastModified, as rclone takes it), atime, mode and owner. A zero-length object whose
//! name is also a directory of other keys is a directory marker, not a file.
//! `PATH.rclonelink` objects become symlinks, made after every file, so that no file is
//! ever placed through one.
//!
//! A file DST already has with the object's size and mtime is left alone: its GET
//! brings the metadata, and the body is then not read.

use super::keys::{listed, Listed};
use super::metadata::{decode, is_kind, UserMeta, S_IFLNK, S_IFREG};
use crate::store::Store;
use crate::{Result, S3Error};
use bytes::Bytes;
use ferry_core::data::Mover;
use ferry_core::entry::{Entry, EntryKind, Metadata, RelPath, Timestamp};
use ferry_core::error::{Error, Reporter};
use ferry_core::local::{LocalTreeSink, Reach, Update};
use ferry_core::sink::{FileData, TreeSink};
use ferry_core::Stats;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as Key;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};
use std::collections::HashSet;
use std::io::Read;
use std::path::Path;
use std::sync::Mutex;

/// How to download a prefix of objects.
#[derive(Clone, Debug)]
pub struct FetchOptions {
    /// Objects fetched at once (one thread each).
    pub transfers: usize,
    /// How DST is brought up to date.
    pub update: Update,
    /// How file data is written.
    pub mover: (ferry_core::data::Reflink, ferry_core::data::Sparse),
}

/// Whether the prefix holds any object at all.
pub fn any_objects(store: &Store) -> Result<bool> {
    let prefix = prefix_key(store);
    store.rt.block_on(async {
        match store.s3.list(prefix.as_ref()).next().await {
            None => Ok(false),
            Some(Ok(_)) => Ok(true),
            Some(Err(e)) => Err(store.error(&prefix.clone().unwrap_or_default(), "list", &e)),
        }
    })
}

fn prefix_key(store: &Store) -> Option<Key> {
    (!store.loc.prefix.is_empty()).then(|| Key::from(store.loc.prefix.as_str()))
}

/// One object to fetch as a node.
struct Wanted {
    node: Listed,
    meta: ObjectMeta,
}

/// A GET's body as a reader, its chunks awaited on the store's runtime.
struct Body<'a> {
    rt: &'a tokio::runtime::Runtime,
    stream: BoxStream<'static, object_store::Result<Bytes>>,
    chunk: Bytes,
}

impl Read for Body<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.chunk.is_empty() {
            match self.rt.block_on(self.stream.next()) {
                None => return Ok(0),
                Some(Ok(b)) => self.chunk = b,
                Some(Err(e)) => return Err(std::io::Error::other(e)),
            }
        }
        let n = buf.len().min(self.chunk.len());
        buf[..n].copy_from_slice(&self.chunk[..n]);
        self.chunk = self.chunk.slice(n..);
        Ok(n)
    }
}

/// The objects under the prefix as nodes; refused keys reported.
fn nodes(store: &Store, reporter: &dyn Reporter) -> Result<Vec<Wanted>> {
    let prefix = prefix_key(store);
    let all: Vec<ObjectMeta> = store
        .rt
        .block_on(store.s3.list(prefix.as_ref()).try_collect())
        .map_err(|e| store.error(&prefix.clone().unwrap_or_default(), "list", &e))?;
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
    // Directories of other keys: a zero-length object of such a name is a marker.
    let mut dirs = HashSet::new();
    for w in &wanted {
        let mut p = path_of(&w.node).parent();
        while !p.is_root() && dirs.insert(p.clone()) {
            p = p.parent();
        }
    }
    wanted.retain(|w| !(w.meta.size == 0 && dirs.contains(path_of(&w.node))));
    Ok(wanted)
}

fn path_of(node: &Listed) -> &RelPath {
    match node {
        Listed::File(p) | Listed::Symlink(p) => p,
    }
}

/// The entry an object stands for, from its user metadata (`user`) and, where that
/// says nothing, its listing.
fn entry_of(
    path: &RelPath,
    kind: EntryKind,
    listed: &ObjectMeta,
    user: &UserMeta,
    umask: u32,
) -> Entry {
    let type_bits = match kind {
        EntryKind::Symlink { .. } => S_IFLNK,
        _ => S_IFREG,
    };
    let written = Timestamp {
        sec: listed.last_modified.timestamp(),
        nsec: listed
            .last_modified
            .timestamp_subsec_nanos()
            .min(999_999_999),
    };
    let mtime = user.mtime.unwrap_or(written);
    let mode = user
        .mode
        .filter(|m| is_kind(*m, type_bits))
        .map_or(0o666 & !umask, |m| m & 0o7777);
    Entry {
        path: path.clone(),
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

/// Fetches and places one object.
fn fetch_one(
    store: &Store,
    sink: &LocalTreeSink<'_>,
    w: &Wanted,
    umask: u32,
) -> std::result::Result<(), Error> {
    let path = path_of(&w.node);
    let failed = |e: S3Error| Error::dst(path, "download", std::io::Error::other(e.0));
    let got = store
        .rt
        .block_on(store.s3.get(&w.meta.location))
        .map_err(|e| failed(store.error(&w.meta.location, "read", &e)))?;
    let user = decode(&got.attributes);
    let size = got.meta.size;
    let mut body = Body {
        rt: &store.rt,
        stream: got.into_stream(),
        chunk: Bytes::new(),
    };
    let parent = sink.dir_at(&path.parent(), Reach::MakeKeeping)?;
    match &w.node {
        Listed::File(_) => {
            let entry = entry_of(path, EntryKind::File { size }, &w.meta, &user, umask);
            let runs = [(0, size)];
            let runs = &runs[..usize::from(size > 0)];
            let data = FileData::Stream {
                reader: &mut body,
                runs,
            };
            sink.leaf(&parent, &entry, Some(data))
        }
        Listed::Symlink(_) => {
            let mut target = Vec::new();
            (&mut body)
                .take(4096)
                .read_to_end(&mut target)
                .map_err(|e| Error::dst(path, "download", e))?;
            let entry = entry_of(path, EntryKind::Symlink { target }, &w.meta, &user, umask);
            sink.leaf(&parent, &entry, None)
        }
    }
}

/// Downloads the objects under `store`'s prefix into `dst`.
pub fn download_objects(
    store: &Store,
    dst: &Path,
    opts: &FetchOptions,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<()> {
    let wanted = nodes(store, reporter)?;
    let mover = Mover::new(opts.mover.0, opts.mover.1);
    let sink = LocalTreeSink::new(dst, &mover, opts.update, stats, reporter);
    let root = Entry {
        path: RelPath::root(),
        kind: EntryKind::Dir,
        meta: Metadata::default(),
        links: None,
    };
    sink.root(&root)
        .map_err(|e| S3Error::new(format!("{}: {}: {}", dst.display(), e.op, e.os)))?;
    let umask = ferry_core::meta::MetaWriter::new().umask();
    let (files, links): (Vec<&Wanted>, Vec<&Wanted>) = wanted
        .iter()
        .partition(|w| matches!(w.node, Listed::File(_)));
    // Files by `transfers` threads, then the symlinks.
    for (batch, threads) in [(files, opts.transfers.max(1)), (links, 1)] {
        let next = Mutex::new(batch.into_iter());
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| loop {
                    let Some(w) = next.lock().ok().and_then(|mut n| n.next()) else {
                        return;
                    };
                    if let Err(e) = fetch_one(store, &sink, w, umask) {
                        reporter.error(&e);
                    }
                });
            }
        });
    }
    sink.settle_unnamed_root()
        .map_err(|e| S3Error::new(format!("{}: {}: {}", dst.display(), e.op, e.os)))
}
