//! The client's side of a copy: an upload sends the local tree to the server's path,
//! a download receives the server's tree into a local one. Either runs over any pair
//! of byte streams (an ssh child's pipes today).

use crate::frame::{expect_frame, write_frame, Frame, Kind};
use crate::manifest::{send_manifest, send_manifest_one, DstListing};
use crate::proto::{
    decode_done, member_name, read_accept, read_hello, send_fatal, send_hello, unexpected, Mirror,
    Op, Request,
};
use crate::stream::{lock, report_message, Inbound, Outbound};
use crate::transfer::{receive_tree, send_tree, ReceiveOptions, SendOptions, Source, SourceWalk};
use crate::NetError;
use ferry_core::changes::Changes;
use ferry_core::error::Reporter;
use ferry_core::stats::Snapshot;
use ferry_core::Stats;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;
use std::sync::{Mutex, PoisonError};

/// How to copy.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The daemon's shared secret (`--token-file`), sent before the request.
    pub token: Option<Vec<u8>>,
    /// Decide what is up to date by content, not size and mtime.
    pub checksum: bool,
    /// Compress the data on the wire with zstd.
    pub compress: bool,
    /// The receiver re-reads each file written and compares it with the data as read.
    pub verify: bool,
    /// Workers on this end.
    pub threads: usize,
    /// What of the source is sent, whichever end it is on.
    pub walk: SourceWalk,
    /// Deleting, a dry run; `changes` is set by [`upload`] and [`download`] from
    /// whether they are given something to tell.
    pub mirror: Mirror,
}

fn start<R: Read, W: Write>(
    r: &mut R,
    w: &mut W,
    op: Op,
    remote: &[u8],
    opts: &Options,
    changes: Option<&dyn Changes>,
    one_file: Option<Vec<u8>>,
) -> Result<Option<Vec<u8>>, NetError> {
    send_hello(w)?;
    if let Some(token) = &opts.token {
        write_frame(w, Kind::Auth, token)?;
    }
    let request = Request {
        op,
        path: remote.to_vec(),
        checksum: opts.checksum,
        compress: opts.compress,
        verify: opts.verify,
        walk: opts.walk.clone(),
        mirror: Mirror {
            changes: changes.is_some(),
            ..opts.mirror
        },
        one_file,
    };
    write_frame(w, Kind::Request, &request.encode())?;
    w.flush()?;
    read_hello(r)?;
    read_accept(r)
}

/// The name of the file `path`, as a member's.
fn own_name(path: &Path) -> Result<Vec<u8>, NetError> {
    let name = path.file_name().map(|n| n.as_bytes()).unwrap_or_default();
    member_name(name).map_err(|_| NetError::Refused(format!("{}: names no file", path.display())))
}

/// Where one file named `name` goes for `dst`, as `cp` puts it: into `dst` when that is
/// a directory, else to `dst` itself; the directory to unpack into, and the name.
pub fn one_file_target(dst: &Path, name: Vec<u8>) -> Result<(PathBuf, Vec<u8>), NetError> {
    if dst.is_dir() {
        return Ok((dst.to_path_buf(), name));
    }
    if dst.as_os_str().as_bytes().ends_with(b"/") {
        return Err(NetError::Refused(format!(
            "{}: Not a directory",
            dst.display()
        )));
    }
    let parent = match dst.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((parent, own_name(dst)?))
}

/// Reads messages up to the `Done` frame, whose counters it returns; signature frames
/// (an upload's deltas) are passed to `signatures`.
fn read_done(
    r: &mut impl Read,
    reporter: &dyn Reporter,
    changes: Option<&dyn Changes>,
    signatures: Option<Sender<Frame>>,
) -> Result<Snapshot, NetError> {
    loop {
        let frame = expect_frame(r)?;
        if let (Kind::Signature | Kind::SignatureEnd, Some(to)) = (frame.kind, &signatures) {
            // The sender gone, the job is ending anyway: what comes next says why.
            let _ = to.send(frame);
            continue;
        }
        match frame.kind {
            Kind::Done => return decode_done(&frame.payload),
            kind if report_message(kind, &frame.payload, reporter, changes)? => {}
            _ => return Err(unexpected(frame, "the end of the job")),
        }
    }
}

