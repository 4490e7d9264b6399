//! rsync's rolling weak checksum: two sums over a window that move one byte in O(1).
//!
//! `a` is the sum of the window's bytes and `b` the sum of its prefix sums (each byte
//! weighted by its distance from the window's end), both with a small offset added to
//! every byte so runs of zeros do not all sum to 0. The digest packs their low 16 bits;
//! 32-bit wrapping arithmetic keeps those exact while rolling.

/// Added to every byte.
const OFFSET: u32 = 31;

/// The sums of one window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rolling {
    a: u32,
    b: u32,
    len: u32,
}

impl Rolling {
    /// The sums of `window`.
    pub(crate) fn new(window: &[u8]) -> Self {
        let (mut a, mut b) = (0u32, 0u32);
        for &x in window {
            a = a.wrapping_add(u32::from(x) + OFFSET);
            b = b.wrapping_add(a);
        }
        Rolling {
            a,
            b,
            len: window.len() as u32,
        }
    }

    /// Moves the window one byte on: `out` leaves at its start, `inn` enters at its end.
    #[inline(always)]
    pub(crate) fn roll(&mut self, out: u8, inn: u8) {
        let out = u32::from(out) + OFFSET;
        self.a = self
            .a
            .wrapping_sub(out)
            .wrapping_add(u32::from(inn) + OFFSET);
        self.b = self
            .b
            .wrapping_sub(self.len.wrapping_mul(out))
            .wrapping_add(self.a);
    }

    /// The weak checksum.
    #[inline(always)]
    pub(crate) fn digest(&self) -> u32 {
        (self.a & 0xffff) | (self.b << 16)
    }
}

/// The weak checksum of one block.
pub(crate) fn weak(block: &[u8]) -> u32 {
    Rolling::new(block).digest()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rolling_equals_summing_afresh() {
        let mut rng = fastrand::Rng::with_seed(7);
        let data: Vec<u8> = (0..70_000).map(|_| rng.u8(..)).collect();
        for len in [1usize, 2, 4096, 65536] {
            let mut r = Rolling::new(&data[..len]);
            for i in 0..data.len() - len {
                assert_eq!(r, Rolling::new(&data[i..i + len]), "len {len} at {i}");
                r.roll(data[i], data[i + len]);
                if i > 3000 {
                    break;
                }
            }
        }
        assert_ne!(weak(&[0; 4096]), 0);
    }
}
