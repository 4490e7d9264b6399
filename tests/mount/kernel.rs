//! `ferry mount --kernel`: the archive mounted by the kernel's EROFS from an image ferry
//! wrote. As root only (mounting a filesystem needs it); the mounted tree is compared
//! with the source field by field and byte by byte, as the FUSE mount's is, and every
//! way out (unmount, a failed mount) is checked to leave no mount and no loop device.

use super::common::build::{device, sparse_file, stamp_times, write};
use super::common::compare::{assert_same_tree_with, Options};
use super::common::{scratch, trees, Scratch};
use super::{every_kind_and_odd_names, ferry, fuse_here, gnu_tar, is_mounted, must, pack};
use ferry_testkit::skip_unless_root;
use rustix::fs::FileType;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// An archive mounted by `ferry mount` with `flags`, unmounted when dropped.
struct KernelMounted {
    at: PathBuf,
    said: String,
}

impl KernelMounted {
    fn new(cache: &Path, archive: &Path, at: &Path, flags: &[&str]) -> KernelMounted {
        std::fs::create_dir_all(at).expect("make the mountpoint");
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"mount"];
        for f in flags {
            args.push(f);
        }
        args.push(&archive);
        args.push(&at);
        let r = ferry(cache, &args);
        r.assert_ok();
        assert_eq!(
            ferry_mount::session::fs_type(at).as_deref(),
            Some("erofs"),
            "not a kernel mount: {}",
            r.stdout
        );
        KernelMounted {
            at: at.to_path_buf(),
            said: r.stdout,
        }
    }

    /// Unmounts with `ferry umount`, which must succeed and leave nothing mounted.
    fn unmount(self) {
        ferry(Path::new("/nonexistent"), &[&"umount", &self.at]).assert_ok();
        assert!(!is_mounted(&self.at), "still mounted after ferry umount");
    }
}

impl Drop for KernelMounted {
    fn drop(&mut self) {
        if is_mounted(&self.at) {
            let _ = Command::new(super::common::run::FERRY)
                .arg("umount")
                .arg(&self.at)
                .output();
        }
    }
}

/// The loop devices whose backing file lies under `dir`.
fn loops_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/sys/block")
        .expect("list /sys/block")
        .flatten()
    {
        let backing = e.path().join("loop/backing_file");
        if let Ok(b) = std::fs::read_to_string(&backing) {
            if Path::new(b.trim()).starts_with(dir) {
                found.push(format!("{}: {}", e.file_name().to_string_lossy(), b.trim()));
            }
        }
    }
    found
}

/// Waits (boundedly) until no loop device is backed by a file under `dir`: the kernel
/// lets an autoclear device go from a work queue, just after the unmount returns.
fn loops_freed(dir: &Path) {
    super::wait_for("the loop devices to be freed", || {
        loops_under(dir).is_empty()
    });
}

/// The tree of every kind the tests use, with devices, a sparse file, long and odd names
/// and a path beyond PATH_MAX, times stamped.
fn every_kind(s: &Scratch) {
    every_kind_and_odd_names(&s.src);
    trees::root_extras(&s.src);
    trees::beyond_path_max(&s.src);
    device(&s.src.join("char"), FileType::CharacterDevice, 1, 0x12345);
    sparse_file(
        &s.src.join("holes"),
        3 << 20,
        &[(1 << 20, b"data"), (2 << 20, b"more")],
    );
    stamp_times(&s.src);
}

/// The options comparing a kernel mount: EROFS keeps one time, shown as atime too.
fn kernel_opts() -> Options {
    Options {
        skip_atime: true,
        ..Options::default()
    }
}

#[test]
fn a_ferry_archive_mounts_by_the_kernel_as_the_tree_it_was_packed_from() {
    if skip_unless_root() {
        return;
    }
    let s = scratch();
    every_kind(&s);
    let archive = s.tmp.path().join("t.far");
    let cache = s.tmp.path().join("cache");
    pack(&cache, &s.src, &archive);
    let m = KernelMounted::new(&cache, &archive, &s.tmp.path().join("mnt"), &["--kernel"]);
    assert!(
        m.said.contains("by the kernel") && m.said.contains("built"),
        "{}",
        m.said
    );
    assert_same_tree_with(&s.src, &m.at, &kernel_opts());
    // Holes are holes: the data is found where it is, after a hole.
    let f = std::fs::File::open(m.at.join("holes")).expect("open");
    use std::os::fd::AsFd;
    let data = rustix::fs::seek(f.as_fd(), rustix::fs::SeekFrom::Data(0)).expect("SEEK_DATA");
    assert_eq!(data, 1 << 20);
    drop(f);
    m.unmount();
    // The second mount uses the image the first one kept.
    let again = KernelMounted::new(
        &cache,
        &archive,
        &s.tmp.path().join("mnt"),
        &["--mode", "auto"],
    );
    assert!(again.said.contains("cached image"), "{}", again.said);
    assert_same_tree_with(&s.src, &again.at, &kernel_opts());
}

