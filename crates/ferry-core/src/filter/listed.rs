//! A list of paths a job takes (`ferry copy --files-from`, rsync's meaning): each
//! listed path with everything below it, and the directories leading to it.
//!
//! The list is held as a tree of its paths' components, each edge found by hashing
//! one component under its parent's number, so a walk's question about one entry
//! costs one lookup per component down to where the list's tree ends, however long the
//! list (and building it costs as much as reading it):
//!
//! - a listed path is taken unless the rules exclude it (the rules see it as they see
//!   any path);
//! - a directory leading to a listed path is taken whatever the rules say of it (rsync
//!   checks the rules against the listed path only, never its implied directories);
//!   only the paths the rules take bring theirs: a listed path the rules leave out
//!   brings no directories with it, as in rsync;
//! - a path below a listed directory is taken unless the rules exclude it; but not
//!   below a directory the rules exclude that the walk entered only as leading to a
//!   listed path (listed `src` and `src/sub/b.c` with `--exclude sub/` take
//!   `src/sub/b.c` and nothing else of `src/sub`, as rsync, which does not go into an
//!   excluded directory, takes them); whether the rules exclude such a directory is
//!   asked once, when a walk first goes through it;
//! - anything else is left out.
//!
//! An empty listed path (a line `.` or `/`) stands for the whole tree.

use super::FilterError;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::Relaxed};

/// The root's number in [`Listed::nodes`].
const ROOT: u32 = 0;

/// Whether the rules exclude a leading directory: not asked yet, no, yes.
const UNASKED: u8 = 0;
const TAKEN: u8 = 1;
const EXCLUDED: u8 = 2;

/// One component of a listed path (or the root).
#[derive(Debug, Default)]
struct Node {
    /// Listed: its first place in the list.
    listed: Option<usize>,
    /// A directory leading to a listed path the rules take.
    leading: bool,
    /// For a leading directory below a listed one: whether the rules exclude it.
    excluded: AtomicU8,
    /// The walk has asked about it (for a listed path: it is there).
    met: AtomicBool,
}

/// Listed paths and the directories leading to them, compiled for lookups.
#[derive(Debug)]
pub(super) struct Listed {
    /// The tree's nodes; [`ROOT`] first.
    nodes: Vec<Node>,
    /// Edges: a parent's number (4 bytes, little-endian) and a component's bytes, to
    /// the child's number.
    edges: HashMap<Vec<u8>, u32>,
    /// The list in its order: each path and its node.
    order: Vec<(Vec<u8>, u32)>,
    /// The list names the root: everything is taken (as the rules say).
    whole: bool,
}

/// What the list says of one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Listed, or below a listed directory: the rules decide.
    Rules,
    /// A directory leading to a listed path: taken whatever the rules say.
    Leading,
    /// Not in the list: left out.
    Out,
}

