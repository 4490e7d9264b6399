//! `ferry copy --files-from`: what it is refused with, and the listed paths SRC lacks,
//! each an error (the rest is copied, as rsync copies it).

use crate::cli::{CopyArgs, FilterGiven};
use crate::job::Job;
use ferry_core::filter::{Filter, Rules};
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

/// `rules` with their list (if any) settled against `src`: a listed path the rules
/// take as one kind and not the other is looked at, and dropped if they leave out
/// what it is (see `Rules::settle_kinds`).
pub fn settle_kinds(src: &Path, mut rules: Rules) -> anyhow::Result<Rules> {
    rules.settle_kinds(|path| {
        let meta = std::fs::symlink_metadata(src.join(OsStr::from_bytes(path))).ok()?;
        Some(meta.is_dir())
    })?;
    Ok(rules)
}

/// Before a copy over ssh or `ferry://` (an upload: SRC is here): each listed path
/// SRC lacks is reported as an error of the job, as [`report_missing`] reports it
/// after a local copy (the walk that would note them runs inside the upload).
pub fn report_missing_up_front(src: &Path, rules: &Rules, job: &Job<'_>) {
    report_absent(src, rules.listed().unwrap_or_default().iter().cloned(), job);
}

/// After the copy: each listed path the walk did not meet that is not in `src` is
/// reported as an error of the job (it exits 1; the others were copied, as rsync
/// copies them). One it did not meet that is there was left out for another reason
/// (the rules, `-x`, a directory that could not be read, which is reported itself).
pub fn report_missing(src: &Path, filter: Option<&Filter>, job: &Job<'_>) {
    if let Some(filter) = filter {
        report_absent(src, filter.unmet_listed().into_iter(), job);
    }
}

/// Each of `paths` that `src` lacks, an error of the job naming it.
fn report_absent(src: &Path, paths: impl Iterator<Item = Vec<u8>>, job: &Job<'_>) {
    let reporter = job.counting();
    for path in paths {
        if let Err(e) = std::fs::symlink_metadata(src.join(OsStr::from_bytes(&path))) {
            let at = RelPath::from_bytes(path);
            reporter.error(&Error::new(&at, "listed in --files-from", e));
        }
    }
}
