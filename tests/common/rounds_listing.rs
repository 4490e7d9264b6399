//! The checks of `-i`'s listing in the rounds of tests/common/rounds_check.rs: a dry
//! run names every path in which DST differs from SRC and none in which it does not,
//! and the real run lists what the dry run listed (and at most directories' times
//! besides), the known differences of tests/common/rounds_known.rs apart.

use super::compare::Difference;
use super::rounds_known::{self as known, is_link, Known, Links};
use std::collections::{BTreeSet, HashMap};

/// One line of `-i`: what, kind, the path as printed, why (empty if none given).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Item {
    pub what: String,
    pub kind: String,
    pub path: String,
    pub why: String,
}

impl std::fmt::Display for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {} ({})",
            self.what, self.kind, self.path, self.why
        )
    }
}

/// The lines of `-i`, in the order printed.
pub struct Items(pub Vec<Item>);

impl Items {
    /// Parses `<what> <kind> <path>[ (<why>)]`, `what` and `kind` padded to 7
    /// (src/itemize.rs).
    pub fn parse(out: &str) -> Result<Items, String> {
        let mut items = Vec::new();
        for line in out.lines() {
            let bad = || format!("not an -i line: {line:?}");
            let (what, kind, rest) = (
                line.get(..7).ok_or_else(bad)?,
                line.get(8..15).ok_or_else(bad)?,
                line.get(16..).ok_or_else(bad)?,
            );
            let (path, why) = match rest.rsplit_once(" (") {
                Some((p, why))
                    if why.ends_with(')')
                        && why[..why.len() - 1]
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b == b',') =>
                {
                    (p, &why[..why.len() - 1])
                }
                _ => (rest, ""),
            };
            items.push(Item {
                what: what.trim().into(),
                kind: kind.trim().into(),
                path: path.into(),
                why: why.into(),
            });
        }
        Ok(Items(items))
    }

    fn paths(&self) -> BTreeSet<&str> {
        self.0.iter().map(|i| i.path.as_str()).collect()
    }
}

/// A relative path as `-i` prints it.
pub fn shown(rel: &[u8]) -> String {
    match rel.is_empty() {
        true => ".".into(),
        false => ferry_core::entry::escaped(rel),
    }
}

/// Whether a difference covers everything below its path (an entry missing, extra or
/// of another kind).
fn is_whole(d: &Difference) -> bool {
    ["missing in DST", "extra in DST", "kind:"]
        .iter()
        .any(|w| d.what.starts_with(w))
}

/// Whether `rel` is `top` or below it.
fn below(top: &[u8], rel: &[u8]) -> bool {
    top.is_empty() || rel == top || (rel.starts_with(top) && rel.get(top.len()) == Some(&b'/'))
}

/// Checks a dry run's listing against `diffs` (SRC against DST before it; known
/// differences taken out): every differing path must be named (a link difference
/// through any name of the inode, or of a directory above it), and every named path
/// must differ, lie below an entry that is missing, extra or replaced, or share an
/// inode with one that differs. `links`: SRC's and DST's inodes.
pub fn check_dry(diffs: &[&Difference], items: &Items, links: &Links) -> Result<(), String> {
    let named = items.paths();
    let is_named = |rel: &[u8]| named.contains(shown(rel).as_str());
    let whole_above = |r: &[u8]| diffs.iter().any(|w| is_whole(w) && below(&w.rel, r));
    let mut wrong: Vec<String> = diffs
        .iter()
        .filter(|d| {
            // A link difference may be named through any name of the inode.
            let through_another = || {
                let group = links.group(&d.rel);
                group.iter().any(|r| is_named(r) || whole_above(r))
            };
            let named_somehow = is_named(&d.rel) || (is_link(d) && through_another());
            !named_somehow
        })
        .map(|d| format!("not listed: {d}"))
        .collect();
    let mut explained: BTreeSet<String> = diffs.iter().map(|d| shown(&d.rel)).collect();
    // A difference of one name of an inode explains a line for another: a link
    // difference by definition, and a name SRC gave the inode that DST lacks, since
    // a mirror that copies it may relink DST's other names of the inode to it.
    for d in diffs.iter() {
        explained.extend(links.group(&d.rel).iter().map(|r| shown(r)));
        if is_whole(d) {
            // The names below a directory DST lacks (or has whole otherwise).
            let under = |n: &&[u8]| n.starts_with(&d.rel) && n.get(d.rel.len()) == Some(&b'/');
            for name in links.names().filter(under) {
                explained.extend(links.group(name).iter().map(|r| shown(r)));
            }
        }
    }
    let tops: Vec<String> = diffs
        .iter()
        .filter(|d| is_whole(d))
        .map(|d| shown(&d.rel))
        .collect();
    for path in &named {
        let under = tops
            .iter()
            .any(|t| t == "." || path.starts_with(&format!("{t}/")));
        if !explained.contains(*path) && !under {
            wrong.push(format!("listed but the same in SRC and DST: {path}"));
        }
    }
    if wrong.is_empty() {
        return Ok(());
    }
    wrong.push(String::new());
    wrong.extend(diffs.iter().map(|d| format!("differs: {d}")));
    Err(wrong.join("\n  "))
}

