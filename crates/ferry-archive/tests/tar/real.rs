//! Archives made by the real GNU tar and bsdtar, in every format they write, read back
//! and checked field by field against the source tree.

use ferry_archive::tar::TarKind;

use crate::check::{check_archive, relative, Expect, Nanos};
use crate::common::{have, make_archive, run};
use crate::tree::{self, Tree};

/// Whether `tar` is GNU tar.
fn have_gnu_tar() -> bool {
    if !have("tar") {
        return false;
    }
    let version = run(std::path::Path::new("."), "tar", &["--version"]);
    let gnu = String::from_utf8_lossy(&version).contains("GNU tar");
    if !gnu {
        ferry_testkit::skip("tar is not GNU tar");
    }
    gnu
}

/// GNU tar's archive of `tree` with `args`.
fn gnu(tree: &Tree, args: &[&str]) -> Vec<u8> {
    let mut all = vec!["--sort=name"];
    all.extend(args);
    make_archive(&tree.root, "tar", &all)
}

/// bsdtar's archive of `tree` with `args`.
fn bsd(tree: &Tree, args: &[&str]) -> Vec<u8> {
    make_archive(&tree.root, "bsdtar", args)
}

const USTAR: Expect = Expect {
    nanos: Nanos::Zero,
    negative_times: true,
    xattrs: false,
    names: true,
    sparse: false,
};
const PAX: Expect = Expect {
    nanos: Nanos::Exact,
    xattrs: true,
    ..USTAR
};
/// bsdtar writes a pax header only where needed, so nanoseconds only there.
const BSD_PAX: Expect = Expect {
    nanos: Nanos::Some,
    ..PAX
};

#[test]
fn gnu_tar_gnu_format() {
    if have_gnu_tar() {
        let t = tree::full();
        let entries = check_archive(&gnu(&t, &["--format=gnu"]), &t, USTAR);
        assert_has_kinds(&entries, t.devices);
    }
}

/// GNU tar's incremental archives store each directory as a `D` entry whose data lists
/// the names it held: read as directories, that data skipped, as GNU tar does without
/// `--listed-incremental` and as bsdtar does.
#[test]
fn gnu_tar_incremental_format() {
    if have_gnu_tar() {
        let t = tree::full();
        let snapshot = tempfile::tempdir().expect("tempdir");
        let snapshot = snapshot.path().join("snapshot");
        let listed = format!("--listed-incremental={}", snapshot.display());
        let archive = gnu(&t, &["--format=gnu", &listed]);
        let entries = check_archive(&archive, &t, USTAR);
        assert_has_kinds(&entries, t.devices);
        assert!(
            archive
                .chunks(512)
                .any(|h| h[156] == b'D' && h[124..136] != *b"00000000000\0"),
            "no incremental directory with names in the archive"
        );
    }
}

#[test]
fn gnu_tar_oldgnu_format() {
    if have_gnu_tar() {
        let t = tree::full();
        check_archive(&gnu(&t, &["--format=oldgnu"]), &t, USTAR);
    }
}

#[test]
fn gnu_tar_ustar_format() {
    if have_gnu_tar() {
        let t = tree::basic();
        let entries = check_archive(&gnu(&t, &["--format=ustar"]), &t, USTAR);
        assert_has_kinds(&entries, t.devices);
    }
}

#[test]
fn gnu_tar_v7_format() {
    if have_gnu_tar() {
        let t = tree::v7();
        check_archive(
            &gnu(&t, &["--format=v7"]),
            &t,
            Expect {
                names: false,
                ..USTAR
            },
        );
    }
}

#[test]
fn gnu_tar_posix_format_with_xattrs() {
    if have_gnu_tar() {
        let t = tree::full();
        let archive = gnu(
            &t,
            &["--format=posix", "--xattrs", "--xattrs-include=user.*"],
        );
        let entries = check_archive(&archive, &t, PAX);
        assert_has_kinds(&entries, t.devices);
        let a = entries
            .iter()
            .find(|e| relative(&e.path) == b"d/a.txt")
            .unwrap();
        assert!(a.pax.iter().any(|(k, _)| k == b"SCHILY.xattr.user.bin"));
    }
}

