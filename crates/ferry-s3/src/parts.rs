//! Part sizes for multipart uploads, within AWS's limits whatever the test server
//! enforces: every part but the last at least 5 MiB, none above 5 GiB, at most 10,000
//! parts to an object.

/// The smallest part S3 takes (but the last).
pub const MIN_PART: u64 = 5 << 20;
/// The largest part S3 takes.
pub const MAX_PART: u64 = 5 << 30;
/// The most parts of one object.
pub const MAX_PARTS: u64 = 10_000;
/// The largest object a multipart upload makes.
pub const MAX_OBJECT: u64 = MAX_PART * MAX_PARTS;
/// The part size wanted when the limits leave a choice: large enough that requests
/// are few, small enough that a few in flight stay within the memory budget.
pub const PREFERRED_PART: u64 = 5 << 20;

/// The part size for an object of `len` bytes, or None if no part size within the
/// limits can carry it. Rounded up to a MiB.
pub fn part_size(len: u64) -> Option<u64> {
    if len > MAX_OBJECT {
        return None;
    }
    let least = len.div_ceil(MAX_PARTS);
    let size = least
        .max(PREFERRED_PART)
        .max(MIN_PART)
        .next_multiple_of(1 << 20);
    Some(size.min(MAX_PART))
}

/// The byte ranges of the parts of an object of `len` bytes cut in `part` bytes.
pub fn ranges(len: u64, part: u64) -> impl Iterator<Item = std::ops::Range<u64>> {
    (0..len.div_ceil(part)).map(move |i| i * part..((i + 1) * part).min(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_sizes_stay_within_aws_limits() {
        for len in [
            0,
            1,
            MIN_PART - 1,
            MIN_PART,
            PREFERRED_PART * MAX_PARTS,
            PREFERRED_PART * MAX_PARTS + 1,
            1 << 40,
            MAX_OBJECT - 1,
            MAX_OBJECT,
        ] {
            let p = part_size(len).expect("within limits");
            assert!((MIN_PART..=MAX_PART).contains(&p), "{len}: {p}");
            assert!(
                len.div_ceil(p) <= MAX_PARTS,
                "{len}: {} parts",
                len.div_ceil(p)
            );
        }
        assert_eq!(part_size(100 << 20), Some(5 << 20));
        assert_eq!(part_size(MAX_OBJECT + 1), None);
    }

    #[test]
    fn every_part_but_the_last_is_within_limits() {
        for len in [
            MIN_PART + 1,
            12 << 20,
            PREFERRED_PART * MAX_PARTS + 1,
            3 << 40,
        ] {
            let part = part_size(len).expect("within limits");
            let r: Vec<_> = ranges(len, part).collect();
            assert!(r.len() as u64 <= MAX_PARTS, "{len}: {} parts", r.len());
            let (last, rest) = r.split_last().expect("parts");
            assert!(rest
                .iter()
                .all(|p| (MIN_PART..=MAX_PART).contains(&(p.end - p.start))));
            assert!(last.end == len && last.end - last.start <= part);
        }
    }

    #[test]
    fn ranges_cover_the_object_once() {
        let r: Vec<_> = ranges(20 << 20, 8 << 20).collect();
        assert_eq!(r, vec![0..8 << 20, 8 << 20..16 << 20, 16 << 20..20 << 20]);
        assert_eq!(ranges(0, 8 << 20).count(), 0);
    }
}
