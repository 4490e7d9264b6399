//! From an archive's path to what a mount serves: its tree table and its data.
//!
//! A table comes from the cache ([`crate::cache`]) when one was built from this version
//! of the archive; else it is built now, from a ferry archive's index when it has one
//! (checked whole as `unpack` checks it), or by scanning the tar's headers (skipping its
//! data with seeks), and kept in the cache for the next mount.

use crate::cache::{self, Stamp};
use crate::data::{DataAt, PlainFile};
use crate::MountError;
use ferry_archive::read::archive::embedded_tree;
use ferry_archive::read::Archive;
use ferry_archive::tar::Reader;
use ferry_archive::tree::{entry_of_tar, DirDefaults, Skipped, Table, TreeBuilder};
use std::fs::{File, Metadata};
use std::io::{BufReader, Seek};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where a mounted table came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// From the archive's own index (a ferry archive).
    Embedded,
    /// From the cache file at this path, built by an earlier mount or `ferry index`.
    Cached(PathBuf),
    /// Built now, and kept in the cache file at this path.
    Built(PathBuf),
    /// Built now, kept in a temporary file only (the cache could not be written: the
    /// message says why).
    Unsaved(String),
}

/// An archive ready to be served.
pub struct Opened {
    /// The archive's path, as given.
    pub path: PathBuf,
    /// The archive file itself, to notice it changing under the mount.
    pub archive: File,
    /// What the archive was when the table was made.
    pub stamp: Stamp,
    /// Its tree.
    pub table: Table,
    /// Its tar data.
    pub data: Arc<dyn DataAt>,
    /// Where the table came from.
    pub origin: Origin,
    /// Members left out of the tree, and why (only when it was built now).
    pub skipped: Vec<Skipped>,
    /// The check of the index still to be made, once mounted (see [`VERIFY_AT_ONCE`]).
    pub check_later: Option<LaterCheck>,
}

/// A check to be run on a thread of its own; its error says what is damaged.
pub type LaterCheck = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// An archive's index of at most this many bytes is checked whole before the mount
/// answers (a few milliseconds: the kernel tree's is about 25 MB); a larger one is
/// mounted at once and checked by a thread meanwhile, so the time to mount does not
/// grow with the archive.
pub const VERIFY_AT_ONCE: u64 = 64 << 20;

/// How many skipped members are kept to be reported, beyond their count.
const SKIPPED_KEPT: usize = 1000;

/// Opens the archive at `path` for mounting, with its table from the cache in
/// `cache_dir` (default: [`cache::dir`]) or built now and kept there.
pub fn open(path: &Path, cache_dir: Option<&Path>) -> Result<Opened, MountError> {
    let archive = File::open(path).map_err(|e| MountError::at(path, format!("open: {e}")))?;
    let meta = archive
        .metadata()
        .map_err(|e| MountError::at(path, format!("stat: {e}")))?;
    if !meta.is_file() {
        return Err(MountError::at(path, "not a regular file"));
    }
    let stamp = Stamp::of(&meta);
    let data: Arc<dyn DataAt> = Arc::new(PlainFile(clone(&archive, path)?));
    let embedded = embedded_tree(&archive, stamp.size).map_err(|e| MountError::at(path, e))?;
    if let Some(tree) = embedded {
        // The whole index (entries and table) is checked before the mount answers
        // when it is small; else by a thread once mounted.
        let verified = tree.index_len() <= VERIFY_AT_ONCE;
        if verified {
            tree.check_index(&archive)
                .map_err(|e| MountError::at(path, e))?;
        }
        let table = Table::open(clone(&archive, path)?, tree.at, tree.len, false)
            .map_err(|e| MountError::at(path, e))?;
        let check = clone(&archive, path)?;
        return Ok(Opened {
            path: path.to_path_buf(),
            archive,
            stamp,
            table,
            data,
            origin: Origin::Embedded,
            skipped: Vec::new(),
            check_later: (!verified).then(|| {
                Box::new(move || tree.check_index(&check).map_err(|e| e.to_string())) as LaterCheck
            }),
        });
    }
    let cache_path = cache_file(path, cache_dir)?;
    if let Some(c) = cache_path.as_ref().and_then(|p| cache::load(p, stamp)) {
        let table = Table::open(c.file, c.table.0, c.table.1, true)
            .map_err(|e| MountError::at(cache_path.as_deref().unwrap_or(path), e))?;
        check_fits(&table, stamp.size, path)?;
        return Ok(Opened {
            path: path.to_path_buf(),
            archive,
            stamp,
            table,
            data,
            origin: Origin::Cached(cache_path.unwrap_or_default()),
            skipped: Vec::new(),
            check_later: None,
        });
    }
    let (builder, skipped, data_end) = build(&archive, &meta, path)?;
    let (file, origin) = save(builder, data_end, stamp, cache_path)?;
    let len = file
        .metadata()
        .map_err(|e| MountError(format!("the index file: {e}")))?
        .len();
    let base = if matches!(origin, Origin::Unsaved(_)) {
        0
    } else {
        cache::HEADER_LEN
    };
    let table = Table::open(file, base, len - base, true).map_err(|e| MountError::at(path, e))?;
    Ok(Opened {
        path: path.to_path_buf(),
        archive,
        stamp,
        table,
        data,
        origin,
        skipped,
        check_later: None,
    })
}

