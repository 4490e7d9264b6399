//! The comparer must be able to fail: two trees built the same way compare equal, and
//! each single change to one of them (a mode bit, a nanosecond, a byte, an xattr, a
//! hardlink...) is reported, naming the path and the field. And a mount guard
//! unmounts even when its test panics.

use crate::common::build::*;
use crate::common::compare::diff_trees;
use crate::common::mount::mount_image;
use crate::common::{is_root, scratch, trees, Scratch};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Two identical trees (with root-only entries when root) in `src` and `dst`.
fn twins() -> Scratch {
    let s = scratch();
    for root in [&s.src, &s.dst] {
        trees::mixed(root);
        if is_root() {
            trees::root_extras(root);
        }
    }
    s
}

/// Runs `change` with the times of `paths` saved before and put back after, so one
/// change shows as one difference.
fn keeping_times(paths: &[&Path], change: impl FnOnce()) {
    let saved: Vec<_> = paths
        .iter()
        .map(|p| {
            let m = std::fs::symlink_metadata(p).unwrap();
            (ts(m.atime(), m.atime_nsec()), ts(m.mtime(), m.mtime_nsec()))
        })
        .collect();
    change();
    for (p, (atime, mtime)) in paths.iter().zip(saved) {
        set_times(p, atime, mtime);
    }
}

/// Adds `delta_ns` nanoseconds to the mtime of `path` (not following a symlink).
fn nudge_mtime(path: &Path, delta_ns: i64) {
    let m = std::fs::symlink_metadata(path).unwrap();
    set_times(
        path,
        ts(m.atime(), m.atime_nsec()),
        ts(m.mtime(), m.mtime_nsec() + delta_ns),
    );
}

/// Makes twins, applies `change` to the second, and checks that the comparer reports
/// a difference containing each of `expected`.
fn reports(expected: &[&str], change: impl FnOnce(&Path)) {
    let s = twins();
    change(&s.dst);
    let diffs = diff_trees(&s.src, &s.dst);
    for want in expected {
        assert!(
            diffs.iter().any(|d| d.contains(want)),
            "comparer missed {want:?}; it reported: {diffs:#?}"
        );
    }
}

#[test]
fn identical_trees_have_no_differences() {
    let s = twins();
    assert_eq!(diff_trees(&s.src, &s.dst), Vec::<String>::new());
}

#[test]
fn reports_a_mode_bit() {
    reports(&["size4096: mode: SRC \"644\" != DST \"645\""], |b| {
        chmod(&b.join("size4096"), 0o645)
    });
}

#[test]
fn reports_a_lost_setuid_bit() {
    reports(&["setuid: mode: SRC \"4755\" != DST \"755\""], |b| {
        chmod(&b.join("setuid"), 0o755)
    });
}

#[test]
fn reports_one_nanosecond_of_mtime_on_every_kind() {
    let changed = ["one", "a/b", "link_rel", "fifo", "."];
    let expected: Vec<String> = changed.iter().map(|p| format!("{p}: mtime")).collect();
    let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    reports(&expected, |b| {
        for p in changed {
            nudge_mtime(&b.join(p), 1);
        }
    });
}

#[test]
fn reports_atime_of_a_file() {
    reports(&["one: atime"], |b| {
        let p = b.join("one");
        let m = std::fs::symlink_metadata(&p).unwrap();
        set_times(
            &p,
            ts(m.atime() + 1, m.atime_nsec()),
            ts(m.mtime(), m.mtime_nsec()),
        );
    });
}

#[test]
fn reports_one_changed_byte() {
    let size = trees::SIZES[5];
    reports(
        &[&format!("size{size}: content differs at byte {}", size - 2)],
        |b| {
            let p = b.join(format!("size{size}"));
            keeping_times(&[&p], || {
                let mut data = std::fs::read(&p).unwrap();
                data[size - 2] ^= 1;
                write(&p, &data);
            });
        },
    );
}