#[test]
fn gnu_tars_mount_by_the_kernel_as_the_tree_they_hold() {
    if skip_unless_root() {
        return;
    }
    let s = scratch();
    every_kind(&s);
    let cache = s.tmp.path().join("cache");
    for (name, args) in [
        (
            "posix.tar",
            &["--format=posix", "--xattrs", "--xattrs-include=*"][..],
        ),
        ("gnu.tar", &["--format=gnu", "--sparse"][..]),
    ] {
        let archive = s.tmp.path().join(name);
        gnu_tar(&s.src, &archive, args);
        let m = KernelMounted::new(
            &cache,
            &archive,
            &s.tmp.path().join(name).with_extension("mnt"),
            &["--kernel"],
        );
        let gnu = name == "gnu.tar";
        let opts = Options {
            skip_special_links: true,
            mtime_seconds: gnu,
            skip_xattrs: gnu,
            ..kernel_opts()
        };
        assert_same_tree_with(&s.src, &m.at, &opts);
    }
}

#[test]
fn loop_devices_are_freed_on_unmount_and_after_a_failed_mount() {
    if skip_unless_root() {
        return;
    }
    let s = scratch();
    trees::mixed(&s.src);
    stamp_times(&s.src);
    let archive = s.tmp.path().join("t.far");
    let cache = s.tmp.path().join("cache");
    pack(&cache, &s.src, &archive);
    let mnt = s.tmp.path().join("mnt");
    let m = KernelMounted::new(&cache, &archive, &mnt, &["--kernel", "--loop"]);
    assert!(m.said.contains("loop devices"), "{}", m.said);
    assert_eq!(
        loops_under(s.tmp.path()).len(),
        2,
        "{:?}",
        loops_under(s.tmp.path())
    );
    assert_same_tree_with(&s.src, &m.at, &kernel_opts());
    m.unmount();
    loops_freed(s.tmp.path());

    // The cached image damaged where the kernel looks (its magic), ferry's checksum of
    // it made to match again: ferry mounts it, the kernel refuses it.
    let image = std::fs::read_dir(cache.join("ferry"))
        .expect("the cache")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "erofs"))
        .expect("the image is in the cache");
    let mut bytes = std::fs::read(&image).expect("read the image");
    bytes[1024] ^= 0xff;
    let sum = xxhash_rust::xxh3::xxh3_64(&bytes[1024..]);
    bytes[48..56].copy_from_slice(&sum.to_le_bytes());
    let own = xxhash_rust::xxh3::xxh3_64(&bytes[..56]);
    bytes[56..64].copy_from_slice(&own.to_le_bytes());
    std::fs::File::options()
        .write(true)
        .open(&image)
        .and_then(|f| f.write_all_at(&bytes, 0))
        .expect("damage the image");
    for flags in [&["--kernel", "--loop"][..], &["--kernel"][..]] {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"mount"];
        for f in flags {
            args.push(f);
        }
        args.push(&archive);
        args.push(&mnt);
        let r = ferry(&cache, &args);
        r.assert_status(2);
        assert!(r.stderr.contains("kernel mount"), "{}", r.stderr);
        assert!(!is_mounted(&mnt), "mounted anyway");
        loops_freed(s.tmp.path());
    }
}

#[test]
fn a_compressed_archive_is_refused_by_kernel_mode_and_auto_picks_fuse() {
    if skip_unless_root() {
        return;
    }
    let s = scratch();
    write(&s.src.join("f"), b"x");
    let tar = s.tmp.path().join("t.tar");
    gnu_tar(&s.src, &tar, &[]);
    let gz = s.tmp.path().join("t.tar.gz");
    let out = must(Command::new("gzip").arg("-c").arg(&tar));
    std::fs::write(&gz, out.stdout).expect("write");
    let cache = s.tmp.path().join("cache");
    let mnt = s.tmp.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir");
    let r = ferry(&cache, &[&"mount", &"--kernel", &gz, &mnt]);
    r.assert_status(2);
    for said in [
        "t.tar.gz",
        "compressed (gzip)",
        "--mode fuse",
        "decompress it first",
    ] {
        assert!(r.stderr.contains(said), "no {said:?} in {}", r.stderr);
    }
    assert!(!is_mounted(&mnt));
    if !fuse_here() {
        return;
    }
    let r = ferry(&cache, &[&"mount", &"--mode", &"auto", &gz, &mnt]);
    r.assert_ok();
    assert!(r.stdout.contains("mounting with FUSE"), "{}", r.stdout);
    assert_eq!(std::fs::read(mnt.join("f")).expect("read"), b"x");
    ferry(&cache, &[&"umount", &mnt]).assert_ok();
}

