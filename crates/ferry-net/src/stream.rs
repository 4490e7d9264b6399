//! The archive stream in frames: [`Outbound`] cuts what the sender packs into data
//! frames (each compressed on its own with `--compress`, so the receiver's memory per
//! frame stays bounded however well the data compresses) and sends messages between
//! them; [`Inbound`] gives the receiver the data back as one stream, hands the
//! messages it meets to a reporter, and ends at `DataEnd`. A plain data frame's
//! bytes are read straight from the connection into the reader's buffer (a server's
//! pooled one): a connection holds no frame buffer of its own.

use crate::frame::{read_full, read_head, write_frame, Frame, Kind, MAX_FRAME};
use crate::proto::{
    decode_change, decode_error, decode_text, encode_change, encode_error, encode_text,
};
use crate::NetError;
use ferry_core::changes::{Changes, Kind as ChangeKind, What};
use ferry_core::entry::RelPath;
use ferry_core::error::{Error, Reporter};
use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Archive bytes per data frame (before compression).
pub const CHUNK: usize = 256 << 10;

/// zstd level for `--compress`: fast enough not to hold back a gigabit link on one core.
const LEVEL: i32 = 3;

/// The sending half of a connection, shared by the archive stream and the messages.
pub struct Outbound<W: Write> {
    w: W,
    pending: Vec<u8>,
    compress: bool,
}

/// An [`Outbound`] shared between threads (the packer and the reporter).
pub type Shared<W> = Arc<Mutex<Outbound<W>>>;

impl<W: Write> Outbound<W> {
    /// Frames to `w`, data compressed when `compress`.
    pub fn new(w: W, compress: bool) -> Self {
        Outbound {
            w,
            pending: Vec::with_capacity(CHUNK),
            compress,
        }
    }

    /// Shared between threads.
    pub fn shared(self) -> Shared<W> {
        Arc::new(Mutex::new(self))
    }

    /// Queues archive bytes, sending a data frame each time a chunk is full.
    pub fn data(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let take = bytes.len().min(CHUNK - self.pending.len());
            self.pending.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.pending.len() == CHUNK {
                self.send_pending()?;
            }
        }
        Ok(())
    }

    fn send_pending(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        if self.compress {
            let z = zstd::bulk::compress(&self.pending, LEVEL)?;
            // Data that does not compress goes as it is.
            if z.len() < self.pending.len() && z.len() <= MAX_FRAME {
                write_frame(&mut self.w, Kind::ZData, &z)?;
                self.pending.clear();
                return Ok(());
            }
        }
        write_frame(&mut self.w, Kind::Data, &self.pending)?;
        self.pending.clear();
        Ok(())
    }

    /// Sends what is queued and `DataEnd`: the archive is complete.
    pub fn end_data(&mut self) -> io::Result<()> {
        self.send_pending()?;
        self.frame(Kind::DataEnd, &[])
    }

    /// Sends one frame now (between data frames) and flushes.
    pub fn frame(&mut self, kind: Kind, payload: &[u8]) -> io::Result<()> {
        write_frame(&mut self.w, kind, payload)?;
        self.w.flush()
    }

    /// The connection, to send on after the archive.
    pub fn writer(&mut self) -> &mut W {
        &mut self.w
    }
}

/// Locks a shared outbound half.
pub fn lock<W: Write>(out: &Shared<W>) -> MutexGuard<'_, Outbound<W>> {
    out.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The archive stream's writer: what pack writes goes out in data frames.
pub struct DataWriter<W: Write>(pub Shared<W>);

impl<W: Write> Write for DataWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        lock(&self.0).data(buf)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A reporter sending every message to the other end, as `Error` and `Warn` frames. A
/// message that cannot be sent is dropped: the connection's failure ends the job anyway.
pub struct FrameReporter<W: Write>(pub Shared<W>);

impl<W: Write + Send> Changes for FrameReporter<W> {
    fn change(&self, path: &RelPath, kind: ChangeKind, what: What) {
        let _ = lock(&self.0).frame(Kind::Change, &encode_change(path, kind, what));
    }
}

impl<W: Write + Send> Reporter for FrameReporter<W> {
    fn error(&self, err: &Error) {
        let _ = lock(&self.0).frame(Kind::Error, &encode_error(err));
    }
    fn warn(&self, msg: &str) {
        let _ = lock(&self.0).frame(Kind::Warn, &encode_text(msg));
    }
}

/// The next frame from `r` that is not a message: messages met on the way go to
/// `reporter` and `changes` (see [`report_message`]).
pub fn next_frame(
    r: &mut (impl Read + ?Sized),
    reporter: &dyn Reporter,
    changes: Option<&dyn Changes>,
) -> Result<Frame, NetError> {
    loop {
        let frame = crate::frame::expect_frame(r)?;
        if !report_message(frame.kind, &frame.payload, reporter, changes)? {
            return Ok(frame);
        }
    }
}

