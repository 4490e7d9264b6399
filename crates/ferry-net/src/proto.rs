//! The messages: the handshake, the request, a path's error, the final counters.
//!
//! A connection starts with the client's hello ([`MAGIC`] and [`VERSION`]), which the
//! server answers with its own, then the client's [`Request`] frame, which the server
//! answers with `Accept` or `Fatal`. What follows depends on the request:
//!
//! - **upload** (client sends): server `Manifest`* `ManifestEnd`; client `Data`*
//!   `DataEnd` (the archive); server `Error`/`Warn` frames as they happen, then `Done`.
//! - **download** (server sends): client `Manifest`* `ManifestEnd`; server `Data`*,
//!   `Error`/`Warn` between them, `DataEnd`, `Done`.
//!
//! Either end may send `Fatal` instead of what comes next, and then closes.

use crate::frame::{expect_frame, read_full, write_frame, Fields, Frame, Kind, PutFields};
use crate::transfer::SourceWalk;
use crate::NetError;
use ferry_core::entry::RelPath;
use ferry_core::error::{Error, Side};
use ferry_core::filter::Rules;
use ferry_core::stats::Snapshot;
use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::sync::{Mutex, PoisonError};

/// The first bytes each end sends.
pub const MAGIC: &[u8; 8] = b"FERRYNET";

/// The protocol version this ferry speaks.
pub const VERSION: u32 = 1;

/// The longest path a request or a message may name (Linux paths inside a deep tree
/// may pass `PATH_MAX`).
pub const MAX_PATH: usize = 64 << 10;

/// Longest message text.
const MAX_TEXT: usize = 64 << 10;

/// Sends this end's hello.
pub fn send_hello(w: &mut impl Write) -> io::Result<()> {
    let mut hello = MAGIC.to_vec();
    hello.put_u32(VERSION);
    w.write_all(&hello)?;
    w.flush()
}

/// Reads the other end's hello: a version this end speaks, or an error saying what came.
pub fn read_hello(r: &mut impl Read) -> Result<(), NetError> {
    let mut hello = [0u8; 12];
    let got = read_full(r, &mut hello)?;
    if got == 0 {
        return Err(NetError::Handshake(
            "the other end closed the connection before saying anything".into(),
        ));
    }
    if got < hello.len() || &hello[..8] != MAGIC {
        return Err(NetError::Handshake(
            "the other end does not speak ferry's protocol (its first bytes are not \
             ferry's greeting)"
                .into(),
        ));
    }
    let mut v = [0u8; 4];
    v.copy_from_slice(&hello[8..]);
    match u32::from_le_bytes(v) {
        VERSION => Ok(()),
        other => Err(NetError::Handshake(format!(
            "the other end speaks protocol version {other}, this ferry {VERSION}"
        ))),
    }
}

/// Which way the tree goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// From the client to the server's path.
    Upload,
    /// From the server's path to the client.
    Download,
}

/// What the client asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Which way.
    pub op: Op,
    /// The path on the server, as the user wrote it.
    pub path: Vec<u8>,
    /// Decide what is up to date by content, not size and mtime.
    pub checksum: bool,
    /// Compress data frames with zstd.
    pub compress: bool,
    /// The receiver re-reads each file written and compares it with the data as read.
    pub verify: bool,
    /// What of the source is sent (the server's, for a download).
    pub walk: SourceWalk,
}

const CHECKSUM: u8 = 1;
const COMPRESS: u8 = 2;
const VERIFY: u8 = 4;
/// Filter rules follow the path.
const RULES: u8 = 8;
const ONE_FILE_SYSTEM: u8 = 16;
const DEREFERENCE: u8 = 32;
const KEEP_NEWER: u8 = 64;
const FLAGS: u8 = CHECKSUM | COMPRESS | VERIFY | RULES | ONE_FILE_SYSTEM | DEREFERENCE | KEEP_NEWER;

/// The most bytes of filter rules a request carries.
pub const MAX_RULES: usize = 1 << 20;

