//! Sparse files: the four GNU encodings of a sparse map, and their validation.
//!
//! - old GNU (`S` type flag, GNU magic): up to 4 (offset, numbytes) slots in the header
//!   at byte 386, `isextended` at 482, the real size at 483; while `isextended` is set,
//!   512-byte extension blocks of 21 slots (and their own `isextended` at 504) follow.
//! - pax 0.0: `GNU.sparse.size`, `GNU.sparse.numblocks` and, in order, repeated
//!   `GNU.sparse.offset` / `GNU.sparse.numbytes` records in one header.
//! - pax 0.1: `GNU.sparse.size` and `GNU.sparse.map=o,n,o,n,...`.
//! - pax 1.0: `GNU.sparse.major=1`, `GNU.sparse.minor=0`, `GNU.sparse.realsize`; the
//!   data area starts with the map in decimal lines (count, then offset and size per
//!   run), padded with NULs to a block boundary.
//!
//! In every form, the stored data is the runs' bytes concatenated. A map is accepted
//! if its runs lie inside the real size and add up to the stored data size. Runs out of
//! order, repeated or overlapping are read as GNU tar and bsdtar write them, each in map
//! order, a later one's bytes winning ([`ferry_core::sparse`]); empty runs are dropped.

use super::error::TarErrorKind;
use super::header::{self, Block, Format, Header};
use super::pax::{decimal_u64, PaxView, Record};
use super::MAX_SPARSE_RUNS;

/// One data run of a sparse file: (offset in the file, length).
pub(crate) type Run = (u64, u64);

/// Bytes of one old GNU sparse slot: a 12-byte offset and a 12-byte length.
const SLOT: usize = 24;
/// Where `isextended` sits in an old GNU sparse extension block (after 21 slots).
const EXT_ISEXTENDED: usize = 504;

/// How an entry's sparse map is obtained.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Not a sparse file.
    Plain,
    /// The whole map is in the headers (pax 0.0, 0.1, old GNU without extensions).
    Runs {
        /// Logical size of the file.
        realsize: u64,
        /// The runs, not yet validated.
        runs: Vec<Run>,
    },
    /// Old GNU whose map continues in extension blocks after the header.
    OldGnuExtended {
        /// Logical size of the file.
        realsize: u64,
        /// The runs of the header, not yet validated.
        runs: Vec<Run>,
    },
    /// pax 1.0: the map opens the data area.
    Map10 {
        /// Logical size of the file.
        realsize: u64,
    },
}

/// Finds which sparse encoding, if any, an entry uses.
pub(crate) fn plan(header: &Header<'_>, pax: &PaxView<'_>) -> Result<Plan, TarErrorKind> {
    let from_pax = pax_plan(pax.local())?;
    if header.typeflag() != b'S' {
        return Ok(from_pax);
    }
    if from_pax != Plan::Plain {
        return Err(TarErrorKind::BadSparse(
            "old GNU sparse entry with pax sparse records",
        ));
    }
    if header.format() != Format::Gnu {
        return Err(TarErrorKind::BadSparse(
            "old GNU sparse entry without the GNU magic",
        ));
    }
    let realsize = header.gnu_realsize()?;
    let mut runs = Vec::new();
    let ended = parse_slots(header.gnu_sparse_slots(), &mut runs)?;
    match (header.gnu_is_extended(), ended) {
        (false, _) => Ok(Plan::Runs { realsize, runs }),
        (true, false) => Ok(Plan::OldGnuExtended { realsize, runs }),
        (true, true) => Err(TarErrorKind::BadSparse(
            "extension blocks after a short map",
        )),
    }
}

/// Parses an old GNU sparse extension block into `runs`; returns whether another
/// extension block follows.
pub(crate) fn parse_extension(block: &Block, runs: &mut Vec<Run>) -> Result<bool, TarErrorKind> {
    let ended = parse_slots(block.get(..EXT_ISEXTENDED).unwrap_or_default(), runs)?;
    let more = block.get(EXT_ISEXTENDED).is_some_and(|&b| b != 0);
    if more && ended {
        return Err(TarErrorKind::BadSparse(
            "extension blocks after a short map",
        ));
    }
    Ok(more)
}

