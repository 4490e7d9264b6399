//! Ferry archives whose tree table lies, every checksum made to match again
//! ([`ferry_testkit::table_edit`]): a file pointed at another member's data, or at bytes
//! inside a file's data, must never be served as that file, by FUSE, by the kernel
//! mount or by `cat`; the mount says which path is wrong, and nothing panics.

use super::common::build::{pattern, write};
use super::common::scratch;
use super::{ferry, fuse_here, is_mounted, pack_plain_index, Mounted};
use ferry_testkit::table_edit::{field, TableEdit};
use std::path::{Path, PathBuf};

/// The lies told about file `a`, each as an archive next to `archive`: its name, and
/// the archive. `big` is 200 KiB; `a` and `b` hold different bytes.
fn lying_archives(archive: &Path) -> Vec<(&'static str, PathBuf)> {
    let bytes = std::fs::read(archive).expect("read the archive");
    let edit = |name: &str, change: &dyn Fn(&mut TableEdit, usize, usize, usize)| {
        let mut t = TableEdit::new(bytes.clone());
        let (a, b, big) = (
            t.find(b"a").expect("node a"),
            t.find(b"b").expect("node b"),
            t.find(b"big").expect("node big"),
        );
        change(&mut t, a, b, big);
        let out = archive.with_file_name(name);
        std::fs::write(&out, t.sealed()).expect("write the lying archive");
        out
    };
    vec![
        (
            // `a` at ten bytes inside `big`'s data: nested ranges.
            "nested",
            edit("nested.far", &|t, a, _, big| {
                let at = t.get(big, field::A) + 10;
                t.set(a, field::A, at);
                t.set(a, field::B, 10);
                t.set(a, field::SIZE, 10);
                t.node(a)[field::FLAGS] &= !1;
            }),
        ),
        (
            // `a` pointed at `b`'s member, its hash and sizes copied too.
            "pointed",
            edit("pointed.far", &|t, a, b, _| {
                // Keep a's own parent, link count, name and extras (bytes 64..92).
                let own = t.node(a)[field::PARENT..field::HEAD].to_vec();
                let from = t.node(b)[field::SIZE..].to_vec();
                let flags = t.node(b)[field::FLAGS];
                t.node(a)[field::SIZE..].copy_from_slice(&from);
                t.node(a)[field::FLAGS] = flags;
                t.node(a)[field::PARENT..field::HEAD].copy_from_slice(&own);
            }),
        ),
    ]
}

/// Whether a message about the table names `a` as the file at fault, or as the one
/// whose member another file's headers lie in.
fn names_a(said: &str) -> bool {
    said.contains("tree table: a:") || said.contains("inside the member of a,")
}

/// A source tree of `big`, `a` and `b`, packed; the scratch, archive and cache.
fn packed() -> (super::common::Scratch, PathBuf, PathBuf) {
    let s = scratch();
    write(&s.src.join("big"), &pattern(3, 200 << 10));
    write(&s.src.join("a"), &[b'A'; 3000]);
    write(&s.src.join("b"), &[b'B'; 5000]);
    let archive = s.tmp.path().join("t.far");
    let cache = s.tmp.path().join("cache");
    pack_plain_index(&cache, &s.src, &archive);
    (s, archive, cache)
}

#[test]
fn a_table_pointing_a_file_elsewhere_is_never_served_by_fuse() {
    if !fuse_here() {
        return;
    }
    let (s, archive, cache) = packed();
    for (how, lying) in lying_archives(&archive) {
        let mnt = s.tmp.path().join(format!("mnt-{how}"));
        let m = Mounted::new(&cache, &lying, &mnt);
        // Names are served at once; data only once the table is checked, and never.
        let read = std::fs::read(m.at.join("a"));
        assert!(
            read.is_err(),
            "{how}: `a` was served as {:?}",
            read.map(|b| b.len())
        );
        assert!(std::fs::read(m.at.join("big")).is_err(), "{how}: big");
        let log = std::fs::read_to_string(cache.join("ferry/mount.log")).unwrap_or_default();
        assert!(
            names_a(&log) && log.contains("does not describe this archive"),
            "{how}: the log does not name `a`: {log}"
        );
        drop(m);
        assert!(!is_mounted(&mnt), "{how}: still mounted");
    }
}

#[test]
fn a_table_pointing_a_file_elsewhere_is_refused_by_the_kernel_mount_and_cat() {
    let (s, archive, cache) = packed();
    for (how, lying) in lying_archives(&archive) {
        let r = ferry(&cache, &[&"cat", &lying, &"a"]);
        assert_ne!(r.status, 0, "{how}: cat printed it");
        assert!(
            !r.stdout.contains("BBB") && r.stderr.contains("index and tar header disagree"),
            "{how}: {}",
            r.stderr
        );
        if ferry_testkit::skip_unless_root() {
            continue;
        }
        let mnt = s.tmp.path().join(format!("kmnt-{how}"));
        std::fs::create_dir_all(&mnt).expect("mountpoint");
        let r = ferry(&cache, &[&"mount", &"--kernel", &lying, &mnt]);
        r.assert_status(2);
        assert!(
            names_a(&r.stderr) && !is_mounted(&mnt),
            "{how}: {}",
            r.stderr
        );
    }
}