impl Request {
    /// The request's frame payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut p = Vec::new();
        p.put_u8(match self.op {
            Op::Upload => 1,
            Op::Download => 2,
        });
        let rules = self.walk.rules.encode();
        let flags = [
            (self.checksum, CHECKSUM),
            (self.compress, COMPRESS),
            (self.verify, VERIFY),
            (!rules.is_empty(), RULES),
            (self.walk.one_file_system, ONE_FILE_SYSTEM),
            (self.walk.dereference, DEREFERENCE),
            (self.walk.keep_newer, KEEP_NEWER),
        ];
        p.put_u8(flags.iter().filter(|f| f.0).fold(0, |a, f| a | f.1));
        p.put_bytes(&self.path);
        if !rules.is_empty() {
            p.put_bytes(&rules);
        }
        p
    }

    /// Decodes a request frame's payload.
    pub fn decode(payload: &[u8]) -> Result<Request, NetError> {
        let mut f = Fields::new(payload, "request");
        let op = match f.u8()? {
            1 => Op::Upload,
            2 => Op::Download,
            other => {
                return Err(NetError::frame(format!(
                    "request: unknown operation {other}"
                )))
            }
        };
        let flags = f.u8()?;
        if flags & !FLAGS != 0 {
            return Err(NetError::frame(format!(
                "request: unknown flags {flags:#x}"
            )));
        }
        let path = f.bytes(MAX_PATH)?.to_vec();
        let rules = match flags & RULES {
            0 => Rules::new(),
            _ => Rules::decode(f.bytes(MAX_RULES)?)
                .map_err(|e| NetError::frame(format!("request: filter {e}")))?,
        };
        f.end()?;
        Ok(Request {
            op,
            path,
            checksum: flags & CHECKSUM != 0,
            compress: flags & COMPRESS != 0,
            verify: flags & VERIFY != 0,
            walk: SourceWalk {
                rules,
                one_file_system: flags & ONE_FILE_SYSTEM != 0,
                dereference: flags & DEREFERENCE != 0,
                keep_newer: flags & KEEP_NEWER != 0,
            },
        })
    }
}

/// A failure on one path, as sent to the other end.
pub fn encode_error(err: &Error) -> Vec<u8> {
    let mut p = Vec::new();
    p.put_u8(match err.side {
        Side::Source => 0,
        Side::Destination => 1,
    });
    p.put_bytes(truncated(err.path.as_bytes(), MAX_PATH));
    p.put_bytes(truncated(err.op.as_bytes(), MAX_TEXT));
    p.put_bytes(truncated(err.os.to_string().as_bytes(), MAX_TEXT));
    p
}

fn truncated(b: &[u8], max: usize) -> &[u8] {
    &b[..b.len().min(max)]
}

/// Decodes an error frame's payload.
pub fn decode_error(payload: &[u8]) -> Result<Error, NetError> {
    let mut f = Fields::new(payload, "error");
    let side = match f.u8()? {
        0 => Side::Source,
        1 => Side::Destination,
        other => return Err(NetError::frame(format!("error: unknown side {other}"))),
    };
    let path = RelPath::from_bytes(f.bytes(MAX_PATH)?.to_vec());
    let op = interned(&String::from_utf8_lossy(f.bytes(MAX_TEXT)?));
    let msg = String::from_utf8_lossy(f.bytes(MAX_TEXT)?).into_owned();
    f.end()?;
    Ok(Error {
        path,
        side,
        op,
        os: io::Error::other(msg),
    })
}

/// Distinct operation names kept: past this many, others are called "remote".
const MAX_OPS: usize = 256;

/// `op` as the `'static` name an [`Error`] holds: each distinct name is kept once.
fn interned(op: &str) -> &'static str {
    static OPS: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut ops = OPS.lock().unwrap_or_else(PoisonError::into_inner);
    let ops = ops.get_or_insert_with(HashSet::new);
    if let Some(known) = ops.get(op) {
        return known;
    }
    if ops.len() >= MAX_OPS {
        return "remote";
    }
    let kept: &'static str = Box::leak(op.to_owned().into_boxed_str());
    ops.insert(kept);
    kept
}

/// Text (a warning or a fatal error) as a payload.
pub fn encode_text(text: &str) -> Vec<u8> {
    truncated(text.as_bytes(), MAX_TEXT).to_vec()
}

/// A text payload as a line: invalid UTF-8 and control characters made harmless.
pub fn decode_text(payload: &[u8]) -> String {
    ferry_core::entry::escaped(truncated(payload, MAX_TEXT))
}

