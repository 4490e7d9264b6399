//! pax extended headers: parsing records, validating known values, and the view of the
//! local (`x`) and global (`g`) records that apply to one entry.
//!
//! A record is `LEN KEY=VALUE\n` where LEN is the decimal length of the whole record,
//! itself included. Values may hold any byte (xattr values do): records are delimited by
//! their length, never by searching for a newline.

use std::collections::{HashMap, HashSet};

use super::error::TarErrorKind;
use super::xattr;
use super::MAX_PAX_GLOBAL;

/// One pax record: key and value, raw.
pub(crate) type Record = (Vec<u8>, Vec<u8>);

/// The longest length prefix accepted (more digits cannot fit in a 1 MiB header).
const MAX_LEN_DIGITS: usize = 20;

/// Parses a whole pax header body. On error, returns the position in `body` of the
/// record at fault with the reason.
///
/// NUL bytes where a record would start end the records; everything after them must be
/// NUL too (GNU tar and libarchive both stop at such a NUL; we make sure nothing hides
/// behind it).
pub(crate) fn parse_records(body: &[u8]) -> Result<Vec<Record>, (usize, TarErrorKind)> {
    let mut records = Vec::new();
    let mut pos = 0;
    while let Some(rest) = body.get(pos..).filter(|r| !r.is_empty()) {
        if rest.first() == Some(&0) {
            if rest.iter().all(|&c| c == 0) {
                break;
            }
            return Err((pos, TarErrorKind::BadPax("data after NUL padding")));
        }
        let (record, len) = parse_record(rest).map_err(|e| (pos, TarErrorKind::BadPax(e)))?;
        check_value(&record.0, &record.1).map_err(|e| (pos, e))?;
        records.push(record);
        pos += len;
    }
    Ok(records)
}

/// Parses the record at the start of `rest`; returns it and its length.
fn parse_record(rest: &[u8]) -> Result<(Record, usize), &'static str> {
    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 {
        return Err("record does not start with its length");
    }
    if digits > MAX_LEN_DIGITS {
        return Err("record length too long");
    }
    let len = decimal_u64(rest.get(..digits).unwrap_or_default())
        .and_then(|l| usize::try_from(l).ok())
        .ok_or("record length out of range")?;
    if rest.get(digits) != Some(&b' ') {
        return Err("no space after the record length");
    }
    let record = rest
        .get(..len)
        .ok_or("record length runs past the end of the header")?;
    let Some((&b'\n', inner)) = record.split_last() else {
        return Err("record does not end with a newline");
    };
    let content = inner
        .get(digits + 1..)
        .ok_or("record length shorter than the record")?;
    let eq = content
        .iter()
        .position(|&c| c == b'=')
        .ok_or("record has no '='")?;
    let (key, value) = content.split_at(eq);
    let value = value.get(1..).unwrap_or_default();
    if key.is_empty() || key.contains(&0) {
        return Err("record has an empty key or a NUL in its key");
    }
    Ok(((key.to_vec(), value.to_vec()), len))
}

/// Validates the value of a key this reader interprets where a bad value leaves the
/// archive unreadable (its framing, its names, its sparse map, its xattrs), so that
/// it is reported at its record. Unknown keys are not checked, nor are the keys whose
/// bad value GNU tar reports and ignores, reading the header field instead (size,
/// times, owners, device numbers: see [`PaxView`]'s users). An empty value is always valid:
/// it cancels the key.
fn check_value(key: &[u8], value: &[u8]) -> Result<(), TarErrorKind> {
    if value.is_empty() && !xattr::is_xattr_key(key) {
        return Ok(());
    }
    let ok = match key {
        b"path" | b"linkpath" | b"uname" | b"gname" | b"GNU.sparse.name" => !value.contains(&0),
        b"GNU.sparse.size"
        | b"GNU.sparse.realsize"
        | b"GNU.sparse.numblocks"
        | b"GNU.sparse.offset"
        | b"GNU.sparse.numbytes" => decimal_u64(value).is_some(),
        _ => match xattr::decode(key, value) {
            Some(x) => x.is_ok(),
            None => true,
        },
    };
    if ok {
        Ok(())
    } else {
        Err(TarErrorKind::bad_pax_value(key, value))
    }
}

/// Whether a key belongs to a sparse map, which describes one file: GNU tar itself
/// cannot apply one from a global header ("excess GNU.sparse.map"), so it is dropped
/// there, with a warning.
fn is_sparse_key(key: &[u8]) -> bool {
    key.starts_with(b"GNU.sparse.")
}

