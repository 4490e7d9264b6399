//! `ferry mount s3://BUCKET/PREFIX`: an upload served read-only by ferry's FUSE
//! filesystem with ranged GETs through a block cache, compared field by field and byte
//! by byte with the tree uploaded; a shard replaced or damaged reads as EIO, a server
//! that stops answering gives EIO within the timeout (not a hung read), and `ferry
//! umount` leaves nothing behind. Mounts need /dev/fuse and fusermount3 (the tests say
//! so and skip without them; under FERRY_TEST_NO_SKIP=1 that is a failure).

use crate::common::build::*;
use crate::common::compare::{assert_same_tree, assert_same_tree_with, Options};
use crate::common::mounted::Mounted;
use crate::common::{fuse_here, scratch, trees};
use crate::garage::Garage;
use crate::s;
use ferry_mount::session::is_mounted;
use ferry_s3::object_store::path::Path as Key;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;

impl Mounted {
    /// Mounts `url` on `at` (made if missing) with `args` more; it must succeed.
    pub(crate) fn new(g: &Garage, url: &str, at: &Path, args: &[&str]) -> Mounted {
        let mut all = vec!["mount", url, s(at)];
        all.extend_from_slice(args);
        Mounted::made_by(at, || g.ferry(&all))
    }
}

/// The background mounts' log.
fn log(g: &Garage) -> String {
    std::fs::read_to_string(g.dir.path().join("cache/ferry/mount.log")).unwrap_or_default()
}

/// Reading `path` fails with EIO.
fn assert_eio(path: &Path) {
    let err = std::fs::read(path).expect_err("must not read");
    assert_eq!(err.raw_os_error(), Some(5), "{}: {err}", path.display());
}

/// The shard objects of the upload at `prefix`.
pub(crate) fn shards(g: &Garage, prefix: &str) -> Vec<String> {
    let mut keys: Vec<String> = g
        .list(&format!("{prefix}/shards"))
        .into_iter()
        .filter(|k| k.ends_with(".far"))
        .collect();
    keys.sort();
    keys
}

/// The shard of the upload at `prefix` that holds a run of `len` bytes of `byte` (a
/// file's data), its bytes, and where the run starts in them.
pub(crate) fn shard_holding(
    g: &Garage,
    prefix: &str,
    byte: u8,
    len: usize,
) -> (String, Vec<u8>, usize) {
    shards(g, prefix)
        .into_iter()
        .find_map(|k| {
            let bytes = g.get(&k);
            let at = bytes
                .windows(len)
                .position(|w| w.iter().all(|&b| b == byte))?;
            Some((k, bytes, at))
        })
        .expect("a shard holding the file's data")
}

