//! One archive member as the reader returns it, and how it is built from its header,
//! the extension headers before it and the pax globals in force.

use super::error::TarErrorKind;
use super::header::Header;
use super::pax::{PaxView, Record};
use super::sparse::{self, Plan};

/// What kind of file an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TarKind {
    /// A regular file (type `0`, NUL, contiguous `7`, old GNU sparse `S`).
    File,
    /// A directory (type `5`, or a regular file of size 0 whose path ends in `/`).
    Dir,
    /// A symbolic link (type `2`); [`TarEntry::link_target`] holds its target.
    Symlink,
    /// A hard link to an earlier entry (type `1`); [`TarEntry::link_target`] holds the
    /// earlier entry's path.
    HardLink,
    /// A character device (type `3`); [`TarEntry::rdev`] holds its numbers.
    CharDevice,
    /// A block device (type `4`); [`TarEntry::rdev`] holds its numbers.
    BlockDevice,
    /// A named pipe (type `6`).
    Fifo,
}

impl TarKind {
    /// The kind for a type flag, `None` for the flags this reader does not extract.
    fn from_typeflag(flag: u8) -> Option<Self> {
        Some(match flag {
            b'0' | b'\0' | b'7' | b'S' => TarKind::File,
            b'1' => TarKind::HardLink,
            b'2' => TarKind::Symlink,
            b'3' => TarKind::CharDevice,
            b'4' => TarKind::BlockDevice,
            // GNU tar's incremental directory: see `build`.
            b'5' | b'D' => TarKind::Dir,
            b'6' => TarKind::Fifo,
            _ => return None,
        })
    }

    fn is_link(self) -> bool {
        matches!(self, TarKind::Symlink | TarKind::HardLink)
    }

    fn is_device(self) -> bool {
        matches!(self, TarKind::CharDevice | TarKind::BlockDevice)
    }
}

/// One archive member: its path, kind, metadata and where its data lies in the stream.
///
/// Every field is what the archive says, after the pax overrides; nothing is sanitised:
/// `path` and `link_target` may be absolute or contain `..`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TarEntry {
    /// The path, raw bytes (never empty, never containing NUL).
    pub path: Vec<u8>,
    /// What kind of file it is.
    pub kind: TarKind,
    /// Permission bits (`& 0o7777`).
    pub mode: u32,
    /// Owner's user id.
    pub uid: u32,
    /// Owner's group id.
    pub gid: u32,
    /// Owner's user name, if recorded.
    pub uname: Option<Vec<u8>>,
    /// Owner's group name, if recorded.
    pub gname: Option<Vec<u8>>,
    /// Modification time: seconds since the epoch (may be negative) and nanoseconds.
    pub mtime: (i64, u32),
    /// Access time, if recorded (pax `atime`, or an old GNU header's atime field).
    pub atime: Option<(i64, u32)>,
    /// Logical size of the file; 0 for entries other than files.
    pub size: u64,
    /// Bytes of data stored in the archive for it: what [`Reader::read_data`] returns
    /// (for a sparse file, the runs' data concatenated, without the pax 1.0 map).
    ///
    /// [`Reader::read_data`]: super::Reader::read_data
    pub stored: u64,
    /// For a sparse file, its data runs as (offset, length) in the logical file, sorted,
    /// non-overlapping, none empty; everything else is a hole.
    pub sparse: Option<Vec<(u64, u64)>>,
    /// For symlinks and hard links, the target (never empty).
    pub link_target: Option<Vec<u8>>,
    /// For devices, (major, minor).
    pub rdev: Option<(u32, u32)>,
    /// Extended attributes, (name, value), each name once.
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// Stream offset of the entry's first header, its pax or GNU long-name headers
    /// included (pax global headers and volume labels before it are not).
    pub header_offset: u64,
    /// Stream offset where its stored data starts (for pax 1.0 sparse files, after the
    /// map).
    pub data_offset: u64,
    /// Every pax record that applied to it, raw: the globals not overridden, then its
    /// own records in order.
    pub pax: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Extension headers seen before an entry's own header.
#[derive(Default)]
pub(crate) struct Pending {
    /// Records of a pax `x` header.
    pub(crate) pax: Option<Vec<Record>>,
    /// Body of a GNU `L` header.
    pub(crate) long_name: Option<Vec<u8>>,
    /// Body of a GNU `K` header.
    pub(crate) long_link: Option<Vec<u8>>,
}

impl Pending {
    /// Whether no extension header is waiting for its entry.
    pub(crate) fn is_empty(&self) -> bool {
        self.pax.is_none() && self.long_name.is_none() && self.long_link.is_none()
    }
}

/// An entry as described by its headers, before the reader has read the parts of a
/// sparse map that follow the header.
pub(crate) struct Built {
    /// The entry; `size`, `stored`, `sparse` and the offsets are filled in later.
    pub(crate) entry: TarEntry,
    /// Bytes following the header(s) in the data area (map included for pax 1.0).
    pub(crate) data_area: u64,
    /// How to get the sparse map.
    pub(crate) plan: Plan,
}

