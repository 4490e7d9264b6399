//! An archive opened for reading: a ferry archive with its index, or any other tar.
//!
//! The index is only trusted after it has been checked against itself (checksums,
//! bounds, runs) and laid over the tar data: entries must follow each other exactly as
//! the tar stream does, from offset 0 to the end-of-archive blocks. Before a member's
//! data is used, its tar header is parsed and must agree with its index entry.

use super::convert::Rename;
use crate::index::packed::{PackedIndex, PACKED_VERSION};
use crate::index::{Entries, Footer, Index, IndexEntry, Kind, FOOTER_LEN};
use crate::tar::{Reader, TarEntry, TarError, TarKind};
use ferry_core::entry::RelPath;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Why an archive could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The archive file could not be opened or read.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The tar data is malformed.
    #[error(transparent)]
    Tar(#[from] TarError),
    /// The index is malformed or disagrees with the tar data.
    #[error(transparent)]
    Index(#[from] crate::index::IndexError),
    /// A member asked for by path is missing or cannot be used as asked, or its data
    /// could not be read from a stream.
    #[error("member {path}: {why}")]
    Member {
        /// The path asked for, escaped for display.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// The destination could not be made or opened; the message names it.
    #[error("{0}")]
    Destination(String),
    /// The index and the tar header at an offset disagree.
    #[error("archive offset {offset}: index and tar header disagree: {what}")]
    Mismatch {
        /// Where the tar header is.
        offset: u64,
        /// What differs.
        what: &'static str,
    },
}

/// Where an archive's bytes are read from.
pub enum Source {
    /// A plain archive file: data may be cloned or copied by the kernel out of it.
    File(File),
    /// A zstd archive with a seek table (`ferry pack --zstd`): read by decompressing the
    /// frames that hold what is asked for; offsets are those of the tar inside.
    Compressed(ferry_seek::Frames),
    /// A plain archive file whose index is packed (see [`crate::index::packed`]): read
    /// as the archive it would be with the index stored plain; its data as a file's.
    Packed(Box<(File, PackedIndex)>),
}

/// Reads at an offset, from a file or what stands for one.
pub trait ReadAt {
    /// Reads into `buf` from `offset`; short only at the end.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
}

impl ReadAt for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        FileExt::read_at(self, buf, offset)
    }
}

impl ReadAt for ferry_seek::Frames {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        ferry_seek::Frames::read_at(self, buf, offset)
    }
}

impl ReadAt for PackedIndex {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        PackedIndex::read_at(self, buf, offset)
    }
}

impl<T: ReadAt + ?Sized> ReadAt for &T {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        (**self).read_at(buf, offset)
    }
}

/// Fills `buf` from `offset` of `file`; an error if it ends first.
pub fn fill_at(
    file: &(impl ReadAt + ?Sized),
    mut buf: &mut [u8],
    mut offset: u64,
) -> io::Result<()> {
    while !buf.is_empty() {
        match file.read_at(buf, offset) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl ReadAt for Source {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        match self {
            Source::File(f) => FileExt::read_at(f, buf, offset),
            Source::Compressed(c) => c.read_at(buf, offset),
            Source::Packed(p) => read_packed(&p.0, &p.1, buf, offset),
        }
    }
}

/// Reads the archive `file` with its packed index `index` as if stored plain: the tar
/// data from the file, the rest through the packing; short only at the end.
fn read_packed(file: &File, index: &PackedIndex, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let (tar_end, len) = (index.tar_end(), index.logical_len());
    let mut done = 0;
    while done < buf.len() {
        let pos = offset + done as u64;
        if pos >= len {
            break;
        }
        let n = if pos < tar_end {
            let room = (buf.len() - done).min((tar_end - pos) as usize);
            FileExt::read_at(file, &mut buf[done..done + room], pos)?
        } else {
            index.read_at(&mut buf[done..], pos)?
        };
        if n == 0 {
            break;
        }
        done += n;
    }
    Ok(done)
}

impl Source {
    /// A plain archive file, read through its packed index where it has one (see
    /// [`crate::index::packed`]). A packed index that cannot be opened is an error, as a
    /// damaged plain index is; one that `tar -r` wrote members over is left: the file
    /// is then read as a plain tar, as tar reads it.
    pub fn file(file: File) -> Result<Source, ArchiveError> {
        let len = file.metadata()?.len();
        // A footer that does not parse is said by whoever reads the index.
        let footer = match footer_of(&file, len) {
            Ok(Some((f, None))) if f.version == PACKED_VERSION => f,
            Ok(_) | Err(ArchiveError::Index(_)) => return Ok(Source::File(file)),
            Err(e) => return Err(e),
        };
        let index = PackedIndex::open(&file, &footer, 0)?;
        Ok(Source::Packed(Box::new((file, index))))
    }

    /// Fills `buf` from `offset`; an error if the archive ends first.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        fill_at(self, buf, offset)
    }

    /// The archive's length: of the tar inside, for a compressed one.
    pub fn data_len(&self) -> io::Result<u64> {
        Ok(match self {
            Source::File(f) => f.metadata()?.len(),
            Source::Compressed(c) => c.decompressed_len(),
            Source::Packed(p) => p.1.logical_len(),
        })
    }
}

