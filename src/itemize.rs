//! `-i` and `-v`: what a copy changes in DST (or would, with `--dry-run`), one line an
//! entry, as it happens.
//!
//! `-i`: `<what> <kind> <path>[ (<why>)]`, `what` one of `created`, `updated` (data or
//! node replaced), `meta` (only metadata set), `deleted`; `why` the fields that differ
//! (`size,mtime`, `mode,times`...). `-v`: the path of each entry created or updated
//! (a directory with a trailing `/`), and `deleting <path>` for each one deleted, as
//! rsync prints them. Paths are relative to DST, escaped to stay on one line.

use crate::cli::MirrorArgs;
use ferry_core::changes::{Changes, Kind, What};
use ferry_core::RelPath;
use std::io::Write;
use std::sync::Arc;

/// Prints changes as `-i` or `-v` asks.
struct Printer {
    itemize: bool,
    /// Standard output carries the JSON summary: lines go to standard error.
    to_stderr: bool,
}

/// The printer `args` ask for, if any.
pub fn printer(args: &MirrorArgs, json: bool) -> Option<Arc<dyn Changes>> {
    (args.itemize_changes || args.verbose).then(|| {
        Arc::new(Printer {
            itemize: args.itemize_changes,
            to_stderr: json,
        }) as Arc<dyn Changes>
    })
}

/// The `-i` line for one change.
pub fn item_line(path: &RelPath, kind: Kind, what: What) -> String {
    let (word, why) = match what {
        What::Created => ("created", None),
        What::Updated(r) => ("updated", Some(r)),
        What::Meta(r) => ("meta", Some(r)),
        What::Deleted => ("deleted", None),
    };
    let why = why.map(|r| format!(" ({r})")).unwrap_or_default();
    format!("{word:<7} {:<7} {path}{why}", kind.name())
}

impl Changes for Printer {
    fn change(&self, path: &RelPath, kind: Kind, what: What) {
        let line = if self.itemize {
            item_line(path, kind, what)
        } else {
            let slash = if kind == Kind::Dir { "/" } else { "" };
            match what {
                What::Created | What::Updated(_) => format!("{path}{slash}"),
                What::Deleted => format!("deleting {path}{slash}"),
                What::Meta(_) => return,
            }
        };
        // A closed output is no reason to stop the copy: the line is dropped.
        let _ = match self.to_stderr {
            true => writeln!(std::io::stderr().lock(), "{line}"),
            false => writeln!(std::io::stdout().lock(), "{line}"),
        };
    }
}
