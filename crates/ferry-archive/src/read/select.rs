//! Which members a command was asked for, as `tar -xf A NAME...` takes them: a name
//! selects the member of that name and, when it is a directory, everything below it.
//! Names are compared as member paths are made safe (`./a/b/`, `/a/b` and `a//b` are
//! all `a/b`). Each name remembers whether it selected anything, so a name that matched
//! no member can be reported, as GNU tar reports "Not found in archive".
//!
//! A name with `*`, `?` or `[` in it is a glob, as `tar --wildcards` takes it: `*` and
//! `?` match any bytes, `/` included, `[...]` a class, `\` the next character as it
//! is; it selects each member whose path it matches, and everything below one (`'dir/*'`
//! selects what is below `dir`, `'*.c'` every `.c` file at any depth).

use super::convert::{safe_path, Rename};
use crate::transform::Transform;
use ferry_core::entry::RelPath;
use ferry_core::error::{Error, Reporter};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// One name given: a member path, or a glob.
#[derive(Debug)]
enum Wanted {
    /// The member at this path, and what lies below it.
    Path(RelPath),
    /// The members whose path the glob matches (`shown`, as given), and what lies
    /// below them.
    Glob {
        shown: RelPath,
        glob: globset::GlobMatcher,
    },
}

impl Wanted {
    /// The name as given, for messages.
    fn shown(&self) -> &RelPath {
        match self {
            Wanted::Path(p) | Wanted::Glob { shown: p, .. } => p,
        }
    }

    /// Whether it selects the member at `path`.
    fn takes(&self, path: &RelPath) -> bool {
        match self {
            Wanted::Path(name) => is_within(path, name),
            Wanted::Glob { glob, .. } => {
                let p = path.as_bytes();
                // The path itself, or one of its ancestors.
                let ends = p
                    .iter()
                    .enumerate()
                    .filter(|(_, &b)| b == b'/')
                    .map(|(i, _)| i);
                ends.chain([p.len()]).any(|end| {
                    let at = std::path::Path::new(std::ffi::OsStr::from_bytes(&p[..end]));
                    glob.is_match(at)
                })
            }
        }
    }
}

/// A name with glob characters, made a matcher for member paths as they are made
/// safe (without a leading `/` or `./`).
fn glob_of(raw: &[u8]) -> Result<Option<Wanted>, String> {
    if !raw.iter().any(|b| b"*?[".contains(b)) {
        return Ok(None);
    }
    let shown = RelPath::from_bytes(raw.to_vec());
    let (glob, _) = matcher(raw)?;
    Ok(Some(Wanted::Glob { shown, glob }))
}

/// `raw` as a glob over safe member paths (`*` matching `/` too, as tar's), and
/// whether it was anchored at the archive's root by a leading `/` or `./`.
fn matcher(raw: &[u8]) -> Result<(globset::GlobMatcher, bool), String> {
    let shown = RelPath::from_bytes(raw.to_vec());
    let text = std::str::from_utf8(raw).map_err(|_| format!("{shown}: a glob must be UTF-8"))?;
    let mut text = text.trim_start_matches('/');
    while let Some(rest) = text.strip_prefix("./") {
        text = rest.trim_start_matches('/');
    }
    let anchored = text.len() < raw.len();
    let glob = globset::GlobBuilder::new(text.trim_end_matches('/'))
        .literal_separator(false)
        .backslash_escape(true)
        .build()
        .map_err(|e| format!("{shown}: {e}"))?
        .compile_matcher();
    Ok((glob, anchored))
}

/// An `--exclude` pattern as one regular expression over a member's whole path: the
/// glob (`*` matching `/` too, and newlines, as fnmatch's) matching a run of whole
/// components (from the first one only when `anchored`): how GNU tar's `--exclude`
/// matches, a match excluding what lies below too. One search a member, in time linear
/// in the path (trying each run on its own took time growing with the square of the
/// components, which a deep hostile path makes a hang).
fn run_matcher(raw: &[u8]) -> Result<regex::bytes::Regex, String> {
    let (glob, anchored) = matcher(raw)?;
    let shown = RelPath::from_bytes(raw.to_vec());
    let whole = glob.glob().regex();
    let body = whole
        .strip_prefix("(?-u)^")
        .and_then(|b| b.strip_suffix('$'))
        .ok_or_else(|| format!("{shown}: unexpected glob expression {whole}"))?;
    let start = if anchored { "^" } else { "(?:^|/)" };
    regex::bytes::Regex::new(&format!("(?-u)(?s){start}(?:{body})(?:/|$)"))
        .map_err(|e| format!("{shown}: {e}"))
}

/// The members asked for: all of them, or those at or below some names.
#[derive(Debug, Default)]
pub struct Selection {
    /// The names given, each with whether a member matched it. Empty: every member.
    names: Vec<(Wanted, AtomicBool)>,
    /// Leading components dropped from every member's name before it is selected
    /// and made (`--strip-components`).
    strip: usize,
    /// `--transform`'s expressions, applied before the strip.
    transform: Option<std::sync::Arc<Transform>>,
    /// Patterns whose members are left out (`--exclude`), each with whether it is
    /// anchored at the root.
    excluded: Vec<regex::bytes::Regex>,
    /// Names given by where a member's headers start, in place of the archive's.
    named_at: Option<std::collections::HashMap<u64, Vec<u8>>>,
}