/// An archive file opened for reading.
pub struct Archive {
    file: Source,
    len: u64,
    index: Option<Index>,
    /// Where tar data was written over the end-of-archive blocks the footer names.
    overwritten_at: Option<u64>,
}

impl Archive {
    /// Opens the archive at `path`, reading and checking its index if it has one.
    pub fn open(path: &Path) -> Result<Archive, ArchiveError> {
        let file = File::open(path)?;
        Archive::from_file(file)
    }

    /// Uses an open archive file.
    pub fn from_file(file: File) -> Result<Archive, ArchiveError> {
        Archive::from_source(Source::file(file)?)
    }

    /// Uses an archive read from `file`, a plain archive or a compressed one.
    pub fn from_source(file: Source) -> Result<Archive, ArchiveError> {
        let len = file.data_len()?;
        let (index, overwritten_at) = match read_index(&file, len)? {
            Indexed::Yes(index) => (Some(index), None),
            Indexed::No => (None, None),
            Indexed::Overwritten { at } => (None, Some(at)),
        };
        Ok(Archive {
            file,
            len,
            index,
            overwritten_at,
        })
    }

    /// Where a ferry archive's end-of-archive blocks were written over since its index
    /// was made (as `tar -r` appends members there): the index no longer describes the
    /// archive, so it is read as a plain tar, as tar reads it.
    pub fn overwritten_at(&self) -> Option<u64> {
        self.overwritten_at
    }

    /// The archive's index, if it is a ferry archive.
    pub fn index(&self) -> Option<&Index> {
        self.index.as_ref()
    }

    /// The entries of the index, each with where it starts in the index, read a window
    /// at a time; None for an archive without one.
    pub fn entries_at(&self) -> Option<Entries<BufReader<At<'_>>>> {
        let index = self.index.as_ref()?;
        Some(index.entries(reader_at(&self.file, index.offset(), INDEX_WINDOW)))
    }

    /// The entries of the index, read a window at a time; None for an archive without
    /// one. An index changed since the archive was opened ends in an error.
    pub fn entries(&self) -> Option<impl Iterator<Item = Result<IndexEntry, ArchiveError>> + '_> {
        Some(
            self.entries_at()?
                .map(|r| r.map(|(_, e)| e).map_err(ArchiveError::from)),
        )
    }

    /// The index entry that starts `pos` bytes into the index (as
    /// [`Archive::entries_at`] gives it).
    pub fn entry_at(&self, pos: u64) -> Result<IndexEntry, ArchiveError> {
        let index = self
            .index
            .as_ref()
            .ok_or_else(|| ArchiveError::Io(io::Error::other("the archive has no index")))?;
        let r = reader_at(&self.file, index.offset() + pos, ENTRY_WINDOW);
        Ok(index.entry_at(r, pos)?)
    }

    /// For each path asked (compared after making member paths safe), the last index
    /// entry of that path that starts before the index position asked with it, and its
    /// position: the member an extraction would have left at that path by then. One
    /// pass through the index, however many paths; an archive without one finds none.
    /// Member paths lose their first `strip` components first (`--strip-components`).
    pub fn last_named(
        &self,
        asked: &HashMap<RelPath, u64>,
        rename: Rename<'_>,
    ) -> Result<HashMap<RelPath, (u64, IndexEntry)>, ArchiveError> {
        let mut found = HashMap::new();
        let end = asked.values().copied().max().unwrap_or(0);
        for item in self.entries_at().into_iter().flatten() {
            let (pos, e) = item?;
            if pos >= end {
                break;
            }
            if let Ok(path) = rename.path(&e.path) {
                if asked.get(&path).is_some_and(|&before| pos < before) {
                    found.insert(path, (pos, e));
                }
            }
        }
        Ok(found)
    }

    /// The whole archive as a stream, read 1 MiB at a time: a tar without an index is
    /// scanned from its start.
    pub fn scan(&self) -> BufReader<At<'_>> {
        reader_at(&self.file, 0, SCAN_WINDOW)
    }

    /// Where the archive is read from.
    pub fn source(&self) -> &Source {
        &self.file
    }

    /// The open archive file; None for a compressed archive, whose data must be
    /// decompressed (it cannot be cloned or copied by the kernel).
    pub fn file(&self) -> Option<&File> {
        match &self.file {
            Source::File(f) => Some(f),
            Source::Packed(p) => Some(&p.0),
            Source::Compressed(_) => None,
        }
    }

    /// The archive's length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for an empty file.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Parses the tar header(s) of an index entry and checks they say the same.
    pub fn check_member(&self, e: &IndexEntry) -> Result<TarEntry, ArchiveError> {
        let head = header_len(e)?;
        let mut buf = vec![0u8; head as usize];
        self.file.read_exact_at(&mut buf, e.header_offset)?;
        member_in(e, &buf, false).map(|(tar, _)| tar)
    }

    /// Reads `len` bytes at `offset` (several members' headers and data at once) into
    /// `buf`, which is kept from call to call and grows to the largest read.
    pub fn read_into<'b>(
        &self,
        offset: u64,
        len: u64,
        buf: &'b mut Vec<u8>,
    ) -> Result<&'b [u8], ArchiveError> {
        let len = usize::try_from(len).map_err(|_| io::Error::other("read too large"))?;
        if buf.len() < len {
            buf.resize(len, 0);
        }
        let bytes = &mut buf[..len];
        self.file.read_exact_at(bytes, offset)?;
        Ok(bytes)
    }
}

