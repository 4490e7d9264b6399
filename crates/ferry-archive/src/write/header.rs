//! Encoding tar headers: a ustar header, preceded by a pax extended header when the
//! entry needs more than ustar can say (long names, nanosecond times, large numbers,
//! xattrs, sparse maps) or when its data must be pushed to a 4 KiB boundary, and by GNU
//! long-name headers for long names that are not UTF-8 (see `long_name`). ACL attributes
//! go in as text too (`SCHILY.acl.access`, `SCHILY.acl.default`), as GNU tar and bsdtar
//! restore them.
//!
//! The push is a `comment` record of the right length: every tar reader ignores it
//! silently (GNU tar warns about unknown keywords, not about `comment`). No pax header
//! is a whole number of blocks long (a `comment` makes it longer where it would be),
//! which GNU tar's `--delete` mishandles (see `pad_to_align`).

use crate::index::Names;
use crate::owners::OwnerNames;
use crate::read::acl::{self, acl_text};
use ferry_core::entry::{Entry, EntryKind, Timestamp};
use std::borrow::Cow;
use std::io::{self, Write};

/// Tar's block size.
pub const BLOCK: u64 = 512;
/// File data of this size or more starts on a multiple of this.
pub const ALIGN: u64 = 4096;

/// Rounds up to a whole number of tar blocks.
pub fn pad_block(n: u64) -> u64 {
    n.div_ceil(BLOCK) * BLOCK
}

/// The typeflag and link name of an entry, as tar stores them.
fn type_of(kind: &EntryKind) -> (u8, &[u8]) {
    match kind {
        EntryKind::File { .. } => (b'0', b""),
        EntryKind::HardLink { target } => (b'1', target.as_bytes()),
        EntryKind::Symlink { target } => (b'2', target),
        EntryKind::CharDevice { .. } => (b'3', b""),
        EntryKind::BlockDevice { .. } => (b'4', b""),
        EntryKind::Dir => (b'5', b""),
        EntryKind::Fifo => (b'6', b""),
        // Never written: the pack sink refuses a socket before its header.
        EntryKind::Socket => (b'6', b""),
    }
}

/// The length of a pax record `LEN KEY=VALUE\n` with a key and value of these lengths:
/// LEN counts the whole record, its own digits included.
fn pax_record_len(key: usize, value: usize) -> usize {
    let body = key + value + 3; // ' ', '=', '\n'
    let mut len = body + 1;
    while len != body + decimal_digits(len) {
        len = body + decimal_digits(len);
    }
    len
}

fn decimal_digits(n: usize) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// One pax record: `LEN KEY=VALUE\n`, where LEN counts the whole record.
pub fn pax_record(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    pax_record_with(out, key, value.len(), |out| out.extend_from_slice(value));
}

/// A pax record whose value of `value_len` bytes `value` appends to `out`.
fn pax_record_with(
    out: &mut Vec<u8>,
    key: &[u8],
    value_len: usize,
    value: impl FnOnce(&mut Vec<u8>),
) {
    let len = pax_record_len(key.len(), value_len);
    // Writing into a Vec cannot fail.
    let _ = write!(out, "{len} ");
    out.extend_from_slice(key);
    out.push(b'=');
    value(out);
    out.push(b'\n');
}

/// A pax time value, `SECONDS[.NANOSECONDS]`, written into `buf`.
fn time_value(t: Timestamp, buf: &mut [u8; 40]) -> &[u8] {
    let mut out = io::Cursor::new(&mut buf[..]);
    // At most 21 characters of seconds, a point and 9 digits: it fits.
    let _ = if t.nsec == 0 {
        write!(out, "{}", t.sec)
    } else if t.sec < 0 {
        // A negative time with a fraction is written as its floor plus a positive
        // fraction would be wrong in pax (where the sign applies to both): write the
        // exact value.
        let total_ns = t.sec as i128 * 1_000_000_000 + t.nsec as i128;
        let (s, ns) = ((-total_ns) / 1_000_000_000, (-total_ns) % 1_000_000_000);
        write!(out, "-{s}.{ns:09}")
    } else {
        write!(out, "{}.{:09}", t.sec, t.nsec)
    };
    let n = out.position() as usize;
    &buf[..n]
}

