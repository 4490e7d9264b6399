//! The serving end: one request over one connection, for `ferry serve --stdio` and
//! for each connection of the daemon ([`crate::daemon`]).
//!
//! The client names a path; the server reads and writes only beneath it. A path with
//! a `..` component (or a NUL, or none at all) is refused before anything is touched;
//! below the path, members are placed by the unpack code, which refuses `..`, never
//! writes through a symlink and keeps hardlinks inside the destination, and the
//! sender's walk never follows a symlink. A relative path is taken from the server's
//! working directory (the user's home, under ssh), as rsync and scp take it.
//!
//! The daemon serves a root: a request's path is taken beneath it (a leading `/`
//! too), each component opened from the root's descriptor without following a
//! symlink when the job uses it, and the job then works in the directory it opened,
//! whatever is renamed or linked meanwhile ([`crate::beneath`]). A download there
//! never follows a symlink (`-L` is refused), as none may lead out of the root. It
//! checks the client's token, refuses uploads when read-only, and admits the job only
//! when a place is free ([`Admission`]); an upload runs when its turn comes among
//! those running, and its data then moves in buffers of the daemon's one pool.

use crate::admission::{Admission, Ticket};
use crate::beneath::{relative, Held, Root};
use crate::charge::Charge;
use crate::frame::{write_frame, Kind};
use crate::handshake::read_request;
use crate::manifest::{send_manifest, send_manifest_one, DstListing};
use crate::preauth::Pending;
use crate::proto::{encode_accept, encode_done, read_hello, send_fatal, send_hello, Op, Request};
use crate::stream::{lock, next_frame, FrameReporter, Inbound, Outbound};
use crate::transfer::{receive_tree, send_tree, ReceiveOptions, SendOptions, Source, SourceWalk};
use crate::NetError;
use ferry_core::changes::Changes;
use ferry_core::error::Counting;
use ferry_core::pool::{BufferPool, Share};
use ferry_core::Stats;
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How long a download waits for room in the memory budget for its client's
/// manifest before it is refused.
const MEMORY_WAIT: Duration = Duration::from_secs(10);

/// How the server works.
#[derive(Clone, Default)]
pub struct ServeConfig {
    /// Workers for walking and writing trees.
    pub threads: usize,
    /// Requests' paths are taken beneath this directory (the daemon's `--root`),
    /// opened once.
    pub root: Option<Arc<Root>>,
    /// Uploads are refused.
    pub read_only: bool,
    /// The shared secret a client must send (`--token-file`).
    pub token: Option<Arc<[u8]>>,
    /// Places for jobs: one is taken before a job runs.
    pub admission: Option<Arc<Admission>>,
    /// The pool an upload's data buffers come from, and how many of them one
    /// connection may hold at once.
    pub pool: Option<(Arc<BufferPool>, usize)>,
}

/// How a served connection ended.
#[derive(Debug)]
pub enum Served {
    /// The job ran; this many paths failed (each told to the client).
    Done {
        /// Paths that failed.
        errors: u64,
    },
    /// The job could not run or go on; the client was told why (as far as the
    /// connection allowed).
    Stopped(NetError),
}

/// The path a request names, or why it is refused.
pub fn confined_path(raw: &[u8]) -> Result<PathBuf, NetError> {
    if raw.is_empty() || raw.contains(&0) {
        return Err(NetError::Refused(
            "the remote path is empty or holds a NUL byte".into(),
        ));
    }
    let path = Path::new(OsStr::from_bytes(raw));
    if path.components().any(|c| c == Component::ParentDir) {
        return Err(NetError::Refused(format!(
            "{}: refused: a remote path may not contain `..`",
            ferry_core::entry::escaped(raw)
        )));
    }
    Ok(path.to_path_buf())
}

/// Where a request's path is: as named (`--stdio`, the user's own account), or
/// beneath the daemon's root, opened from its descriptor when used.
enum Place {
    Named(PathBuf),
    Beneath(Arc<Root>, PathBuf),
}

/// A directory or file a job works on: by name, or held open.
enum Target {
    Named(PathBuf),
    Held(Held),
}

impl Target {
    fn path(&self) -> &Path {
        match self {
            Target::Named(p) => p,
            Target::Held(h) => h.path(),
        }
    }
}

impl Place {
    fn of(config: &ServeConfig, request: &Request) -> Result<Place, NetError> {
        Ok(match &config.root {
            Some(root) => Place::Beneath(root.clone(), relative(&request.path)?),
            None => Place::Named(confined_path(&request.path)?),
        })
    }

