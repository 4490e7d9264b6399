//! The parallel walker: the local-tree source.
//!
//! Work is handed out by directory (CW-FFS, seed 004): a worker takes a whole directory,
//! reads it, and pushes the entries of that directory into the sink together, in inode
//! order (which follows the on-disk layout, so a cold cache reads sequentially). A
//! directory with very many entries is cut into chunks that a bounded number of workers
//! share. Subdirectories go on a shared stack, so the walk is depth first.
//!
//! A directory's descriptors are held by the jobs that work in it (reading it, pushing
//! its entries, opening its subdirectories) and closed after the last. The first
//! [`WalkConfig::held_levels`] levels keep the sink's handle until the directory is
//! finished after its subtree, and their subdirectories waiting on the stack keep both.
//! Deeper directories keep nothing while no job works in them: they are opened again
//! when a subdirectory job starts and to be finished, through `..` of a directory open
//! below them (as `fts` climbs back), or down from the nearest one open above, and
//! checked to be the same directories (see [`DirHandle`] for the sink's side). So the
//! descriptors held do not grow with the depth of the tree, and a tree far deeper than
//! the limit on open files allows is walked whole.
//!
//! Every name is opened relative to its parent's descriptor with `O_NOFOLLOW`, so paths
//! deeper than `PATH_MAX` work and no symlink is ever followed out of the tree.

use crate::entry::{Entry, EntryKind, InodeKey, RelPath};
use crate::error::{Context, Error, Reporter, Result};
use crate::filter::Filter;
use crate::local::{open_dir, open_dir_following};
use crate::meta;
use crate::prefetch::Prefetch;
use crate::pseudo;
use crate::sink::{DirHandle, FileData, TreeSink};
use crate::xattr;
use node::{Entered, Node, OpenDir, Opened};
use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};

mod leaf;
mod names;
mod node;
mod opener;

pub use opener::FileOpener;

pub use names::BATCH;
pub(crate) use names::{read_names, Name};

/// How the walk is spread over threads.
#[derive(Clone, Debug)]
pub struct WalkConfig {
    /// Worker threads.
    pub threads: usize,
    /// A directory with more entries than this is shared: cut into chunks of at least
    /// this many entries, at most `max_ways` of them.
    pub chunk: usize,
    /// At most this many workers share one directory.
    pub max_ways: usize,
    /// Directories or files never to visit (the destination, or the archive being
    /// written and the one it replaces, when they lie in the source).
    pub skip: Vec<InodeKey>,
    /// Threads reading files ahead of the workers (see [`crate::prefetch`]); for a walk
    /// with one worker, which reads one file at a time.
    pub prefetch: usize,
    /// Directories at most this many levels below the root keep the sink's handle open
    /// until their subtree is done; deeper ones let go of their descriptors while no job
    /// works in them, and open them again when needed (a few calls more a directory:
    /// see [`held_levels_within`]).
    pub held_levels: usize,
    /// A directory that cannot be opened for want of permission is still pushed into
    /// the sink, empty, with its metadata (its error reported all the same), as `cp -a`
    /// makes it; else it is left out, as GNU tar leaves it out of an archive.
    pub unreadable_dirs: bool,
    /// Which entries to take (see [`crate::filter`]): a name it leaves out is not
    /// looked at any further (an excluded directory is not opened). None: all.
    pub filter: Option<Arc<Filter>>,
    /// Stay on the filesystem of the root (`-x`, `--one-file-system`): a directory on
    /// another one (a mount point) is pushed into the sink, with its metadata, but not
    /// read, as `cp -x`, `rsync -x` and `tar --one-file-system` leave it.
    pub one_file_system: bool,
    /// Follow symlinks (`-L`, `--dereference`): a symlink is walked as what it points
    /// to (a directory as a directory, a file as a file), as `cp -L`, `rsync -L` and
    /// `tar -h` take it. A symlink to nothing, or to a directory above it (a loop), is
    /// reported and left out. Every directory then keeps its descriptors until its
    /// subtree is done (`..` of a linked directory is not the directory it was
    /// entered from), so the depth walked is bounded by the limit on open files.
    pub dereference: bool,
    /// Take each directory's entries in the order of their names' bytes (`tar
    /// --sort=name`), each subdirectory's tree where its name falls, instead of in
    /// batches by inode number with subdirectories after the leaves. With one worker the
    /// order is then the same wherever and however often the tree is walked. A
    /// directory's names are all held in memory at once (not in [`BATCH`]es).
    pub by_name: bool,
}

