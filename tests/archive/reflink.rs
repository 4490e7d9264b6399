//! Zero copy on XFS: pack clones file data into the archive and unpack clones it out,
//! so neither grows the filesystem by the data's size; with `--reflink=never` neither
//! the archive nor an unpacked file shares a block with anything.

use crate::common::compare::assert_same_tree;
use crate::common::extents::shared_bytes;
use crate::common::mount::{mount_image, Mounted};
use crate::common::{build, scratch_in, skip, skip_unless_root, Scratch};
use crate::{ferry, pack};

/// Bytes in use on the filesystem at `path`, after writing back what is pending (XFS
/// allocates at writeback).
fn used_bytes(path: &std::path::Path) -> u64 {
    rustix::fs::sync();
    let st = rustix::fs::statvfs(path).expect("statvfs");
    (st.f_blocks - st.f_bfree) * st.f_frsize
}

/// A 1 GiB XFS image with reflink, or `None` (after saying why) when it cannot be had.
fn xfs() -> Option<Mounted> {
    if skip_unless_root() {
        return None;
    }
    mount_image(1 << 30, "mkfs.xfs", &["-q", "-m", "reflink=1"])
        .map_err(|why| skip(&why))
        .ok()
}

/// Sixteen 4 MiB files and one that ends mid-block (its tail is written, not cloned).
fn files_to_clone(m: &Mounted) -> Scratch {
    let s = scratch_in(m.path());
    build::mkdirs(&s.src);
    for i in 0..16 {
        build::write(&s.src.join(format!("f{i}")), &build::pattern(i, 4 << 20));
    }
    build::write(&s.src.join("odd"), &build::pattern(99, (1 << 20) + 123));
    s
}

#[test]
fn pack_and_unpack_clone_on_xfs() {
    let Some(m) = xfs() else { return };
    let s = files_to_clone(&m);
    let archive = m.path().join("a.far");
    let before = used_bytes(m.path());
    let r = pack(&s.src, &archive, &["--json", "--reflink=always"]);
    assert_eq!(r.json().count("files"), 17);
    assert_eq!(r.json().count("cloned"), 17);
    let grew = used_bytes(m.path()).saturating_sub(before);
    assert!(
        grew < 4 << 20,
        "pack wrote {grew} bytes: data was copied, not cloned"
    );
    let before = used_bytes(m.path());
    let r = ferry(&[&"unpack", &"--json", &"--reflink=always", &archive, &s.dst]);
    r.assert_ok();
    assert_eq!(r.json().count("cloned"), 17);
    let grew = used_bytes(m.path()).saturating_sub(before);
    assert!(
        grew < 4 << 20,
        "unpack wrote {grew} bytes: data was copied, not cloned"
    );
    assert_same_tree(&s.src, &s.dst);
}

#[test]
fn reflink_never_shares_no_block_on_xfs() {
    let Some(m) = xfs() else { return };
    let s = files_to_clone(&m);
    // Small files too: `copy_file_range` would clone a whole small file on XFS.
    build::write(&s.src.join("small"), b"a few bytes");
    let never = m.path().join("never.far");
    let r = pack(&s.src, &never, &["--json", "--reflink=never"]);
    assert_eq!(r.json().count("cloned"), 0);
    assert_eq!(shared_bytes(&never).expect("extent map"), 0, "{r}");
    // Unpacked from an archive whose data could be cloned out.
    let cloned = m.path().join("cloned.far");
    pack(&s.src, &cloned, &["--json"]).assert_ok();
    assert!(shared_bytes(&cloned).expect("extent map") > 0);
    let r = ferry(&[&"unpack", &"--json", &"--reflink=never", &cloned, &s.dst]);
    r.assert_ok();
    assert_eq!(r.json().count("cloned"), 0);
    assert_same_tree(&s.src, &s.dst);
    for name in ["f0", "f15", "odd", "small"] {
        let shared = shared_bytes(&s.dst.join(name)).expect("extent map");
        assert_eq!(shared, 0, "{name} shares {shared} bytes with another file");
    }
}

/// Issue 21: `--reflink=always` on a filesystem that cannot clone (ext4). `copy` fails
/// every file, whatever its size; `pack` fails a file of 64 KiB or more, but a smaller
/// one is written beside its header on every filesystem, never cloned, so a tree of
/// small files packs (the same archive as on XFS), as the README says.
#[test]
fn reflink_always_on_ext4_fails_what_would_be_cloned() {
    if skip_unless_root() {
        return;
    }
    let m = match mount_image(64 << 20, "mkfs.ext4", &["-q"]) {
        Ok(m) => m,
        Err(why) => return skip(&why),
    };
    let s = scratch_in(m.path());
    build::write(&s.src.join("a"), b"small");
    build::write(&s.src.join("b"), &build::pattern(1, (64 << 10) - 1));
    let copied = crate::common::run::copy(&s.src, &s.dst, &["--reflink=always", "--json"]);
    copied.assert_status(1);
    copied.json().assert_counts(&[("files", 0), ("errors", 2)]);
    let archive = m.path().join("small.far");
    pack(&s.src, &archive, &["--reflink=always"]);
    ferry(&[&"unpack", &archive, &m.path().join("out")]).assert_ok();
    assert_same_tree(&s.src, &m.path().join("out"));
    build::write(&s.src.join("c"), &build::pattern(2, 64 << 10));
    let big = m.path().join("big.far");
    let r = ferry(&[&"pack", &"--reflink=always", &s.src, &big]);
    // The archive's filesystem cannot clone: the pack fails as a whole, naming it.
    r.assert_status(2);
    let said = format!(
        "ferry: {}: write archive: Operation not supported",
        big.display()
    );
    assert!(
        r.errors().iter().any(|l| l.starts_with(&said)),
        "a 64 KiB file was not cloned, yet pack did not say so: {r}"
    );
    assert!(!big.exists(), "a failed pack left its archive: {r}");
}
