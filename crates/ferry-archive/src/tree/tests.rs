//! The tree table built, written and read back: resolution as an extraction does it,
//! and damaged tables refused.

use super::*;
use crate::index::{IndexEntry, Kind};
use std::io::Write;

fn member(path: &str, kind: Kind) -> IndexEntry {
    IndexEntry {
        path: path.as_bytes().to_vec(),
        kind,
        mode: if kind == Kind::Dir { 0o755 } else { 0o644 },
        uid: 1,
        gid: 2,
        mtime: (1_600_000_000, 5),
        atime: (1_600_000_001, 6),
        size: 0,
        header_offset: 0,
        data_offset: 0,
        stored: 0,
        rdev: 0,
        hash: None,
        link: Vec::new(),
        runs: Vec::new(),
        xattrs: Vec::new(),
        names: None,
    }
}

fn file(path: &str, at: u64, size: u64) -> IndexEntry {
    IndexEntry {
        size,
        stored: size,
        data_offset: at,
        hash: Some(0x1234),
        ..member(path, Kind::File)
    }
}

fn link(path: &str, kind: Kind, target: &str) -> IndexEntry {
    IndexEntry {
        link: target.as_bytes().to_vec(),
        ..member(path, kind)
    }
}

const DEFAULTS: DirDefaults = DirDefaults {
    mode: 0o700,
    uid: 9,
    gid: 9,
    mtime: (7, 0),
};

fn table_of(entries: &[IndexEntry]) -> (Table, Vec<Skipped>) {
    let mut b = TreeBuilder::new(DEFAULTS);
    let skipped = entries.iter().filter_map(|e| b.add(e).err()).collect();
    let mut bytes = Vec::new();
    let n = b.write(1 << 32, &mut bytes).expect("write");
    assert_eq!(n, bytes.len() as u64);
    (open_bytes(&bytes, true).expect("open"), skipped)
}

fn open_bytes(bytes: &[u8], verify: bool) -> Result<Table, TreeError> {
    let mut f = tempfile::tempfile().expect("tempfile");
    f.write_all(b"xyz").expect("write");
    f.write_all(bytes).expect("write");
    Table::open(f, 3, bytes.len() as u64, verify)
}

fn open_paged(bytes: &[u8]) -> Result<Table, TreeError> {
    let mut f = tempfile::tempfile().expect("tempfile");
    f.write_all(b"xyz").expect("write");
    f.write_all(bytes).expect("write");
    Table::open_paged(f, 3, bytes.len() as u64)
}

fn at(t: &Table, path: &str) -> Option<Node> {
    let mut n = t.node(0).expect("root");
    for c in path.split('/').filter(|c| !c.is_empty()) {
        let d = t.lookup(&n, c.as_bytes()).expect("lookup")?;
        n = t.node(d.node).expect("node");
    }
    Some(n)
}

#[test]
fn a_tree_is_resolved_as_an_extraction_resolves_it() {
    let entries = vec![
        member("./", Kind::Dir),
        member("d/", Kind::Dir),
        file("d/a", 512, 10),
        file("d/b", 1024, 20),
        link("d/h", Kind::HardLink, "d/a"),
        link("d/s", Kind::Symlink, "a"),
        file("/abs/x", 2048, 1),
        file("../evil", 0, 0),
        file("d/s/through", 0, 0),
        file("d/b", 4096, 30),
        member("e/f/", Kind::Dir),
    ];
    let (t, skipped) = table_of(&entries);
    let why: Vec<_> = skipped.iter().map(|s| s.to_string()).collect();
    assert_eq!(why.len(), 2, "{why:?}");
    assert!(why[0].contains("'..'"), "{why:?}");
    assert!(why[1].contains("below d/s, which is a symlink"), "{why:?}");
    let root = t.node(0).expect("root");
    assert_eq!((root.mode, root.uid), (0o755, 1));
    assert_eq!(root.nlink, 5, "root, ., d, abs, e");
    let names: Vec<_> = t
        .dirents(&root, 0, 100)
        .expect("list")
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(names, [b"abs".to_vec(), b"d".to_vec(), b"e".to_vec()]);
    let a = at(&t, "d/a").expect("d/a");
    let h = at(&t, "d/h").expect("d/h");
    assert_eq!(a.id, h.id);
    assert_eq!(a.nlink, 2);
    assert_eq!((a.a, a.b, a.hash), (512, 10, Some(0x1234)));
    assert_eq!(at(&t, "d/b").expect("d/b").a, 4096, "the last member wins");
    let s = at(&t, "d/s").expect("d/s");
    assert_eq!(
        (s.kind, t.target(&s).expect("target")),
        (NodeKind::Symlink, b"a".to_vec())
    );
    let implicit = at(&t, "e").expect("e");
    assert_eq!(
        (implicit.mode, implicit.uid, implicit.mtime),
        (0o700, 9, (7, 0))
    );
    assert_eq!(t.path_of(at(&t, "e/f").expect("e/f").id), b"e/f");
    assert!(at(&t, "d/zz").is_none());
    // Nodes are numbered as the archive makes them: d's first members in a row.
    let d = at(&t, "d").expect("d");
    let kids = t.dirents(&d, 0, 100).expect("list");
    let ids: Vec<u32> = kids.iter().map(|k| k.node).collect();
    assert_eq!(ids, [a.id, t.node(ids[1]).expect("b").id, a.id, s.id]);
    assert_eq!((a.id, s.id), (d.id + 1, d.id + 3));
    assert_eq!(t.node(d.id).expect("d").parent, 0);
}

