//! `ls` and `cat`: members from the index of a ferry archive (without reading the tar
//! data), or from one scan of any other tar.

use super::archive::{tar_kind, Archive, ArchiveError};
use super::convert::{runs_of, safe_path};
use crate::index::IndexEntry;
use crate::tar::{Reader, TarEntry, TarKind};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;

/// What a listing shows of one member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// The path as the archive stores it.
    pub path: Vec<u8>,
    /// Its kind.
    pub kind: TarKind,
    /// Permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Modification time (seconds, nanoseconds).
    pub mtime: (i64, u32),
    /// Logical size.
    pub size: u64,
    /// Symlink or hardlink target.
    pub link: Vec<u8>,
}

impl From<&IndexEntry> for Member {
    fn from(e: &IndexEntry) -> Member {
        Member {
            path: e.path.clone(),
            kind: tar_kind(e.kind),
            mode: e.mode,
            uid: e.uid,
            gid: e.gid,
            mtime: e.mtime,
            size: e.size,
            link: e.link.clone(),
        }
    }
}

impl From<&TarEntry> for Member {
    fn from(t: &TarEntry) -> Member {
        Member {
            path: t.path.clone(),
            kind: t.kind,
            mode: t.mode,
            uid: t.uid,
            gid: t.gid,
            mtime: t.mtime,
            size: t.size,
            link: t.link_target.clone().unwrap_or_default(),
        }
    }
}

/// Calls `each` for every member of an archive file: from its index if it has one.
pub fn list(
    archive: &Archive,
    mut each: impl FnMut(&Member) -> io::Result<()>,
) -> Result<(), ArchiveError> {
    match archive.entries() {
        Some(entries) => {
            for e in entries {
                each(&Member::from(&e?))?;
            }
            Ok(())
        }
        None => list_stream(archive.scan(), each),
    }
}

/// Calls `each` for every member of a tar stream.
pub fn list_stream(
    input: impl Read,
    mut each: impl FnMut(&Member) -> io::Result<()>,
) -> Result<(), ArchiveError> {
    let mut reader = Reader::new(input);
    while let Some(t) = reader.next_entry()? {
        each(&Member::from(&t))?;
    }
    Ok(())
}

/// Why `cat` printed nothing.
fn not_found(what: &str) -> ArchiveError {
    ArchiveError::Io(io::Error::new(io::ErrorKind::NotFound, what.to_string()))
}

/// Writes the content of member `path` (compared after making both paths safe) to
/// `out`. In a ferry archive only that member is read.
pub fn cat(archive: &Archive, path: &[u8], out: &mut dyn Write) -> Result<(), ArchiveError> {
    let want = safe_path(path).map_err(not_found)?;
    if archive.index().is_none() {
        return cat_stream(archive.scan(), path, out);
    }
    // The last member of that name, as an extraction would leave it.
    let find = |p: &[u8]| -> Result<Option<IndexEntry>, ArchiveError> {
        let mut found = None;
        for e in archive.entries().into_iter().flatten() {
            let e = e?;
            if safe_path(&e.path).is_ok_and(|q| q.as_bytes() == p) {
                found = Some(e);
            }
        }
        Ok(found)
    };
    let mut e = find(want.as_bytes())?.ok_or_else(|| not_found("no such member"))?;
    if e.kind == crate::index::Kind::HardLink {
        let target = safe_path(&e.link).map_err(not_found)?;
        e = find(target.as_bytes())?.ok_or_else(|| not_found("hardlink target is missing"))?;
    }
    if e.kind != crate::index::Kind::File {
        return Err(not_found("not a regular file"));
    }
    archive.check_member(&e)?;
    let runs = runs_of(e.sparse_map(), e.size);
    let mut stored_at = e.data_offset;
    write_runs(&runs, e.size, out, |buf| {
        archive.file().read_exact_at(buf, stored_at)?;
        stored_at += buf.len() as u64;
        Ok(())
    })
}

/// Writes a file given as runs: zeros for the holes, the runs' bytes from `read`.
fn write_runs(
    runs: &[(u64, u64)],
    size: u64,
    out: &mut dyn Write,
    mut read: impl FnMut(&mut [u8]) -> io::Result<()>,
) -> Result<(), ArchiveError> {
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = 0u64;
    let zeros = |out: &mut dyn Write, mut n: u64| -> io::Result<()> {
        let z = [0u8; 8192];
        while n > 0 {
            let k = n.min(z.len() as u64) as usize;
            out.write_all(&z[..k])?;
            n -= k as u64;
        }
        Ok(())
    };
    for &(off, len) in runs {
        zeros(out, off - pos)?;
        let mut left = len;
        while left > 0 {
            let k = left.min(buf.len() as u64) as usize;
            read(&mut buf[..k])?;
            out.write_all(&buf[..k])?;
            left -= k as u64;
        }
        pos = off + len;
    }
    zeros(out, size - pos)?;
    Ok(())
}

/// `cat` on a tar stream. tar lets a later member of the same name win, but a stream
/// cannot be read twice, so the first regular file of that name is printed.
pub fn cat_stream(input: impl Read, path: &[u8], out: &mut dyn Write) -> Result<(), ArchiveError> {
    let want = safe_path(path).map_err(not_found)?;
    let mut reader = Reader::new(input);
    while let Some(t) = reader.next_entry()? {
        if t.kind != TarKind::File || !safe_path(&t.path).is_ok_and(|p| p == want) {
            continue;
        }
        let runs = t.sparse.clone().unwrap_or_else(|| vec![(0, t.size)]);
        let mut data = reader.data();
        return write_runs(&runs, t.size, out, |buf| data.read_exact(buf));
    }
    Err(not_found("no such member"))
}
