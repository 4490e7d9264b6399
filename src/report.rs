//! What a job prints: one line per failure on stderr, and the summary (a JSON object for
//! scripts, a line for people).

use ferry_core::error::Side;
use ferry_core::stats::Snapshot;
use ferry_core::{Error, RelPath, Reporter};
use serde::Serialize;
use std::io::Write;
use std::path::Path;

/// Prints errors and warnings on stderr, one line each, naming every path in full: the
/// root of its side joined with its path in the tree, or for a member of an archive,
/// the archive and the member apart (`t.tar: member d/f: ...`).
pub struct StderrReporter<'a> {
    /// The source tree's root (or the archive) as the user named it.
    pub src: &'a Path,
    /// The destination tree's root as the user named it.
    pub dst: &'a Path,
    /// The source is an archive, whose paths are its members: `t.tar/d/f` would read
    /// as a path on disk.
    pub src_is_archive: bool,
}

impl<'a> StderrReporter<'a> {
    /// A reporter for the members of `archive` (`ls`, `cat`: there is no destination).
    pub fn for_archive(archive: &'a Path) -> Self {
        StderrReporter {
            src: archive,
            dst: archive,
            src_is_archive: true,
        }
    }

    /// The one-line message for `err`.
    pub fn line(&self, err: &Error) -> String {
        let (root, in_archive) = match err.side {
            Side::Source => (self.src, self.src_is_archive),
            Side::Destination => (self.dst, false),
        };
        let root = root.as_os_str().as_encoded_bytes();
        // `dst/` and `f` make `dst/f`, not `dst//f`.
        let in_root = |path: &RelPath| match root.ends_with(b"/") {
            true => RelPath::from_bytes([root, path.as_bytes()].concat()),
            false => RelPath::from_bytes(root.to_vec()).join(path.as_bytes()),
        };
        let root = RelPath::from_bytes(root.to_vec());
        let (op, os) = (err.op, &err.os);
        match (err.path.is_root(), in_archive) {
            (true, _) => format!("{root}: {op}: {os}"),
            (false, true) => format!("{root}: member {}: {op}: {os}", err.path),
            (false, false) => format!("{}: {op}: {os}", in_root(&err.path)),
        }
    }
}

impl Reporter for StderrReporter<'_> {
    fn error(&self, err: &Error) {
        to_stderr(format_args!("ferry: {}", self.line(err)));
    }
    fn warn(&self, msg: &str) {
        to_stderr(format_args!("ferry: warning: {msg}"));
    }
}

/// Writes a line to stderr. A closed stderr (`ferry ... 2>&1 | head`) is no reason to
/// stop or panic: the line is dropped.
pub fn to_stderr(line: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// The summary of a finished job.
#[derive(Serialize, Debug)]
pub struct Summary {
    /// Regular files written, hardlinks included.
    pub files: u64,
    /// Directories made (one already there is brought up to date, not counted).
    pub dirs: u64,
    /// Symlinks, fifos and devices made.
    pub others: u64,
    /// Bytes of file data moved.
    pub bytes: u64,
    /// Entries already up to date: files, symlinks, fifos and devices (a directory
    /// already there is not counted).
    pub skipped: u64,
    /// Bytes of those.
    pub skipped_bytes: u64,
    /// Per-path failures.
    pub errors: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Files whose data was cloned.
    pub cloned: u64,
    /// Files moved by copy_file_range.
    pub kernel_copied: u64,
    /// Files moved through memory.
    pub buffered: u64,
    /// Entries removed from DST (`--delete`), those below a removed directory too.
    pub deleted: u64,
    /// The job was told to stop before it was done (only then in the JSON).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// Why the job could not start or go on (exit status 2; only then in the JSON): the
    /// line printed on stderr, without its `ferry: `.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Summary {
    /// The summary for these counters and time.
    pub fn new(s: &Snapshot, seconds: f64) -> Self {
        Summary {
            files: s.files,
            dirs: s.dirs,
            others: s.others,
            bytes: s.bytes,
            skipped: s.skipped,
            skipped_bytes: s.skipped_bytes,
            errors: s.errors,
            seconds,
            cloned: s.cloned,
            kernel_copied: s.kernel_copied,
            buffered: s.buffered,
            deleted: s.deleted,
            interrupted: false,
            error: None,
        }
    }

    /// Prints the summary: JSON on stdout (on stderr when `stdout_taken`), or a line on
    /// stderr for a person.
    pub fn print(&self, json: bool, to_terminal: bool, stdout_taken: bool) {
        if json {
            if let Ok(text) = serde_json::to_string(self) {
                match stdout_taken {
                    true => to_stderr(format_args!("{text}")),
                    false => drop(writeln!(std::io::stdout().lock(), "{text}")),
                }
            }
        } else if to_terminal {
            to_stderr(format_args!("ferry: {}", self.line()));
        }
    }

    /// The summary for a person: every count the JSON has but the data paths' (the
    /// rate counts files and other entries, not directories).
    pub fn line(&self) -> String {
        let rate = (self.files + self.others) as f64 / self.seconds.max(1e-9);
        format!(
            "{} files, {} dirs, {} others (symlinks, fifos, devices), {} in {:.2}s \
             ({:.0} entries/s), {} up to date, {} deleted, {} errors",
            self.files,
            self.dirs,
            self.others,
            human_bytes(self.bytes),
            self.seconds,
            rate,
            self.skipped,
            self.deleted,
            self.errors
        )
    }
}

/// `1.5 GiB`-style sizes.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}