/// Key-value pairs, each key once, in the order keys first appear; setting a key again
/// replaces its value. Lookups are hashed, so a header of many small records costs
/// linear time, not quadratic.
#[derive(Default)]
pub(crate) struct OrderedMap {
    pairs: Vec<Record>,
    index: HashMap<Vec<u8>, usize>,
}

impl OrderedMap {
    /// Sets `key` to `value`.
    pub(crate) fn set(&mut self, key: Vec<u8>, value: Vec<u8>) {
        match self.index.get(&key).and_then(|&i| self.pairs.get_mut(i)) {
            Some(slot) => slot.1 = value,
            None => {
                self.index.insert(key.clone(), self.pairs.len());
                self.pairs.push((key, value));
            }
        }
    }

    /// The pairs.
    pub(crate) fn pairs(&self) -> &[Record] {
        &self.pairs
    }

    /// The pairs, by value.
    pub(crate) fn into_pairs(self) -> Vec<Record> {
        self.pairs
    }
}

/// The global records in force: set by `g` headers, each key kept once (the latest).
#[derive(Default)]
pub(crate) struct Globals {
    records: OrderedMap,
}

impl Globals {
    /// Merges the records of a `g` header into the globals, as GNU tar does: every key
    /// applies to each following member (`path`, `linkpath` and `size` too) unless
    /// that member's own records set it. Returns what was left out, to be warned of:
    /// sparse keys, and the whole header if the globals would pass
    /// [`MAX_PAX_GLOBAL`] bytes (they are copied into every following entry).
    pub(crate) fn apply(&mut self, records: Vec<Record>) -> Vec<String> {
        let mut dropped = Vec::new();
        let (sparse, records): (Vec<_>, Vec<_>) =
            records.into_iter().partition(|(k, _)| is_sparse_key(k));
        if let Some((key, _)) = sparse.first() {
            dropped.push(format!(
                "pax global header: sparse record {} (and {} more) ignored: a sparse map \
                 describes one file",
                String::from_utf8_lossy(key),
                sparse.len() - 1
            ));
        }
        let mut merged = OrderedMap::default();
        for (key, value) in self.records.pairs().iter().cloned().chain(records) {
            merged.set(key, value);
        }
        let total: usize = merged.pairs().iter().map(|(k, v)| k.len() + v.len()).sum();
        if u64::try_from(total).map_or(true, |t| t > MAX_PAX_GLOBAL) {
            dropped.push(format!(
                "pax global header ignored: the global records would take {total} bytes, \
                 over the limit of {MAX_PAX_GLOBAL}"
            ));
            return dropped;
        }
        self.records = merged;
        dropped
    }

    /// The records, in the order their keys were first set.
    pub(crate) fn records(&self) -> &[Record] {
        self.records.pairs()
    }
}

/// The pax records that apply to one entry: its local records over the globals.
#[derive(Clone, Copy)]
pub(crate) struct PaxView<'a> {
    local: &'a [Record],
    global: &'a [Record],
}

impl<'a> PaxView<'a> {
    /// A view of `local` records over `global` ones.
    pub(crate) fn new(local: &'a [Record], global: &'a [Record]) -> Self {
        PaxView { local, global }
    }