/// Hands a message frame (`Error`, `Warn`) to `reporter`, a `Change` to `changes`;
/// `Ok(false)` for other kinds.
pub fn report_message(
    kind: Kind,
    payload: &[u8],
    reporter: &dyn Reporter,
    changes: Option<&dyn Changes>,
) -> Result<bool, NetError> {
    match kind {
        Kind::Error => reporter.error(&decode_error(payload)?),
        Kind::Warn => reporter.warn(&decode_text(payload)),
        Kind::Change => {
            let (path, kind, what) = decode_change(payload)?;
            if let Some(c) = changes {
                c.change(&path, kind, what);
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// The receiving half: the archive as one stream, up to `DataEnd`.
pub struct Inbound<'a, R: Read> {
    r: R,
    reporter: &'a dyn Reporter,
    changes: Option<&'a dyn Changes>,
    /// Data of the current compressed frame not read yet.
    buf: Vec<u8>,
    at: usize,
    /// Bytes of the current plain data frame still to read from the connection.
    left: usize,
    ended: bool,
    /// Why the stream failed, for the caller to tell rather than the unpack's view.
    failure: Option<NetError>,
}

impl<'a, R: Read> Inbound<'a, R> {
    /// `Change` frames between data frames go to `changes`.
    pub fn with_changes(mut self, changes: Option<&'a dyn Changes>) -> Self {
        self.changes = changes;
        self
    }

    /// Reads frames from `r`; messages between data frames go to `reporter`.
    pub fn new(r: R, reporter: &'a dyn Reporter) -> Self {
        Inbound {
            r,
            reporter,
            changes: None,
            buf: Vec::new(),
            at: 0,
            left: 0,
            ended: false,
            failure: None,
        }
    }

    /// Whether `DataEnd` has been read.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// What made the stream fail, if it did.
    pub fn take_failure(&mut self) -> Option<NetError> {
        self.failure.take()
    }

    /// The connection, to read on after the archive.
    pub fn reader(&mut self) -> &mut R {
        &mut self.r
    }

    /// Reads frames until one with data, or the end.
    fn fill(&mut self) -> Result<(), NetError> {
        while self.at == self.buf.len() && self.left == 0 && !self.ended {
            let (kind, len) = read_head(&mut self.r)?.ok_or(NetError::Closed)?;
            if kind == Kind::Data {
                self.left = len;
                continue;
            }
            let mut payload = vec![0u8; len];
            if read_full(&mut self.r, &mut payload)? < len {
                return Err(NetError::ClosedMidFrame);
            }
            match kind {
                Kind::ZData => {
                    self.buf.clear();
                    self.at = 0;
                    let mut z = zstd::bulk::Decompressor::new()?;
                    self.buf.reserve(CHUNK);
                    z.decompress_to_buffer(&payload, &mut self.buf)
                        .map_err(|e| {
                            NetError::frame(format!("compressed data does not decompress: {e}"))
                        })?;
                }
                Kind::DataEnd => self.ended = true,
                kind => {
                    if !report_message(kind, &payload, self.reporter, self.changes)? {
                        let frame = Frame { kind, payload };
                        return Err(crate::proto::unexpected(frame, "archive data"));
                    }
                }
            }
        }
        Ok(())
    }

    fn read_data(&mut self, out: &mut [u8]) -> Result<usize, NetError> {
        self.fill()?;
        if self.at < self.buf.len() {
            let n = out.len().min(self.buf.len() - self.at);
            out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
            self.at += n;
            return Ok(n);
        }
        if self.left == 0 {
            return Ok(0);
        }
        let want = out.len().min(self.left);
        let n = loop {
            match self.r.read(&mut out[..want]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                got => break got?,
            }
        };
        if n == 0 && want > 0 {
            return Err(NetError::ClosedMidFrame);
        }
        self.left -= n;
        Ok(n)
    }
}

impl<R: Read> Read for Inbound<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        self.read_data(out).map_err(|e| {
            let line = e.to_string();
            self.failure.get_or_insert(e);
            io::Error::other(line)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Collect(Mutex<Vec<String>>);
    impl Reporter for Collect {
        fn error(&self, err: &Error) {
            self.0.lock().expect("lock").push(format!("{}", err.path));
        }
        fn warn(&self, msg: &str) {
            self.0.lock().expect("lock").push(msg.to_owned());
        }
    }

    #[test]
    fn data_comes_back_whole_with_messages_between() {
        for compress in [false, true] {
            let out = Outbound::new(Vec::new(), compress).shared();
            let data: Vec<u8> = (0..CHUNK * 3 + 17).map(|i| (i % 251) as u8).collect();
            DataWriter(out.clone())
                .write_all(&data[..CHUNK + 5])
                .expect("write");
            FrameReporter(out.clone()).warn("careful");
            DataWriter(out.clone())
                .write_all(&data[CHUNK + 5..])
                .expect("write");
            lock(&out).end_data().expect("end");
            let wire = std::mem::take(lock(&out).writer());
            let seen = Collect(Mutex::new(Vec::new()));
            let mut inbound = Inbound::new(wire.as_slice(), &seen);
            let mut back = Vec::new();
            inbound.read_to_end(&mut back).expect("read");
            assert!(back == data, "compress {compress}");
            assert!(inbound.ended());
            assert_eq!(*seen.0.lock().expect("lock"), ["careful"]);
        }
    }

    #[test]
    fn a_stream_cut_short_is_an_error_not_an_end() {
        let out = Outbound::new(Vec::new(), false).shared();
        DataWriter(out.clone())
            .write_all(&[7; 1000])
            .expect("write");
        lock(&out).end_data().expect("end");
        let wire = std::mem::take(lock(&out).writer());
        let seen = Collect(Mutex::new(Vec::new()));
        for cut in 0..wire.len() {
            let mut inbound = Inbound::new(&wire[..cut], &seen);
            assert!(
                inbound.read_to_end(&mut Vec::new()).is_err(),
                "cut at {cut}"
            );
            assert!(inbound.take_failure().is_some());
        }
    }
}
