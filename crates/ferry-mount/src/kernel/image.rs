//! The EROFS image of an archive, kept in the cache beside the FUSE mount's tables
//! ([`crate::cache`]), named after the archive's path (`….erofs`), valid while the
//! archive's size and modification time are those it was built from.
//!
//! The image's first 1,024 bytes are EROFS's own padding (left to boot sectors); its
//! first 64 hold ferry's header, which the kernel does not read:
//!
//! ```text
//! "FERRYIMG" u32 version u32 zero, u64 archive size, i64 mtime seconds,
//! u32 mtime nanoseconds u32 zero, u64 image length, u64 xxh3-64 of the image from
//! byte 1024 on, u64 xxh3-64 of the first 56 bytes
//! ```
//!
//! An image is only ever built by ferry from a table it checked, and a cached one is
//! mounted only if its checksum holds, so the kernel is never handed an image someone
//! else wrote.

use crate::cache::{self, Stamp};
use crate::source::{self, Origin};
use crate::MountError;
use ferry_archive::tree::Skipped;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use xxhash_rust::xxh3::{xxh3_128, xxh3_64, Xxh3};

const MAGIC: &[u8; 8] = b"FERRYIMG";
/// Version 2: owners by name, symlinks 0777, as `unpack` makes them (a version 1 image
/// is rebuilt).
const VERSION: u32 = 2;
/// Bytes at the image's start that EROFS leaves alone.
const PAD: usize = 1024;

/// Where the image came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageOrigin {
    /// Found in the cache, built by an earlier mount.
    Cached,
    /// Built now, in this long, holding this many inodes.
    Built(Duration, u64),
}

/// An image ready to mount.
#[derive(Debug)]
pub struct Image {
    /// The image file.
    pub path: PathBuf,
    /// Where it came from.
    pub origin: ImageOrigin,
    /// Members the tree leaves out (as `unpack` would), when its table was built now.
    pub skipped: Vec<Skipped>,
    /// What the tar reader warned of, when its table was built now.
    pub warnings: Vec<String>,
    /// What the image leaves out (xattrs EROFS cannot hold), with the path.
    pub left_out: Vec<String>,
}

/// Finds the image of `archive` in the cache (`cache_dir`, default [`cache::dir`]), or
/// builds it there; with `numeric_owner`, one showing the archive's owner ids (see
/// [`ferry_archive::tree::shown`]), kept beside the other. A compressed archive is
/// refused: the kernel reads data in place.
pub fn prepare(
    archive: &Path,
    cache_dir: Option<&Path>,
    numeric_owner: bool,
) -> Result<Image, MountError> {
    let (file, stamp) = open_plain(archive)?;
    drop(file);
    let dir = cache_dir
        .map(Path::to_path_buf)
        .or_else(cache::dir)
        .ok_or_else(|| {
            MountError("no cache directory for the image (set XDG_CACHE_HOME or HOME)".into())
        })?;
    let path = cache::path_for(&dir, archive)
        .map_err(|e| MountError::at(archive, format!("resolve its path: {e}")))?
        .with_extension(match numeric_owner {
            true => "numeric.erofs",
            false => "erofs",
        });
    if valid(&path, stamp) {
        return Ok(Image {
            path,
            origin: ImageOrigin::Cached,
            skipped: Vec::new(),
            warnings: Vec::new(),
            left_out: Vec::new(),
        });
    }
    let start = Instant::now();
    let opened = source::open(archive, cache_dir)?;
    if let Origin::Unsaved(why) = &opened.origin {
        return Err(MountError(format!("the index could not be kept: {why}")));
    }
    if let Some(check) = opened.check_later {
        check(&|_| ()).map_err(|e| MountError::at(archive, e))?;
    }
    let opts = ferry_erofs::Options {
        uuid: xxh3_128(path.as_os_str().as_encoded_bytes()).to_le_bytes(),
        volume_name: *b"ferry\0\0\0\0\0\0\0\0\0\0\0",
        numeric_owner,
    };
    let built = store(&path, opened.stamp, |out| {
        ferry_erofs::build(&opened.table, opened.stamp.size, &opts, out)
            .map_err(|e| MountError::at(archive, e))
    })?;
    Ok(Image {
        path,
        origin: ImageOrigin::Built(start.elapsed(), built.inodes),
        skipped: opened.skipped,
        warnings: opened.warnings,
        left_out: built.left_out,
    })
}

