//! Object bodies read in bounded memory: a small object (a manifest, a shard's record)
//! gathered only after its size is checked against a cap, from the GET's headers before
//! a byte of the body is read, and again as it arrives; a large one (a member `cat`
//! writes out) read as a stream of the chunks it arrives in.

use crate::store::Store;
use crate::{Result, S3Error};
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path as Key;
use object_store::GetResult;
use std::io::{self, Read};

/// The body of `got` (the GET of `key`, for `what`), refused without reading it when
/// the object is larger than `cap` bytes, and gathered no further than `cap` bytes
/// whatever the server sends.
pub async fn gather(
    store: &Store,
    key: &Key,
    what: &str,
    got: GetResult,
    cap: u64,
) -> Result<Vec<u8>> {
    let too_large = |size: u64| {
        S3Error::new(format!(
            "s3://{}/{key}: {what}: {size} bytes, more than the {cap} it may have: refused",
            store.loc.bucket
        ))
    };
    if got.meta.size > cap {
        return Err(too_large(got.meta.size));
    }
    let mut out = Vec::with_capacity(got.meta.size as usize);
    let mut body = got.into_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| store.error(key, what, &e))?;
        if out.len() as u64 + chunk.len() as u64 > cap {
            return Err(too_large(out.len() as u64 + chunk.len() as u64));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// A GET's body as a blocking [`Read`], one chunk held at a time (for use outside the
/// runtime: each chunk is waited for on `store`'s runtime).
pub struct BodyReader<'a> {
    store: &'a Store,
    body: BoxStream<'static, object_store::Result<bytes::Bytes>>,
    current: bytes::Bytes,
}

impl<'a> BodyReader<'a> {
    /// The body of `got`.
    pub fn new(store: &'a Store, got: GetResult) -> BodyReader<'a> {
        BodyReader {
            store,
            body: got.into_stream(),
            current: bytes::Bytes::new(),
        }
    }
}

impl Read for BodyReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            match self.store.rt.block_on(self.body.next()) {
                Some(Ok(chunk)) => self.current = chunk,
                Some(Err(e)) => return Err(io::Error::other(e.to_string())),
                None => return Ok(0),
            }
        }
        let n = out.len().min(self.current.len());
        out[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}
