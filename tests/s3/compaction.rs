//! Compaction through Garage: after most of every shard has changed, `prune --keep 1`
//! copies the live members of the sparse shards into new ones and writes the kept
//! snapshot again, so the prefix holds about what a fresh upload of the tree would;
//! a mount open meanwhile reads on (no shard is deleted while its lease holds), a warm
//! `cat` follows the rewritten snapshot, and a prune killed before it wrote the
//! snapshot again finishes on its rerun.

use crate::common::build::*;
use crate::common::compare::{assert_same_tree_with, Options};
use crate::common::scratch;
use crate::garage::Garage;
use crate::s;
use std::path::Path;
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;

/// 24 files of 1 MiB, a few small ones and a symlink.
fn tree(src: &Path) {
    mkdirs(&src.join("m"));
    for i in 0..24u64 {
        write(&src.join(format!("m/f{i:03}")), &pattern(i + 100, MIB));
    }
    mkdirs(&src.join("small"));
    for i in 0..6u64 {
        write(
            &src.join(format!("small/s{i}")),
            &pattern(i, 300 + i as usize),
        );
    }
    symlink("../m/f000", &src.join("small/link"));
    stamp_times(src);
}

/// Three files in every four rewritten: every shard of 6 MiB keeps one or two.
fn rewrite_most(src: &Path) {
    for i in (0..24u64).filter(|i| i % 4 != 0) {
        write(&src.join(format!("m/f{i:03}")), &pattern(i + 500, MIB));
    }
}

/// The tree uploaded to `url` in shards of 6 MiB, most of it rewritten, and uploaded
/// again: every shard of the first upload is sparse. The upload's arguments.
fn two_uploads(g: &Garage, src: &Path, url: &str) -> [&'static str; 2] {
    let up = ["--shard-size", "6M"];
    tree(src);
    g.ferry(&[&["copy", s(src), url][..], &up].concat())
        .assert_ok();
    rewrite_most(src);
    g.ferry(&[&["copy", s(src), url][..], &up].concat())
        .assert_ok();
    up
}

fn total(sizes: &std::collections::BTreeMap<String, u64>) -> u64 {
    sizes.values().sum()
}

/// The shard objects under `prefix`.
fn shard_keys(g: &Garage, prefix: &str) -> Vec<String> {
    g.list(&format!("{prefix}/shards"))
        .into_iter()
        .filter(|k| k.ends_with(".far"))
        .collect()
}

