//! Frames: a kind byte, a little-endian `u32` length, and that many bytes of payload,
//! at most [`MAX_FRAME`]. A reader never allocates more than a frame's announced
//! length after checking it against the limit, and a payload is decoded with
//! [`Fields`], which checks every length against the bytes left, so garbage, a
//! truncated frame or an oversized one is an error, never a panic or a large
//! allocation.

use crate::NetError;
use std::io::{self, Read, Write};

/// The most payload bytes a frame may carry.
pub const MAX_FRAME: usize = 1 << 20;

/// Bytes before a frame's payload: its kind and length.
pub const FRAME_HEAD: usize = 5;

/// What a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Client to server: what to do ([`crate::proto::Request`]).
    Request = 1,
    /// Server to client: the request is accepted.
    Accept = 2,
    /// Receiver to sender: records of what the destination holds.
    Manifest = 3,
    /// Receiver to sender: the manifest is complete.
    ManifestEnd = 4,
    /// Sender to receiver: the next bytes of the archive stream.
    Data = 5,
    /// As [`Kind::Data`], compressed with zstd on its own.
    ZData = 6,
    /// Sender to receiver: the archive stream is complete.
    DataEnd = 7,
    /// Either way: one path failed ([`crate::proto::PathError`]).
    Error = 8,
    /// Either way: a warning, as text.
    Warn = 9,
    /// The job is done: the counters of the end that sends it.
    Done = 10,
    /// Either way: the job cannot go on, and why, as text.
    Fatal = 11,
    /// Client to daemon, before the request: the shared secret (`--token-file`).
    Auth = 12,
    /// Either way, to the client: entries changed, or in a dry run to be
    /// ([`crate::plan`]), for `-i` and `-v`.
    Change = 13,
    /// Sender to receiver, after the data: paths the source does not have (`--delete`).
    Delete = 14,
    /// Sender to receiver, after the data: metadata-only changes.
    Meta = 15,
    /// Sender to receiver: the plan's frames are complete.
    PlanEnd = 16,
    /// Sender to receiver: a file to send as a delta, and its new size
    /// ([`crate::deltas`]).
    DeltaWant = 17,
    /// Receiver to sender: the next bytes of the signature of its version.
    Signature = 18,
    /// Receiver to sender: the signature is complete (`1`), or there is none (`0`).
    SignatureEnd = 19,
    /// Sender to receiver: ops that rebuild the file.
    DeltaOps = 20,
    /// Sender to receiver: the file's ops are complete: its hash and metadata.
    DeltaEnd = 21,
    /// Sender to receiver: no more deltas.
    DeltasEnd = 22,
}

impl Kind {
    fn from_byte(b: u8) -> Option<Kind> {
        use Kind::*;
        Some(match b {
            1 => Request,
            2 => Accept,
            3 => Manifest,
            4 => ManifestEnd,
            5 => Data,
            6 => ZData,
            7 => DataEnd,
            8 => Error,
            9 => Warn,
            10 => Done,
            11 => Fatal,
            12 => Auth,
            13 => Change,
            14 => Delete,
            15 => Meta,
            16 => PlanEnd,
            17 => DeltaWant,
            18 => Signature,
            19 => SignatureEnd,
            20 => DeltaOps,
            21 => DeltaEnd,
            22 => DeltasEnd,
            _ => return None,
        })
    }
}

/// One frame as read.
#[derive(Debug)]
pub struct Frame {
    /// Its kind.
    pub kind: Kind,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// Writes one frame; a payload over [`MAX_FRAME`] is refused.
pub fn write_frame(w: &mut (impl Write + ?Sized), kind: Kind, payload: &[u8]) -> io::Result<()> {
    if payload.len() > MAX_FRAME {
        return Err(io::Error::other(format!(
            "a frame of {} bytes: more than {MAX_FRAME}",
            payload.len()
        )));
    }
    let mut head = [0u8; FRAME_HEAD];
    head[0] = kind as u8;
    head[1..].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    w.write_all(&head)?;
    w.write_all(payload)
}

/// Reads the frame that starts here: `None` where the input ends cleanly before one.
pub fn read_frame(r: &mut (impl Read + ?Sized)) -> Result<Option<Frame>, NetError> {
    let Some((kind, len)) = read_head(r)? else {
        return Ok(None);
    };
    let mut payload = vec![0u8; len];
    if read_full(r, &mut payload)? < len {
        return Err(NetError::ClosedMidFrame);
    }
    Ok(Some(Frame { kind, payload }))
}

/// Reads a frame's head: its kind and its payload's length, checked against
/// [`MAX_FRAME`]; `None` where the input ends cleanly before one.
pub fn read_head(r: &mut (impl Read + ?Sized)) -> Result<Option<(Kind, usize)>, NetError> {
    let mut head = [0u8; FRAME_HEAD];
    let got = read_full(r, &mut head)?;
    if got == 0 {
        return Ok(None);
    }
    if got < FRAME_HEAD {
        return Err(NetError::ClosedMidFrame);
    }
    let kind = Kind::from_byte(head[0])
        .ok_or_else(|| NetError::frame(format!("unknown frame kind {}", head[0])))?;
    let mut len = [0u8; 4];
    len.copy_from_slice(&head[1..]);
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(NetError::TooLarge {
            len: len as u64,
            max: MAX_FRAME as u64,
        });
    }
    Ok(Some((kind, len)))
}

