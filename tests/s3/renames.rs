//! Renamed and moved files through Garage: a rerun finds each where the last upload
//! stored it (same metadata, same content hash) and sends nothing of it; the new
//! snapshot reads back, lists, cats and mounts them under their new names, the older
//! one under the old; a copy whose original stays, and a file of the same metadata
//! whose content differs, are sent; compaction moves renamed files on, and a manifest
//! that says a shard stores another name than it does is refused, naming the member.

use crate::common::build::*;
use crate::common::compare::{assert_same_tree_with, Options};
use crate::common::mounted::Mounted;
use crate::common::scratch;
use crate::garage::Garage;
use crate::s;
use crate::snapshots::keep_as_it_is;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

const KIB: usize = 1 << 10;

/// Eight files of 512 KiB in `d`, one of 200 KiB with a non-UTF-8 name, one of
/// 300 KiB three levels down, a few small ones.
fn tree(src: &Path) {
    mkdirs(&src.join("d"));
    for i in 0..8u64 {
        write(&src.join(format!("d/a{i}")), &pattern(i + 10, 512 * KIB));
    }
    write(
        &src.join(OsStr::from_bytes(b"n\xff")),
        &pattern(30, 200 * KIB),
    );
    mkdirs(&src.join("x/y"));
    write(&src.join("x/y/z"), &pattern(40, 300 * KIB));
    mkdirs(&src.join("s"));
    for i in 0..5u64 {
        write(&src.join(format!("s/t{i}")), &pattern(i + 50, 700));
    }
    stamp_times(src);
}

/// Renames and moves (five files), a copy, a file rewritten in place keeping its size
/// and mtime, two deletions. Returns the bytes a rerun must send at least.
fn rename_and_move(src: &Path) -> u64 {
    let mv = |a: &str, b: &str| std::fs::rename(src.join(a), src.join(b)).expect("rename");
    mv("d/a1", "d/b1");
    mkdirs(&src.join("new/deep"));
    mv("d/a2", "new/deep/a2");
    std::fs::rename(
        src.join(OsStr::from_bytes(b"n\xff")),
        src.join(OsStr::from_bytes(b"m\xfe")),
    )
    .expect("rename");
    mv("x", "w");
    // Renamed, and a new file where it was.
    mv("d/a3", "d/c3");
    write(&src.join("d/a3"), &pattern(99, 100 * KIB));
    // A copy of a file that stays where it is (cp -a keeps its metadata).
    let cp = std::process::Command::new("cp")
        .args(["-a", s(&src.join("d/a4")), s(&src.join("d/copy4"))])
        .status()
        .expect("cp");
    assert!(cp.success());
    // Renamed and rewritten, its size and times kept: only the hash tells.
    let before = std::fs::metadata(src.join("d/a5")).expect("stat");
    mv("d/a5", "d/b5");
    write(&src.join("d/b5"), &pattern(77, 512 * KIB));
    restore_times(&src.join("d/b5"), &before);
    std::fs::remove_file(src.join("d/a6")).expect("rm");
    std::fs::remove_file(src.join("d/a7")).expect("rm");
    // The new a3, the copy and the rewritten b5.
    (100 + 512 + 512) as u64 * KIB as u64
}

/// The bytes of the shard objects `after` has and `before` had not.
fn written(
    before: &std::collections::BTreeMap<String, u64>,
    after: &std::collections::BTreeMap<String, u64>,
) -> u64 {
    let new = after.iter().filter(|(k, _)| !before.contains_key(*k));
    new.filter(|(k, _)| k.contains("/shards/") && k.ends_with(".far"))
        .map(|(_, n)| n)
        .sum()
}

