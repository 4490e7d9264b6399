//! Rebuilding on real filesystems. On XFS and btrfs (loop-mounted images, as root) the
//! unchanged blocks of the rebuilt file are shared with the basis (FIEMAP's shared
//! flag), the short last block included; on ext4 and tmpfs, across two filesystems and
//! with clones turned off, the fallbacks rebuild it exactly.

use crate::util::{file_at, random, trip};
use ferry_delta::{block_size_for, Applied, Apply, Op, Reflink};
use ferry_testkit::extents::shared_bytes;
use ferry_testkit::mount::mount_image;
use ferry_testkit::skip;
use std::os::fd::AsFd;
use std::path::Path;

/// 8 MiB and a short last block.
const LEN: usize = (8 << 20) + 1234;
const MIB: usize = 1 << 20;

fn basis() -> Vec<u8> {
    random(&mut fastrand::Rng::with_seed(77), LEN)
}

/// Five aligned 4 KiB blocks overwritten, the size kept.
fn overwritten(basis: &[u8]) -> Vec<u8> {
    let mut new = basis.to_vec();
    let mut rng = fastrand::Rng::with_seed(78);
    for b in [3, 100, 1000, 1500, 2047] {
        rng.fill(&mut new[b * 4096..(b + 1) * 4096]);
    }
    new
}

fn inserted(basis: &[u8], n: usize) -> Vec<u8> {
    let mut new = basis.to_vec();
    new.splice(MIB..MIB, std::iter::repeat_n(0x5a, n));
    new
}

/// Rebuilds `new` from `basis`, the basis and output files in `basis_dir` and
/// `out_dir`; checks it byte for byte and returns what was done.
fn rebuild(basis_dir: &Path, out_dir: &Path, basis: &[u8], new: &[u8]) -> Applied {
    let b = file_at(&basis_dir.join("basis"), basis);
    let n = file_at(&basis_dir.join("new"), new);
    let out = file_at(&out_dir.join("out"), b"");
    let block = block_size_for(basis.len() as u64);
    let t = trip(&b, basis.len() as u64, &n, new.len() as u64, block, &out);
    assert!(std::fs::read(out_dir.join("out")).expect("read") == new);
    t.applied
}

fn round_up(n: u64) -> u64 {
    n.div_ceil(4096) * 4096
}

fn clones_on(mkfs: &str, args: &[&str]) {
    let m = match mount_image(512 << 20, mkfs, args) {
        Ok(m) => m,
        Err(why) => return skip(&why),
    };
    let dir = m.path();
    let basis = basis();

    // Same size, five blocks changed: everything else cloned, the short end too.
    let new = overwritten(&basis);
    let a = rebuild(dir, dir, &basis, &new);
    let changed = 5 * 4096;
    assert_eq!(
        (a.written, a.copied, a.buffered),
        (changed, 0, 0),
        "{mkfs}: {a:?}"
    );
    assert_eq!(a.cloned, LEN as u64 - changed, "{mkfs}");
    let shared = shared_bytes(&dir.join("out")).expect("fiemap");
    assert_eq!(
        shared,
        round_up(a.cloned),
        "{mkfs}: bytes shared with the basis"
    );
    assert!(shared_bytes(&dir.join("basis")).expect("fiemap") >= shared);

    // 4 KiB inserted at an aligned offset: the rest is still aligned, all cloned.
    let a = rebuild(dir, dir, &basis, &inserted(&basis, 4096));
    assert_eq!(
        (a.cloned, a.written, a.copied),
        (LEN as u64, 4096, 0),
        "{mkfs}: {a:?}"
    );
    assert_eq!(
        shared_bytes(&dir.join("out")).expect("fiemap"),
        round_up(LEN as u64)
    );

    // 100 bytes inserted: what follows is no longer aligned and is copied instead.
    let a = rebuild(dir, dir, &basis, &inserted(&basis, 100));
    assert_eq!(a.cloned, MIB as u64, "{mkfs}: {a:?}");
    assert_eq!(a.copied + a.buffered, (LEN - MIB) as u64, "{mkfs}: {a:?}");
    eprintln!("{mkfs}: clones and FIEMAP shared extents as expected");
}

#[test]
fn xfs_shares_unchanged_blocks() {
    clones_on("mkfs.xfs", &["-q", "-m", "reflink=1"]);
}

#[test]
fn btrfs_shares_unchanged_blocks() {
    clones_on("mkfs.btrfs", &["-q"]);
}

#[test]
fn ext4_copies_in_the_kernel() {
    let m = match mount_image(64 << 20, "mkfs.ext4", &["-q"]) {
        Ok(m) => m,
        Err(why) => return skip(&why),
    };
    let basis = basis();
    let new = overwritten(&basis);
    let a = rebuild(m.path(), m.path(), &basis, &new);
    assert_eq!(
        (a.cloned, a.copied, a.written),
        (0, LEN as u64 - 5 * 4096, 5 * 4096),
        "{a:?}"
    );
    assert_eq!(shared_bytes(&m.path().join("out")).expect("fiemap"), 0);

    // Clones demanded where the filesystem has none: an error, not a quiet copy.
    let b = file_at(&m.path().join("basis"), &basis);
    let out = file_at(&m.path().join("out"), b"");
    let mut apply =
        Apply::new(b.as_fd(), LEN as u64, out.as_fd(), LEN as u64).reflink(Reflink::Always);
    assert!(apply
        .push(&Op::Copy {
            basis_offset: 0,
            len: LEN as u64
        })
        .is_err());

    // Basis on tmpfs, output on ext4: neither clones nor kernel copies cross.
    let Some(shm) = tmpfs() else {
        return skip("no tmpfs at /dev/shm");
    };
    let sub = tempfile::tempdir_in(&shm).expect("dir in /dev/shm");
    let a = rebuild(sub.path(), m.path(), &basis, &new);
    assert_eq!(
        (a.cloned, a.copied, a.buffered),
        (0, 0, LEN as u64 - 5 * 4096),
        "{a:?}"
    );
}

#[test]
fn tmpfs_rebuilds_exactly() {
    let Some(shm) = tmpfs() else {
        return skip("no tmpfs at /dev/shm");
    };
    let dir = tempfile::tempdir_in(&shm).expect("dir in /dev/shm");
    let basis = basis();
    for new in [
        overwritten(&basis),
        inserted(&basis, 100),
        inserted(&basis, 4096),
    ] {
        let a = rebuild(dir.path(), dir.path(), &basis, &new);
        assert_eq!(a.cloned, 0, "{a:?}");
    }
}

#[test]
fn reflink_never_reads_and_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let basis = basis();
    let b = file_at(&dir.path().join("basis"), &basis);
    let out = file_at(&dir.path().join("out"), b"");
    let mut apply =
        Apply::new(b.as_fd(), LEN as u64, out.as_fd(), LEN as u64).reflink(Reflink::Never);
    apply
        .push(&Op::Copy {
            basis_offset: 0,
            len: LEN as u64,
        })
        .expect("copy");
    let a = apply.finish().expect("finish");
    assert_eq!((a.cloned, a.copied, a.buffered), (0, 0, LEN as u64));
    assert!(std::fs::read(dir.path().join("out")).expect("read") == basis);
}

/// /dev/shm when it is a tmpfs.
fn tmpfs() -> Option<std::path::PathBuf> {
    const TMPFS_MAGIC: u64 = 0x0102_1994;
    let shm = Path::new("/dev/shm");
    let st = rustix::fs::statfs(shm).ok()?;
    (st.f_type as u64 == TMPFS_MAGIC).then(|| shm.to_path_buf())
}
