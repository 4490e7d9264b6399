//! bzip2: one stream, checked by its block and stream CRCs (about 4 MiB of memory at
//! the largest block size, `-9`).

use std::io::{self, Read};

use bzip2::bufread::BzDecoder;

use super::{Member, Src};

/// One bzip2 stream.
pub(crate) struct Bz2Member(BzDecoder<Src>);

impl Bz2Member {
    pub fn new(src: Src) -> Bz2Member {
        Bz2Member(BzDecoder::new(src))
    }
}

impl Member for Bz2Member {
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
