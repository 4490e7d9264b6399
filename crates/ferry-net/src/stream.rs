//! The archive stream in frames: [`Outbound`] cuts what the sender packs into data
//! frames (each compressed on its own with `--compress`, so the receiver's memory per
//! frame stays bounded however well the data compresses) and sends messages between
//! them; [`Inbound`] gives the receiver the data back as one stream, hands the
//! messages it meets to a reporter, and ends at `DataEnd`.

use crate::frame::{read_frame, write_frame, Kind, MAX_FRAME};
use crate::proto::{decode_error, decode_text, encode_error, encode_text};
use crate::NetError;
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

impl<W: Write + Send> Reporter for FrameReporter<W> {
    fn error(&self, err: &Error) {
        let _ = lock(&self.0).frame(Kind::Error, &encode_error(err));
    }
    fn warn(&self, msg: &str) {
        let _ = lock(&self.0).frame(Kind::Warn, &encode_text(msg));
    }
}

/// Hands a message frame (`Error`, `Warn`) to `reporter`; `Ok(false)` for other kinds.
pub fn report_message(
    kind: Kind,
    payload: &[u8],
    reporter: &dyn Reporter,
) -> Result<bool, NetError> {
    match kind {
        Kind::Error => reporter.error(&decode_error(payload)?),
        Kind::Warn => reporter.warn(&decode_text(payload)),
        _ => return Ok(false),
    }
    Ok(true)
}

/// The receiving half: the archive as one stream, up to `DataEnd`.
pub struct Inbound<'a, R: Read> {
    r: R,
    reporter: &'a dyn Reporter,
    /// Data of the current frame not read yet.
    buf: Vec<u8>,
    at: usize,
    ended: bool,
    /// Why the stream failed, for the caller to tell rather than the unpack's view.
    failure: Option<NetError>,
}

impl<'a, R: Read> Inbound<'a, R> {
    /// Reads frames from `r`; messages between data frames go to `reporter`.
    pub fn new(r: R, reporter: &'a dyn Reporter) -> Self {
        Inbound {
            r,
            reporter,
            buf: Vec::new(),
            at: 0,
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
        while self.at == self.buf.len() && !self.ended {
            let frame = read_frame(&mut self.r)?.ok_or(NetError::Closed)?;
            match frame.kind {
                Kind::Data => (self.buf, self.at) = (frame.payload, 0),
                Kind::ZData => {
                    let data = zstd::bulk::decompress(&frame.payload, CHUNK).map_err(|e| {
                        NetError::frame(format!("compressed data does not decompress: {e}"))
                    })?;
                    (self.buf, self.at) = (data, 0);
                }
                Kind::DataEnd => self.ended = true,
                kind => {
                    if !report_message(kind, &frame.payload, self.reporter)? {
                        return Err(crate::proto::unexpected(frame, "archive data"));
                    }
                }
            }
        }
        Ok(())
    }
}

impl<R: Read> Read for Inbound<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if let Err(e) = self.fill() {
            let line = e.to_string();
            self.failure.get_or_insert(e);
            return Err(io::Error::other(line));
        }
        let n = out.len().min(self.buf.len() - self.at);
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        Ok(n)
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
