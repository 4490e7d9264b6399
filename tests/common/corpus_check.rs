//! Reading the corpus ([`super::corpus`]): each archive listed by `ferry ls`, unpacked,
//! compared with GNU tar's and bsdtar's extraction of it, and mounted (FUSE and
//! kernel) and compared with the unpack, all by the tests' tree comparer; and the table
//! of the differences known today, each with its reason. [`judge`] fails on a
//! difference the table does not list, and on one it lists that no longer happens, so
//! the table only shrinks. docs/archives.md carries the same table (a test holds it to
//! that).

use super::compare::{diff_trees_with, Options};
use super::corpus::Archive;
use super::mounted::Mounted;
use super::run::{run, Run, FERRY};
use std::path::Path;
use std::process::Command;

/// What is done with each archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// `ferry ls` exits as `tar -tf` does and lists as many members.
    Ls,
    /// `ferry unpack` exits as GNU tar's extraction does.
    Unpack,
    /// The unpacked tree equals GNU tar's extraction.
    GnuTar,
    /// The unpacked tree equals bsdtar's extraction.
    Bsdtar,
    /// The FUSE mount equals the unpacked tree.
    Fuse,
    /// The kernel (EROFS) mount equals the unpacked tree.
    Kernel,
}

impl Check {
    /// Its name in the table of known differences.
    pub fn name(self) -> &'static str {
        match self {
            Check::Ls => "ls",
            Check::Unpack => "unpack",
            Check::GnuTar => "gnutar",
            Check::Bsdtar => "bsdtar",
            Check::Fuse => "fuse",
            Check::Kernel => "kernel",
        }
    }
}

/// Every check.
pub const ALL: &[Check] = &[
    Check::Ls,
    Check::Unpack,
    Check::GnuTar,
    Check::Bsdtar,
    Check::Fuse,
    Check::Kernel,
];

/// The differences known today: (archive, check, why). Each is also in
/// docs/archives.md under "Known differences from GNU tar", as [`doc_line`] writes it.
pub const KNOWN: &[(&str, Check, &str)] = &[
    ("bsdtar-ustar", Check::GnuTar, LATE_MEMBERS),
    ("bsdtar-pax", Check::GnuTar, LATE_MEMBERS),
    ("bsdtar-gnutar", Check::GnuTar, LATE_MEMBERS),
    ("python-ustar", Check::GnuTar, LATE_MEMBERS),
    ("python-gnu", Check::GnuTar, LATE_MEMBERS),
    ("python-pax", Check::GnuTar, LATE_MEMBERS),
    ("gnutar-multivolume", Check::GnuTar, CUT_SHORT),
    ("gnutar-multivolume", Check::Bsdtar, CUT_SHORT),
    ("gnutar-multivolume", Check::Fuse, CUT_SHORT_MOUNT),
    ("gnutar-multivolume", Check::Kernel, CUT_SHORT_MOUNT),
    ("gnutar-multivolume-2", Check::GnuTar, CONTINUED),
    ("gnutar-multivolume-2", Check::Bsdtar, CONTINUED),
    ("gnutar-multivolume-2", Check::Fuse, CONTINUED),
    ("gnutar-multivolume-2", Check::Kernel, CONTINUED),
];

const LATE_MEMBERS: &str = "the archive names a directory's members after other \
    members (bsdtar and tarfile write in directory order): GNU tar sets the directory's \
    time on leaving it, so the members that come later change it again; ferry, as \
    bsdtar, sets directory times last and keeps the archive's";
const CUT_SHORT: &str = "the first volume ends inside a member: GNU tar and bsdtar leave \
    the part of it they read, ferry removes a file it could not finish (both exit \
    non-zero, as ferry does)";
const CUT_SHORT_MOUNT: &str = "a mount refuses an archive cut short inside a member \
    (mount.md), where unpack extracts the members before it";
const CONTINUED: &str = "a volume that opens with the continuation of a member (type \
    `M`): `ls` lists it as GNU tar does (`M---------`, `--Continued at byte N--`), and \
    like GNU tar an extraction leaves it out with an error naming it, where bsdtar \
    extracts the part stored (ferry exits 1, GNU tar 2); the members after it are read";

