//! `pack --exclude-vcs`: the names of version control systems' files and directories
//! that GNU tar's `--exclude-vcs` leaves out, at any depth, added as exclude rules
//! after the filter options given (so an `--include` given still wins, rules being
//! checked in order).

use crate::cli::FilterArgs;
use ferry_core::filter::{Action, Filter};
use std::sync::Arc;

/// GNU tar's list (`vcs_file_table`): CVS, RCS, SCCS, Subversion, git, GNU Arch,
/// Bazaar, Mercurial and darcs. `{arch}` is written as classes: braces are globs'
/// alternation.
pub const VCS_NAMES: [&str; 21] = [
    "CVS",
    ".cvsignore",
    "RCS",
    "SCCS",
    ".svn",
    ".git",
    ".gitignore",
    ".gitattributes",
    ".gitmodules",
    ".arch-ids",
    "[{]arch[}]",
    "=RELEASE-ID",
    "=meta-update",
    "=update",
    ".bzr",
    ".bzrignore",
    ".bzrtags",
    ".hg",
    ".hgignore",
    ".hgtags",
    "_darcs",
];

/// The filter `args` give, with the version control names excluded after them when
/// `exclude_vcs`; None when there are no rules.
pub fn filter(args: &FilterArgs, exclude_vcs: bool) -> anyhow::Result<Option<Arc<Filter>>> {
    let mut rules = crate::filters::rules(args)?;
    if exclude_vcs {
        for name in VCS_NAMES {
            rules.add(Action::Exclude, name.as_bytes())?;
        }
    }
    Ok(rules.compile()?.map(Arc::new))
}
