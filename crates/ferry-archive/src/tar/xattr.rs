//! Extended attributes carried in pax records.
//!
//! - `SCHILY.xattr.NAME=VALUE` (GNU tar, star, bsdtar): the value raw; in the name GNU
//!   tar writes `%` as `%25` and `=` as `%3D` (a raw `=` would end the key) and decodes
//!   exactly those two escapes when reading, so we do the same.
//! - `LIBARCHIVE.xattr.NAME=VALUE` (bsdtar): the name URL-encoded (`%XX` for bytes
//!   outside `!`..`~` and for `%` and `=`), the value base64 without padding (padding is
//!   accepted too).
//!
//! bsdtar writes every attribute twice, once in each form, and (libarchive 3.6) puts the
//! URL-encoded name in the `SCHILY` key too, which GNU tar's decoding reads differently.
//! So when an entry has any `LIBARCHIVE.xattr` record, its `SCHILY.xattr` records are
//! ignored (see [`PaxView::xattrs`](super::pax::PaxView::xattrs)).

const SCHILY: &[u8] = b"SCHILY.xattr.";
const LIBARCHIVE: &[u8] = b"LIBARCHIVE.xattr.";

/// A decoded attribute: name and value.
pub(crate) type Xattr = (Vec<u8>, Vec<u8>);

/// Whether `key` carries an extended attribute.
pub(crate) fn is_xattr_key(key: &[u8]) -> bool {
    key.starts_with(SCHILY) || key.starts_with(LIBARCHIVE)
}

/// Whether `key` is a bsdtar `LIBARCHIVE.xattr` key.
pub(crate) fn is_libarchive_key(key: &[u8]) -> bool {
    key.starts_with(LIBARCHIVE)
}

/// Whether `key` is a `SCHILY.xattr` key.
pub(crate) fn is_schily_key(key: &[u8]) -> bool {
    key.starts_with(SCHILY)
}

/// Decodes an xattr record: `None` if `key` is not an xattr key, `Some(Err)` if the
/// name or value is malformed (empty name, NUL in the name, bad encoding).
pub(crate) fn decode(key: &[u8], value: &[u8]) -> Option<Result<Xattr, ()>> {
    let decoded = if let Some(name) = key.strip_prefix(SCHILY) {
        Some((gnu_unescape(name), value.to_vec()))
    } else if let Some(name) = key.strip_prefix(LIBARCHIVE) {
        url_decode(name).zip(base64_decode(value))
    } else {
        return None;
    };
    Some(
        decoded
            .filter(|(n, _)| !n.is_empty() && !n.contains(&0))
            .ok_or(()),
    )
}

/// The `SCHILY.xattr` key for attribute `name`, escaped as GNU tar writes it (`%` as
/// `%25`, `=` as `%3D`), so the key ends at the first `=` and [`decode`] gives `name`
/// back.
pub(crate) fn schily_key(name: &[u8]) -> Vec<u8> {
    let mut key = SCHILY.to_vec();
    for &b in name {
        match b {
            b'%' => key.extend_from_slice(b"%25"),
            b'=' => key.extend_from_slice(b"%3D"),
            b => key.push(b),
        }
    }
    key
}

/// GNU tar's name decoding: `%3D` is `=`, `%25` is `%`, everything else is literal.
fn gnu_unescape(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut rest = s;
    while let Some((&c, tail)) = rest.split_first() {
        let (byte, skip) = match tail {
            [b'3', b'D', ..] if c == b'%' => (b'=', 3),
            [b'2', b'5', ..] if c == b'%' => (b'%', 3),
            _ => (c, 1),
        };
        out.push(byte);
        rest = rest.get(skip..).unwrap_or_default();
    }
    out
}

/// Decodes `%XX` escapes (either case); a `%` without two hex digits is an error.
fn url_decode(s: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.iter();
    while let Some(&c) = bytes.next() {
        if c == b'%' {
            let hi = hex(*bytes.next()?)?;
            let lo = hex(*bytes.next()?)?;
            out.push((hi << 4) | lo);
        } else {
            out.push(c);
        }
    }
    Some(out)
}

fn hex(c: u8) -> Option<u8> {
    char::from(c)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

/// Decodes standard base64; trailing `=` padding is optional.
fn base64_decode(s: &[u8]) -> Option<Vec<u8>> {
    let unpadded = s.strip_suffix(b"==").or_else(|| s.strip_suffix(b"="));
    let data = match unpadded {
        Some(d) if s.len() % 4 == 0 => d,
        Some(_) => return None,
        None => s,
    };
    if data.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(data.len() / 4 * 3 + 2);
    for chunk in data.chunks(4) {
        let mut acc = 0u32;
        for &c in chunk {
            acc = (acc << 6) | u32::from(sextet(c)?);
        }
        let bits = 6 * chunk.len();
        let acc = acc << (24 - bits);
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(bytes.get(1..1 + bits / 8).unwrap_or_default());
    }
    Some(out)
}

fn sextet(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64() {
        assert_eq!(base64_decode(b"").unwrap(), b"");
        assert_eq!(base64_decode(b"YQ").unwrap(), b"a");
        assert_eq!(base64_decode(b"YQ==").unwrap(), b"a");
        assert_eq!(base64_decode(b"YWI").unwrap(), b"ab");
        assert_eq!(base64_decode(b"YWI=").unwrap(), b"ab");
        assert_eq!(base64_decode(b"YWJj").unwrap(), b"abc");
        assert_eq!(base64_decode(b"AP8A/w").unwrap(), [0, 255, 0, 255]);
        for bad in [&b"Y"[..], b"YQ=", b"Y===", b"YW!j", b"YWJj\n", b"="] {
            assert!(base64_decode(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn url() {
        assert_eq!(url_decode(b"user.a%3Db%25").unwrap(), b"user.a=b%");
        assert_eq!(url_decode(b"%e9%E9").unwrap(), [0xe9, 0xe9]);
        assert!(url_decode(b"%4").is_none());
        assert!(url_decode(b"%zz").is_none());
    }

    #[test]
    fn schily_keys_decode_to_their_names() {
        for name in [
            &b"user.plain"[..],
            b"user.a=b%c",
            b"user.%3D=%25",
            b"user.\xff",
        ] {
            let key = schily_key(name);
            assert!(!key.contains(&b'='), "{key:?}");
            assert_eq!(
                decode(&key, b"v").unwrap().unwrap(),
                (name.to_vec(), b"v".to_vec())
            );
        }
    }

    #[test]
    fn gnu_names() {
        assert_eq!(gnu_unescape(b"user.a%3Db%25c%41%3d%"), b"user.a=b%c%41%3d%");
        assert_eq!(gnu_unescape(b"%25%3D"), b"%=");
    }

    #[test]
    fn decode_keys() {
        assert_eq!(
            decode(b"SCHILY.xattr.user.a", b"v\0").unwrap().unwrap(),
            (b"user.a".to_vec(), b"v\0".to_vec())
        );
        assert_eq!(
            decode(b"LIBARCHIVE.xattr.user.%41", b"dg")
                .unwrap()
                .unwrap(),
            (b"user.A".to_vec(), b"v".to_vec())
        );
        assert!(decode(b"SCHILY.xattr.", b"v").unwrap().is_err());
        assert!(decode(b"LIBARCHIVE.xattr.a%00", b"").unwrap().is_err());
        assert!(decode(b"path", b"x").is_none());
    }
}
