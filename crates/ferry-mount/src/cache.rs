//! The cache of tree tables built for archives that do not carry one: one file per
//! archive under `$XDG_CACHE_HOME/ferry` (else `~/.cache/ferry`), named after the
//! archive's absolute path, valid while the archive's size and modification time are
//! those it was built from.
//!
//! A cache file: a 64-byte header, the compressed archive's seek points (none for an
//! uncompressed one), then the tree table.
//!
//! ```text
//! "FERRYMNT" u32 version u8 codec u8 x3, u64 archive size, i64 mtime seconds,
//! u32 mtime nanoseconds u32 zero, u64 seek points length, u64 table length,
//! u64 xxh3-64 of the first 56 bytes
//! ```

use crate::MountError;
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::xxh3_64;

const MAGIC: &[u8; 8] = b"FERRYMNT";
/// Version 2: tables keep owner names (a version 1 file is rebuilt, so a mount shows
/// the owners `unpack` gives).
const VERSION: u32 = 2;
/// Size of a cache file's header.
pub const HEADER_LEN: u64 = 64;

/// What a cache file was built from: the archive's size and modification time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// Size in bytes.
    pub size: u64,
    /// Modification time (seconds, nanoseconds).
    pub mtime: (i64, u32),
}

/// The codec byte of a cache file whose blob is not seek points but the list of an
/// S3 upload's shards (see ferry-s3's `mount`).
pub const SHARD_LIST: u8 = 0x53;

impl Stamp {
    /// The stamp of a source known by a tag rather than a file's size and time (an S3
    /// manifest's ETag): the tag's xxh3-64 in place of the size.
    pub fn tagged(tag: &[u8]) -> Stamp {
        Stamp {
            size: xxh3_64(tag),
            mtime: (0, 0),
        }
    }

    /// The stamp of an archive's metadata.
    pub fn of(meta: &fs::Metadata) -> Stamp {
        Stamp {
            size: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec() as u32),
        }
    }
}

/// The parts of a valid cache file.
#[derive(Debug)]
pub struct Cached {
    /// The open cache file.
    pub file: File,
    /// Compression code (0: none) the seek points are for.
    pub codec: u8,
    /// The seek points, raw.
    pub seek: Vec<u8>,
    /// Where the table starts in the file, and its length.
    pub table: (u64, u64),
}

/// The directory cache files go in.
pub fn dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| Path::new(v).is_absolute())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
    Some(base.join("ferry"))
}

/// The cache file for the archive at `archive` in `dir`.
pub fn path_for(dir: &Path, archive: &Path) -> io::Result<PathBuf> {
    let abs = fs::canonicalize(archive)?;
    let key = xxh3_64(abs.as_os_str().as_bytes());
    let name = abs
        .file_name()
        .map(|n| String::from_utf8_lossy(n.as_bytes()).into_owned())
        .unwrap_or_default();
    let short: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .take(64)
        .collect();
    Ok(dir.join(format!("{short}.{key:016x}.ftree")))
}

fn header(codec: u8, stamp: Stamp, seek_len: u64, table_len: u64) -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12] = codec;
    h[16..24].copy_from_slice(&stamp.size.to_le_bytes());
    h[24..32].copy_from_slice(&stamp.mtime.0.to_le_bytes());
    h[32..36].copy_from_slice(&stamp.mtime.1.to_le_bytes());
    h[40..48].copy_from_slice(&seek_len.to_le_bytes());
    h[48..56].copy_from_slice(&table_len.to_le_bytes());
    let sum = xxh3_64(&h[..56]);
    h[56..].copy_from_slice(&sum.to_le_bytes());
    h
}

/// Opens the cache file at `path` if it is valid for an archive of `stamp`: `None`
/// when there is none, or it was built from another version of the archive, or it is
/// damaged (it is then rebuilt).
pub fn load(path: &Path, stamp: Stamp) -> Option<Cached> {
    let file = File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let mut h = [0u8; HEADER_LEN as usize];
    file.read_exact_at(&mut h, 0).ok()?;
    let word = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().unwrap_or_default());
    let codec = h[12];
    let (seek_len, table_len) = (word(40), word(48));
    let wanted = header(codec, stamp, seek_len, table_len);
    if h != wanted || HEADER_LEN.checked_add(seek_len)?.checked_add(table_len)? != len {
        return None;
    }
    let mut seek = vec![0u8; usize::try_from(seek_len).ok().filter(|&n| n <= 1 << 30)?];
    file.read_exact_at(&mut seek, HEADER_LEN).ok()?;
    Some(Cached {
        file,
        codec,
        seek,
        table: (HEADER_LEN + seek_len, table_len),
    })
}

/// Writes a cache file at `path` (atomically: a temporary file renamed over it):
/// the header for `stamp`, the seek points, and the table `write_table` writes (which
/// returns its length).
pub fn store(
    path: &Path,
    codec: u8,
    stamp: Stamp,
    seek: &[u8],
    write_table: impl FnOnce(&mut dyn Write) -> io::Result<u64>,
) -> Result<(), MountError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let fail = |what: &str, e: io::Error| MountError::at(path, format!("{what}: {e}"));
    fs::create_dir_all(dir)
        .map_err(|e| MountError::at(dir, format!("create the cache directory: {e}")))?;
    let mut tmp =
        tempfile::NamedTempFile::new_in(dir).map_err(|e| fail("create the index file", e))?;
    let mut out = io::BufWriter::with_capacity(1 << 20, tmp.as_file_mut());
    out.write_all(&[0u8; HEADER_LEN as usize])
        .and_then(|()| out.write_all(seek))
        .map_err(|e| fail("write the index file", e))?;
    let table_len = write_table(&mut out).map_err(|e| fail("write the index file", e))?;
    out.flush().map_err(|e| fail("write the index file", e))?;
    drop(out);
    let h = header(codec, stamp, seek.len() as u64, table_len);
    tmp.as_file()
        .write_all_at(&h, 0)
        .map_err(|e| fail("write the index file", e))?;
    tmp.persist(path)
        .map_err(|e| fail("save the index file", e.error))?;
    Ok(())
}