    /// The local records, in order.
    pub(crate) fn local(&self) -> &'a [Record] {
        self.local
    }

    /// The value in force for `key`: the last local record, else the global one. An
    /// empty value cancels the key (POSIX), so it reads as absent.
    pub(crate) fn get(&self, key: &[u8]) -> Option<&'a [u8]> {
        let local = self.local.iter().rev().find(|(k, _)| k == key);
        let (_, value) = local.or_else(|| self.global.iter().find(|(k, _)| k == key))?;
        Some(value.as_slice()).filter(|v| !v.is_empty())
    }

    /// A size in force for `key`: a decimal number GNU tar takes, 0 to 2^63 - 1.
    pub(crate) fn get_size(&self, key: &[u8]) -> Result<Option<u64>, TarErrorKind> {
        let size = |v| decimal_u64(v).filter(|&n| i64::try_from(n).is_ok());
        self.get(key).map(|v| parse_or(v, key, size)).transpose()
    }

    /// A decimal number in force for `key` that must fit 32 bits.
    pub(crate) fn get_u32(&self, key: &[u8]) -> Result<Option<u32>, TarErrorKind> {
        self.get(key)
            .map(|v| parse_or(v, key, decimal_u32))
            .transpose()
    }

    /// A time in force for `key`.
    pub(crate) fn get_time(&self, key: &[u8]) -> Result<Option<(i64, u32)>, TarErrorKind> {
        self.get(key)
            .map(|v| parse_or(v, key, parse_time))
            .transpose()
    }

    /// A name or path in force for `key`: raw bytes without NUL.
    pub(crate) fn get_name(&self, key: &[u8]) -> Result<Option<&'a [u8]>, TarErrorKind> {
        let name = |v: &'a [u8]| Some(v).filter(|v| !v.contains(&0));
        self.get(key).map(|v| parse_or(v, key, name)).transpose()
    }

    /// Every record that applies, raw: globals not overridden locally, then the local
    /// records in order.
    pub(crate) fn applied(&self) -> Vec<Record> {
        self.applied_refs().into_iter().cloned().collect()
    }

    /// [`PaxView::applied`], borrowed. (Without globals, the usual case, there is
    /// nothing to look up.)
    fn applied_refs(&self) -> Vec<&'a Record> {
        if self.global.is_empty() {
            return self.local.iter().collect();
        }
        let local: HashSet<&[u8]> = self.local.iter().map(|(k, _)| k.as_slice()).collect();
        let global = self
            .global
            .iter()
            .filter(|(k, _)| !local.contains(k.as_slice()));
        global.chain(self.local).collect()
    }

    /// The extended attributes, each name once with its last value. When bsdtar's
    /// `LIBARCHIVE.xattr` records are present, its duplicate `SCHILY.xattr` records
    /// (whose names it encodes its own way) are ignored.
    pub(crate) fn xattrs(&self) -> Result<Vec<xattr::Xattr>, TarErrorKind> {
        let applied = self.applied_refs();
        let libarchive = applied.iter().any(|(k, _)| xattr::is_libarchive_key(k));
        let mut out = OrderedMap::default();
        for (key, value) in applied {
            if libarchive && xattr::is_schily_key(key) {
                continue;
            }
            let Some(decoded) = xattr::decode(key, value) else {
                continue;
            };
            let (name, value) = decoded.map_err(|()| TarErrorKind::bad_pax_value(key, value))?;
            out.set(name, value);
        }
        Ok(out.into_pairs())
    }
}

fn parse_or<'v, T>(
    value: &'v [u8],
    key: &[u8],
    parse: impl FnOnce(&'v [u8]) -> Option<T>,
) -> Result<T, TarErrorKind> {
    parse(value).ok_or_else(|| TarErrorKind::bad_pax_value(key, value))
}

/// A non-empty string of decimal digits that fits in a u64.
pub(crate) fn decimal_u64(v: &[u8]) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    v.iter().try_fold(0u64, |acc, &c| {
        let d = c.checked_sub(b'0').filter(|d| *d < 10)?;
        acc.checked_mul(10)?.checked_add(u64::from(d))
    })
}

/// A decimal number that fits in a u32.
pub(crate) fn decimal_u32(v: &[u8]) -> Option<u32> {
    u32::try_from(decimal_u64(v)?).ok()
}

/// A pax time as GNU tar 1.34 reads one: optional `-`, at least one decimal digit of
/// seconds, optional `.` and fraction digits (digits past nanoseconds dropped), and
/// whatever follows ignored (GNU tar reads `1.5x` and `1e9` as 1.5 and 1, `1.` as 1).
/// Returned as (seconds, nanoseconds) with nanoseconds in 0..1e9, so -1.5 is (-2,
/// 500000000), as POSIX means it and GNU tar extracts it.
pub(crate) fn parse_time(v: &[u8]) -> Option<(i64, u32)> {
    let (negative, v) = match v.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, v),
    };
    let digits = |s: &[u8]| s.iter().take_while(|c| c.is_ascii_digit()).count();
    let (secs, rest) = v.split_at(digits(v));
    let frac = match rest.split_first() {
        Some((b'.', f)) => f.get(..digits(f)).unwrap_or_default(),
        _ => &[],
    };
    let secs = i64::try_from(decimal_u64(secs)?).ok()?;
    let nanos = fraction_nanos(frac);
    if !negative {
        return Some((secs, nanos));
    }
    if nanos == 0 {
        return Some((secs.checked_neg()?, 0));
    }
    Some((secs.checked_neg()?.checked_sub(1)?, 1_000_000_000 - nanos))
}

