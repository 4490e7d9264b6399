//! Sending an object while it is written: [`PartWriter`] takes the bytes in order (a
//! shard as `pack` writes it into a stream) and hands each full part to [`put_stream`],
//! which sends it at once, with the other parts in flight over the whole job. Nothing
//! goes to local disk, and writing and sending overlap: a shard packed whole into a
//! temporary file first left the store idle while it was packed.
//!
//! A part is sent once the next one has begun, so the last part, which may be short,
//! is known as the last. An object smaller than one part goes up in one PUT. The
//! multipart upload is completed only when the writer's side says it ended well
//! (`pack` may fail after its last byte is written, checking what it read): until
//! then nothing is readable, and an upload that fails is aborted, or recorded in
//! [`crate::pending`] for the next run to abort (the multipart upload itself is
//! [`crate::put::Multipart`], as for a file sent whole).
//!
//! The writer also keeps what follows the stream's first flush: `pack` flushes once
//! the tar data has ended (as `pack --zstd`'s frame writer relies on), so that is the
//! archive's index and footer, which the manifest's members are read from.

use crate::parts::{MAX_PARTS, MIN_PART};
use crate::put::Multipart;
use crate::store::Store;
use crate::{Result, S3Error};
use futures::future::ready;
use object_store::path::Path as Key;
use object_store::{Attributes, ObjectStoreExt, PutPayload, PutResult};
use std::io::{self, Write};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::{mpsc, oneshot, Semaphore};

/// What follows the stream's first flush, shared with whoever made the writer.
pub type Tail = Arc<Mutex<Option<Vec<u8>>>>;

/// Cuts the bytes written into parts of a fixed size and sends each full one down a
/// channel (blocking while the sender's side is busy: memory stays bounded); the rest
/// goes when it is dropped.
pub struct PartWriter {
    part: usize,
    buf: Vec<u8>,
    sent: u64,
    tx: mpsc::Sender<Vec<u8>>,
    tail: Tail,
}

impl PartWriter {
    /// A writer of parts of `part` bytes into `tx`, and the handle to what it keeps
    /// after its first flush.
    pub fn new(part: u64, tx: mpsc::Sender<Vec<u8>>) -> (PartWriter, Tail) {
        let tail = Tail::default();
        let part = usize::try_from(part).unwrap_or(usize::MAX);
        let w = PartWriter {
            part,
            buf: Vec::new(),
            sent: 0,
            tx,
            tail: tail.clone(),
        };
        (w, tail)
    }

    fn send(&mut self) -> io::Result<()> {
        if self.sent + 1 >= MAX_PARTS {
            return Err(io::Error::other(format!(
                "more than {MAX_PARTS} parts of {} bytes: the files grew past their planned size while packed",
                self.part
            )));
        }
        let full = std::mem::take(&mut self.buf);
        self.tx
            .blocking_send(full)
            .map_err(|_| io::Error::other("the upload stopped"))?;
        self.sent += 1;
        Ok(())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Write for PartWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if let Some(tail) = lock(&self.tail).as_mut() {
            tail.extend_from_slice(data);
        }
        let mut rest = data;
        while !rest.is_empty() {
            if self.buf.capacity() == 0 {
                self.buf.reserve_exact(self.part);
            }
            let n = (self.part - self.buf.len()).min(rest.len());
            self.buf.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            if self.buf.len() == self.part {
                self.send()?;
            }
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        lock(&self.tail).get_or_insert_with(Vec::new);
        Ok(())
    }
}

impl Drop for PartWriter {
    fn drop(&mut self) {
        if !self.buf.is_empty() || self.sent == 0 {
            let rest = std::mem::take(&mut self.buf);
            let _ = self.tx.blocking_send(rest);
        }
    }
}

/// Sends the parts `pieces` delivers as `key`, `parts` limiting the requests in flight;
/// once they end, waits for `ended` (the writer's own verdict, with what it made of
/// the object) and completes the upload only if it is Ok.
pub async fn put_stream<T>(
    store: &Arc<Store>,
    key: &Key,
    mut pieces: mpsc::Receiver<Vec<u8>>,
    ended: oneshot::Receiver<Result<T>>,
    parts: &Arc<Semaphore>,
) -> Result<(PutResult, T)> {
    let mut upload = Multipart::new(store, key, Attributes::default());
    let mut held = None;
    let mut failed = None;
    while let Some(piece) = pieces.recv().await {
        if let Some(full) = held.replace(piece) {
            if let Err(e) = upload.part(ready(Ok(full)), parts).await {
                failed = Some(S3Error::from(e));
                break;
            }
        }
    }
    // Whatever happened here, the writer is told to stop by the channel closing.
    drop(pieces);
    let verdict = match failed {
        Some(e) => Err(e),
        None => ended
            .await
            .unwrap_or_else(|_| Err(S3Error::new(format!("{key}: packing stopped")))),
    };
    let done = match verdict {
        Ok(made) => finish(&mut upload, store, key, held.unwrap_or_default(), parts)
            .await
            .map(|r| (r, made)),
        Err(e) => Err(e),
    };
    if done.is_err() {
        upload.abort().await;
    }
    done
}

/// Sends `last` and completes the upload, or, if no part went, PUTs `last` whole.
async fn finish(
    upload: &mut Multipart,
    store: &Store,
    key: &Key,
    last: Vec<u8>,
    parts: &Arc<Semaphore>,
) -> Result<PutResult> {
    if !upload.begun() && (last.len() as u64) < MIN_PART {
        let put = store.s3.put(key, PutPayload::from(last)).await;
        return put.map_err(|e| store.error(key, "put", &e));
    }
    upload.part(ready(Ok(last)), parts).await?;
    Ok(upload.complete().await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `chunks` (flushing before the one at `flush_at`) through a writer of
    /// `part`-byte parts; the pieces it sent, and what it kept after the flush.
    fn cut(part: u64, chunks: &[&[u8]], flush_at: usize) -> (Vec<Vec<u8>>, Option<Vec<u8>>) {
        let (tx, mut rx) = mpsc::channel(64);
        let (mut w, tail) = PartWriter::new(part, tx);
        for (i, c) in chunks.iter().enumerate() {
            if i == flush_at {
                w.flush().unwrap();
            }
            w.write_all(c).unwrap();
        }
        drop(w);
        let mut pieces = Vec::new();
        while let Ok(p) = rx.try_recv() {
            pieces.push(p);
        }
        let kept = tail.lock().unwrap().take();
        (pieces, kept)
    }

    #[test]
    fn parts_are_whole_but_the_last_and_the_tail_is_what_follows_the_first_flush() {
        let (pieces, kept) = cut(4, &[b"abc", b"defgh", b"ij", b"kl"], 2);
        assert_eq!(
            pieces,
            [b"abcd".to_vec(), b"efgh".to_vec(), b"ijkl".to_vec()]
        );
        assert_eq!(kept.as_deref(), Some(&b"ijkl"[..]));
        // A length that is a whole number of parts sends no empty last piece.
        let (pieces, _) = cut(4, &[b"abcdefgh"], 9);
        assert_eq!(pieces, [b"abcd".to_vec(), b"efgh".to_vec()]);
        // Nothing written at all still sends one (empty) piece: an object is made.
        let (pieces, kept) = cut(4, &[], 9);
        assert_eq!((pieces, kept), (vec![Vec::new()], None));
    }

    #[test]
    fn a_stopped_upload_fails_the_writer() {
        let (tx, rx) = mpsc::channel(1);
        let (mut w, _) = PartWriter::new(2, tx);
        drop(rx);
        assert!(w.write_all(b"abcd").is_err());
    }
}