#[test]
fn an_upload_mounts_as_the_tree_it_was_uploaded_from() {
    if !fuse_here() {
        return;
    }
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    trees::mixed(&sc.src);
    mkdirs(&sc.src.join("odd"));
    trees::odd_names(&sc.src.join("odd"));
    sparse_file(
        &sc.src.join("holes"),
        3 << 20,
        &[(1 << 20, b"data"), (2 << 20, b"more")],
    );
    mkdirs(&sc.src.join("big"));
    for i in 0..4 {
        write(&sc.src.join(format!("big/f{i}")), &pattern(i + 50, MIB));
    }
    // Names of one inode far apart in path order.
    write(&sc.src.join("first"), &pattern(2, 3000));
    mkdirs(&sc.src.join("z/deep"));
    hardlink(&sc.src.join("first"), &sc.src.join("z/deep/last"));
    stamp_times(&sc.src);
    let url = g.url("tree");
    g.ferry(&["copy", s(&sc.src), &url, "--shard-size", "1M"])
        .assert_ok();
    assert!(shards(&g, "tree").len() >= 4, "{:?}", shards(&g, "tree"));
    let mnt = sc.tmp.path().join("mnt");
    {
        let m = Mounted::new(&g, &url, &mnt, &[]);
        assert_same_tree_with(&sc.src, &m.at, &Options::default());
        let st = std::fs::metadata(m.at.join("holes")).expect("stat");
        assert!(st.blocks() * 512 < 1 << 20, "{} blocks", st.blocks());
        let (a, b) = (m.at.join("first"), m.at.join("z/deep/last"));
        let ino = |p: &Path| std::fs::metadata(p).expect("stat").ino();
        assert_eq!(ino(&a), ino(&b));
    }
    assert!(!is_mounted(&mnt));
    // The table built from the shards' indexes was kept, keyed by the manifest's ETag.
    let said = g.ferry(&["index", &url]);
    said.assert_ok();
    assert!(said.stdout.contains("index up to date"), "{said}");
    let m = Mounted::new(&g, &url, &mnt, &[]);
    assert_eq!(
        std::fs::read(m.at.join("big/f3")).expect("read"),
        pattern(53, MIB)
    );
    // A new upload to the same place is a new manifest: its table is built anew.
    // (The mount of the old upload stays, and reads the older snapshot.)
    let before = shards(&g, "tree");
    let old_one = std::fs::read(sc.src.join("one")).expect("read one");
    let listed = g.ferry(&["ls", "--snapshots", &url]);
    listed.assert_ok();
    let first = listed
        .stdout
        .split_whitespace()
        .next()
        .expect("a snapshot")
        .to_string();
    write(&sc.src.join("one"), b"changed");
    g.ferry(&["copy", s(&sc.src), &url, "--shard-size", "1M"])
        .assert_ok();
    let said = g.ferry(&["index", &url]);
    assert!(said.stdout.contains("index built"), "{said}");
    // The older snapshot is still there, whole.
    let old = g
        .command(&["cat", &format!("{url}@{first}"), "one"])
        .output()
        .expect("run ferry cat");
    assert!(old.status.success() && old.stdout == old_one, "{old:?}");
    // Its shards gone (deleted by hand: a prune leaves those a kept snapshot names),
    // the mount of it says so.
    use ferry_s3::object_store::ObjectStoreExt;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    for key in &before {
        rt.block_on(g.client().delete(&Key::from(key.as_str())))
            .expect("delete");
    }
    assert_eio(&m.at.join("one"));
    let l = log(&g);
    assert!(
        l.contains("one: ") && l.contains("the object is gone"),
        "{l}"
    );
}

#[test]
fn many_shards_and_small_blocks_read_back_whole_and_at_any_offset() {
    if !fuse_here() {
        return;
    }
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    mkdirs(&sc.src.join("m"));
    for i in 0..30u64 {
        write(
            &sc.src.join(format!("m/f{i:02}")),
            &pattern(i, 100_000 + 7919 * i as usize),
        );
    }
    let large = pattern(99, 5 * MIB + 12345);
    write(&sc.src.join("large"), &large);
    stamp_times(&sc.src);
    let url = g.url("many");
    g.ferry(&["copy", s(&sc.src), &url, "--shard-size", "512K"])
        .assert_ok();
    assert!(shards(&g, "many").len() >= 6);
    // Four 64 KiB blocks in the cache: reads evict, refetch and read ahead all the time.
    let m = Mounted::new(
        &g,
        &url,
        &sc.tmp.path().join("mnt"),
        &["--block-size", "64K", "--cache-size", "256K"],
    );
    assert_same_tree(&sc.src, &m.at);
    let f = std::fs::File::open(m.at.join("large")).expect("open");
    let mut seed = 12345u64;
    for _ in 0..200 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let at = (seed >> 20) as usize % large.len();
        let len = ((seed >> 8) as usize % 200_000).min(large.len() - at);
        let mut buf = vec![0u8; len];
        f.read_exact_at(&mut buf, at as u64).expect("pread");
        assert!(buf == large[at..at + len], "bytes {at}..{}", at + len);
    }
}

