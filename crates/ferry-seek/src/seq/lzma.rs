//! lzma (the `lzma_alone` format of LZMA Utils and `xz --format=lzma`), lzip and xz
//! streams read forward, all decoded by liblzma, within [`super::LZMA_MEMORY`]. An lzip
//! member ends with a CRC32 and the sizes, an xz stream with its index and footer; an
//! `lzma_alone` stream has no check of its own.

use std::io::{self, Read};

use liblzma::bufread::XzDecoder;
use liblzma::stream::Stream;

use super::{Member, Src, LZMA_MEMORY};
use crate::xz::XZ_MEMORY;
use crate::Codec;

/// One lzma_alone stream, one lzip member or one xz stream.
pub(crate) struct LzmaMember {
    dec: XzDecoder<Src>,
    done: bool,
    codec: Codec,
    /// The memory its decoder may take.
    limit: u64,
}

impl LzmaMember {
    pub fn lzma_alone(src: Src) -> io::Result<LzmaMember> {
        Self::with(
            src,
            Stream::new_lzma_decoder(LZMA_MEMORY),
            Codec::Lzma,
            LZMA_MEMORY,
        )
    }

    pub fn lzip(src: Src) -> io::Result<LzmaMember> {
        // Flags 0: this member only; the next one is opened by the caller.
        Self::with(
            src,
            Stream::new_lzip_decoder(LZMA_MEMORY, 0),
            Codec::Lzip,
            LZMA_MEMORY,
        )
    }

    /// One xz stream (its blocks' checks and its index checked by liblzma), within the
    /// memory a mount's xz cursor may take (`XZ_MEMORY`); the stream padding and the
    /// next stream are the caller's.
    pub fn xz(src: Src) -> io::Result<LzmaMember> {
        let stream = Stream::new_stream_decoder(XZ_MEMORY, 0);
        Self::with(src, stream, Codec::Xz, XZ_MEMORY)
    }

    fn with(
        src: Src,
        stream: Result<Stream, liblzma::stream::Error>,
        codec: Codec,
        limit: u64,
    ) -> io::Result<LzmaMember> {
        Ok(LzmaMember {
            dec: XzDecoder::new_stream(src, stream.map_err(io::Error::other)?),
            done: false,
            codec,
            limit,
        })
    }
}

impl Member for LzmaMember {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done {
            return Ok(0);
        }
        let n = self.dec.read(buf).map_err(|e| {
            let limit = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<liblzma::stream::Error>())
                .is_some_and(|inner| matches!(inner, liblzma::stream::Error::MemLimit));
            if limit {
                io::Error::other(format!(
                    "it needs more than the {} MiB of memory ferry gives its decoder: \
                     decompress it first (`{}`), and pipe that in as -",
                    self.limit >> 20,
                    self.codec.command()
                ))
            } else {
                e
            }
        })?;
        self.done = n == 0;
        Ok(n)
    }

    fn offset(&self) -> u64 {
        self.dec.get_ref().offset()
    }

    fn into_src(self: Box<Self>) -> Src {
        self.dec.into_inner()
    }
}