/// The tree table `path` (a ferry archive) carries, opened, and the archive.
fn open_table(path: &Path) -> (ferry_archive::tree::Table, std::fs::File) {
    use ferry_archive::tree::{Table, TableFile};
    let file = std::fs::File::open(path).expect("open the archive");
    let len = file.metadata().expect("stat").len();
    let tree = ferry_archive::read::archive::embedded_tree(&file, len)
        .expect("read the trailer")
        .expect("a table");
    let table = Table::open(
        TableFile::File(file.try_clone().expect("dup")),
        tree.at,
        tree.len,
        false,
    )
    .expect("open the table");
    (table, file)
}

/// A mount serves a file's data as soon as the check has passed it, before the whole
/// check ends: what the check reports passed must never include a file it later finds
/// lying, nor one whose member lies inside a file passed earlier.
#[test]
fn the_checks_progress_never_passes_a_file_it_later_finds_lying() {
    use ferry_archive::tree::check_against_tar_reporting;
    use std::sync::Mutex;

    let s = scratch();
    // More files than one batch of the check (4096 nodes), each its own small member.
    for i in 0..6000 {
        write(
            &s.src.join(format!("f{i:05}")),
            format!("file {i}\n").as_bytes(),
        );
    }
    let archive = s.tmp.path().join("many.far");
    let cache = s.tmp.path().join("cache");
    pack_plain_index(&cache, &s.src, &archive);
    let bytes = std::fs::read(&archive).expect("read the archive");

    // The honest table passes whole, reporting progress up to every node.
    let check = |bytes: &[u8]| {
        let path = s.tmp.path().join("checked.far");
        std::fs::write(&path, bytes).expect("write the archive");
        let (table, file) = open_table(&path);
        let reported = Mutex::new(Vec::new());
        let result =
            check_against_tar_reporting(&table, &file, &|n| reported.lock().unwrap().push(n));
        (result, reported.into_inner().unwrap(), table.len())
    };
    let (result, reported, nodes) = check(&bytes);
    let late_name = String::from_utf8(open_table(&archive).0.path_of(5000)).expect("UTF-8");
    let checked = result.expect("the honest table passes");
    assert_eq!(checked.files, 6000);
    assert!(reported.len() >= 2 && reported.is_sorted(), "{reported:?}");
    assert_eq!(u64::from(*reported.last().unwrap()), nodes);

    // A late file pointed inside an early file's data (nested in a member that passed
    // long before), and a late file pointed at an early file's member.
    let mut lies = Vec::new();
    let mut t = TableEdit::new(bytes.clone());
    // (Nodes are numbered in archive order, which is the walk's, not the names'.)
    let (early, late) = (10, 5000);
    let at = t.get(early, field::A) + 2;
    t.set(late, field::A, at);
    t.set(late, field::B, 3);
    t.set(late, field::SIZE, 3);
    t.node(late)[field::FLAGS] &= !1;
    lies.push(("nested in an early file", late, t.sealed()));
    let mut t = TableEdit::new(bytes.clone());
    let own = t.node(late)[field::PARENT..field::HEAD].to_vec();
    let from = t.node(early)[field::SIZE..].to_vec();
    t.node(late)[field::SIZE..].copy_from_slice(&from);
    t.node(late)[field::PARENT..field::HEAD].copy_from_slice(&own);
    lies.push(("pointed at an early file", late, t.sealed()));
    for (how, liar, lying) in lies {
        let (result, reported, _) = check(&lying);
        let e = result.expect_err(how);
        assert!(e.to_string().contains(&late_name), "{how}: {e}");
        assert!(
            !reported.is_empty() && reported.iter().all(|&n| n as usize <= liar),
            "{how}: passed {reported:?}, the liar is node {liar}"
        );
    }
}

/// A table keeps the owner names the mount maps to local ids (as unpack maps them): a
/// table naming another owner than the tar's header is refused by the check.
#[test]
fn a_table_naming_another_owner_is_refused_by_the_check() {
    use ferry_archive::tree::check_against_tar;

    let (s, archive, _cache) = packed();
    let (table, file) = open_table(&archive);
    check_against_tar(&table, &file).expect("the honest table passes");
    let a = (0..table.len() as u32)
        .map(|id| table.node(id).unwrap())
        .find(|n| table.path_of(n.id) == b"a")
        .expect("node a");
    let user = table.extras(&a).expect("extras").user;
    assert!(!user.is_empty(), "the table keeps no owner name");

    let mut t = TableEdit::new(std::fs::read(&archive).unwrap());
    let records = t.records();
    let other = vec![b'x'; user.len()];
    let mut changed = 0;
    for at in 0..records.len().saturating_sub(user.len()) {
        if records[at..at + user.len()] == user[..] {
            records[at..at + user.len()].copy_from_slice(&other);
            changed += 1;
        }
    }
    assert!(changed > 0);
    let lying = s.tmp.path().join("owner.far");
    std::fs::write(&lying, t.sealed()).unwrap();
    let (table, file) = open_table(&lying);
    let e = check_against_tar(&table, &file).expect_err("a table naming another owner");
    assert!(e.to_string().contains("owner or group name"), "{e}");
}