impl Selection {
    /// Every member.
    pub fn all() -> Selection {
        Selection::default()
    }

    /// The members at or below `names`; none given means every member. A name that
    /// reaches outside the archive (`..`) is refused, naming it.
    pub fn of<N: AsRef<[u8]>>(names: &[N]) -> Result<Selection, String> {
        let names = names
            .iter()
            .map(|raw| {
                let raw = raw.as_ref();
                if let Some(glob) = glob_of(raw)? {
                    return Ok((glob, AtomicBool::new(false)));
                }
                safe_path(raw)
                    .map(|path| (Wanted::Path(path), AtomicBool::new(false)))
                    .map_err(|why| format!("{}: {why}", RelPath::from_bytes(raw.to_vec())))
            })
            .collect::<Result<_, _>>()?;
        Ok(Selection {
            names,
            ..Selection::default()
        })
    }

    /// The same selection without the members `patterns` match, as GNU tar's
    /// `--exclude` takes them: a pattern (a glob; `*` matches `/` too) matches any run
    /// of whole components of a member's path, and so leaves out what lies below it
    /// too (`d` leaves out `d`, `d/f` and `e/d`); with a leading `./` or `/`, only from
    /// the archive's root (`./d` leaves out `d` and `d/f`, not `e/d`).
    pub fn excluding<P: AsRef<[u8]>>(mut self, patterns: &[P]) -> Result<Selection, String> {
        for p in patterns {
            self.excluded.push(run_matcher(p.as_ref())?);
        }
        Ok(self)
    }

    /// Whether an `--exclude` pattern leaves out the member at `path`.
    fn is_excluded(&self, path: &RelPath) -> bool {
        self.excluded.iter().any(|re| re.is_match(path.as_bytes()))
    }

    /// The same selection of members whose names lose their first `n` components
    /// (`tar --strip-components N`); names given are matched against what is left.
    pub fn stripping(mut self, n: usize) -> Selection {
        self.strip = n;
        self
    }

    /// The same selection of members renamed by `transform` (`--transform`), before
    /// any strip; names given are matched against the new names.
    pub fn transforming(mut self, transform: std::sync::Arc<Transform>) -> Selection {
        self.transform = Some(transform);
        self
    }

    /// The same selection, the members whose headers start at the offsets of `names`
    /// named as it says instead of as the archive does (before any transform or
    /// strip; names given are matched against the new names). A download from S3
    /// names so the files its manifest keeps in a shard under an earlier name.
    pub fn naming_at(mut self, names: std::collections::HashMap<u64, Vec<u8>>) -> Selection {
        self.named_at = (!names.is_empty()).then_some(names);
        self
    }

    /// How members are renamed: see [`Rename`].
    pub fn renaming(&self) -> Rename<'_> {
        Rename {
            strip: self.strip,
            transform: self.transform.as_deref(),
            at: self.named_at.as_ref(),
        }
    }

    /// Whether every member is selected.
    pub fn is_all(&self) -> bool {
        self.names.is_empty() && self.excluded.is_empty()
    }

    /// Whether the member at `path` (a safe path) is selected; the names that select it
    /// are marked as having matched.
    pub fn selects(&self, path: &RelPath) -> bool {
        if self.is_all() {
            return true;
        }
        if self.is_excluded(path) {
            return false;
        }
        if self.names.is_empty() {
            return true;
        }
        let mut selected = false;
        for (name, matched) in &self.names {
            if name.takes(path) {
                matched.store(true, Relaxed);
                selected = true;
            }
        }
        selected
    }

    /// Whether the member at `path` is selected, without marking any name.
    pub fn covers(&self, path: &RelPath) -> bool {
        self.is_all()
            || !self.is_excluded(path)
                && (self.names.is_empty() || self.names.iter().any(|(name, _)| name.takes(path)))
    }

    /// Reports each name that selected no member as an error of `op` naming it, as GNU
    /// tar says "Not found in archive"; whether there was any.
    pub fn report_unmatched(&self, op: &'static str, reporter: &dyn Reporter) -> bool {
        let mut any = false;
        for name in self.unmatched() {
            any = true;
            let why = io::Error::other("no such member in the archive");
            reporter.error(&Error::new(name, op, why));
        }
        any
    }

    /// The names that selected no member so far, in the order given.
    pub fn unmatched(&self) -> impl Iterator<Item = &RelPath> {
        self.names
            .iter()
            .filter(|(_, matched)| !matched.load(Relaxed))
            .map(|(name, _)| name.shown())
    }
}