/// While workers have nothing to do, a directory's leaves are shared in chunks of at
/// least this many (else [`WalkConfig::chunk`]).
const STARVED_CHUNK: usize = 8;

/// The default [`WalkConfig::held_levels`]: trees are rarely deeper, and a worker's
/// descriptors stay within the 20 levels callers leave room for, with those it works
/// with below them.
pub const HELD_LEVELS: usize = 16;

/// Descriptors a worker has open besides the directories it holds: the directory it
/// works in and the one it worked in last (source and destination each), the
/// subdirectory it is opening, and a file pair.
const WORKING_DESCRIPTORS: u64 = 8;

/// The [`WalkConfig::held_levels`] for workers that may each keep `each` descriptors
/// open: two a level (a source and a destination directory). Letting go costs a few
/// calls a directory (`strace -f -c ferry copy` of 1,539 directories 18 to 21 levels
/// deep holding 10,000 files, letting go past 16: 14% more calls in all), so where the
/// limit on open files leaves room, as it mostly does, directories are held as deep as
/// it allows.
pub fn held_levels_within(each: u64) -> usize {
    (each.saturating_sub(WORKING_DESCRIPTORS) / 2) as usize
}

impl Default for WalkConfig {
    fn default() -> Self {
        WalkConfig {
            threads: 8,
            chunk: 256,
            max_ways: 4,
            skip: Vec::new(),
            prefetch: 0,
            held_levels: HELD_LEVELS,
            unreadable_dirs: false,
            filter: None,
            one_file_system: false,
            dereference: false,
            by_name: false,
        }
    }
}

impl WalkConfig {
    /// Whether `src` is walked as a tree: see [`is_tree`]; with
    /// [`WalkConfig::dereference`], a symlink to a directory is one too.
    pub fn walks_as_tree(&self, src: &Path) -> bool {
        is_tree(src) || (self.dereference && src.is_dir())
    }
}

enum Job<D: DirHandle> {
    /// Enter the subdirectory `name` of `parent`, which the job keeps open while it
    /// waits (`pinned`) unless the parent lets go of its descriptors.
    Dir {
        parent: Arc<Node<D>>,
        pinned: Option<Opened<D>>,
        name: CString,
    },
    /// Push these leaves of `node`, open as `open`, into the sink.
    Leaves {
        node: Arc<Node<D>>,
        open: Opened<D>,
        names: Vec<Name>,
    },
}

struct Queue<D: DirHandle> {
    state: Mutex<(Vec<Job<D>>, usize, usize)>, // (stack, busy workers, leaf names on it)
    ready: Condvar,
}

/// Names of leaves waiting on the stack past which the reader of a large directory
/// stops reading it to push leaves itself (four batches of names, about 3 MiB): a
/// directory of a million files read faster than its files were packed held most of
/// its names at once (108 MiB peak for `pack`, against 28 MiB spread over 1,000).
const MAX_QUEUED_NAMES: usize = 4 * 16_384;

/// How many leaf names `job` carries.
fn names_in<D: DirHandle>(job: &Job<D>) -> usize {
    match job {
        Job::Leaves { names, .. } => names.len(),
        Job::Dir { .. } => 0,
    }
}