/// The line docs/archives.md gives known difference `k`.
pub fn doc_line(k: &(&str, Check, &str)) -> String {
    format!("- `{}`, {}: {}", k.0, k.1.name(), k.2)
}

/// What one check of one archive came to: `Err` says how it differs.
pub struct Outcome {
    pub archive: String,
    pub check: Check,
    pub result: Result<(), String>,
}

/// Runs `checks` on archive `a`, working in `work` (made); `ferry unpack` and GNU tar's
/// extraction always run, as the others compare with them.
pub fn read(a: &Archive, work: &Path, checks: &[Check]) -> Vec<Outcome> {
    std::fs::create_dir_all(work).expect("make the work directory");
    let cache = work.join("cache");
    let unpacked = work.join("ferry");
    let mut out = Vec::new();
    let mut put = |check: Check, result: Result<(), String>| {
        if checks.contains(&check) {
            out.push(Outcome {
                archive: a.name.clone(),
                check,
                result,
            });
        }
    };
    if checks.contains(&Check::Ls) {
        put(Check::Ls, listed(&a.path));
    }
    let ours = unpack(&a.path, &unpacked);
    let gnu = extract("tar", &a.path, &work.join("tar"));
    put(
        Check::Unpack,
        match ours.status == gnu.status {
            true => Ok(()),
            false => Err(format!(
                "ferry unpack exits {} ({}), GNU tar {} ({})",
                ours.status,
                head(&ours.stderr),
                gnu.status,
                head(&gnu.stderr)
            )),
        },
    );
    put(
        Check::GnuTar,
        same(a, &work.join("tar"), &unpacked, "tar", &gnu),
    );
    if checks.contains(&Check::Bsdtar) {
        let bsd = extract("bsdtar", &a.path, &work.join("bsdtar"));
        put(
            Check::Bsdtar,
            same(a, &work.join("bsdtar"), &unpacked, "bsdtar", &bsd),
        );
    }
    for (check, flags) in [(Check::Fuse, &[][..]), (Check::Kernel, &["--kernel"][..])] {
        if checks.contains(&check) {
            let at = work.join(format!("mnt-{}", check.name()));
            put(check, mounted(a, flags, &at, &cache, &unpacked));
        }
    }
    out
}

/// Fails, listing them, on outcomes of `checks` that differ from [`KNOWN`]: a
/// difference it does not list, or one it lists that did not happen.
pub fn judge(outcomes: &[Outcome], checks: &[Check]) {
    let mut wrong = Vec::new();
    for o in outcomes {
        let known = KNOWN.iter().find(|k| k.0 == o.archive && k.1 == o.check);
        match (&o.result, known) {
            (Err(why), None) => wrong.push(format!(
                "{} {}: differs, and the table of known differences does not say so: {why}",
                o.archive,
                o.check.name()
            )),
            (Ok(()), Some(k)) => wrong.push(format!(
                "{} {}: listed as a known difference ({}), but no longer differs: take it \
                 out of KNOWN and docs/archives.md",
                o.archive,
                o.check.name(),
                k.2
            )),
            _ => {}
        }
    }
    for k in KNOWN.iter().filter(|k| checks.contains(&k.1)) {
        if !outcomes.iter().any(|o| o.archive == k.0 && o.check == k.1) {
            wrong.push(format!(
                "{} {}: listed but not in the corpus",
                k.0,
                k.1.name()
            ));
        }
    }
    assert!(wrong.is_empty(), "the corpus:\n  {}", wrong.join("\n  "));
}

/// The differences between the trees `src` and `dst`; a comparison that cannot read
/// one (a read error in a mount) is one difference saying so.
fn compare(src: &Path, dst: &Path, opts: &Options) -> Vec<String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        diff_trees_with(src, dst, opts)
    }))
    .unwrap_or_else(|e| {
        let why = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        vec![format!("the comparison failed: {why}")]
    })
}

