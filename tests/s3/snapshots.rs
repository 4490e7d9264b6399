//! Snapshots through Garage: a rerun writes only the members that changed, every upload
//! is a snapshot read back with `@NAME` as it was, `ls --snapshots` lists them, and
//! `prune` deletes the older ones and only what no kept one names, never beside an
//! upload, refusing a damaged manifest.

use crate::common::build::*;
use crate::common::compare::{assert_same_tree, assert_same_tree_with, Options};
use crate::common::{scratch, Scratch};
use crate::garage::Garage;
use crate::s;
use std::path::Path;
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;

/// 24 files of 1 MiB and a few small ones, below `s.src`.
fn tree(s: &Scratch) {
    mkdirs(&s.src.join("m"));
    for i in 0..24u64 {
        write(&s.src.join(format!("m/f{i:03}")), &pattern(i + 100, MIB));
    }
    mkdirs(&s.src.join("small/deep"));
    for i in 0..10u64 {
        write(
            &s.src.join(format!("small/deep/s{i}")),
            &pattern(i, 100 + i as usize),
        );
    }
    symlink("m/f000", &s.src.join("link"));
    stamp_times(&s.src);
}

/// Scattered changes: an edit, a new file, a deletion, a rename, a mode change.
fn change(src: &Path) {
    write(&src.join("m/f010"), &pattern(7, MIB));
    write(&src.join("new"), b"a new file");
    std::fs::remove_file(src.join("m/f020")).expect("remove");
    std::fs::rename(src.join("m/f005"), src.join("small/f005")).expect("rename");
    chmod(&src.join("m/f015"), 0o600);
}

/// A copy of `src` as it is now, in `to`.
pub(crate) fn keep_as_it_is(src: &Path, to: &Path) {
    let ok = std::process::Command::new("cp")
        .args(["-a", s(src), s(to)])
        .status()
        .expect("cp");
    assert!(ok.success());
}

/// The snapshot names `ls --snapshots` prints, oldest first.
fn snapshots(g: &Garage, url: &str) -> Vec<String> {
    let ls = g.ferry(&["ls", "--snapshots", url]);
    ls.assert_ok();
    ls.stdout
        .lines()
        .map(|l| l.split_whitespace().next().expect("a name").to_string())
        .collect()
}

/// The bytes of the objects under `prefix/shards` that `after` has and `before` had not.
fn written(
    before: &std::collections::BTreeMap<String, u64>,
    after: &std::collections::BTreeMap<String, u64>,
) -> u64 {
    after
        .iter()
        .filter(|(k, _)| k.contains("/shards/") && !before.contains_key(*k))
        .map(|(_, n)| n)
        .sum()
}

