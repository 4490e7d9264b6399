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
use ferry_core::changes::{Kind as ChangeKind, Reasons, What};
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
pub const VERSION: u32 = 3;

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
    /// Mirroring: deleting, a dry run, changes told.
    pub mirror: Mirror,
    /// An upload of one file, not a tree: its name. The server decides where it goes,
    /// as `cp` does (into the path when that is a directory, else to the path itself),
    /// and says under which name to send it.
    pub one_file: Option<Vec<u8>>,
}

/// What a copy does besides sending what is missing or out of date, whichever end
/// sends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mirror {
    /// Delete from the destination what the source does not have (`--delete`).
    pub delete: bool,
    /// Delete what the rules exclude too (`--delete-excluded`).
    pub delete_excluded: bool,
    /// Delete at most this many entries (`--max-delete`).
    pub max_delete: Option<u64>,
    /// Change nothing at either end; only tell and count (`--dry-run`).
    pub dry_run: bool,
    /// Tell the client each entry changed (`-i`, `-v`).
    pub changes: bool,
}

const CHECKSUM: u32 = 1;
const COMPRESS: u32 = 2;
const VERIFY: u32 = 4;
/// Filter rules follow the path.
const RULES: u32 = 8;
const ONE_FILE_SYSTEM: u32 = 16;
const DEREFERENCE: u32 = 32;
const KEEP_NEWER: u32 = 64;
const DELETE: u32 = 128;
const DELETE_EXCLUDED: u32 = 256;
/// A `u64` limit follows the path (and the rules).
const MAX_DELETE: u32 = 512;
const DRY_RUN: u32 = 1024;
const CHANGES: u32 = 2048;
/// A file's name follows (and the limit).
const ONE_FILE: u32 = 4096;
const FLAGS: u32 = ONE_FILE
    | CHECKSUM
    | COMPRESS
    | VERIFY
    | RULES
    | ONE_FILE_SYSTEM
    | DEREFERENCE
    | KEEP_NEWER
    | DELETE
    | DELETE_EXCLUDED
    | MAX_DELETE
    | DRY_RUN
    | CHANGES;

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
            (self.mirror.delete, DELETE),
            (self.mirror.delete_excluded, DELETE_EXCLUDED),
            (self.mirror.max_delete.is_some(), MAX_DELETE),
            (self.mirror.dry_run, DRY_RUN),
            (self.mirror.changes, CHANGES),
            (self.one_file.is_some(), ONE_FILE),
        ];
        p.put_u32(flags.iter().filter(|f| f.0).fold(0, |a, f| a | f.1));
        p.put_bytes(&self.path);
        if !rules.is_empty() {
            p.put_bytes(&rules);
        }
        if let Some(max) = self.mirror.max_delete {
            p.put_u64(max);
        }
        if let Some(name) = &self.one_file {
            p.put_bytes(name);
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
        let flags = f.u32()?;
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
        let max_delete = match flags & MAX_DELETE {
            0 => None,
            _ => Some(f.u64()?),
        };
        let one_file = match flags & ONE_FILE {
            0 => None,
            _ => Some(member_name(f.bytes(MAX_NAME)?)?),
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
            mirror: Mirror {
                delete: flags & DELETE != 0,
                delete_excluded: flags & DELETE_EXCLUDED != 0,
                max_delete,
                dry_run: flags & DRY_RUN != 0,
                changes: flags & CHANGES != 0,
            },
            one_file,
        })
    }
}

/// The longest file name (Linux: 255 bytes).
pub const MAX_NAME: usize = 255;

/// `name` as the name of a single file's member: one plain name (no `/`, not `.` or
/// `..`, not empty, no NUL), or an error saying what came.
pub fn member_name(name: &[u8]) -> Result<Vec<u8>, NetError> {
    let plain = !name.is_empty()
        && name.len() <= MAX_NAME
        && name != b"."
        && name != b".."
        && !name.contains(&b'/')
        && !name.contains(&0);
    match plain {
        true => Ok(name.to_vec()),
        false => Err(NetError::frame(format!(
            "{}: not a file name of its own",
            ferry_core::entry::escaped(name)
        ))),
    }
}

/// The `Accept` frame's payload: empty for a tree; for a download of one file, its
/// name there.
pub fn encode_accept(one_file: Option<&[u8]>) -> Vec<u8> {
    one_file.map(<[u8]>::to_vec).unwrap_or_default()
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
        s.deleted,
    ] {
        p.put_u64(v);
    }
    p
}