#[test]
fn a_block_read_by_many_at_once_is_fetched_once() {
    if !fuse_here() {
        return;
    }
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    let big = pattern(7, 3 * MIB);
    write(&sc.src.join("big"), &big);
    let url = g.url("once");
    g.ferry(&["copy", s(&sc.src), &url, "--shard-size", "1M"])
        .assert_ok();
    let mnt = sc.tmp.path().join("mnt");
    let m = Mounted::new(&g, &url, &mnt, &["--block-size", "1M"]);
    std::thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| assert!(std::fs::read(m.at.join("big")).expect("read") == big));
        }
    });
    g.ferry(&["umount", s(&mnt)]).assert_ok();
    // The mount was served from the cached table: its GETs are big's shard's blocks
    // (3 MiB of data and the shard's index: at most 4 of 1 MiB), each once.
    let deadline = Instant::now() + Duration::from_secs(10);
    let gets = loop {
        let l = log(&g);
        if let Some(line) = l.lines().find(|l| l.contains(" ranged GETs, ")) {
            let words: Vec<&str> = line.split_whitespace().collect();
            let at = words.iter().position(|w| *w == "ranged").expect("count");
            break words[at - 1].parse::<u64>().expect("a count");
        }
        assert!(Instant::now() < deadline, "no summary in the log: {l}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!((3..=4).contains(&gets), "{gets} GETs");
    drop(m);
}

#[test]
fn a_shard_replaced_or_damaged_reads_as_eio_never_other_bytes() {
    if !fuse_here() {
        return;
    }
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    write(&sc.src.join("good"), &vec![7u8; 300_000]);
    write(&sc.src.join("zbad"), &vec![9u8; 300_000]);
    let url = g.url("damage");
    g.ferry(&["copy", s(&sc.src), &url, "--shard-size", "256K"])
        .assert_ok();
    // The shard holding zbad's data, with one byte of that data changed.
    let (key, mut bytes, at) = shard_holding(&g, "damage", 9, 300_000);
    bytes[at + 150_000] = 8;
    let mnt = sc.tmp.path().join("mnt");
    {
        let m = Mounted::new(&g, &url, &mnt, &["--block-size", "64K"]);
        assert_eq!(
            std::fs::read(m.at.join("good")).expect("good"),
            vec![7u8; 300_000]
        );
        // Replaced under the mount: its ETag is not the manifest's any more.
        g.put(&key, bytes.clone());
        assert_eio(&m.at.join("zbad"));
        let l = log(&g);
        assert!(
            l.contains("zbad: ") && l.contains("the object changed since the manifest was written"),
            "{l}"
        );
    }
    // The manifest made to name the damaged object (as if its bytes had rotted in
    // place): the mount builds its table anew, and the content hash catches it.
    name_current_etags(&g, "damage");
    let m = Mounted::new(&g, &url, &mnt, &[]);
    assert_eq!(
        std::fs::read(m.at.join("good")).expect("good"),
        vec![7u8; 300_000]
    );
    assert_eio(&m.at.join("zbad"));
    assert_eio(&m.at.join("zbad"));
    let l = log(&g);
    assert!(l.contains("zbad: content differs"), "{l}");
}

/// Rewrites the manifest of the upload at `prefix` to name its shard objects' current
/// ETags, as if objects changed since had been damaged in place (which the S3 API
/// cannot do): the mount then reads them.
pub(crate) fn name_current_etags(g: &Garage, prefix: &str) {
    let key = g.newest_manifest_key(prefix);
    let mut manifest =
        ferry_s3::manifest::Manifest::decode(&g.get(&key), "manifest").expect("manifest");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let c = g.client();
    for shard in &mut manifest.shards {
        let object = Key::from(format!("{prefix}/{}", shard.name()));
        use ferry_s3::object_store::ObjectStoreExt;
        shard.etag = rt.block_on(c.head(&object)).expect("head").e_tag;
    }
    g.put(&key, manifest.encode());
    g.forget_cached_manifests();
}

#[test]
fn a_shard_that_is_not_a_ferry_archive_is_refused_at_mount_naming_it() {
    if !fuse_here() {
        return;
    }
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    write(&sc.src.join("a"), &pattern(1, 300_000));
    write(&sc.src.join("b"), &pattern(2, 300_000));
    let url = g.url("bad");
    g.ferry(&["copy", s(&sc.src), &url, "--shard-size", "256K"])
        .assert_ok();
    let keys = shards(&g, "bad");
    let real = g.get(&keys[0]);
    // One byte of the index changed (its offset is in the footer, the last 64 bytes).
    let mut index_spoiled = real.clone();
    let footer = &real[real.len() - 64..];
    let index_at = u64::from_le_bytes(footer[8..16].try_into().expect("8 bytes")) as usize;
    index_spoiled[index_at + 40] ^= 0x55;
    for (spoil, why) in [
        (vec![0u8; real.len()], "not a ferry archive"),
        (index_spoiled, "bad index"),
    ] {
        g.put(&keys[0], spoil);
        name_current_etags(&g, "bad");
        let mnt = sc.tmp.path().join("mnt");
        std::fs::create_dir_all(&mnt).expect("mountpoint");
        let r = g.ferry(&["mount", &url, s(&mnt)]);
        r.assert_status(2);
        let line = r.errors().join("\n");
        assert!(
            line.contains(&format!("s3://ferry-test/{}: {why}", keys[0])),
            "{r}"
        );
        assert!(!is_mounted(&mnt));
    }
    let mnt = sc.tmp.path().join("mnt");
    let r = g.ferry(&["mount", &g.url("nothing"), s(&mnt)]);
    r.assert_status(2);
    assert!(r.stderr.contains("no ferry upload here"), "{r}");
    let r = g.ferry(&["mount", "--kernel", &url, s(&mnt)]);
    r.assert_status(2);
    assert!(r.stderr.contains("mounted with FUSE only"), "{r}");
    assert!(!is_mounted(&mnt));
}

/// Processes whose command line names `path`.
fn processes_naming(path: &Path) -> Vec<String> {
    let want = s(path).as_bytes();
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|c| c.windows(want.len()).any(|w| w == want))
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .collect()
}