/// Writes `v` as a NUL-terminated octal field of `field.len()` bytes, if it fits.
fn octal(field: &mut [u8], v: u64) -> bool {
    let digits = field.len() - 1;
    if 3 * digits < 64 && v >> (3 * digits) != 0 {
        return false;
    }
    let mut rest = v;
    for d in field[..digits].iter_mut().rev() {
        *d = b'0' + (rest & 7) as u8;
        rest >>= 3;
    }
    field[digits] = 0;
    true
}

/// Splits a path into ustar's prefix and name fields, if it fits them.
fn split_ustar(path: &[u8]) -> Option<(&[u8], &[u8])> {
    if path.len() <= 100 {
        return Some((b"", path));
    }
    // The prefix ends at a '/', which is not stored; the name must be non-empty.
    let start = path.len().saturating_sub(101);
    (start..path.len().min(156))
        .filter(|&i| path[i] == b'/')
        .map(|i| (&path[..i], &path[i + 1..]))
        .find(|(p, n)| p.len() <= 155 && n.len() <= 100 && !n.is_empty())
}

/// Encodes entries' headers into buffers it keeps from one entry to the next, so laying
/// out a member allocates nothing (a fresh kilobyte or more per member made glibc
/// consolidate its free lists every time).
#[derive(Default)]
pub struct HeaderEncoder {
    pax: Vec<u8>,
    bytes: Vec<u8>,
    names: OwnerNames,
    /// Leave data where the headers end, on a 512-byte block, not on [`ALIGN`].
    unaligned: bool,
    /// The owner names every header gives instead of this machine's names for the ids.
    owners: HeaderOwners,
    /// How members' headers are written beyond what each member says.
    style: Style,
}

/// How headers are written beyond what each member says.
#[derive(Clone, Copy, Debug, Default)]
struct Style {
    /// Leave the times' nanoseconds and the atime to the index where they alone would
    /// make a pax header (see [`HeaderEncoder::times_in_index`]).
    times_in_index: bool,
    /// The mtime of every pax header itself (`--pax-option=exthdr.mtime=`); else the
    /// member's, as GNU tar gives it.
    pax_header_mtime: Option<u64>,
}

/// Which owner names headers give: by default the names this machine has for the
/// ids; `pack --numeric-owner` none; `pack --owner=NAME`, `--group=NAME` those.
#[derive(Clone, Debug, Default)]
pub struct HeaderOwners {
    /// No names at all, only ids.
    pub numeric: bool,
    /// The user name of every member.
    pub user: Option<Vec<u8>>,
    /// The group name of every member.
    pub group: Option<Vec<u8>>,
}

/// What the header must say about a regular file's data.
pub struct DataShape<'a> {
    /// Bytes stored in the archive for the file.
    pub stored: u64,
    /// For a sparse file: its runs `(offset, length)`, stored one after another.
    pub runs: Option<&'a [(u64, u64)]>,
}

impl HeaderEncoder {
    /// An encoder that puts no file's data on [`ALIGN`]: for archives nothing clones
    /// from (a stream to be unpacked as it arrives, a compressed archive), where the
    /// padding would only be more bytes to send or compress.
    pub fn unaligned() -> Self {
        HeaderEncoder {
            unaligned: true,
            ..HeaderEncoder::default()
        }
    }

    /// This encoder, leaving the times' nanoseconds and the atime of a member that needs
    /// no pax header for anything else to the index, so a small file costs a ustar
    /// header and its data, as in GNU tar's own format. For archives a reader reads
    /// with their index, or as a stream that fixes the times from the index at its end
    /// (see `read::tail`); not for a stream whose index is not read (an S3 shard
    /// fetched in ranges).
    pub fn times_in_index(mut self, on: bool) -> Self {
        self.style.times_in_index = on;
        self
    }

    /// This encoder, giving every pax header (not the members) the mtime `secs`, as
    /// GNU tar's `--pax-option=exthdr.mtime=`; `None`: each member's own.
    pub fn pax_header_mtime(mut self, secs: Option<u64>) -> Self {
        self.style.pax_header_mtime = secs;
        self
    }

    /// This encoder, giving the owner names `owners` says.
    pub fn with_owners(self, owners: HeaderOwners) -> Self {
        HeaderEncoder { owners, ..self }
    }

