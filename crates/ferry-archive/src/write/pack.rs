//! `pack`: the local walker pushing a tree into a ferry archive.
//!
//! The walk lays every entry out at the end of the archive under a lock (its headers,
//! padding and data region at once) and records it in the index. Headers and small
//! files collect in a [`Block`] of memory; large files' data regions are moved on their
//! own. Into an archive file, [`crate::write::fill`]'s threads move those bytes in
//! parallel, by the cheapest path (cloned into the aligned region where the filesystem
//! allows, else copied in the kernel, else through memory). Into a pipe, they are
//! written in order through memory. Either way the index and footer follow the
//! end-of-archive blocks.

use super::fill::{
    files_per_block, fillers_within_open_files, jobs_in_flight, Fillers, Shared, OTHER_DESCRIPTORS,
};
use super::header::{HeaderEncoder, HeaderOwners};
use super::restamp::Restamp;
use super::stream_out::{Shared as StreamShared, StreamOut};
use crate::index::{IndexWriter, INDEX_MEMORY};
use ferry_core::data::{Mover, Reflink, Sparse};
use ferry_core::entry::{InodeKey, RelPath};
use ferry_core::error::{Error, OneEntry, Reporter, Result};
use ferry_core::limits::{open_files_each, workers_within};
use ferry_core::walk::{walk, walk_as, walk_one, WalkConfig, HELD_LEVELS};
use ferry_core::Stats;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::pack_sink::ArchiveSink;
pub use super::pack_sink::Omit;

/// Where the archive goes.
pub enum Output {
    /// A regular file: regions are written in place, data may be cloned into it.
    File(OwnedFd),
    /// A pipe or terminal: everything is written in order.
    Stream(Box<dyn Write + Send>),
}

/// How to pack.
#[derive(Clone, Debug)]
pub struct PackOptions {
    /// Walker threads. One keeps each directory's entries together in the archive.
    pub threads: usize,
    /// Clone policy for file data.
    pub reflink: Reflink,
    /// Hash cloned files' content into the index too (reading the shared blocks);
    /// every other file's is hashed anyway.
    pub hash: bool,
    /// Bytes of the index held in memory; beyond that it moves to a temporary file
    /// (see [`IndexWriter`]), so memory does not grow with the member count.
    pub index_memory: usize,
    /// Which entries to pack (`--exclude`, `--include`); None: all.
    pub filter: Option<std::sync::Arc<ferry_core::filter::Filter>>,
    /// Stay on the filesystem of SRC (`-x`): a mount point is packed, empty.
    pub one_file_system: bool,
    /// Follow symlinks (`-L`): see [`WalkConfig::dereference`].
    pub dereference: bool,
    /// Start large files' data on 4 KiB ([`ALIGN`]), so it can be cloned in and out.
    /// Off for archives nothing will clone from (a stream unpacked as it arrives, one
    /// about to be compressed): the padding, an eighth of the kernel tree's archive,
    /// would only be bytes to send or compress. Files are then not cloned in.
    pub align: bool,
    /// What members get in place of what the source says (see [`Restamp`]).
    pub restamp: Restamp,
    /// Walk each directory in name order (`--sort=name`), with one walker whatever
    /// [`PackOptions::threads`] says, so the archive's order does not depend on the
    /// filesystem or on timing.
    pub by_name: bool,
    /// Leave the times' nanoseconds and the atime of members that need no pax header
    /// otherwise to the index (see [`HeaderEncoder::times_in_index`]): for archives
    /// (`ferry pack`), whose readers read the index; off for what is read without it.
    pub times_in_index: bool,
    /// Store the index packed in zstd frames (see [`crate::index::packed`]): for an
    /// archive not compressed as a whole, read by this version of ferry on.
    pub pack_index: bool,
}

impl Default for PackOptions {
    fn default() -> Self {
        PackOptions {
            threads: 1,
            reflink: Reflink::Auto,
            hash: false,
            index_memory: INDEX_MEMORY,
            filter: None,
            one_file_system: false,
            dereference: false,
            align: true,
            times_in_index: false,
            pack_index: false,
            restamp: Restamp::default(),
            by_name: false,
        }
    }
}

/// Filler threads for an archive file: as many as copy's workers. Packing the kernel
/// tree on ext4 (warm cache) took 1.14-1.31 s with 2 fillers, 0.98-1.22 s with 16.
/// Fewer when the limit on open files is low (see [`fillers_within_open_files`]).
fn fillers() -> usize {
    fillers_within_open_files(ferry_core::copy::default_threads())
}

