//! A download checks every shard against the manifest: a shard (its ETag named by the
//! manifest, as if the bucket's owner had rewritten both) that holds a member the
//! manifest does not name, or of another kind, or lacks one it names, is refused
//! member by member: one error line a path, exit status 1, nothing unnamed made in the
//! destination and nothing outside it.

use crate::common::build::*;
use crate::common::scratch;
use crate::garage::Garage;
use crate::mount::{name_current_etags, shard_holding};
use crate::s;
use std::path::Path;
use std::process::Command;

/// A GNU tar of `dir`'s members `names`, in that order, padded with zeros to `len`.
fn tar_of(dir: &Path, names: &[&str], len: usize) -> Vec<u8> {
    let out = Command::new("tar")
        .args(["-c", "--format=gnu", "-C"])
        .arg(dir)
        .args(names)
        .output()
        .expect("tar");
    assert!(out.status.success(), "tar: {out:?}");
    let mut tar = out.stdout;
    assert!(tar.len() <= len, "{} bytes, the shard has {len}", tar.len());
    tar.resize(len, 0);
    tar
}

/// The tree uploaded: `f` and its second name `g` in one shard.
fn uploaded(g: &Garage, prefix: &str) -> (crate::common::Scratch, String) {
    let sc = scratch();
    write(&sc.src.join("f"), &vec![5u8; 300_000]);
    hardlink(&sc.src.join("f"), &sc.src.join("g"));
    write(&sc.src.join("other"), b"other");
    let url = g.url(prefix);
    g.ferry(&["copy", s(&sc.src), &url, "--shard-size", "256K"])
        .assert_ok();
    (sc, url)
}

#[test]
fn a_shard_with_a_symlink_the_manifest_does_not_name_and_without_a_hardlink_it_does() {
    let Some(g) = Garage::start() else { return };
    let (sc, url) = uploaded(&g, "evil");
    let (key, original, _) = shard_holding(&g, "evil", 5, 300_000);
    // The crafted shard: f as it was, and a symlink `evil` to /etc; no g.
    let craft = sc.tmp.path().join("craft");
    mkdirs(&craft);
    write(&craft.join("f"), &vec![5u8; 300_000]);
    symlink("/etc", &craft.join("evil"));
    g.put(&key, tar_of(&craft, &["f", "evil"], original.len()));
    name_current_etags(&g, "evil");
    let r = g.ferry(&["copy", &url, s(&sc.dst)]);
    r.assert_status(1);
    let errors = r.errors();
    let naming = |p: &str| {
        errors
            .iter()
            .filter(|l| l.contains(&format!("/dst/{p}: download: s3://")))
            .count()
    };
    assert_eq!(naming("evil"), 1, "{r}");
    assert_eq!(naming("g"), 1, "{r}");
    assert!(
        errors.iter().any(|l| l.contains("evil")
            && l.contains("a symlink in the shard that the manifest does not name")),
        "{r}"
    );
    assert!(
        errors
            .iter()
            .any(|l| l.contains("a hardlink the manifest names, not in the shard")),
        "{r}"
    );
    assert!(
        std::fs::symlink_metadata(sc.dst.join("evil")).is_err(),
        "{r}"
    );
    assert!(!sc.tmp.path().join("etc").exists());
    // The other shards still came.
    assert_eq!(
        std::fs::read(sc.dst.join("other")).expect("other"),
        b"other"
    );
}

#[test]
fn a_named_member_of_another_kind_is_refused_and_not_made() {
    let Some(g) = Garage::start() else { return };
    let (sc, url) = uploaded(&g, "kind");
    let (key, original, _) = shard_holding(&g, "kind", 5, 300_000);
    // g a symlink to /etc instead of f's second name.
    let craft = sc.tmp.path().join("craft");
    mkdirs(&craft);
    symlink("/etc", &craft.join("g"));
    g.put(&key, tar_of(&craft, &["g"], original.len()));
    name_current_etags(&g, "kind");
    let r = g.ferry(&["copy", &url, s(&sc.dst)]);
    r.assert_status(1);
    let errors = r.errors();
    assert!(
        errors.iter().any(|l| l.contains("/dst/g: download: s3://")
            && l.contains("a symlink in the shard, a hardlink in the manifest")),
        "{r}"
    );
    assert!(
        errors
            .iter()
            .any(|l| l.contains("/dst/f: download: ") && l.contains("not in the shard")),
        "{r}"
    );
    assert!(std::fs::symlink_metadata(sc.dst.join("g")).is_err(), "{r}");
}

/// A rerun keeps `a` and `c` in the first upload's shard, which the newest snapshot
/// names only in part: a download fetches just their ranges and checks them against
/// the hashes the manifest records. One spoiled there is an error naming the file,
/// which is removed (a rerun fetches it again); the rest arrives.
#[test]
fn a_kept_member_that_differs_from_the_manifests_hash_is_removed_and_named() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        write(&sc.src.join(name), &pattern(i as u64 + 40, 20_000));
    }
    let url = g.url("hash");
    g.ferry(&["copy", s(&sc.src), &url]).assert_ok();
    write(&sc.src.join("b"), b"changed");
    g.ferry(&["copy", s(&sc.src), &url]).assert_ok();
    use ferry_s3::manifest::Manifest;
    let key = g.newest_manifest_key("hash");
    let mut m = Manifest::decode(&g.get(&key), &key).expect("manifest");
    let kept = m
        .shards
        .iter()
        .find(|s| !s.whole())
        .expect("a shard named in part");
    assert_eq!(kept.members.len(), 2, "{kept:?}");
    for x in m.shards.iter_mut().flat_map(|s| &mut s.members) {
        if x.path() == b"a" {
            x.x = Some("0".repeat(32));
        }
    }
    g.put(&key, m.encode());
    g.forget_cached_manifests();
    let r = g.ferry(&["copy", &url, s(&sc.dst)]);
    r.assert_status(1);
    let errors = r.errors();
    assert!(
        errors.len() == 1
            && errors[0].contains("/dst/a: verify")
            && errors[0].contains("content differs"),
        "{r}"
    );
    assert!(std::fs::symlink_metadata(sc.dst.join("a")).is_err(), "{r}");
    assert_eq!(
        std::fs::read(sc.dst.join("c")).unwrap(),
        pattern(42, 20_000)
    );
    assert_eq!(std::fs::read(sc.dst.join("b")).unwrap(), b"changed");
}
