//! gzip in independent members that carry their own sizes, so a reader finds every
//! member by reading their headers alone (`ferry pack -z`).
//!
//! gzip has no seek table of its own. BGZF (samtools' `bgzip`) puts each member's
//! compressed size in an extra field of its header (subfield `BC`), which every gzip
//! reader passes over (RFC 1952: a reader skips subfields it does not know); ferry
//! does the same with a subfield of its own, as BGZF's is limited to 64 KiB members:
//!
//! ```text
//! 1f 8b 08  FLG 04 (FEXTRA)  MTIME 0  XFL 0  OS ff    gzip header
//! XLEN 12 (u16)                                       the extra field:
//!   'F' 'Y'  LEN 8 (u16)                                one subfield
//!   u32 the member's bytes (header to trailer)          (little endian)
//!   u32 its decompressed bytes
//! deflate data, CRC-32, ISIZE                         as in any member
//! ```
//!
//! So `gzip -d`, `tar -xzf` and every other gzip reader read the file as the members'
//! data one after another, and [`members`] lists the members from their headers: one
//! small read a member (a few hundred for a 1 GB tar in 4 MiB members). Every size read
//! is checked: the members must end exactly where the file does.

use crate::seekable::Frame;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;

/// The header every member starts with, up to its sizes.
const HEAD: [u8; 16] = [
    0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 0xff, 12, 0, b'F', b'Y', 8, 0,
];
/// Bytes of a member's header: [`HEAD`] and the two sizes.
pub const HEADER_LEN: usize = HEAD.len() + 8;
/// Bytes of a member's trailer (CRC-32, ISIZE).
const TRAILER_LEN: usize = 8;

/// `data` compressed at `level` (0-9) into one member with its sizes in its header.
pub fn member(data: &[u8], level: u32) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(data.len() / 3 + HEADER_LEN + TRAILER_LEN);
    out.extend_from_slice(&HEAD);
    out.extend_from_slice(&[0; 8]);
    let mut deflate = flate2::write::DeflateEncoder::new(out, flate2::Compression::new(level));
    deflate.write_all(data)?;
    let mut out = deflate.finish()?;
    let mut crc = flate2::Crc::new();
    crc.update(data);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    let total =
        u32::try_from(out.len()).map_err(|_| io::Error::other("a gzip member of 4 GiB or more"))?;
    let size = u32::try_from(data.len())
        .map_err(|_| io::Error::other("a gzip member of 4 GiB or more of data"))?;
    out[HEAD.len()..HEAD.len() + 4].copy_from_slice(&total.to_le_bytes());
    out[HEAD.len() + 4..HEADER_LEN].copy_from_slice(&size.to_le_bytes());
    Ok(out)
}

/// The data of member `raw` (as [`member`] writes it), which must decompress to
/// `decompressed` bytes whose CRC-32 and length match its trailer.
pub fn inflate(raw: &[u8], decompressed: u32) -> Result<Vec<u8>, String> {
    // The header's size is not trusted: memory grows with what the data holds, and no
    // more than one byte past what the header says is inflated.
    let mut out = Vec::with_capacity((decompressed as usize).min(8 << 20));
    let mut d = flate2::read::GzDecoder::new(raw).take(u64::from(decompressed) + 1);
    d.read_to_end(&mut out)
        .map_err(|e| format!("damaged: {e}"))?;
    if out.len() != decompressed as usize {
        return Err(format!(
            "holds {} bytes, its header says {decompressed}",
            out.len()
        ));
    }
    Ok(out)
}

fn bad(what: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("gzip members: {what}"))
}

/// The members of a file [`member`] wrote, from their headers; `None` when the file
/// does not start with such a member. Members whose sizes do not add up to the file
/// (a size of no bytes, one running past the end) are an error saying which.
pub fn members(file: &File) -> io::Result<Option<Vec<Frame>>> {
    let len = file.metadata()?.len();
    let mut head = [0u8; HEADER_LEN];
    let (mut inp, mut out) = (0u64, 0u64);
    let mut frames = Vec::new();
    while inp < len {
        let got = match file.read_exact_at(&mut head, inp) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => false,
            Err(e) => return Err(e),
        };
        if !got || head[..HEAD.len()] != HEAD {
            return match frames.is_empty() {
                true => Ok(None),
                false => Err(bad(format!(
                    "member {} (byte {inp}) has no sizes in its header",
                    frames.len()
                ))),
            };
        }
        let word =
            |at: usize| u32::from_le_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
        let (compressed, decompressed) = (word(HEAD.len()), word(HEAD.len() + 4));
        if (compressed as usize) < HEADER_LEN + TRAILER_LEN || inp + u64::from(compressed) > len {
            return Err(bad(format!(
                "member {} (byte {inp}) says it has {compressed} bytes, in a file of {len}",
                frames.len()
            )));
        }
        frames.push(Frame {
            inp,
            compressed,
            out,
            decompressed,
        });
        inp += u64::from(compressed);
        out += u64::from(decompressed);
    }
    Ok((!frames.is_empty()).then_some(frames))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_read_as_gzip_and_list_from_their_headers() {
        let parts: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 70_000 + usize::from(i)]).collect();
        let file = tempfile::NamedTempFile::new().expect("temp");
        let bytes: Vec<u8> = parts
            .iter()
            .flat_map(|p| member(p, 6).expect("member"))
            .collect();
        std::fs::write(file.path(), &bytes).expect("write");
        let mut whole = Vec::new();
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .read_to_end(&mut whole)
            .expect("gzip reads it");
        assert_eq!(whole, parts.concat());
        let frames = members(&file.reopen().expect("reopen"))
            .expect("read")
            .expect("members");
        assert_eq!(frames.len(), 5);
        for (f, p) in frames.iter().zip(&parts) {
            let raw = &bytes[f.inp as usize..(f.inp + u64::from(f.compressed)) as usize];
            assert_eq!(&inflate(raw, f.decompressed).expect("inflate"), p);
        }
        // Cut short: the last member runs past the end.
        std::fs::write(file.path(), &bytes[..bytes.len() - 1]).expect("write");
        let err = members(&file.reopen().expect("reopen")).unwrap_err();
        assert!(err.to_string().contains("member 4"), "{err}");
        // Any other gzip: not ours.
        let mut plain = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
        plain.write_all(b"plain").expect("gzip");
        std::fs::write(file.path(), plain.finish().expect("gzip")).expect("write");
        assert!(members(&file.reopen().expect("reopen"))
            .expect("read")
            .is_none());
        // A damaged member is told by inflate.
        let f = frames[2];
        let mut raw = bytes[f.inp as usize..(f.inp + u64::from(f.compressed)) as usize].to_vec();
        let mid = raw.len() / 2;
        raw[mid] ^= 0x55;
        assert!(inflate(&raw, f.decompressed).is_err());
        // A header that says less (or more) than the data holds.
        let raw = &bytes[f.inp as usize..(f.inp + u64::from(f.compressed)) as usize];
        assert!(inflate(raw, f.decompressed - 1)
            .unwrap_err()
            .contains("header says"));
        assert!(inflate(raw, f.decompressed + 1)
            .unwrap_err()
            .contains("header says"));
    }
}