#[test]
fn reports_data_where_the_source_has_a_hole() {
    // Holes both files share are skipped, not read: a byte in one of them still counts.
    let s = twins();
    sparse_file(&s.src.join("sparse"), 64 << 20, &[(1 << 20, b"data")]);
    sparse_file(
        &s.dst.join("sparse"),
        64 << 20,
        &[(1 << 20, b"data"), (40 << 20, b"!")],
    );
    let want = format!("sparse: content differs at byte {}", 40 << 20);
    let diffs = diff_trees(&s.src, &s.dst);
    assert!(diffs.iter().any(|d| d.contains(&want)), "{diffs:#?}");
}

#[test]
fn reports_a_size() {
    reports(&["size4097: size: SRC \"4097\" != DST \"4096\""], |b| {
        let p = b.join("size4097");
        keeping_times(&[&p], || {
            std::fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .unwrap()
                .set_len(4096)
                .unwrap()
        });
    });
}

#[test]
fn reports_xattr_changes() {
    reports(
        &[
            "one: xattr user.test",
            "a: xattr user.dir: SRC Some(\"on a directory\") != DST None",
        ],
        |b| {
            set_xattr(&b.join("one"), "user.test", b"valuE");
            rustix::fs::lremovexattr(b.join("a"), "user.dir").unwrap();
        },
    );
}

#[test]
fn reports_a_broken_hardlink() {
    reports(
        &["a/hard2: hardlink: shares an inode with a/b/hard3 in SRC but not in DST"],
        |b| {
            let (p, dir) = (b.join("a/b/hard3"), b.join("a/b"));
            keeping_times(&[&dir], || {
                std::fs::remove_file(&p).unwrap();
                std::fs::copy(b.join("hard1"), &p).unwrap();
            });
        },
    );
}

#[test]
fn reports_a_hardlink_that_should_not_be() {
    reports(
        &["twin_b: hardlink: shares an inode with twin_a in DST but not in SRC"],
        |b| {
            keeping_times(&[b], || {
                std::fs::remove_file(b.join("twin_b")).unwrap();
                hardlink(&b.join("twin_a"), &b.join("twin_b"));
            });
        },
    );
}

#[test]
fn reports_a_symlink_target() {
    reports(
        &["link_rel: symlink target: SRC Some(\"one\") != DST Some(\"two\")"],
        |b| {
            let p = b.join("link_rel");
            keeping_times(&[b], || {
                std::fs::remove_file(&p).unwrap();
                symlink("two", &p);
            });
        },
    );
}

#[test]
fn reports_a_kind() {
    reports(&["fifo: kind: SRC \"fifo\" != DST \"file\""], |b| {
        keeping_times(&[b], || {
            std::fs::remove_file(b.join("fifo")).unwrap();
            write(&b.join("fifo"), b"");
        });
    });
}

#[test]
fn reports_missing_and_extra_entries() {
    reports(&["empty: missing in DST", "a/b/c/new: extra in DST"], |b| {
        std::fs::remove_file(b.join("empty")).unwrap();
        write(&b.join("a/b/c/new"), b"");
    });
}

#[test]
fn reports_owner_and_device_number() {
    if crate::common::skip_unless_root() {
        return;
    }
    let expected = [
        "rootonly/owned: uid: SRC \"1234\" != DST \"1\"",
        "rootonly/owned: gid",
        "rootonly/null_like: rdev",
    ];
    reports(&expected, |b| {
        let r = b.join("rootonly");
        chown(&r.join("owned"), 1, 2);
        keeping_times(&[&r], || {
            std::fs::remove_file(r.join("null_like")).unwrap();
            device(
                &r.join("null_like"),
                rustix::fs::FileType::CharacterDevice,
                1,
                5,
            );
        });
    });
}

#[test]
fn a_mount_guard_unmounts_when_its_test_panics() {
    let mounted = match mount_image(32 << 20, "mkfs.ext4", &["-q"]) {
        Ok(m) => m,
        Err(why) => return crate::common::skip(&why),
    };
    let mnt = mounted.path().to_path_buf();
    let mounted_now = || {
        let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        table
            .lines()
            .any(|l| l.split(' ').nth(4) == Some(mnt.to_str().unwrap()))
    };
    assert!(mounted_now(), "{} should be mounted", mnt.display());
    let failed = std::panic::catch_unwind(move || {
        let _guard = mounted;
        panic!("a test failing while it holds a mount (expected)");
    });
    assert!(failed.is_err());
    assert!(!mounted_now(), "{} is still mounted", mnt.display());
}
