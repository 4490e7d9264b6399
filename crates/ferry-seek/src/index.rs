//! [`SeekIndex`]: the seek points of one compressed file, what they allow, and their
//! on-disk form.
//!
//! The serialised form is little-endian: a magic and version, the codec, the span, the
//! compressed and decompressed sizes, the points, and an xxh3-64 of everything before it.
//! [`SeekIndex::from_bytes`] checks the checksum, every length before it allocates, and
//! that the points make sense together (in order, inside the file, of the codec's kind),
//! so a damaged or hand-made index is refused with what is wrong rather than trusted.

use crate::{Codec, SeekError};

const MAGIC: &[u8; 10] = b"FERRYSEEK\0";
const VERSION: u16 = 1;
/// Bytes before the points: magic, version, codec, span, two sizes, point count.
const HEADER_LEN: usize = 10 + 2 + 1 + 8 + 8 + 8 + 4;
/// The fixed part of one point: out, in, kind.
const POINT_FIXED: usize = 8 + 8 + 1;
/// A deflated 32 KiB window never takes more than this (stored blocks add 5 bytes per
/// 64 KiB, plus the zlib wrapper).
pub(crate) const MAX_PACKED_WINDOW: usize = 33 << 10;

/// A read that has to decompress more than this before its data is not random access.
pub const RANDOM_ACCESS_GAP: u64 = 32 << 20;

/// One place a decompressor can start again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Point {
    /// The uncompressed offset of the first byte decoded from here.
    pub out: u64,
    /// The compressed offset of the first byte the decoder reads.
    pub inp: u64,
    /// How to start there.
    pub kind: Kind,
}

/// How a decoder starts at a [`Point`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// At the start of a gzip member, a zstd frame or a sequential file: nothing to restore.
    Start,
    /// Inside a gzip member, at a deflate block boundary: a raw inflate primed with the
    /// low `bits` bits of `prime >> (8 - bits)` (the byte at `inp - 1`) and the dictionary
    /// `window` (the last <= 32 KiB of the member's output, zlib-compressed).
    Deflate {
        /// Bits of the byte at `inp - 1` not yet used (0-7).
        bits: u8,
        /// The byte at `inp - 1`.
        prime: u8,
        /// The dictionary, zlib-compressed.
        window: Vec<u8>,
    },
    /// At the start of an xz block: the block belongs to the stream whose 12-byte header
    /// is at `stream`, and that stream's blocks end (its index starts) at `blocks_end`.
    XzBlock {
        /// Offset of the stream header.
        stream: u64,
        /// Offset of the stream's index.
        blocks_end: u64,
    },
}

/// The seek points of one compressed file; serialisable for an on-disk cache.
///
/// Made by [`crate::Indexing::finish`] or [`SeekIndex::from_bytes`]; used by
/// [`crate::Compressed`]. In memory it takes about 40 bytes per point, plus for gzip the
/// deflated 32 KiB window of each point (typically 5-15 KiB for tar data).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeekIndex {
    pub(crate) codec: Codec,
    pub(crate) span: u64,
    pub(crate) compressed_len: u64,
    pub(crate) decompressed_len: u64,
    pub(crate) points: Vec<Point>,
}

impl SeekIndex {
    /// The codec of the file.
    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// The size of the decompressed data (all members, frames or streams).
    pub fn decompressed_len(&self) -> u64 {
        self.decompressed_len
    }

    /// The size of the compressed file the index was made from: compare it with the
    /// file's size before trusting a cached index.
    pub fn compressed_len(&self) -> u64 {
        self.compressed_len
    }

    /// The span asked for when the index was made.
    pub fn span(&self) -> u64 {
        self.span
    }

    /// How many seek points there are.
    pub fn points(&self) -> usize {
        self.points.len()
    }

    /// The most a read may have to decompress before its first byte: the largest distance
    /// between a seek point and the next (or the end).
    pub fn largest_gap(&self) -> u64 {
        let mut gap = 0;
        let mut prev = 0;
        for p in &self.points {
            gap = gap.max(p.out - prev);
            prev = p.out;
        }
        gap.max(self.decompressed_len - prev)
    }

    /// Whether a read anywhere is cheap: true for gzip (it always gets seek points), and
    /// for zstd and xz when no read has to decompress more than [`RANDOM_ACCESS_GAP`]
    /// (32 MiB) before its data (several frames or blocks, or a small file). False for
    /// bzip2, and for a large zstd file of one frame or xz file of one block: reads are
    /// then served sequentially (cheap in archive order, a restart from the start when
    /// going backwards).
    pub fn is_random_access(&self) -> bool {
        match self.codec {
            Codec::Gzip => true,
            c if c.is_sequential() => false,
            _ => self.largest_gap() <= RANDOM_ACCESS_GAP,
        }
    }

