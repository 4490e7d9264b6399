//! `cat` of a tar read once, from its start (a stream, a compressed archive, a tar file
//! without an index): of each name asked for, the LAST member is printed, as `unpack`,
//! the mount and GNU tar leave it after `tar -r` or `-u` appended a newer one.
//!
//! The stream cannot be read twice, so the stored bytes of each member of a name asked
//! for are kept in an unnamed temporary file (in `TMPDIR`) until a later member of the
//! name replaces them, and printed once the tar data has ended: what is kept is what the
//! archive stores (a sparse member's holes cost nothing). A header found damaged after
//! members asked for were found ends the search with a warning, and those are printed.

use super::archive::ArchiveError;
use super::convert::safe_path;
use super::list::{not_a_file, refused, wanted, write_runs, Hashing};
use super::tail::StreamHashes;
use crate::tar::{Reader, TarEntry, TarKind};
use ferry_core::content::ContentHash;
use ferry_core::entry::RelPath;
use ferry_core::error::Reporter;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;

/// The last member found of a name asked for.
enum Found {
    /// A regular file: its stored bytes, kept.
    File(Kept),
    /// A hardlink to this target.
    Link(Vec<u8>),
    /// Another kind, which `cat` does not print.
    Other(TarKind),
}

/// A regular file's stored bytes in a temporary file, and how to lay them out.
struct Kept {
    file: File,
    runs: Vec<(u64, u64)>,
    size: u64,
    header_offset: u64,
}

/// Prints the last member of each of `paths` (compared after making both paths safe),
/// in the order given, from the tar `input`; a hardlink's target is looked for in the
/// fresh stream of the same archive `again` gives (told the target), or `again` says
/// why there is none. Reads the tar data to its end. Returns the hashes of what was
/// printed from `input`, for [`check_tail`](super::tail::check_tail) to compare with a
/// ferry archive's index; None if the tar data was found damaged after the members
/// printed (reported to `reporter`: there is no end to check past). A name not found,
/// or not a file, is an error, after the others are printed.
pub fn cat_stream<R: Read, Again: Read>(
    input: R,
    paths: &[&[u8]],
    out: &mut dyn Write,
    mut again: impl FnMut(&[u8]) -> Result<Again, ArchiveError>,
    reporter: &dyn Reporter,
) -> Result<Option<StreamHashes>, ArchiveError> {
    let asked = paths
        .iter()
        .map(|p| wanted(p))
        .collect::<Result<Vec<_>, _>>()?;
    let (found, end) = find_last(input, &asked, reporter)?;
    let mut printed_files = Vec::new();
    let mut first_error = None;
    for (path, found) in paths.iter().zip(found) {
        let printed = match found {
            None => Err(refused(path, "no such member")),
            Some(Found::File(kept)) => {
                print(kept, out).map(|(at, h)| printed_files.push((at, h, path.to_vec())))
            }
            Some(Found::Other(kind)) => Err(not_a_file(path, kind)),
            Some(Found::Link(target)) => print_target(path, &target, out, &mut again, reporter),
        };
        if let Err(e) = printed {
            first_error.get_or_insert(e);
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    // Noted in archive order, as the check after the stream goes through them, each
    // under the name asked for.
    printed_files.sort_by_key(|(at, ..)| *at);
    let mut hashes = StreamHashes::default();
    for (at, hash, name) in printed_files {
        hashes.push(at, hash, &name);
    }
    Ok(end.map(|end| {
        hashes.set_tar_end(end);
        hashes
    }))
}

/// Prints the file a hardlink `link` points to, `target`, from a fresh stream.
fn print_target<Again: Read>(
    link: &[u8],
    target: &[u8],
    out: &mut dyn Write,
    again: &mut impl FnMut(&[u8]) -> Result<Again, ArchiveError>,
    reporter: &dyn Reporter,
) -> Result<(), ArchiveError> {
    let shown = RelPath::from_bytes(target.to_vec());
    let about =
        |why: &dyn std::fmt::Display| refused(link, format!("a hardlink to {shown}: {why}"));
    let asked = [wanted(target).map_err(|e| about(&e))?];
    // The target's data is in the other stream: nothing of it to check against this one.
    let (mut found, _) = find_last(again(target)?, &asked, reporter)?;
    match found.pop().flatten() {
        Some(Found::File(kept)) => print(kept, out).map(drop),
        Some(Found::Link(_)) => Err(about(&"not a regular file but a hardlink")),
        Some(Found::Other(kind)) => Err(about(&not_a_file(target, kind))),
        None => Err(about(&"no such member")),
    }
}

/// Reads `input` to the end of its tar data, keeping the last member of each name in
/// `asked`; returns them and the end of the tar data (None: damaged after a member
/// asked for was found, which is reported).
fn find_last(
    input: impl Read,
    asked: &[RelPath],
    reporter: &dyn Reporter,
) -> Result<(Vec<Option<Found>>, Option<u64>), ArchiveError> {
    let mut found: Vec<Option<Found>> = asked.iter().map(|_| None).collect();
    let mut reader = Reader::new(input);
    loop {
        let next = reader.next_entry();
        super::warnings::report(&mut reader, reporter);
        let t = match next {
            Ok(Some(t)) => t,
            Ok(None) => return Ok((found, Some(reader.offset()))),
            Err(e) if found.iter().any(Option::is_some) => {
                reporter.warn(&format!(
                    "{e}: the archive is damaged there; the members asked for that came \
                     before are printed"
                ));
                return Ok((found, None));
            }
            Err(e) => return Err(e.into()),
        };
        let Some(i) = safe_path(&t.path)
            .ok()
            .and_then(|p| asked.iter().position(|a| *a == p))
        else {
            continue;
        };
        found[i] = Some(match t.kind {
            TarKind::File => Found::File(keep(&t, &mut reader)?),
            TarKind::HardLink => Found::Link(t.link_target.clone().unwrap_or_default()),
            kind => Found::Other(kind),
        });
    }
}

/// Copies the stored bytes of file member `t` to a temporary file.
fn keep<R: Read>(t: &TarEntry, reader: &mut Reader<R>) -> Result<Kept, ArchiveError> {
    let mut file = tempfile::tempfile()?;
    let copied = io::copy(&mut reader.data(), &mut file)?;
    if copied != t.stored {
        return Err(refused(&t.path, "its data ended early"));
    }
    Ok(Kept {
        file,
        runs: t.sparse.clone().unwrap_or_else(|| vec![(0, t.size)]),
        size: t.size,
        header_offset: t.header_offset,
    })
}

/// Prints a kept file; returns its header offset and the hash of what was printed.
fn print(kept: Kept, out: &mut dyn Write) -> Result<(u64, u128), ArchiveError> {
    let mut out = Hashing {
        out,
        hash: ContentHash::new(),
    };
    write_runs(&kept.runs, kept.size, &mut out, |stored, buf| {
        kept.file.read_exact_at(buf, stored)
    })?;
    Ok((kept.header_offset, out.digest()))
}
