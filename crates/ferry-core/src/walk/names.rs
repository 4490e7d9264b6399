//! Reading a directory's names, with their kinds, in batches of bounded size.

use crate::entry::RelPath;
use crate::error::{Context, Result};
use rustix::fs::{self as rfs, AtFlags, FileType, RawDir};
use std::ffi::CString;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;

/// One name read from a directory.
pub(crate) struct Name {
    pub ino: u64,
    pub kind: FileType,
    pub name: CString,
}

/// At most this many names of one directory are held in memory at once, so a directory
/// of millions of entries costs no more memory than one of [`BATCH`].
pub const BATCH: usize = 16 * 1024;

/// Reads all names in a directory except `.` and `..`, with their types (looked up when
/// the filesystem does not report them), and hands them to `each` in batches of at most
/// [`BATCH`], each sorted by inode number.
pub(crate) fn read_names(
    dir: &OwnedFd,
    path: &RelPath,
    mut each: impl FnMut(Vec<Name>),
) -> Result<()> {
    let mut buf: Vec<MaybeUninit<u8>> = Vec::with_capacity(64 * 1024);
    buf.resize(64 * 1024, MaybeUninit::uninit());
    let mut raw = RawDir::new(dir, &mut buf);
    let mut names = Vec::new();
    let mut flush = |names: &mut Vec<Name>| {
        names.sort_unstable_by_key(|n| n.ino);
        each(std::mem::take(names));
    };
    while let Some(item) = raw.next() {
        let item = item.at(path, "read directory")?;
        let name = item.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let mut kind = item.file_type();
        if kind == FileType::Unknown {
            // Left unknown on failure: the leaf's own stat reports it.
            if let Ok(st) = rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                kind = FileType::from_raw_mode(st.st_mode);
            }
        }
        names.push(Name {
            ino: item.ino(),
            kind,
            name: name.to_owned(),
        });
        if names.len() == BATCH {
            flush(&mut names);
        }
    }
    if !names.is_empty() {
        flush(&mut names);
    }
    Ok(())
}
