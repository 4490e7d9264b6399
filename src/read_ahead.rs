//! Reading on a thread of its own: a compressed archive is decompressed on one core while
//! it is unpacked on another, as `tar -z` gets from running gzip beside it. Memory stays
//! bounded: a few chunks wait at most, and chunks read are handed back for reuse.

use std::io::{self, Read};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

/// Bytes read at a time.
const CHUNK: usize = 1 << 20;

/// Chunks read ahead at most (so at most this many MiB wait, plus the one being read).
const DEPTH: usize = 4;

/// What `inner` yields, read by another thread ahead of the reader.
pub struct ReadAhead {
    chunks: Receiver<io::Result<Vec<u8>>>,
    /// Chunks read, handed back to be filled again.
    spare: SyncSender<Vec<u8>>,
    current: Vec<u8>,
    at: usize,
    done: bool,
}

/// Starts reading `inner` ahead on a new thread.
pub fn read_ahead(mut inner: Box<dyn Read + Send>) -> ReadAhead {
    let (send, chunks) = sync_channel(DEPTH);
    let (spare, spares) = sync_channel::<Vec<u8>>(DEPTH + 1);
    std::thread::spawn(move || loop {
        let mut chunk = spares.try_recv().unwrap_or_default();
        chunk.resize(CHUNK, 0);
        let (n, failed) = fill(&mut *inner, &mut chunk);
        chunk.truncate(n);
        // The bytes read before an error go first, then the error. An empty chunk is
        // the end; after it, or an error, or once the reader is gone, nothing is left
        // to do.
        let chunk = (n > 0 || failed.is_none()).then_some(Ok(chunk));
        for read in chunk.into_iter().chain(failed.map(Err)) {
            let last = !matches!(&read, Ok(c) if !c.is_empty());
            if send.send(read).is_err() || last {
                return;
            }
        }
    });
    ReadAhead {
        chunks,
        spare,
        current: Vec::new(),
        at: 0,
        done: false,
    }
}

/// Reads into `buf` until it is full, `inner` ends or fails; returns how many bytes it
/// holds, and the error it failed with.
fn fill(inner: &mut dyn Read, buf: &mut [u8]) -> (usize, Option<io::Error>) {
    let mut got = 0;
    while got < buf.len() {
        match inner.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (got, Some(e)),
        }
    }
    (got, None)
}

impl Read for ReadAhead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.current.len() {
            if self.done {
                return Ok(0);
            }
            let next = match self.chunks.recv() {
                Ok(next) => next,
                Err(_) => Err(io::Error::other("the reading thread stopped")),
            };
            let next = next.inspect_err(|_| self.done = true)?;
            self.done = next.is_empty();
            let used = std::mem::replace(&mut self.current, next);
            self.at = 0;
            // Dropped instead when enough are waiting.
            let _ = self.spare.try_send(used);
        }
        let n = buf.len().min(self.current.len() - self.at);
        buf[..n].copy_from_slice(&self.current[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yields_every_byte_in_order_then_the_end() {
        let data: Vec<u8> = (0..5 * CHUNK + 123).map(|i| (i * 7 % 251) as u8).collect();
        let mut ahead = read_ahead(Box::new(io::Cursor::new(data.clone())));
        let mut got = Vec::new();
        let mut buf = vec![0u8; 100_003];
        loop {
            match ahead.read(&mut buf).unwrap() {
                0 => break,
                n => got.extend_from_slice(&buf[..n]),
            }
        }
        assert_eq!(got, data);
        assert_eq!(ahead.read(&mut buf).unwrap(), 0);
    }

    #[test]
    fn passes_the_bytes_before_an_error_then_the_error_then_the_end() {
        struct Failing(usize);
        impl Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.0 == 0 {
                    return Err(io::Error::other("broken"));
                }
                let n = buf.len().min(self.0);
                buf[..n].fill(1);
                self.0 -= n;
                Ok(n)
            }
        }
        let mut ahead = read_ahead(Box::new(Failing(10)));
        let mut buf = [0u8; 64];
        // The bytes before the error first.
        assert_eq!(ahead.read(&mut buf).unwrap(), 10);
        assert_eq!(buf[..10], [1; 10]);
        let err = ahead.read(&mut buf).unwrap_err();
        assert_eq!(err.to_string(), "broken");
        assert_eq!(ahead.read(&mut buf).unwrap(), 0);
    }
}
