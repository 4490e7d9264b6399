//! `ferry copy --files-from`: what it is refused with, and the listed paths SRC lacks,
//! each an error (the rest is copied, as rsync copies it).

use crate::cli::{CopyArgs, FilterGiven};
use crate::job::Job;
use ferry_core::filter::Rules;
use ferry_core::{Error, RelPath, Reporter};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// An error when `args` give --files-from with what it cannot go with: several SRCs, a
/// SRC that is not a directory, or --delete-excluded (which would delete what the
/// list does not name, in every directory; rsync's deletes only in listed ones).
pub fn refused(args: &CopyArgs) -> anyhow::Result<()> {
    if args.list.files_from.is_none() {
        let files = args.filter.given.iter();
        if args.list.from0 && !files.clone().any(|g| matches!(g, FilterGiven::File(..))) {
            anyhow::bail!("--from0 is for --files-from, --exclude-from and --include-from");
        }
        return Ok(());
    }
    if args.srcs.len() > 1 {
        anyhow::bail!("--files-from takes one SRC: the directory the list's paths are in");
    }
    if !std::fs::metadata(&args.src).is_ok_and(|m| m.is_dir()) {
        anyhow::bail!(
            "{}: --files-from needs SRC to be a directory (the list's paths are in it)",
            args.src.display()
        );
    }
    if args.mirror.delete_excluded {
        anyhow::bail!(
            "--delete-excluded does not go with --files-from: use --delete, which deletes \
             within the listed directories only"
        );
    }
    Ok(())
}

/// `rules` keeping of their list (if any) only the paths found in `src` and taken by
/// the rules as what they are; each path not found is reported as an error of the job
/// (it exits 1), and the copy takes the others, as rsync does.
pub fn check_listed(src: &Path, mut rules: Rules, job: &Job<'_>) -> anyhow::Result<Rules> {
    let kind = |path: &[u8]| {
        let meta = std::fs::symlink_metadata(src.join(OsStr::from_bytes(path))).ok()?;
        Some(meta.is_dir())
    };
    let missing = rules.keep_found(kind)?;
    let reporter = job.counting();
    for path in missing {
        let at = RelPath::from_bytes(path);
        let gone = std::io::Error::from(std::io::ErrorKind::NotFound);
        reporter.error(&Error::new(&at, "listed in --files-from", gone));
    }
    Ok(rules)
}