    /// An upload's destination: `None` where it is missing (beneath a root) and not
    /// to be made; made, with its missing parents, when `make`.
    fn upload_dir(&self, make: bool) -> Result<Option<Target>, NetError> {
        match self {
            Place::Named(p) => Ok(Some(Target::Named(p.clone()))),
            Place::Beneath(root, rel) => Ok(root.dir(rel, make)?.map(Target::Held)),
        }
    }

    /// Where an upload of one file named `name` goes, as `cp` puts it: into the path
    /// when that is a directory, else to the path itself. The directory to unpack
    /// into (`None` where it is missing and not to be made; made when `make`), and the
    /// member's name there.
    fn one_file_dir(&self, name: &[u8], make: bool) -> Result<(Option<Target>, Vec<u8>), NetError> {
        match self {
            Place::Named(p) => {
                let (dir, member) = crate::client::one_file_target(p, name.to_vec())?;
                Ok((Some(Target::Named(dir)), member))
            }
            Place::Beneath(root, rel) => {
                if let Some(dir) = root.dir(rel, false)? {
                    return Ok((Some(Target::Held(dir)), name.to_vec()));
                }
                let member = rel
                    .file_name()
                    .map(|n| n.as_bytes().to_vec())
                    .ok_or_else(|| NetError::Refused("the remote path names no file".into()))?;
                let parent = rel.parent().unwrap_or(Path::new(""));
                Ok((root.dir(parent, make)?.map(Target::Held), member))
            }
        }
    }

    /// A download's source, and the walk to send it with. Beneath a root, no symlink
    /// is followed (`-L` is refused: one could lead out of the root); a single file
    /// is sent through the one link to its descriptor (see [`crate::beneath`]).
    fn download_source(&self, walk: &SourceWalk) -> Result<(Target, SourceWalk), NetError> {
        match self {
            Place::Named(p) => Ok((Target::Named(p.clone()), walk.clone())),
            Place::Beneath(root, rel) => {
                if walk.dereference {
                    return Err(NetError::Refused(
                        "-L (--dereference): refused by a server with a root, where a \
                         symlink could lead out of it"
                            .into(),
                    ));
                }
                let held = root.source(rel)?;
                let walk = SourceWalk {
                    dereference: held.is_single(),
                    ..walk.clone()
                };
                Ok((Target::Held(held), walk))
            }
        }
    }
}

/// The name of a download's source when it is one file (not walked as a tree).
fn single_name(src: &Target, walk: &SourceWalk) -> Option<Vec<u8>> {
    let single = match src {
        Target::Held(held) => held.is_single(),
        Target::Named(p) => !walk.walks_as_tree(p),
    };
    let name = src.path().file_name().map(|n| n.as_bytes().to_vec());
    single.then_some(name).flatten()
}

/// What the daemon checks before a job (the token was, in the handshake): read-only,
/// a free place.
fn admit(config: &ServeConfig, request: &Request) -> Result<Option<Ticket>, NetError> {
    if config.read_only && request.op == Op::Upload {
        return Err(NetError::Refused(
            "this server is read-only (--read-only): uploads are refused".into(),
        ));
    }
    match &config.admission {
        None => Ok(None),
        Some(gate) => gate.enter().map(Some).ok_or_else(|| {
            NetError::Refused(format!(
                "server busy: {} clients are being served; try again later",
                gate.max()
            ))
        }),
    }
}

/// What one upload may use of the daemon's workers and buffers, given the uploads
/// running when it starts (see [`crate::admission`]: admitted ones past the runners
/// queue): the whole of both alone, an even part of them among many (at least two
/// workers and two buffers where so many are allowed, so reading and writing overlap
/// and a worker waiting on the filesystem leaves another to write). Far more writers
/// than cores only contend: with 128 clients of four workers and eight buffers each,
/// the daemon spent twice the CPU of one buffer each; but with 16 uploads running at
/// 128 clients, two workers each moved 348 MB/s where one moved 321 (by hand, loaded).
struct FairShare {
    threads: usize,
    buffers: usize,
}

impl FairShare {
    fn now(config: &ServeConfig) -> Self {
        let jobs = config.admission.as_ref().map_or(1, |a| a.running().max(1));
        let threads = (config.threads / jobs).max(config.threads.min(2)).max(1);
        let buffers = match &config.pool {
            Some((pool, cap)) if *cap > 1 => (*cap).min((pool.capacity() / jobs).max(2)),
            Some((_, cap)) => *cap,
            None => 1,
        };
        FairShare { threads, buffers }
    }
}