/// Builds the table of the archive at `path` and keeps it in the cache (what `ferry
/// index` does); returns where it went and the members left out.
pub fn index(
    path: &Path,
    cache_dir: Option<&Path>,
) -> Result<(Origin, Vec<Skipped>, u64), MountError> {
    let opened = open(path, cache_dir)?;
    Ok((opened.origin, opened.skipped, opened.table.len()))
}

fn clone(f: &File, path: &Path) -> Result<File, MountError> {
    f.try_clone()
        .map_err(|e| MountError::at(path, format!("open: {e}")))
}

fn cache_file(path: &Path, cache_dir: Option<&Path>) -> Result<Option<PathBuf>, MountError> {
    let Some(dir) = cache_dir.map(Path::to_path_buf).or_else(cache::dir) else {
        return Ok(None);
    };
    cache::path_for(&dir, path)
        .map(Some)
        .map_err(|e| MountError::at(path, format!("resolve its path: {e}")))
}

/// No file's data may reach past the end of the tar data the archive has.
fn check_fits(table: &Table, len: u64, path: &Path) -> Result<(), MountError> {
    if table.trailer().data_end > len {
        return Err(MountError::at(
            path,
            "the archive is shorter than its index says (truncated?)",
        ));
    }
    Ok(())
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

/// Builds the tree of the archive `file`: from its index if it is a ferry archive,
/// else by scanning its headers. Returns the builder, the members left out, and the end
/// of the tar data.
fn build(
    file: &File,
    meta: &Metadata,
    path: &Path,
) -> Result<(TreeBuilder, Vec<Skipped>, u64), MountError> {
    let mut head = [0u8; 6];
    let n = std::os::unix::fs::FileExt::read_at(file, &mut head, 0).unwrap_or(0);
    if n >= 2 && head[0] == 0x1f && head[1] == 0x8b
        || head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd])
        || head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0])
        || head.starts_with(b"BZh")
    {
        return Err(MountError::at(
            path,
            "compressed archives cannot be mounted yet: decompress it first",
        ));
    }
    let mut builder = TreeBuilder::new(defaults(meta));
    let mut skipped = Vec::new();
    let note = |s: Skipped, skipped: &mut Vec<Skipped>| {
        if skipped.len() < SKIPPED_KEPT {
            skipped.push(s);
        }
    };
    let bad = |e: &dyn std::fmt::Display| MountError::at(path, e);
    let archive = Archive::from_file(clone(file, path)?).map_err(|e| bad(&e))?;
    if let (Some(index), Some(entries)) = (archive.index(), archive.entries()) {
        for e in entries {
            let e = e.map_err(|e| bad(&e))?;
            if let Err(s) = builder.add(&e) {
                note(s, &mut skipped);
            }
        }
        return Ok((builder, skipped, index.tar_end()));
    }
    let len = meta.len();
    let mut scan = clone(file, path)?;
    scan.rewind()
        .map_err(|e| MountError::at(path, format!("read: {e}")))?;
    let mut tar = Reader::with_skip(BufReader::with_capacity(256 << 10, scan), |r, n| {
        r.seek_relative(n as i64)
    });
    while let Some(t) = tar.next_entry().map_err(|e| bad(&e))? {
        if t.data_offset.saturating_add(t.stored) > len {
            return Err(MountError::at(
                path,
                format!(
                    "truncated: the data of member {} passes the end of the file",
                    ferry_core::entry::escaped(&t.path)
                ),
            ));
        }
        if let Err(s) = builder.add(&entry_of_tar(&t)) {
            note(s, &mut skipped);
        }
    }
    Ok((builder, skipped, tar.offset().min(len)))
}

/// Writes the table to the cache file, or where that cannot be, to a temporary file.
fn save(
    builder: TreeBuilder,
    data_end: u64,
    stamp: Stamp,
    cache_path: Option<PathBuf>,
) -> Result<(File, Origin), MountError> {
    let why = match &cache_path {
        Some(p) => {
            let mut b = Some(builder);
            match cache::store(p, 0, stamp, &[], |out| {
                b.take().map_or(Ok(0), |b| b.write(data_end, out))
            }) {
                Ok(()) => {
                    let file =
                        File::open(p).map_err(|e| MountError::at(p, format!("open: {e}")))?;
                    return Ok((file, Origin::Built(p.clone())));
                }
                Err(e) => match b {
                    Some(back) => return save_temp(back, data_end, e.to_string()),
                    None => return Err(e),
                },
            }
        }
        None => "no cache directory (neither XDG_CACHE_HOME nor HOME is set)".to_string(),
    };
    save_temp(builder, data_end, why)
}

fn save_temp(
    builder: TreeBuilder,
    data_end: u64,
    why: String,
) -> Result<(File, Origin), MountError> {
    let fail = |e: std::io::Error| MountError(format!("write the index to a temporary file: {e}"));
    let mut f = tempfile::tempfile().map_err(fail)?;
    let mut out = std::io::BufWriter::new(&mut f);
    builder.write(data_end, &mut out).map_err(fail)?;
    std::io::Write::flush(&mut out).map_err(fail)?;
    drop(out);
    Ok((f, Origin::Unsaved(why)))
}
