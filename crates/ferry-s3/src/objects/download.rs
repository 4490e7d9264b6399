//! `ferry copy s3://BUCKET/PREFIX DST` where PREFIX holds plain objects (no ferry
//! manifest): one LIST, then every object fetched by one of `transfers` threads and
//! written by the local-tree sink (the one `copy` and `unpack` write with: nothing
//! through a symlink, nothing outside DST, metadata set, the up-to-date check).
//!
//! The objects are listed, their keys checked and their metadata read by
//! [`super::listing`] (a refused key is named, and nothing is written for it): the
//! user metadata ([`super::metadata`]) gives the file's mtime (else its LastModified,
//! as rclone takes it), atime, mode and owner. A `dir/` marker becomes an empty
//! directory.
//! `PATH.rclonelink` objects become symlinks, made after every file, so that no file is
//! ever placed through one.
//!
//! A file DST already has with the object's size and mtime is left alone: its GET
//! brings the metadata, and the body is then not read.

use super::keys::Listed;
use super::listing::{ask, entry_of, nodes, Got, Wanted};
use crate::store::Store;
use crate::{Result, S3Error};
use bytes::Bytes;
use ferry_core::data::Mover;
use ferry_core::entry::{Entry, EntryKind, Metadata, RelPath};
use ferry_core::error::{Error, Reporter};
use ferry_core::local::{LocalTreeSink, Reach, Update};
use ferry_core::sink::{FileData, TreeSink};
use ferry_core::Stats;
use futures::stream::BoxStream;
use futures::StreamExt;
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

/// Fetches and places one object.
fn fetch_one(
    store: &Store,
    sink: &LocalTreeSink<'_>,
    w: &Wanted,
    umask: u32,
) -> std::result::Result<(), Error> {
    let path = w.path();
    let failed = |e: S3Error| Error::dst(path, "download", std::io::Error::other(e.0));
    let got = match store.rt.block_on(ask(store, w, false)).map_err(failed)? {
        Got::Object(got) => got,
        Got::Marker => return sink.dir_at(path, Reach::MakeKeeping).map(drop),
    };
    let (meta, attributes) = (got.meta.clone(), got.attributes.clone());
    let size = meta.size;
    let mut body = Body {
        rt: &store.rt,
        stream: got.into_stream(),
        chunk: Bytes::new(),
    };
    let parent = sink.dir_at(&path.parent(), Reach::MakeKeeping)?;
    match &w.node {
        Listed::File(_) => {
            let entry = entry_of(w, EntryKind::File { size }, &meta, &attributes, umask);
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
            let kind = EntryKind::Symlink { target };
            let entry = entry_of(w, kind, &meta, &attributes, umask);
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
    let wanted = nodes(store, false, reporter)?;
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