/// `dir` is `path` or one of its ancestors (the root is everyone's).
pub fn is_within(path: &RelPath, dir: &RelPath) -> bool {
    let (p, d) = (path.as_bytes(), dir.as_bytes());
    d.is_empty() || (p.starts_with(d) && (p.len() == d.len() || p[d.len()] == b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(p: &str) -> RelPath {
        safe_path(p.as_bytes()).unwrap()
    }

    #[test]
    fn a_name_selects_its_member_and_what_lies_below_it() {
        let s = Selection::of(&["./a/b/", "/c", "x"]).unwrap();
        assert!(s.selects(&path("a/b")));
        assert!(s.selects(&path("a/b/f")));
        assert!(s.selects(&path("c")));
        assert!(!s.selects(&path("a")), "an ancestor is not selected");
        assert!(
            !s.selects(&path("a/bc")),
            "a sibling sharing a prefix is not"
        );
        assert!(!s.selects(&path("")));
        assert_eq!(s.unmatched().collect::<Vec<_>>(), vec![&path("x")]);
        assert!(s.covers(&path("x/y")));
        assert_eq!(s.unmatched().count(), 1, "covers marks nothing as matched");
    }

    #[test]
    fn no_names_or_the_root_select_everything() {
        assert!(Selection::all().selects(&path("")));
        assert!(Selection::of::<&str>(&[]).unwrap().is_all());
        let root = Selection::of(&["."]).unwrap();
        assert!(root.selects(&path("any/thing")));
        assert_eq!(root.unmatched().count(), 0);
    }

    #[test]
    fn a_glob_selects_what_it_matches_and_what_lies_below() {
        let s = Selection::of(&["./dir/*", "*.c", "x?z", "none*"]).unwrap();
        assert!(s.selects(&path("dir/a")));
        assert!(
            s.selects(&path("dir/a/b")),
            "`*` crosses `/`, as tar's does"
        );
        assert!(
            !s.selects(&path("dir")),
            "the directory itself is not below it"
        );
        assert!(s.selects(&path("src/deep/f.c")));
        assert!(s.selects(&path("xyz/below")), "below a matched directory");
        assert!(!s.selects(&path("other/f.h")));
        let unmatched: Vec<_> = s.unmatched().map(|p| p.to_string()).collect();
        assert_eq!(unmatched, ["none*"]);
        assert!(Selection::of(&["[z-a]"])
            .unwrap_err()
            .starts_with("[z-a]: "));
    }

    #[test]
    fn excluded_as_gnu_tar_excludes() {
        // What `tar -xf A --exclude=P` left of ./d ./d/f ./d/sub ./d/sub/g ./e ./e/d
        // ./e/y.o ./x.o (GNU tar 1.34).
        let all = ["d", "d/f", "d/sub", "d/sub/g", "e", "e/d", "e/y.o", "x.o"];
        for (pattern, left) in [
            ("d", &["e", "e/y.o", "x.o"][..]),
            ("d/sub", &["d", "d/f", "e", "e/d", "e/y.o", "x.o"]),
            ("*.o", &["d", "d/f", "d/sub", "d/sub/g", "e", "e/d"]),
            ("./d", &["e", "e/d", "e/y.o", "x.o"]),
            ("*/g", &["d", "d/f", "d/sub", "e", "e/d", "e/y.o", "x.o"]),
        ] {
            let s = Selection::all().excluding(&[pattern]).unwrap();
            let got: Vec<&str> = all
                .iter()
                .copied()
                .filter(|p| s.selects(&path(p)))
                .collect();
            assert_eq!(got, left, "--exclude {pattern}");
        }
    }

    /// The one search gives what trying every run of components on its own gives.
    #[test]
    fn one_search_equals_each_run_tried() {
        let tried = |glob: &globset::GlobMatcher, anchored: bool, p: &[u8]| {
            let cuts: Vec<usize> = (0..=p.len())
                .filter(|&i| i == p.len() || p[i] == b'/')
                .collect();
            let starts: Vec<usize> = std::iter::once(0)
                .chain(cuts.iter().map(|c| c + 1))
                .collect();
            let starts = &starts[..if anchored { 1 } else { cuts.len() }];
            starts.iter().any(|&s| {
                cuts.iter().filter(|&&e| e >= s).any(|&e| {
                    glob.is_match(std::path::Path::new(std::ffi::OsStr::from_bytes(&p[s..e])))
                })
            })
        };
        let parts = ["a", "b", "ab", "a.o", "x\ny", "d"];
        let patterns = [
            "a", "*.o", "a/b", "a*", "*b", "./a", "/d/*", "?", "[ab]/a*", "d/*/b", "x*y",
        ];
        let mut rng = fastrand::Rng::with_seed(33);
        for pattern in patterns {
            let (glob, anchored) = matcher(pattern.as_bytes()).unwrap();
            let re = run_matcher(pattern.as_bytes()).unwrap();
            for _ in 0..400 {
                let n = rng.usize(1..6);
                let path: Vec<&str> = (0..n).map(|_| parts[rng.usize(..parts.len())]).collect();
                let p = path.join("/").replace("\\n", "\n");
                let p = p.as_bytes();
                assert_eq!(
                    re.is_match(p),
                    tried(&glob, anchored, p),
                    "{pattern} on {p:?}"
                );
            }
        }
    }

    #[test]
    fn a_name_reaching_outside_is_refused_naming_it() {
        let err = Selection::of(&["a/../../etc"]).unwrap_err();
        assert!(err.starts_with("a/../../etc: "), "{err}");
    }
}
