//! Differential rounds of mirroring: [`run_rounds`] makes a tree with
//! [`super::rounds::Generator`], changes it round after round, and after each round
//! checks a mirror command (a closure: `ferry copy` to a local path, or to a remote
//! spec for the same directory) against itself and against `rsync -aHAX --delete`:
//!
//! 1. `MIRROR -n -i --delete SRC DST_F` changes nothing in DST_F (compared in every
//!    respect, atimes included, with a copy taken before), and its lines name every
//!    path in which DST_F differs from SRC and none in which it does not;
//! 2. `MIRROR -i --delete SRC DST_F` lists what the dry run listed (and at most
//!    directories' times besides), after which DST_F is SRC in every respect the tree
//!    comparer checks (atimes included); `rsync` mirrors SRC into DST_R, and DST_R is
//!    DST_F in every respect but atimes;
//! 3. `MIRROR -n -i --delete SRC DST_F` then lists nothing.
//!
//! Differences tests/common/rounds_known.rs knows pass (each met is reported in the
//! [`Outcome`]).
//!
//! rsync runs as `rsync -aHAX --delete --modify-window=-1 --open-noatime`:
//! `--modify-window=-1` makes it compare mtimes to the nanosecond (by default it
//! compares whole seconds, so a directory whose time differs only in its nanoseconds
//! keeps it), and `--open-noatime` keeps its reads from moving SRC's atimes, which the
//! comparison of SRC with DST_F checks. Atimes are left out of DST_F against DST_R
//! only: `-a` does not keep atimes (`-U` would) and ferry does.

use super::compare::{assert_same_tree, differences_with, Difference, Options};
use super::rounds::Generator;
use super::rounds_known::{self as known, Links};
use super::rounds_listing as listing;
use super::run::{copy, Run};
use std::path::{Path, PathBuf};
use std::process::Command;

/// What to run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Fixes every choice of the generator.
    pub seed: u64,
    /// Rounds of changes after the initial tree (which is mirrored first).
    pub rounds: usize,
    /// Changes per round.
    pub changes: usize,
    /// `-c` for both tools, and rewrites that keep size and mtime in the rounds.
    pub checksum: bool,
    /// Owner and group changes in the rounds and the initial tree (root only).
    pub owners: bool,
}

/// The mirror command under test: `(SRC, DST, ARGS)` copies the contents of the
/// local directory SRC into the directory DST (a local path, which the closure may
/// name as a remote spec) with ARGS, as `ferry copy ARGS SRC/ DST/` does, and returns
/// the run, which must end with status 0 and no error line, its `-i` lines on
/// standard output. ARGS are `-n -i --delete`, then `-i --delete`, then `-n -i
/// --delete` again each round, with `-c` after them when the plan says. Over ssh:
///
/// ```ignore
/// run_rounds(base, &plan, &mut |src, dst, args| {
///     let remote = format!("{host}:{}/", dst.display());
///     run(ssh_copy_command(&with_slash(src), &remote, args))
/// })
/// ```
pub type Mirror<'a> = dyn FnMut(&Path, &Path, &[&str]) -> Run + 'a;

/// The mirror command for a local DST: `ferry copy ARGS SRC/ DST/`.
pub fn local_ferry(src: &Path, dst: &Path, args: &[&str]) -> Run {
    copy(
        &super::build::with_slash(src),
        &super::build::with_slash(dst),
        args,
    )
}

/// What a run of rounds did, for the test to print.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Changes made, all rounds together.
    pub changes: usize,
    /// Changes made of each kind (`Edit`, `Chown`...), the initial tree's apart.
    pub kinds: std::collections::BTreeMap<String, usize>,
    /// Lines `-i` printed before the real runs, all rounds together.
    pub listed: usize,
    /// Known differences met (tests/common/rounds_known.rs), one line each.
    pub known: Vec<String>,
}