    /// When not random access: one line saying reads are sequential and what to
    /// recompress with instead. Checked with Debian's zstd 1.5.4 and xz 5.4.1: `pzstd`
    /// makes one frame per chunk while `zstd -T0`, `zstd -B` and `zstd --long` make one
    /// frame; `xz -T0` makes blocks of 3x the dictionary (24 MiB at the default -6) and
    /// `xz --block-size` blocks of the size given, while plain `xz` makes one block.
    pub fn advice(&self) -> Option<String> {
        if self.is_random_access() {
            return None;
        }
        let gap_mib = self.largest_gap() >> 20;
        Some(match self.codec {
            Codec::Gzip => return None,
            c if c.is_sequential() => format!(
                "{c} has no seek points: reads are sequential (a read may decompress from \
                 the start of the file); for random access recompress with gzip or `pzstd`"
            ),
            Codec::Zstd if self.points.len() <= 1 => "a single zstd frame: reads are \
                 sequential (a read may decompress from the start of the file); for random \
                 access recompress with `pzstd` (one frame per chunk) or gzip (`zstd -T0`, \
                 `-B` and `--long` still make one frame)"
                .to_string(),
            Codec::Zstd => format!(
                "zstd frames of up to {gap_mib} MiB: a read may decompress that much before \
                 its data; for quicker random access recompress with `pzstd` or gzip"
            ),
            Codec::Xz if self.points.len() <= 1 => "a single xz block: reads are sequential \
                 (a read may decompress from the start of the file); for random access \
                 recompress with `xz -T0 --block-size=8MiB` (or `xz -T0`, blocks of 24 MiB \
                 at -6), or with gzip or `pzstd`"
                .to_string(),
            _ => format!(
                "xz blocks of up to {gap_mib} MiB: a read may decompress that much before its \
                 data; for quicker random access recompress with `xz -T0 --block-size=8MiB`"
            ),
        })
    }

    /// The index of the last point at or before `offset` (`None` when there are none).
    pub(crate) fn point_before(&self, offset: u64) -> Option<usize> {
        self.points
            .partition_point(|p| p.out <= offset)
            .checked_sub(1)
    }