/// Serves one request read from `input`, answering on `output`. An error is returned
/// only where the client could not be told (the handshake failed, or the connection
/// did); otherwise the outcome says how it went.
pub fn serve<R: Read, W: Write + Send + 'static>(
    input: R,
    output: W,
    config: &ServeConfig,
) -> Result<Served, NetError> {
    serve_pending(input, output, config, None)
}

/// As [`serve`], for a daemon's connection in its handshake (`pending`, whose limits
/// apply until the request is read).
pub fn serve_pending<R: Read, W: Write + Send + 'static>(
    mut input: R,
    mut output: W,
    config: &ServeConfig,
    pending: Option<&mut Pending>,
) -> Result<Served, NetError> {
    read_hello(&mut input)?;
    send_hello(&mut output)?;
    let request = match read_request(&mut input, config.token.as_deref(), pending) {
        Ok(read) => read,
        Err(e) => {
            send_fatal(&mut output, &e.to_string());
            return Err(e);
        }
    };
    let stats = Stats::default();
    let out = Outbound::new(output, request.as_ref().is_ok_and(|r| r.compress)).shared();
    let result = request.and_then(|request| {
        let ticket = admit(config, &request)?;
        let place = Place::of(config, &request)?;
        // A download's source is opened first: the answer says if it is one file.
        let source = match request.op {
            Op::Download => Some(place.download_source(&request.walk)?),
            Op::Upload => None,
        };
        let one_file = source
            .as_ref()
            .and_then(|(src, walk)| single_name(src, walk));
        lock(&out).frame(Kind::Accept, &encode_accept(one_file.as_deref()))?;
        let messages = FrameReporter(out.clone());
        let reporter = Counting {
            inner: &messages,
            stats: &stats,
        };
        match request.op {
            Op::Upload => {
                // The destination as it is now: the manifest tells of it, and the
                // data goes into this same directory, whatever is renamed meanwhile.
                let one = request.one_file.as_deref();
                let (found, member) = match one {
                    None => (place.upload_dir(false)?, None),
                    Some(name) => {
                        let (dir, member) = place.one_file_dir(name, false)?;
                        (dir, Some(member))
                    }
                };
                let send = |batch: &[u8]| lock(&out).frame(Kind::Manifest, batch);
                match (&found, &member) {
                    (None, _) => {}
                    (Some(dst), None) => {
                        send_manifest(dst.path(), request.checksum, config.threads, &send)?
                    }
                    (Some(dst), Some(m)) => {
                        send_manifest_one(dst.path(), m, request.checksum, &send)?
                    }
                }
                let member_bytes = member.as_deref().unwrap_or_default();
                lock(&out).frame(Kind::ManifestEnd, member_bytes)?;
                // Queued behind the uploads running, holding no buffer or worker; the
                // client, told what the server has, starts sending meanwhile, so its
                // first bytes are waiting in the socket when this upload's turn comes.
                let _running = ticket.as_ref().map(Ticket::run);
                let dry_run = request.mirror.dry_run;
                // A dry run makes nothing, the destination either.
                let dst = match (found, dry_run) {
                    (Some(dst), _) => Some(dst),
                    (None, true) => None,
                    (None, false) => {
                        let made = match one {
                            None => place.upload_dir(true)?,
                            Some(name) => place.one_file_dir(name, true)?.0,
                        };
                        Some(made.ok_or_else(|| {
                            NetError::Refused("the destination could not be made".into())
                        })?)
                    }
                };
                if let Some(Target::Held(held)) = &dst {
                    if held.made() {
                        // Made here rather than by the unpack, which counts its own.
                        Stats::bump(&stats.dirs);
                    }
                }
                let mut inbound = Inbound::new(&mut input, &reporter);
                let fair = FairShare::now(config);
                let share = config
                    .pool
                    .as_ref()
                    .map(|(p, _)| Share::new(p.clone(), fair.buffers));
                let opts = ReceiveOptions {
                    threads: fair.threads,
                    checksum: request.checksum,
                    verify: request.verify,
                    mirror: request.mirror,
                    rules: Some(&request.walk.rules),
                    changes: request.mirror.changes.then_some(&messages as &dyn Changes),
                };
                let mut reply = |kind: Kind, payload: &[u8]| lock(&out).frame(kind, payload);
                receive_tree(
                    &mut inbound,
                    dst.as_ref().map(Target::path),
                    &opts,
                    share.as_ref(),
                    &mut reply,
                    &stats,
                    &reporter,
                )
            }
            Op::Download => {
                let (src, walk) = source.ok_or_else(|| NetError::frame("no source"))?;
                let mut charge = config
                    .pool
                    .as_ref()
                    .map(|(pool, _)| Charge::new(pool, MEMORY_WAIT));
                let manifest = DstListing::read_charged(&mut input, &reporter, charge.as_mut())?;
                let how = SendOptions {
                    checksum: request.checksum,
                    walk: &walk,
                    mirror: request.mirror,
                    changes: request.mirror.changes.then_some(&messages as &dyn Changes),
                };
                let named;
                let from = match (&one_file, &manifest.member) {
                    (None, _) => Source::Tree(src.path()),
                    (Some(_), Some(member)) => {
                        named = [(member.clone(), src.path().to_path_buf())];
                        Source::Named(&named)
                    }
                    (Some(_), None) => {
                        return Err(NetError::frame("no name to send the one file under"))
                    }
                };
                let mut replies = || next_frame(&mut input, &reporter, None);
                let sent = send_tree(from, &out, &manifest, &how, &mut replies, &stats, &reporter);
                // The source itself could not be read: said by the path the client named.
                sent.map_err(|e| match e {
                    NetError::Path(e) if e.path.is_root() => NetError::Refused(format!(
                        "{}: {}: {}",
                        ferry_core::entry::escaped(&request.path),
                        e.op,
                        e.os
                    )),
                    e => e,
                })
            }
        }
    });
    let mut out = lock(&out);
    match result {
        Ok(()) => {
            write_frame(out.writer(), Kind::Done, &encode_done(&stats.snapshot()))?;
            out.writer().flush()?;
            Ok(Served::Done {
                errors: stats.snapshot().errors,
            })
        }
        Err(e) => {
            send_fatal(out.writer(), &e.to_string());
            Ok(Served::Stopped(e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_components_are_refused() {
        for bad in [&b"../x"[..], b"a/../../x", b"/a/..", b"", b"a\0b"] {
            assert!(confined_path(bad).is_err(), "{bad:?}");
        }
        for good in [&b"x"[..], b"/tmp/x", b"./a:b", b"a/..b"] {
            assert!(confined_path(good).is_ok(), "{good:?}");
        }
    }

    /// Serves what a client sent as `bytes`, with one worker, answering into nothing.
    fn serve_bytes(bytes: &[u8]) -> Result<Served, NetError> {
        let config = ServeConfig {
            threads: 1,
            ..ServeConfig::default()
        };
        serve(bytes, Vec::new(), &config)
    }

    #[test]
    fn garbage_ends_in_an_error_never_a_panic() {
        for seed in 0..200u64 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let len = rng.usize(0..4096);
            let mut bytes: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
            // Half of them start as a client would, so the frames behind are parsed.
            if seed % 2 == 0 {
                // Never a request: a random one could name a real path.
                if bytes.first() == Some(&(Kind::Request as u8)) {
                    bytes[0] = 0;
                }
                let mut hello = Vec::new();
                send_hello(&mut hello).expect("hello");
                bytes.splice(0..0, hello);
            }
            let served = serve_bytes(&bytes);
            assert!(
                !matches!(served, Ok(Served::Done { .. })),
                "seed {seed} was served"
            );
        }
    }

    /// An upload request into a fresh directory, then garbage: an error, and nothing
    /// made (nothing was an archive).
    #[test]
    fn an_upload_of_garbage_is_stopped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let dst = dir.path().join("dst");
        for seed in 0..50u64 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut bytes = Vec::new();
            send_hello(&mut bytes).expect("hello");
            let request = Request {
                op: Op::Upload,
                path: dst.as_os_str().as_bytes().to_vec(),
                checksum: false,
                compress: seed % 2 == 0,
                verify: false,
                walk: Default::default(),
                mirror: Default::default(),
                one_file: None,
            };
            write_frame(&mut bytes, Kind::Request, &request.encode()).expect("frame");
            let kind = [Kind::Data, Kind::ZData][rng.usize(0..2)];
            let junk: Vec<u8> = (0..rng.usize(0..3000)).map(|_| rng.u8(..)).collect();
            write_frame(&mut bytes, kind, &junk).expect("frame");
            bytes.extend((0..rng.usize(0..100)).map(|_| rng.u8(..)));
            let served = serve_bytes(&bytes);
            assert!(
                matches!(served, Ok(Served::Stopped(_))),
                "seed {seed}: {served:?}"
            );
        }
        assert!(!dst.exists());
    }
}