/// Runs `plan` in the directory `base` (a scratch directory on the filesystem to
/// test, made empty): SRC, DST_F (the mirror's), DST_R (rsync's) and a snapshot are
/// made in it. Panics on the first round that fails a check, with the seed, the round
/// and its changes. `None` (after saying why) when rsync is not installed.
pub fn run_rounds(base: &Path, plan: &Plan, mirror: &mut Mirror<'_>) -> Option<Outcome> {
    if Command::new("rsync").arg("--version").output().is_err() {
        super::skip("rsync is not installed (scripts/test.sh installs it)");
        return None;
    }
    let dirs = Dirs::new(base);
    let mut generator = Generator::new(&dirs.src, plan.seed, plan.owners, plan.checksum);
    let mut outcome = Outcome::default();
    for round in 0..=plan.rounds {
        let log = match round {
            0 => generator.initial(),
            _ => generator.round(plan.changes),
        };
        outcome.changes += log.len();
        if round > 0 {
            for line in &log {
                let kind = line.split(' ').next().unwrap_or_default();
                *outcome.kinds.entry(kind.to_string()).or_default() += 1;
            }
        }
        let ctx = Context { plan, round, log };
        let met = check_round(&dirs, &ctx, mirror, &mut outcome.listed);
        if met.rsync {
            dirs.reset_rsync_copy();
        }
        outcome
            .known
            .extend(met.lines.iter().map(|k| format!("round {round}: {k}")));
    }
    Some(outcome)
}

/// The directories a run of rounds works in.
struct Dirs {
    src: PathBuf,
    ferry: PathBuf,
    rsync: PathBuf,
    snapshot: PathBuf,
}

impl Dirs {
    fn new(base: &Path) -> Dirs {
        let dirs = Dirs {
            src: base.join("src"),
            ferry: base.join("dst_f"),
            rsync: base.join("dst_r"),
            snapshot: base.join("snapshot"),
        };
        for d in [&dirs.src, &dirs.ferry, &dirs.rsync] {
            super::build::mkdirs(d);
        }
        dirs
    }

    /// A fresh exact copy of DST_F in `snapshot`, checked.
    fn snapshot(&self) {
        remove_tree(&self.snapshot);
        local_ferry(&self.ferry, &self.snapshot, &[]).assert_ok();
        assert_same_tree(&self.ferry, &self.snapshot);
    }

    /// Makes DST_R an exact copy of DST_F again, after a known difference of rsync's
    /// (which rsync never repairs, and which would spread to other differences).
    fn reset_rsync_copy(&self) {
        remove_tree(&self.rsync);
        local_ferry(&self.ferry, &self.rsync, &[]).assert_ok();
        assert_same_tree(&self.ferry, &self.rsync);
    }
}

fn remove_tree(path: &Path) {
    if path.exists() {
        std::fs::remove_dir_all(path).unwrap_or_else(|e| panic!("remove {}: {e}", path.display()));
    }
}

/// Where a check failed, for its message.
struct Context<'a> {
    plan: &'a Plan,
    round: usize,
    log: Vec<String>,
}

impl Context<'_> {
    fn fail(&self, what: &str, details: &[String]) -> ! {
        panic!(
            "{:?}, round {}: {what}\n  {}\nchanges this round:\n  {}",
            self.plan,
            self.round,
            details.join("\n  "),
            self.log.join("\n  ")
        );
    }

    fn ok(&self, r: &Run, what: &str) {
        if r.status != 0 || !r.errors().is_empty() {
            self.fail(&format!("{what} failed"), &[r.to_string()]);
        }
    }
}

/// The known differences one round met.
#[derive(Default)]
struct Met {
    lines: Vec<String>,
    /// One of them is rsync's (DST_R is to be made DST_F again).
    rsync: bool,
}