#[test]
fn a_large_directory_is_searched() {
    let mut entries = vec![member("big/", Kind::Dir)];
    for i in 0..3000 {
        entries.push(file(&format!("big/f{i:05}"), 512 * i, 1));
    }
    let (t, skipped) = table_of(&entries);
    assert!(skipped.is_empty());
    let big = at(&t, "big").expect("big");
    assert_eq!(big.b, 3000);
    for i in [0u64, 1, 1499, 2999] {
        assert_eq!(at(&t, &format!("big/f{i:05}")).expect("found").a, 512 * i);
    }
    assert!(at(&t, "big/f03000").is_none());
    assert!(at(&t, "big/a").is_none());
}

#[test]
fn every_damaged_byte_is_refused_or_harmless() {
    let entries = vec![
        member("d/", Kind::Dir),
        file("d/a", 512, 10),
        link("d/s", Kind::Symlink, "a"),
        IndexEntry {
            runs: vec![(0, 4096), (8192, 4096)],
            stored: 8192,
            size: 16384,
            xattrs: vec![(b"user.x".to_vec(), b"v".to_vec())],
            ..file("d/sparse", 4096, 8192)
        },
    ];
    let mut b = TreeBuilder::new(DEFAULTS);
    for e in &entries {
        b.add(e).expect("add");
    }
    let mut bytes = Vec::new();
    b.write(1 << 20, &mut bytes).expect("write");
    assert!(open_bytes(&bytes, true).is_ok());
    for i in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0x41;
        assert!(
            open_bytes(&bad, true).is_err(),
            "byte {i} flipped passed the checks"
        );
        // One page holds the whole table: opened to be checked as read, the root's
        // read checks it.
        assert!(
            open_paged(&bad).is_err(),
            "byte {i} flipped passed the page checks"
        );
        // Without the body checksum every read must still be checked, never panic.
        if let Ok(t) = open_bytes(&bad, false) {
            walk(&t, 0, 0);
        }
    }
    assert!(open_bytes(&bytes[..bytes.len() - 1], true).is_err());
    assert!(open_bytes(&bytes[1..], true).is_err());
}