impl<D: DirHandle> Queue<D> {
    fn push(&self, jobs: impl IntoIterator<Item = Job<D>>) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let before = st.0.len();
        st.0.extend(jobs);
        let added = st.0.len() - before;
        st.2 += st.0[before..].iter().map(names_in).sum::<usize>();
        drop(st);
        for _ in 0..added {
            self.ready.notify_one();
        }
    }

    /// Whether, of `workers`, some have nothing to do: the stack is empty and not all
    /// are busy.
    fn has_idle(&self, workers: usize) -> bool {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.0.is_empty() && st.1 < workers
    }

    /// The next job, or None once the stack is empty and no worker can add to it.
    fn pop(&self) -> Option<Job<D>> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(job) = st.0.pop() {
                st.1 += 1;
                st.2 -= names_in(&job);
                return Some(job);
            }
            if st.1 == 0 {
                self.ready.notify_all();
                return None;
            }
            st = self.ready.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The topmost job of leaves, taken as [`Queue::pop`] takes a job, when more than
    /// `max` leaf names wait on the stack; None otherwise, at once.
    fn leaves_over(&self, max: usize) -> Option<Job<D>> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.2 <= max {
            return None;
        }
        let at = st.0.iter().rposition(|j| matches!(j, Job::Leaves { .. }))?;
        let job = st.0.remove(at);
        st.1 += 1;
        st.2 -= names_in(&job);
        Some(job)
    }

    fn done(&self) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.1 -= 1;
        if st.1 == 0 && st.0.is_empty() {
            self.ready.notify_all();
        }
    }
}

/// A worker's hold on a job: marks it done when dropped, also while unwinding from a
/// panic, so the other workers finish instead of waiting for it forever and the panic
/// reaches the caller.
struct Busy<'q, D: DirHandle>(&'q Queue<D>);

impl<D: DirHandle> Drop for Busy<'_, D> {
    fn drop(&mut self) {
        self.0.done();
    }
}

/// Ends the prefetch threads when dropped: after the walk, or when it panics.
struct ClosePrefetch<'p>(Option<&'p Prefetch>);

impl Drop for ClosePrefetch<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.0 {
            p.close();
        }
    }
}

/// Walks the tree at `root` and pushes it into `sink` with `cfg.threads` workers.
/// Per-path failures go to `reporter` and the walk goes on; the returned error is for a
/// root that cannot be read or made.
pub fn walk<S: TreeSink>(
    root: &Path,
    sink: &S,
    cfg: &WalkConfig,
    reporter: &dyn Reporter,
) -> Result<()> {
    walk_as(root, RelPath::root(), sink, cfg, reporter)
}

/// [`walk`], with the tree's root pushed as the entry `name` (not the root) and every
/// path below it: one of several trees pushed into one sink each under its own name
/// (`ferry pack a b A`, as `tar -cf A a b`). Filters see these paths.
pub fn walk_as<S: TreeSink>(
    root: &Path,
    name: RelPath,
    sink: &S,
    cfg: &WalkConfig,
    reporter: &dyn Reporter,
) -> Result<()> {
    let root_path = name;
    let fd = rfs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| Error::new(&root_path, "open source", e))?;
    let st = rfs::fstat(&fd).at(&root_path, "stat")?;
    let entry = dir_entry(&fd, &st, root_path)?;
    let dst = Arc::new(sink.root(&entry)?);
    // A directory entered through a symlink is not below its parent: never let go of
    // one, as it could not be found again through `..`.
    let held = WalkConfig {
        held_levels: usize::MAX,
        ..cfg.clone()
    };
    let cfg = if cfg.dereference { &held } else { cfg };
    let mut walker = Walker::new(sink, cfg, reporter);
    walker.root_dev = st.st_dev;
    // Open all along: every directory opened again can be reached down from here.
    let open = Arc::new(OpenDir {
        src: Arc::new(fd),
        dst,
    });
    let node = Arc::new(Node::root(entry, InodeKey::of(&st), &open));
    // This thread reads the root as one more worker; the others wait for what it queues.
    walker
        .queue
        .state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .1 = 1;
    std::thread::scope(|s| {
        if let Some(p) = &walker.prefetch {
            for _ in 0..cfg.prefetch {
                s.spawn(|| p.work());
            }
        }
        for _ in 1..cfg.threads.max(1) {
            s.spawn(|| walker.work());
        }
        // This worker ends only once every job is done; then so does prefetching.
        let _close = ClosePrefetch(walker.prefetch.as_ref());
        {
            let _busy = Busy(&walker.queue);
            walker.read_dir(&node, &open);
        }
        walker.work();
    });
    Ok(())
}

