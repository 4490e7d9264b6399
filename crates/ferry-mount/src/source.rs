//! From an archive's path to what a mount serves: its tree table and its data.
//!
//! A ferry archive carries its table in its index, and is served from it at once (one
//! compressed in frames by `ferry pack --zstd` or `-z` too, through its frames). For
//! any other tar (or a ferry archive from before the table, or one compressed whole)
//! the table comes from the cache ([`crate::cache`]) when one was built from this
//! version of the archive; else it is built now ([`crate::scan`]) and kept in the cache
//! for the next mount.

use crate::cache::{self, Stamp};
use crate::data::{DataAt, PlainFile};
use crate::scan::{build, Built};
use crate::MountError;
use ferry_archive::read::archive::{embedded_tree, ArchiveError, EmbeddedTree, ReadAt, Source};
use ferry_archive::tree::{check_against_tar_reporting, Skipped, Table, TableFile, TreeBuilder};
use ferry_seek::{Compressed, SeekIndex};
use std::fs::File;
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
    /// The archive's path, as given (what the mount's log lines name).
    pub path: PathBuf,
    /// The archive file itself, to notice it changing under the mount; None for a
    /// source that checks this itself on every read (an S3 upload: each ranged GET
    /// names the ETag its object had when the table was made).
    pub archive: Option<File>,
    /// What the archive was when the table was made (its size: the bytes its data
    /// spans).
    pub stamp: Stamp,
    /// Its tree.
    pub table: Table,
    /// Its tar data.
    pub data: Arc<dyn DataAt>,
    /// Where the table came from.
    pub origin: Origin,
    /// Members left out of the tree, and why (only when it was built now).
    pub skipped: Vec<Skipped>,
    /// What the tar reader warned of (only when the tree was built now): see
    /// [`crate::scan::Built::warnings`].
    pub warnings: Vec<String>,
    /// For a compressed archive that can only be read from its start (one zstd frame,
    /// one xz block, bzip2): that reads are slow, and what to make instead.
    pub advice: Option<String>,
    /// The check of the index still to be made, once mounted (see [`VERIFY_AT_ONCE`]).
    pub check_later: Option<LaterCheck>,
}

/// A check to be run on a thread of its own, given where to say how far it has got
/// (every file node numbered below that has passed); its error says what is damaged.
pub type LaterCheck = Box<dyn FnOnce(&(dyn Fn(u32) + Sync)) -> Result<(), String> + Send>;

/// An archive's index of at most this many bytes is checked whole before the mount
/// answers (a few milliseconds: the kernel tree's is about 25 MB); a larger one is
/// mounted at once and checked by a thread meanwhile, so the time to mount does not
/// grow with the archive.
pub const VERIFY_AT_ONCE: u64 = 64 << 20;

/// Opens the archive at `path` for mounting, with its table from its own index, from
/// the cache in `cache_dir` (default: [`cache::dir`]), or built now and kept there.
pub fn open(path: &Path, cache_dir: Option<&Path>) -> Result<Opened, MountError> {
    let archive = File::open(path).map_err(|e| MountError::at(path, format!("open: {e}")))?;
    let meta = archive
        .metadata()
        .map_err(|e| MountError::at(path, format!("stat: {e}")))?;
    if !meta.is_file() {
        return Err(MountError::at(path, "not a regular file"));
    }
    let stamp = Stamp::of(&meta);
    // A ferry archive compressed in frames (`pack --zstd`, `-z`) is read through its
    // frames, as a plain one is: its own table, no scan.
    let frames = ferry_seek::Frames::open(clone(&archive, path)?)
        .map_err(|e| MountError::at(path, e))?
        .map(Arc::new);
    // A plain one is read through its packed index where it has one.
    let (source, data_len): (Arc<dyn ReadAt + Send + Sync>, u64) = match &frames {
        Some(frames) => (frames.clone(), frames.decompressed_len()),
        None => {
            let at = |e: ArchiveError| MountError::at(path, e);
            let plain = Source::file(clone(&archive, path)?).map_err(at)?;
            let len = plain.data_len().map_err(|e| MountError::at(path, e))?;
            (Arc::new(plain), len)
        }
    };
    let embedded = embedded_tree(&*source, data_len).map_err(|e| MountError::at(path, e))?;
    let served = match embedded {
        // A table from before headers' places were recorded cannot be checked against
        // the tar (see `serve_embedded`): such an archive is scanned as any tar is.
        Some(tree) if tree.paged => {
            let data: Arc<dyn DataAt> = match frames {
                Some(frames) => frames,
                None => Arc::new(PlainFile(clone(&archive, path)?)),
            };
            serve_embedded(source, data, path, tree)?
        }
        _ => serve_built(&archive, &meta, path, cache_dir)?,
    };
    Ok(Opened {
        path: path.to_path_buf(),
        archive: Some(archive),
        stamp,
        table: served.table,
        data: served.data,
        origin: served.origin,
        skipped: served.skipped,
        warnings: served.warnings,
        advice: served.advice,
        check_later: served.check_later,
    })
}

/// What an [`Opened`] serves, however the table was found.
struct Served {
    table: Table,
    data: Arc<dyn DataAt>,
    origin: Origin,
    skipped: Vec<Skipped>,
    warnings: Vec<String>,
    advice: Option<String>,
    check_later: Option<LaterCheck>,
}