/// A table opened page by page answers as one checked whole; a byte flipped in one
/// page fails the reads of that page only (no lookup gives another answer), and one
/// flipped in the page sums fails the opening.
#[test]
fn a_table_read_page_by_page_checks_the_pages_it_reads() {
    let mut entries = vec![member("big/", Kind::Dir)];
    for i in 0..3000 {
        entries.push(file(&format!("big/f{i:05}"), 512 * i, 1));
    }
    let mut b = TreeBuilder::new(DEFAULTS);
    for e in &entries {
        b.add(e).expect("add");
    }
    let mut bytes = Vec::new();
    b.write(1 << 32, &mut bytes).expect("write");
    let whole = open_bytes(&bytes, true).expect("open");
    let records = whole.trailer().records_len().expect("records") as usize;
    assert!(records > 4 * PAGE_LEN as usize, "several pages: {records}");
    let names: Vec<String> = (0..3000)
        .step_by(7)
        .map(|i| format!("big/f{i:05}"))
        .collect();
    let paged = open_paged(&bytes).expect("open paged");
    for name in &names {
        assert_eq!(at(&paged, name), at(&whole, name), "{name}");
    }
    // A node in the middle, whose page holds nodes only: the root and big/ lie in the
    // first page, dirents and names in the last ones, so it opens and lookups run.
    let mid_node = (whole.len() as usize / 2) * NODE_LEN as usize;
    let mut bad = bytes.clone();
    bad[mid_node + 40] ^= 1;
    let t = open_paged(&bad).expect("the damage is in a page not read yet");
    let mut failed = 0;
    for name in &names {
        let d = t.lookup(&t.node(0).expect("root"), b"big").expect("big");
        let big = t.node(d.expect("big").node).expect("big's node");
        let leaf = name.strip_prefix("big/").expect("in big").as_bytes();
        match t
            .lookup(&big, leaf)
            .and_then(|d| t.node(d.expect("listed").node))
        {
            Ok(n) => assert_eq!(Some(n), at(&whole, name), "{name}: another answer"),
            Err(e) => {
                assert!(e.0.contains("checksum mismatch"), "{e}");
                failed += 1;
            }
        }
    }
    assert!(failed > 0, "no lookup read the damaged page");
    assert!(failed < names.len(), "every lookup failed");
    // The sums themselves.
    let mut bad = bytes.clone();
    bad[records + 3] ^= 1;
    assert!(open_paged(&bad).is_err());
}

/// Reads everything reachable, ignoring errors (bounded depth).
fn walk(t: &Table, id: u32, depth: usize) {
    let Ok(n) = t.node(id) else { return };
    let _ = t.extras(&n);
    let _ = t.name(&n);
    let _ = t.path_of(id);
    if n.kind == NodeKind::Symlink {
        let _ = t.target(&n);
    }
    if n.kind == NodeKind::Dir && depth < 8 {
        for d in t.dirents(&n, 0, 64).unwrap_or_default() {
            let _ = t.lookup(&n, &d.name);
            walk(t, d.node, depth + 1);
        }
    }
}

#[test]
fn a_builder_that_spills_to_files_writes_the_same_table() {
    let mut entries = vec![member("./", Kind::Dir), member("big/", Kind::Dir)];
    for i in 0..2000 {
        entries.push(IndexEntry {
            xattrs: vec![(b"user.i".to_vec(), i.to_string().into_bytes())],
            ..file(&format!("big/f{i:05}"), 512 * i, 1)
        });
    }
    entries.push(link("big/s", Kind::Symlink, "f00001"));
    // Directories given again once their records have moved to the file.
    entries.push(IndexEntry {
        mode: 0o700,
        ..member("big/", Kind::Dir)
    });
    entries.push(IndexEntry {
        mode: 0o750,
        ..member("./", Kind::Dir)
    });
    let written = |limit: usize| {
        let mut b = TreeBuilder::with_memory(DEFAULTS, limit);
        for e in &entries {
            b.add(e).expect("add");
        }
        let mut out = Vec::new();
        b.write(1 << 32, &mut out).expect("write");
        out
    };
    let held = written(1 << 30);
    for limit in [1, 100, 4096] {
        assert!(
            written(limit) == held,
            "spilling at {limit} bytes changed the table"
        );
    }
    let t = open_bytes(&held, true).expect("open");
    assert_eq!(t.node(0).expect("root").mode, 0o750);
    assert_eq!(at(&t, "big").expect("big").mode, 0o700);
    let f = at(&t, "big/f01999").expect("f01999");
    assert_eq!(t.extras(&f).expect("extras").xattrs[0].1, b"1999");
    assert_eq!(
        t.target(&at(&t, "big/s").expect("s")).expect("target"),
        b"f00001"
    );
}

/// The table [`TreeBuilder`] writes for `entries`.
fn general_table(entries: &[IndexEntry]) -> Vec<u8> {
    general_table_with(entries, DEFAULTS)
}

/// The table [`TreeBuilder`] writes for `entries` with `defaults`.
fn general_table_with(entries: &[IndexEntry], defaults: DirDefaults) -> Vec<u8> {
    let mut b = TreeBuilder::new(defaults);
    for e in entries {
        let _ = b.add(e);
    }
    let mut out = Vec::new();
    b.write(1 << 32, &mut out).expect("write");
    out
}

