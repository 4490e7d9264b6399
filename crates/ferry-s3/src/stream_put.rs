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
//! [`crate::pending`] for the next run to abort.
//!
//! The writer also keeps what follows the stream's first flush: `pack` flushes once
//! the tar data has ended (as `pack --zstd`'s frame writer relies on), so that is the
//! archive's index and footer, which the manifest's members are read from.

use crate::parts::{MAX_PARTS, MIN_PART};
use crate::pending;
use crate::store::Store;
use crate::{Result, S3Error};
use object_store::multipart::MultipartStore;
use object_store::path::Path as Key;
use object_store::{ObjectStoreExt, PutPayload, PutResult};
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
    let mut sending = Sending {
        store: store.clone(),
        key: key.clone(),
        id: None,
        tasks: tokio::task::JoinSet::new(),
        done: Vec::new(),
        next: 0,
    };
    let mut held = None;
    let mut failed = None;
    while let Some(piece) = pieces.recv().await {
        if let Some(full) = held.replace(piece) {
            if let Err(e) = sending.part(full, parts).await {
                failed = Some(e);
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
        Ok(made) => sending
            .finish(held.unwrap_or_default(), parts)
            .await
            .map(|r| (r, made)),
        Err(e) => Err(e),
    };
    if done.is_err() {
        sending.abort().await;
    }
    done
}

/// A multipart upload under way (begun with its first part).
struct Sending {
    store: Arc<Store>,
    key: Key,
    id: Option<String>,
    tasks: tokio::task::JoinSet<Result<SentPart>>,
    /// Parts sent, with their numbers from 0.
    done: Vec<SentPart>,
    next: usize,
}

type SentPart = (usize, object_store::multipart::PartId);

impl Sending {
    /// Sends `bytes` as the next part, once a request may go.
    async fn part(&mut self, bytes: Vec<u8>, parts: &Arc<Semaphore>) -> Result<()> {
        let id = match &self.id {
            Some(id) => id.clone(),
            None => {
                let id = self
                    .store
                    .s3
                    .create_multipart(&self.key)
                    .await
                    .map_err(|e| self.store.error(&self.key, "start a multipart upload", &e))?;
                pending::begun(&self.store, &self.key, &id);
                self.id.insert(id).clone()
            }
        };
        let permit = parts
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| S3Error::new(e.to_string()))?;
        // A part that failed ends the upload before more are sent.
        while let Some(r) = self.tasks.try_join_next() {
            self.done.push(r.map_err(|e| S3Error::new(e.to_string()))??);
        }
        let (store, key, i) = (self.store.clone(), self.key.clone(), self.next);
        self.next += 1;
        self.tasks.spawn(async move {
            let _permit = permit;
            let part = store
                .s3
                .put_part(&key, &id, i, PutPayload::from(bytes))
                .await
                .map_err(|e| store.error(&key, &format!("send part {}", i + 1), &e))?;
            Ok((i, part))
        });
        Ok(())
    }

    /// Sends `last` and completes the upload, or, if no part went, PUTs `last` whole.
    async fn finish(&mut self, last: Vec<u8>, parts: &Arc<Semaphore>) -> Result<PutResult> {
        if self.id.is_none() && (last.len() as u64) < MIN_PART {
            let put = self.store.s3.put(&self.key, PutPayload::from(last)).await;
            return put.map_err(|e| self.store.error(&self.key, "put", &e));
        }
        self.part(last, parts).await?;
        let mut done = std::mem::take(&mut self.done);
        while let Some(r) = self.tasks.join_next().await {
            done.push(r.map_err(|e| S3Error::new(e.to_string()))??);
        }
        done.sort_by_key(|p| p.0);
        let id = self.id.clone().unwrap_or_default();
        let ids = done.into_iter().map(|p| p.1).collect();
        let put = self.store.s3.complete_multipart(&self.key, &id, ids).await;
        let put = put.map_err(|e| {
            self.store
                .error(&self.key, "complete the multipart upload", &e)
        })?;
        pending::ended(&self.store, &self.key, &id);
        Ok(put)
    }

    /// Stops the parts in flight and aborts the upload; if the store cannot be told,
    /// its record stays for the next run.
    async fn abort(&mut self) {
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        if let Some(id) = self.id.take() {
            if self.store.s3.abort_multipart(&self.key, &id).await.is_ok() {
                pending::ended(&self.store, &self.key, &id);
            }
        }
    }
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