#[test]
fn renamed_and_moved_files_are_kept_where_they_are_and_read_back_under_their_new_names() {
    if !crate::common::fuse_here() {
        return;
    }
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    tree(&sc.src);
    let url = g.url("ren");
    let up = ["--shard-size", "2M"];
    g.ferry(&[&["copy", s(&sc.src), &url][..], &up].concat())
        .assert_ok();
    let then = sc.tmp.path().join("then");
    keep_as_it_is(&sc.src, &then);
    let least = rename_and_move(&sc.src);
    let before = g.sizes("ren/");
    let rerun = g.ferry(&[&["copy", s(&sc.src), &url][..], &up].concat());
    rerun.assert_ok();
    let renamed = (512 + 512 + 200 + 300 + 512) * KIB;
    assert!(
        rerun.stderr.contains(&format!(
            "of which 5 files renamed or moved, {renamed} bytes)"
        )),
        "{rerun}"
    );
    // In the format a ferry that knows no renamed members refuses (not FORMAT_V2).
    let newest = g.get(&g.newest_manifest_key("ren"));
    let manifest = ferry_s3::manifest::Manifest::decode(&newest, "manifest").expect("manifest");
    assert_eq!(manifest.format, ferry_s3::manifest::FORMAT);
    // What changed, with its headers and the directories; none of the 2 MiB renamed.
    let sent = written(&before, &g.sizes("ren/"));
    assert!(
        sent >= least && sent < least + 192 * KIB as u64,
        "{sent}: {rerun}"
    );

    let no_atime = Options {
        skip_atime: true,
        ..Options::default()
    };
    g.ferry(&["copy", "--verify", &url, s(&sc.dst)]).assert_ok();
    assert_same_tree_with(&sc.src, &sc.dst, &no_atime);
    let names: Vec<String> = {
        let ls = g.ferry(&["ls", "--snapshots", &url]);
        ls.assert_ok();
        let first = |l: &str| l.split_whitespace().next().expect("name").to_string();
        ls.stdout.lines().map(first).collect()
    };
    let older = format!("{url}@{}", names[0]);
    let back = sc.tmp.path().join("back");
    g.ferry(&["copy", "--verify", &older, s(&back)]).assert_ok();
    assert_same_tree_with(&then, &back, &no_atime);
    // ls names the new paths; cat reads a moved file by its new name, cold and warm.
    let ls = g.ferry(&["ls", &url]);
    ls.assert_ok();
    assert!(
        ls.stdout.contains("w/y/z") && !ls.stdout.contains("x/y/z"),
        "{ls}"
    );
    for _ in 0..2 {
        let cat = g.command(&["cat", &url, "w/y/z"]).output().expect("cat");
        assert!(cat.status.success(), "{cat:?}");
        assert!(cat.stdout == pattern(40, 300 * KIB));
    }
    let old_name = g.command(&["cat", &url, "x/y/z"]).output().expect("cat");
    assert!(!old_name.status.success());
    {
        let m = Mounted::new(&g, &url, &sc.tmp.path().join("mnt"), &[]);
        assert_same_tree_with(&sc.src, &m.at, &no_atime);
    }

    // Nothing changed: nothing sent, the renamed files kept as they are named now.
    let before = g.sizes("ren/");
    let same = g.ferry(&[&["copy", s(&sc.src), &url][..], &up].concat());
    same.assert_ok();
    assert!(same.stderr.contains(": 0 sent (0 bytes)"), "{same}");
    assert!(!same.stderr.contains("renamed or moved"), "{same}");
    assert_eq!(written(&before, &g.sizes("ren/")), 0);
    // Renamed back: found again, and stored under its own name once more.
    std::fs::rename(sc.src.join("d/b1"), sc.src.join("d/a1")).expect("rename");
    let back_again = g.ferry(&[&["copy", s(&sc.src), &url][..], &up].concat());
    back_again.assert_ok();
    assert!(
        back_again
            .stderr
            .contains("of which 1 files renamed or moved"),
        "{back_again}"
    );

    // Keep the newest alone: the shard that held only dead files and the renamed one
    // is compacted, the renamed file moved on; all reads back as it is.
    let pruned = g.ferry(&["prune", "--keep", "1", &url]);
    pruned.assert_ok();
    assert!(pruned.stderr.contains("compacted"), "{pruned}");
    let again = sc.tmp.path().join("again");
    g.ferry(&["copy", "--verify", &url, s(&again)]).assert_ok();
    assert_same_tree_with(&sc.src, &again, &no_atime);
    let m = Mounted::new(&g, &url, &sc.tmp.path().join("mnt"), &[]);
    assert_same_tree_with(&sc.src, &m.at, &no_atime);
}

#[test]
fn a_manifest_naming_a_stored_file_that_is_not_there_is_refused() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    write(&sc.src.join("f"), &pattern(1, 300 * KIB));
    write(&sc.src.join("other"), b"other");
    let url = g.url("lie");
    g.ferry(&["copy", s(&sc.src), &url]).assert_ok();
    // The manifest says `other` is `g`, stored as `elsewhere`: the shard stores it as
    // `other`.
    let key = g.newest_manifest_key("lie");
    let mut manifest =
        ferry_s3::manifest::Manifest::decode(&g.get(&key), "manifest").expect("manifest");
    let member = manifest.shards[0]
        .members
        .iter_mut()
        .find(|m| m.path() == b"other")
        .expect("other");
    (member.p, member.sp) = (Some("g".into()), Some("elsewhere".into()));
    g.put(&key, manifest.encode());
    g.forget_cached_manifests();
    let r = g.ferry(&["copy", &url, s(&sc.dst)]);
    r.assert_status(1);
    assert!(
        r.stderr.contains("where the manifest places elsewhere"),
        "{r}"
    );
    assert!(!sc.dst.join("g").exists() && !sc.dst.join("other").exists());
    let cat = g.ferry(&["cat", &url, "g"]);
    assert!(
        cat.stderr.contains("g: in s3://") && cat.stderr.contains("has another name"),
        "{cat}"
    );
}
