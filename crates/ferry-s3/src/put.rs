//! Sending one file as one object: a single PUT below the smallest part, else a
//! multipart upload whose parts (sized by [`crate::parts`]) are read and sent by
//! several tasks at once, at most as many in flight, over the whole job, as the
//! semaphore allows: memory stays within parts-in-flight x part size. The upload is
//! recorded in [`crate::pending`] while it runs, and aborted if a part fails. The
//! object's attributes (user metadata) go with its PUT or its multipart upload's start.

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
    let opts = PutMultipartOptions {
        attributes,
        ..PutMultipartOptions::default()
    };
    let id = store
        .s3
        .create_multipart_opts(key, opts)
        .await
        .map_err(|e| PutFailure::Store(store.error(key, "start a multipart upload", &e)))?;
    pending::begun(store, key, &id);
    let mut tasks = tokio::task::JoinSet::new();
    for (i, range) in ranges(len, part).enumerate() {
        let permit = parts
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| PutFailure::Store(S3Error::new(e.to_string())))?;
        let (store, key, id, file) = (store.clone(), key.clone(), id.clone(), file.clone());
        tasks.spawn(async move {
            let _permit = permit;
            let bytes = read_range(&file, range)
                .await
                .map_err(|e| PutFailure::Read(local_err(&key)(e)))?;
            let part = store
                .s3
                .put_part(&key, &id, i, PutPayload::from(bytes))
                .await
                .map_err(|e| {
                    PutFailure::Store(store.error(&key, &format!("send part {}", i + 1), &e))
                })?;
            Ok::<_, PutFailure>((i, part))
        });
    }
    let mut done = Vec::new();
    let mut failed = None;
    while let Some(r) = tasks.join_next().await {
        match r
            .map_err(|e| PutFailure::Store(S3Error::new(e.to_string())))
            .and_then(|r| r)
        {
            Ok(p) => done.push(p),
            Err(e) => {
                failed.get_or_insert(e);
                tasks.abort_all();
            }
        }
    }
    let result = match failed {
        None => {
            done.sort_by_key(|p| p.0);
            let ids = done.into_iter().map(|p| p.1).collect();
            store
                .s3
                .complete_multipart(key, &id, ids)
                .await
                .map_err(|e| {
                    PutFailure::Store(store.error(key, "complete the multipart upload", &e))
                })
        }
        Some(e) => Err(e),
    };
    // The record stays while the upload may still hold parts: the next run aborts it.
    let over = match result {
        Ok(_) => true,
        Err(_) => store.s3.abort_multipart(key, &id).await.is_ok(),
    };
    if over {
        pending::ended(store, key, &id);
    }
    result
}

fn local_err(key: &Key) -> impl Fn(std::io::Error) -> S3Error + '_ {
    move |e| S3Error::new(format!("read the data of {key}: {e}"))
}
