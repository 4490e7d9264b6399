//! One 512-byte tar header block: its field layout, checksum and numeric fields.
//!
//! Three layouts share the first 257 bytes: POSIX ustar (magic `ustar\0`, uses the
//! `prefix` field for long paths), old GNU (magic `ustar  \0`, which keeps times and the
//! old sparse map where ustar has its prefix) and pre-POSIX v7 (no magic, nothing past
//! the link name).

use super::error::TarErrorKind;

/// One header block.
pub(crate) type Block = [u8; 512];

/// A fixed field of a header block: its name (for errors) and its byte range.
#[derive(Clone, Copy)]
pub(crate) struct Field {
    pub(crate) name: &'static str,
    start: usize,
    len: usize,
}

const fn field(name: &'static str, start: usize, len: usize) -> Field {
    Field { name, start, len }
}

const NAME: Field = field("name", 0, 100);
const MODE: Field = field("mode", 100, 8);
const UID: Field = field("uid", 108, 8);
const GID: Field = field("gid", 116, 8);
const SIZE: Field = field("size", 124, 12);
const MTIME: Field = field("mtime", 136, 12);
const CHKSUM: Field = field("checksum", 148, 8);
const TYPEFLAG: usize = 156;
const LINKNAME: Field = field("linkname", 157, 100);
const UNAME: Field = field("uname", 265, 32);
const GNAME: Field = field("gname", 297, 32);
const DEVMAJOR: Field = field("devmajor", 329, 8);
const DEVMINOR: Field = field("devminor", 337, 8);
const PREFIX: Field = field("prefix", 345, 155);
const GNU_ATIME: Field = field("atime", 345, 12);
/// Where in its file a multi-volume continuation (`M`) starts.
const GNU_OFFSET: Field = field("offset", 369, 12);
/// Old GNU sparse map in the header: 4 slots of (offset, numbytes), up to `isextended`.
const GNU_SPARSE_START: usize = 386;
const GNU_ISEXTENDED: usize = 482;
const GNU_REALSIZE: Field = field("realsize", 483, 12);

/// Which of the header layouts a block uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// POSIX ustar (and pax): magic `ustar\0`.
    Ustar,
    /// Old GNU: magic `ustar  \0`.
    Gnu,
    /// Pre-POSIX: no magic.
    V7,
}

/// A header block whose checksum has been verified.
pub(crate) struct Header<'a> {
    block: &'a Block,
}

impl<'a> Header<'a> {
    /// Checks the block's checksum and wraps it.
    pub(crate) fn parse(block: &'a Block) -> Result<Self, TarErrorKind> {
        if checksum_ok(block) {
            Ok(Header { block })
        } else {
            Err(TarErrorKind::BadChecksum)
        }
    }

