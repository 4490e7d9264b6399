//! [`Indexing`]: reads a compressed file once, as `zcat` would, recording seek points.

use std::fs::File;
use std::io::{self, Read};
use std::sync::Arc;

use crate::access::Decoder;
use crate::gzip::GzDecoder;
use crate::index::{Kind, Point, SeekIndex};
use crate::seq;
use crate::xz;
use crate::zstd::ZstdDecoder;
use crate::{corrupt, Codec, MIN_SPAN};

/// Wraps a compressed file; [`Read`] yields the decompressed stream (all members of a
/// multi-member gzip, all frames, all streams, as `zcat` would) and, while it is read,
/// records seek points about every `span` bytes of output.
///
/// Call [`Indexing::finish`] when done with the stream (a tar reader may stop at the
/// end-of-archive blocks): it decodes the rest to the end, so the data's own checks (gzip
/// CRC and length, zstd and xz checksums and the xz index) are all verified, and returns
/// the [`SeekIndex`]. A damaged or truncated file is an error from `read` or `finish`,
/// naming the problem and the compressed offset.
pub struct Indexing {
    codec: Codec,
    span: u64,
    file: Arc<File>,
    dec: Decoder,
    out: u64,
}

impl Indexing {
    /// Starts reading `file` (from its start, whatever its position) as `codec`, with a
    /// seek point about every `span` bytes of output (at least [`MIN_SPAN`]; see
    /// [`crate::DEFAULT_SPAN`]).
    pub fn new(file: File, codec: Codec, span: u64) -> io::Result<Indexing> {
        let span = span.max(MIN_SPAN);
        let file = Arc::new(file);
        let dec = match codec {
            Codec::Gzip => Decoder::Gzip(GzDecoder::indexing(file.clone(), span)?),
            Codec::Zstd => Decoder::Zstd(ZstdDecoder::indexing(file.clone(), span)?),
            // Read forward stream by stream; the points come from the xz indexes after.
            _ => Decoder::Seq(seq::from_file(codec, file.clone())),
        };
        Ok(Indexing {
            codec,
            span,
            file,
            dec,
            out: 0,
        })
    }

    /// Bytes of decompressed output so far.
    pub fn decompressed_so_far(&self) -> u64 {
        self.out
    }

    /// Where bytes that are not the codec's data start after its last stream (trailing
    /// garbage, which `finish` accepts: the data before it is all there), once `read`
    /// has returned the end of the data; `None` before that, or when nothing follows.
    /// Told for every codec (xz after its last stream and stream padding).
    pub fn trailing_garbage(&self) -> Option<u64> {
        match &self.dec {
            Decoder::Seq(d) => d.trailing_garbage(),
            Decoder::Gzip(d) => d.trailing_garbage(),
            Decoder::Zstd(d) => d.trailing_garbage(),
            Decoder::Xz(_) => None,
        }
    }

    /// Reads the rest of the input to its end, verifying it, and returns the seek index.
    pub fn finish(mut self) -> io::Result<SeekIndex> {
        let mut scratch = vec![0u8; 256 << 10];
        while self.read(&mut scratch)? > 0 {}
        let decoded = self.out;
        let trailing = self.trailing_garbage();
        let (mut points, consumed) = match self.dec {
            Decoder::Gzip(d) => d.into_points(),
            Decoder::Zstd(d) => d.into_points(),
            Decoder::Seq(d) if self.codec == Codec::Xz => {
                let consumed = d.consumed();
                (
                    xz::points(&self.file, consumed, decoded, self.span)?,
                    consumed,
                )
            }
            Decoder::Seq(d) => {
                let start = Point {
                    out: 0,
                    inp: 0,
                    kind: Kind::Start,
                };
                (vec![start], d.consumed())
            }
            // Only resumed at a point, never made for indexing.
            Decoder::Xz(_) => return Err(corrupt(self.codec, "an xz decoder resumed mid-file")),
        };
        let len = self.file.metadata()?.len();
        if len != consumed && trailing.is_none() {
            return Err(corrupt(
                self.codec,
                format!("the file has {len} bytes but its data ends at {consumed} (changed while read?)"),
            ));
        }
        // Points at the very end (an empty last block or member) serve nothing.
        while points.len() > 1 && points.last().is_some_and(|p| p.out >= decoded) {
            points.pop();
        }
        let index = SeekIndex {
            codec: self.codec,
            span: self.span,
            compressed_len: len,
            decompressed_len: decoded,
            points,
        };
        index.validate()?;
        Ok(index)
    }
}

impl Read for Indexing {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.dec.read(buf)?;
        self.out += n as u64;
        Ok(n)
    }
}
