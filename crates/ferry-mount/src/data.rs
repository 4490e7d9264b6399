//! Where a mount reads members' stored bytes from: the archive file itself, or (for a
//! compressed archive) its decompressed stream, and how a member's logical bytes are
//! put together from its stored runs.

use ferry_core::sparse::Piece;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Random access to the (uncompressed) tar data, from several threads at once.
pub trait DataAt: Send + Sync {
    /// Fills `buf` from `offset`; fewer bytes only at the end of the data.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// What reading cost so far, in words for the log when the mount ends (a remote
    /// source's requests); None for a local file.
    fn summary(&self) -> Option<String> {
        None
    }
}

/// An uncompressed archive: the tar data is the file.
pub struct PlainFile(pub File);

impl DataAt for PlainFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match self.0.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }
}

/// A compressed archive: the tar data is its decompressed stream, reached through
/// seek points (see the ferry-seek crate).
impl DataAt for ferry_seek::Compressed {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match ferry_seek::Compressed::read_at(self, &mut buf[done..], offset + done as u64)? {
                0 => break,
                n => done += n,
            }
        }
        Ok(done)
    }
}

/// A ferry archive compressed in frames (`pack --zstd`, `-z`): the tar data is read by
/// decompressing the frames that hold it.
impl DataAt for ferry_seek::Frames {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        ferry_seek::Frames::read_at(self, buf, offset)
    }
}

/// Fills `buf` with the logical bytes of a member from `offset`: its `pieces` (in file
/// order, from [`ferry_core::sparse::pieces`]) read through `data`, the first stored
/// byte at `stored_at`, zeros in its holes; `size` is the logical size. Returns how many
/// bytes were filled (less than asked only at the end).
pub fn read_member(
    data: &dyn DataAt,
    stored_at: u64,
    pieces: &[Piece],
    size: u64,
    offset: u64,
    buf: &mut [u8],
) -> io::Result<usize> {
    let end = size.min(offset.saturating_add(buf.len() as u64));
    if offset >= end {
        return Ok(0);
    }
    let want = (end - offset) as usize;
    let out = &mut buf[..want];
    out.fill(0);
    // The first piece that ends after `offset`.
    let first = pieces.partition_point(|p| p.at + p.len <= offset);
    for p in &pieces[first..] {
        if p.at >= end {
            break;
        }
        let from = p.at.max(offset);
        let to = (p.at + p.len).min(end);
        let dst = &mut out[(from - offset) as usize..(to - offset) as usize];
        let got = data.read_at(dst, stored_at + p.stored + (from - p.at))?;
        if got < dst.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the archive ends inside the member's data",
            ));
        }
    }
    Ok(want)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Bytes(Vec<u8>);

    impl DataAt for Bytes {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            let from = (offset as usize).min(self.0.len());
            let n = buf.len().min(self.0.len() - from);
            buf[..n].copy_from_slice(&self.0[from..from + n]);
            Ok(n)
        }
    }

    #[test]
    fn runs_and_holes_read_back_as_the_file() {
        // Logical file of 20 bytes: "abcd" at 2, "xyz" at 10, hole to the end.
        let data = Bytes(b"____abcdxyz".to_vec());
        let mut logical = [0u8; 20];
        logical[2..6].copy_from_slice(b"abcd");
        logical[10..13].copy_from_slice(b"xyz");
        // The same file stored in order, and stored as "xyz" first, then "abcd" with
        // its last byte written again by a later run ("d" at 5).
        let stored_out_of_order = Bytes(b"____xyzabcDd".to_vec());
        for (data, runs) in [
            (&data, &[(2, 4), (10, 3)][..]),
            (&stored_out_of_order, &[(10, 3), (2, 4), (5, 1)][..]),
        ] {
            let pieces = ferry_core::sparse::pieces(runs);
            for off in 0..22u64 {
                for len in 0..22usize {
                    let mut buf = vec![0xffu8; len];
                    let n = read_member(data, 4, &pieces, 20, off, &mut buf).expect("read");
                    let want = &logical[(off as usize).min(20)..(off as usize + len).min(20)];
                    assert_eq!(&buf[..n], want, "{runs:?}: offset {off} length {len}");
                }
            }
        }
    }

    #[test]
    fn data_cut_short_is_an_error() {
        let data = Bytes(b"ab".to_vec());
        let mut buf = [0u8; 4];
        let whole = ferry_core::sparse::pieces(&[(0, 4)]);
        assert!(read_member(&data, 0, &whole, 4, 0, &mut buf).is_err());
    }
}
