//! The two roles, whichever end plays them: the sender packs its tree into data
//! frames, leaving out what the receiver's manifest shows up to date; the receiver
//! unpacks the stream into its destination with the code `ferry unpack -` runs, and
//! checks each file's content against the hash the archive's index records for it.

use crate::apply::{receive_plan, send_plan, Receiving};
use crate::deltas::{receive_deltas, send_deltas, Rebuilding};
use crate::frame::{Frame, Kind};
use crate::manifest::DstListing;
use crate::plan::{Plan, PlanOptions};
use crate::proto::Mirror;
use crate::stream::{lock, next_frame, DataWriter, Inbound, Shared};
use crate::NetError;
use ferry_archive::read::select::Selection;
use ferry_archive::read::tail::{check_tail_removing, TailError};
use ferry_archive::read::unpack::{unpack_stream_mirroring, UnpackOptions};
use ferry_archive::read::ArchiveError;
use ferry_archive::write::pack::{pack_named_omitting, pack_omitting, Output, PackOptions};
use ferry_core::changes::Changes;
use ferry_core::data::{Reflink, Sparse};
use ferry_core::delete::{DeleteLimit, DeleteOptions, SourceErrors, NOTHING_DELETED};
use ferry_core::error::Reporter;
use ferry_core::filter::Rules;
use ferry_core::pool::Share;
use ferry_core::Stats;
use rustix::fs::{Mode, OFlags};
use std::io::{self, BufWriter, Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a file whose content differs from its index's hash is told to be.
pub const DAMAGED: &str = "content differs from the hash the sender recorded for it \
                           (damaged on the way): removed, so a rerun copies it again";

/// What of the source tree is sent, as the client asked (`--exclude`/`--include`,
/// `-x`, `-L`, `-u`): the sender's walk does the choosing, whichever end sends.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceWalk {
    /// The filter rules, in order.
    pub rules: Rules,
    /// Stay on the source root's filesystem.
    pub one_file_system: bool,
    /// Follow symlinks and send what they point to.
    pub dereference: bool,
    /// Leave out files the receiver has with a later mtime (`-u`).
    pub keep_newer: bool,
}

impl SourceWalk {
    /// Whether `path` is sent as a tree (else as one file), as this walk takes it.
    pub fn walks_as_tree(&self, path: &Path) -> bool {
        let cfg = ferry_core::walk::WalkConfig {
            dereference: self.dereference,
            ..Default::default()
        };
        cfg.walks_as_tree(path)
    }
}

/// What the sender sends.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// One tree (or file), its root the destination's.
    Tree(&'a Path),
    /// Several trees or files, each under its name in the destination (`ferry copy a
    /// b HOST:DST`, `ferry copy proj HOST:bk/`); with `--delete`, only what lies below
    /// those names is deleted.
    Named(&'a [(Vec<u8>, PathBuf)]),
}

/// How the sender sends.
#[derive(Clone, Copy)]
pub struct SendOptions<'a> {
    /// Compare content, not size and mtime.
    pub checksum: bool,
    /// What of the source is sent.
    pub walk: &'a SourceWalk,
    /// Deleting, a dry run, changes told.
    pub mirror: Mirror,
    /// Told of every entry to be made or replaced (`-i`, `-v`).
    pub changes: Option<&'a dyn Changes>,
}

