//! lzma (the `lzma_alone` format of LZMA Utils and `xz --format=lzma`) and lzip, both
//! decoded by liblzma, within [`super::LZMA_MEMORY`]. An lzip member ends with a CRC32
//! and the sizes; an `lzma_alone` stream has no check of its own.

use std::io::{self, Read};

use liblzma::bufread::XzDecoder;
use liblzma::stream::Stream;

use super::{Member, Src, LZMA_MEMORY};

/// One lzma_alone stream or one lzip member.
pub(crate) struct LzmaMember {
    dec: XzDecoder<Src>,
    done: bool,
}

impl LzmaMember {
    pub fn lzma_alone(src: Src) -> io::Result<LzmaMember> {
        Self::with(src, Stream::new_lzma_decoder(LZMA_MEMORY))
    }

    pub fn lzip(src: Src) -> io::Result<LzmaMember> {
        // Flags 0: this member only; the next one is opened by the caller.
        Self::with(src, Stream::new_lzip_decoder(LZMA_MEMORY, 0))
    }

    fn with(src: Src, stream: Result<Stream, liblzma::stream::Error>) -> io::Result<LzmaMember> {
        Ok(LzmaMember {
            dec: XzDecoder::new_stream(src, stream.map_err(io::Error::other)?),
            done: false,
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
                    "it needs more than the {} MiB of memory ferry gives its decoder",
                    LZMA_MEMORY >> 20
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
