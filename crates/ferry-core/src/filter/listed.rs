//! A list of paths a job takes (`ferry copy --files-from`, rsync's meaning): each
//! listed path with everything below it, and the directories leading to it.
//!
//! The list is held as two hash sets, the listed paths and their ancestors (only those
//! of the paths the rules do not exclude: a listed path the rules leave out brings no
//! directories with it, as in rsync), so a walk's question about one entry costs a few
//! lookups, whatever the list's length:
//!
//! - a listed path is taken unless the rules exclude it (the rules see it as they see
//!   any path);
//! - a directory leading to a listed path is taken whatever the rules say of it (rsync
//!   checks the rules against the listed path only, never its implied directories);
//! - a path below a listed directory is taken unless the rules exclude it (found by
//!   looking its leading directories up from the top, stopping at the first that is
//!   neither listed nor leading to a listed path: as many lookups as the listed
//!   directory is deep); but not below a directory the rules exclude that the walk
//!   entered only as leading to a listed path (listed `src` and `src/sub/b.c` with
//!   `--exclude sub/` take `src/sub/b.c` and nothing else of `src/sub`, as rsync,
//!   which does not go into an excluded directory, takes them);
//! - anything else is left out.
//!
//! An empty listed path (a line `.` or `/`) stands for the whole tree.

use super::FilterError;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// Listed paths and the directories leading to them, compiled for lookups.
#[derive(Debug)]
pub(super) struct Listed {
    /// The paths as listed (normalized: no `.`, no empty components, no trailing `/`),
    /// each with its place in the list.
    paths: HashMap<Vec<u8>, usize>,
    /// The list in its order, and whether the walk has met each path.
    order: Vec<(Vec<u8>, AtomicBool)>,
    /// Every proper, non-empty leading directory of a listed path the rules take.
    leading: HashSet<Vec<u8>>,
    /// Those of `leading` the rules exclude: passages to listed paths only.
    passages: HashSet<Vec<u8>>,
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

impl Listed {
    /// The list `paths` (normalized, see [`normalize`]); `excluded(path, is_dir)` says
    /// whether the rules leave a path out.
    pub(super) fn new(paths: &[Vec<u8>], excluded: impl Fn(&[u8], bool) -> bool) -> Listed {
        let mut leading = HashSet::new();
        let mut whole = false;
        for path in paths {
            if path.is_empty() {
                whole = true;
                continue;
            }
            if excluded(path, false) && excluded(path, true) {
                continue;
            }
            for (i, &b) in path.iter().enumerate() {
                if b == b'/' && !leading.contains(&path[..i]) {
                    leading.insert(path[..i].to_vec());
                }
            }
        }
        let passages = leading
            .iter()
            .filter(|dir| excluded(dir, true))
            .cloned()
            .collect();
        let mut at = HashMap::with_capacity(paths.len());
        for (i, path) in paths.iter().enumerate() {
            at.entry(path.clone()).or_insert(i);
        }
        Listed {
            paths: at,
            order: paths
                .iter()
                .map(|p| (p.clone(), AtomicBool::new(false)))
                .collect(),
            leading,
            passages,
            whole,
        }
    }

    /// What the list says of `path` (a directory when `is_dir`).
    pub(super) fn verdict(&self, path: &[u8], is_dir: bool) -> Verdict {
        if self.whole || self.paths.contains_key(path) {
            return Verdict::Rules;
        }
        if is_dir && self.leading.contains(path) {
            return Verdict::Leading;
        }
        // Whether the directories above so far put `path` below a listed one.
        let mut below = false;
        for (i, &b) in path.iter().enumerate() {
            if b != b'/' {
                continue;
            }
            let above = &path[..i];
            if self.paths.contains_key(above) {
                if self.passages.is_empty() {
                    return Verdict::Rules;
                }
                below = true;
            } else if self.passages.contains(above) {
                below = false;
            } else if !below && !self.leading.contains(above) {
                return Verdict::Out;
            }
        }
        match below {
            true => Verdict::Rules,
            false => Verdict::Out,
        }
    }

    /// Notes that the walk met `path`, if it is listed.
    pub(super) fn meet(&self, path: &[u8]) {
        if let Some(&i) = self.paths.get(path) {
            self.order[i].1.store(true, Relaxed);
        }
    }

    /// The listed paths (but the root) the walk has not met, in the list's order (a
    /// path listed twice, once).
    pub(super) fn unmet(&self) -> Vec<Vec<u8>> {
        let first = |i: usize, p: &Vec<u8>| self.paths.get(p) == Some(&i);
        self.order
            .iter()
            .enumerate()
            .filter(|(i, (p, met))| !p.is_empty() && !met.load(Relaxed) && first(*i, p))
            .map(|(_, (p, _))| p.clone())
            .collect()
    }

    /// How many paths are listed.
    pub(super) fn len(&self) -> usize {
        self.paths.len()
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

    fn list(paths: &[&str]) -> Listed {
        let paths: Vec<Vec<u8>> = paths.iter().map(|p| p.as_bytes().to_vec()).collect();
        Listed::new(&paths, |p, _| p == b"gone")
    }

    #[test]
    fn listed_paths_their_contents_and_leading_directories() {
        let l = list(&["a/b/c", "top", "gone", "x/gone"]);
        assert_eq!(l.verdict(b"a/b/c", false), Verdict::Rules);
        assert_eq!(l.verdict(b"a/b/c/d/e", false), Verdict::Rules);
        assert_eq!(l.verdict(b"a", true), Verdict::Leading);
        assert_eq!(l.verdict(b"a/b", true), Verdict::Leading);
        assert_eq!(l.verdict(b"a", false), Verdict::Out, "leading: a directory");
        assert_eq!(l.verdict(b"a/other", false), Verdict::Out);
        assert_eq!(l.verdict(b"a/b/other/c", false), Verdict::Out);
        assert_eq!(l.verdict(b"top/t", false), Verdict::Rules);
        assert_eq!(l.verdict(b"topx", false), Verdict::Out);
        assert_eq!(l.verdict(b"elsewhere/top", false), Verdict::Out);
        assert_eq!(l.verdict(b"x/gone", false), Verdict::Rules);
        assert_eq!(l.verdict(b"x", true), Verdict::Leading);
        assert_eq!(list(&["", "a"]).verdict(b"q/r", false), Verdict::Rules);
        let excluded = Listed::new(&[b"d/gone".to_vec()], |p, _| p.ends_with(b"gone"));
        assert_eq!(excluded.verdict(b"d", true), Verdict::Out, "brings no dirs");
        // `src` and `src/sub/b.c` listed, `sub/` excluded: of `src/sub`, only `b.c`.
        let paths = [
            b"src".to_vec(),
            b"src/sub/b.c".to_vec(),
            b"src/sub/x/y".to_vec(),
        ];
        let l = Listed::new(&paths, |p, dir| dir && p.ends_with(b"sub"));
        assert_eq!(l.verdict(b"src/sub", true), Verdict::Leading);
        assert_eq!(l.verdict(b"src/sub/b.c", false), Verdict::Rules);
        assert_eq!(l.verdict(b"src/sub/b.o", false), Verdict::Out);
        assert_eq!(l.verdict(b"src/sub/x", true), Verdict::Leading);
        assert_eq!(l.verdict(b"src/sub/x/y/z", false), Verdict::Rules);
        assert_eq!(l.verdict(b"src/other/z", false), Verdict::Rules);
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