/// Whether the source `src` is walked as a tree: it is a directory, and not a symlink
/// to one unless named with a trailing slash (`link/`), as `cp -a` and `rsync -a` take
/// it (the kernel follows a symlink named so even when asked not to). Anything else,
/// a symlink to a directory included, is one entry (see [`walk_one`]).
pub fn is_tree(src: &Path) -> bool {
    std::fs::symlink_metadata(src).is_ok_and(|m| m.is_dir())
}

/// Pushes the one entry at `src`, which is not a directory (a file, a symlink, which
/// is not followed, a fifo or a device), into `sink` as the entry `name` (by default
/// its own name) directly below `root`, the sink's root directory, which the caller
/// has made: a single file copied or packed on its own. Of `cfg`, only `skip` and
/// `filter` count (the filter sees the source's own name, as rsync's does). Errors name
/// the source's path as the entry's name.
pub fn walk_one<S: TreeSink>(
    src: &Path,
    name: Option<&[u8]>,
    sink: &S,
    root: S::Dir,
    cfg: &WalkConfig,
    reporter: &dyn Reporter,
) -> Result<()> {
    let at_root = |e: std::io::Error| Error::new(&RelPath::root(), "open source", e);
    let src_name = src
        .file_name()
        .ok_or_else(|| at_root(std::io::Error::other("names no file")))?;
    let src_name = CString::new(src_name.as_encoded_bytes()).map_err(|e| at_root(e.into()))?;
    if let Some(filter) = &cfg.filter {
        // A directory is refused below: only a non-directory is taken here.
        if filter.excludes(src_name.as_bytes(), false) {
            return Ok(());
        }
    }
    let parent = match src.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = rfs::open(
        parent,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| at_root(e.into()))?;
    let path = RelPath::from_bytes(name.unwrap_or(src_name.as_bytes()).to_vec());
    let follow = match cfg.dereference {
        true => AtFlags::empty(),
        false => AtFlags::SYMLINK_NOFOLLOW,
    };
    let st = rfs::statat(&dir, src_name.as_c_str(), follow).at(&path, "stat")?;
    let kind = FileType::from_raw_mode(st.st_mode);
    if kind == FileType::Directory {
        return Err(Error::new(
            &path,
            "stat",
            std::io::Error::other("is a directory"),
        ));
    }
    // Where `src` is, and where its copy goes: neither is finished.
    let open = OpenDir {
        src: Arc::new(dir),
        dst: Arc::new(root),
    };
    let one = Name {
        ino: st.st_ino,
        kind,
        name: src_name,
    };
    let cfg = WalkConfig {
        threads: 1,
        prefetch: 0,
        ..cfg.clone()
    };
    Walker::new(sink, &cfg, reporter).leaf_inner(&open, &one, &path)
}

struct Walker<'a, S: TreeSink> {
    sink: &'a S,
    cfg: &'a WalkConfig,
    reporter: &'a dyn Reporter,
    queue: Queue<S::Dir>,
    opener: FileOpener,
    prefetch: Option<Prefetch>,
    /// The device of the root of the walk (for [`WalkConfig::one_file_system`]).
    root_dev: u64,
}

/// The entry of directory `fd`, whose status is `st`.
fn dir_entry(fd: &OwnedFd, st: &rfs::Stat, path: RelPath) -> Result<Entry> {
    let mut meta = meta::from_stat(st);
    meta.xattrs = meta::read_xattrs(fd).at(&path, "read xattrs")?;
    Ok(Entry {
        path,
        kind: EntryKind::Dir,
        meta,
        links: None,
    })
}

impl<'a, S: TreeSink> Walker<'a, S> {
    fn new(sink: &'a S, cfg: &'a WalkConfig, reporter: &'a dyn Reporter) -> Self {
        Walker {
            sink,
            cfg,
            reporter,
            queue: Queue {
                state: Mutex::new((Vec::new(), 0, 0)),
                ready: Condvar::new(),
            },
            opener: FileOpener::default(),
            prefetch: (cfg.prefetch > 0).then(Prefetch::default),
            root_dev: 0,
        }
    }