/// The table the lean builder writes for `entries`, sorting in runs of `run_bytes`;
/// None when it gives up.
fn lean_table(entries: &[IndexEntry], run_bytes: usize) -> Option<Vec<u8>> {
    let targets = entries
        .iter()
        .filter(|e| e.kind == Kind::HardLink)
        .filter_map(|e| crate::read::convert::safe_path(&e.link).ok())
        .map(|p| p.as_bytes().into())
        .collect();
    let mut b = lean::LeanBuilder::new(DEFAULTS, targets).with_run_bytes(run_bytes);
    for e in entries {
        b.add(e).ok()?;
    }
    let mut out = Vec::new();
    let written = b.write(1 << 32, &mut out).expect("write").ok()?;
    assert_eq!(written, out.len() as u64);
    Some(out)
}

/// A tree as `pack` writes it (every path once, directories before what they hold,
/// hardlinks after their targets), with every kind, xattrs, sparse runs, directories
/// never named, and some hardlinks that cannot resolve; seeded.
fn pack_like(seed: u64, members: usize) -> Vec<IndexEntry> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut out = vec![member("./", Kind::Dir)];
    let mut dirs = vec![String::new()];
    let mut files: Vec<String> = Vec::new();
    for i in 0..members {
        let parent = dirs[rng.usize(..dirs.len())].clone();
        let name = format!("{parent}{}{i}", ["n", "Z", "a.b", "é"][rng.usize(..4)]);
        let e = match rng.u8(..12) {
            0 | 1 => {
                dirs.push(format!("{name}/"));
                member(&name, Kind::Dir)
            }
            // A directory the archive never names: only a member below it.
            2 => {
                dirs.push(format!("{name}/"));
                file(&format!("{name}/inner"), i as u64 * 512, 3)
            }
            3 => link(&name, Kind::Symlink, "../somewhere"),
            4 => member(&name, Kind::Fifo),
            5 if !files.is_empty() => {
                let target = files[rng.usize(..files.len())].clone();
                link(&name, Kind::HardLink, &target)
            }
            6 => link(&name, Kind::HardLink, "missing/target"),
            7 => IndexEntry {
                xattrs: vec![(b"user.k".to_vec(), vec![rng.u8(..); rng.usize(..40)])],
                runs: vec![(0, 4096), (8192, 100)],
                ..file(&name, i as u64 * 512, 8292)
            },
            _ => file(&name, i as u64 * 512, rng.u64(..100_000)),
        };
        if matches!(e.kind, Kind::File) && !e.path.ends_with(b"/inner") {
            files.push(name.clone());
        }
        out.push(e);
    }
    // A directory given again after its members only updates its metadata.
    if let Some(d) = dirs.get(1) {
        out.push(IndexEntry {
            mode: 0o711,
            ..member(d.trim_end_matches('/'), Kind::Dir)
        });
    }
    out
}

/// The table `write_tree` writes for `entries` (lean where it can), and the one
/// [`TreeBuilder`] writes with the defaults `write_tree` takes from the first entry.
fn chosen_and_general(entries: &[IndexEntry]) -> (Vec<u8>, Vec<u8>) {
    let mut chosen = Vec::new();
    crate::index::write_tree(|| entries.iter().cloned().map(Ok), 1 << 32, &mut chosen)
        .expect("write_tree");
    let first = entries
        .first()
        .cloned()
        .unwrap_or_else(|| member("x", Kind::File));
    let defaults = DirDefaults {
        mode: 0o755,
        uid: if entries.is_empty() { 0 } else { first.uid },
        gid: if entries.is_empty() { 0 } else { first.gid },
        mtime: if entries.is_empty() {
            (0, 0)
        } else {
            first.mtime
        },
    };
    (chosen, general_table_with(entries, defaults))
}

#[test]
fn the_lean_builder_writes_the_table_the_general_one_writes() {
    for (seed, members) in [(1, 0), (2, 1), (3, 50), (4, 3000), (5, 20_000)] {
        let entries = pack_like(seed, members);
        let general = general_table(&entries);
        for run_bytes in [1, 4096, 1 << 30] {
            let lean = lean_table(&entries, run_bytes)
                .unwrap_or_else(|| panic!("seed {seed}: the lean builder gave up"));
            assert!(
                lean == general,
                "seed {seed}, runs of {run_bytes} bytes: the tables differ"
            );
        }
        let (chosen, general) = chosen_and_general(&entries);
        assert!(chosen == general, "seed {seed}: write_tree's table differs");
    }
}