#[test]
fn a_rerun_writes_only_what_changed_and_every_upload_is_a_snapshot() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    tree(&sc);
    let url = g.url("snap");
    g.ferry(&["copy", s(&sc.src), &url, "--shard-size", "6M"])
        .assert_ok();
    let then = sc.tmp.path().join("then");
    keep_as_it_is(&sc.src, &then);
    change(&sc.src);
    let before = g.sizes("snap/");
    let rerun = g.ferry(&["copy", "--json", s(&sc.src), &url, "--shard-size", "6M"]);
    rerun.assert_ok();
    // The edit and the file whose mode changed (1 MiB each), the new file, the
    // directories: under 2.5 MiB, where re-sending the shards that hold a change costs
    // 24 MiB. The renamed file is found where it was stored, and not sent.
    let sent = written(&before, &g.sizes("snap/"));
    assert!(
        sent < 5 * MIB as u64 / 2 && sent > 2 * MIB as u64,
        "{sent} bytes: {rerun}"
    );
    // 21 of the 24 big files (one renamed), the 10 small ones and the symlink stay
    // where they are, counted as a local copy counts what is up to date.
    assert_eq!(rerun.json().count("skipped"), 32, "{rerun}");
    assert!(
        rerun.stderr.contains("(holding 32 unchanged members")
            && rerun
                .stderr
                .contains("bytes, of which 1 files renamed or moved, 1048576 bytes)"),
        "{rerun}"
    );
    let names = snapshots(&g, &url);
    assert_eq!(names.len(), 2, "{names:?}");
    let nothing = g.ferry(&["ls", "--snapshots", &g.url("nothing/here")]);
    nothing.assert_status(2);
    assert!(nothing.stderr.contains("no ferry upload here"), "{nothing}");
    // The newest, and the older one as it was. (The first upload's reads moved the
    // atimes of SRC, and of the copy made after it; a member left where it is keeps the
    // atime it was packed with: atimes alone are no change to send again, as for rsync.)
    let no_atime = Options {
        skip_atime: true,
        ..Options::default()
    };
    g.ferry(&["copy", &url, s(&sc.dst)]).assert_ok();
    assert_same_tree_with(&sc.src, &sc.dst, &no_atime);
    let older = format!("{url}@{}", names[0]);
    let back = sc.tmp.path().join("back");
    g.ferry(&["copy", "--verify", &older, s(&back)]).assert_ok();
    assert_same_tree_with(&then, &back, &no_atime);
    let cat = g.command(&["cat", &older, "m/f010"]).output().expect("cat");
    assert!(cat.status.success() && cat.stdout == pattern(110, MIB));
    let ls = g.ferry(&["ls", &older, "m/f020"]);
    ls.assert_ok();
    // Only the older snapshot holds the old m/f010 and m/f020 (and its directories).
    let listed = g.ferry(&["ls", "--snapshots", &url]);
    let only = |line: &str| -> u64 {
        let words: Vec<&str> = line.split_whitespace().collect();
        words[words.len() - 3].parse().expect("bytes only here")
    };
    let lines: Vec<&str> = listed.stdout.lines().collect();
    assert!(only(lines[0]) >= 2 * MIB as u64, "{listed}");
    // A snapshot is read, never written.
    let up = g.ferry(&["copy", s(&sc.src), &older]);
    up.assert_status(2);
    assert!(up.stderr.contains("a snapshot is read-only"), "{up}");

    // Prune: a dry run deletes nothing; then the older snapshot goes, with the shards
    // only it named, and the newest reads back whole.
    let dry = g.ferry(&["prune", "-n", "--keep", "1", &url]);
    dry.assert_ok();
    assert!(
        dry.stdout
            .contains(&format!("would delete snapshot {}", names[0])),
        "{dry}"
    );
    assert_eq!(snapshots(&g, &url), names);
    let stored = g.sizes("snap/shards/");
    let pruned = g.ferry(&["prune", "--keep", "1", &url]);
    pruned.assert_ok();
    assert_eq!(snapshots(&g, &url), names[1..]);
    // What only the older one named is gone (a sparse shard's live members may have
    // moved into a new one, compacted: fewer bytes, not always fewer objects).
    let left = g.sizes("snap/shards/");
    let bytes = |sizes: &std::collections::BTreeMap<String, u64>| sizes.values().sum::<u64>();
    assert!(bytes(&left) < bytes(&stored), "{pruned}");
    assert!(stored.keys().any(|k| !left.contains_key(k)), "{pruned}");
    let gone = g.ferry(&["copy", &older, s(&sc.tmp.path().join("gone"))]);
    assert!(
        gone.stderr.contains(&format!("no snapshot {}", names[0])),
        "{gone}"
    );
    let again = sc.tmp.path().join("again");
    g.ferry(&["copy", "--verify", &url, s(&again)]).assert_ok();
    assert_same_tree_with(&sc.src, &again, &no_atime);
    // Run again, it finds nothing more to delete.
    let twice = g.ferry(&["prune", "--keep", "1", &url]);
    twice.assert_ok();
    assert!(twice.stderr.contains("0 deleted; 0 objects"), "{twice}");
}

#[test]
fn a_prune_never_runs_beside_an_upload() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    tree(&sc);
    let url = g.url("beside");
    g.ferry(&["copy", s(&sc.src), &url]).assert_ok();
    change(&sc.src);
    g.ferry(&["copy", s(&sc.src), &url]).assert_ok();
    // An upload under way: the prune stops before deleting anything.
    for i in 0..40u64 {
        write(&sc.src.join(format!("m/g{i:03}")), &pattern(i + 300, MIB));
    }
    let args = [
        "copy",
        s(&sc.src),
        &url,
        "--shard-size",
        "8M",
        "--transfers",
        "1",
    ];
    let child = g.spawn_until_multipart(&args);
    let stored = g.sizes("beside/");
    let refused = g.ferry(&["prune", "--keep", "1", &url]);
    refused.assert_status(2);
    assert!(refused.stderr.contains("an upload begun at"), "{refused}");
    assert_eq!(snapshots(&g, &url).len(), 2);
    let after = g.sizes("beside/");
    assert!(stored.keys().all(|k| after.contains_key(k)), "{refused}");
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A prune under way (its lease): an upload waits for it to end.
    let lease = "beside/leases/0123456789abcdef.json";
    g.put(lease, br#"{"kind":"prune"}"#.to_vec());
    let log = sc.tmp.path().join("upload.log");
    let mut child = g
        .command(&["copy", s(&sc.src), &url])
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("start ferry");
    let start = Instant::now();
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("waiting for a prune begun at")
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the upload did not wait"
        );
        assert!(
            child.try_wait().expect("wait").is_none(),
            "the upload ended"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let names = snapshots(&g, &url);
    use ferry_s3::object_store::ObjectStoreExt;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let key = ferry_s3::object_store::path::Path::from(lease);
    rt.block_on(g.client().delete(&key)).expect("delete");
    assert!(child.wait().expect("wait").success());
    assert_eq!(snapshots(&g, &url).len(), names.len() + 1);
    // Nothing is left held: the prune now runs.
    g.ferry(&["prune", "--keep", "1", &url]).assert_ok();
    assert_eq!(snapshots(&g, &url).len(), 1);
    assert!(g.list("beside/leases").is_empty());
    g.ferry(&["copy", &url, s(&sc.dst)]).assert_ok();
    assert_same_tree(&sc.src, &sc.dst);
}