/// A change's payload: what, why, the kind and the path.
pub fn encode_change(path: &RelPath, kind: ChangeKind, what: What) -> Vec<u8> {
    let (w, why) = match what {
        What::Created => (0, Reasons::none()),
        What::Updated(r) => (1, r),
        What::Meta(r) => (2, r),
        What::Deleted => (3, Reasons::none()),
    };
    let mut p = Vec::new();
    p.put_u8(w);
    p.put_u32(u32::from(why.bits()));
    p.put_u8(crate::plan::kind_byte(kind));
    p.put_bytes(truncated(path.as_bytes(), MAX_PATH));
    p
}

/// Decodes a change's payload.
pub fn decode_change(payload: &[u8]) -> Result<(RelPath, ChangeKind, What), NetError> {
    let mut f = Fields::new(payload, "change");
    let w = f.u8()?;
    let why = Reasons::from_bits(f.u32()? as u16);
    let kind = f.u8()?;
    let kind = crate::plan::kind_of_byte(kind)
        .ok_or_else(|| NetError::frame(format!("change: unknown kind {kind}")))?;
    let what = match w {
        0 => What::Created,
        1 => What::Updated(why),
        2 => What::Meta(why),
        3 => What::Deleted,
        other => return Err(NetError::frame(format!("change: unknown change {other}"))),
    };
    let path = RelPath::from_bytes(f.bytes(MAX_PATH)?.to_vec());
    f.end()?;
    Ok((path, kind, what))
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
        deleted: f.u64()?,
    };
    f.end()?;
    Ok(s)
}

/// Reads the answer to a request: `Accept` (with, for a download of one file, its
/// name), or `Fatal` with the server's reason.
pub fn read_accept(r: &mut impl Read) -> Result<Option<Vec<u8>>, NetError> {
    let frame = expect_frame(r)?;
    match frame.kind {
        Kind::Accept if frame.payload.is_empty() => Ok(None),
        Kind::Accept => member_name(&frame.payload).map(Some),
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
            mirror: Mirror::default(),
            one_file: None,
        };
        assert_eq!(Request::decode(&req.encode()).expect("decode"), req);
        let one = Request {
            one_file: Some(b"f\xff".to_vec()),
            ..req.clone()
        };
        assert_eq!(Request::decode(&one.encode()).expect("decode"), one);
        for bad in [&b".."[..], b"a/b", b"", b"."] {
            let mut e = req.encode();
            let flags = u32::from_le_bytes([e[1], e[2], e[3], e[4]]) | ONE_FILE;
            e[1..5].copy_from_slice(&flags.to_le_bytes());
            e.put_bytes(bad);
            assert!(Request::decode(&e).is_err(), "{bad:?}");
        }
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
        assert_eq!(req.encode()[1..5], (CHECKSUM | VERIFY).to_le_bytes());
        let mirrored = Request {
            mirror: Mirror {
                delete: true,
                delete_excluded: true,
                max_delete: Some(7),
                dry_run: true,
                changes: true,
            },
            ..walked.clone()
        };
        assert_eq!(
            Request::decode(&mirrored.encode()).expect("decode"),
            mirrored
        );
        // Rules that are not rules end in an error naming them, not a walk.
        let mut bad = vec![2];
        bad.put_u32(RULES);
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
            deleted: 11,
        };
        let back = decode_done(&encode_done(&s)).expect("decode");
        assert_eq!((back.files, back.buffered, back.deleted), (1, 10, 11));
        let path = RelPath::from_bytes(b"a/\n".to_vec());
        for what in [
            What::Created,
            What::Updated(Reasons::SIZE),
            What::Meta(Reasons::MODE.with(Reasons::OWNER)),
            What::Deleted,
        ] {
            let back =
                decode_change(&encode_change(&path, ChangeKind::Symlink, what)).expect("decode");
            assert_eq!(back, (path.clone(), ChangeKind::Symlink, what));
        }
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
    fn a_list_of_paths_travels_in_the_rules_within_their_bound() {
        let mut rules = Rules::new();
        rules.set_listed(vec![b"a/b".to_vec(), b"new\nline\xff".to_vec()]);
        let req = Request {
            op: Op::Download,
            path: b"/src".to_vec(),
            checksum: false,
            compress: false,
            verify: false,
            walk: SourceWalk {
                rules,
                ..SourceWalk::default()
            },
            mirror: Mirror::default(),
            one_file: None,
        };
        assert_eq!(Request::decode(&req.encode()).expect("decode"), req);
        // A list past MAX_RULES (131,072 paths of 13 bytes) is refused, not read.
        let mut big = Rules::new();
        let paths = (0..MAX_RULES / 8).map(|i| format!("dir/{i:06}").into_bytes());
        big.set_listed(paths.collect());
        let req = Request {
            walk: SourceWalk {
                rules: big,
                ..SourceWalk::default()
            },
            ..req
        };
        assert!(Request::decode(&req.encode()).is_err());
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
