//! The filter options (`--exclude`, `--include`, `--exclude-from`, `--include-from`)
//! and `copy --files-from`'s list compiled into the one matcher a walk uses (see
//! `ferry_core::filter`).

use crate::cli::{FilterArgs, FilterGiven};
use anyhow::Context;
use ferry_core::filter::{parse_list, Filter, Rules};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

/// The rules `args` give, compiled; None when there are none. A pattern that cannot be
/// used, or a file of them that cannot be read, is an error naming it.
pub fn compile(args: &FilterArgs) -> anyhow::Result<Option<Arc<Filter>>> {
    Ok(rules(args)?.compile()?.map(Arc::new))
}

/// The rules `args` give, in order, checked but not compiled (for another ferry to
/// compile: the server of a download), with the list of `--files-from`, if given.
pub fn rules(args: &FilterArgs) -> anyhow::Result<Rules> {
    let mut rules = Rules::new();
    let mut stdin_read = false;
    for given in &args.given {
        match given {
            FilterGiven::Pattern(action, pattern) => rules.add(*action, pattern.as_bytes())?,
            FilterGiven::File(action, path) => {
                let text = read_file(path, "filter rules", &mut stdin_read)?;
                let shown = path.display().to_string();
                rules.add_entries(*action, &text, args.from0, &shown)?;
            }
        }
    }
    if let Some(path) = &args.files_from {
        let text = read_file(path, "the list of paths", &mut stdin_read)?;
        let shown = path.display().to_string();
        rules.set_listed(parse_list(&text, args.from0, &shown)?);
    }
    Ok(rules)
}

/// The bytes of `path` (`-`: standard input, which can be read only once: `stdin_read`
/// says whether it was), read for `what`.
pub fn read_file(path: &Path, what: &str, stdin_read: &mut bool) -> anyhow::Result<Vec<u8>> {
    let shown = path.display().to_string();
    if shown != "-" {
        return std::fs::read(path).with_context(|| format!("{shown}: read {what}"));
    }
    if std::mem::replace(stdin_read, true) {
        anyhow::bail!("-: standard input is read once: give {what} in a file");
    }
    let mut text = Vec::new();
    std::io::stdin()
        .read_to_end(&mut text)
        .with_context(|| format!("-: read {what}"))?;
    Ok(text)
}