    /// The serialised index, for an on-disk cache; [`SeekIndex::from_bytes`] reads it.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(HEADER_LEN + self.points.len() * 40 + 8);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.push(self.codec.to_byte());
        b.extend_from_slice(&self.span.to_le_bytes());
        b.extend_from_slice(&self.compressed_len.to_le_bytes());
        b.extend_from_slice(&self.decompressed_len.to_le_bytes());
        // Points are bounded by the file's size over the span, far below u32::MAX.
        b.extend_from_slice(&(self.points.len() as u32).to_le_bytes());
        for p in &self.points {
            b.extend_from_slice(&p.out.to_le_bytes());
            b.extend_from_slice(&p.inp.to_le_bytes());
            match &p.kind {
                Kind::Start => b.push(0),
                Kind::Deflate {
                    bits,
                    prime,
                    window,
                } => {
                    b.push(1);
                    b.push(*bits);
                    b.push(*prime);
                    b.extend_from_slice(&(window.len() as u32).to_le_bytes());
                    b.extend_from_slice(window);
                }
                Kind::XzBlock { stream, blocks_end } => {
                    b.push(2);
                    b.extend_from_slice(&stream.to_le_bytes());
                    b.extend_from_slice(&blocks_end.to_le_bytes());
                }
            }
        }
        let sum = xxhash_rust::xxh3::xxh3_64(&b);
        b.extend_from_slice(&sum.to_le_bytes());
        b
    }

    /// Reads an index written by [`SeekIndex::to_bytes`]. Hostile input is an error naming
    /// what is wrong (damaged, truncated, another version, points out of order or outside
    /// the file), never a panic or an allocation larger than the input.
    pub fn from_bytes(b: &[u8]) -> Result<SeekIndex, SeekError> {
        let bad = |what: &str| SeekError::BadIndex(what.to_string());
        if b.len() < HEADER_LEN + 8 {
            return Err(bad("too short to be one (truncated?)"));
        }
        if &b[..MAGIC.len()] != MAGIC {
            return Err(bad("not a ferry seek index (bad magic)"));
        }
        let (body, sum) = b.split_at(b.len() - 8);
        let mut r = Bytes {
            b: body,
            at: MAGIC.len(),
        };
        let version = u16::from_le_bytes(r.array()?);
        if version != VERSION {
            return Err(SeekError::BadIndex(format!(
                "version {version}, this ferry reads version {VERSION}"
            )));
        }
        if xxhash_rust::xxh3::xxh3_64(body).to_le_bytes() != sum {
            return Err(bad("checksum mismatch (damaged or truncated)"));
        }
        let codec = Codec::from_byte(r.u8()?).ok_or_else(|| bad("unknown codec"))?;
        let span = r.u64()?;
        let compressed_len = r.u64()?;
        let decompressed_len = r.u64()?;
        let n = u32::from_le_bytes(r.array()?) as usize;
        if n > r.left() / POINT_FIXED {
            return Err(SeekError::BadIndex(format!(
                "says {n} points but has room for at most {}",
                r.left() / POINT_FIXED
            )));
        }
        let mut points = Vec::with_capacity(n);
        for _ in 0..n {
            let out = r.u64()?;
            let inp = r.u64()?;
            let kind = match r.u8()? {
                0 => Kind::Start,
                1 => {
                    let bits = r.u8()?;
                    let prime = r.u8()?;
                    let len = u32::from_le_bytes(r.array()?) as usize;
                    if len > MAX_PACKED_WINDOW {
                        return Err(SeekError::BadIndex(format!(
                            "a window of {len} bytes (at most {MAX_PACKED_WINDOW})"
                        )));
                    }
                    let window = r.take(len)?.to_vec();
                    Kind::Deflate {
                        bits,
                        prime,
                        window,
                    }
                }
                2 => Kind::XzBlock {
                    stream: r.u64()?,
                    blocks_end: r.u64()?,
                },
                k => return Err(SeekError::BadIndex(format!("unknown point kind {k}"))),
            };
            points.push(Point { out, inp, kind });
        }
        if r.left() != 0 {
            return Err(SeekError::BadIndex(format!(
                "{} bytes after the last point",
                r.left()
            )));
        }
        let index = SeekIndex {
            codec,
            span,
            compressed_len,
            decompressed_len,
            points,
        };
        index.validate()?;
        Ok(index)
    }

    /// Checks that the points make sense together; every decoder relies on this.
    pub(crate) fn validate(&self) -> Result<(), SeekError> {
        let bad = |i: usize, what: &str| SeekError::BadIndex(format!("point {i}: {what}"));
        if self.span == 0 {
            return Err(SeekError::BadIndex("span 0".into()));
        }
        match self.points.first() {
            None if self.decompressed_len > 0 => {
                return Err(SeekError::BadIndex(
                    "no seek points for non-empty data".into(),
                ))
            }
            Some(p) if p.out != 0 => return Err(bad(0, "the first point is not at offset 0")),
            _ => {}
        }
        if self.codec.is_sequential() && self.points.len() > 1 {
            return Err(SeekError::BadIndex(format!(
                "more than one {} point",
                self.codec
            )));
        }
        let mut prev: Option<&Point> = None;
        for (i, p) in self.points.iter().enumerate() {
            if let Some(q) = prev {
                if p.out <= q.out {
                    return Err(bad(i, "uncompressed offsets out of order"));
                }
                if p.inp < q.inp {
                    return Err(bad(i, "compressed offsets out of order"));
                }
            }
            if p.out >= self.decompressed_len.max(1) {
                return Err(bad(i, "past the end of the decompressed data"));
            }
            if p.inp >= self.compressed_len {
                return Err(bad(i, "past the end of the compressed file"));
            }
            match (&p.kind, self.codec) {
                (Kind::Start, c) if c != Codec::Xz => {}
                (Kind::Deflate { bits, .. }, Codec::Gzip) => {
                    if *bits > 7 || (*bits > 0 && p.inp == 0) {
                        return Err(bad(i, "bad bit position"));
                    }
                }
                (Kind::XzBlock { stream, blocks_end }, Codec::Xz) => {
                    if stream.checked_add(12).is_none_or(|s| s > p.inp)
                        || p.inp >= *blocks_end
                        || *blocks_end > self.compressed_len
                    {
                        return Err(bad(i, "xz block outside its stream"));
                    }
                }
                _ => return Err(bad(i, "a point of another codec's kind")),
            }
            prev = Some(p);
        }
        Ok(())
    }
}