/// The length of a member's headers, refused when larger than a reader accepts.
pub fn header_len(e: &IndexEntry) -> Result<u64, ArchiveError> {
    // The index checks bounded `data_offset - header_offset` by the archive's length.
    let head = e.data_offset - e.header_offset;
    if head > MAX_HEADERS {
        return Err(ArchiveError::Mismatch {
            offset: e.header_offset,
            what: "headers larger than a reader accepts",
        });
    }
    Ok(head)
}

/// Parses the member of index entry `e` from `bytes`, which start at its first header
/// and hold its headers and, when `with_data`, its stored data (the runs one after
/// another); checks the headers agree with the entry and returns them, with the data.
pub fn member_in<'b>(
    e: &IndexEntry,
    bytes: &'b [u8],
    with_data: bool,
) -> Result<(TarEntry, Option<&'b [u8]>), ArchiveError> {
    let mismatch = |what| ArchiveError::Mismatch {
        offset: e.header_offset,
        what,
    };
    let head = header_len(e)? as usize;
    let stored = if with_data { e.stored } else { 0 };
    let end = head.saturating_add(usize::try_from(stored).unwrap_or(usize::MAX));
    let (Some(headers), Some(data)) = (bytes.get(..head), bytes.get(head..end)) else {
        return Err(mismatch("member runs past the bytes read"));
    };
    let tar = Reader::new(headers)
        .next_entry()
        .map_err(|mut err| {
            err.offset += e.header_offset;
            err
        })?
        .ok_or_else(|| mismatch("no entry at the indexed offset"))?;
    agree(&tar, e).map_err(mismatch)?;
    Ok((tar, with_data.then_some(data)))
}

/// The most header bytes (pax records, long names, sparse map) one member may have.
pub(crate) const MAX_HEADERS: u64 = 16 << 20;

