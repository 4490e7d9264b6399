//! Zero copy on XFS: pack clones file data into the archive and unpack clones it out,
//! so neither grows the filesystem by the data's size.

use crate::common::compare::assert_same_tree;
use crate::common::mount::mount_image;
use crate::common::{build, scratch_in, skip, skip_unless_root};
use crate::{ferry, pack};

/// Bytes in use on the filesystem at `path`, after writing back what is pending (XFS
/// allocates at writeback).
fn used_bytes(path: &std::path::Path) -> u64 {
    rustix::fs::sync();
    let st = rustix::fs::statvfs(path).expect("statvfs");
    (st.f_blocks - st.f_bfree) * st.f_frsize
}

#[test]
fn pack_and_unpack_clone_on_xfs() {
    if skip_unless_root() {
        return;
    }
    let m = match mount_image(1 << 30, "mkfs.xfs", &["-q", "-m", "reflink=1"]) {
        Ok(m) => m,
        Err(why) => return skip(&why),
    };
    let s = scratch_in(m.path());
    build::mkdirs(&s.src);
    for i in 0..16 {
        // 4 MiB each, and one that ends mid-block (its tail is written, not cloned).
        build::write(&s.src.join(format!("f{i}")), &build::pattern(i, 4 << 20));
    }
    build::write(&s.src.join("odd"), &build::pattern(99, (1 << 20) + 123));
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
