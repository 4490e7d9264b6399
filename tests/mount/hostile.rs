//! Archives that must not mount as they claim: damaged or cut short (refused at mount
//! time, naming what is wrong), and hostile member names (shown as unpack would place
//! them, `..` left out and reported, nothing outside the mountpoint).

use super::common::build::write;
use super::common::run::run_python;
use super::common::scratch;
use super::{ferry, fuse_here, pack, pack_plain_index, Mounted};
use std::os::unix::fs::FileExt;

#[test]
fn a_damaged_or_truncated_archive_is_refused_naming_it() {
    let s = scratch();
    write(&s.src.join("f"), &vec![1u8; 50_000]);
    let cache = s.tmp.path().join("cache");
    // Packed (the default), a byte of its first zstd frame changed.
    let packed = s.tmp.path().join("packed.far");
    pack(&cache, &s.src, &packed);
    let mnt = s.tmp.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir");
    let mut bytes = std::fs::read(&packed).expect("read");
    let n = bytes.len();
    let index_at = u64::from_le_bytes(bytes[n - 56..n - 48].try_into().expect("8")) as usize;
    bytes[index_at + 40] ^= 0x55;
    std::fs::write(&packed, &bytes).expect("write");
    let r = ferry(&cache, &[&"mount", &packed, &mnt]);
    r.assert_status(2);
    assert!(
        r.stderr.contains("packed.far") && r.stderr.contains("packed index"),
        "{}",
        r.stderr
    );
    std::fs::remove_dir(&mnt).expect("rmdir");
    // Stored plain, to damage its entries and table where they lie.
    let archive = s.tmp.path().join("t.far");
    pack_plain_index(&cache, &s.src, &archive);
    let len = std::fs::metadata(&archive).expect("stat").len();
    let mnt = s.tmp.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir");
    // A byte of the index's entries, or of its tree table, changed (the footer says
    // where the index is).
    let mut footer = [0u8; 64];
    std::fs::File::open(&archive)
        .and_then(|f| f.read_exact_at(&mut footer, len - 64))
        .expect("footer");
    let word = |i: usize| u64::from_le_bytes(footer[8 * i..8 * i + 8].try_into().expect("8"));
    let (index_at, index_len) = (word(1), word(2));
    for (name, at) in [
        ("entries.far", index_at + 40),
        ("table.far", index_at + index_len - 100),
    ] {
        let bad = s.tmp.path().join(name);
        std::fs::copy(&archive, &bad).expect("copy");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&bad)
            .expect("open");
        let mut byte = [0u8];
        f.read_exact_at(&mut byte, at).expect("read");
        f.write_all_at(&[byte[0] ^ 0x55], at).expect("damage");
        let r = ferry(&cache, &[&"mount", &bad, &mnt]);
        r.assert_status(2);
        assert!(
            r.stderr.contains(name) && r.stderr.contains("checksum"),
            "{}",
            r.stderr
        );
    }
    // Cut short inside a member's data.
    let short = s.tmp.path().join("short.tar");
    std::fs::copy(&archive, &short).expect("copy");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&short)
        .expect("open")
        .set_len(20_000)
        .expect("truncate");
    let r = ferry(&cache, &[&"mount", &short, &mnt]);
    r.assert_status(2);
    assert!(
        r.stderr.contains("short.tar") && r.stderr.contains("truncated"),
        "{}",
        r.stderr
    );
    assert!(
        std::fs::read_dir(&mnt).expect("list").next().is_none(),
        "something was mounted"
    );
}

#[test]
fn hostile_member_names_stay_inside_the_mount() {
    if !fuse_here() {
        return;
    }
    let s = scratch();
    let archive = s.tmp.path().join("hostile.tar");
    hostile_tar(&archive);
    let cache = s.tmp.path().join("cache");
    let m = Mounted::new(&cache, &archive, &s.tmp.path().join("mnt"));
    assert_shown_as_unpacked(&m.at);
    assert!(
        !s.tmp.path().join("escape").exists()
            && !s.tmp.path().parent().expect("up").join("escape").exists()
    );
}

/// Writes a tar with members named `../escape`, `a/../../escape2`, `/etc/abs`, one
/// below the symlink `lnk`, and the ordinary `sub/` and `ok`.
pub(super) fn hostile_tar(archive: &std::path::Path) {
    run_python(
        r#"
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    def add(name, data=b"x", kind=tarfile.REGTYPE, link=""):
        i = tarfile.TarInfo(name); i.type = kind; i.linkname = link; i.size = len(data) if kind == tarfile.REGTYPE else 0
        t.addfile(i, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    add("../escape", b"out")
    add("a/../../escape2", b"out")
    add("/etc/abs", b"absolute")
    add("sub", kind=tarfile.DIRTYPE)
    add("lnk", kind=tarfile.SYMTYPE, link="/etc")
    add("lnk/through", b"through the link")
    add("ok", b"fine")
"#,
        archive,
    );
}

/// Checks that the mount at `at` of [`hostile_tar`] shows what `unpack` would place:
/// `etc/abs`, `lnk`, `ok` and `sub`, nothing more.
pub(super) fn assert_shown_as_unpacked(at: &std::path::Path) {
    let mut names: Vec<String> = std::fs::read_dir(at)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["etc", "lnk", "ok", "sub"]);
    assert_eq!(
        std::fs::read(at.join("etc/abs")).expect("read"),
        b"absolute"
    );
    assert_eq!(std::fs::read(at.join("ok")).expect("read"), b"fine");
    assert_eq!(
        std::fs::read_link(at.join("lnk")).expect("link").to_str(),
        Some("/etc")
    );
}