    /// Encodes `entry` for an archive offset `at`: the bytes to write there, its pax
    /// header (if any) and ustar header (and, for a sparse file, the sparse map
    /// blocks); its data starts right after them. Regular files of [`ALIGN`] bytes or
    /// more get their data (for sparse files, the first run) on a multiple of [`ALIGN`].
    /// With them, the owner names the header gives (where this machine has names for
    /// the ids), for the index.
    pub fn encode(
        &mut self,
        entry: &Entry,
        shape: Option<&DataShape<'_>>,
        at: u64,
    ) -> (&[u8], Names) {
        let HeaderEncoder {
            pax,
            bytes,
            names,
            unaligned,
            owners,
            style,
        } = self;
        pax.clear();
        bytes.clear();
        let (user, group) = match owners.numeric {
            true => (None, None),
            false => {
                let (user, group) = names.of(entry.meta.uid, entry.meta.gid);
                (
                    owners.user.as_deref().or(user),
                    owners.group.as_deref().or(group),
                )
            }
        };
        let stored = |name: Option<&[u8]>| name.and_then(stored_name).map(<[u8]>::to_vec);
        let owner = Names {
            user: stored(user),
            group: stored(group),
        };
        let shape = shape.map(|s| (s, !*unaligned));
        let names = (&owner, names);
        encode_into(entry, shape, at, names, *style, pax, bytes);
        (bytes, owner)
    }
}

/// The longest owner name a ustar header field holds.
const OWNER_FIELD_LEN: usize = 32;

/// An owner name as a header keeps it: in the ustar field when it fits, else in a pax
/// record, which must be UTF-8; a longer name that is not is left out.
fn stored_name(name: &[u8]) -> Option<&[u8]> {
    (name.len() <= OWNER_FIELD_LEN || std::str::from_utf8(name).is_ok()).then_some(name)
}