#[test]
fn gnu_tar_posix_global_header_applies_to_all() {
    if have_gnu_tar() {
        let t = tree::basic();
        let archive = gnu(&t, &["--format=posix", "--pax-option=comment=hi,uname=bob"]);
        let entries = check_archive(
            &archive,
            &t,
            Expect {
                names: false,
                ..PAX
            },
        );
        assert!(entries.len() > 5);
        for e in &entries {
            assert_eq!(e.uname.as_deref(), Some(&b"bob"[..]), "{:?}", e.path);
            assert!(e.pax.contains(&(b"comment".to_vec(), b"hi".to_vec())));
        }
        assert!(
            entries[0].header_offset >= 1024,
            "the global header is not the entry's"
        );
    }
}

#[test]
fn gnu_tar_sparse_old_gnu() {
    for format in ["--format=gnu", "--format=oldgnu"] {
        if have_gnu_tar() {
            let t = tree::sparse();
            let entries = check_archive(&gnu(&t, &[format, "--sparse"]), &t, SPARSE);
            assert_sparse_entries(&entries);
        }
    }
}

const SPARSE: Expect = Expect {
    sparse: true,
    ..USTAR
};

#[test]
fn gnu_tar_sparse_pax() {
    for version in ["0.0", "0.1", "1.0"] {
        if have_gnu_tar() {
            let t = tree::sparse();
            let v = format!("--sparse-version={version}");
            let archive = gnu(&t, &["--format=posix", "--sparse", &v]);
            let entries = check_archive(
                &archive,
                &t,
                Expect {
                    nanos: Nanos::Exact,
                    ..SPARSE
                },
            );
            assert_sparse_entries(&entries);
        }
    }
}

#[test]
fn bsdtar_default_format() {
    if have("bsdtar") {
        let t = tree::full();
        let entries = check_archive(
            &bsd(&t, &[]),
            &t,
            Expect {
                sparse: true,
                ..BSD_PAX
            },
        );
        assert_has_kinds(&entries, t.devices);
        let a = entries
            .iter()
            .find(|e| relative(&e.path) == b"d/a.txt")
            .unwrap();
        assert!(a
            .pax
            .iter()
            .any(|(k, _)| k.starts_with(b"LIBARCHIVE.xattr.")));
    }
}

#[test]
fn bsdtar_pax_format() {
    if have("bsdtar") {
        let t = tree::full();
        check_archive(&bsd(&t, &["--format=pax"]), &t, BSD_PAX);
    }
}

#[test]
fn bsdtar_sparse() {
    if have("bsdtar") {
        let t = tree::sparse();
        let entries = check_archive(
            &bsd(&t, &["--format=pax"]),
            &t,
            Expect {
                nanos: Nanos::Some,
                ..SPARSE
            },
        );
        assert_sparse_entries(&entries);
    }
}

#[test]
fn bsdtar_gnutar_format() {
    if have("bsdtar") {
        let t = tree::full();
        check_archive(
            &bsd(&t, &["--format=gnutar"]),
            &t,
            Expect {
                negative_times: false,
                ..USTAR
            },
        );
    }
}

#[test]
fn bsdtar_ustar_format() {
    if have("bsdtar") {
        let t = tree::basic();
        check_archive(&bsd(&t, &["--format=ustar"]), &t, USTAR);
    }
}

#[test]
fn bsdtar_v7_format() {
    if have("bsdtar") {
        let t = tree::v7();
        check_archive(
            &bsd(&t, &["--format=v7"]),
            &t,
            Expect {
                names: false,
                ..USTAR
            },
        );
    }
}

/// Every kind of entry is there.
fn assert_has_kinds(entries: &[ferry_archive::tar::TarEntry], devices: bool) {
    let mut kinds = vec![
        TarKind::File,
        TarKind::Dir,
        TarKind::Symlink,
        TarKind::HardLink,
        TarKind::Fifo,
    ];
    if devices {
        kinds.extend([TarKind::CharDevice, TarKind::BlockDevice]);
    }
    for kind in kinds {
        assert!(entries.iter().any(|e| e.kind == kind), "no {kind:?} entry");
    }
}

/// The sparse files came as sparse entries, and the 60-run file has many runs.
fn assert_sparse_entries(entries: &[ferry_archive::tar::TarEntry]) {
    let find = |name: &[u8]| entries.iter().find(|e| relative(&e.path) == name).unwrap();
    assert!(find(b"many").sparse.as_ref().unwrap().len() >= 30);
    assert_eq!(find(b"all_hole").sparse.as_deref(), Some(&[][..]));
    assert_eq!(find(b"all_hole").stored, 0);
    assert_eq!(find(b"hole_start").size, 3 << 20);
}
