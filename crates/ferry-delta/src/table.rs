//! The lookup table the scan asks at every byte offset: "might a basis block have this
//! weak checksum?" answered by one bit test, and on a hit which block has that weak
//! checksum and the window's strong hash.
//!
//! A bit filter of 32 bits per entry (64 KiB for 16,384 blocks), at most one bit set
//! per entry, lets at most one offset in 32 of unrelated data past it (for weak
//! checksums spread evenly); this test, not the buckets, is what most offsets cost.
//! Entries (full-length blocks only: the rolling window is one block long) are sorted
//! by bucket, then by weak checksum and strong hash, with duplicate blocks kept once
//! (the first); `starts[b]..starts[b + 1]` are bucket `b`'s entries, four buckets per
//! entry. Within a bucket a binary search finds the weak checksum and then the strong
//! hash, so a signature made to crowd one bucket (it comes from the other end) costs a
//! logarithm per probe, not a scan of the bucket.

use crate::signature::{strong, Signature};

#[derive(Clone, Copy, Debug)]
struct Entry {
    weak: u32,
    block: u32,
    strong: u64,
}

/// The table over one signature's full blocks.
pub(crate) struct Table {
    shift: u32,
    filter_shift: u32,
    filter: Vec<u64>,
    starts: Vec<u32>,
    entries: Vec<Entry>,
}

impl Table {
    /// The table of `sig`'s full-length blocks.
    pub(crate) fn new(sig: &Signature) -> Table {
        let block = u64::from(sig.block_size());
        let full = sig
            .sums()
            .iter()
            .enumerate()
            .filter(|&(i, _)| sig.block_len(i) == block);
        let n = full.clone().count();
        // At least 4 buckets per entry, a power of two (n <= MAX_BLOCKS = 2^22).
        let bits = (n.max(4) * 4).next_power_of_two().trailing_zeros();
        let shift = 32 - bits;
        let bucket = |weak: u32| (mix(weak) >> shift) as usize;
        let filter_bits = bits + 3;
        let filter_shift = 32 - filter_bits;
        let mut filter = vec![0u64; (1usize << filter_bits).div_ceil(64)];
        let mut entries: Vec<Entry> = full
            .map(|(i, s)| Entry {
                weak: s.weak,
                block: i as u32,
                strong: s.strong,
            })
            .collect();
        entries.sort_unstable_by_key(|e| (bucket(e.weak), e.weak, e.strong, e.block));
        entries.dedup_by(|later, first| later.weak == first.weak && later.strong == first.strong);
        let mut starts = vec![0u32; (1usize << bits) + 1];
        for e in &entries {
            starts[bucket(e.weak) + 1] += 1;
            let bit = (mix(e.weak) >> filter_shift) as usize;
            filter[bit / 64] |= 1 << (bit % 64);
        }
        for b in 1..starts.len() {
            starts[b] += starts[b - 1];
        }
        Table {
            shift,
            filter_shift,
            filter,
            starts,
            entries,
        }
    }

    /// Whether the table has no entries at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    #[inline(always)]
    fn range(&self, weak: u32) -> (usize, usize) {
        let b = (mix(weak) >> self.shift) as usize;
        match (self.starts.get(b), self.starts.get(b + 1)) {
            (Some(&s), Some(&e)) => (s as usize, e as usize),
            _ => (0, 0),
        }
    }

    /// Whether a block may have the weak checksum `weak` (its filter bit is set).
    #[inline(always)]
    pub(crate) fn may_hold(&self, weak: u32) -> bool {
        let bit = (mix(weak) >> self.filter_shift) as usize;
        self.filter
            .get(bit / 64)
            .is_some_and(|w| w & (1 << (bit % 64)) != 0)
    }

    /// The block whose weak checksum is `weak` and whose strong hash is that of
    /// `window` (hashed only if some block has that weak checksum).
    #[inline(always)]
    pub(crate) fn find(&self, weak: u32, window: &[u8]) -> Option<usize> {
        let (s, e) = self.range(weak);
        let bucket = self.entries.get(s..e)?;
        let lo = match bucket {
            [only] if only.weak != weak => return None,
            [_] => 0,
            _ => bucket.partition_point(|x| x.weak < weak),
        };
        if bucket.get(lo)?.weak != weak {
            return None;
        }
        let strong = strong(window);
        let same = &bucket[lo..];
        let at = same.partition_point(|x| x.weak == weak && x.strong < strong);
        let hit = same.get(at)?;
        (hit.weak == weak && hit.strong == strong).then_some(hit.block as usize)
    }
}

/// Spreads a weak checksum over the bits the buckets and the filter take (their top).
#[inline(always)]
fn mix(weak: u32) -> u32 {
    weak.wrapping_mul(0x9E37_79B1)
}
