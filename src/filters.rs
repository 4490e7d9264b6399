//! The filter options (`--exclude`, `--include`, `--exclude-from`, `--include-from`)
//! compiled into the one matcher a walk uses (see `ferry_core::filter`).

use crate::cli::{FilterArgs, FilterGiven};
use anyhow::Context;
use ferry_core::filter::{Filter, Rules};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

/// The rules `args` give, compiled; None when there are none. A pattern that cannot be
/// used, or a file of them that cannot be read, is an error naming it.
pub fn compile(args: &FilterArgs) -> anyhow::Result<Option<Arc<Filter>>> {
    Ok(rules(args)?.compile()?.map(Arc::new))
}

/// The rules `args` give, in order, checked but not compiled (for another ferry to
/// compile: the server of a download).
pub fn rules(args: &FilterArgs) -> anyhow::Result<Rules> {
    let mut rules = Rules::new();
    for given in &args.given {
        match given {
            FilterGiven::Pattern(action, pattern) => rules.add(*action, pattern.as_bytes())?,
            FilterGiven::File(action, path) => {
                let shown = path.display().to_string();
                let text = if shown == "-" {
                    let mut text = Vec::new();
                    std::io::stdin()
                        .read_to_end(&mut text)
                        .context("-: read filter rules")?;
                    text
                } else {
                    std::fs::read(path).with_context(|| format!("{shown}: read filter rules"))?
                };
                rules.add_lines(*action, &text, &shown)?;
            }
        }
    }
    Ok(rules)
}