    fn get(&self, f: Field) -> &'a [u8] {
        let b: &'a Block = self.block;
        b.get(f.start..f.start + f.len).unwrap_or_default()
    }

    /// The type flag byte.
    pub(crate) fn typeflag(&self) -> u8 {
        self.block[TYPEFLAG]
    }

    /// The header layout, from the magic field.
    pub(crate) fn format(&self) -> Format {
        let magic = self.block.get(257..265).unwrap_or_default();
        if magic.starts_with(b"ustar\0") {
            Format::Ustar
        } else if magic == b"ustar  \0" {
            Format::Gnu
        } else {
            Format::V7
        }
    }

    /// The path stored in the header itself: ustar `prefix/name`, else `name`.
    pub(crate) fn path(&self) -> Vec<u8> {
        let name = cstr(self.get(NAME));
        let prefix = match self.format() {
            Format::Ustar => cstr(self.get(PREFIX)),
            Format::Gnu | Format::V7 => &[],
        };
        if prefix.is_empty() {
            return name.to_vec();
        }
        let mut path = Vec::with_capacity(prefix.len() + 1 + name.len());
        path.extend_from_slice(prefix);
        path.push(b'/');
        path.extend_from_slice(name);
        path
    }

    /// The link target stored in the header itself.
    pub(crate) fn link_name(&self) -> &'a [u8] {
        cstr(self.get(LINKNAME))
    }

    /// The user name, absent in v7 headers or when empty.
    pub(crate) fn uname(&self) -> Option<&'a [u8]> {
        self.owner_name(UNAME)
    }

    /// The group name, absent in v7 headers or when empty.
    pub(crate) fn gname(&self) -> Option<&'a [u8]> {
        self.owner_name(GNAME)
    }

    fn owner_name(&self, f: Field) -> Option<&'a [u8]> {
        match self.format() {
            Format::V7 => None,
            Format::Ustar | Format::Gnu => Some(cstr(self.get(f))).filter(|s| !s.is_empty()),
        }
    }

    /// The permission bits (the file-type bits some writers add are dropped).
    pub(crate) fn mode(&self) -> Result<u32, TarErrorKind> {
        let mode = self.unsigned(MODE)?;
        u32::try_from(mode & 0o7777).map_err(|_| self.bad(MODE))
    }

    /// The owner's user id.
    pub(crate) fn uid(&self) -> Result<u32, TarErrorKind> {
        self.unsigned_u32(UID)
    }

    /// The owner's group id.
    pub(crate) fn gid(&self) -> Result<u32, TarErrorKind> {
        self.unsigned_u32(GID)
    }

    /// The size field: the number of data bytes that follow the header.
    pub(crate) fn size(&self) -> Result<u64, TarErrorKind> {
        self.unsigned(SIZE)
    }

    /// The modification time in seconds (negative values allowed in base-256).
    pub(crate) fn mtime(&self) -> Result<i64, TarErrorKind> {
        self.signed(MTIME)
    }

    /// Device major and minor numbers.
    pub(crate) fn device(&self) -> Result<(u32, u32), TarErrorKind> {
        match self.format() {
            Format::V7 => Ok((0, 0)),
            Format::Ustar | Format::Gnu => {
                Ok((self.unsigned_u32(DEVMAJOR)?, self.unsigned_u32(DEVMINOR)?))
            }
        }
    }

    /// The access time of an old GNU header, when it records one.
    pub(crate) fn gnu_atime(&self) -> Result<Option<i64>, TarErrorKind> {
        if self.format() != Format::Gnu || is_zero(self.get(GNU_ATIME)) {
            return Ok(None);
        }
        self.signed(GNU_ATIME).map(Some)
    }

    /// The byte of its file a multi-volume continuation (`M`) starts at.
    pub(crate) fn gnu_offset(&self) -> Result<u64, TarErrorKind> {
        self.unsigned(GNU_OFFSET)
    }

    /// The old GNU sparse slots (4 x 24 bytes) of this header.
    pub(crate) fn gnu_sparse_slots(&self) -> &'a [u8] {
        self.block
            .get(GNU_SPARSE_START..GNU_ISEXTENDED)
            .unwrap_or_default()
    }

    /// Whether old GNU sparse extension blocks follow this header.
    pub(crate) fn gnu_is_extended(&self) -> bool {
        self.block[GNU_ISEXTENDED] != 0
    }

    /// The logical size of an old GNU sparse file.
    pub(crate) fn gnu_realsize(&self) -> Result<u64, TarErrorKind> {
        self.unsigned(GNU_REALSIZE)
    }

    fn unsigned(&self, f: Field) -> Result<u64, TarErrorKind> {
        parse_unsigned(self.get(f)).ok_or_else(|| self.bad(f))
    }

    fn unsigned_u32(&self, f: Field) -> Result<u32, TarErrorKind> {
        u32::try_from(self.unsigned(f)?).map_err(|_| self.bad(f))
    }

    fn signed(&self, f: Field) -> Result<i64, TarErrorKind> {
        parse_signed(self.get(f)).ok_or_else(|| self.bad(f))
    }

    fn bad(&self, f: Field) -> TarErrorKind {
        TarErrorKind::bad_number(f.name, self.get(f))
    }
}

/// The bytes of a NUL-terminated (or full-width) string field.
pub(crate) fn cstr(field: &[u8]) -> &[u8] {
    let end = field.iter().position(|&c| c == 0).unwrap_or(field.len());
    field.get(..end).unwrap_or_default()
}