/// Packs `src` into `out`'s data frames, then `DataEnd`, leaving out what `manifest`
/// shows the receiver has (see [`crate::plan`]) and what `walk` leaves out; then the
/// plan's frames: what to delete (`--delete`, unless some of `src` could not be read)
/// and the metadata-only changes; then big changed files as deltas, the receiver's
/// signatures read from `replies`. In a dry run no data is sent, only the plan. Per-path
/// failures go to `reporter`; the result is for a source that cannot be read at all,
/// rules that cannot be used, or a connection that fails.
pub fn send_tree<W: Write + Send + 'static>(
    src: Source<'_>,
    out: &Shared<W>,
    manifest: &DstListing,
    how: &SendOptions<'_>,
    replies: &mut dyn FnMut() -> Result<Frame, NetError>,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<(), NetError> {
    let (walk, mirror) = (how.walk, how.mirror);
    let plan_opts = PlanOptions {
        checksum: how.checksum,
        keep_newer: walk.keep_newer,
        dry_run: mirror.dry_run,
        changes: how.changes,
        deltas: true,
    };
    let plan = Plan::new(manifest, plan_opts, stats);
    let filter = walk
        .rules
        .compile()
        .map_err(|e| NetError::Refused(e.to_string()))?
        .map(Arc::new);
    let opts = PackOptions {
        // Everything passes through memory on its way into a stream: hash it all, so
        // the receiver can check every file.
        hash: true,
        // Unpacked as it arrives, never cloned from: no padding to send.
        align: false,
        filter: filter.clone(),
        one_file_system: walk.one_file_system,
        dereference: walk.dereference,
        ..PackOptions::default()
    };
    let output = match mirror.dry_run {
        // Nothing is packed (the plan leaves every member out): the headers of the
        // directories go nowhere.
        true => Output::Stream(Box::new(io::sink())),
        false => Output::Stream(Box::new(BufWriter::with_capacity(
            1 << 20,
            DataWriter(out.clone()),
        ))),
    };
    // In a dry run the plan counts what would be sent; the pack counts nothing.
    let unpacked = Stats::default();
    let pack_stats = if mirror.dry_run { &unpacked } else { stats };
    let noted = SourceErrors::new(reporter);
    let packed = match src {
        Source::Tree(src) => {
            pack_omitting(src, output, &[], &opts, Some(&plan), pack_stats, &noted)
        }
        Source::Named(srcs) => {
            pack_named_omitting(srcs, output, &opts, Some(&plan), pack_stats, &noted)
        }
    };
    if let Err(e) = packed {
        // The archive could not be written: the connection failed; or the source
        // could not be read at all.
        return Err(match e.op {
            "write archive" => NetError::Io(e.os),
            _ => NetError::Path(e),
        });
    }
    if !mirror.dry_run {
        lock(out).end_data()?;
    }
    let deletions = match (mirror.delete, noted.any()) {
        (false, _) => Vec::new(),
        (true, true) => {
            reporter.warn(NOTHING_DELETED);
            Vec::new()
        }
        (true, false) => {
            let within: Option<Vec<&[u8]>> = match src {
                Source::Tree(_) => None,
                Source::Named(srcs) => Some(srcs.iter().map(|(n, _)| n.as_slice()).collect()),
            };
            plan.deletions(filter.as_deref(), mirror.delete_excluded, within.as_deref())
        }
    };
    let mut metas = plan.take_metas();
    metas.extend(plan.take_restores());
    send_plan(out, &deletions, &metas)?;
    send_deltas(src, &plan.take_candidates(), out, replies, stats, reporter)
}

/// How the receiver writes.
#[derive(Clone, Copy, Default)]
pub struct ReceiveOptions<'a> {
    /// Workers (placing a stream takes one today; see `unpack_stream`).
    pub threads: usize,
    /// Replace every file sent, whatever its size and mtime (the sender compared
    /// content and found it differs).
    pub checksum: bool,
    /// Re-read each file written and compare it with the data as read.
    pub verify: bool,
    /// Deleting, a dry run, changes told.
    pub mirror: Mirror,
    /// The copy's filter rules: what they exclude is kept when deleting.
    pub rules: Option<&'a Rules>,
    /// Told of every entry deleted or given new metadata (`-i`, `-v`).
    pub changes: Option<&'a dyn Changes>,
}

/// Unpacks the archive `input` carries into `dst`, then checks every file against the
/// content hash the index after the data records; one that differs is reported and
/// removed. Then carries out the plan's frames that follow (deletions, metadata-only
/// changes). In a dry run nothing is unpacked (none is sent), and the plan is only
/// told; `dst` is None only there, for a destination that does not exist. Last come
/// the deltas, answered through `reply`. Per-path
/// failures go to `reporter`.
#[allow(clippy::too_many_arguments)]
pub fn receive_tree<R: Read>(
    input: &mut Inbound<'_, R>,
    dst: Option<&Path>,
    opts: &ReceiveOptions<'_>,
    pool: Option<&Share>,
    reply: &mut dyn FnMut(Kind, &[u8]) -> io::Result<()>,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<(), NetError> {
    let filter = match opts.rules {
        Some(rules) => rules
            .compile()
            .map_err(|e| NetError::Refused(e.to_string()))?,
        None => None,
    };
    let limit = opts.mirror.max_delete.map(DeleteLimit::new);
    let deleting = DeleteOptions {
        filter: filter.as_ref(),
        excluded: opts.mirror.delete_excluded,
        dry_run: false,
        changes: opts.changes,
        limit: limit.as_ref(),
    };
    match (dst, opts.mirror.dry_run) {
        (_, true) => {}
        (Some(dst), false) => {
            let in_the_way = opts.mirror.delete.then_some(deleting);
            receive_archive(input, dst, opts, in_the_way, pool, stats, reporter)?;
        }
        (None, false) => return Err(NetError::Refused("no destination to write".into())),
    }
    let how = Receiving {
        mirror: opts.mirror,
        filter: filter.as_ref(),
        changes: opts.changes,
        limit: limit.as_ref(),
        stats,
        reporter,
    };
    let root = open_root(dst, opts.mirror.dry_run)?;
    receive_plan(input.reader(), root.as_ref(), &how)?;
    let rebuilding = Rebuilding {
        root: root.as_ref(),
        stats,
        reporter,
    };
    let changes = opts.changes;
    let mut frames = || next_frame(input.reader(), reporter, changes);
    receive_deltas(&mut frames, reply, &rebuilding)
}

/// The destination's root, open (None: a dry run into nothing).
fn open_root(dst: Option<&Path>, dry_run: bool) -> Result<Option<OwnedFd>, NetError> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    match dst.map(|dst| (dst, rustix::fs::open(dst, flags, Mode::empty()))) {
        None => Ok(None),
        Some((_, Ok(fd))) => Ok(Some(fd)),
        Some((_, Err(rustix::io::Errno::NOENT))) if dry_run => Ok(None),
        Some((dst, Err(e))) => Err(NetError::Refused(format!(
            "{}: open destination: {e}",
            dst.display()
        ))),
    }
}

