//! `ferry pack -T FILE` (`--files-from`, GNU tar's meaning): the paths to pack read
//! from a file, each packed (a directory with everything below it) under its name as
//! the list gives it, as `tar -cf A -T FILE` names it: relative to `-C DIR` or to where
//! ferry runs; an absolute path is read where it is and named without its leading `/`.
//!
//! Where ferry differs from GNU tar 1.34: a name is normalized (`./a//b/` is `a/b`;
//! tar keeps the `./`), `..` is refused, a path listed twice or below a listed
//! directory is packed once (tar packs it again), and each line is a name (tar takes
//! a line starting with `-` as an option, unless --verbatim-files-from).

use crate::job::Job;
use anyhow::Context;
use ferry_core::filter::normalize;
use ferry_core::{Error, RelPath, Reporter};
use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Each path `list` names with the member name it takes, in the list's order: one a
/// line (one per NUL-ended entry with `nul`, tar's `--null`), empty ones skipped, a
/// line's ending `\r` kept (tar keeps it too). The path is as listed, to be found in
/// `-C DIR`: relative, or absolute.
pub fn read(list: &std::path::Path, nul: bool) -> anyhow::Result<Vec<(Vec<u8>, PathBuf)>> {
    let mut stdin_read = false;
    let text = crate::filters::read_file(list, "the list of paths", &mut stdin_read)?;
    let shown = list.display();
    let end = if nul { 0 } else { b'\n' };
    let mut entries = Vec::new();
    for (n, entry) in text.split(|&b| b == end).enumerate() {
        if entry.is_empty() {
            continue;
        }
        let name = normalize(entry)
            .map_err(|why| anyhow::anyhow!("{why}"))
            .with_context(|| {
                format!(
                    "{shown}: line {}: {:?}",
                    n + 1,
                    ferry_core::entry::escaped(entry)
                )
            })?;
        entries.push((name, PathBuf::from(OsStr::from_bytes(entry))));
    }
    Ok(once_each(entries))
}

/// `entries` less those named twice (the first kept) or below another entry's name
/// (that one, a directory if both are there, packs them): every member once.
fn once_each(entries: Vec<(Vec<u8>, PathBuf)>) -> Vec<(Vec<u8>, PathBuf)> {
    let names: HashSet<Vec<u8>> = entries.iter().map(|(n, _)| n.clone()).collect();
    let whole = names.contains(&Vec::new());
    let mut seen = HashSet::new();
    entries
        .into_iter()
        .filter(|(name, path)| {
            let below_listed = name
                .iter()
                .enumerate()
                .any(|(i, &b)| b == b'/' && names.contains(&name[..i]));
            // A relative path is below `.`; an absolute one is somewhere else.
            let below_whole = whole && !name.is_empty() && path.is_relative();
            !below_listed && !below_whole && seen.insert(name.clone())
        })
        .collect()
}

/// Drops the entries of `named` (their paths found in DIR by now) that are not there,
/// each reported as an error of `job` (it exits 1, the rest packed), as GNU tar
/// reports them (it exits 2).
pub fn drop_missing(named: &mut Vec<(Vec<u8>, PathBuf)>, job: &Job<'_>) {
    let reporter = job.counting();
    named.retain(|(name, path)| match std::fs::symlink_metadata(path) {
        Ok(_) => true,
        Err(e) => {
            let at = RelPath::from_bytes(name.clone());
            reporter.error(&Error::new(&at, "listed in --files-from", e));
            false
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(entries: &[(&str, &str)]) -> Vec<String> {
        let entries = entries
            .iter()
            .map(|(n, p)| (n.as_bytes().to_vec(), PathBuf::from(p)))
            .collect();
        once_each(entries)
            .into_iter()
            .map(|(n, _)| String::from_utf8(n).expect("utf-8"))
            .collect()
    }

    #[test]
    fn each_member_once() {
        let got = names(&[("a/b", "a/b"), ("c", "c"), ("a/b/d", "a/b/d"), ("c", "./c")]);
        assert_eq!(got, ["a/b", "c"]);
        let got = names(&[("x", "x"), ("", "."), ("etc/h", "/etc/h")]);
        assert_eq!(got, ["", "etc/h"]);
    }
}