/// Reads the next frame, which must be there.
pub fn expect_frame(r: &mut (impl Read + ?Sized)) -> Result<Frame, NetError> {
    read_frame(r)?.ok_or(NetError::Closed)
}

/// Reads until `buf` is full or the input ends; how much was read.
pub fn read_full(r: &mut (impl Read + ?Sized), buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Appends fields to a payload.
pub trait PutFields {
    /// A byte.
    fn put_u8(&mut self, v: u8);
    /// A little-endian `u32`.
    fn put_u32(&mut self, v: u32);
    /// A little-endian `u64`.
    fn put_u64(&mut self, v: u64);
    /// Bytes, after their length as a `u32`.
    fn put_bytes(&mut self, v: &[u8]);
}

impl PutFields for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_bytes(&mut self, v: &[u8]) {
        self.put_u32(v.len() as u32);
        self.extend_from_slice(v);
    }
}

/// Reads fields from a payload, checking each against the bytes left.
pub struct Fields<'a> {
    rest: &'a [u8],
    /// What the payload is, for messages.
    what: &'static str,
}

impl<'a> Fields<'a> {
    /// Fields of the payload of a `what` frame.
    pub fn new(payload: &'a [u8], what: &'static str) -> Self {
        Fields {
            rest: payload,
            what,
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], NetError> {
        if n > self.rest.len() {
            return Err(NetError::frame(format!("{} frame cut short", self.what)));
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], NetError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    /// A byte.
    pub fn u8(&mut self) -> Result<u8, NetError> {
        Ok(self.take(1)?[0])
    }

    /// A `u32`.
    pub fn u32(&mut self) -> Result<u32, NetError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// A `u64`.
    pub fn u64(&mut self) -> Result<u64, NetError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// Bytes after their `u32` length, at most `max` of them.
    pub fn bytes(&mut self, max: usize) -> Result<&'a [u8], NetError> {
        let len = self.u32()? as usize;
        if len > max {
            return Err(NetError::frame(format!(
                "{} frame: a field of {len} bytes, more than {max}",
                self.what
            )));
        }
        self.take(len)
    }

    /// Whether all bytes have been read.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// Checks that nothing is left.
    pub fn end(&self) -> Result<(), NetError> {
        match self.rest.is_empty() {
            true => Ok(()),
            false => Err(NetError::frame(format!(
                "{} frame: {} bytes left over",
                self.what,
                self.rest.len()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn frames_round_trip() {
        let mut buf = Vec::new();
        write_frame(&mut buf, Kind::Data, b"hello").expect("write");
        write_frame(&mut buf, Kind::DataEnd, b"").expect("write");
        let mut r = Cursor::new(buf);
        let f = read_frame(&mut r).expect("read").expect("frame");
        assert_eq!((f.kind, f.payload.as_slice()), (Kind::Data, &b"hello"[..]));
        let f = read_frame(&mut r).expect("read").expect("frame");
        assert_eq!(f.kind, Kind::DataEnd);
        assert!(read_frame(&mut r).expect("read").is_none());
    }

    #[test]
    fn oversized_truncated_and_unknown_frames_are_errors() {
        let mut big = vec![Kind::Data as u8];
        big.extend_from_slice(&(MAX_FRAME as u32 + 1).to_le_bytes());
        assert!(matches!(
            read_frame(&mut Cursor::new(big)),
            Err(NetError::TooLarge { .. })
        ));
        let mut cut = Vec::new();
        write_frame(&mut cut, Kind::Data, b"abcdef").expect("write");
        for n in 1..cut.len() {
            assert!(matches!(
                read_frame(&mut Cursor::new(&cut[..n])),
                Err(NetError::ClosedMidFrame)
            ));
        }
        assert!(matches!(
            read_frame(&mut Cursor::new([99u8, 0, 0, 0, 0])),
            Err(NetError::Frame(_))
        ));
        assert!(write_frame(&mut Vec::new(), Kind::Data, &vec![0; MAX_FRAME + 1]).is_err());
    }

    #[test]
    fn fields_check_their_lengths() {
        let mut p = Vec::new();
        p.put_bytes(b"abc");
        p.put_u64(7);
        let mut f = Fields::new(&p, "test");
        assert_eq!(f.bytes(3).expect("bytes"), b"abc");
        assert_eq!(f.u64().expect("u64"), 7);
        f.end().expect("end");
        assert!(Fields::new(&p, "test").bytes(2).is_err());
        assert!(Fields::new(&p[..5], "test").bytes(3).is_err());
        let mut huge = Vec::new();
        huge.put_u32(u32::MAX);
        assert!(Fields::new(&huge, "test").bytes(usize::MAX).is_err());
    }
}
