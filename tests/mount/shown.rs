//! A mount shows the tree `unpack` makes (issue 33): owners by the names the archive
//! gives, where this machine has them (as root, as GNU tar extracts), not the
//! archive's numbers; symlinks 0777 whatever their header says; directories the
//! archive never names as `mkdir` makes them here (not with the archive file's owner).
//! In both modes, and the same as the unpacked tree field by field.

use super::common::compare::{assert_same_tree_with, Options};
use super::common::run::run_python;
use super::common::scratch;
use super::{ferry, fuse_here, Mounted};
use ferry_testkit::skip_unless_root;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// An archive as a Mac writes it: owner "daemon" (uid 501 there, 1 here) and group
/// "staff" (20 there, 50 here), and a symlink whose header says 0755.
const MAC_LIKE: &str = r#"
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    def member(name, kind, **kw):
        i = tarfile.TarInfo(name)
        i.type, i.uid, i.gid, i.uname, i.gname = kind, 501, 20, "daemon", "staff"
        i.mtime = 1_600_000_000
        for k, v in kw.items():
            setattr(i, k, v)
        return i
    t.addfile(member("d", tarfile.DIRTYPE, mode=0o750))
    data = b"hello\n"
    t.addfile(member("d/f", tarfile.REGTYPE, mode=0o640, size=len(data)), io.BytesIO(data))
    t.addfile(member("d/l", tarfile.SYMTYPE, mode=0o755, linkname="f"))
    t.addfile(member("n", tarfile.REGTYPE, mode=0o600, uname="", gname="", uid=12345, gid=23456))
    t.addfile(member("implied/x/f", tarfile.REGTYPE, mode=0o644))
"#;

/// This process's umask (what ferry, its child, inherits).
fn umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with("Umask:"))
        .expect("a Umask line");
    u32::from_str_radix(line["Umask:".len()..].trim(), 8).expect("an octal umask")
}

/// The uid and gid of `path` (not following a symlink), and its permission bits.
fn owner_and_mode(path: &Path) -> (u32, u32, u32) {
    let m = std::fs::symlink_metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (m.uid(), m.gid(), m.mode() & 0o7777)
}

#[test]
fn mounts_show_the_owners_and_symlink_modes_unpack_makes() {
    if skip_unless_root() || !fuse_here() {
        return;
    }
    let s = scratch();
    let archive = s.tmp.path().join("mac.tar");
    run_python(MAC_LIKE, &archive);
    // The archive file's owner is not who unpacks or mounts it.
    super::common::build::chown(&archive, 4321, 4321);
    let cache = s.tmp.path().join("cache");
    ferry(&cache, &[&"unpack", &"--no-progress", &archive, &s.dst]).assert_ok();
    let (daemon, staff) = (1, 50); // Debian's ids for those names
    assert_eq!(owner_and_mode(&s.dst.join("d/f")), (daemon, staff, 0o640));
    assert_eq!(owner_and_mode(&s.dst.join("d/l")), (daemon, staff, 0o777));
    assert_eq!(owner_and_mode(&s.dst.join("n")), (12345, 23456, 0o600));
    let made = 0o777 & !umask();
    assert_eq!(owner_and_mode(&s.dst.join("implied/x")), (0, 0, made));
    // The archive names no root and no `implied/x`: unpack makes them now, the mount
    // shows the archive's time.
    let made_root = || vec![Vec::new(), b"implied".to_vec(), b"implied/x".to_vec()];
    let fuse = Mounted::new(&cache, &archive, &s.tmp.path().join("fuse"));
    let fuse_opts = Options {
        made_dirs: made_root(),
        ..Options::default()
    };
    assert_same_tree_with(&s.dst, &fuse.at, &fuse_opts);
    let kernel = Mounted::made_by(&s.tmp.path().join("kernel"), || {
        ferry(
            &cache,
            &[
                &"mount",
                &"--kernel",
                &archive,
                &s.tmp.path().join("kernel"),
            ],
        )
    });
    // EROFS keeps one time, shown as the atime too.
    let kernel_opts = Options {
        skip_atime: true,
        made_dirs: made_root(),
        ..Options::default()
    };
    assert_same_tree_with(&s.dst, &kernel.at, &kernel_opts);
    // And what `--numeric-owner` keeps is the archive's numbers.
    let numeric = s.tmp.path().join("numeric");
    ferry(
        &cache,
        &[
            &"unpack",
            &"--no-progress",
            &"--numeric-owner",
            &archive,
            &numeric,
        ],
    )
    .assert_ok();
    assert_eq!(owner_and_mode(&numeric.join("d/f")), (501, 20, 0o640));
    // A mount with `--numeric-owner` shows that tree, in both modes.
    let fuse_numeric = s.tmp.path().join("fuse-numeric");
    let fuse_numeric = Mounted::made_by(&fuse_numeric, || {
        ferry(
            &cache,
            &[&"mount", &"--numeric-owner", &archive, &fuse_numeric],
        )
    });
    assert_eq!(
        owner_and_mode(&fuse_numeric.at.join("d/l")),
        (501, 20, 0o777)
    );
    assert_same_tree_with(&numeric, &fuse_numeric.at, &fuse_opts);
    let kernel_numeric = s.tmp.path().join("kernel-numeric");
    let kernel_numeric = Mounted::made_by(&kernel_numeric, || {
        let args: [&dyn AsRef<std::ffi::OsStr>; 5] = [
            &"mount",
            &"--kernel",
            &"--numeric-owner",
            &archive,
            &kernel_numeric,
        ];
        ferry(&cache, &args)
    });
    assert_same_tree_with(&numeric, &kernel_numeric.at, &kernel_opts);
    // The image by name is still there, and still by name.
    drop(kernel);
    let again = Mounted::made_by(&s.tmp.path().join("kernel"), || {
        ferry(
            &cache,
            &[
                &"mount",
                &"--kernel",
                &archive,
                &s.tmp.path().join("kernel"),
            ],
        )
    });
    assert_eq!(
        owner_and_mode(&again.at.join("d/f")),
        (daemon, staff, 0o640)
    );
}