/// Copies the local tree (or trees) `src` to `remote` on the server (reading `r`, writing `w`).
/// Per-path failures, on either end, go to `reporter`, and every change, on either
/// end, to `changes`; `stats` counts what was sent and what was left out as up to
/// date (in a dry run, what would be sent). Returns the server's counters: what it
/// wrote and deleted.
#[allow(clippy::too_many_arguments)]
pub fn upload<R: Read + Send, W: Write + Send + 'static>(
    mut r: R,
    mut w: W,
    src: Source<'_>,
    remote: &[u8],
    opts: &Options,
    stats: &Stats,
    reporter: &dyn Reporter,
    changes: Option<&dyn Changes>,
) -> Result<Snapshot, NetError> {
    // One file, not a tree: the server says which name it goes under.
    let one = match src {
        Source::Tree(path) if !opts.walk.walks_as_tree(path) => Some(path),
        _ => None,
    };
    let one_name = one.map(own_name).transpose()?;
    start(&mut r, &mut w, Op::Upload, remote, opts, changes, one_name)?;
    let manifest = DstListing::read(&mut r, reporter)?;
    let named;
    let src = match (one, &manifest.member) {
        (Some(path), Some(member)) => {
            named = [(member.clone(), path.to_path_buf())];
            Source::Named(&named)
        }
        (Some(_), None) => return Err(NetError::frame("no name to send the one file under")),
        (None, _) => src,
    };
    let out = Outbound::new(w, opts.compress).shared();
    // The server's answers are read meanwhile (it may report at any time); the
    // signatures among them come back here, for the deltas.
    let (signatures, replies) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        let answers = s.spawn(move || read_done(&mut r, reporter, changes, Some(signatures)));
        let how = SendOptions {
            checksum: opts.checksum,
            walk: &opts.walk,
            mirror: opts.mirror,
            changes,
        };
        let mut next = || replies.recv().map_err(|_| NetError::Closed);
        let sent = send_tree(src, &out, &manifest, &how, &mut next, stats, reporter);
        if let Err(e) = &sent {
            // Tell the server, so it stops and answers.
            send_fatal(lock(&out).writer(), &e.to_string());
        }
        let answer = answers
            .join()
            .unwrap_or_else(|_| Err(NetError::frame("the reading thread panicked")));
        match (sent, answer) {
            (Ok(()), answer) => answer,
            // The connection failed: the server's reason, if it gave one, says why.
            (Err(NetError::Io(e)), answer) => Err(match answer {
                Err(remote @ NetError::Remote(_)) => remote,
                _ => NetError::Io(e),
            }),
            (Err(e), _) => Err(e),
        }
    })
}

/// Copies the server's tree at `remote` into the local `dst` (reading `r`, writing
/// `w`). Per-path failures, on either end, go to `reporter`, and every change, on
/// either end, to `changes`; `stats` counts what was written and deleted. Returns the
/// server's counters: what it left out as up to date (in a dry run, also what it
/// would send).
#[allow(clippy::too_many_arguments)]
pub fn download<R: Read, W: Write + Send>(
    mut r: R,
    mut w: W,
    remote: &[u8],
    dst: &Path,
    opts: &Options,
    stats: &Stats,
    reporter: &dyn Reporter,
    changes: Option<&dyn Changes>,
) -> Result<Snapshot, NetError> {
    let one_file = start(&mut r, &mut w, Op::Download, remote, opts, changes, None)?;
    // One file, not a tree: into `dst` when that is a directory, else to `dst` itself.
    let target = one_file
        .map(|name| one_file_target(dst, name))
        .transpose()?;
    let w = Mutex::new(w);
    let send = |batch: &[u8]| {
        let mut w = w.lock().unwrap_or_else(PoisonError::into_inner);
        write_frame(&mut *w, Kind::Manifest, batch)
    };
    match &target {
        Some((dir, name)) => send_manifest_one(dir, name, opts.checksum, &send)?,
        None => send_manifest(dst, opts.checksum, opts.threads, &send)?,
    }
    let mut w = w.into_inner().unwrap_or_else(PoisonError::into_inner);
    let member = target.as_ref().map_or(&[][..], |(_, name)| name.as_slice());
    write_frame(&mut w, Kind::ManifestEnd, member)?;
    w.flush()?;
    let dst = target.as_ref().map_or(dst, |(dir, _)| dir.as_path());
    let mut inbound = Inbound::new(&mut r, reporter).with_changes(changes);
    let ropts = ReceiveOptions {
        threads: opts.threads,
        checksum: opts.checksum,
        verify: opts.verify,
        mirror: opts.mirror,
        rules: Some(&opts.walk.rules),
        changes,
    };
    let mut reply = |kind: Kind, payload: &[u8]| {
        write_frame(&mut w, kind, payload)?;
        w.flush()
    };
    receive_tree(
        &mut inbound,
        Some(dst),
        &ropts,
        None,
        &mut reply,
        stats,
        reporter,
    )?;
    read_done(&mut r, reporter, changes, None)
}
