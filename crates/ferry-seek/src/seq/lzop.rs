//! lzop, as `lzop -dc` reads it: a header (checked by its Adler-32 or CRC32), then
//! blocks of LZO1X data (decoded by the `lzo` crate) each with the checksums the header
//! asks for, ending with a block of size 0. Several files in one lzop archive are
//! several members, read in turn. Blocks are at most 64 MiB, lzop's own limit; memory is
//! two blocks.

use std::io;

use super::{bad, Member, Src};

/// The first nine bytes of an lzop file.
pub(crate) const MAGIC: [u8; 9] = [0x89, b'L', b'Z', b'O', 0x00, 0x0D, 0x0A, 0x1A, 0x0A];
const MAX_BLOCK: usize = 64 << 20;

const ADLER32_D: u32 = 0x1;
const ADLER32_C: u32 = 0x2;
const EXTRA_FIELD: u32 = 0x40;
const CRC32_D: u32 = 0x100;
const CRC32_C: u32 = 0x200;
const FILTER: u32 = 0x800;
const HEADER_CRC32: u32 = 0x1000;

/// The checksum lzop keeps of some bytes.
#[derive(Clone, Copy)]
enum Sum {
    Adler,
    Crc,
}

impl Sum {
    fn of(self, data: &[u8]) -> u32 {
        match self {
            Sum::Adler => {
                let mut a = adler2::Adler32::new();
                a.write_slice(data);
                a.checksum()
            }
            Sum::Crc => crc32fast::hash(data),
        }
    }
}

/// The checksums of each block the header asks for (decompressed, compressed).
struct Sums {
    data: Option<Sum>,
    packed: Option<Sum>,
}

/// One lzop member.
pub(crate) struct LzopMember {
    src: Src,
    sums: Option<Sums>,
    ended: bool,
    packed: Vec<u8>,
    out: Vec<u8>,
    at: usize,
}

/// Reads `n` bytes from `src`, adding them to `header`.
fn take(src: &mut Src, header: &mut Vec<u8>, n: usize) -> io::Result<u64> {
    let mut b = [0u8; 8];
    src.exact(&mut b[..n])?;
    header.extend_from_slice(&b[..n]);
    Ok(b[..n].iter().fold(0u64, |v, &x| v << 8 | u64::from(x)))
}

impl LzopMember {
    pub fn new(src: Src) -> LzopMember {
        LzopMember {
            src,
            sums: None,
            ended: false,
            packed: Vec::new(),
            out: Vec::new(),
            at: 0,
        }
    }

    /// Reads and checks the header.
    fn header(&mut self) -> io::Result<Sums> {
        let mut magic = [0u8; 9];
        self.src.exact(&mut magic)?;
        if magic != MAGIC {
            return Err(bad("not an lzop file (bad magic)"));
        }
        let src = &mut self.src;
        let mut h = Vec::with_capacity(64);
        let version = take(src, &mut h, 2)?;
        take(src, &mut h, 2)?; // the library version
        if version < 0x0900 {
            return Err(bad(format!(
                "lzop format version {version:#x}, older than any lzop 1.x"
            )));
        }
        if version >= 0x0940 {
            let needed = take(src, &mut h, 2)?;
            if needed > 0x1040 {
                return Err(bad(format!(
                    "lzop format version {needed:#x} is needed to read it"
                )));
            }
        }
        let method = take(src, &mut h, 1)?;
        if !(1..=3).contains(&method) {
            return Err(bad(format!(
                "compression method {method} (ferry reads LZO1X, 1 to 3)"
            )));
        }
        if version >= 0x0940 {
            take(src, &mut h, 1)?; // the level
        }
        let flags = take(src, &mut h, 4)? as u32;
        if flags & FILTER != 0 {
            return Err(bad("an lzop filter, which ferry does not read"));
        }
        take(src, &mut h, 4)?; // mode
        take(src, &mut h, 4)?; // mtime
        if version >= 0x0940 {
            take(src, &mut h, 4)?; // mtime, high half
        }
        let name_len = take(src, &mut h, 1)? as usize;
        let mut name = vec![0u8; name_len];
        src.exact(&mut name)?;
        h.extend_from_slice(&name);
        let header_sum = if flags & HEADER_CRC32 != 0 {
            Sum::Crc
        } else {
            Sum::Adler
        };
        if src.u32(false)? != header_sum.of(&h) {
            return Err(bad("header checksum mismatch"));
        }
        if flags & EXTRA_FIELD != 0 {
            let len = src.u32(false)?;
            src.skip(u64::from(len) + 4)?;
        }
        let pick = |adler: u32, crc: u32| {
            if flags & crc != 0 {
                Some(Sum::Crc)
            } else if flags & adler != 0 {
                Some(Sum::Adler)
            } else {
                None
            }
        };
        Ok(Sums {
            data: pick(ADLER32_D, CRC32_D),
            packed: pick(ADLER32_C, CRC32_C),
        })
    }

    /// Decodes the next block into `out`; false at the end block.
    fn block(&mut self) -> io::Result<bool> {
        let sums = match &self.sums {
            Some(s) => s,
            None => {
                let s = self.header()?;
                self.sums.insert(s)
            }
        };
        let len = self.src.u32(false)? as usize;
        if len == 0 {
            return Ok(false);
        }
        let packed_len = self.src.u32(false)? as usize;
        if len > MAX_BLOCK || packed_len > len {
            return Err(bad(format!(
                "a block of {packed_len} bytes for {len} (lzop's limit is {} MiB, never larger packed)",
                MAX_BLOCK >> 20
            )));
        }
        let data_sum = match sums.data {
            Some(_) => Some(self.src.u32(false)?),
            None => None,
        };
        let packed_sum = match sums.packed {
            Some(_) if packed_len < len => Some(self.src.u32(false)?),
            _ => None,
        };
        self.packed.resize(packed_len, 0);
        self.src.exact(&mut self.packed)?;
        if let (Some(kind), Some(want)) = (sums.packed, packed_sum) {
            if kind.of(&self.packed) != want {
                return Err(bad(
                    "compressed block checksum mismatch: the data is damaged",
                ));
            }
        }
        if packed_len == len {
            std::mem::swap(&mut self.out, &mut self.packed);
        } else {
            self.out.resize(len, 0);
            let n = lzo::decompress_into(&self.packed, &mut self.out)
                .map_err(|e| bad(format!("damaged block: {e}")))?;
            if n != len {
                return Err(bad(format!("a block says {len} bytes and holds {n}")));
            }
        }
        if let (Some(kind), Some(want)) = (sums.data, data_sum) {
            if kind.of(&self.out) != want {
                return Err(bad("block checksum mismatch: the data is damaged"));
            }
        }
        Ok(true)
    }
}

impl Member for LzopMember {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.out.len() {
            if self.ended {
                return Ok(0);
            }
            self.at = 0;
            self.out.clear();
            if !self.block()? {
                self.ended = true;
                return Ok(0);
            }
        }
        let n = (self.out.len() - self.at).min(buf.len());
        buf[..n].copy_from_slice(&self.out[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }

    fn offset(&self) -> u64 {
        self.src.offset()
    }

    fn into_src(self: Box<Self>) -> Src {
        self.src
    }
}
