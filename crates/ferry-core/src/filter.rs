//! Filter rules: which entries of a tree a job takes, in rsync's sense of `--exclude`
//! and `--include`.
//!
//! Rules are kept in the order given; an entry is checked against them in that order
//! and the first rule that matches decides (no rule matching: the entry is taken). The
//! walker checks every name it reads before it does anything else with it, so an
//! excluded directory is never opened, and nothing below it is read or counted. The
//! root of the walk is never checked.
//!
//! A pattern is matched against the entry's path relative to the root of the walk:
//!
//! - `*` matches any run of bytes but `/`, `?` one byte but `/`, `[...]` one byte of a
//!   class (`[!...]` or `[^...]` negated), `**` any run of bytes, `/` included; a `\`
//!   takes the next character literally. `dir/***` matches `dir` itself (a directory)
//!   and everything below it.
//! - A leading `/` anchors the pattern at the root (`/build` is `build` at the top
//!   only); without it the pattern may match at any depth, at a `/` boundary
//!   (`src/*.o` matches `src/a.o` and `lib/src/b.o`).
//! - A trailing `/` matches directories only (`cache/` leaves a file named `cache`
//!   alone).
//! - A pattern without `/` (but a trailing one) and without `**` matches the name at
//!   any depth (`*.o`, `.git`).
//! - `**` between slashes stands for at least one directory (`a/**/c` matches `a/b/c`
//!   and `a/b/d/c`, not `a/c`), at the start for any number (`**/c` matches `c` too), as
//!   rsync has it.
//! - A pattern given as `- PATTERN` is an exclude rule and `+ PATTERN` an include rule,
//!   whichever option gave it; `!` clears the rules given so far.
//!
//! Patterns are compiled once, all together, into one [`globset::GlobSet`], and
//! matched against the path's bytes: names need not be UTF-8. globset matches bytes,
//! not characters (its regexes run with Unicode off), so `?` and `[...]` take one
//! byte, as rsync's do, and a name that is not UTF-8 matches `*` like any other. The
//! patterns themselves must be UTF-8 (globset takes `&str`): a pattern that is not is
//! refused, naming it; `?` stands for any one byte in its place. rsync's POSIX classes
//! (`[[:alpha:]]`) are not supported.
//!
//! Rules may also carry a list of paths (`--files-from`, see [`listed`]): then only
//! what the list names is taken, and of that what the rules take.

mod glob;
mod listed;

pub use listed::{normalize, parse_list};

use glob::globs_of;
use globset::{Candidate, GlobSet, GlobSetBuilder};
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

/// What a rule does with the entries it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Take the entry (and stop looking at later rules).
    Include,
    /// Leave the entry out; a directory with everything below it.
    Exclude,
}

/// A rule that cannot be used: one line naming the pattern (and where it came from).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct FilterError(String);

/// The rules as given, in order, before they are compiled into a [`Filter`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    rules: Vec<(Action, String)>,
    /// The paths of a `--files-from` list, normalized ([`normalize`]), if one is given.
    listed: Option<Arc<Vec<Vec<u8>>>>,
}

/// At most this many `**` inside a name (not between slashes) in one pattern: each
/// doubles the globs the pattern is compiled into.
const MAX_INNER_DOUBLE_STARS: usize = 4;

impl Rules {
    /// No rules: every entry is taken.
    pub fn new() -> Self {
        Rules::default()
    }