#[test]
fn a_damaged_or_missing_snapshot_stops_a_prune_naming_it() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    tree(&sc);
    let url = g.url("damaged");
    for _ in 0..3 {
        change_a_little(&sc.src);
        g.ferry(&["copy", s(&sc.src), &url]).assert_ok();
    }
    let names = snapshots(&g, &url);
    assert_eq!(names.len(), 3, "{names:?}");
    let stored = g.sizes("damaged/");
    // Damaged: refused, naming it; nothing deleted.
    let middle = format!("damaged/snapshots/{}.ferry", names[1]);
    let good = g.get(&middle);
    g.put(&middle, b"not a manifest".to_vec());
    let refused = g.ferry(&["prune", "--keep", "2", &url]);
    refused.assert_status(2);
    assert!(
        refused
            .stderr
            .contains(&format!("s3://ferry-test/{middle}: bad manifest")),
        "{refused}"
    );
    assert_eq!(g.sizes("damaged/").len(), stored.len());
    // One that names itself otherwise (copied from another) is refused as well.
    g.put(
        &middle,
        g.get(&format!("damaged/snapshots/{}.ferry", names[2])),
    );
    let refused = g.ferry(&["ls", &format!("{url}@{}", names[1])]);
    refused.assert_status(2);
    assert!(refused.stderr.contains("it names itself"), "{refused}");
    g.put(&middle, good);
    // manifest.ferry naming a snapshot that is not there: refused, naming it.
    let pointer = g.get("damaged/manifest.ferry");
    g.put(
        "damaged/manifest.ferry",
        ferry_s3::snapshot::Newest::encode("20200101T000000Z"),
    );
    let refused = g.ferry(&["ls", &url]);
    refused.assert_status(2);
    assert!(
        refused
            .stderr
            .contains("damaged/snapshots/20200101T000000Z.ferry: read the newest snapshot"),
        "{refused}"
    );
    g.put("damaged/manifest.ferry", pointer);
    // A prune killed after deleting the snapshots it does not keep, before the shards:
    // run again, it deletes those.
    use ferry_s3::object_store::ObjectStoreExt;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let oldest = format!("damaged/snapshots/{}.ferry", names[0]);
    let key = ferry_s3::object_store::path::Path::from(oldest.as_str());
    rt.block_on(g.client().delete(&key)).expect("delete");
    let pruned = g.ferry(&["prune", "--keep", "2", &url]);
    pruned.assert_ok();
    assert!(
        pruned.stderr.contains("2 snapshots kept, 0 deleted"),
        "{pruned}"
    );
    let shards_now = g.sizes("damaged/shards");
    assert!(
        stored
            .keys()
            .any(|k| k.contains("/shards/") && !shards_now.contains_key(k)),
        "{pruned}"
    );
    let back = sc.tmp.path().join("back");
    g.ferry(&["copy", &format!("{url}@{}", names[1]), s(&back)])
        .assert_ok();
    // A lease that does not read as one is taken for an upload's: the prune stops,
    // naming it, and deletes nothing.
    let lease = "damaged/leases/fedcba9876543210.json";
    g.put(lease, b"{\"kind\": 7".to_vec());
    let stored = g.sizes("damaged/");
    let refused = g.ferry(&["prune", "--keep", "1", &url]);
    refused.assert_status(2);
    assert!(
        refused.stderr.contains("an upload begun at") && refused.stderr.contains(lease),
        "{refused}"
    );
    assert_eq!(g.sizes("damaged/"), stored);
    // Another prune under way: this one stops too (the two would each delete what the
    // other's compaction names).
    g.put(lease, br#"{"kind":"prune"}"#.to_vec());
    let stored = g.sizes("damaged/");
    let refused = g.ferry(&["prune", "--keep", "1", &url]);
    refused.assert_status(2);
    assert!(refused.stderr.contains("a prune begun at"), "{refused}");
    assert_eq!(g.sizes("damaged/"), stored);
    rt.block_on(
        g.client()
            .delete(&ferry_s3::object_store::path::Path::from(lease)),
    )
    .expect("delete");
    g.ferry(&["prune", "--keep", "1", &url]).assert_ok();
    assert_eq!(snapshots(&g, &url).len(), 1);
}

