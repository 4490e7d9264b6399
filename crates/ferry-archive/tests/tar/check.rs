//! Checks an archive made by a real tar program against the tree it was made from:
//! every entry's fields and data, every path of the tree present, offsets exact.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use ferry_archive::tar::{TarEntry, TarKind};

use crate::common::{logical, read_all};
use crate::tree::{self, Tree};

/// How a format carries nanoseconds.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub enum Nanos {
    /// Never: they read as 0.
    #[default]
    Zero,
    /// Always (pax with a time record on every entry).
    Exact,
    /// Only on entries that need a pax header anyway (bsdtar's restricted pax).
    Some,
}

/// What the format under test can carry.
#[derive(Clone, Copy, Default)]
pub struct Expect {
    /// Nanosecond times.
    pub nanos: Nanos,
    /// Times before 1970 (bsdtar's gnutar writer stores 0 instead).
    pub negative_times: bool,
    /// User xattrs.
    pub xattrs: bool,
    /// Owner names (not v7).
    pub names: bool,
    /// Files with holes must come as sparse entries.
    pub sparse: bool,
}

/// Reads `archive` and checks it against `tree`; returns the entries read.
pub fn check_archive(archive: &[u8], tree: &Tree, expect: Expect) -> Vec<TarEntry> {
    let entries = read_all(archive).unwrap_or_else(|e| panic!("reading the archive: {e}"));
    let mut seen = BTreeSet::new();
    for (entry, stored) in &entries {
        check_offsets(archive, entry, stored);
        let rel = relative(&entry.path);
        if rel.is_empty() {
            assert_eq!(entry.kind, TarKind::Dir, "root entry");
            continue;
        }
        check_entry(tree, &rel, entry, stored, expect);
        seen.insert(rel);
    }
    let mut all = Vec::new();
    tree::walk(&tree.root, &mut all);
    for p in all {
        let rel = p
            .strip_prefix(&tree.root)
            .unwrap()
            .as_os_str()
            .as_bytes()
            .to_vec();
        assert!(
            seen.contains(&rel),
            "{:?} missing from the archive",
            String::from_utf8_lossy(&rel)
        );
    }
    entries.into_iter().map(|(e, _)| e).collect()
}

/// The path without `./` and trailing `/`.
pub fn relative(path: &[u8]) -> Vec<u8> {
    let p = path.strip_prefix(b"./").unwrap_or(path);
    let p = if p == b"." { &b""[..] } else { p };
    p.strip_suffix(b"/").unwrap_or(p).to_vec()
}

/// The stored data is the archive's bytes at `data_offset`; offsets are on blocks.
fn check_offsets(archive: &[u8], entry: &TarEntry, stored: &[u8]) {
    assert_eq!(entry.header_offset % 512, 0);
    assert_eq!(entry.data_offset % 512, 0);
    assert!(entry.data_offset > entry.header_offset);
    assert_eq!(stored.len() as u64, entry.stored);
    let at = entry.data_offset as usize;
    assert_eq!(
        &archive[at..at + stored.len()],
        stored,
        "data_offset of {:?}",
        entry.path
    );
}

fn check_entry(tree: &Tree, rel: &[u8], entry: &TarEntry, stored: &[u8], expect: Expect) {
    let name = String::from_utf8_lossy(rel).into_owned();
    let path = tree.path(rel);
    let md = fs::symlink_metadata(&path).unwrap();
    assert_eq!(entry.kind, kind_of(&md, entry.kind), "{name}: kind");
    assert_eq!(entry.mode, md.mode() & 0o7777, "{name}: mode");
    assert_eq!((entry.uid, entry.gid), (md.uid(), md.gid()), "{name}: ids");
    if expect.names && md.uid() == 0 {
        assert_eq!(entry.uname.as_deref(), Some(&b"root"[..]), "{name}: uname");
        assert_eq!(entry.gname.as_deref(), Some(&b"root"[..]), "{name}: gname");
    }
    check_mtime(entry, &md, expect, &name);
    match entry.kind {
        TarKind::File => check_file(&path, entry, stored, expect, &name),
        TarKind::HardLink => check_hardlink(tree, &md, entry, &name),
        TarKind::Symlink => {
            let target = fs::read_link(&path).unwrap();
            assert_eq!(
                entry.link_target.as_deref(),
                Some(target.as_os_str().as_bytes()),
                "{name}"
            );
        }
        TarKind::CharDevice | TarKind::BlockDevice => {
            let rdev = md.rdev();
            let want = (rustix::fs::major(rdev), rustix::fs::minor(rdev));
            assert_eq!(entry.rdev, Some(want), "{name}: rdev");
        }
        TarKind::Dir | TarKind::Fifo => assert_eq!(entry.size, 0),
    }
    // A hard link's xattrs belong to its first entry (GNU tar writes none on the link).
    if expect.xattrs && entry.kind != TarKind::HardLink {
        assert_eq!(user_xattrs_of(entry), user_xattrs(&path), "{name}: xattrs");
    }
}