/// Checks the real run's listing against the dry run's: the same lines, and at most
/// `meta dir ... (times)` besides, for a directory its own writes changed
/// (docs/copy.md). `links`: SRC's and DST's inodes before the runs. Returns the
/// known differences met, one line each.
pub fn check_real(dry: &Items, real: &Items, links: &Links) -> Result<Vec<String>, String> {
    let sides = Sides {
        dry: dry.0.iter().collect(),
        real: real.0.iter().collect(),
        links,
        rels: links.names().map(|r| (shown(r), r)).collect(),
    };
    let mut met = Vec::new();
    let mut wrong = Vec::new();
    for (only, this, other) in [
        ("dry", &sides.dry, &sides.real),
        ("real", &sides.real, &sides.dry),
    ] {
        for i in this.difference(other) {
            let times_added = |j: &&Item| j.path == i.path && sides.own_times(j);
            if (only == "real" && sides.own_times(i))
                || (only == "dry" && other.iter().any(times_added))
            {
                continue;
            }
            match sides.known(i, only == "dry") {
                Some(k) => met.push(format!("{}: {i}", k.name)),
                None => wrong.push(format!("listed by the {only} run only: {i}")),
            }
        }
    }
    match wrong.is_empty() {
        true => Ok(met),
        false => Err(wrong.join("\n  ")),
    }
}

/// Both listings of a round, to tell known differences between them.
struct Sides<'a> {
    dry: BTreeSet<&'a Item>,
    real: BTreeSet<&'a Item>,
    links: &'a Links,
    /// Each non-directory's path as printed, to its bytes.
    rels: HashMap<String, &'a [u8]>,
}

impl Sides<'_> {
    /// Whether `i`, listed by the real run, is a directory's `times` its own writes
    /// changed: `meta dir P (times)`, or the dry run's line for P with `times` added.
    fn own_times(&self, i: &Item) -> bool {
        let fields = |why: &str| -> BTreeSet<String> {
            why.split(',')
                .filter(|w| !w.is_empty())
                .map(String::from)
                .collect()
        };
        let with_times = |d: &Item| {
            let mut f = fields(&d.why);
            f.insert("times".into());
            f == fields(&i.why)
        };
        i.what == "meta"
            && i.kind == "dir"
            && (i.why == "times"
                || self.dry.iter().any(|d| {
                    d.what == "meta" && d.kind == "dir" && d.path == i.path && with_times(d)
                }))
    }

    /// The known difference that `i`, listed by one run only (`in_dry`: the dry run),
    /// is.
    fn known(&self, i: &Item, in_dry: bool) -> Option<&'static Known> {
        let rel = *self.rels.get(&i.path)?;
        let others: Vec<String> = self
            .links
            .group(rel)
            .into_iter()
            .filter(|q| *q != rel)
            .map(shown)
            .collect();
        let real_has = |path: &str, what: &str| {
            self.real
                .iter()
                .any(|r| r.path == path && r.what == what && r.kind == i.kind)
        };
        if in_dry && i.what == "meta" && others.iter().any(|q| real_has(q, "meta")) {
            return Some(&known::DRY_RUN_LISTS_EVERY_NAME);
        }
        if others.iter().any(|q| real_has(q, "created")) {
            return Some(&known::NEW_NAME_COPIED_AGAIN);
        }
        // Another name of the inode is replaced, or lies below a directory replaced.
        let unlinked = |r: &[u8]| {
            let r = shown(r);
            self.dry.iter().any(|d| {
                d.what == "updated" && (r == d.path || r.starts_with(&format!("{}/", d.path)))
            })
        };
        let group = self.links.group(rel);
        if !in_dry && i.what == "updated" && group.into_iter().any(|r| r != rel && unlinked(r)) {
            return Some(&known::UNLINKING_MOVES_CTIME);
        }
        let other = match in_dry {
            true => &self.real,
            false => &self.dry,
        };
        let changed = |w: &str| w == "updated" || w == "meta";
        let other_run_changes_it = other
            .iter()
            .any(|b| changed(&b.what) && b.kind == i.kind && b.path == i.path);
        if changed(&i.what) && other_run_changes_it && self.links.more_names_in_dst(rel) {
            return Some(&known::LINKS_REASON);
        }
        None
    }
}