/// A bounds-checked little-endian reader over a byte slice.
struct Bytes<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Bytes<'a> {
    fn left(&self) -> usize {
        self.b.len() - self.at
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], SeekError> {
        if n > self.left() {
            return Err(SeekError::BadIndex("truncated".into()));
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], SeekError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, SeekError> {
        Ok(self.take(1)?[0])
    }

    fn u64(&mut self) -> Result<u64, SeekError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SeekIndex {
        SeekIndex {
            codec: Codec::Gzip,
            span: 1 << 20,
            compressed_len: 1000,
            decompressed_len: 5000,
            points: vec![
                Point {
                    out: 0,
                    inp: 0,
                    kind: Kind::Start,
                },
                Point {
                    out: 2000,
                    inp: 400,
                    kind: Kind::Deflate {
                        bits: 3,
                        prime: 0xa5,
                        window: vec![1, 2, 3, 4],
                    },
                },
            ],
        }
    }

    #[test]
    fn round_trips() {
        let i = sample();
        assert_eq!(SeekIndex::from_bytes(&i.to_bytes()).unwrap(), i);
    }

    #[test]
    fn every_truncation_and_flip_is_an_error() {
        let b = sample().to_bytes();
        for n in 0..b.len() {
            assert!(SeekIndex::from_bytes(&b[..n]).is_err(), "truncated to {n}");
        }
        for at in 0..b.len() {
            for bit in 0..8 {
                let mut c = b.clone();
                c[at] ^= 1 << bit;
                assert!(SeekIndex::from_bytes(&c).is_err(), "flip {at}.{bit}");
            }
        }
    }

    #[test]
    fn lying_points_are_refused_even_with_a_good_checksum() {
        type Lie = Box<dyn Fn(&mut SeekIndex)>;
        let cases: Vec<(&str, Lie)> = vec![
            ("order", Box::new(|i| i.points[1].out = 0)),
            ("past end", Box::new(|i| i.points[1].out = 5000)),
            ("past file", Box::new(|i| i.points[1].inp = 1000)),
            ("in order", Box::new(|i| i.points[0].inp = 500)),
            ("first", Box::new(|i| i.points[0].out = 1)),
            ("kind", Box::new(|i| i.codec = Codec::Zstd)),
            ("none", Box::new(|i| i.points.clear())),
            (
                "bits",
                Box::new(|i| {
                    if let Kind::Deflate { bits, .. } = &mut i.points[1].kind {
                        *bits = 8
                    }
                }),
            ),
        ];
        for (what, f) in cases {
            let mut i = sample();
            f(&mut i);
            let e = SeekIndex::from_bytes(&i.to_bytes());
            assert!(matches!(e, Err(SeekError::BadIndex(_))), "{what}: {e:?}");
        }
    }

    #[test]
    fn advice_says_what_to_recompress_with() {
        let start = |out| Point {
            out,
            inp: out / 4,
            kind: Kind::Start,
        };
        let mut i = SeekIndex {
            codec: Codec::Zstd,
            span: 4 << 20,
            compressed_len: 1 << 30,
            decompressed_len: 3 << 30,
            points: vec![start(0)],
        };
        assert!(!i.is_random_access());
        assert!(i
            .advice()
            .is_some_and(|a| a.contains("single zstd frame") && a.contains("pzstd")));
        i.points = (0..96).map(|k| start(k << 25)).collect();
        assert!(i.is_random_access() && i.advice().is_none());
        i.points.truncate(2);
        assert!(i
            .advice()
            .is_some_and(|a| a.contains("frames of up to 3040 MiB")));
        i.decompressed_len = 10 << 20;
        i.points.truncate(1);
        assert!(
            i.is_random_access(),
            "a small single frame is cheap to read anywhere"
        );
        i.codec = Codec::Bzip2;
        assert!(!i.is_random_access() && i.advice().is_some());
        i.codec = Codec::Gzip;
        i.decompressed_len = 3 << 30;
        assert!(i.is_random_access() && i.advice().is_none());
        let xz = |out| Point {
            out,
            inp: 12 + out / 4,
            kind: Kind::XzBlock {
                stream: 0,
                blocks_end: 1 << 29,
            },
        };
        i.codec = Codec::Xz;
        i.points = vec![xz(0)];
        assert!(i
            .advice()
            .is_some_and(|a| a.contains("single xz block") && a.contains("xz -T0")));
    }

    #[test]
    fn a_huge_point_count_does_not_allocate() {
        let mut b = sample().to_bytes();
        b.truncate(b.len() - 8);
        b[HEADER_LEN - 4..HEADER_LEN].copy_from_slice(&u32::MAX.to_le_bytes());
        let sum = xxhash_rust::xxh3::xxh3_64(&b);
        b.extend_from_slice(&sum.to_le_bytes());
        let e = SeekIndex::from_bytes(&b).unwrap_err().to_string();
        assert!(e.contains("room for"), "{e}");
    }
}