/// The nanoseconds of a fraction's digits (all ASCII digits, maybe none).
fn fraction_nanos(frac: &[u8]) -> u32 {
    let mut nanos = 0u32;
    for i in 0..9 {
        let digit = frac.get(i).map_or(0, |c| u32::from(c.saturating_sub(b'0')));
        nanos = nanos * 10 + digit;
    }
    nanos
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(key: &str, value: &str) -> Vec<u8> {
        let body = format!(" {key}={value}\n");
        let mut len = body.len() + 1;
        while body.len() + len.to_string().len() != len {
            len = body.len() + len.to_string().len();
        }
        format!("{len}{body}").into_bytes()
    }

    #[test]
    fn records_parse() {
        let mut body = rec("path", "a/b");
        body.extend(rec("SCHILY.xattr.user.x", "v\n\0w"));
        let r = parse_records(&body).unwrap();
        assert_eq!(r[0], (b"path".to_vec(), b"a/b".to_vec()));
        assert_eq!(r[1], (b"SCHILY.xattr.user.x".to_vec(), b"v\n\0w".to_vec()));
    }

    #[test]
    fn records_trailing_nuls_ok_but_nothing_behind_them() {
        let mut body = rec("path", "a");
        body.extend([0u8; 7]);
        assert_eq!(parse_records(&body).unwrap().len(), 1);
        body.push(b'9');
        assert!(parse_records(&body).is_err());
    }

    #[test]
    fn records_reject_lies() {
        for bad in [
            &b"13 path=abc\n"[..], // length says 13, record is 12
            b"11 path=abc\n",      // length says 11
            b"12 path=abc!",       // no newline
            b"12 pathxabc\n",      // no '='
            b"12path=abcd\n",      // no space
            b" 12 path=abc\n",     // leading space
            b"99999999999999999999999 a=b\n",
            b"4 =x\n",
            b"5 =x\n",
            b"3 \n",
            b"0 ",
        ] {
            assert!(
                parse_records(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(parse_records(b"12 path=abc\n").is_ok());
    }

    #[test]
    fn known_values_checked() {
        assert!(parse_records(&rec("GNU.sparse.size", "12x")).is_err());
        // Sizes, times and owners are checked where they are used (a bad one is
        // ignored, the header's field used).
        assert!(parse_records(&rec("size", "12x")).is_ok());
        assert!(parse_records(&rec("uid", "4294967296")).is_ok());
        assert!(parse_records(&rec("mtime", "+1")).is_ok());
        assert!(parse_records(&rec("path", "a\0b")).is_err());
        assert!(parse_records(&rec("size", "")).is_ok());
        assert!(parse_records(&rec("LIBARCHIVE.xattr.user.a", "!!")).is_err());
    }

    #[test]
    fn times() {
        assert_eq!(parse_time(b"1700000000"), Some((1700000000, 0)));
        assert_eq!(parse_time(b"1.5"), Some((1, 500_000_000)));
        assert_eq!(parse_time(b"1.123456789123"), Some((1, 123_456_789)));
        assert_eq!(parse_time(b"-1.5"), Some((-2, 500_000_000)));
        assert_eq!(parse_time(b"-3"), Some((-3, 0)));
        assert_eq!(parse_time(b"-0.000000001"), Some((-1, 999_999_999)));
        // As GNU tar: what follows the number is ignored.
        assert_eq!(parse_time(b"1."), Some((1, 0)));
        assert_eq!(parse_time(b"1.5.5"), Some((1, 500_000_000)));
        assert_eq!(parse_time(b"1e9"), Some((1, 0)));
        assert_eq!(parse_time(b"5x"), Some((5, 0)));
        assert_eq!(parse_time(b"-0"), Some((0, 0)));
        assert_eq!(parse_time(b"-0.5"), Some((-1, 500_000_000)));
        for bad in [&b""[..], b"-", b".5", b"+1", b" 1", b"-.5", b"x1"] {
            assert_eq!(parse_time(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_time(b"9223372036854775808"), None);
        assert_eq!(
            parse_time(b"-9223372036854775807.5"),
            Some((i64::MIN, 500_000_000))
        );
    }

    #[test]
    fn view_local_over_global_and_cancel() {
        let mut g = Globals::default();
        assert!(g.apply(vec![(b"uid".to_vec(), b"5".to_vec())]).is_empty());
        assert!(g
            .apply(vec![(b"uname".to_vec(), b"bob".to_vec())])
            .is_empty());
        let local = vec![
            (b"uid".to_vec(), b"7".to_vec()),
            (b"uname".to_vec(), vec![]),
        ];
        let v = PaxView::new(&local, g.records());
        assert_eq!(v.get_u32(b"uid").unwrap(), Some(7));
        assert_eq!(v.get(b"uname"), None);
        let v = PaxView::new(&[], g.records());
        assert_eq!(v.get_u32(b"uid").unwrap(), Some(5));
        // As GNU tar, a global path applies; a sparse key is dropped, with a word.
        assert!(g.apply(vec![(b"path".to_vec(), b"x".to_vec())]).is_empty());
        assert_eq!(PaxView::new(&[], g.records()).get(b"path"), Some(&b"x"[..]));
        let said = g.apply(vec![(b"GNU.sparse.map".to_vec(), b"0,1".to_vec())]);
        assert_eq!(said.len(), 1);
        assert_eq!(PaxView::new(&[], g.records()).get(b"GNU.sparse.map"), None);
    }
}
