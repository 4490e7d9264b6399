//! A directory being walked, and how its descriptors are held, let go of and opened
//! again.
//!
//! Jobs that work in a directory share its descriptors ([`OpenDir`]); the last to drop
//! them closes them. A directory near the root keeps the sink's handle until it is
//! finished, and its subdirectory jobs keep its descriptors while they wait on the
//! stack. A deep one keeps nothing while no job runs in it: a subdirectory job opens
//! it again when it starts, and so does finishing it. It is opened again through `..`
//! of an open directory below it (the one the worker was in last, or the subdirectory
//! finished last), or else down from the nearest directory above it that is open, and
//! each directory opened so is checked to be the one walked before (by inode; see
//! [`DirHandle`] for the sink's side). A DFS that comes back up from a subtree to the
//! next subdirectory of a deep directory so opens it in one step, as `fts` does.

use crate::entry::{Entry, InodeKey};
use crate::error::{Context, Error, Result};
use crate::local::open_dir;
use crate::sink::DirHandle;
use rustix::fs as rfs;
use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, Weak};

/// A directory's descriptors while jobs work in it: the source directory and the sink's
/// handle for its copy.
pub(super) struct OpenDir<D> {
    pub src: Arc<OwnedFd>,
    pub dst: Arc<D>,
}

/// [`OpenDir`] as jobs share it.
pub(super) type Opened<D> = Arc<OpenDir<D>>;

/// A directory a worker has entered, with its descriptors.
pub(super) type Entered<D> = (Arc<Node<D>>, Opened<D>);

/// A directory being walked: alive until all its descendants are done.
pub(super) struct Node<D: DirHandle> {
    pub entry: Entry,
    /// This directory's own work items plus unfinished subdirectories.
    pub pending: AtomicUsize,
    pub parent: Option<Arc<Node<D>>>,
    /// Levels below the root.
    depth: usize,
    /// The source directory's inode, to know it again when it is opened again.
    src_key: InodeKey,
    hold: Hold<D>,
    /// Its descriptors while some job has them open, for jobs that start meanwhile.
    open: Mutex<Weak<OpenDir<D>>>,
}

/// How a [`Node`] keeps the sink's handle until the directory is finished.
enum Hold<D: DirHandle> {
    /// Open all along (a directory near the root).
    Kept(Arc<D>),
    /// Closed while no job works in the directory (a deep one): the mark opens it again.
    LetGo(D::Mark),
}

/// Starts from `start` and takes one `step` into each node of `way` in turn.
fn climb<D: DirHandle, T>(
    start: T,
    way: &[&Node<D>],
    step: impl Fn(&Node<D>, &T) -> Result<T>,
) -> Result<T> {
    way.iter().try_fold(start, |at, node| step(node, &at))
}

impl<D: DirHandle> Node<D> {
    /// The root, whose source directory's inode is `src_key`, open as `open`. Its
    /// handle is kept (the caller keeps `open` too, so every reopening can start here).
    pub fn root(entry: Entry, src_key: InodeKey, open: &Opened<D>) -> Self {
        Node {
            entry,
            pending: AtomicUsize::new(1),
            parent: None,
            depth: 0,
            src_key,
            hold: Hold::Kept(open.dst.clone()),
            open: Mutex::new(Arc::downgrade(open)),
        }
    }

    /// The subdirectory `entry` of `parent`, its source directory's inode `src_key`,
    /// open as `open`. More than `held_levels` below the root, it lets go of its
    /// descriptors while no job uses them.
    pub fn child(
        parent: &Arc<Self>,
        entry: Entry,
        src_key: InodeKey,
        open: &Opened<D>,
        held_levels: usize,
    ) -> Self {
        let depth = parent.depth + 1;
        // A handle that cannot be marked is kept: that only costs a descriptor.
        let hold = match depth > held_levels {
            true => open
                .dst
                .mark(&entry.path)
                .map_or_else(|_| Hold::Kept(open.dst.clone()), Hold::LetGo),
            false => Hold::Kept(open.dst.clone()),
        };
        Node {
            entry,
            pending: AtomicUsize::new(1),
            parent: Some(parent.clone()),
            depth,
            src_key,
            hold,
            open: Mutex::new(Arc::downgrade(open)),
        }
    }

    /// Whether it keeps nothing open while no job works in it.
    pub fn lets_go(&self) -> bool {
        matches!(self.hold, Hold::LetGo(_))
    }

