//! Unsigned LEB128 numbers, the only variable-length field of the wire format: seven
//! bits a byte, low bits first, at most ten bytes for a `u64`.

use crate::error::{Error, Result};

/// Appends `v` to `out`.
pub(crate) fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a number from the start of `buf`: `Ok(None)` when `buf` ends inside it,
/// otherwise the number and the bytes it took. `what` names the input for the error.
pub(crate) fn get(buf: &[u8], what: &'static str) -> Result<Option<(u64, usize)>> {
    let mut v = 0u64;
    for (i, &byte) in buf.iter().enumerate().take(10) {
        let bits = u64::from(byte & 0x7f);
        // The tenth byte holds bit 63 alone.
        if i == 9 && bits > 1 {
            return Err(Error::Varint(what));
        }
        v |= bits << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(Some((v, i + 1)));
        }
    }
    if buf.len() >= 10 {
        return Err(Error::Varint(what));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_and_overlong_ones_are_refused() {
        for v in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX - 1, u64::MAX] {
            let mut out = Vec::new();
            put(&mut out, v);
            assert_eq!(get(&out, "t").unwrap(), Some((v, out.len())));
            assert_eq!(get(&out[..out.len() - 1], "t").unwrap(), None);
        }
        assert!(get(&[0xff; 10], "t").is_err());
        assert!(get(
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
            "t"
        )
        .is_err());
        assert_eq!(get(&[0xff; 9], "t").unwrap(), None);
    }
}