    fn work(&self) {
        // The directory of the worker's last job, kept open until the next: a deep
        // directory above it that a job needs next opens through its `..`.
        let mut last: Option<Entered<S::Dir>> = None;
        while let Some(job) = self.queue.pop() {
            let _busy = Busy(&self.queue);
            let worked_in = match job {
                Job::Dir {
                    parent,
                    pinned,
                    name,
                } => self.enter(parent, pinned, name, last.as_ref()),
                Job::Leaves { node, open, names } => {
                    self.leaves_job(&node, &open, &names);
                    Some((node, open))
                }
            };
            if worked_in.is_some() {
                last = worked_in;
            }
        }
    }

    fn report(&self, err: &Error) {
        self.reporter.error(err);
    }

    /// `path` is one of [`WalkConfig::skip`]: the job's own output.
    fn skipped(&self, path: &RelPath) {
        self.reporter
            .warn(&format!("{path}: not copied: it is where this job writes"));
    }

    /// Opens and enters the subdirectory `name` of `parent` (open as `pinned`, or
    /// opened again from `near`: see [`Node::reopen`]), then reads it. Returns the
    /// subdirectory, open, if it was entered.
    fn enter(
        &self,
        parent: Arc<Node<S::Dir>>,
        pinned: Option<Opened<S::Dir>>,
        name: CString,
        near: Option<&Entered<S::Dir>>,
    ) -> Option<Entered<S::Dir>> {
        let open = match pinned.map_or_else(|| parent.reopen(near), Ok) {
            Ok(open) => open,
            Err(e) => {
                self.report(&e);
                self.complete(parent, None);
                return None;
            }
        };
        let path = parent.entry.path.join(name.as_bytes());
        let opened = match self.cfg.dereference {
            true => open_dir_following(&open.src, name.as_c_str()),
            false => open_dir(&open.src, name.as_c_str()),
        };
        if matches!(opened, Err(Errno::ACCESS)) && self.cfg.unreadable_dirs {
            self.unreadable_dir(&open, &name, &path);
            self.complete(parent, Some(open.dst.clone()));
            return None;
        }
        let opened = opened.at(&path, "open directory");
        let made = opened.and_then(|fd| {
            let st = rfs::fstat(&fd).at(&path, "stat")?;
            if self.cfg.skip.contains(&InodeKey::of(&st)) {
                self.skipped(&path);
                return Ok(None);
            }
            if self.cfg.dereference && parent.is_or_is_below(InodeKey::of(&st)) {
                let why = std::io::Error::other("a symlink to a directory above it (a loop)");
                return Err(Error::new(&path, "follow symlink", why));
            }
            let entry = dir_entry(&fd, &st, path.clone())?;
            let dst = Arc::new(self.sink.dir(&open.dst, &entry)?);
            let opened = Arc::new(OpenDir {
                src: Arc::new(fd),
                dst,
            });
            let key = InodeKey::of(&st);
            let node = Node::child(&parent, entry, key, &opened, self.cfg.held_levels);
            let other_fs = self.cfg.one_file_system && st.st_dev != self.root_dev;
            Ok(Some((Arc::new(node), opened, other_fs)))
        });
        match made {
            Ok(Some((node, opened, true))) => {
                // A mount point with -x: made, not read.
                drop(open);
                self.complete(node.clone(), Some(opened.dst.clone()));
                Some((node, opened))
            }
            Ok(Some((node, opened, false))) => {
                // The parent's descriptors are not needed any more.
                drop(open);
                self.read_dir(&node, &opened);
                Some((node, opened))
            }
            Ok(None) => {
                self.complete(parent, Some(open.dst.clone()));
                None
            }
            Err(e) => {
                self.report(&e);
                self.complete(parent, Some(open.dst.clone()));
                None
            }
        }
    }

    /// Reports the directory `name` of `open`, which may not be opened, and pushes it
    /// into the sink all the same, empty, with its metadata (see
    /// [`WalkConfig::unreadable_dirs`]).
    fn unreadable_dir(&self, open: &Opened<S::Dir>, name: &CStr, path: &RelPath) {
        self.report(&Error::new(path, "open directory", Errno::ACCESS));
        let made = (|| {
            let st = rfs::statat(&*open.src, name, AtFlags::SYMLINK_NOFOLLOW).at(path, "stat")?;
            let mut meta = meta::from_stat(&st);
            meta.xattrs =
                xattr::read(&xattr::Node::named(open.src.as_fd(), name)).at(path, "read xattrs")?;
            let entry = Entry {
                path: path.clone(),
                kind: EntryKind::Dir,
                meta,
                links: None,
            };
            let dst = self.sink.dir(&open.dst, &entry)?;
            self.sink.finish_dir(&dst, &entry)
        })();
        if let Err(e) = made {
            self.report(&e);
        }
    }