thread_local! {
    /// An edge's key being looked up, reused so lookups allocate nothing.
    static KEY: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The key of the edge from `parent` by `name` in `key`.
fn edge_key(key: &mut Vec<u8>, parent: u32, name: &[u8]) {
    key.clear();
    key.extend_from_slice(&parent.to_le_bytes());
    key.extend_from_slice(name);
}

/// The components of a normalized path, each with the length of the path up to its
/// end.
fn components(path: &[u8]) -> impl Iterator<Item = (&[u8], usize)> {
    let mut end = 0;
    path.split(|&b| b == b'/').map(move |name| {
        end += name.len() + usize::from(end > 0);
        (name, end)
    })
}

impl Listed {
    /// The list `paths` (normalized, see [`normalize`]); `excluded(path, is_dir)` says
    /// whether the rules leave a path out.
    pub(super) fn new(paths: &[Vec<u8>], excluded: impl Fn(&[u8], bool) -> bool) -> Listed {
        let mut list = Listed {
            nodes: vec![Node::default()],
            edges: HashMap::new(),
            order: Vec::with_capacity(paths.len()),
            whole: false,
        };
        let mut key = Vec::new();
        for (i, path) in paths.iter().enumerate() {
            if path.is_empty() {
                list.whole = true;
                list.order.push((Vec::new(), ROOT));
                continue;
            }
            let brings_dirs = !(excluded(path, false) && excluded(path, true));
            let mut node = ROOT;
            for (name, end) in components(path) {
                edge_key(&mut key, node, name);
                node = match list.edges.get(&key) {
                    Some(&child) => child,
                    None => {
                        let child = list.nodes.len() as u32;
                        list.nodes.push(Node::default());
                        list.edges.insert(key.clone(), child);
                        child
                    }
                };
                if end < path.len() && brings_dirs {
                    list.nodes[node as usize].leading = true;
                }
            }
            list.nodes[node as usize].listed.get_or_insert(i);
            list.order.push((path.clone(), node));
        }
        list
    }

    /// The child of `node` by `name`, if the list has one.
    fn child(&self, node: u32, name: &[u8]) -> Option<u32> {
        KEY.with(|key| {
            let mut key = key.borrow_mut();
            edge_key(&mut key, node, name);
            self.edges.get(key.as_slice()).copied()
        })
    }

    /// What the list says of `path` (a directory when `is_dir`); `excluded_dir(dir)`
    /// says whether the rules exclude the directory `dir`. With `meet`, a listed
    /// `path` is noted as met (see [`Self::unmet`]).
    pub(super) fn verdict(
        &self,
        path: &[u8],
        is_dir: bool,
        meet: bool,
        excluded_dir: &dyn Fn(&[u8]) -> bool,
    ) -> Verdict {
        // Whether the directories above so far put `path` below a listed one.
        let mut below = self.whole;
        let mut node = ROOT;
        for (name, end) in components(path) {
            let Some(child) = self.child(node, name) else {
                break;
            };
            let n = &self.nodes[child as usize];
            if end == path.len() {
                if n.listed.is_some() {
                    if meet {
                        n.met.store(true, Relaxed);
                    }
                    return Verdict::Rules;
                }
                if is_dir && n.leading {
                    return Verdict::Leading;
                }
                break;
            }
            if n.listed.is_some() {
                below = true;
            } else if below && n.leading && self.excludes(n, &path[..end], excluded_dir) {
                // A passage to listed paths only.
                below = false;
            } else if !below && !n.leading {
                return Verdict::Out;
            }
            node = child;
        }
        match below {
            true => Verdict::Rules,
            false => Verdict::Out,
        }
    }

    /// Whether the rules exclude the leading directory `dir` (its node `n`), asked once.
    fn excludes(&self, n: &Node, dir: &[u8], excluded_dir: &dyn Fn(&[u8]) -> bool) -> bool {
        match n.excluded.load(Relaxed) {
            UNASKED => {
                let excluded = excluded_dir(dir);
                n.excluded
                    .store(if excluded { EXCLUDED } else { TAKEN }, Relaxed);
                excluded
            }
            state => state == EXCLUDED,
        }
    }

    /// The listed paths (but the root) the walk has not met, in the list's order (a
    /// path listed twice, once).
    pub(super) fn unmet(&self) -> Vec<Vec<u8>> {
        self.order
            .iter()
            .enumerate()
            .filter(|(i, (path, node))| {
                let n = &self.nodes[*node as usize];
                !path.is_empty() && !n.met.load(Relaxed) && n.listed == Some(*i)
            })
            .map(|(_, (path, _))| path.clone())
            .collect()
    }

    /// How many paths are listed.
    pub(super) fn len(&self) -> usize {
        self.order.len()
    }
}

/// The paths of a list file's `text`, each normalized (see [`normalize`]): one a line
/// (a line ends at `\n` or `\r`, as rsync reads them), or one per NUL-ended record when
/// `nul`; empty entries and ones starting with `#` or `;` are skipped, as rsync skips
/// them. Errors name `source` and the entry's number.
pub fn parse_list(text: &[u8], nul: bool, source: &str) -> Result<Vec<Vec<u8>>, FilterError> {
    let ends = |b: &u8| match nul {
        true => *b == 0,
        false => *b == b'\n' || *b == b'\r',
    };
    let mut out = Vec::new();
    for (n, entry) in text.split(ends).enumerate() {
        if entry.is_empty() || entry[0] == b'#' || entry[0] == b';' {
            continue;
        }
        let path = normalize(entry).map_err(|why| {
            FilterError(format!(
                "{source}: line {}: {:?}: {why}",
                n + 1,
                crate::entry::escaped(entry)
            ))
        })?;
        out.push(path);
    }
    Ok(out)
}

/// `path` as a path relative to the root: leading `/`s dropped (as rsync drops them),
/// `.` and empty components dropped; a `..` component is refused (ferry does not
/// resolve it as rsync does, and a list naming what lies above SRC is a mistake), as
/// is a NUL.
pub fn normalize(path: &[u8]) -> Result<Vec<u8>, &'static str> {
    if path.contains(&0) {
        return Err("a path holds no NUL");
    }
    let mut out = Vec::with_capacity(path.len());
    for part in path.split(|&b| b == b'/') {
        match part {
            b"" | b"." => continue,
            b".." => return Err("a `..` component is refused: paths are below SRC"),
            _ => {
                if !out.is_empty() {
                    out.push(b'/');
                }
                out.extend_from_slice(part);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The verdict with no rule excluding a directory but one ending in `sub`.
    fn v(l: &Listed, path: &[u8], is_dir: bool) -> Verdict {
        l.verdict(path, is_dir, false, &|d: &[u8]| d.ends_with(b"sub"))
    }

    fn list(paths: &[&str]) -> Listed {
        let paths: Vec<Vec<u8>> = paths.iter().map(|p| p.as_bytes().to_vec()).collect();
        Listed::new(&paths, |p, _| p == b"gone")
    }

    #[test]
    fn listed_paths_their_contents_and_leading_directories() {
        let l = list(&["a/b/c", "top", "gone", "x/gone"]);
        assert_eq!(v(&l, b"a/b/c", false), Verdict::Rules);
        assert_eq!(v(&l, b"a/b/c/d/e", false), Verdict::Rules);
        assert_eq!(v(&l, b"a", true), Verdict::Leading);
        assert_eq!(v(&l, b"a/b", true), Verdict::Leading);
        assert_eq!(v(&l, b"a", false), Verdict::Out, "leading: a directory");
        assert_eq!(v(&l, b"a/other", false), Verdict::Out);
        assert_eq!(v(&l, b"a/b/other/c", false), Verdict::Out);
        assert_eq!(v(&l, b"top/t", false), Verdict::Rules);
        assert_eq!(v(&l, b"topx", false), Verdict::Out);
        assert_eq!(v(&l, b"elsewhere/top", false), Verdict::Out);
        assert_eq!(v(&l, b"x/gone", false), Verdict::Rules);
        assert_eq!(v(&l, b"x", true), Verdict::Leading);
        assert_eq!(v(&list(&["", "a"]), b"q/r", false), Verdict::Rules);
        let excluded = Listed::new(&[b"d/gone".to_vec()], |p, _| p.ends_with(b"gone"));
        assert_eq!(v(&excluded, b"d", true), Verdict::Out, "brings no dirs");
        // `src` and `src/sub/b.c` listed, `sub/` excluded: of `src/sub`, only `b.c`.
        let paths = [
            b"src".to_vec(),
            b"src/sub/b.c".to_vec(),
            b"src/sub/x/y".to_vec(),
        ];
        let l = Listed::new(&paths, |p, dir| dir && p.ends_with(b"sub"));
        assert_eq!(v(&l, b"src/sub", true), Verdict::Leading);
        assert_eq!(v(&l, b"src/sub/b.c", false), Verdict::Rules);
        assert_eq!(v(&l, b"src/sub/b.o", false), Verdict::Out);
        assert_eq!(v(&l, b"src/sub/x", true), Verdict::Leading);
        assert_eq!(v(&l, b"src/sub/x/y/z", false), Verdict::Rules);
        assert_eq!(v(&l, b"src/other/z", false), Verdict::Rules);
    }

    #[test]
    fn lists_are_read_as_rsync_reads_them() {
        let text = b"a/b\n#c\n;d\n\n/e//f/./\r./g\r\nh\n";
        let got = parse_list(text, false, "L").expect("list");
        assert_eq!(got, [&b"a/b"[..], b"e/f", b"g", b"h"]);
        let got = parse_list(b"new\nline\0#x\0\0/\0", true, "L").expect("list");
        assert_eq!(got, [&b"new\nline"[..], b""]);
        let err = parse_list(b"ok\na/../b\n", false, "list.txt").expect_err("..");
        assert!(err.to_string().starts_with("list.txt: line 2: "), "{err}");
        assert!(err.to_string().contains("a/../b"), "{err}");
        assert!(normalize(b"..").is_err() && normalize(b"a\0b").is_err());
        assert_eq!(normalize(b"\xff/x").expect("bytes"), b"\xff/x");
    }
}