/// Parses old GNU slots into `runs`. An all-zero slot ends the map, and every slot after
/// it must be all-zero too. Returns whether the map ended.
fn parse_slots(slots: &[u8], runs: &mut Vec<Run>) -> Result<bool, TarErrorKind> {
    let mut ended = false;
    for slot in slots.chunks_exact(SLOT) {
        if header::is_zero(slot) {
            ended = true;
            continue;
        }
        if ended {
            return Err(TarErrorKind::BadSparse("sparse slot after an empty one"));
        }
        let (offset, len) = slot.split_at(SLOT / 2);
        let number = |field, bytes| {
            header::parse_unsigned(bytes).ok_or_else(|| TarErrorKind::bad_number(field, bytes))
        };
        let (offset, len) = (
            number("sparse offset", offset)?,
            number("sparse numbytes", len)?,
        );
        push_run(runs, (offset, len))?;
    }
    Ok(ended)
}

fn push_run(runs: &mut Vec<Run>, run: Run) -> Result<(), TarErrorKind> {
    if u64::try_from(runs.len()).map_or(true, |n| n >= MAX_SPARSE_RUNS) {
        return Err(TarErrorKind::BadSparse("too many runs"));
    }
    runs.push(run);
    Ok(())
}

/// The last value of `key` among the local records.
fn last<'a>(local: &'a [Record], key: &[u8]) -> Option<&'a [u8]> {
    local
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_slice())
}

/// A required decimal sparse record.
fn required(local: &[Record], key: &'static [u8]) -> Result<u64, TarErrorKind> {
    let value = last(local, key).ok_or(TarErrorKind::BadSparse(
        "a required GNU.sparse record is missing",
    ))?;
    decimal_u64(value).ok_or_else(|| TarErrorKind::bad_pax_value(key, value))
}

/// The sparse encoding named by an entry's own pax records.
fn pax_plan(local: &[Record]) -> Result<Plan, TarErrorKind> {
    let has = |key: &[u8]| last(local, key).is_some();
    let v10 = has(b"GNU.sparse.major") || has(b"GNU.sparse.minor");
    let v01 = has(b"GNU.sparse.map");
    let v00 = has(b"GNU.sparse.offset") || has(b"GNU.sparse.numbytes");
    let numblocks = has(b"GNU.sparse.numblocks");
    if v10 {
        if v01 || v00 || numblocks {
            return Err(TarErrorKind::BadSparse("records of several sparse formats"));
        }
        if last(local, b"GNU.sparse.major") != Some(b"1")
            || last(local, b"GNU.sparse.minor") != Some(b"0")
        {
            return Err(TarErrorKind::BadSparse(
                "unsupported GNU sparse format version",
            ));
        }
        let realsize = required(local, b"GNU.sparse.realsize")?;
        return Ok(Plan::Map10 { realsize });
    }
    if !(v01 || v00 || numblocks) {
        if has(b"GNU.sparse.size") || has(b"GNU.sparse.realsize") {
            return Err(TarErrorKind::BadSparse("sparse size without a map"));
        }
        return Ok(Plan::Plain);
    }
    if v01 && v00 {
        return Err(TarErrorKind::BadSparse("records of several sparse formats"));
    }
    let realsize = required(local, b"GNU.sparse.size")?;
    let runs = if v01 {
        map01(last(local, b"GNU.sparse.map").unwrap_or_default())?
    } else {
        pairs00(local)?
    };
    if numblocks || v00 {
        let count = required(local, b"GNU.sparse.numblocks")?;
        if u64::try_from(runs.len()).ok() != Some(count) {
            return Err(TarErrorKind::BadSparse("numblocks does not match the map"));
        }
    }
    Ok(Plan::Runs { realsize, runs })
}

/// pax 0.1: `o,n,o,n,...` (empty for a file that is all hole).
fn map01(map: &[u8]) -> Result<Vec<Run>, TarErrorKind> {
    let mut runs = Vec::new();
    if map.is_empty() {
        return Ok(runs);
    }
    let bad = || TarErrorKind::bad_pax_value(b"GNU.sparse.map", map);
    let mut numbers = map.split(|&c| c == b',');
    while let Some(offset) = numbers.next() {
        let offset = decimal_u64(offset).ok_or_else(bad)?;
        let len = numbers.next().and_then(decimal_u64).ok_or_else(bad)?;
        push_run(&mut runs, (offset, len))?;
    }
    Ok(runs)
}