    /// Whether there are no rules (and no list of paths).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.listed.is_none()
    }

    /// Takes only `paths` (normalized by [`normalize`]; the empty path is the whole
    /// tree), each with everything below it, and the directories leading to them; the
    /// rules still decide on each listed path and what is below it. Replaces a list
    /// given before.
    pub fn set_listed(&mut self, paths: Vec<Vec<u8>>) {
        self.listed = Some(Arc::new(paths));
    }

    /// Drops from the list the paths the rules leave out as what they are, asking
    /// `kind` (`Some(is_dir)`, None when not there) of those only that the rules take
    /// as one kind and not the other (patterns for directories only), so a listed
    /// path the rules leave out brings no leading directories. (Without this, such a
    /// path keeps its leading directories.)
    pub fn settle_kinds(
        &mut self,
        kind: impl Fn(&[u8]) -> Option<bool>,
    ) -> Result<(), FilterError> {
        let Some(paths) = self.listed.take() else {
            return Ok(());
        };
        let rules = self.compile()?;
        let mut kept = Vec::with_capacity(paths.len());
        for path in Arc::unwrap_or_clone(paths) {
            let excluded = |is_dir| rules.as_ref().is_some_and(|r| r.excludes(&path, is_dir));
            let (as_file, as_dir) = (excluded(false), excluded(true));
            let dropped = match kind_matters(as_file, as_dir, &path) {
                false => false,
                true => kind(&path).is_some_and(|is_dir| if is_dir { as_dir } else { as_file }),
            };
            if !dropped {
                kept.push(path);
            }
        }
        self.set_listed(kept);
        Ok(())
    }

    /// The list of paths given by [`Self::set_listed`], if any.
    pub fn listed(&self) -> Option<&[Vec<u8>]> {
        self.listed.as_deref().map(Vec::as_slice)
    }

    /// Adds one rule given by an option: `action` unless the pattern starts with `+ `
    /// or `- `; `!` clears the rules so far. An empty pattern adds nothing.
    pub fn add(&mut self, action: Action, pattern: &[u8]) -> Result<(), FilterError> {
        let shown = || crate::entry::escaped(pattern);
        let text = std::str::from_utf8(pattern).map_err(|_| {
            FilterError(format!(
                "pattern {:?}: not UTF-8 (ferry's globs are UTF-8; `?` matches any one byte)",
                shown()
            ))
        })?;
        let (action, text) = match text.as_bytes() {
            [b'+', b' ', ..] => (Action::Include, &text[2..]),
            [b'-', b' ', ..] => (Action::Exclude, &text[2..]),
            _ => (action, text),
        };
        if text == "!" {
            self.rules.clear();
            return Ok(());
        }
        if text.is_empty() {
            return Ok(());
        }
        // Checked now, so the error names the pattern where it was given.
        globs_of(text).map_err(|why| FilterError(format!("pattern {text:?}: {why}")))?;
        self.rules.push((action, text.to_owned()));
        Ok(())
    }

    /// Adds the rules of a file (`--exclude-from`): one pattern a line, as [`Self::add`]
    /// takes it; blank lines and lines starting with `#` or `;` are skipped, a line's
    /// ending `\r` is dropped. Errors name `source` and the line.
    pub fn add_lines(
        &mut self,
        action: Action,
        text: &[u8],
        source: &str,
    ) -> Result<(), FilterError> {
        self.add_entries(action, text, false, source)
    }

    /// [`Self::add_lines`], or with `nul` the rules of a file of NUL-ended entries
    /// (rsync's `--from0`), each taken whole (a `\r` too).
    pub fn add_entries(
        &mut self,
        action: Action,
        text: &[u8],
        nul: bool,
        source: &str,
    ) -> Result<(), FilterError> {
        let end = if nul { 0 } else { b'\n' };
        for (n, line) in text.split(|&b| b == end).enumerate() {
            let line = match nul {
                true => line,
                false => line.strip_suffix(b"\r").unwrap_or(line),
            };
            if line.is_empty() || line[0] == b'#' || line[0] == b';' {
                continue;
            }
            self.add(action, line)
                .map_err(|e| FilterError(format!("{source}: line {}: {e}", n + 1)))?;
        }
        Ok(())
    }

    /// The rules as bytes for another ferry ([`Self::decode`] reads them back): each
    /// `+ PATTERN` or `- PATTERN` ended by a NUL (no pattern holds one: they come from
    /// command lines and files of lines). A list of paths follows as `=` and a NUL,
    /// then each path as `= PATH` and a NUL (no path holds one); rules without a list
    /// are encoded as they were before lists were.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (action, text) in &self.rules {
            out.extend_from_slice(match action {
                Action::Include => b"+ ",
                Action::Exclude => b"- ",
            });
            out.extend_from_slice(text.as_bytes());
            out.push(0);
        }
        if let Some(paths) = &self.listed {
            out.extend_from_slice(b"=\0");
            for path in paths.iter() {
                out.extend_from_slice(b"= ");
                out.extend_from_slice(path);
                out.push(0);
            }
        }
        out
    }

    /// Rules [`Self::encode`] wrote, checked as given ones are: a rule without its
    /// `+ ` or `- ` is refused, as is any pattern [`Self::add`] refuses, a listed path
    /// before the `=` that starts a list, and one that is not as [`normalize`] leaves
    /// paths.
    pub fn decode(bytes: &[u8]) -> Result<Rules, FilterError> {
        let mut rules = Rules::new();
        let mut listed: Option<Vec<Vec<u8>>> = None;
        for (n, rule) in bytes.split(|&b| b == 0).enumerate() {
            let refused = |why: &str| {
                let shown = crate::entry::escaped(rule);
                FilterError(format!("rule {}: {shown:?}: {why}", n + 1))
            };
            match (rule, &mut listed) {
                ([b'='], None) => listed = Some(Vec::new()),
                ([b'=', b' ', path @ ..], Some(paths)) => match normalize(path) {
                    Ok(normal) if normal == path => paths.push(normal),
                    _ => return Err(refused("not a normalized path")),
                },
                ([b'=', ..], _) => return Err(refused("not a list's path")),
                ([], _) => continue,
                ([b'+' | b'-', b' ', _, ..], _) => rules.add(Action::Exclude, rule)?,
                _ => {
                    let shown = crate::entry::escaped(rule);
                    return Err(FilterError(format!(
                        "rule {}: {shown:?}: not + or - PATTERN",
                        n + 1
                    )));
                }
            }
        }
        if let Some(paths) = listed {
            rules.set_listed(paths);
        }
        Ok(rules)
    }

    /// Compiles the rules into one matcher; `None` when there are none.
    pub fn compile(&self) -> Result<Option<Filter>, FilterError> {
        let how = self.compile_rules()?;
        let Some(paths) = &self.listed else {
            return Ok(how.map(|how| Filter { how, list: None }));
        };
        let how = how.unwrap_or(How::Nothing);
        let by_rules = Filter { how, list: None };
        let list = listed::Listed::new(paths, |p, is_dir| by_rules.excludes(p, is_dir));
        Ok(Some(Filter {
            how: by_rules.how,
            list: Some(Arc::new(list)),
        }))
    }

    /// The rules (not the list) compiled; `None` when there are none.
    fn compile_rules(&self) -> Result<Option<How>, FilterError> {
        if self.rules.is_empty() {
            return Ok(None);
        }
        let mut set = GlobSetBuilder::new();
        let mut globs = Vec::new();
        for (rule, (action, text)) in self.rules.iter().enumerate() {
            let why = |e: String| FilterError(format!("pattern {text:?}: {e}"));
            for (glob, dir_only) in globs_of(text).map_err(why)? {
                set.add(glob);
                globs.push(GlobRule {
                    rule,
                    action: *action,
                    dir_only,
                });
            }
        }
        let set = set.build().map_err(|e| FilterError(e.to_string()))?;
        Ok(Some(How::Globs { set, globs }))
    }
}