/// Whether every byte is zero.
pub(crate) fn is_zero(bytes: &[u8]) -> bool {
    bytes.iter().all(|&c| c == 0)
}

/// Whether the header checksum matches the unsigned or the signed byte sum (old BSD,
/// Solaris and HP-UX tars summed signed bytes; GNU tar and libarchive accept both).
pub(crate) fn checksum_ok(block: &Block) -> bool {
    let Some(recorded) = parse_octal(block.get(148..156).unwrap_or_default()) else {
        return false;
    };
    // The sum counts the checksum field itself as eight spaces. Summing whole slices
    // (not byte by byte with a test for the field) lets the compiler vectorise it.
    let field = CHKSUM.start..CHKSUM.start + CHKSUM.len;
    let (before, rest) = block.split_at(field.start);
    let after = rest.get(CHKSUM.len..).unwrap_or_default();
    // 512 bytes sum to at most 512 * 255: 32 bits hold either sum.
    let spaces = CHKSUM.len as u32 * u32::from(b' ');
    let unsigned_sum = |s: &[u8]| s.iter().map(|&c| u32::from(c)).sum::<u32>();
    let signed_sum = |s: &[u8]| s.iter().map(|&c| i32::from(c as i8)).sum::<i32>();
    let unsigned = unsigned_sum(before) + unsigned_sum(after) + spaces;
    let signed = signed_sum(before) + signed_sum(after) + spaces as i32;
    recorded == u64::from(unsigned) || u64::try_from(signed) == Ok(recorded)
}

/// A non-negative numeric field (as GNU tar's `from_header` reads it, see
/// [`from_header`]), at most `i64::MAX` as GNU tar's `off_t`.
pub(crate) fn parse_unsigned(field: &[u8]) -> Option<u64> {
    u64::try_from(from_header(field, false)?).ok()
}

/// A signed numeric field (as GNU tar's `from_header` reads it, see [`from_header`]).
pub(crate) fn parse_signed(field: &[u8]) -> Option<i64> {
    from_header(field, false)
}

/// Octal digits only, as GNU tar reads the checksum field.
fn parse_octal(field: &[u8]) -> Option<u64> {
    u64::try_from(from_header(field, true)?).ok()
}

