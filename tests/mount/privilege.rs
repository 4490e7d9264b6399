//! A mounted archive never grants a privilege: setuid and setgid bits and file
//! capabilities inside it are shown as stored but have no effect, and device nodes in
//! it cannot be opened, in every mount mode (`--kernel` file-backed and through loop
//! devices, `--mode auto`, FUSE). As root only: the archive's setuid-root shell must be
//! packed by root, and the test runs it as nobody.

use super::common::build::{chmod, mkdirs};
use super::common::nobody::{as_nobody, NOBODY};
use super::common::scratch;
use super::{ferry, fuse_here, is_mounted, must, pack};
use ferry_testkit::skip_unless_root;
use std::path::Path;
use std::process::Command;

/// `security.capability` of a file given `cap_dac_read_search` (read any file),
/// permitted and effective: a version 2 `vfs_cap_data` (magic with the effective flag,
/// then permitted and inheritable masks, low and high words).
fn cap_dac_read_search() -> Vec<u8> {
    const VFS_CAP_REVISION_2: u32 = 0x0200_0000;
    const VFS_CAP_FLAGS_EFFECTIVE: u32 = 1;
    const CAP_DAC_READ_SEARCH: u32 = 2;
    let mut v = Vec::new();
    for word in [
        VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE,
        1 << CAP_DAC_READ_SEARCH,
        0,
        0,
        0,
    ] {
        v.extend_from_slice(&word.to_le_bytes());
    }
    v
}

/// A tree with a setuid-root copy of bash and a copy of cat that may read any file.
fn privileged_tree(src: &Path) {
    mkdirs(src);
    std::fs::copy("/bin/bash", src.join("sh")).expect("copy bash");
    chmod(&src.join("sh"), 0o4755);
    std::fs::copy("/bin/cat", src.join("cat")).expect("copy cat");
    chmod(&src.join("cat"), 0o755);
    rustix::fs::setxattr(
        src.join("cat"),
        "security.capability",
        &cap_dac_read_search(),
        rustix::fs::XattrFlags::empty(),
    )
    .expect("give cat a file capability");
}

/// Runs `prog args..` as nobody; its output.
fn run_as_nobody(prog: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(prog);
    cmd.args(args);
    as_nobody(cmd)
        .expect("setpriv is needed")
        .output()
        .expect("run as nobody")
}

/// The mount options of the mount at `at`, from /proc/self/mountinfo.
fn mount_options(at: &Path) -> String {
    let at = std::fs::canonicalize(at).expect("canonical mountpoint");
    let info = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    info.lines()
        .rfind(|l| l.split(' ').nth(4) == Some(&*at.to_string_lossy()))
        .and_then(|l| l.split(' ').nth(5).map(str::to_string))
        .unwrap_or_default()
}

/// Checks that nothing in the tree mounted at `mnt` grants a privilege.
fn assert_grants_nothing(mnt: &Path, how: &str) {
    let opts = mount_options(mnt);
    for want in ["nosuid", "nodev"] {
        assert!(
            opts.split(',').any(|o| o == want),
            "{how}: mounted without {want}: {opts}"
        );
    }
    let sh = run_as_nobody(&mnt.join("sh"), &["-p", "-c", "id -u"]);
    let euid = String::from_utf8_lossy(&sh.stdout).trim().to_string();
    assert_eq!(
        euid,
        NOBODY.to_string(),
        "{how}: the archive's setuid-root shell ran as uid {euid} ({})",
        String::from_utf8_lossy(&sh.stderr)
    );
    let cat = run_as_nobody(&mnt.join("cat"), &["/etc/shadow"]);
    assert!(
        !cat.status.success() && cat.stdout.is_empty(),
        "{how}: the archive's file capability let nobody read /etc/shadow"
    );
}

#[test]
fn setuid_bits_and_file_capabilities_in_an_archive_grant_nothing_when_mounted() {
    if skip_unless_root() {
        return;
    }
    let s = scratch();
    privileged_tree(&s.src);
    // The source tree itself does grant them (else the test proves nothing).
    let sh = run_as_nobody(&s.src.join("sh"), &["-p", "-c", "id -u"]);
    assert_eq!(String::from_utf8_lossy(&sh.stdout).trim(), "0");
    chmod(s.tmp.path(), 0o755);
    let archive = s.tmp.path().join("t.far");
    let cache = s.tmp.path().join("cache");
    pack(&cache, &s.src, &archive);
    chmod(&archive, 0o644);
    let mut modes = vec![
        ("kernel", vec!["--kernel"]),
        ("kernel through loop devices", vec!["--kernel", "--loop"]),
        ("auto", vec!["--mode", "auto"]),
    ];
    if fuse_here() {
        modes.push(("fuse", vec!["--mode", "fuse", "--allow-other"]));
    }
    for (how, flags) in modes {
        let mnt = s.tmp.path().join(format!("mnt-{}", how.replace(' ', "-")));
        std::fs::create_dir_all(&mnt).expect("mountpoint");
        chmod(&mnt, 0o755);
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"mount"];
        for f in &flags {
            args.push(f);
        }
        args.push(&archive);
        args.push(&mnt);
        ferry(&cache, &args).assert_ok();
        let checked = std::panic::catch_unwind(|| assert_grants_nothing(&mnt, how));
        let _ = must(
            Command::new(super::common::run::FERRY)
                .arg("umount")
                .arg(&mnt),
        );
        assert!(!is_mounted(&mnt), "{how}: still mounted");
        if let Err(e) = checked {
            std::panic::resume_unwind(e);
        }
    }
}