/// Whether a parsed tar entry says what its index entry says; if not, what differs.
fn agree(t: &TarEntry, e: &IndexEntry) -> Result<(), &'static str> {
    if t.path != e.path {
        return Err("path");
    }
    if tar_kind(e.kind) != t.kind {
        return Err("kind");
    }
    if t.size != e.size || t.stored != e.stored || t.data_offset + e.header_offset != e.data_offset
    {
        return Err("data size or place");
    }
    if t.sparse.as_deref().unwrap_or_default() != e.runs.as_slice() {
        return Err("sparse map");
    }
    if t.link_target.as_deref().unwrap_or_default() != e.link.as_slice() {
        return Err("link target");
    }
    if (t.mode, t.uid, t.gid) != (e.mode, e.uid, e.gid) {
        return Err("metadata");
    }
    // What a stream reader would take from the headers (and from the index after
    // them: see `tail`): the times, the device number of a device, every xattr.
    t.times_agree(e.mtime, e.atime)?;
    let rdev = match t.kind {
        TarKind::CharDevice | TarKind::BlockDevice => t
            .rdev
            .map_or(0, |(major, minor)| rustix::fs::makedev(major, minor)),
        _ => 0,
    };
    if rdev != e.rdev {
        return Err("device number");
    }
    if t.xattrs != e.xattrs {
        return Err("xattrs");
    }
    // ACLs in text, which the index holds only as the attributes pack writes them
    // beside (a reader sets the attribute where a member carries both).
    let attribute_given = |a: &[u8]| t.xattrs.iter().any(|(name, _)| name == a);
    let text_only = |key: &[u8]| super::acl::attribute_of(key).is_some_and(|a| !attribute_given(a));
    if t.pax.iter().any(|(key, _)| text_only(key)) {
        return Err("ACLs");
    }
    if let Some(names) = &e.names {
        if (&t.uname, &t.gname) != (&names.user, &names.group) {
            return Err("owner names");
        }
    }
    Ok(())
}

/// The tar kind an index kind stands for.
pub fn tar_kind(k: Kind) -> TarKind {
    match k {
        Kind::File => TarKind::File,
        Kind::Dir => TarKind::Dir,
        Kind::Symlink => TarKind::Symlink,
        Kind::HardLink => TarKind::HardLink,
        Kind::Fifo => TarKind::Fifo,
        Kind::CharDevice => TarKind::CharDevice,
        Kind::BlockDevice => TarKind::BlockDevice,
    }
}

/// Reads an archive file from a position with `pread`.
pub struct At<'a> {
    /// The file.
    pub file: &'a dyn ReadAt,
    /// The next offset to read.
    pub pos: u64,
}

impl Read for At<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// Moving the position is all a seek does (for a reader that skips members' data
/// with [`crate::tar::Reader::with_skip`]); from the end is not supported.
impl io::Seek for At<'_> {
    fn seek(&mut self, to: io::SeekFrom) -> io::Result<u64> {
        self.pos = match to {
            io::SeekFrom::Start(p) => p,
            io::SeekFrom::Current(d) => self
                .pos
                .checked_add_signed(d)
                .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?,
            io::SeekFrom::End(_) => return Err(io::ErrorKind::Unsupported.into()),
        };
        Ok(self.pos)
    }
}

/// What an archive file's end says of its index.
enum Indexed {
    /// A valid index, which describes every member.
    Yes(Index),
    /// No ferry footer: a plain tar.
    No,
    /// A ferry footer, but the end-of-archive blocks before its index hold data from
    /// `at` on: members were added since, which the index does not describe.
    Overwritten { at: u64 },
}

/// The ferry footer at the end of `file`, `len` bytes long (a packed index's too, which
/// is seen where the archive is not read through [`Source::file`]), and where data
/// lies in the end-of-archive blocks before the index it names, if anywhere. The index
/// ends the members where those blocks begin; anything but zeros there is a member a
/// tar reader sees (`tar -r` writes new ones there, over the blocks and the index
/// after them), and the archive is then read as tar reads it. None: no footer.
fn footer_of(
    file: &(impl ReadAt + ?Sized),
    len: u64,
) -> Result<Option<(Footer, Option<u64>)>, ArchiveError> {
    if len < FOOTER_LEN + 1024 {
        return Ok(None);
    }
    let mut footer = [0u8; FOOTER_LEN as usize];
    fill_at(file, &mut footer, len - FOOTER_LEN)?;
    let Some(f) = Footer::parse_with(&footer, len, true)? else {
        return Ok(None);
    };
    let mut end = [0u8; 1024];
    let blocks = f.tar_end - 1024;
    fill_at(file, &mut end, blocks)?;
    let overwritten = end.iter().position(|&b| b != 0).map(|i| blocks + i as u64);
    Ok(Some((f, overwritten)))
}

/// Reads the footer and, if there is one, goes through the whole index once: every
/// entry checked, and the checksum at the end.
fn read_index(file: &Source, len: u64) -> Result<Indexed, ArchiveError> {
    let f = match footer_of(file, len)? {
        None => return Ok(Indexed::No),
        Some((_, Some(at))) => return Ok(Indexed::Overwritten { at }),
        Some((f, None)) => f,
    };
    if f.version == PACKED_VERSION {
        // Packed, in an archive compressed since (`Source::file` reads a plain one):
        // its index is not read there, and the tar is read as tar reads it.
        return Ok(Indexed::No);
    }
    let index = Index::new(f);
    for entry in index.entries(reader_at(file, index.offset(), INDEX_WINDOW)) {
        entry?;
    }
    Ok(Indexed::Yes(index))
}

