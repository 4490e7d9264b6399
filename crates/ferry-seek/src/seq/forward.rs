//! gzip members and zstd frames read forward, one at a time, for an input that cannot
//! be indexed (a pipe): so that what follows the last of them is found as trailing
//! garbage, as for the sequential codecs, instead of failing as a member that does not
//! parse. gzip members are checked by their CRC32 and length, zstd frames by their
//! checksum where they carry one; a zstd frame's window is bounded by libzstd's default
//! limit (128 MiB), never by what the frame asks for.

use std::io::{self, Read};

use flate2::bufread::GzDecoder;

use super::{Member, Src};

/// One gzip member.
pub(crate) struct GzMember(GzDecoder<Src>);

impl GzMember {
    pub fn new(src: Src) -> GzMember {
        GzMember(GzDecoder::new(src))
    }
}

impl Member for GzMember {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }

    fn offset(&self) -> u64 {
        self.0.get_ref().offset()
    }

    fn into_src(self: Box<Self>) -> Src {
        self.0.into_inner()
    }
}

/// One zstd frame (or skippable frame, which yields nothing).
pub(crate) struct ZstdMember(zstd::stream::read::Decoder<'static, Src>);

impl ZstdMember {
    pub fn new(src: Src) -> io::Result<ZstdMember> {
        Ok(ZstdMember(
            zstd::stream::read::Decoder::with_buffer(src)?.single_frame(),
        ))
    }
}

impl Member for ZstdMember {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }

    fn offset(&self) -> u64 {
        self.0.get_ref().offset()
    }

    fn into_src(self: Box<Self>) -> Src {
        self.0.finish()
    }
}