/// [`HeaderEncoder::encode`], with the owner's names and the names of ids, `pax`
/// (empty) to build the pax records in and `bytes` (empty) to encode into.
fn encode_into(
    entry: &Entry,
    shape: Option<(&DataShape<'_>, bool)>,
    at: u64,
    (owner, names): (&Names, &mut OwnerNames),
    style: Style,
    pax: &mut Vec<u8>,
    bytes: &mut Vec<u8>,
) {
    let (typeflag, link) = type_of(&entry.kind);
    let meta = &entry.meta;
    let path = entry.path.as_bytes();
    let mut ustar = [0u8; 512];

    // Sparse files take GNU's pax 1.0 form: the real name and size go in pax records,
    // the ustar name is a stand-in, and the data begins with the map.
    let (map, name_in_header, size_field) = match shape.map(|(s, _)| s) {
        Some(DataShape {
            stored,
            runs: Some(runs),
        }) => {
            let real = match &entry.kind {
                EntryKind::File { size, .. } => *size,
                _ => 0,
            };
            // GNU tar takes a sparse file's length from the end of its last run, so a
            // file that ends in a hole gets an empty run at its end, as GNU tar writes.
            let ends_in_hole = runs.last().map_or(real > 0, |(o, l)| o + l < real);
            let mut text = format!("{}\n", runs.len() + usize::from(ends_in_hole));
            for (o, l) in runs.iter() {
                text.push_str(&format!("{o}\n{l}\n"));
            }
            if ends_in_hole {
                text.push_str(&format!("{real}\n0\n"));
            }
            let map = text.into_bytes();
            let mut stand_in = sparse_stand_in(path);
            pax_record(pax, b"GNU.sparse.major", b"1");
            pax_record(pax, b"GNU.sparse.minor", b"0");
            long_name(bytes, pax, b'L', b"GNU.sparse.name", path);
            pax_record(pax, b"GNU.sparse.realsize", real.to_string().as_bytes());
            if split_ustar(&stand_in).is_none() {
                stand_in.truncate(100);
            }
            let size = pad_block(map.len() as u64) + stored;
            (map, Cow::Owned(stand_in), size)
        }
        Some(DataShape { stored, runs: None }) => (Vec::new(), Cow::Borrowed(path), *stored),
        None => (Vec::new(), Cow::Borrowed(path), 0),
    };

    // Names that fit ustar's fields go there as raw bytes, which both GNU tar and
    // bsdtar take as they are; only longer names need a pax record.
    match split_ustar(&name_in_header) {
        Some((prefix, name)) => {
            ustar[..name.len()].copy_from_slice(name);
            ustar[345..345 + prefix.len()].copy_from_slice(prefix);
        }
        None => {
            let shown = &name_in_header[..name_in_header.len().min(100)];
            ustar[..shown.len()].copy_from_slice(shown);
            long_name(bytes, pax, b'L', b"path", &name_in_header);
        }
    }
    if !link.is_empty() {
        // A longer target goes in a record, and its first 100 bytes in the field, as
        // GNU tar writes it: libarchive 3.6 drops a non-UTF-8 target whose field is
        // empty (the symlink comes out as an empty regular file).
        let shown = &link[..link.len().min(100)];
        ustar[157..157 + shown.len()].copy_from_slice(shown);
        if link.len() > 100 {
            long_name(bytes, pax, b'K', b"linkpath", link);
        }
    }
    octal(&mut ustar[100..108], u64::from(meta.mode & 0o7777));
    if !octal(&mut ustar[108..116], u64::from(meta.uid)) {
        pax_record(pax, b"uid", meta.uid.to_string().as_bytes());
    }
    if !octal(&mut ustar[116..124], u64::from(meta.gid)) {
        pax_record(pax, b"gid", meta.gid.to_string().as_bytes());
    }
    if !octal(&mut ustar[124..136], size_field) {
        octal(&mut ustar[124..136], 0);
        pax_record(pax, b"size", size_field.to_string().as_bytes());
    }
    let mtime_fits = meta.mtime.sec >= 0 && octal(&mut ustar[136..148], meta.mtime.sec as u64);
    for x in &meta.xattrs {
        pax_record(pax, &crate::tar::xattr::schily_key(&x.name), &x.value);
    }
    // ACLs as text too, as GNU tar and bsdtar write and restore them (`--acls`).
    for x in &meta.xattrs {
        let text = acl::record_of(&x.name).and_then(|key| Some((key, acl_text(&x.value, names)?)));
        if let Some((key, text)) = text {
            pax_record(pax, key, &text);
        }
    }
    ustar[156] = typeflag;
    ustar[257..263].copy_from_slice(b"ustar\0");
    ustar[263..265].copy_from_slice(b"00");
    for (name, field, key) in [
        (&owner.user, 265..297, &b"uname"[..]),
        (&owner.group, 297..329, &b"gname"[..]),
    ] {
        match name.as_deref() {
            // As GNU tar: the field holds up to 32 bytes, with no NUL when full.
            Some(name) if name.len() <= field.len() => {
                ustar[field.start..field.start + name.len()].copy_from_slice(name)
            }
            // Longer, and UTF-8 (see `stored_name`).
            Some(name) => pax_record(pax, key, name),
            None => {}
        }
    }
    if let EntryKind::CharDevice { rdev } | EntryKind::BlockDevice { rdev } = entry.kind {
        octal(&mut ustar[329..337], u64::from(rustix::fs::major(rdev)));
        octal(&mut ustar[337..345], u64::from(rustix::fs::minor(rdev)));
    }

    let map_blocks = pad_block(map.len() as u64);
    let aligned = shape.is_some_and(|(s, align)| align && s.stored >= ALIGN);
    // The times to the nanosecond, and the atime, where a pax header is written anyway
    // (or the mtime does not fit the ustar field); otherwise, in an archive that keeps
    // them in its index, the header has the mtime's seconds alone (see docs/format.md).
    if !style.times_in_index || aligned || !pax.is_empty() || !mtime_fits {
        if !mtime_fits || meta.mtime.nsec != 0 {
            pax_record(pax, b"mtime", time_value(meta.mtime, &mut [0; 40]));
        }
        // A reader takes the mtime for an atime not stored (see `tar::entry`).
        if meta.atime != meta.mtime {
            pax_record(pax, b"atime", time_value(meta.atime, &mut [0; 40]));
        }
    }
    if aligned {
        pad_to_align(pax, at + bytes.len() as u64, map_blocks);
    } else if !pax.is_empty() && pax.len() as u64 % BLOCK == 0 {
        // See `pad_to_align`: no pax header may fill its blocks exactly.
        pax_record(pax, b"comment", b"");
    }
    debug_assert!(pax.len() as u64 % BLOCK != 0 || pax.is_empty());
    if !pax.is_empty() {
        let mut xhdr = ustar;
        xhdr[..100].fill(0);
        xhdr[345..500].fill(0);
        // "PaxHeaders/" and up to 89 bytes of the name.
        let shown = &name_in_header[..name_in_header.len().min(89)];
        xhdr[..11].copy_from_slice(b"PaxHeaders/");
        xhdr[11..11 + shown.len()].copy_from_slice(shown);
        xhdr[157..257].fill(0);
        if let Some(secs) = style.pax_header_mtime {
            xhdr[136..148].fill(0);
            octal(&mut xhdr[136..148], secs);
        }
        octal(&mut xhdr[124..136], pax.len() as u64);
        xhdr[156] = b'x';
        checksum(&mut xhdr);
        bytes.extend_from_slice(&xhdr);
        bytes.extend_from_slice(pax);
        bytes.resize(pad_block(bytes.len() as u64) as usize, 0);
    }
    checksum(&mut ustar);
    bytes.extend_from_slice(&ustar);
    bytes.extend_from_slice(&map);
    bytes.resize(bytes.len() + (map_blocks as usize - map.len()), 0);
    debug_assert!(!aligned || (at + bytes.len() as u64) % ALIGN == 0);
}

/// Carries a name too long for its ustar field: in the pax record `key`, or, when it is
/// not UTF-8, in a GNU long-name header of type `typeflag` (`L` for the entry's name,
/// `K` for its link target) appended to `bytes`, which then holds nothing else yet.
///
/// pax records are UTF-8 unless the header says `hdrcharset=BINARY`, and the two peers
/// disagree on that: GNU tar 1.34 warns about the keyword, and without it bsdtar 3.6
/// warns that the name cannot be converted (and drops a link target). Both read GNU
/// long names as raw bytes, silently.
fn long_name(bytes: &mut Vec<u8>, pax: &mut Vec<u8>, typeflag: u8, key: &[u8], name: &[u8]) {
    if std::str::from_utf8(name).is_ok() {
        pax_record(pax, key, name);
    } else {
        gnu_long_name(bytes, typeflag, name);
    }
}

/// Appends a GNU long-name header of type `typeflag` (`L` for the entry's name, `K`
/// for its link target) holding `name`, NUL-terminated, as GNU tar writes them.
fn gnu_long_name(bytes: &mut Vec<u8>, typeflag: u8, name: &[u8]) {
    let mut h = [0u8; 512];
    h[..13].copy_from_slice(b"././@LongLink");
    for field in [100..108, 108..116, 116..124, 136..148] {
        octal(&mut h[field], 0);
    }
    octal(&mut h[124..136], name.len() as u64 + 1);
    h[156] = typeflag;
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    checksum(&mut h);
    bytes.extend_from_slice(&h);
    bytes.extend_from_slice(name);
    bytes.push(0);
    bytes.resize(pad_block(bytes.len() as u64) as usize, 0);
}

/// GNU tar's stand-in name for a sparse file: `DIR/GNUSparseFile.0/NAME`.
fn sparse_stand_in(path: &[u8]) -> Vec<u8> {
    let (dir, name) = match path.iter().rposition(|&b| b == b'/') {
        Some(i) => (&path[..i + 1], &path[i + 1..]),
        None => (&b""[..], path),
    };
    let mut v = dir.to_vec();
    v.extend_from_slice(b"GNUSparseFile.0/");
    v.extend_from_slice(name);
    v
}

/// Adds a `comment` record so that, with the entry at `at`, its pax header block, its
/// records, its ustar header and `after` more bytes, the data starts on [`ALIGN`].
///
/// The records end at least one byte short of their last block: GNU tar 1.34 `--delete`
/// (and `-r`/`-u` after it) copies a pax header whose size is an exact multiple of 512
/// with an extra zero block after it, which ends the archive there for every reader
/// (and with `-b 1` it loops, growing the file until the disk is full).
fn pad_to_align(pax: &mut Vec<u8>, at: u64, after: u64) {
    let fixed = at + BLOCK /* pax header */ + BLOCK /* ustar header */ + after;
    // The records must fill `room` bytes once padded to a block, short of its end:
    // pick the smallest room that fits the records plus a minimal comment and a byte,
    // and lands the data on ALIGN.
    let min = pax.len() as u64 + 12 + 1; // "11 comment=\n" and the byte short
    let mut room = pad_block(min);
    while (fixed + room) % ALIGN != 0 {
        room += BLOCK;
    }
    // A comment of `fill` bytes makes a record of `fill + overhead` bytes, where the
    // overhead includes the length's own digits; solve for a fit one byte short.
    let want = room - 1 - pax.len() as u64;
    let comment = |fill: u64| pax_record_len(b"comment".len(), fill as usize) as u64;
    let mut fill = want.saturating_sub(12);
    loop {
        let len = comment(fill);
        // One byte short because the length gained a digit: a record one shorter than
        // needed still pads to the same block count.
        let fits = len == want || (len < want && pad_block(pax.len() as u64 + len) == room);
        if fits {
            pax_record_with(pax, b"comment", fill as usize, |out| {
                out.resize(out.len() + fill as usize, b'.');
            });
            return;
        }
        if len > want {
            fill -= 1;
        } else {
            fill += 1;
        }
    }
}

/// Fills in a header's checksum field.
fn checksum(h: &mut [u8; 512]) {
    h[148..156].fill(b' ');
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    // Six digits, a NUL and a space, as GNU tar writes it (the sum of 512 bytes fits).
    octal(&mut h[148..155], u64::from(sum));
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_core::entry::{Metadata, RelPath};

    #[test]
    fn record_length_counts_itself() {
        let mut v = Vec::new();
        pax_record(&mut v, b"path", b"x");
        assert_eq!(v, b"9 path=x\n");
        let mut v = Vec::new();
        pax_record(&mut v, b"comment", &[b'.'; 90]);
        let text = String::from_utf8(v.clone()).expect("ascii");
        let len: usize = text.split(' ').next().expect("len").parse().expect("num");
        assert_eq!(len, v.len());
    }

    fn file(path: &str, size: u64) -> Entry {
        Entry {
            path: RelPath::from_bytes(path.as_bytes().to_vec()),
            kind: EntryKind::File { size },
            meta: Metadata {
                mode: 0o644,
                mtime: Timestamp {
                    sec: 1_700_000_000,
                    nsec: 5,
                },
                ..Default::default()
            },
            links: None,
        }
    }

    /// The size of the pax header `bytes` start with.
    fn pax_size(bytes: &[u8]) -> u64 {
        assert_eq!(bytes[156], b'x');
        let field = std::str::from_utf8(&bytes[124..135]).expect("octal");
        u64::from_str_radix(field, 8).expect("octal")
    }

    #[test]
    fn large_files_start_on_alignment_at_any_offset() {
        for at in (0..20 * 4096).step_by(512) {
            for size in [4096u64, 100_000] {
                // Names of every length move the records' end through a whole block.
                for name_len in 1..=100 {
                    let mut enc = HeaderEncoder::default();
                    let (bytes, _) = enc.encode(
                        &file(&"n".repeat(name_len), size),
                        Some(&DataShape {
                            stored: size,
                            runs: None,
                        }),
                        at,
                    );
                    assert_eq!((at + bytes.len() as u64) % ALIGN, 0, "at {at}");
                    assert_ne!(pax_size(bytes) % BLOCK, 0, "at {at}, name {name_len}");
                }
            }
        }
    }

    #[test]
    fn an_unaligned_encoder_adds_no_padding() {
        let shape = DataShape {
            stored: 100_000,
            runs: None,
        };
        let entry = file("kernel/sched/core.c", 100_000);
        let plain = HeaderEncoder::unaligned()
            .encode(&entry, Some(&shape), 0)
            .0
            .len();
        for at in (0..4 * 4096).step_by(512) {
            let mut enc = HeaderEncoder::unaligned();
            assert_eq!(
                enc.encode(&entry, Some(&shape), at).0.len(),
                plain,
                "at {at}"
            );
        }
        // The pax header (nanosecond mtime) and the ustar header, no more.
        assert_eq!(plain, 3 * BLOCK as usize);
    }

    #[test]
    fn no_pax_header_fills_its_blocks_exactly() {
        // A small file (not padded) whose xattr brings its records to around 512
        // bytes, once to exactly 512, where a comment is added.
        let mut commented = 0;
        for value_len in 420..=460 {
            let mut entry = file("a", 100);
            entry.meta.xattrs.push(ferry_core::entry::Xattr {
                name: b"user.x".to_vec(),
                value: vec![b'v'; value_len],
            });
            let shape = DataShape {
                stored: 100,
                runs: None,
            };
            let mut enc = HeaderEncoder::default();
            let (bytes, _) = enc.encode(&entry, Some(&shape), 0);
            assert_ne!(pax_size(bytes) % BLOCK, 0, "value of {value_len}");
            commented += usize::from(String::from_utf8_lossy(bytes).contains(" comment="));
        }
        assert_eq!(commented, 1);
    }

    #[test]
    fn long_names_that_are_not_utf8_go_in_gnu_long_name_headers() {
        let long: Vec<u8> = [b"d/".as_slice(), &[0xe9; 300]].concat();
        let mut entry = file("x", 100_000);
        entry.path = RelPath::from_bytes(long.clone());
        for at in (0..8 * 4096).step_by(512) {
            let mut enc = HeaderEncoder::default();
            let shape = DataShape {
                stored: 100_000,
                runs: None,
            };
            let bytes = enc.encode(&entry, Some(&shape), at).0.to_vec();
            assert_eq!(&bytes[..13], b"././@LongLink");
            assert_eq!(bytes[156], b'L');
            assert_eq!(&bytes[512..512 + long.len()], &long[..]);
            assert_eq!(bytes[512 + long.len()], 0, "the name is NUL-terminated");
            let text = String::from_utf8_lossy(&bytes);
            assert!(!text.contains("hdrcharset") && !text.contains(" path="));
            assert_eq!((at + bytes.len() as u64) % ALIGN, 0, "at {at}");
        }
        // The same length in UTF-8 stays a pax record.
        entry.path = RelPath::from_bytes("\u{e9}".repeat(150).into_bytes());
        let bytes = HeaderEncoder::default().encode(&entry, None, 0).0.to_vec();
        assert_eq!(bytes[156], b'x');
        assert!(String::from_utf8_lossy(&bytes).contains(" path="));
    }

    #[test]
    fn small_files_are_not_padded() {
        let mut enc = HeaderEncoder::default();
        let (bytes, _) = enc.encode(
            &file("a", 100),
            Some(&DataShape {
                stored: 100,
                runs: None,
            }),
            512,
        );
        assert_eq!(bytes.len(), 1536); // pax header, one block of records, ustar header
    }

    #[test]
    fn long_names_split_or_go_to_pax() {
        let long = format!("{}/{}", "d".repeat(150), "f".repeat(99));
        assert!(split_ustar(long.as_bytes()).is_some());
        assert!(split_ustar("x".repeat(101).as_bytes()).is_none());
    }

    #[test]
    fn negative_fractional_time_is_exact() {
        let value = |sec, nsec| time_value(Timestamp { sec, nsec }, &mut [0; 40]).to_vec();
        assert_eq!(value(-2, 500_000_000), b"-1.500000000");
        assert_eq!(value(i64::MIN, 1), b"-9223372036854775807.999999999");
        assert_eq!(
            value(i64::MAX, 999_999_999),
            b"9223372036854775807.999999999"
        );
        assert_eq!(value(-5, 0), b"-5");
    }

    #[test]
    fn octal_fields_hold_what_fits_and_refuse_the_rest() {
        let mut field = [0xFFu8; 8];
        assert!(octal(&mut field, 0o7777777));
        assert_eq!(&field, b"7777777\0");
        assert!(!octal(&mut field, 0o10000000));
        let mut size = [0u8; 12];
        assert!(octal(&mut size, 1234));
        assert_eq!(&size, b"00000002322\0");
        assert!(!octal(&mut size, 8 << 30), "8 GiB needs a pax size");
    }

    #[test]
    fn pax_records_count_their_own_length() {
        for n in [0, 1, 80, 89, 90, 91, 985, 994, 995, 996, 9990, 9995] {
            let mut rec = Vec::new();
            pax_record(&mut rec, b"comment", &vec![b'.'; n]);
            let (len, _) = rec.split_at(rec.iter().position(|&b| b == b' ').unwrap_or(0));
            let said: usize = std::str::from_utf8(len)
                .ok()
                .and_then(|l| l.parse().ok())
                .unwrap_or(0);
            assert_eq!(said, rec.len(), "value of {n} bytes");
        }
    }
}