/// Where the tree table of a ferry archive lies (its first byte and its length, trailer
/// included), found from the footer and the table's trailer alone: the index is not
/// read, so this costs the same for any archive. `None` for a tar without a ferry
/// footer, an index from before the table (version 2 and older), or an archive that
/// `tar -r` appended to since its index was made. Only the footer's and the trailer's
/// own checksums are checked here; [`crate::tree::Table::open`] checks the table.
pub fn embedded_tree(
    file: &(impl ReadAt + ?Sized),
    len: u64,
) -> Result<Option<EmbeddedTree>, ArchiveError> {
    let f = match footer_of(file, len)? {
        Some((f, None)) if f.version >= crate::index::TREE_SINCE => f,
        _ => return Ok(None),
    };
    if f.version == PACKED_VERSION {
        // Read through `Source::file`, a packed index's table is found in the plain
        // view; seen here, in a file read as it is, it is not read.
        return Ok(None);
    }
    let index_end = f.index_offset + f.index_len;
    let mut raw = [0u8; crate::tree::TRAILER_LEN as usize];
    let trailer_at = index_end
        .checked_sub(crate::tree::TRAILER_LEN)
        .filter(|&at| at >= f.index_offset)
        .ok_or_else(|| crate::index::IndexError("no tree table at the index's end".into()))?;
    fill_at(file, &mut raw, trailer_at)?;
    let t = crate::tree::Trailer::decode(&raw).map_err(|e| crate::index::IndexError(e.0))?;
    let table_len = t
        .body_len()
        .and_then(|b| b.checked_add(crate::tree::TRAILER_LEN))
        .filter(|&l| l <= f.index_len && t.data_end == f.tar_end)
        .ok_or_else(|| crate::index::IndexError("the tree table does not fit the index".into()))?;
    Ok(Some(EmbeddedTree {
        at: index_end - table_len,
        len: table_len,
        paged: t.pages().is_some_and(|p| p > 0),
        footer: f,
    }))
}

/// Where a ferry archive's tree table lies, and the footer of the index that holds it.
#[derive(Clone, Copy, Debug)]
pub struct EmbeddedTree {
    /// The table's first byte in the archive.
    pub at: u64,
    /// Its length, trailer included.
    pub len: u64,
    /// Whether it has page sums (version 2), so a reader can check only what it reads.
    pub paged: bool,
    footer: Footer,
}

impl EmbeddedTree {
    /// Bytes of the whole index (entries and table).
    pub fn index_len(&self) -> u64 {
        self.footer.index_len
    }

    /// The index's version.
    pub fn version(&self) -> u32 {
        self.footer.version
    }

    /// The largest file whose content hash the table gives out as recorded: all of
    /// them, but in an index older than [`crate::index::SKIPPING_HASH_SINCE`] (see
    /// [`crate::tree::Table::hashes_up_to`]).
    pub fn hashes_up_to(&self) -> u64 {
        match self.footer.version < crate::index::SKIPPING_HASH_SINCE {
            true => crate::index::LEGACY_HASH_MAX,
            false => u64::MAX,
        }
    }

    /// Reads the whole index (entries and table) once and compares it with the
    /// footer's checksum, keeping none of it.
    pub fn check_index(&self, file: &(impl ReadAt + ?Sized)) -> Result<(), ArchiveError> {
        let mut r =
            reader_at(&file, self.footer.index_offset, INDEX_WINDOW).take(self.footer.index_len);
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        let mut buf = vec![0u8; INDEX_WINDOW];
        let mut seen = 0u64;
        loop {
            let n = r.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            seen += n as u64;
        }
        if seen != self.footer.index_len || !self.footer.hash_matches(hasher.digest()) {
            return Err(
                crate::index::IndexError("index checksum mismatch (damaged)".into()).into(),
            );
        }
        Ok(())
    }
}

/// Bytes of an archive without an index read at a time when scanning it.
const SCAN_WINDOW: usize = 1 << 20;

/// Bytes of the index read at a time when going through it ...
const INDEX_WINDOW: usize = 256 << 10;
/// ... and when reading one entry.
const ENTRY_WINDOW: usize = 4096;

/// Reads the archive from `pos` on, `window` bytes at a time.
fn reader_at(file: &dyn ReadAt, pos: u64, window: usize) -> BufReader<At<'_>> {
    BufReader::with_capacity(window, At { file, pos })
}
