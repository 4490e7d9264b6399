//! One archive member as the reader returns it, and how it is built from its header,
//! the extension headers before it and the pax globals in force.

use super::error::{TarErrorKind, TypeFlag};
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
    /// The kind for a type flag, `None` for a flag POSIX and GNU tar do not define as
    /// a member kind (which is then read as a regular file, see [`build`]).
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

    /// Whether a header of this kind is followed by no data, whatever its size field
    /// says (POSIX: types 1 to 6).
    pub(crate) fn is_header_only(self) -> bool {
        self != TarKind::File
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
    /// Whether a pax extended header of its own came before it. Where one did not, an
    /// archive whose index keeps the times (index version 5 on) gives the mtime's
    /// seconds alone here, and its nanoseconds and the atime in the index.
    pub own_pax: bool,
    /// Logical size of the file; 0 for entries other than files.
    pub size: u64,
    /// The size the headers declare (the pax `size`, else the size field), which is
    /// what `tar -tv` lists: for a file its stored bytes; for a GNU incremental
    /// directory the length of the names it lists; for another kind whatever its
    /// header claims, though no data follows it (POSIX).
    pub header_size: u64,
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

impl TarEntry {
    /// Whether its headers give its times to the second alone: no pax header of its
    /// own and no atime (an index from version 5 may give them exactly).
    pub fn seconds_only(&self) -> bool {
        !self.own_pax && self.atime.is_none()
    }

    /// Whether an index's (or tree table's) `mtime` and `atime` for this member are the
    /// ones its headers give. A member with a pax header of its own has its times
    /// there, exact (the atime, where none is recorded, is the mtime); one without
    /// gives the mtime's seconds, and the index may add the nanoseconds and any atime
    /// (see [`TarEntry::own_pax`]).
    pub fn times_agree(&self, mtime: (i64, u32), atime: (i64, u32)) -> Result<(), &'static str> {
        if self.seconds_only() {
            return match self.mtime == (mtime.0, 0) {
                true => Ok(()),
                false => Err("modification time"),
            };
        }
        if self.mtime != mtime {
            return Err("modification time");
        }
        if self.atime.unwrap_or(self.mtime) != atime {
            return Err("access time");
        }
        Ok(())
    }
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
    /// Warnings about these headers, (offset, message), for when the member is known.
    pub(crate) notes: Vec<(u64, String)>,
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
    /// For a kind without data whose size is not 0: the size its header claims (no
    /// data follows it, POSIX; see the reader for a writer that wrote some anyway).
    pub(crate) claimed: u64,
    /// How to get the sparse map.
    pub(crate) plan: Plan,
    /// What was read liberally, for a warning each.
    pub(crate) warnings: Vec<String>,
}

/// Builds an entry from its header, the pending extension headers and the globals.
///
/// Read as GNU tar reads it: an unknown type flag is a regular file (POSIX; GNU tar
/// warns "Unknown file type"), as are Solaris ACL headers (`A`), which GNU tar
/// extracts as files too; a regular file whose name ends in `/` is a directory; a
/// pax time, owner or device number that does not parse is ignored, with a warning,
/// and the header field read instead.
pub(crate) fn build(
    header: &Header<'_>,
    pending: &Pending,
    globals: &[Record],
) -> Result<Built, TarErrorKind> {
    let mut warnings = Vec::new();
    let pax = PaxView::new(pending.pax.as_deref().unwrap_or_default(), globals);
    let typeflag = header.typeflag();
    let mut kind = match typeflag {
        // The rest of a file begun in another volume: only a listing is given one (see
        // `Reader::listing`), which shows the part stored here.
        b'M' => TarKind::File,
        _ => TarKind::from_typeflag(typeflag).unwrap_or_else(|| {
            warnings.push(format!(
                "unknown file type {}, read as a regular file",
                TypeFlag(typeflag)
            ));
            TarKind::File
        }),
    };
    // A size GNU tar cannot read (`abc`, `-5`, past 2^63) is reported and the header's
    // size used, as GNU tar does (its status is then 2; the members are all read).
    let declared = lenient(&mut warnings, pax.get_size(b"size"), || header.size())?;
    let plan = sparse::plan(header, &pax)?;
    let path = entry_path(header, pending, &pax)?;
    // Old (v7 and early ustar) writers mark a directory by the '/' of its name alone.
    if kind == TarKind::File && path.ends_with(b"/") && typeflag != b'S' && plan == Plan::Plain {
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
    let (data_area, claimed) = if kind.is_header_only() && !dumpdir {
        (0, declared)
    } else {
        (declared, 0)
    };
    let w = &mut warnings;
    let rdev = match kind.is_device() {
        true => {
            let (major, minor) = header.device()?;
            Some((
                lenient(w, pax.get_u32(b"SCHILY.devmajor"), || Ok(major))?,
                lenient(w, pax.get_u32(b"SCHILY.devminor"), || Ok(minor))?,
            ))
        }
        false => None,
    };
    let uid = lenient(w, pax.get_u32(b"uid"), || header.uid())?;
    let gid = lenient(w, pax.get_u32(b"gid"), || header.gid())?;
    let mtime = lenient(w, pax.get_time(b"mtime"), || Ok((header.mtime()?, 0)))?;
    let atime = pax.get_time(b"atime").map(|t| t.map(Some));
    let atime = lenient(w, atime, || Ok(header.gnu_atime()?.map(|s| (s, 0))))?;
    let entry = TarEntry {
        link_target: link_target(kind, header, pending, &pax)?,
        rdev,
        mode: header.mode()?,
        uid,
        gid,
        uname: owner_name(&pax, b"uname", header.uname())?,
        gname: owner_name(&pax, b"gname", header.gname())?,
        mtime,
        atime,
        own_pax: pending.pax.is_some(),
        xattrs: pax.xattrs()?,
        pax: pax.applied(),
        path,
        kind,
        size: if kind == TarKind::File { data_area } else { 0 },
        header_size: declared,
        stored: data_area,
        sparse: None,
        header_offset: 0,
        data_offset: 0,
    };
    Ok(Built {
        entry,
        data_area,
        claimed,
        plan,
        warnings,
    })
}

/// The value a pax record gives, else (when it has none, or one that does not parse,
/// which is noted in `warnings`, as GNU tar reports and ignores it) the header's.
fn lenient<T>(
    warnings: &mut Vec<String>,
    pax: Result<Option<T>, TarErrorKind>,
    header: impl FnOnce() -> Result<T, TarErrorKind>,
) -> Result<T, TarErrorKind> {
    match pax {
        Ok(Some(v)) => Ok(v),
        Ok(None) => header(),
        Err(e) => {
            warnings.push(format!("{e}: ignored, the header's field used"));
            header()
        }
    }
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

/// A user or group name: the pax value, else the header field.
fn owner_name(
    pax: &PaxView<'_>,
    key: &[u8],
    from_header: Option<&[u8]>,
) -> Result<Option<Vec<u8>>, TarErrorKind> {
    Ok(pax.get_name(key)?.or(from_header).map(<[u8]>::to_vec))
}