    /// Reads a directory (open as `open`), queues its subdirectories and pushes its
    /// leaves into the sink.
    fn read_dir(&self, node: &Arc<Node<S::Dir>>, open: &Opened<S::Dir>) {
        let read = match self.cfg.by_name {
            true => {
                let mut all = Vec::new();
                let read = read_names(&open.src, &node.entry.path, |batch| all.extend(batch));
                // What was read before a failure is walked, as in batches.
                all.sort_unstable_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
                self.spread_by_name(node, open, all);
                read
            }
            false => read_names(&open.src, &node.entry.path, |batch| {
                self.spread(node, open, batch)
            }),
        };
        if let Err(e) = read {
            self.report(&e);
        }
        self.complete(node.clone(), Some(open.dst.clone()));
    }

    /// Leaves out of `names` (of `node`, open as `open`) what the filter excludes and,
    /// following symlinks, the symlinks to nothing.
    fn keep_wanted(&self, node: &Node<S::Dir>, open: &Opened<S::Dir>, names: &mut Vec<Name>) {
        if self.cfg.dereference {
            names.retain_mut(|n| self.follow(node, open, n));
        }
        if let Some(filter) = &self.cfg.filter {
            let dir = node.entry.path.as_bytes();
            names.retain(|n| {
                !filter.excludes_in(dir, n.name.as_bytes(), n.kind == FileType::Directory)
            });
        }
    }

    /// With [`WalkConfig::by_name`]: queues all of a directory's `names`, sorted, so they
    /// are taken in that order, each subdirectory's tree before the names after it (the
    /// stack is LIFO: the jobs go on in reverse, and a subdirectory's own jobs go on
    /// above the runs of leaves after it).
    fn spread_by_name(
        &self,
        node: &Arc<Node<S::Dir>>,
        open: &Opened<S::Dir>,
        mut names: Vec<Name>,
    ) {
        self.keep_wanted(node, open, &mut names);
        let pinned = (!node.lets_go()).then_some(open);
        let mut jobs = Vec::new();
        let mut run = Vec::new();
        let leaves = |names: Vec<Name>| Job::Leaves {
            node: node.clone(),
            open: open.clone(),
            names,
        };
        for n in names {
            if n.kind != FileType::Directory {
                run.push(n);
                continue;
            }
            if !run.is_empty() {
                jobs.push(leaves(std::mem::take(&mut run)));
            }
            jobs.push(Job::Dir {
                parent: node.clone(),
                pinned: pinned.cloned(),
                name: n.name,
            });
        }
        if !run.is_empty() {
            jobs.push(leaves(run));
        }
        node.pending.fetch_add(jobs.len(), Ordering::AcqRel);
        self.queue.push(jobs.into_iter().rev());
    }

