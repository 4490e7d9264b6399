//! `ls` and `cat`: members from the index of a ferry archive (without reading the tar
//! data), or from one scan of any other tar; all of them, or those asked for.

use super::archive::{tar_kind, Archive, ArchiveError};
pub use super::cat_once::cat_stream;
use super::convert::{runs_of, safe_path};
use super::select::Selection;
use super::tail::report_cut_short;
use crate::index::{IndexEntry, Kind, Names};
use crate::tar::{Reader, TarEntry, TarKind};
use ferry_core::content::ContentHash;
use ferry_core::entry::RelPath;
use ferry_core::error::Reporter;
use std::collections::HashMap;
use std::io::{self, Read, Write};

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
    /// The owner's user and group names, where the archive gives them.
    pub names: Names,
    /// Modification time (seconds, nanoseconds).
    pub mtime: (i64, u32),
    /// Logical size.
    pub size: u64,
    /// Symlink or hardlink target.
    pub link: Vec<u8>,
    /// A device's major and minor numbers.
    pub device: Option<(u32, u32)>,
    /// The member continues a file from another volume of a multi-volume archive,
    /// from this byte of it (`M`, listed as GNU tar lists it, never extracted).
    pub continued_at: Option<u64>,
}

impl From<&IndexEntry> for Member {
    fn from(e: &IndexEntry) -> Member {
        Member {
            path: e.path.clone(),
            kind: tar_kind(e.kind),
            mode: e.mode,
            uid: e.uid,
            gid: e.gid,
            names: e.names.clone().unwrap_or_default(),
            mtime: e.mtime,
            size: e.size,
            link: e.link.clone(),
            device: matches!(e.kind, Kind::CharDevice | Kind::BlockDevice)
                .then(|| (rustix::fs::major(e.rdev), rustix::fs::minor(e.rdev))),
            continued_at: None,
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
            names: Names {
                user: t.uname.clone(),
                group: t.gname.clone(),
            },
            mtime: t.mtime,
            // What `tar -tv` lists: the size the header claims for a directory (a GNU
            // incremental one's names), symlink or fifo; none for a hardlink.
            size: match t.kind {
                TarKind::File => t.size,
                TarKind::HardLink => 0,
                _ => t.header_size,
            },
            link: t.link_target.clone().unwrap_or_default(),
            device: t.rdev,
            continued_at: None,
        }
    }
}

/// Whether `select` asks for the member stored as `path`. A path that could not be
/// unpacked (it reaches outside) is listed only when every member is.
fn selected(select: &Selection, path: &[u8]) -> bool {
    select.is_all() || safe_path(path).is_ok_and(|p| select.selects(&p))
}

/// Calls `each` for every member of an archive file that `select` asks for: from its
/// index if it has one.
/// An archive without an index that ends with no end-of-archive blocks is reported to
/// `reporter` as cut short (see [`report_cut_short`]).
pub fn list(
    archive: &Archive,
    select: &Selection,
    reporter: &dyn Reporter,
    mut each: impl FnMut(&Member) -> io::Result<()>,
) -> Result<(), ArchiveError> {
    match archive.entries() {
        Some(entries) => {
            for e in entries {
                let e = e?;
                if selected(select, &e.path) {
                    each(&Member::from(&e))?;
                }
            }
            Ok(())
        }
        None => list_stream(archive.scan(), select, reporter, each),
    }
}

/// Calls `each` for every member of a tar stream that `select` asks for; a stream
/// that ends with no end-of-archive blocks is reported to `reporter` as cut short.
pub fn list_stream(
    input: impl Read,
    select: &Selection,
    reporter: &dyn Reporter,
    mut each: impl FnMut(&Member) -> io::Result<()>,
) -> Result<(), ArchiveError> {
    let mut reader = Reader::new(input).listing();
    loop {
        let next = reader.next_entry();
        super::warnings::report(&mut reader, reporter);
        let Some(t) = next? else { break };
        if selected(select, &t.path) {
            let mut member = Member::from(&t);
            member.continued_at = reader.continued_at();
            each(&member)?;
        }
    }
    if reader.unterminated() {
        report_cut_short(reporter, reader.offset());
    }
    Ok(())
}

/// Why `cat` printed nothing: the member asked for, and what is wrong with it.
pub(crate) fn refused(path: &[u8], why: impl std::fmt::Display) -> ArchiveError {
    ArchiveError::Member {
        path: RelPath::from_bytes(path.to_vec()).to_string(),
        why: why.to_string(),
    }
}