/// Builds an entry from its header, the pending extension headers and the globals.
pub(crate) fn build(
    header: &Header<'_>,
    pending: &Pending,
    globals: &[Record],
) -> Result<Built, TarErrorKind> {
    let pax = PaxView::new(pending.pax.as_deref().unwrap_or_default(), globals);
    let typeflag = header.typeflag();
    let mut kind =
        TarKind::from_typeflag(typeflag).ok_or(TarErrorKind::UnsupportedType(typeflag))?;
    let data_area = match pax.get_u64(b"size")? {
        Some(size) => size,
        None => header.size()?,
    };
    let plan = sparse::plan(header, &pax)?;
    let path = entry_path(header, pending, &pax)?;
    if kind == TarKind::File && path.ends_with(b"/") && typeflag != b'S' {
        if data_area != 0 || plan != Plan::Plain {
            return Err(TarErrorKind::Invalid(
                "file with a path ending in '/' has data",
            ));
        }
        kind = TarKind::Dir;
    }
    if kind != TarKind::File && plan != Plan::Plain {
        return Err(TarErrorKind::BadSparse(
            "sparse map on an entry that is not a regular file",
        ));
    }
    // A GNU incremental directory (`tar --listed-incremental`) carries as data the
    // names it held, which only an incremental restore uses: like GNU tar without
    // that option, and bsdtar, this reader takes it for a directory and skips the data.
    let dumpdir = typeflag == b'D';
    if kind != TarKind::File && data_area != 0 && !dumpdir {
        return Err(TarErrorKind::Invalid(
            "entry of a kind without data declares a size",
        ));
    }
    let entry = TarEntry {
        link_target: link_target(kind, header, pending, &pax)?,
        rdev: device(kind, header, &pax)?,
        mode: header.mode()?,
        uid: owner_id(&pax, b"uid", || header.uid())?,
        gid: owner_id(&pax, b"gid", || header.gid())?,
        uname: owner_name(&pax, b"uname", header.uname())?,
        gname: owner_name(&pax, b"gname", header.gname())?,
        mtime: match pax.get_time(b"mtime")? {
            Some(t) => t,
            None => (header.mtime()?, 0),
        },
        atime: match pax.get_time(b"atime")? {
            Some(t) => Some(t),
            None => header.gnu_atime()?.map(|s| (s, 0)),
        },
        xattrs: pax.xattrs()?,
        pax: pax.applied(),
        path,
        kind,
        size: if dumpdir { 0 } else { data_area },
        stored: data_area,
        sparse: None,
        header_offset: 0,
        data_offset: 0,
    };
    Ok(Built {
        entry,
        data_area,
        plan,
    })
}

/// The path: `GNU.sparse.name`, else pax `path`, else a GNU long name, else the header.
fn entry_path(
    header: &Header<'_>,
    pending: &Pending,
    pax: &PaxView<'_>,
) -> Result<Vec<u8>, TarErrorKind> {
    let path = match pax.get_name(b"GNU.sparse.name")? {
        Some(p) => p.to_vec(),
        None => match pax.get_name(b"path")? {
            Some(p) => p.to_vec(),
            None => pending.long_name.clone().unwrap_or_else(|| header.path()),
        },
    };
    if path.is_empty() {
        return Err(TarErrorKind::Invalid("entry has an empty path"));
    }
    Ok(path)
}

/// The link target of a link: pax `linkpath`, else a GNU long link, else the header.
fn link_target(
    kind: TarKind,
    header: &Header<'_>,
    pending: &Pending,
    pax: &PaxView<'_>,
) -> Result<Option<Vec<u8>>, TarErrorKind> {
    if !kind.is_link() {
        return Ok(None);
    }
    let target = match pax.get_name(b"linkpath")? {
        Some(t) => t.to_vec(),
        None => pending
            .long_link
            .clone()
            .unwrap_or_else(|| header.link_name().to_vec()),
    };
    if target.is_empty() {
        return Err(TarErrorKind::Invalid("link with an empty target"));
    }
    Ok(Some(target))
}

/// A device's numbers: `SCHILY.devmajor`/`SCHILY.devminor` (bsdtar) over the header.
fn device(
    kind: TarKind,
    header: &Header<'_>,
    pax: &PaxView<'_>,
) -> Result<Option<(u32, u32)>, TarErrorKind> {
    if !kind.is_device() {
        return Ok(None);
    }
    let (major, minor) = header.device()?;
    let major = pax.get_u32(b"SCHILY.devmajor")?.unwrap_or(major);
    let minor = pax.get_u32(b"SCHILY.devminor")?.unwrap_or(minor);
    Ok(Some((major, minor)))
}

/// A uid or gid: the pax value, else the header field (parsed only when needed).
fn owner_id(
    pax: &PaxView<'_>,
    key: &[u8],
    from_header: impl FnOnce() -> Result<u32, TarErrorKind>,
) -> Result<u32, TarErrorKind> {
    match pax.get_u32(key)? {
        Some(id) => Ok(id),
        None => from_header(),
    }
}

/// A user or group name: the pax value, else the header field.
fn owner_name(
    pax: &PaxView<'_>,
    key: &[u8],
    from_header: Option<&[u8]>,
) -> Result<Option<Vec<u8>>, TarErrorKind> {
    Ok(pax.get_name(key)?.or(from_header).map(<[u8]>::to_vec))
}