    /// Hands out one batch of a directory's names: subdirectories and shared chunks of
    /// leaves go on the stack, the first chunk of leaves is pushed into the sink here.
    fn spread(&self, node: &Arc<Node<S::Dir>>, open: &Opened<S::Dir>, mut names: Vec<Name>) {
        self.keep_wanted(node, open, &mut names);
        let (dirs, mut leaves): (Vec<Name>, Vec<Name>) = names
            .into_iter()
            .partition(|n| n.kind == FileType::Directory);
        let ways = self.cfg.max_ways.max(1);
        // Workers with nothing to do share even a small directory (a folder of a few
        // dozen large files would otherwise be copied by one of them alone).
        let starved = dirs.is_empty() && self.queue.has_idle(self.cfg.threads);
        let least = if starved {
            STARVED_CHUNK
        } else {
            self.cfg.chunk
        };
        let chunk = least.max(leaves.len().div_ceil(ways)).max(1);
        let mut shared = Vec::new();
        while leaves.len() > chunk {
            let rest = leaves.split_off(chunk);
            shared.push(Job::Leaves {
                node: node.clone(),
                open: open.clone(),
                names: std::mem::replace(&mut leaves, rest),
            });
        }
        node.pending
            .fetch_add(dirs.len() + shared.len(), Ordering::AcqRel);
        // A deep directory is not held open for subdirectories waiting on the stack: on
        // a long path there may be some waiting at every level.
        let pinned = (!node.lets_go()).then_some(open);
        // Subdirectories first, then chunks, so idle workers take this directory's
        // chunks before wandering off into subdirectories (the stack is LIFO).
        self.queue.push(dirs.into_iter().map(|n| Job::Dir {
            parent: node.clone(),
            pinned: pinned.cloned(),
            name: n.name,
        }));
        self.queue.push(shared);
        self.leaves(node, open, &leaves);
        // Read on only once the leaves waiting are few enough: help push them first.
        while let Some(job) = self.queue.leaves_over(MAX_QUEUED_NAMES) {
            let _busy = Busy(&self.queue);
            if let Job::Leaves { node, open, names } = job {
                self.leaves_job(&node, &open, &names);
            }
        }
    }

    /// Does a job of leaves: pushes them, then counts the job done in their directory.
    fn leaves_job(&self, node: &Arc<Node<S::Dir>>, open: &Opened<S::Dir>, names: &[Name]) {
        self.leaves(node, open, names);
        self.complete(node.clone(), Some(open.dst.clone()));
    }

    /// With [`WalkConfig::dereference`]: gives the symlink `n` of `node` the kind of
    /// what it points to. False (reported) for a symlink to nothing.
    fn follow(&self, node: &Node<S::Dir>, open: &Opened<S::Dir>, n: &mut Name) -> bool {
        if n.kind != FileType::Symlink {
            return true;
        }
        match rfs::statat(&*open.src, n.name.as_c_str(), AtFlags::empty()) {
            Ok(st) => {
                n.kind = FileType::from_raw_mode(st.st_mode);
                true
            }
            Err(e) => {
                let path = node.entry.path.join(n.name.as_bytes());
                self.report(&Error::new(&path, "follow symlink", e));
                false
            }
        }
    }

    /// Pushes a run of `node`'s non-directory entries into the sink, with its regular
    /// files read ahead when prefetching.
    fn leaves(&self, node: &Node<S::Dir>, open: &Opened<S::Dir>, names: &[Name]) {
        let is_file = |n: &&Name| n.kind == FileType::RegularFile;
        let run = self.prefetch.as_ref().and_then(|p| {
            let files = names.iter().filter(is_file).map(|n| n.name.clone());
            p.offer(open.src.clone(), files)
        });
        let mut files = 0;
        for n in names {
            if let (Some(run), true) = (&run, is_file(&n)) {
                run.at(files);
                files += 1;
            }
            self.leaf(node, open, n);
        }
    }

    /// One of `node`'s work items is done (`own`: `node`'s handle, which the caller
    /// holds); finishes directories whose work is all done, from `node` up.
    fn complete(&self, node: Arc<Node<S::Dir>>, own: Option<Arc<S::Dir>>) {
        let (mut cur, mut own) = (node, own);
        // The handle of the directory finished last, below `cur`.
        let mut below: Option<Arc<S::Dir>> = None;
        loop {
            if cur.pending.fetch_sub(1, Ordering::AcqRel) != 1 {
                return;
            }
            let dst = match own.take() {
                Some(dst) => Ok(dst),
                None => cur.dst_to_finish(below.as_deref()),
            };
            below = self.finish(&cur, dst);
            match cur.parent.clone() {
                Some(parent) => cur = parent,
                None => return,
            }
        }
    }

    /// Finishes `node` in the sink through its handle `dst`, if that could be had.
    /// Returns the handle, for the parent's turn.
    fn finish(&self, node: &Node<S::Dir>, dst: Result<Arc<S::Dir>>) -> Option<Arc<S::Dir>> {
        let dst = dst.inspect_err(|e| self.report(e)).ok()?;
        if let Err(e) = self.sink.finish_dir(&dst, &node.entry) {
            self.report(&e);
        }
        Some(dst)
    }
}

#[cfg(test)]
mod tests;