/// Serves a ferry archive's own table, read from `source` (the archive file, or its
/// decompressed frames), its members' data from `data`. Whoever made the archive made
/// its table, so the table is checked against the tar's headers
/// ([`check_against_tar_reporting`]) by a thread once mounted (a file's data is served
/// once that check has passed it); the whole index's checksum is checked before the mount answers
/// when the index is small, else by that thread first.
fn serve_embedded(
    source: Arc<dyn ReadAt + Send + Sync>,
    data: Arc<dyn DataAt>,
    path: &Path,
    tree: EmbeddedTree,
) -> Result<Served, MountError> {
    let index_now = tree.index_len() <= VERIFY_AT_ONCE;
    if index_now {
        tree.check_index(&*source)
            .map_err(|e| MountError::at(path, e))?;
    }
    let table = Table::open(TableFile::Shared(source.clone()), tree.at, tree.len, false)
        .map_err(|e| MountError::at(path, e))?
        .hashes_up_to(tree.hashes_up_to());
    let check_later: LaterCheck = Box::new(move |passed_to| {
        if !index_now {
            tree.check_index(&*source).map_err(|e| e.to_string())?;
        }
        let table: Table = Table::open(TableFile::Shared(source.clone()), tree.at, tree.len, false)
            .map_err(|e| e.to_string())?;
        check_against_tar_reporting(&table, &*source, passed_to).map_err(|e| e.to_string())?;
        Ok(())
    });
    Ok(Served {
        table,
        data,
        origin: Origin::Embedded,
        skipped: Vec::new(),
        warnings: Vec::new(),
        advice: None,
        check_later: Some(check_later),
    })
}

/// Serves the table kept in the cache for this version of the archive, or builds it
/// now and keeps it there.
fn serve_built(
    archive: &File,
    meta: &std::fs::Metadata,
    path: &Path,
    cache_dir: Option<&Path>,
) -> Result<Served, MountError> {
    let stamp = Stamp::of(meta);
    let cache_path = cache_file(path, cache_dir)?;
    if let Some(c) = cache_path.as_ref().and_then(|p| cache::load(p, stamp)) {
        let shown = cache_path.clone().unwrap_or_default();
        // A cache file damaged since it was written is built again, like a stale one.
        let table = Table::open(c.file, c.table.0, c.table.1, true);
        if let (Ok(table), Ok((data, advice))) = (table, data_of(archive, path, c.codec, &c.seek)) {
            return Ok(Served {
                table,
                data,
                origin: Origin::Cached(shown),
                skipped: Vec::new(),
                warnings: Vec::new(),
                advice,
                check_later: None,
            });
        }
    }
    let Built {
        builder,
        skipped,
        warnings,
        data_end,
        codec,
        seek,
        ..
    } = build(archive, meta, path)?;
    let (data, advice) = data_of(archive, path, codec, &seek)?;
    let (table, origin) = keep_table(builder, data_end, stamp, (codec, &seek), cache_path, path)?;
    Ok(Served {
        table,
        data,
        origin,
        skipped,
        warnings,
        advice,
        check_later: None,
    })
}

/// Writes the table `builder` holds (for data ending at `data_end`) to the cache file
/// `cache_path`, after the header for `stamp` and the bytes `blob` (a compressed
/// archive's seek points, or what `codec` says they are), or where that cannot be, to
/// a temporary file; and opens it. `shown` names the source in errors.
pub fn keep_table(
    builder: TreeBuilder,
    data_end: u64,
    stamp: Stamp,
    (codec, blob): (u8, &[u8]),
    cache_path: Option<PathBuf>,
    shown: &Path,
) -> Result<(Table, Origin), MountError> {
    let (file, origin) = save(builder, data_end, stamp, (codec, blob), cache_path)?;
    let len = file
        .metadata()
        .map_err(|e| MountError(format!("the index file: {e}")))?
        .len();
    let at = match origin {
        Origin::Unsaved(_) => 0,
        _ => cache::HEADER_LEN + blob.len() as u64,
    };
    let table = Table::open(file, at, len - at, true).map_err(|e| MountError::at(shown, e))?;
    Ok((table, origin))
}

/// A second handle of the archive file.
pub(crate) fn clone(f: &File, path: &Path) -> Result<File, MountError> {
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

/// How the tar data of `archive` is read: the file itself (`codec` 0), or its
/// decompressed stream through the seek points `seek`; with advice for a compressed
/// archive that can only be read from its start.
fn data_of(
    archive: &File,
    path: &Path,
    codec: u8,
    seek: &[u8],
) -> Result<(Arc<dyn DataAt>, Option<String>), MountError> {
    if codec == 0 {
        return Ok((Arc::new(PlainFile(clone(archive, path)?)), None));
    }
    let index = SeekIndex::from_bytes(seek).map_err(|e| MountError::at(path, e))?;
    if index.codec().to_byte() != codec {
        return Err(MountError::at(
            path,
            "the cached index is for another compression",
        ));
    }
    let advice = index.advice();
    Ok((
        Arc::new(Compressed::new(clone(archive, path)?, index)),
        advice,
    ))
}

/// Writes the table to the cache file, or where that cannot be, to a temporary file.
fn save(
    builder: TreeBuilder,
    data_end: u64,
    stamp: Stamp,
    (codec, seek): (u8, &[u8]),
    cache_path: Option<PathBuf>,
) -> Result<(File, Origin), MountError> {
    let why = match &cache_path {
        Some(p) => {
            let mut b = Some(builder);
            match cache::store(p, codec, stamp, seek, |out| {
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