/// Descriptors each walker beyond the first keeps open: its chain of directories (those
/// with subdirectories waiting, down to [`HELD_LEVELS`] or deeper where descriptors are
/// spare, see [`held_levels`]; deeper ones only while it works in them: room for 20
/// levels) and the file it is laying out. The first walker's are among the fillers'
/// [`OTHER_DESCRIPTORS`].
const OPEN_FILES_PER_WALKER: u64 = 20 + 1;

/// At most `asked` walkers, as many as the limit on open files leaves room for beside
/// `fillers` fillers, each with a job in flight and one queued; and the descriptors
/// the extra walkers hold.
fn walkers_within_open_files(
    asked: usize,
    fillers: usize,
    reporter: &dyn Reporter,
) -> (usize, u64) {
    if asked <= 1 {
        return (1, 0);
    }
    let walkers = workers_within(
        asked,
        OPEN_FILES_PER_WALKER,
        OTHER_DESCRIPTORS + jobs_in_flight(fillers),
        reporter,
    );
    (walkers, (walkers as u64 - 1) * OPEN_FILES_PER_WALKER)
}

/// How many levels of directories each of `walkers` walkers keeps open: those
/// [`OTHER_DESCRIPTORS`] (and [`OPEN_FILES_PER_WALKER`]) leave room for, and one more
/// for each descriptor its share of what the fillers' blocks of `files_per_block` files
/// leave spare (a walker holds only source directories, one descriptor a level), so
/// only a tree deeper than the limit on open files allows pays for letting go of them.
fn held_levels(walkers: usize, fillers: usize, files_per_block: usize, walkers_hold: u64) -> usize {
    let blocks = jobs_in_flight(fillers) * files_per_block as u64;
    let reserved = OTHER_DESCRIPTORS + walkers_hold + blocks;
    // The share is at least one, even of nothing.
    HELD_LEVELS + open_files_each(walkers, reserved, usize::MAX) - 1
}

/// Read-ahead threads for the single walker. With the fillers reading data in
/// parallel, more of them gain little on a cold cache (kernel tree, ext4: 3.38-3.67 s
/// with none, 3.16-3.26 s with 4). On a warm one they stop (see
/// `ferry_core::prefetch`): by hand, 0.89-0.97 s against 1.06-1.29 s when they read
/// ahead anyway, and 0.91-0.99 s with none.
const PREFETCH: usize = 4;