/// Opens `archive`, refusing what is not a regular file or is compressed.
fn open_plain(archive: &Path) -> Result<(File, Stamp), MountError> {
    let mut file =
        File::open(archive).map_err(|e| MountError::at(archive, format!("open: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| MountError::at(archive, format!("stat: {e}")))?;
    if !meta.is_file() {
        return Err(MountError::at(archive, "not a regular file"));
    }
    let mut head = [0u8; 6];
    let n = file.read(&mut head).unwrap_or(0);
    if let Some(codec) = ferry_seek::detect(&head[..n]) {
        return Err(MountError::at(
            archive,
            format!(
                "compressed ({codec}): the kernel reads an archive in place, so it cannot \
                 mount a compressed one; use FUSE mode (--mode fuse), or decompress it first"
            ),
        ));
    }
    Ok((file, Stamp::of(&meta)))
}

/// Whether the archive at `archive` can be mounted by the kernel: uncompressed.
pub fn mountable(archive: &Path) -> bool {
    open_plain(archive).is_ok()
}

/// ferry's header for an image of an archive of `stamp`, `len` bytes long, whose bytes
/// from [`PAD`] on hash to `sum`.
fn header(stamp: Stamp, len: u64, sum: u64) -> [u8; 64] {
    let mut h = [0u8; 64];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&stamp.size.to_le_bytes());
    h[24..32].copy_from_slice(&stamp.mtime.0.to_le_bytes());
    h[32..36].copy_from_slice(&stamp.mtime.1.to_le_bytes());
    h[40..48].copy_from_slice(&len.to_le_bytes());
    h[48..56].copy_from_slice(&sum.to_le_bytes());
    let own = xxh3_64(&h[..56]);
    h[56..].copy_from_slice(&own.to_le_bytes());
    h
}

/// Whether the file at `path` starts with ferry's image header (its own checksum
/// holding): an image ferry wrote, whatever archive it was for.
pub fn is_ferry_image(path: &Path) -> bool {
    let mut h = [0u8; 64];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut h))
        .is_ok()
        && &h[..8] == MAGIC
        && h[56..] == xxh3_64(&h[..56]).to_le_bytes()
}

/// Whether the image at `path` was built by ferry from the archive of `stamp`, whole
/// (read through once, not held).
fn valid(path: &Path, stamp: Stamp) -> bool {
    let Ok(mut f) = File::open(path) else {
        return false;
    };
    let mut head = [0u8; PAD];
    if f.read_exact(&mut head).is_err() {
        return false;
    }
    let mut sum = Xxh3::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut len = PAD as u64;
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                sum.update(&buf[..n]);
                len += n as u64;
            }
            Err(_) => return false,
        }
    }
    len > PAD as u64 && head[..64] == header(stamp, len, sum.digest())
}

/// Writes the image `write` makes at `path` atomically (a temporary file beside it,
/// renamed over it once whole), with ferry's header for `stamp` at its start; what
/// `write` returned.
fn store<T>(
    path: &Path,
    stamp: Stamp,
    write: impl FnOnce(&mut dyn Write) -> Result<T, MountError>,
) -> Result<T, MountError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let fail = |e: std::io::Error| MountError::at(path, format!("write the image: {e}"));
    fs::create_dir_all(dir)
        .map_err(|e| MountError::at(dir, format!("create the cache directory: {e}")))?;
    let tmp = tempfile::NamedTempFile::new_in(dir).map_err(fail)?;
    let mut out = Hashed {
        out: std::io::BufWriter::with_capacity(1 << 20, tmp.as_file()),
        pos: 0,
        sum: Xxh3::new(),
    };
    let made = write(&mut out)?;
    out.out.flush().map_err(fail)?;
    let (len, sum) = (out.pos, out.sum.digest());
    drop(out);
    tmp.as_file()
        .write_all_at(&header(stamp, len, sum), 0)
        .map_err(fail)?;
    tmp.persist(path).map_err(|e| fail(e.error))?;
    Ok(made)
}

/// A writer that hashes what it writes from byte [`PAD`] on (the part of the image
/// ferry's header covers).
struct Hashed<W: Write> {
    out: W,
    pos: u64,
    sum: Xxh3,
}

impl<W: Write> Write for Hashed<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        let skip = (PAD as u64).saturating_sub(self.pos).min(n as u64) as usize;
        self.sum.update(&buf[skip..n]);
        self.pos += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}