/// The first lines of `text`, for a message.
fn head(text: &str) -> String {
    let lines: Vec<&str> = text.lines().take(4).collect();
    lines.join(" | ")
}

/// `ferry ls` exits as `tar -tf` does and lists as many members (each name on one
/// line, a newline in one escaped by both).
fn listed(archive: &Path) -> Result<(), String> {
    let mut ls = Command::new(FERRY);
    ls.arg("ls").arg(archive);
    let ours = run(ls);
    let mut tar = Command::new("tar");
    tar.arg("-tf").arg(archive);
    let theirs = run(tar);
    let count = |r: &Run| r.stdout.lines().count();
    match (ours.status, count(&ours)) == (theirs.status, count(&theirs)) {
        true => Ok(()),
        false => Err(format!(
            "ferry ls exits {} listing {} members ({}), tar -tf exits {} listing {}",
            ours.status,
            count(&ours),
            head(&ours.stderr),
            theirs.status,
            count(&theirs)
        )),
    }
}

fn unpack(archive: &Path, dst: &Path) -> Run {
    let mut cmd = Command::new(FERRY);
    cmd.args(["unpack", "--no-progress"]).arg(archive).arg(dst);
    run(cmd)
}

/// `tool` (GNU tar or bsdtar) extracting `archive` into `dst`, as root would, xattrs
/// included.
fn extract(tool: &str, archive: &Path, dst: &Path) -> Run {
    std::fs::create_dir_all(dst).expect("make the extraction directory");
    let mut cmd = Command::new(tool);
    match tool {
        "tar" => cmd.args(["--xattrs", "--xattrs-include=*", "--acls", "-xpf"]),
        _ => cmd.args(["--xattrs", "-xpf"]),
    };
    cmd.arg(archive).arg("-C").arg(dst);
    run(cmd)
}

/// The tree `tool` extracted from `a` at `dst` (saying `said`) equals the unpack at
/// `unpacked` (but for the times of directories `a` never names).
fn same(a: &Archive, dst: &Path, unpacked: &Path, tool: &str, said: &Run) -> Result<(), String> {
    if !unpacked.exists() {
        return Err("nothing unpacked to compare with".into());
    }
    let opts = Options {
        // Both set atimes to the time they extract.
        skip_atime: true,
        // bsdtar does not apply an archive's `./` to the directory it extracts into.
        skip_root_meta: tool == "bsdtar",
        made_dirs: a.made_dirs.clone(),
        ..Options::default()
    };
    let diffs = compare(dst, unpacked, &opts);
    match diffs.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "{} ways ({tool} exited {}: {}): {}",
            diffs.len(),
            said.status,
            head(&said.stderr),
            diffs.iter().take(6).cloned().collect::<Vec<_>>().join("; ")
        )),
    }
}

/// `ferry mount FLAGS` of `a` at `at` equals the unpack at `unpacked` (but for the
/// times of directories `a` never names).
fn mounted(
    a: &Archive,
    flags: &[&str],
    at: &Path,
    cache: &Path,
    unpacked: &Path,
) -> Result<(), String> {
    std::fs::create_dir_all(at).expect("make the mountpoint");
    let mut cmd = Command::new(FERRY);
    cmd.arg("mount").args(flags).arg(&a.path).arg(at);
    cmd.env("XDG_CACHE_HOME", cache);
    let r = run(cmd);
    if r.status != 0 {
        return Err(format!("mount: exit {}: {}", r.status, head(&r.stderr)));
    }
    let m = Mounted {
        at: at.to_path_buf(),
    };
    if !unpacked.exists() {
        return Err("nothing unpacked to compare with".into());
    }
    let opts = Options {
        // EROFS keeps one time, shown as the atime too.
        skip_atime: !flags.is_empty(),
        made_dirs: a.made_dirs.clone(),
        ..Options::default()
    };
    let diffs = compare(unpacked, &m.at, &opts);
    drop(m);
    match diffs.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "{} ways: {}",
            diffs.len(),
            diffs.iter().take(6).cloned().collect::<Vec<_>>().join("; ")
        )),
    }
}