/// Packs the tree `src` into `out`. Per-path failures go to `reporter` (and count in
/// `stats.errors` only if the reporter counts them); a failure to write the archive
/// ends the job with an error.
pub fn pack(
    src: &Path,
    out: Output,
    skip: &[InodeKey],
    opts: &PackOptions,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<u64> {
    pack_omitting(src, out, skip, opts, None, stats, reporter)
}

/// Packs several trees (or single files) into one archive, each under its own name
/// (`ferry pack a b A`, as `tar -cf A a b`): `srcs` gives each name and where it is.
/// There is no root member. The names must differ (the caller checks).
pub fn pack_named(
    srcs: &[(Vec<u8>, PathBuf)],
    out: Output,
    skip: &[InodeKey],
    opts: &PackOptions,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<u64> {
    pack_roots(Roots::Named(srcs), out, skip, opts, None, stats, reporter)
}

/// What a pack walks: one tree, its root the archive's; or several, each under a name.
#[derive(Clone, Copy)]
enum Roots<'a> {
    One(&'a Path),
    Named(&'a [(Vec<u8>, PathBuf)]),
}

/// [`pack`], leaving out the members `omit` says the receiver has.
pub fn pack_omitting(
    src: &Path,
    out: Output,
    skip: &[InodeKey],
    opts: &PackOptions,
    omit: Option<&dyn Omit>,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<u64> {
    pack_roots(Roots::One(src), out, skip, opts, omit, stats, reporter)
}

/// [`pack_omitting`] of several trees or files, each under its name (as
/// [`pack_named`] packs them).
pub fn pack_named_omitting(
    srcs: &[(Vec<u8>, PathBuf)],
    out: Output,
    opts: &PackOptions,
    omit: Option<&dyn Omit>,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<u64> {
    pack_roots(Roots::Named(srcs), out, &[], opts, omit, stats, reporter)
}

#[allow(clippy::too_many_arguments)]
fn pack_roots(
    roots: Roots<'_>,
    out: Output,
    skip: &[InodeKey],
    opts: &PackOptions,
    omit: Option<&dyn Omit>,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<u64> {
    let (file, stream) = match out {
        Output::File(fd) => (Some(fd), None),
        Output::Stream(w) => (None, Some(w)),
    };
    // Holes in the source are found here and stored as sparse runs; zero blocks in
    // dense files are not looked for, so the kernel may move the data.
    // Data off 4 KiB cannot be cloned in.
    let reflink = if opts.align {
        opts.reflink
    } else {
        Reflink::Never
    };
    // Every member whose bytes are read or copied gets a content hash; a clone, which
    // shares the very blocks, only with --hash.
    let mut mover = Mover::new(reflink, Sparse::Never);
    mover.hash_clones = opts.hash;
    let shared = file
        .as_ref()
        .map(|f| Shared::new(f.as_fd(), &mover, true, stats, reporter));
    let filler_count = if shared.is_some() { fillers() } else { 0 };
    let stream_shared = StreamShared::default();
    let asked = if opts.by_name { 1 } else { opts.threads };
    let (threads, walkers_hold) = walkers_within_open_files(asked, filler_count, reporter);
    std::thread::scope(|scope| {
        let fillers = shared
            .as_ref()
            .map(|sh| Fillers::start(scope, sh, filler_count));
        let per_block = files_per_block(filler_count, walkers_hold);
        let cfg = WalkConfig {
            threads,
            skip: skip.to_vec(),
            // One walker opens one file at a time: a few threads open files ahead of it,
            // so it finds their inodes in memory (the fillers read the data in parallel).
            prefetch: if threads == 1 { PREFETCH } else { 0 },
            held_levels: held_levels(threads, filler_count, per_block, walkers_hold),
            filter: opts.filter.clone(),
            one_file_system: opts.one_file_system,
            dereference: opts.dereference,
            by_name: opts.by_name,
            ..WalkConfig::default()
        };
        let index = IndexWriter::with_memory_limit(opts.index_memory);
        let stream = stream.map(|w| StreamOut::start(scope, w, &stream_shared, stats, reporter));
        let headers = match opts.align {
            true => HeaderEncoder::default(),
            false => HeaderEncoder::unaligned(),
        };
        let r = &opts.restamp;
        let forced_name = |o: &Option<super::restamp::ForcedOwner>| o.as_ref()?.name.clone();
        let headers = headers
            .times_in_index(opts.times_in_index)
            .pax_header_mtime(r.pax_header_mtime);
        let headers = headers.with_owners(HeaderOwners {
            numeric: r.numeric_owner,
            user: forced_name(&r.user),
            group: forced_name(&r.group),
        });
        let sink = ArchiveSink::new(stream, fillers, (index, headers), per_block, stats, omit)
            .restamping(r)
            .packing_index(opts.pack_index);
        let walked = match roots {
            Roots::One(src) if cfg.walks_as_tree(src) => walk(src, &sink, &cfg, reporter),
            Roots::One(src) => pack_one(src, None, &sink, &cfg, reporter),
            Roots::Named(srcs) => srcs.iter().try_for_each(|(name, src)| {
                if cfg.walks_as_tree(src) {
                    let name = RelPath::from_bytes(name.clone());
                    walk_as(src, name, &sink, &cfg, reporter)
                } else {
                    pack_one(src, Some(name), &sink, &cfg, reporter)
                }
            }),
        };
        let finished = sink
            .finish(file.as_ref().map(|f| f.as_fd()))
            .map_err(|e| Error::dst(&RelPath::root(), "write archive", e));
        walked?;
        finished
    })
}

/// Packs `src`, which is not a directory, as the one member named as it is (no member
/// for a root directory). A `src` that is missing is an error; one that cannot be read
/// is reported, as a file in a tree is, and leaves an empty archive, as GNU tar does.
fn pack_one(
    src: &Path,
    name: Option<&[u8]>,
    sink: &ArchiveSink<'_, '_>,
    cfg: &WalkConfig,
    reporter: &dyn Reporter,
) -> Result<()> {
    let one = OneEntry {
        inner: reporter,
        dst_is_entry: true,
    };
    // A source that is not there is no job at all.
    std::fs::symlink_metadata(src).map_err(|e| Error::new(&RelPath::root(), "open source", e))?;
    if let Err(e) = walk_one(src, name, sink, (), cfg, &one) {
        one.error(&e);
    }
    Ok(())
}