/// pax 0.0: each `GNU.sparse.offset` record followed by its `GNU.sparse.numbytes`.
fn pairs00(local: &[Record]) -> Result<Vec<Run>, TarErrorKind> {
    let mut runs = Vec::new();
    let mut offset = None;
    for (key, value) in local {
        let number = || decimal_u64(value).ok_or_else(|| TarErrorKind::bad_pax_value(key, value));
        match (key.as_slice(), offset) {
            (b"GNU.sparse.offset", None) => offset = Some(number()?),
            (b"GNU.sparse.numbytes", Some(o)) => {
                push_run(&mut runs, (o, number()?))?;
                offset = None;
            }
            (b"GNU.sparse.offset" | b"GNU.sparse.numbytes", _) => {
                return Err(TarErrorKind::BadSparse(
                    "offset and numbytes records out of order",
                ));
            }
            _ => {}
        }
    }
    if offset.is_some() {
        return Err(TarErrorKind::BadSparse("offset record without numbytes"));
    }
    Ok(runs)
}

/// Incremental parser of the pax 1.0 map text, fed one block at a time.
#[derive(Default)]
pub(crate) struct Map10Parser {
    count: Option<u64>,
    number: Option<u64>,
    offset: Option<u64>,
    runs: Vec<Run>,
}

impl Map10Parser {
    /// Whether the map is complete.
    fn done(&self) -> bool {
        self.count
            .is_some_and(|c| u64::try_from(self.runs.len()).ok() == Some(c))
            && self.offset.is_none()
    }

    /// Feeds the next block of the data area. Returns whether the map is complete (the
    /// rest of the block was checked to be NUL padding); on error, the position in the
    /// block at fault.
    pub(crate) fn feed(&mut self, block: &[u8]) -> Result<bool, (usize, TarErrorKind)> {
        for (i, &c) in block.iter().enumerate() {
            self.byte(c).map_err(|e| (i, TarErrorKind::BadSparse(e)))?;
        }
        Ok(self.done())
    }

    fn byte(&mut self, c: u8) -> Result<(), &'static str> {
        if self.done() {
            return if c == 0 {
                Ok(())
            } else {
                Err("garbage after the map")
            };
        }
        match c {
            b'0'..=b'9' => {
                let n = self.number.unwrap_or(0);
                let n = n
                    .checked_mul(10)
                    .and_then(|n| n.checked_add(u64::from(c - b'0')));
                self.number = Some(n.ok_or("number too large")?);
                Ok(())
            }
            b'\n' => self.end_number(),
            _ => Err("unexpected byte in the map"),
        }
    }

    fn end_number(&mut self) -> Result<(), &'static str> {
        let n = self.number.take().ok_or("empty line in the map")?;
        if self.count.is_none() {
            if n > MAX_SPARSE_RUNS {
                return Err("too many runs");
            }
            self.count = Some(n);
        } else if let Some(offset) = self.offset.take() {
            self.runs.push((offset, n));
        } else {
            self.offset = Some(n);
        }
        Ok(())
    }

    /// The runs parsed.
    pub(crate) fn into_runs(self) -> Vec<Run> {
        self.runs
    }
}