fn check_mtime(entry: &TarEntry, md: &fs::Metadata, expect: Expect, name: &str) {
    let secs = if md.mtime() < 0 && !expect.negative_times {
        0
    } else {
        md.mtime()
    };
    let exact = (secs, md.mtime_nsec() as u32);
    let whole = (secs, 0);
    let ok = match expect.nanos {
        Nanos::Zero => entry.mtime == whole,
        Nanos::Exact => entry.mtime == exact,
        Nanos::Some => entry.mtime == exact || entry.mtime == whole,
    };
    assert!(ok, "{name}: mtime {:?}, file has {exact:?}", entry.mtime);
}

fn kind_of(md: &fs::Metadata, got: TarKind) -> TarKind {
    let ft = md.file_type();
    if ft.is_file() {
        if got == TarKind::HardLink && md.nlink() > 1 {
            TarKind::HardLink
        } else {
            TarKind::File
        }
    } else if ft.is_dir() {
        TarKind::Dir
    } else if ft.is_symlink() {
        TarKind::Symlink
    } else if ft.is_fifo() {
        TarKind::Fifo
    } else if ft.is_char_device() {
        TarKind::CharDevice
    } else {
        TarKind::BlockDevice
    }
}

fn check_file(path: &Path, entry: &TarEntry, stored: &[u8], expect: Expect, name: &str) {
    let content = fs::read(path).unwrap();
    assert_eq!(entry.size, content.len() as u64, "{name}: size");
    assert!(logical(entry, stored) == content, "{name}: content differs");
    if expect.sparse && has_holes(path) {
        assert!(entry.sparse.is_some(), "{name}: expected a sparse entry");
    }
    if let Some(runs) = &entry.sparse {
        assert_eq!(
            runs.iter().map(|r| r.1).sum::<u64>(),
            entry.stored,
            "{name}: runs"
        );
    }
}

fn has_holes(path: &Path) -> bool {
    let md = fs::metadata(path).unwrap();
    md.blocks() * 512 < md.len()
}

fn check_hardlink(tree: &Tree, md: &fs::Metadata, entry: &TarEntry, name: &str) {
    let target = relative(entry.link_target.as_deref().unwrap());
    let tmd = fs::symlink_metadata(tree.path(&target)).unwrap();
    assert_eq!(
        tmd.ino(),
        md.ino(),
        "{name}: hardlink target is another file"
    );
    assert_eq!((entry.size, entry.stored), (0, 0));
}

type Xattrs = Vec<(Vec<u8>, Vec<u8>)>;

fn user_xattrs_of(entry: &TarEntry) -> Xattrs {
    let mut x: Xattrs = entry
        .xattrs
        .iter()
        .filter(|(n, _)| n.starts_with(b"user."))
        .cloned()
        .collect();
    x.sort();
    x
}

/// The `user.` xattrs of `path` (not following symlinks), sorted.
pub fn user_xattrs(path: &Path) -> Xattrs {
    let mut names = [0u8; 4096];
    let n = rustix::fs::llistxattr(path, &mut names[..]).unwrap_or(0);
    let mut out = Vec::new();
    for name in names[..n]
        .split(|&c| c == 0)
        .filter(|n| n.starts_with(b"user."))
    {
        let mut value = [0u8; 4096];
        let cname = std::ffi::CString::new(name).unwrap();
        let len = rustix::fs::lgetxattr(path, cname.as_c_str(), &mut value[..]).unwrap();
        out.push((name.to_vec(), value[..len].to_vec()));
    }
    out.sort();
    out
}
