//! Sending one file as one object: a single PUT below the smallest part, else a
//! multipart upload whose parts (sized by [`crate::parts`]) are read and sent by
//! several tasks at once, at most as many in flight, over the whole job, as the
//! semaphore allows: memory stays within parts-in-flight x part size. The upload is
//! recorded in [`crate::pending`] while it runs, and aborted if a part fails. The
//! object's attributes (user metadata) go with its PUT or its multipart upload's start.
//! [`Multipart`] is the multipart upload itself, shared with [`crate::stream_put`],
//! whose parts come from a stream rather than a file.

use crate::parts::{part_size, ranges, MIN_PART};
use crate::pending;
use crate::store::Store;
use crate::S3Error;
use object_store::multipart::MultipartStore;
use object_store::path::Path as Key;
use object_store::{
    Attributes, ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Reads `range` of `file` on a blocking thread.
async fn read_range(file: &Arc<File>, range: std::ops::Range<u64>) -> std::io::Result<Vec<u8>> {
    let file = file.clone();
    tokio::task::spawn_blocking(move || {
        let mut buf = vec![0; (range.end - range.start) as usize];
        file.read_exact_at(&mut buf, range.start)?;
        Ok(buf)
    })
    .await
    .map_err(std::io::Error::other)?
}

/// Why a file did not go up: reading it (the file changed or went away) or the store.
#[derive(Debug)]
pub enum PutFailure {
    /// Reading the file failed.
    Read(S3Error),
    /// A request failed.
    Store(S3Error),
}

impl From<PutFailure> for S3Error {
    fn from(f: PutFailure) -> S3Error {
        match f {
            PutFailure::Read(e) | PutFailure::Store(e) => e,
        }
    }
}

/// Sends the first `len` bytes of `file` as `key`, with `attributes`.
pub async fn put_file(
    store: &Arc<Store>,
    key: &Key,
    file: Arc<File>,
    len: u64,
    parts: &Arc<Semaphore>,
    attributes: Attributes,
) -> std::result::Result<PutResult, PutFailure> {
    if len < MIN_PART {
        let bytes = read_range(&file, 0..len)
            .await
            .map_err(|e| PutFailure::Read(local_err(key)(e)))?;
        let opts = PutOptions {
            attributes,
            ..PutOptions::default()
        };
        return store
            .s3
            .put_opts(key, PutPayload::from(bytes), opts)
            .await
            .map_err(|e| PutFailure::Store(store.error(key, "put", &e)));
    }
    let part = part_size(len).ok_or_else(|| {
        PutFailure::Store(S3Error::new(format!(
            "{key}: {len} bytes is more than one object holds"
        )))
    })?;
    let mut upload = Multipart::new(store, key, attributes);
    let sent = async {
        for range in ranges(len, part) {
            let (file, key) = (file.clone(), key.clone());
            let read = async move {
                let bytes = read_range(&file, range).await;
                bytes.map_err(|e| PutFailure::Read(local_err(&key)(e)))
            };
            upload.part(read, parts).await?;
        }
        upload.complete().await
    };
    let result = sent.await;
    if result.is_err() {
        upload.abort().await;
    }
    result
}

/// What an upload whose multipart upload the store dropped is told (Garage drops one
/// when a newer upload of the same object completes first): a rerun finds the object
/// the other wrote.
pub const DROPPED: &str = "the store dropped this multipart upload: another upload wrote \
                           the object meanwhile";

/// The failure of `what` on `key`: [`DROPPED`] when the store no longer knows the
/// upload (`NoSuchUpload`; a missing bucket is told as itself).
fn failed(store: &Store, key: &Key, what: &str, e: &object_store::Error) -> PutFailure {
    PutFailure::Store(match e {
        object_store::Error::NotFound { source, .. }
            if source.to_string().contains("NoSuchUpload") =>
        {
            S3Error::new(format!(
                "s3://{}/{key}: {what}: {DROPPED}",
                store.loc.bucket
            ))
        }
        e => store.error(key, what, e),
    })
}

/// A part sent: its number from 0, and what the store said of it.
type SentPart = (usize, object_store::multipart::PartId);

/// A multipart upload under way, begun with its first part: each part read (or taken)
/// and sent by a task of its own once the semaphore lets one more go, the upload
/// recorded in [`crate::pending`] from its start until it is completed or aborted.
pub struct Multipart {
    store: Arc<Store>,
    key: Key,
    attributes: Attributes,
    id: Option<String>,
    tasks: tokio::task::JoinSet<std::result::Result<SentPart, PutFailure>>,
    /// Parts sent so far.
    done: Vec<SentPart>,
    next: usize,
}

impl Multipart {
    /// An upload of `key`, with `attributes`, not begun yet.
    pub fn new(store: &Arc<Store>, key: &Key, attributes: Attributes) -> Multipart {
        Multipart {
            store: store.clone(),
            key: key.clone(),
            attributes,
            id: None,
            tasks: tokio::task::JoinSet::new(),
            done: Vec::new(),
            next: 0,
        }
    }

    /// Whether a part has been sent (the upload begun).
    pub fn begun(&self) -> bool {
        self.id.is_some()
    }

    /// Sends the bytes `bytes` gives as the next part, once `parts` lets one more go;
    /// a part that failed meanwhile is this call's failure.
    pub async fn part<F>(
        &mut self,
        bytes: F,
        parts: &Arc<Semaphore>,
    ) -> std::result::Result<(), PutFailure>
    where
        F: std::future::Future<Output = std::result::Result<Vec<u8>, PutFailure>> + Send + 'static,
    {
        let id = match &self.id {
            Some(id) => id.clone(),
            None => {
                let opts = PutMultipartOptions {
                    attributes: std::mem::take(&mut self.attributes),
                    ..PutMultipartOptions::default()
                };
                let started = self.store.s3.create_multipart_opts(&self.key, opts).await;
                let id = started.map_err(|e| {
                    PutFailure::Store(self.store.error(&self.key, "start a multipart upload", &e))
                })?;
                pending::begun(&self.store, &self.key, &id);
                self.id.insert(id).clone()
            }
        };
        let permit = parts
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| PutFailure::Store(S3Error::new(e.to_string())))?;
        while let Some(r) = self.tasks.try_join_next() {
            self.done.push(joined(r)?);
        }
        let (store, key, i) = (self.store.clone(), self.key.clone(), self.next);
        self.next += 1;
        self.tasks.spawn(async move {
            let _permit = permit;
            let bytes = bytes.await?;
            let part = store
                .s3
                .put_part(&key, &id, i, PutPayload::from(bytes))
                .await
                .map_err(|e| failed(&store, &key, &format!("send part {}", i + 1), &e))?;
            Ok((i, part))
        });
        Ok(())
    }

    /// Waits for the parts in flight and completes the upload.
    pub async fn complete(&mut self) -> std::result::Result<PutResult, PutFailure> {
        let mut done = std::mem::take(&mut self.done);
        while let Some(r) = self.tasks.join_next().await {
            done.push(joined(r)?);
        }
        done.sort_by_key(|p| p.0);
        let id = self.id.clone().unwrap_or_default();
        let ids = done.into_iter().map(|p| p.1).collect();
        let put = self.store.s3.complete_multipart(&self.key, &id, ids).await;
        let put =
            put.map_err(|e| failed(&self.store, &self.key, "complete the multipart upload", &e))?;
        pending::ended(&self.store, &self.key, &id);
        Ok(put)
    }

    /// Stops the parts in flight and aborts the upload; if the store cannot be told,
    /// its record stays for the next run to abort.
    pub async fn abort(&mut self) {
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        if let Some(id) = self.id.take() {
            if self.store.s3.abort_multipart(&self.key, &id).await.is_ok() {
                pending::ended(&self.store, &self.key, &id);
            }
        }
    }
}

/// A part task's result, or its failure to run as one.
fn joined(
    r: std::result::Result<std::result::Result<SentPart, PutFailure>, tokio::task::JoinError>,
) -> std::result::Result<SentPart, PutFailure> {
    r.map_err(|e| PutFailure::Store(S3Error::new(e.to_string())))?
}

fn local_err(key: &Key) -> impl Fn(std::io::Error) -> S3Error + '_ {
    move |e| S3Error::new(format!("read the data of {key}: {e}"))
}