#[test]
fn umount_leaves_nothing_behind() {
    if !fuse_here() {
        return;
    }
    let Some(g) = Garage::start() else { return };
    let sc = scratch();
    trees::mixed(&sc.src);
    let url = g.url("gone");
    g.ferry(&["copy", s(&sc.src), &url]).assert_ok();
    let mnt = sc.tmp.path().join("mnt");
    let m = Mounted::new(&g, &url, &mnt, &[]);
    assert_same_tree(&sc.src, &m.at);
    assert!(!processes_naming(&mnt).is_empty(), "no mount process");
    g.ferry(&["umount", s(&mnt)]).assert_ok();
    assert!(!is_mounted(&mnt));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_naming(&mnt).is_empty() {
        assert!(
            Instant::now() < deadline,
            "still running: {:?}",
            processes_naming(&mnt)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(std::fs::read_dir(&mnt).expect("mountpoint").count(), 0);
    // In the cache: the table, the log, and what `copy`, `ls` and `cat` keep; nothing
    // half-written.
    let kept: Vec<String> = std::fs::read_dir(g.dir.path().join("cache/ferry"))
        .expect("cache")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    let tables = kept
        .iter()
        .filter(|k| k.starts_with("s3-") && k.ends_with(".ftree"));
    assert_eq!(tables.count(), 1, "{kept:?}");
    assert!(
        kept.iter()
            .all(|k| ["mount.log", "s3", "s3-uploads"].contains(&k.as_str())
                || (k.starts_with("s3-") && k.ends_with(".ftree"))),
        "{kept:?}"
    );
    drop(m);
}

#[test]
fn a_server_that_stops_answering_gives_eio_within_the_timeout_not_a_hang() {
    if !fuse_here() {
        return;
    }
    let Some(mut g) = Garage::start() else { return };
    let sc = scratch();
    for i in 0..3u64 {
        // Larger than what the mount sends ahead into the page cache.
        write(&sc.src.join(format!("f{i}")), &pattern(i, 400_000));
    }
    let url = g.url("stop");
    g.ferry(&["copy", s(&sc.src), &url]).assert_ok();
    let m = Mounted::new(
        &g,
        &url,
        &sc.tmp.path().join("mnt"),
        &["--block-size", "64K", "--timeout", "2"],
    );
    assert_eq!(
        std::fs::read(m.at.join("f0")).expect("f0"),
        pattern(0, 400_000)
    );
    g.nodes[0].pause(true);
    let started = Instant::now();
    assert_eio(&m.at.join("f1"));
    let took = started.elapsed();
    g.nodes[0].pause(false);
    assert!(took < Duration::from_secs(10), "EIO after {took:?}");
    let l = log(&g);
    assert!(
        l.contains("f1: ") && l.contains("no answer within 2 s"),
        "{l}"
    );
    // Answering again: the same file reads (a failed read is not remembered as bad).
    assert_eq!(
        std::fs::read(m.at.join("f1")).expect("f1"),
        pattern(1, 400_000)
    );
    // Gone for good: EIO too, after object_store's retries or the timeout.
    g.nodes[0].kill();
    let started = Instant::now();
    assert_eio(&m.at.join("f2"));
    assert!(started.elapsed() < Duration::from_secs(20));
    drop(m);
}