#[test]
fn a_name_given_twice_falls_back_to_the_general_builder() {
    let cases: Vec<Vec<IndexEntry>> = vec![
        vec![file("a", 0, 1), file("a", 512, 2)],
        vec![file("a", 0, 1), member("a", Kind::Dir), file("a/b", 512, 1)],
        vec![member("a", Kind::Dir), file("a/b", 0, 1), file("a", 512, 1)],
        vec![file("a", 0, 1), file("a/b", 512, 1)],
        vec![link("a", Kind::Symlink, "x"), file("a/b", 512, 1)],
        vec![
            file("t", 0, 1),
            member("d", Kind::Dir),
            link("d", Kind::HardLink, "t"),
        ],
        vec![file("d/x", 0, 1), file("d", 512, 1), file("d/y", 1024, 1)],
    ];
    for (i, entries) in cases.iter().enumerate() {
        assert!(
            lean_table(entries, 1 << 30).is_none(),
            "case {i}: the lean builder took a name given twice"
        );
        let (chosen, general) = chosen_and_general(entries);
        assert!(chosen == general, "case {i}: the tables differ");
    }
}

/// Issue 33: the table keeps the owner's names beside the archive's numbers, and the
/// tree shown goes by the names this machine has (as root), symlinks 0777.
#[test]
fn owner_names_are_kept_and_decide_the_owner_shown() {
    use crate::index::Names;
    let named = |user: &str, group: &str| {
        Some(Names {
            user: Some(user.as_bytes().to_vec()),
            group: Some(group.as_bytes().to_vec()),
        })
    };
    let entries = [
        IndexEntry {
            names: named("root", "no such group here"),
            uid: 501,
            gid: 20,
            ..file("f", 512, 3)
        },
        IndexEntry {
            names: named("", "root"),
            mode: 0o755,
            ..link("l", Kind::Symlink, "f")
        },
        // Without names (an old table, or a v7 archive): the numbers.
        file("n", 1024, 3),
    ];
    let (t, skipped) = table_of(&entries);
    assert!(skipped.is_empty(), "{skipped:?}");
    let node = |p| at(&t, p).expect(p);
    let x = t.extras(&node("f")).expect("extras");
    assert_eq!(
        (&x.user[..], &x.group[..]),
        (&b"root"[..], &b"no such group here"[..])
    );
    assert_eq!(
        t.extras(&node("n")).expect("extras"),
        read::Extras::default()
    );
    let by_name = Here::by_name(true);
    let shown = |h: &Here, p| h.node(&t, &node(p)).expect("shown");
    assert_eq!(
        shown(&by_name, "f"),
        Shown {
            mode: 0o644,
            uid: 0,
            gid: 20
        }
    );
    assert_eq!(
        shown(&by_name, "l"),
        Shown {
            mode: 0o777,
            uid: 1,
            gid: 0
        }
    );
    assert_eq!(
        shown(&by_name, "n"),
        Shown {
            mode: 0o644,
            uid: 1,
            gid: 2
        }
    );
    let numeric = Here::by_name(false);
    assert_eq!(
        shown(&numeric, "f"),
        Shown {
            mode: 0o644,
            uid: 501,
            gid: 20
        }
    );
    assert_eq!(shown(&numeric, "l").mode, 0o777);
}

/// Issue 33: a directory the archive needs but never names is marked so, and shown as
/// `mkdir` makes it here; one a later member names is not.
#[test]
fn directories_the_archive_never_names_are_shown_as_mkdir_makes_them() {
    let entries = [
        file("a/b/f", 512, 3),
        file("c/f", 1024, 3),
        member("c", Kind::Dir),
    ];
    let (t, _) = table_of(&entries);
    let node = |p| at(&t, p).expect(p);
    assert!(t.node(0).expect("root").made, "the root no member names");
    assert!(node("a").made && node("a/b").made);
    assert!(!node("c").made, "named after its file");
    assert!(!node("a/b/f").made);
    let here = Here::by_name(false);
    let a = here.node(&t, &node("a")).expect("shown");
    assert_eq!(
        (a.uid, a.gid),
        (
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw()
        )
    );
    assert_eq!(
        a.mode & !0o777,
        0,
        "no setuid, setgid or sticky: {:o}",
        a.mode
    );
    let c = here.node(&t, &node("c")).expect("shown");
    assert_eq!((c.mode, c.uid, c.gid), (0o755, 1, 2));
}