/// Checks a map against the file's real size and its stored data size; returns the
/// runs without the zero-length ones.
pub(crate) fn validate(
    runs: Vec<Run>,
    realsize: u64,
    stored: u64,
) -> Result<Vec<Run>, TarErrorKind> {
    let bad = TarErrorKind::BadSparse;
    if u64::try_from(runs.len()).map_or(true, |n| n > MAX_SPARSE_RUNS) {
        return Err(bad("too many runs"));
    }
    let mut total = 0u64;
    for &(offset, len) in &runs {
        let end = offset.checked_add(len).ok_or(bad("run end overflows"))?;
        if end > realsize {
            return Err(bad("run extends past the file size"));
        }
        total = total.checked_add(len).ok_or(bad("runs add up past 2^64"))?;
    }
    if total != stored {
        return Err(bad("runs do not add up to the stored data size"));
    }
    Ok(runs.into_iter().filter(|&(_, len)| len > 0).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recs(pairs: &[(&str, &str)]) -> Vec<Record> {
        pairs
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn validate_rules() {
        assert_eq!(
            validate(vec![(0, 10), (20, 5), (30, 0)], 30, 15).unwrap(),
            vec![(0, 10), (20, 5)]
        );
        // Out of order, overlapping, repeated: kept as stored, empty runs dropped.
        let kept = |runs, size, stored| validate(runs, size, stored).unwrap();
        assert_eq!(kept(vec![(0, 10), (5, 5)], 30, 15), vec![(0, 10), (5, 5)]);
        assert_eq!(
            kept(vec![(20, 5), (0, 0), (0, 5)], 30, 10),
            vec![(20, 5), (0, 5)]
        );
        assert_eq!(kept(vec![(0, 5), (0, 5)], 30, 10), vec![(0, 5), (0, 5)]);
        assert!(
            validate(vec![(0, 10), (25, 10)], 30, 20).is_err(),
            "past size"
        );
        assert!(validate(vec![(0, 10)], 30, 11).is_err(), "sum");
        assert!(
            validate(vec![(u64::MAX, 2)], u64::MAX, 2).is_err(),
            "overflow"
        );
        assert_eq!(validate(vec![], 100, 0).unwrap(), vec![]);
    }

    #[test]
    fn pax00_pairs_in_order() {
        let ok = recs(&[
            ("GNU.sparse.size", "100"),
            ("GNU.sparse.numblocks", "2"),
            ("GNU.sparse.offset", "0"),
            ("GNU.sparse.numbytes", "10"),
            ("GNU.sparse.offset", "50"),
            ("GNU.sparse.numbytes", "5"),
        ]);
        assert_eq!(
            pax_plan(&ok).unwrap(),
            Plan::Runs {
                realsize: 100,
                runs: vec![(0, 10), (50, 5)]
            }
        );
        let mut swapped = ok.clone();
        swapped.swap(2, 3);
        assert!(pax_plan(&swapped).is_err());
        let mut short = ok.clone();
        short.pop();
        assert!(pax_plan(&short).is_err());
        let mut miscount = ok;
        miscount[1].1 = b"3".to_vec();
        assert!(pax_plan(&miscount).is_err());
    }

    #[test]
    fn pax01_map() {
        let r = recs(&[("GNU.sparse.size", "100"), ("GNU.sparse.map", "0,10,50,5")]);
        assert_eq!(
            pax_plan(&r).unwrap(),
            Plan::Runs {
                realsize: 100,
                runs: vec![(0, 10), (50, 5)]
            }
        );
        for bad in ["0,10,50", "0,,1,2", "a,1", "0,10,"] {
            let r = recs(&[("GNU.sparse.size", "100"), ("GNU.sparse.map", bad)]);
            assert!(pax_plan(&r).is_err(), "{bad}");
        }
        let r = recs(&[("GNU.sparse.map", "0,10")]);
        assert!(pax_plan(&r).is_err(), "no size");
    }

    #[test]
    fn pax10_needs_version_and_realsize() {
        let r = recs(&[
            ("GNU.sparse.major", "1"),
            ("GNU.sparse.minor", "0"),
            ("GNU.sparse.realsize", "9"),
        ]);
        assert_eq!(pax_plan(&r).unwrap(), Plan::Map10 { realsize: 9 });
        let r = recs(&[
            ("GNU.sparse.major", "2"),
            ("GNU.sparse.minor", "0"),
            ("GNU.sparse.realsize", "9"),
        ]);
        assert!(pax_plan(&r).is_err());
        let r = recs(&[("GNU.sparse.major", "1"), ("GNU.sparse.minor", "0")]);
        assert!(pax_plan(&r).is_err());
        let r = recs(&[
            ("GNU.sparse.major", "1"),
            ("GNU.sparse.minor", "0"),
            ("GNU.sparse.realsize", "9"),
            ("GNU.sparse.map", "0,1"),
        ]);
        assert!(pax_plan(&r).is_err());
    }

    #[test]
    fn map10_parser_across_blocks() {
        let mut p = Map10Parser::default();
        assert!(!p.feed(b"2\n0\n1").unwrap());
        let mut rest = b"0\n20\n5\n".to_vec();
        rest.resize(20, 0);
        assert!(p.feed(&rest).unwrap());
        assert_eq!(p.into_runs(), vec![(0, 10), (20, 5)]);
        let mut p = Map10Parser::default();
        assert_eq!(p.feed(b"1\n0\n1\nx").unwrap_err().0, 6);
        let mut p = Map10Parser::default();
        assert!(p.feed(b"1\n\n").is_err());
        let mut p = Map10Parser::default();
        assert!(p.feed(b"99999999999999999999999\n").is_err());
        let mut p = Map10Parser::default();
        assert!(p.feed(b"2000000\n").is_err());
    }
}
