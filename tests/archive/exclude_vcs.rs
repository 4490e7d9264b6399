//! `pack --exclude-vcs` leaves out what GNU tar's `--exclude-vcs` leaves out: the same
//! members, from a tree with every version control name GNU tar knows, as files and
//! directories, at the top and deeper, beside names that only look alike.

use crate::common::{build, scratch};
use crate::{ferry, gnu_pack, missing, pack};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// GNU tar's list (`vcs_file_table` in its source).
const VCS: [&str; 21] = [
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
    "{arch}",
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

fn tree(root: &Path) {
    build::write(&root.join("kept"), b"kept\n");
    // Alike, but not the names: kept by both.
    for name in ["git", ".git2", "x.git", "CVSROOT", "{arch", "a=update"] {
        build::write(&root.join(name), b"alike\n");
    }
    for (i, name) in VCS.iter().enumerate() {
        // Alternately a directory with a file in it, and a file; at the top and below.
        for dir in [root.to_path_buf(), root.join("sub/deeper")] {
            build::mkdirs(&dir);
            if i % 2 == 0 {
                build::mkdirs(&dir.join(name));
                build::write(&dir.join(name).join("inside"), b"vcs\n");
            } else {
                build::write(&dir.join(name), b"vcs\n");
            }
        }
    }
}

/// The member names of a listing, without `./` and trailing slashes.
fn names(listing: &str) -> BTreeSet<String> {
    listing
        .lines()
        .map(|l| l.trim_start_matches("./").trim_end_matches('/').to_string())
        .filter(|l| !l.is_empty() && l != ".")
        .collect()
}

#[test]
fn exclude_vcs_leaves_out_what_gnu_tar_leaves_out() {
    if missing("tar") {
        return;
    }
    let s = scratch();
    tree(&s.src);
    let ours = s.tmp.path().join("ours.tar");
    pack(&s.src, &ours, &["--exclude-vcs"]);
    let listed = ferry(&[&"ls", &ours]);
    listed.assert_ok();
    let gnu = s.tmp.path().join("gnu.tar");
    gnu_pack(&["--exclude-vcs"], &gnu, &s.src, &["."]);
    let out = Command::new("tar")
        .arg("-tf")
        .arg(&gnu)
        .output()
        .expect("tar -t");
    let theirs = names(&String::from_utf8_lossy(&out.stdout));
    let ours = names(&listed.stdout);
    assert_eq!(ours, theirs);
    assert!(ours.contains("kept") && ours.contains("x.git") && !ours.contains(".git"));
    // Without the option, everything goes in.
    let all = s.tmp.path().join("all.tar");
    pack(&s.src, &all, &[]);
    let everything = names(&ferry(&[&"ls", &all]).stdout);
    assert!(everything.contains("sub/deeper/_darcs/inside") && everything.contains("{arch}"));
}