#[test]
fn a_member_with_damaged_data_is_read_as_it_is_stored() {
    if skip_unless_root() {
        return;
    }
    let s = scratch();
    let content = super::common::build::pattern(7, 100_000);
    write(&s.src.join("f"), &content);
    let archive = s.tmp.path().join("t.far");
    let cache = s.tmp.path().join("cache");
    pack(&cache, &s.src, &archive);
    let bytes = std::fs::read(&archive).expect("read");
    let at = bytes
        .windows(64)
        .position(|w| w == &content[..64])
        .expect("the file's data in the archive");
    let mut damaged = content.clone();
    damaged[5000] ^= 0x55;
    std::fs::File::options()
        .write(true)
        .open(&archive)
        .and_then(|f| f.write_all_at(&damaged[5000..5001], (at + 5000) as u64))
        .expect("damage");
    let m = KernelMounted::new(&cache, &archive, &s.tmp.path().join("mnt"), &["--kernel"]);
    assert_eq!(std::fs::read(m.at.join("f")).expect("read"), damaged);
}

#[test]
fn a_hostile_archive_gives_an_image_without_its_hostile_names() {
    if skip_unless_root() {
        return;
    }
    let s = scratch();
    let archive = s.tmp.path().join("hostile.tar");
    super::hostile::hostile_tar(&archive);
    let cache = s.tmp.path().join("cache");
    let m = KernelMounted::new(&cache, &archive, &s.tmp.path().join("mnt"), &["--kernel"]);
    super::hostile::assert_shown_as_unpacked(&m.at);
    assert!(std::fs::read_dir(m.at.join("sub"))
        .expect("list")
        .next()
        .is_none());
}

#[test]
fn an_image_larger_than_its_archive_is_refused_naming_the_member_and_auto_uses_fuse() {
    if skip_unless_root() {
        return;
    }
    let s = scratch();
    // 8 GiB, all hole but one 4 KiB block: a tar of a few KiB, whose image would need
    // a chunk index for every 4 KiB of the file (16 MiB of them).
    let f = std::fs::File::create(s.src.join("swollen")).expect("create");
    f.set_len(8 << 30).expect("size");
    f.write_all_at(&[7u8; 4096], 4 << 30)
        .expect("the data block");
    drop(f);
    let archive = s.tmp.path().join("sparse.tar");
    gnu_tar(&s.src, &archive, &["--format=posix", "--sparse"]);
    let tar_len = std::fs::metadata(&archive).expect("stat").len();
    assert!(tar_len < 64 << 10, "a sparse tar of {tar_len} bytes");
    let cache = s.tmp.path().join("cache");
    let mnt = s.tmp.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir");
    let r = ferry(&cache, &[&"mount", &"--kernel", &archive, &mnt]);
    r.assert_status(2);
    for said in ["swollen", "chunk indexes", "--mode fuse"] {
        assert!(r.stderr.contains(said), "no {said:?} in {}", r.stderr);
    }
    assert!(!is_mounted(&mnt));
    let images: Vec<_> = walk_files(&cache)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "erofs"))
        .collect();
    assert!(images.is_empty(), "an image was left: {images:?}");
    if !fuse_here() {
        return;
    }
    let r = ferry(&cache, &[&"mount", &"--mode", &"auto", &archive, &mnt]);
    r.assert_ok();
    assert!(r.stderr.contains("mounting with FUSE"), "{}", r.stderr);
    let data = std::fs::File::open(mnt.join("swollen")).expect("open");
    let mut block = [0u8; 8];
    data.read_exact_at(&mut block, 4 << 30)
        .expect("read the data");
    assert_eq!(block, [7u8; 8]);
    drop(data);
    ferry(&cache, &[&"umount", &mnt]).assert_ok();
}

/// Every file below `dir`.
fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk_files(&p));
        } else {
            out.push(p);
        }
    }
    out
}