/// One small file changed and the directory above it touched.
fn change_a_little(src: &Path) {
    let n = std::fs::read_dir(src.join("small")).expect("read").count();
    write(
        &src.join(format!("small/added{n}")),
        &pattern(n as u64, 5000),
    );
    write(&src.join("small/deep/s1"), &pattern(n as u64 + 50, 5000));
}

#[test]
fn a_mount_serves_its_snapshot_and_nothing_an_older_one_held() {
    if !crate::common::fuse_here() {
        return;
    }
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    tree(&sc);
    let url = g.url("mounted");
    g.ferry(&["copy", s(&sc.src), &url, "--shard-size", "6M"])
        .assert_ok();
    let then = sc.tmp.path().join("then");
    keep_as_it_is(&sc.src, &then);
    change(&sc.src);
    std::fs::remove_dir_all(sc.src.join("small/deep")).expect("rmtree");
    g.ferry(&["copy", s(&sc.src), &url, "--shard-size", "6M"])
        .assert_ok();
    let names = snapshots(&g, &url);
    // The newest: no deleted file, no removed directory, the edited file's new content
    // (its old version stays in a shard the newest still reads other members from).
    let no_atime = Options {
        skip_atime: true,
        ..Options::default()
    };
    let at = sc.tmp.path().join("mnt");
    {
        let m = crate::common::mounted::Mounted::new(&g, &url, &at, &[]);
        assert_same_tree_with(&sc.src, &m.at, &no_atime);
    }
    let older = format!("{url}@{}", names[0]);
    let m = crate::common::mounted::Mounted::new(&g, &older, &at, &[]);
    assert_same_tree_with(&then, &m.at, &no_atime);
}

#[test]
fn snapshots_of_every_kind_of_entry_read_back_as_they_were() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    crate::common::trees::every_kind(&sc.src);
    let url = g.url("kinds");
    g.ferry(&["copy", s(&sc.src), &url, "--shard-size", "1M"])
        .assert_ok();
    let then = sc.tmp.path().join("then");
    keep_as_it_is(&sc.src, &then);
    // Changes among the kinds: a file and a symlink replaced, an xattr added, a
    // file made.
    let mixed = sc.src.join("mixed");
    let first_file = std::fs::read_dir(&mixed)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && !p.is_symlink())
        .min()
        .expect("a file");
    write(&first_file, b"replaced");
    let link = std::fs::read_dir(&mixed)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_symlink())
        .min()
        .expect("a symlink");
    std::fs::remove_file(&link).unwrap();
    symlink("elsewhere", &link);
    set_xattr(&sc.src.join("mixed/size1"), "user.changed", b"yes");
    write(&sc.src.join("mixed/made"), b"made");
    let no_atime = Options {
        skip_atime: true,
        ..Options::default()
    };
    g.ferry(&["copy", s(&sc.src), &url, "--shard-size", "1M"])
        .assert_ok();
    let names = snapshots(&g, &url);
    assert_eq!(names.len(), 2);
    g.ferry(&["copy", &url, s(&sc.dst)]).assert_ok();
    assert_same_tree_with(&sc.src, &sc.dst, &no_atime);
    let back = sc.tmp.path().join("back");
    g.ferry(&["copy", &format!("{url}@{}", names[0]), s(&back)])
        .assert_ok();
    assert_same_tree_with(&then, &back, &no_atime);
}

#[test]
fn uploads_that_begin_in_one_second_take_different_names() {
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    tree(&sc);
    let url = g.url("together");
    // Four uploads started together, early in a second: each claims a name, and no
    // snapshot replaces another's.
    let into_second = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .subsec_millis();
    std::thread::sleep(Duration::from_millis(u64::from(1050 - into_second)));
    let children: Vec<_> = (0..4)
        .map(|_| {
            g.command(&["copy", s(&sc.src), &url])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start ferry")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let names = snapshots(&g, &url);
    assert_eq!(names.len(), 4, "{names:?}");
    let seconds: std::collections::BTreeSet<&str> =
        names.iter().map(|n| n.split('.').next().unwrap()).collect();
    eprintln!("snapshots {names:?}");
    for name in &names {
        let back = sc.tmp.path().join(name);
        g.ferry(&["copy", &format!("{url}@{name}"), s(&back)])
            .assert_ok();
        let no_atime = Options {
            skip_atime: true,
            ..Options::default()
        };
        assert_same_tree_with(&sc.src, &back, &no_atime);
    }
    assert!(g.list("together/claims").is_empty());
    // manifest.ferry names the newest, whichever upload wrote it last.
    assert_eq!(
        g.get("together/manifest.ferry"),
        ferry_s3::snapshot::Newest::encode(names.last().unwrap())
    );
    // The case this test is for happened: two or more in one second.
    assert!(seconds.len() < 4, "{names:?}");
}