/// The member path asked for, made safe as member paths are.
pub(crate) fn wanted(path: &[u8]) -> Result<RelPath, ArchiveError> {
    safe_path(path).map_err(|why| refused(path, why))
}

/// What a kind is called in a message.
fn kind_name(kind: TarKind) -> &'static str {
    match kind {
        TarKind::File => "a regular file",
        TarKind::Dir => "a directory",
        TarKind::Symlink => "a symlink",
        TarKind::HardLink => "a hardlink",
        TarKind::CharDevice => "a character device",
        TarKind::BlockDevice => "a block device",
        TarKind::Fifo => "a fifo",
    }
}

pub(crate) fn not_a_file(path: &[u8], kind: TarKind) -> ArchiveError {
    refused(path, format!("not a regular file but {}", kind_name(kind)))
}

/// Writes the content of member `path` (compared after making both paths safe) to
/// `out`, and for a hardlink the content of the file it links to. In a ferry archive
/// that is the last member of that name, as an extraction would leave it, and only it is
/// read, and checked against the content hash recorded when packing (`pack --hash`);
/// any other tar is scanned as [`cat_stream`] does (the last member of that name
/// printed), what the reader reads liberally reported to `reporter`.
pub fn cat(
    archive: &Archive,
    path: &[u8],
    out: &mut dyn Write,
    reporter: &dyn Reporter,
) -> Result<(), ArchiveError> {
    let want = wanted(path)?;
    if archive.index().is_none() {
        let again = |_: &[u8]| Ok(archive.scan());
        return cat_stream(archive.scan(), &[path], out, again, reporter).map(drop);
    }
    let (at, mut e) =
        last_named(archive, &want, u64::MAX)?.ok_or_else(|| refused(path, "no such member"))?;
    if e.kind == Kind::HardLink {
        let target = wanted(&e.link)?;
        e = last_named(archive, &target, at)?
            .ok_or_else(|| refused(path, format!("a hardlink to {target}: no such member")))?
            .1;
    }
    if e.kind != Kind::File {
        return Err(not_a_file(path, tar_kind(e.kind)));
    }
    archive.check_member(&e).map_err(|err| match err {
        ArchiveError::Io(io) => refused(path, format!("read its headers: {io}")),
        other => other,
    })?;
    let runs = runs_of(e.sparse_map(), e.size);
    let mut out = Hashing {
        out,
        hash: ContentHash::new(),
    };
    write_runs(&runs, e.size, &mut out, |stored, buf| {
        // Damaged data (a compressed archive's frame) is told with the member's name.
        archive
            .source()
            .read_exact_at(buf, e.data_offset + stored)
            .map_err(|e| io::Error::new(e.kind(), format!("member {want}: read its data: {e}")))
    })?;
    match e.hash {
        Some(recorded) if recorded != out.digest() => Err(refused(
            path,
            "content differs from the hash recorded when it was packed (printed anyway)",
        )),
        _ => Ok(()),
    }
}

/// Passes what is written on to `out`, hashing it.
pub(crate) struct Hashing<'w> {
    pub out: &'w mut dyn Write,
    pub hash: ContentHash,
}

impl Hashing<'_> {
    /// The content hash of what was written.
    pub fn digest(&self) -> u128 {
        self.hash.clone().finish(self.hash.at())
    }
}

impl Write for Hashing<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// The last index entry whose safe path is `path` that starts before index position
/// `before`, with its position.
fn last_named(
    archive: &Archive,
    path: &RelPath,
    before: u64,
) -> Result<Option<(u64, IndexEntry)>, ArchiveError> {
    let asked = HashMap::from([(path.clone(), before)]);
    Ok(archive
        .last_named(&asked, super::convert::Rename::NONE)?
        .remove(path))
}

/// Writes a file given as runs (any map: [`ferry_core::sparse::pieces`]): zeros for
/// the holes, the bytes of each piece from `read_at(stored offset, buffer)`.
pub(crate) fn write_runs(
    runs: &[(u64, u64)],
    size: u64,
    out: &mut dyn Write,
    mut read_at: impl FnMut(u64, &mut [u8]) -> io::Result<()>,
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
    for p in ferry_core::sparse::pieces(runs) {
        zeros(out, p.at - pos)?;
        let mut done = 0u64;
        while done < p.len {
            let k = (p.len - done).min(buf.len() as u64) as usize;
            read_at(p.stored + done, &mut buf[..k])?;
            out.write_all(&buf[..k])?;
            done += k as u64;
        }
        pos = p.at + p.len;
    }
    zeros(out, size - pos)?;
    Ok(())
}