/// The counters' payload.
pub fn encode_done(s: &Snapshot) -> Vec<u8> {
    let mut p = Vec::new();
    for v in [
        s.files,
        s.dirs,
        s.others,
        s.bytes,
        s.skipped,
        s.skipped_bytes,
        s.errors,
        s.cloned,
        s.kernel_copied,
        s.buffered,
    ] {
        p.put_u64(v);
    }
    p
}

/// Decodes the counters.
pub fn decode_done(payload: &[u8]) -> Result<Snapshot, NetError> {
    let mut f = Fields::new(payload, "done");
    let s = Snapshot {
        files: f.u64()?,
        dirs: f.u64()?,
        others: f.u64()?,
        bytes: f.u64()?,
        skipped: f.u64()?,
        skipped_bytes: f.u64()?,
        errors: f.u64()?,
        cloned: f.u64()?,
        kernel_copied: f.u64()?,
        buffered: f.u64()?,
        // A copy over the network deletes nothing (no --delete there yet).
        deleted: 0,
    };
    f.end()?;
    Ok(s)
}

/// Reads the answer to a request: `Accept`, or `Fatal` with the server's reason.
pub fn read_accept(r: &mut impl Read) -> Result<(), NetError> {
    let frame = expect_frame(r)?;
    match frame.kind {
        Kind::Accept => Ok(()),
        _ => Err(unexpected(frame, "an answer to the request")),
    }
}

/// The error for `frame` where `wanted` was due: the other end's own reason for a
/// `Fatal` frame.
pub fn unexpected(frame: Frame, wanted: &str) -> NetError {
    match frame.kind {
        Kind::Fatal => NetError::Remote(decode_text(&frame.payload)),
        kind => NetError::frame(format!("a {kind:?} frame where {wanted} was due")),
    }
}

/// Sends a `Fatal` frame, as far as the connection allows.
pub fn send_fatal(w: &mut impl Write, why: &str) {
    let _ = write_frame(w, Kind::Fatal, &encode_text(why)).and_then(|()| w.flush());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let req = Request {
            op: Op::Download,
            path: b"/a/\xffb".to_vec(),
            checksum: true,
            compress: false,
            verify: true,
            walk: SourceWalk::default(),
        };
        assert_eq!(Request::decode(&req.encode()).expect("decode"), req);
        // With rules and walk flags; a request without them is as it always was.
        let mut rules = Rules::new();
        rules
            .add(ferry_core::filter::Action::Exclude, b"*.o")
            .unwrap();
        rules
            .add(ferry_core::filter::Action::Include, b"/keep/")
            .unwrap();
        let walked = Request {
            walk: SourceWalk {
                rules,
                one_file_system: true,
                dereference: true,
                keep_newer: true,
            },
            ..req.clone()
        };
        assert_eq!(Request::decode(&walked.encode()).expect("decode"), walked);
        assert_eq!(req.encode()[1], CHECKSUM | VERIFY);
        // Rules that are not rules end in an error naming them, not a walk.
        let mut bad = vec![2, RULES];
        bad.put_bytes(b"/a");
        bad.put_bytes(b"- [\0");
        let e = Request::decode(&bad).expect_err("refused");
        assert!(e.to_string().contains("filter"), "{e}");
        let s = Snapshot {
            files: 1,
            dirs: 2,
            others: 3,
            bytes: 4,
            skipped: 5,
            skipped_bytes: 6,
            errors: 7,
            cloned: 8,
            kernel_copied: 9,
            buffered: 10,
            deleted: 0,
        };
        let back = decode_done(&encode_done(&s)).expect("decode");
        assert_eq!((back.files, back.buffered), (1, 10));
        let err = Error::dst(
            &RelPath::from_bytes(b"d/f".to_vec()),
            "write",
            io::Error::other("no"),
        );
        let back = decode_error(&encode_error(&err)).expect("decode");
        assert_eq!(
            (back.path, back.op, back.side),
            (err.path, "write", Side::Destination)
        );
    }

    #[test]
    fn a_bad_hello_is_a_handshake_error() {
        assert!(read_hello(&mut &b"GARBAGE!\x01\0\0\0"[..]).is_err());
        assert!(read_hello(&mut &b"FERRY"[..]).is_err());
        assert!(read_hello(&mut &b""[..]).is_err());
        let mut ok = Vec::new();
        send_hello(&mut ok).expect("hello");
        read_hello(&mut ok.as_slice()).expect("read");
    }
}