/// The checks of one round (see the module's doc).
fn check_round(dirs: &Dirs, ctx: &Context<'_>, mirror: &mut Mirror<'_>, listed: &mut usize) -> Met {
    let extra: &[&str] = if ctx.plan.checksum { &["-c"] } else { &[] };
    let args = |more: &[&'static str]| -> Vec<&str> { more.iter().chain(extra).copied().collect() };
    let full = Options::default();
    let mut met = Met::default();

    // 1. The dry run writes nothing and names exactly what differs.
    let before = differences_with(&dirs.src, &dirs.ferry, &full);
    let links = Links::of(&dirs.src, &dirs.ferry);
    let (_, differing) = known::split(&before, |d| known::in_mirror(d, &links));
    dirs.snapshot();
    let dry = mirror(&dirs.src, &dirs.ferry, &args(&["-n", "-i", "--delete"]));
    ctx.ok(&dry, "the dry run");
    let written = differences_with(&dirs.snapshot, &dirs.ferry, &full);
    if !written.is_empty() {
        ctx.fail("the dry run changed DST", &lines(&written));
    }
    let items =
        listing::Items::parse(&dry.stdout).unwrap_or_else(|e| ctx.fail(&e, &[dry.to_string()]));
    *listed += items.0.len();
    if let Err(why) = listing::check_dry(&differing, &items, &links) {
        ctx.fail(
            "the dry run's listing does not match what differs",
            &[why, dry.to_string()],
        );
    }

    // 2. The real run lists what the dry run did, and mirrors as rsync does.
    let real = mirror(&dirs.src, &dirs.ferry, &args(&["-i", "--delete"]));
    ctx.ok(&real, "the mirror");
    let real_items =
        listing::Items::parse(&real.stdout).unwrap_or_else(|e| ctx.fail(&e, &[real.to_string()]));
    match listing::check_real(&items, &real_items, &links) {
        Ok(known) => met.lines.extend(known),
        Err(why) => ctx.fail(
            "the real run's listing is not the dry run's",
            &[why, real.to_string()],
        ),
    }
    rsync(ctx, &dirs.src, &dirs.rsync, extra);
    let left = differences_with(&dirs.src, &dirs.ferry, &full);
    let links = Links::of(&dirs.src, &dirs.ferry);
    let (kept, left) = known::split(&left, |d| known::in_mirror(d, &links));
    if !left.is_empty() {
        ctx.fail("DST_F is not SRC after the mirror", &lines(&left));
    }
    met.lines.extend(kept);
    let no_atime = Options {
        skip_atime: true,
        ..Options::default()
    };
    let apart = differences_with(&dirs.ferry, &dirs.rsync, &no_atime);
    let links = Links::of(&dirs.ferry, &dirs.rsync);
    let (theirs, apart) = known::split(&apart, |d| known::in_rsync_copy(d, &links));
    if !apart.is_empty() {
        let mut why = lines(&apart);
        why.extend(theirs.iter().map(|k| format!("(and known: {k})")));
        ctx.fail("DST_F (ferry's) and DST_R (rsync's) differ", &why);
    }
    met.rsync = !theirs.is_empty();
    met.lines.extend(theirs);

    // 3. Nothing is left to do.
    let again = mirror(&dirs.src, &dirs.ferry, &args(&["-n", "-i", "--delete"]));
    ctx.ok(&again, "the dry run after the mirror");
    if !again.stdout.is_empty() {
        ctx.fail(
            "a dry run after the mirror lists changes",
            &[again.to_string()],
        );
    }
    met
}

fn lines<D: std::borrow::Borrow<Difference>>(diffs: &[D]) -> Vec<String> {
    diffs.iter().map(|d| d.borrow().to_string()).collect()
}

/// Runs `rsync -aHAX --delete --modify-window=-1 --open-noatime EXTRA SRC/ DST/`,
/// which must succeed.
fn rsync(ctx: &Context<'_>, src: &Path, dst: &Path, extra: &[&str]) {
    let out = Command::new("rsync")
        .args(["-aHAX", "--delete", "--modify-window=-1", "--open-noatime"])
        .args(extra)
        .arg(super::build::with_slash(src))
        .arg(super::build::with_slash(dst))
        .output()
        .expect("run rsync");
    if !out.status.success() {
        ctx.fail(
            "rsync failed",
            &[String::from_utf8_lossy(&out.stderr).into_owned()],
        );
    }
}