    /// Its descriptors, if some job has them open.
    fn opened(&self) -> Option<Opened<D>> {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .upgrade()
    }

    /// Notes `open` as its descriptors, for jobs that start while it is open.
    fn remember(&self, open: Opened<D>) -> Opened<D> {
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) = Arc::downgrade(&open);
        open
    }

    /// The sink's handle if it is open, else the mark to open it again with.
    fn dst_or_mark(&self) -> std::result::Result<Arc<D>, &D::Mark> {
        match &self.hold {
            Hold::Kept(dst) => Ok(dst.clone()),
            Hold::LetGo(mark) => self.opened().map(|open| open.dst.clone()).ok_or(mark),
        }
    }

    /// Whether the source directory `key` is this one or one above it.
    pub fn is_or_is_below(&self, key: InodeKey) -> bool {
        let mut at = Some(self);
        while let Some(node) = at {
            if node.src_key == key {
                return true;
            }
            at = node.parent.as_deref();
        }
        false
    }

    /// Its descriptors for a job that starts in it: open already, or opened again,
    /// through `..` from `near` (a directory the worker has open, if below this one),
    /// else down from the nearest directory above that is open.
    pub fn reopen(&self, near: Option<&Entered<D>>) -> Result<Opened<D>> {
        if let Some(open) = self.opened() {
            return Ok(open);
        }
        if let Some((below, open)) = near {
            if let Some(way) = self.way_up_from(below) {
                if let Ok(open) = climb(open.clone(), &way, Node::up) {
                    return Ok(open);
                }
            }
        }
        let (top, way) = self.way_down(Node::opened)?;
        climb(top, &way, Node::down)
    }

    /// The sink's handle, to finish the directory: open already, or opened again as
    /// the parent of `below` (the subdirectory finished last), else down from the
    /// nearest directory above whose handle is open.
    pub fn dst_to_finish(&self, below: Option<&D>) -> Result<Arc<D>> {
        let mark = match self.dst_or_mark() {
            Ok(dst) => return Ok(dst),
            Err(mark) => mark,
        };
        if let Some(below) = below {
            if let Ok(dst) = D::reopen_parent(below, mark, &self.entry.path) {
                return Ok(Arc::new(dst));
            }
        }
        let (top, way) = self.way_down(|node| node.dst_or_mark().ok())?;
        climb(top, &way, |node, above: &Arc<D>| node.dst_down(above))
    }

    /// The directories from `below`'s parent up to this one, if this one is above
    /// `below` (none if it is `below`).
    fn way_up_from<'n>(&self, below: &'n Node<D>) -> Option<Vec<&'n Node<D>>> {
        let mut way = Vec::new();
        let mut at = below;
        while at.depth > self.depth {
            at = at.parent.as_deref()?;
            way.push(at);
        }
        std::ptr::eq(at, self).then_some(way)
    }

    /// What `open_of` finds open in the nearest directory above this one where it
    /// finds anything, and the directories from there down to this one.
    fn way_down<T>(&self, open_of: impl Fn(&Node<D>) -> Option<T>) -> Result<(T, Vec<&Node<D>>)> {
        let mut way = vec![self];
        loop {
            let lowest = way[way.len() - 1];
            let Some(parent) = lowest.parent.as_deref() else {
                return Err(Error::new(
                    &self.entry.path,
                    "reopen directory",
                    std::io::Error::other("no directory above it is open"),
                ));
            };
            if let Some(top) = open_of(parent) {
                way.reverse();
                return Ok((top, way));
            }
            way.push(parent);
        }
    }

    /// Its descriptors, opened again as the parent of `below`'s.
    fn up(&self, below: &Opened<D>) -> Result<Opened<D>> {
        if let Some(open) = self.opened() {
            return Ok(open);
        }
        let src = self.checked_src(open_dir(&below.src, c".."))?;
        let dst = self
            .dst_or_mark()
            .or_else(|mark| D::reopen_parent(&below.dst, mark, &self.entry.path).map(Arc::new))?;
        Ok(self.remember(Arc::new(OpenDir { src, dst })))
    }

    /// Its descriptors, opened again as a subdirectory of `above`'s.
    fn down(&self, above: &Opened<D>) -> Result<Opened<D>> {
        if let Some(open) = self.opened() {
            return Ok(open);
        }
        let src = self.checked_src(open_dir(&above.src, &self.name()?))?;
        let dst = self.dst_down(&above.dst)?;
        Ok(self.remember(Arc::new(OpenDir { src, dst })))
    }

    /// The sink's handle, opened again as a subdirectory of `above` if it is not open.
    fn dst_down(&self, above: &Arc<D>) -> Result<Arc<D>> {
        self.dst_or_mark().or_else(|mark| {
            D::reopen_child(above, &self.name()?, mark, &self.entry.path).map(Arc::new)
        })
    }

    /// Its own name, as its parent lists it.
    fn name(&self) -> Result<CString> {
        CString::new(self.entry.path.file_name())
            .map_err(|e| Error::new(&self.entry.path, "reopen directory", e))
    }

    /// The source directory `opened` is this one's, if it is the one walked before.
    fn checked_src(&self, opened: rustix::io::Result<OwnedFd>) -> Result<Arc<OwnedFd>> {
        const OP: &str = "reopen directory";
        let fd = opened.at(&self.entry.path, OP)?;
        let st = rfs::fstat(&fd).at(&self.entry.path, OP)?;
        if InodeKey::of(&st) != self.src_key {
            let e =
                std::io::Error::other("another directory is there now: it was moved or replaced");
            return Err(Error::new(&self.entry.path, OP, e));
        }
        Ok(Arc::new(fd))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::{EntryKind, Metadata, RelPath};
    use rustix::fs::{Mode, OFlags};
    use std::path::Path;

    /// The directory at `path` (relative to the walk's root: `rel`), open, as a node
    /// of a sink that holds nothing, below `parent`, letting go past the root.
    fn entered(path: &Path, rel: &str, parent: Option<&Arc<Node<()>>>) -> Entered<()> {
        let fd = rfs::open(path, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
            .expect("open directory");
        let key = InodeKey::of(&rfs::fstat(&fd).expect("fstat"));
        let open = Arc::new(OpenDir {
            src: Arc::new(fd),
            dst: Arc::new(()),
        });
        let entry = Entry {
            path: RelPath::from_bytes(rel.as_bytes().to_vec()),
            kind: EntryKind::Dir,
            meta: Metadata::default(),
            links: None,
        };
        let node = match parent {
            None => Node::root(entry, key, &open),
            Some(parent) => Node::child(parent, entry, key, &open, 0),
        };
        (Arc::new(node), open)
    }

    fn same_src(open: &Opened<()>, path: &Path) -> bool {
        let st = rfs::fstat(&*open.src).expect("fstat");
        let there = std::fs::metadata(path).expect("stat");
        InodeKey::of(&st) == InodeKey::of_metadata(&there)
    }

    #[test]
    fn a_deep_directory_is_opened_again_through_dotdot_or_from_above_if_it_is_the_same() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let top = tmp.path();
        std::fs::create_dir_all(top.join("a/b/c")).expect("mkdir");
        let root = entered(top, "", None);
        let (a, a_open) = entered(&top.join("a"), "a", Some(&root.0));
        let (b, b_open) = entered(&top.join("a/b"), "a/b", Some(&a));
        let c = entered(&top.join("a/b/c"), "a/b/c", Some(&b));
        assert!(a.lets_go() && !root.0.lets_go());
        drop((a_open, b_open));
        assert!(a.opened().is_none() && b.opened().is_none());

        let up = a.reopen(Some(&c)).expect("through .. of c and b");
        assert!(same_src(&up, &top.join("a")));
        drop(up);
        let down = b.reopen(None).expect("down from the root");
        assert!(same_src(&down, &top.join("a/b")));
        assert!(Arc::ptr_eq(&b.reopen(None).expect("open"), &down), "shared");
        drop(down);

        // Moved away, another directory in its place: down by name it is not found any
        // more, and a symlink to it is not followed; up through `..` it still is.
        std::fs::rename(top.join("a"), top.join("moved")).expect("rename");
        std::fs::create_dir(top.join("a")).expect("mkdir");
        let err = a.reopen(None).err().expect("another directory is not it");
        assert!(err.to_string().contains("moved or replaced"), "{err}");
        std::fs::remove_dir(top.join("a")).expect("rmdir");
        std::os::unix::fs::symlink("moved", top.join("a")).expect("symlink");
        assert!(a.reopen(None).is_err(), "followed a symlink");
        let up = a.reopen(Some(&c)).expect("through ..");
        assert!(same_src(&up, &top.join("moved")));
    }
}
