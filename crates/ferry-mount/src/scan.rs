//! Building the tree table of an archive that does not carry one: from a ferry
//! archive's index (from before the table), else by scanning the tar's headers,
//! skipping members' data by seeking; a compressed tar is decompressed once, keeping
//! seek points (ferry-seek) for random access afterwards.

use crate::source::clone;
use crate::MountError;
use ferry_archive::owners::LocalIds;
use ferry_archive::read::Archive;
use ferry_archive::tar::Reader;
use ferry_archive::tree::{entry_of_tar_here, DirDefaults, Skipped, TreeBuilder};
use ferry_seek::Indexing;
use std::fs::{File, Metadata};
use std::io::{BufReader, Read, Seek};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

/// How many skipped members are kept to be reported.
const SKIPPED_KEPT: usize = 1000;

/// A tree built from an archive, with what reading its data takes.
pub struct Built {
    /// The tree.
    pub builder: TreeBuilder,
    /// Members left out, and why (the first [`SKIPPED_KEPT`]).
    pub skipped: Vec<Skipped>,
    /// What the tar reader read liberally (a repeated extension header, a field it
    /// read as GNU tar does), and trailing garbage after compressed data: the warnings
    /// `unpack` gives (the first [`SKIPPED_KEPT`]).
    pub warnings: Vec<String>,
    /// End of the tar data (in the decompressed stream, for a compressed archive).
    pub data_end: u64,
    /// Compression code (0: none) and its seek points, as ferry-seek writes them.
    pub codec: u8,
    /// The seek points.
    pub seek: Vec<u8>,
    /// The ids ACLs' names have here, looked up once each.
    acl_ids: LocalIds,
}

/// The defaults for directories the archive needs but never names: the archive file's
/// owner and time, mode 0755.
fn defaults(meta: &Metadata) -> DirDefaults {
    DirDefaults {
        mode: 0o755,
        uid: meta.uid(),
        gid: meta.gid(),
        mtime: (meta.mtime(), meta.mtime_nsec() as u32),
    }
}

/// Builds the tree of the archive `file` (see the module's doc).
pub fn build(file: &File, meta: &Metadata, path: &Path) -> Result<Built, MountError> {
    let bad = |e: &dyn std::fmt::Display| MountError::at(path, e);
    let mut head = [0u8; 8];
    let n = file.read_at(&mut head, 0).map_err(|e| bad(&e))?;
    let mut built = Built {
        builder: TreeBuilder::new(defaults(meta)),
        skipped: Vec::new(),
        warnings: Vec::new(),
        data_end: 0,
        codec: 0,
        seek: Vec::new(),
        acl_ids: LocalIds::default(),
    };
    if let Some(codec) = ferry_seek::detect(&head[..n]) {
        let mut indexing = Indexing::new(clone(file, path)?, codec, ferry_seek::DEFAULT_SPAN)
            .map_err(|e| bad(&format!("{codec}: {e}")))?;
        let mut tar = Reader::new(BufReader::with_capacity(256 << 10, &mut indexing));
        built.data_end = scan(&mut tar, &mut built, None).map_err(|e| bad(&e))?;
        drop(tar);
        // Read to the end first, so that bytes after the compressed data are known.
        std::io::copy(&mut indexing, &mut std::io::sink())
            .map_err(|e| bad(&format!("{codec}: {e}")))?;
        if let Some(at) = indexing.trailing_garbage() {
            let what = ferry_seek::trailing_garbage_said(codec, at);
            note(&mut built.warnings, format!("{what}, ignored"));
        }
        let index = indexing
            .finish()
            .map_err(|e| bad(&format!("{codec}: {e}")))?;
        built.codec = codec.to_byte();
        built.seek = index.to_bytes();
        return Ok(built);
    }
    let archive = Archive::from_file(clone(file, path)?).map_err(|e| bad(&e))?;
    if let (Some(index), Some(entries)) = (archive.index(), archive.entries()) {
        for e in entries {
            let e = e.map_err(|e| bad(&e))?;
            if let Err(s) = built.builder.add(&e) {
                note(&mut built.skipped, s);
            }
        }
        built.data_end = index.tar_end();
        return Ok(built);
    }
    let mut plain = clone(file, path)?;
    plain.rewind().map_err(|e| bad(&e))?;
    let mut tar = Reader::with_skip(BufReader::with_capacity(256 << 10, plain), |r, n| {
        r.seek_relative(n as i64)
    });
    built.data_end = scan(&mut tar, &mut built, Some(meta.len())).map_err(|e| bad(&e))?;
    Ok(built)
}

/// Adds every member `tar` reads to the tree; returns the end of the tar data. With
/// `len`, members' data must lie within that many bytes (data skipped by seeking is not
/// read, so a tar cut short shows only so).
fn scan<R: Read>(tar: &mut Reader<R>, built: &mut Built, len: Option<u64>) -> Result<u64, String> {
    loop {
        let next = tar.next_entry().map_err(|e| e.to_string());
        for w in tar.take_warnings() {
            note(&mut built.warnings, w.to_string());
        }
        let Some(t) = next? else { break };
        if len.is_some_and(|len| t.data_offset.saturating_add(t.stored) > len) {
            return Err(format!(
                "truncated: the data of member {} passes the end of the file",
                ferry_core::entry::escaped(&t.path)
            ));
        }
        let (entry, acl_dropped) = entry_of_tar_here(&t, &mut built.acl_ids);
        if let Some(why) = acl_dropped {
            let path = ferry_core::entry::escaped(&t.path);
            note(&mut built.skipped, Skipped { path, why });
        }
        if let Err(s) = built.builder.add(&entry) {
            note(&mut built.skipped, s);
        }
    }
    Ok(tar.offset())
}

/// Keeps a skipped member or a warning to report, up to [`SKIPPED_KEPT`].
fn note<T>(kept: &mut Vec<T>, s: T) {
    if kept.len() < SKIPPED_KEPT {
        kept.push(s);
    }
}