/// Whether the kind of `path` (not the empty path, the root) decides whether the rules
/// take it: they take one kind and not the other.
fn kind_matters(as_file: bool, as_dir: bool, path: &[u8]) -> bool {
    as_file != as_dir && !path.is_empty()
}

/// What one compiled glob belongs to.
#[derive(Clone, Copy, Debug)]
struct GlobRule {
    /// The rule's place in the order given.
    rule: usize,
    action: Action,
    /// The glob matches directories only.
    dir_only: bool,
}

/// Compiled rules: decides, for a path relative to the root of a walk, whether it is
/// taken. Shared by every worker of a walk.
#[derive(Clone)]
pub struct Filter {
    how: How,
    /// Only what this list names is taken (`--files-from`), as [`listed`] says.
    list: Option<Arc<listed::Listed>>,
}

#[derive(Clone)]
enum How {
    /// No rules: the list alone decides.
    Nothing,
    /// Rules compiled into one glob matcher.
    Globs { set: GlobSet, globs: Vec<GlobRule> },
    /// These paths and directories, nothing else: a list of thousands of exact paths
    /// (an S3 shard's members) as globs took 130 MiB to compile.
    Exactly {
        paths: Arc<HashSet<Vec<u8>>>,
        dirs: Arc<HashSet<Vec<u8>>>,
    },
}

