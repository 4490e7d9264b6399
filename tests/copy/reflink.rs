//! Cloning: on a loop-mounted XFS image with reflink (root, mkfs.xfs), the default and
//! `--reflink=always` clone every file with data, using almost no new space, and
//! `--reflink=never` clones nothing: no copied file shares a block with its source,
//! not even one moved by `copy_file_range` (which clones on XFS); a copy from
//! XFS to another filesystem falls back to copying; on a filesystem that cannot clone,
//! `--reflink=always` fails with one error line per file.

use crate::common::build::*;
use crate::common::extents::shared_bytes;
use crate::common::mount::{mount_image, Mounted};
use crate::common::run::copy;
use crate::common::{copy_exact, scratch, scratch_in, skip, trees, Scratch};
use std::path::Path;

const MIB: usize = 1 << 20;

/// A few 1 MiB files, a small one, one that ends mid-block, and an empty one.
fn files_to_clone(s: &Scratch) {
    mkdirs(&s.src.join("sub"));
    for i in 0..4 {
        write(&s.src.join(format!("sub/mib{i}")), &pattern(i, MIB));
    }
    write(&s.src.join("small"), b"a few bytes");
    write(&s.src.join("odd_tail"), &pattern(9, 3 * 4096 + 1000));
    write(&s.src.join("empty"), b"");
    stamp_times(&s.src);
}

/// Bytes in use on the filesystem holding `path`.
fn used_bytes(path: &Path) -> u64 {
    let st = rustix::fs::statvfs(path).expect("statvfs");
    (st.f_blocks - st.f_bfree) * st.f_frsize
}

/// The copied files with data, by name below the copy's root.
const WITH_DATA: [&str; 6] = [
    "sub/mib0", "sub/mib1", "sub/mib2", "sub/mib3", "small", "odd_tail",
];

/// Copies `s` with `args` and checks: exact copy, `cloned` files cloned and the others
/// (the empty one included) copied, each file sharing blocks exactly when it was
/// cloned, and, when everything with data was cloned, the filesystem barely fuller
/// (cloned data takes no new blocks).
fn copy_cloning(s: &Scratch, args: &[&str], cloned: u64) {
    let before = used_bytes(&s.src);
    let summary = copy_exact(s, args);
    let files = trees::count(&s.src).files;
    summary.assert_counts(&[("cloned", cloned)]);
    // What is not cloned is copied, through memory or (a file too small to hold a hole)
    // by the kernel.
    let copied = summary.count("buffered") + summary.count("kernel_copied");
    assert_eq!(
        copied,
        files - cloned,
        "{args:?}: files copied: {}",
        summary.0
    );
    for name in WITH_DATA {
        let shared = shared_bytes(&s.dst.join(name)).expect("extent map");
        assert_eq!(
            shared > 0,
            cloned > 0,
            "{args:?}: {name} shares {shared} bytes with another file"
        );
    }
    let grown = used_bytes(&s.src).saturating_sub(before);
    if cloned > 0 {
        assert!(
            grown < MIB as u64,
            "{args:?}: the filesystem grew by {grown} bytes for 4 MiB of clones"
        );
    } else {
        // Not all 4 MiB: XFS's free-space count moves by itself meanwhile (once, on a
        // loaded machine, the copies showed as 118,784 bytes short of 4 MiB; likely
        // space set aside past the end of files written before and given back); a copy
        // still grows it by far more than the clones' 1 MiB bound.
        assert!(
            grown >= 3 * MIB as u64,
            "{args:?}: the filesystem grew by only {grown} bytes for 4 MiB of copies"
        );
    }
}

/// A 512 MiB XFS image with reflink, or `None` (after saying why) when it cannot be had.
fn xfs() -> Option<Mounted> {
    mount_image(512 << 20, "mkfs.xfs", &["-q", "-m", "reflink=1"])
        .map_err(|why| skip(&why))
        .ok()
}

#[test]
fn files_are_cloned_on_xfs() {
    let Some(mounted) = xfs() else { return };
    // Six files with data (four of 1 MiB, a tiny one, one ending mid-block) and an
    // empty one, which has nothing to clone. Every case's trees are kept to the end:
    // XFS frees a deleted tree's blocks in the background, which would hide the space
    // a later case's copy takes.
    let mut kept = Vec::new();
    for (args, cloned) in [
        (&["--reflink=always"][..], 6),
        (&[], 6),
        (&["--reflink=never"], 0),
    ] {
        let s = scratch_in(mounted.path());
        files_to_clone(&s);
        copy_cloning(&s, args, cloned);
        kept.push(s);
    }
}

#[test]
fn a_copy_from_xfs_to_another_filesystem_falls_back_to_copying() {
    let Some(mounted) = xfs() else { return };
    let mut s = scratch_in(mounted.path());
    files_to_clone(&s);
    let elsewhere = tempfile::tempdir().unwrap();
    s.dst = elsewhere.path().join("dst");
    copy_exact(&s, &[]).assert_counts(&[("cloned", 0)]);
}

#[test]
fn reflink_always_fails_where_the_filesystem_cannot_clone() {
    let s = scratch();
    files_to_clone(&s);
    let r = copy(&s.src, &s.dst, &["--reflink=always", "--json"]);
    r.assert_status(1);
    let errors = r.errors();
    let nonempty = trees::count(&s.src).nonempty;
    assert!(
        errors.len() as u64 >= nonempty,
        "expected an error line per file with data: {r}"
    );
    for name in ["sub/mib0", "small", "odd_tail"] {
        assert!(
            errors.iter().any(|l| l.contains(name)),
            "no error line names {name}: {r}"
        );
    }
    r.json()
        .assert_counts(&[("errors", errors.len() as u64), ("cloned", 0)]);
}