/// Whether GNU tar's `isspace` (in the C locale) holds for `c`.
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// A numeric header field read exactly as GNU tar 1.34's `from_header` (list.c) reads
/// it, so that every archive GNU tar reads is read with the same numbers:
///
/// - one leading NUL is skipped (a buggy old tar wrote one when the field before
///   overflowed), then any white space; a field that is white space to its end is
///   invalid (GNU tar: "Blanks in header where numeric value expected");
/// - octal digits are read up to the first byte that is not one; that byte, if any,
///   must be a NUL or white space, and nothing after it is looked at (so a size field
///   of NULs and then digits is 0, and `"1 1"` is 1, as for GNU tar);
/// - a first byte (after the skipping) of exactly 0x80 or 0xff starts a GNU base-256
///   number, positive or negative two's complement, filling the rest of the field;
/// - with `octal_only` (the checksum field), base-256 is not read.
///
/// GNU tar's base-64 (written only by its test releases of 1999) and its reading of
/// overflowing octal as two's complement (which 12-byte fields never reach with a
/// 64-bit `time_t`) are not read: such fields are invalid.
pub(crate) fn from_header(field: &[u8], octal_only: bool) -> Option<i64> {
    let mut i = usize::from(field.first() == Some(&0));
    while field.get(i).is_some_and(|&c| is_c_space(c)) {
        i += 1;
    }
    let &first = field.get(i)?;
    let mut value: i64 = 0;
    if (b'0'..=b'7').contains(&first) {
        while let Some(&c) = field.get(i).filter(|c| (b'0'..=b'7').contains(*c)) {
            value = value.checked_mul(8)?.checked_add(i64::from(c - b'0'))?;
            i += 1;
        }
    } else if !octal_only && (first == 0x80 || first == 0xff) && i + 2 <= field.len() {
        value = if first == 0xff { -1 } else { 0 };
        for &c in field.get(i + 1..).unwrap_or_default() {
            value = value.checked_mul(256)?.checked_add(i64::from(c))?;
        }
        i = field.len();
    }
    match field.get(i) {
        Some(&c) if c != 0 && !is_c_space(c) => None,
        _ => Some(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn octal_accepts_padding_and_terminators() {
        assert_eq!(parse_octal(b"0000644\0"), Some(0o644));
        assert_eq!(parse_octal(b"   644 \0"), Some(0o644));
        assert_eq!(parse_octal(b"\0 644  "), Some(0o644));
        assert_eq!(parse_octal(b"77777777777\0"), Some(0o77777777777));
        assert_eq!(parse_octal(b"777777777777"), Some(0o777777777777));
        assert_eq!(parse_octal(b"\0\0\0\0"), Some(0));
        // As GNU tar: NULs then digits read as 0, a digit after a blank is not read.
        assert_eq!(parse_octal(b"\0\0\0\0\0\0\0\0\0\0\x001"), Some(0));
        assert_eq!(parse_octal(b"1 1        \0"), Some(1));
        assert_eq!(parse_octal(b"12\0garbage!"), Some(0o12));
        assert_eq!(parse_octal(b"\t\n 7\r"), Some(7));
    }

    #[test]
    fn octal_rejects_garbage() {
        assert_eq!(parse_octal(b"0000648\0"), None);
        assert_eq!(parse_octal(b"        "), None, "blanks to the end");
        assert_eq!(parse_octal(b"\0       "), None, "a NUL, then blanks");
        assert_eq!(
            parse_octal(b"\0\0 644  "),
            Some(0),
            "only one NUL is skipped"
        );
        assert_eq!(parse_octal(b"-1"), None, "GNU base-64 is not read");
        assert_eq!(parse_octal(b"+644"), None);
        assert_eq!(parse_octal(b"644x"), None);
        assert_eq!(parse_octal(b"0x10"), None);
        assert_eq!(parse_octal(&[b'7'; 40]), None, "overflow");
    }

    #[test]
    fn base256_positive_and_negative() {
        let mut f = [0u8; 12];
        f[0] = 0x80;
        f[11] = 0x2a;
        f[10] = 0x01;
        assert_eq!(parse_signed(&f), Some(0x12a));
        assert_eq!(parse_unsigned(&f), Some(0x12a));
        let minus_one = [0xffu8; 12];
        assert_eq!(parse_signed(&minus_one), Some(-1));
        assert_eq!(parse_unsigned(&minus_one), None);
        let mut min = [0u8; 12];
        min[..5].copy_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x80]);
        assert_eq!(parse_signed(&min), Some(i64::MIN));
        let mut too_big = [0u8; 12];
        too_big[0] = 0x80;
        too_big[3] = 0x01;
        assert_eq!(parse_signed(&too_big), None);
        // Only 0x80 and 0xff start a base-256 number, as for GNU tar.
        let mut other = [0u8; 12];
        other[0] = 0x81;
        assert_eq!(parse_signed(&other), None);
        assert_eq!(from_header(&other, true), None);
    }

    #[test]
    fn checksum_signed_and_unsigned() {
        let mut b = [0u8; 512];
        b[0] = b'a';
        b[300] = 0xff;
        let unsigned: u64 = u64::from(b'a') + 0xff + 8 * 32;
        b[148..156].copy_from_slice(format!("{unsigned:06o}\0 ").as_bytes());
        assert!(checksum_ok(&b));
        let signed: i64 = i64::from(b'a') - 1 + 8 * 32;
        b[148..156].copy_from_slice(format!("{signed:06o}\0 ").as_bytes());
        assert!(checksum_ok(&b));
        b[148..156].copy_from_slice(b"000001\0 ");
        assert!(!checksum_ok(&b));
    }

    #[test]
    fn cstr_stops_at_nul() {
        assert_eq!(cstr(b"abc\0def"), b"abc");
        assert_eq!(cstr(b"abc"), b"abc");
        assert_eq!(cstr(b"\0"), b"");
    }
}