#[test]
fn compaction_keeps_the_prefix_near_the_trees_size_and_readers_reading() {
    if !crate::common::fuse_here() {
        return;
    }
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    let url = g.url("cmp");
    let up = two_uploads(&g, &sc.src, &url);
    let fresh = g.url("fresh");
    g.ferry(&[&["copy", s(&sc.src), &fresh][..], &up].concat())
        .assert_ok();
    let packed = total(&g.sizes("fresh/"));
    // A warm cat of a member compaction will move.
    let cat = |path: &str| g.command(&["cat", &url, path]).output().expect("cat");
    assert_eq!(cat("m/f004").stdout, pattern(104, MIB));
    let no_atime = Options {
        skip_atime: true,
        ..Options::default()
    };
    let newest_key = g.newest_manifest_key("cmp");
    let (before, pointer) = (g.get(&newest_key), g.get("cmp/manifest.ferry"));
    let old_shards = shard_keys(&g, "cmp");

    // A dry run says what it would do and does nothing.
    let dry = g.ferry(&["prune", "-n", "--keep", "1", "--shard-size", "6M", &url]);
    dry.assert_ok();
    assert!(dry.stderr.contains("would compact"), "{dry}");
    assert_eq!(shard_keys(&g, "cmp"), old_shards);

    // A mount of the newest is open: its lease keeps every shard in place.
    let at = sc.tmp.path().join("mnt");
    {
        let m = crate::common::mounted::Mounted::new(&g, &url, &at, &[]);
        let pruned = g.ferry(&["prune", "--keep", "1", "--shard-size", "6M", &url]);
        pruned.assert_ok();
        assert!(
            pruned.stderr.contains("sparse shards compacted"),
            "{pruned}"
        );
        assert!(
            pruned.stderr.contains("1 snapshots written again"),
            "{pruned}"
        );
        assert!(
            pruned.stderr.contains("dead shards left while a reader"),
            "{pruned}"
        );
        let now = shard_keys(&g, "cmp");
        assert!(old_shards.iter().all(|k| now.contains(k)), "{pruned}");
        assert_same_tree_with(&sc.src, &m.at, &no_atime);
    }
    // The mount's lease goes with it.
    let start = Instant::now();
    while !g.list("cmp/leases").is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the lease stayed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The warm cat finds the member where it is now.
    assert_ne!(g.get("cmp/manifest.ferry"), pointer);
    assert_eq!(cat("m/f004").stdout, pattern(104, MIB));
    let compacted = shard_keys(&g, "cmp");

    // As if a prune had been killed after writing the new shards, before the snapshot:
    // the rerun finds them, writes the snapshot again and deletes what is dead.
    g.put(&newest_key, before);
    g.put("cmp/manifest.ferry", pointer);
    let rerun = g.ferry(&["prune", "--keep", "1", "--shard-size", "6M", &url]);
    rerun.assert_ok();
    assert!(!rerun.stderr.contains("left while"), "{rerun}");
    let kept = shard_keys(&g, "cmp");
    assert!(kept.iter().all(|k| compacted.contains(k)), "{rerun}");
    assert!(kept.len() < old_shards.len(), "{rerun}");
    let stored = total(&g.sizes("cmp/"));
    assert!(
        stored * 2 <= packed * 3,
        "{stored} bytes kept for a tree a fresh upload packs into {packed}: {rerun}"
    );
    // Nothing more to do.
    let again = g.ferry(&["prune", "--keep", "1", "--shard-size", "6M", &url]);
    again.assert_ok();
    assert!(again.stderr.contains("0 objects"), "{again}");
    assert!(!again.stderr.contains("compacted"), "{again}");

    // Read back every way.
    g.ferry(&["copy", "--verify", &url, s(&sc.dst)]).assert_ok();
    assert_same_tree_with(&sc.src, &sc.dst, &no_atime);
    let m = crate::common::mounted::Mounted::new(&g, &url, &at, &[]);
    assert_same_tree_with(&sc.src, &m.at, &no_atime);
    drop(m);
    g.forget_cached_manifests();
    assert_eq!(cat("m/f008").stdout, pattern(108, MIB));
    assert_eq!(cat("small/s3").stdout, pattern(3, 303));
    // A rerun of the upload after it finds every member where it is.
    let rerun = g.ferry(&[&["copy", "--json", s(&sc.src), &url][..], &up].concat());
    rerun.assert_ok();
    assert_eq!(rerun.json().count("skipped"), 31, "{rerun}");
}

#[test]
fn a_shard_replaced_since_its_manifest_is_not_compacted_and_stays() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    let url = g.url("replaced");
    two_uploads(&g, &sc.src, &url);
    // One shard the newest names some members of, replaced by other bytes of its
    // length: its ETag is not the manifest's, so nothing of it is copied, and it is
    // not taken for dead.
    let newest = g.get(&g.newest_manifest_key("replaced"));
    let m = ferry_s3::manifest::Manifest::decode(&newest, "newest").expect("manifest");
    let sparse = m
        .shards
        .iter()
        .find(|s| !s.whole())
        .expect("a sparse shard");
    let victim = &format!("replaced/{}", sparse.name());
    let len = g.get(victim).len();
    g.put(victim, vec![0x55; len]);
    let pruned = g.ferry(&["prune", "--keep", "1", "--shard-size", "6M", &url]);
    pruned.assert_ok();
    assert!(
        pruned.stderr.contains(victim.as_str()) && pruned.stderr.contains("not compacted"),
        "{pruned}"
    );
    assert!(shard_keys(&g, "replaced").contains(victim), "{pruned}");
    // The others were compacted; the download names the replaced shard.
    assert!(
        pruned.stderr.contains("sparse shards compacted"),
        "{pruned}"
    );
    let back = g.ferry(&["copy", &url, s(&sc.dst)]);
    assert!(back.stderr.contains("its ETag differs"), "{back}");
}