impl fmt::Debug for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.how {
            How::Nothing => write!(f, "Filter(no rules"),
            How::Globs { globs, .. } => write!(f, "Filter({} globs", globs.len()),
            How::Exactly { paths, dirs } => {
                write!(f, "Filter({} paths, {} dirs", paths.len(), dirs.len())
            }
        }?;
        match &self.list {
            Some(list) => write!(f, ", {} listed)", list.len()),
            None => write!(f, ")"),
        }
    }
}

thread_local! {
    /// The globs that matched the last path, reused so matching allocates nothing.
    static HITS: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    /// The path being checked, built from a directory's path and a name.
    static PATH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl Filter {
    /// A filter taking exactly `paths` (of any kind) and the directories `dirs` (the
    /// ones leading to them), and leaving out everything else.
    pub fn exactly(paths: HashSet<Vec<u8>>, dirs: HashSet<Vec<u8>>) -> Filter {
        Filter {
            how: How::Exactly {
                paths: Arc::new(paths),
                dirs: Arc::new(dirs),
            },
            list: None,
        }
    }

    /// The action of the first rule matching `path` (a directory when `is_dir`), if any;
    /// with a list of paths, an exclusion for what it does not take, an inclusion for a
    /// directory leading to a listed path.
    pub fn decide(&self, path: &[u8], is_dir: bool) -> Option<Action> {
        self.decide_noting(path, is_dir, false)
    }

    /// [`Self::decide`]; with `meet`, a listed `path` is noted as met.
    fn decide_noting(&self, path: &[u8], is_dir: bool, meet: bool) -> Option<Action> {
        let excluded_dir = |dir: &[u8]| self.decide_by_rules(dir, true) == Some(Action::Exclude);
        let verdict = self.list.as_ref();
        match verdict.map(|l| l.verdict(path, is_dir, meet, &excluded_dir)) {
            None | Some(listed::Verdict::Rules) => self.decide_by_rules(path, is_dir),
            Some(listed::Verdict::Leading) => Some(Action::Include),
            Some(listed::Verdict::Out) => Some(Action::Exclude),
        }
    }

    /// The action of the first rule (not the list) matching `path`, if any.
    fn decide_by_rules(&self, path: &[u8], is_dir: bool) -> Option<Action> {
        let (set, globs) = match &self.how {
            How::Nothing => return None,
            How::Globs { set, globs } => (set, globs),
            How::Exactly { paths, dirs } => {
                let taken = paths.contains(path) || (is_dir && dirs.contains(path));
                return Some(if taken {
                    Action::Include
                } else {
                    Action::Exclude
                });
            }
        };
        let candidate = Candidate::from_bytes(path);
        HITS.with(|hits| {
            let mut hits = hits.borrow_mut();
            set.matches_candidate_into(&candidate, &mut hits);
            hits.iter()
                .map(|&i| globs[i])
                .filter(|g| is_dir || !g.dir_only)
                .min_by_key(|g| g.rule)
                .map(|g| g.action)
        })
    }

    /// Whether `path` is left out.
    pub fn excludes(&self, path: &[u8], is_dir: bool) -> bool {
        self.decide(path, is_dir) == Some(Action::Exclude)
    }

    /// The listed paths (`--files-from`) the walk has not met (see [`Self::excludes_in`]),
    /// in the list's order: not there, or below a directory it did not go into.
    pub fn unmet_listed(&self) -> Vec<Vec<u8>> {
        self.list.as_ref().map_or_else(Vec::new, |l| l.unmet())
    }

    /// Whether the entry `name` of the directory at `dir` (relative to the root; empty
    /// for the root) is left out: the walker's question, so a listed path asked about
    /// is noted as met.
    pub fn excludes_in(&self, dir: &[u8], name: &[u8], is_dir: bool) -> bool {
        PATH.with(|path| {
            let mut path = path.borrow_mut();
            path.clear();
            path.extend_from_slice(dir);
            if !dir.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(name);
            self.decide_noting(&path, is_dir, true) == Some(Action::Exclude)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_encoded_decode_to_the_same_rules_and_junk_is_refused() {
        let mut rules = Rules::new();
        rules.add(Action::Include, b"keep/*.o").unwrap();
        rules.add(Action::Exclude, b"*.o").unwrap();
        rules.add(Action::Exclude, b"+ /build/").unwrap();
        let back = Rules::decode(&rules.encode()).expect("decodes");
        assert_eq!(back, rules);
        assert!(Rules::decode(b"").expect("no rules").is_empty());
        for junk in [&b"*.o\0"[..], b"+ \0", b"x \0", b"- [\0", b"- \xff\0"] {
            assert!(Rules::decode(junk).is_err(), "{junk:?}");
        }
    }

    #[test]
    fn a_list_travels_with_the_rules_and_old_encodings_decode_as_before() {
        let mut rules = Rules::new();
        rules.add(Action::Exclude, b"*.o").unwrap();
        let old = rules.encode();
        assert_eq!(old, b"- *.o\0", "no list: encoded as before lists");
        rules.set_listed(vec![b"a/b".to_vec(), b"new\nline\xff".to_vec(), Vec::new()]);
        let back = Rules::decode(&rules.encode()).expect("decodes");
        assert_eq!(back, rules);
        assert_eq!(Rules::decode(&old).expect("old").listed(), None);
        let mut empty = Rules::new();
        empty.set_listed(Vec::new());
        assert!(!empty.is_empty(), "an empty list takes nothing");
        assert_eq!(Rules::decode(&empty.encode()).expect("empty list"), empty);
        for junk in [
            &b"= a\0"[..],
            b"=\0= a/../b\0",
            b"=\0= /a\0",
            b"=\0= a//b\0",
            b"=\0= a/\0",
            b"=\0=x\0",
            b"=\0=\0",
        ] {
            assert!(Rules::decode(junk).is_err(), "{junk:?}");
        }
    }

    /// A list from another ferry is untrusted: a path of 512 Ki components (1 MiB,
    /// the most a request carries) costs as much as its bytes to decode, compile and
    /// ask about, not their square (which would be about 10^11 bytes hashed).
    #[test]
    fn a_deep_list_costs_its_length() {
        let deep: Vec<u8> = b"a/".repeat(1 << 19)[..(1 << 20) - 1].to_vec();
        let mut encoded = b"- a/\0=\0= ".to_vec();
        encoded.extend_from_slice(&deep);
        encoded.push(0);
        let rules = Rules::decode(&encoded).expect("decodes");
        let f = rules.compile().expect("compile").expect("filter");
        assert!(!f.excludes(&deep, false));
        assert!(!f.excludes(&deep[..deep.len() - 2], true), "leading");
        let mut below = deep.clone();
        below.extend_from_slice(b"/x");
        assert!(!f.excludes(&below, false));
        assert!(f.excludes(b"a/b", false));
    }

    #[test]
    fn a_list_takes_its_paths_and_the_rules_still_decide_on_them() {
        let mut rules = Rules::new();
        rules.add(Action::Exclude, b"t").unwrap();
        rules.add(Action::Exclude, b"c").unwrap();
        rules.add(Action::Exclude, b"f").unwrap();
        rules.set_listed(vec![
            b"a/b/c/g".to_vec(),
            b"top".to_vec(),
            b"x/y/f".to_vec(),
        ]);
        let f = rules.compile().expect("compile").expect("filter");
        // Leading directories are taken though a rule matches them (rsync's implied
        // directories), but only for a listed path the rules take.
        assert!(!f.excludes(b"a/b/c", true) && !f.excludes(b"a/b/c/g", false));
        assert!(f.excludes(b"x", true) && f.excludes(b"x/y/f", false));
        assert!(!f.excludes(b"top", true) && f.excludes(b"top/t", false));
        assert!(!f.excludes(b"top/u", false) && f.excludes(b"other", false));
        // Told their kinds, a listed file a rule for directories takes brings none.
        let mut rules = Rules::new();
        rules.add(Action::Include, b"*/").unwrap();
        rules.add(Action::Exclude, b"*").unwrap();
        rules.set_listed(vec![b"d/f".to_vec(), b"e/g".to_vec(), b"h/i".to_vec()]);
        assert!(!rules.compile().unwrap().unwrap().excludes(b"d", true));
        let kind = |p: &[u8]| (p != b"h/i").then_some(p == b"e/g");
        rules.settle_kinds(kind).unwrap();
        assert_eq!(
            rules.listed(),
            Some(&[b"e/g".to_vec(), b"h/i".to_vec()][..])
        );
        let f = rules.compile().expect("compile").expect("filter");
        assert!(f.excludes(b"d", true) && !f.excludes(b"e", true));
        assert_eq!(f.unmet_listed(), [b"e/g".to_vec(), b"h/i".to_vec()]);
        assert!(!f.excludes_in(b"e", b"g", true));
        assert_eq!(
            f.unmet_listed(),
            [b"h/i".to_vec()],
            "met by the walker's question"
        );
        let mut none = Rules::new();
        none.set_listed(Vec::new());
        let f = none.compile().expect("compile").expect("a filter");
        assert!(f.excludes(b"anything", false));
    }

    #[test]
    fn exactly_takes_its_paths_and_directories_and_nothing_else() {
        let set = |v: &[&str]| v.iter().map(|p| p.as_bytes().to_vec()).collect();
        let f = Filter::exactly(set(&["a/b/c*[x]", "top"]), set(&["a", "a/b"]));
        assert!(!f.excludes(b"a/b/c*[x]", false));
        assert!(!f.excludes(b"top", false));
        assert!(!f.excludes_in(b"a", b"b", true));
        assert!(
            f.excludes(b"a/b/cz[x]", false),
            "glob characters are plain bytes"
        );
        assert!(f.excludes(b"a", false), "a directory only as a directory");
        assert!(f.excludes(b"a/other", true));
    }

    fn filter(rules: &[(Action, &str)]) -> Filter {
        let mut r = Rules::new();
        for (a, p) in rules {
            r.add(*a, p.as_bytes()).expect("rule");
        }
        r.compile().expect("compile").expect("some rules")
    }

    fn ex(pattern: &str) -> Filter {
        filter(&[(Action::Exclude, pattern)])
    }

    #[test]
    fn anchoring_depth_and_directories_only() {
        let f = ex("/build");
        assert!(f.excludes(b"build", false) && !f.excludes(b"a/build", false));
        let f = ex("*.o");
        assert!(f.excludes(b"a.o", false) && f.excludes(b"x/y/a.o", false));
        assert!(!f.excludes(b"a.o/x", false));
        let f = ex("src/*.o");
        assert!(f.excludes(b"src/a.o", false) && f.excludes(b"lib/src/a.o", false));
        assert!(!f.excludes(b"xsrc/a.o", false) && !f.excludes(b"src/x/a.o", false));
        let f = ex("cache/");
        assert!(f.excludes(b"a/cache", true) && !f.excludes(b"a/cache", false));
    }

    #[test]
    fn double_stars_as_rsync_reads_them() {
        let f = ex("a/**/c");
        assert!(f.excludes(b"a/b/c", false) && f.excludes(b"x/a/b/d/c", false));
        assert!(!f.excludes(b"a/c", false));
        let f = ex("**/foo");
        assert!(f.excludes(b"foo", false) && f.excludes(b"x/y/foo", false));
        let f = ex("a**c");
        assert!(f.excludes(b"a/c", false) && f.excludes(b"x/a/b/c", false));
        assert!(!f.excludes(b"xa/b/c", false));
        assert!(f.excludes(b"abc", false) && !f.excludes(b"a/b", false));
        let f = ex("b/**");
        assert!(f.excludes(b"a/b/c", false) && !f.excludes(b"a/b", true));
        let f = ex("a/***");
        assert!(f.excludes(b"a", true) && f.excludes(b"a/x/y", false));
        assert!(!f.excludes(b"a", false), "a/*** takes the directory a only");
        assert!(ex("**").excludes(b"x/y", false));
    }

    #[test]
    fn first_match_wins_and_prefixes_and_clearing() {
        let f = filter(&[(Action::Include, "keep.o"), (Action::Exclude, "*.o")]);
        assert!(!f.excludes(b"d/keep.o", false) && f.excludes(b"d/x.o", false));
        let f = filter(&[(Action::Exclude, "*.o"), (Action::Include, "keep.o")]);
        assert!(f.excludes(b"d/keep.o", false));
        let f = filter(&[(Action::Exclude, "+ a"), (Action::Exclude, "*")]);
        assert!(!f.excludes(b"a", false) && f.excludes(b"b", false));
        let mut r = Rules::new();
        r.add(Action::Exclude, b"x").expect("rule");
        r.add(Action::Include, b"!").expect("clear");
        assert!(r.compile().expect("compile").is_none());
    }

    #[test]
    fn braces_and_backslashes_are_rsyncs_and_bytes_need_not_be_utf8() {
        assert!(ex("{a,b}").excludes(b"{a,b}", false));
        assert!(!ex("{a,b}").excludes(b"a", false));
        assert!(ex("x\\y").excludes(b"x\\y", false), "no wildcard: literal");
        assert!(ex("\\*").excludes(b"*", false) && !ex("\\*").excludes(b"a", false));
        assert!(ex("*.bin").excludes(b"d/\xff\xfe.bin", false));
        assert!(ex("?.bin").excludes(b"\xff.bin", false));
        assert!(ex("[!a].c").excludes(b"\xff.c", false));
        let mut r = Rules::new();
        let err = r.add(Action::Exclude, b"\xff*").expect_err("not UTF-8");
        assert!(err.to_string().contains("\\xFF"), "{err}");
    }

    #[test]
    fn files_of_rules_skip_comments_and_name_the_bad_line() {
        let mut r = Rules::new();
        r.add_lines(Action::Exclude, b"# c\n; c\n\n*.o\r\n+ keep\n", "f")
            .expect("lines");
        let f = r.compile().expect("compile").expect("rules");
        assert!(f.excludes(b"a.o", false) && !f.excludes(b"keep", false));
        let err = Rules::new()
            .add_lines(Action::Exclude, b"ok\n[unclosed\n", "rules.txt")
            .expect_err("bad class");
        assert!(
            err.to_string().starts_with("rules.txt: line 2: pattern"),
            "{err}"
        );
    }
}