/// Unpacks the archive stream into `dst` and checks it against its index; with
/// `--delete`, a directory where the source has a non-directory goes (`in_the_way`).
fn receive_archive<R: Read>(
    input: &mut Inbound<'_, R>,
    dst: &Path,
    opts: &ReceiveOptions<'_>,
    in_the_way: Option<DeleteOptions<'_>>,
    pool: Option<&Share>,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<(), NetError> {
    let uopts = UnpackOptions {
        reflink: Reflink::Auto,
        sparse: Sparse::Auto,
        checksum: opts.checksum,
        verify: opts.verify,
        threads: opts.threads.max(1),
        numeric_owner: false,
        dir_metadata: true,
        keep_old: false,
        // A big file cut short is the old version its rerun's delta builds on.
        keep_partial: true,
    };
    let all = Selection::all();
    let unpacked = unpack_stream_mirroring(
        &mut *input,
        dst,
        &uopts,
        &all,
        pool,
        in_the_way,
        stats,
        reporter,
    );
    let hashes = match unpacked {
        Ok(hashes) => hashes,
        Err(e) => return Err(input.take_failure().unwrap_or(NetError::Archive(e))),
    };
    let tail = check_tail_removing(&mut *input, hashes, dst, DAMAGED, reporter);
    match tail {
        Ok(_) if input.ended() => Ok(()),
        Ok(_) => Err(NetError::frame(
            "the archive stream did not end where it should",
        )),
        Err(e) => Err(input.take_failure().unwrap_or(match e {
            TailError::Read(e) => NetError::Io(e),
            TailError::Index(e) => NetError::Archive(ArchiveError::Index(e)),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::Outbound;
    use crate::test_support::Collect;

    /// A file damaged on the way is an error naming it, and is not left looking
    /// complete; the others arrive.
    #[test]
    fn a_file_damaged_on_the_way_is_named_and_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
        std::fs::create_dir(&src).expect("mkdir");
        let good = vec![b'g'; 10_000];
        let bad = vec![b'b'; 10_000];
        std::fs::write(src.join("good"), &good).expect("write");
        std::fs::write(src.join("bad"), &bad).expect("write");
        let out = Outbound::new(Vec::new(), false).shared();
        let quiet = Collect::default();
        let stats = Stats::default();
        let walk = SourceWalk::default();
        let how = SendOptions {
            checksum: false,
            walk: &walk,
            mirror: Mirror::default(),
            changes: None,
        };
        let from = Source::Tree(&src);
        let mut none = || Err(NetError::Closed);
        send_tree(
            from,
            &out,
            &DstListing::default(),
            &how,
            &mut none,
            &stats,
            &quiet,
        )
        .expect("send");
        let mut wire = std::mem::take(lock(&out).writer());
        let at = wire.windows(bad.len()).position(|w| w == bad.as_slice());
        wire[at.expect("data on the wire") + 5] = b'X';
        let seen = Collect::default();
        let mut inbound = Inbound::new(wire.as_slice(), &seen);
        let opts = ReceiveOptions::default();
        let into = Some(dst.as_path());
        let mut reply = |_: Kind, _: &[u8]| Ok(());
        receive_tree(
            &mut inbound,
            into,
            &opts,
            None,
            &mut reply,
            &Stats::default(),
            &seen,
        )
        .expect("receive");
        let lines = seen.0.into_inner().expect("lock");
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("bad: verify: content differs"),
            "{lines:?}"
        );
        assert!(!dst.join("bad").exists());
        assert_eq!(std::fs::read(dst.join("good")).expect("read"), good);
    }
}
