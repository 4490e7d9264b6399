//! bzip2: sequential only. One point at the start; a decoder reads every stream of the
//! file in turn (as `bzcat` does), checking each block's and stream's CRC.

use std::fs::File;
use std::io::{self, Read};
use std::sync::Arc;

use bzip2::bufread::MultiBzDecoder;

use crate::index::{Kind, Point};
use crate::input::Input;
use crate::{corrupt, Codec};

/// Decodes a bzip2 file from its start.
pub(crate) struct Bz2Decoder {
    dec: MultiBzDecoder<Input>,
    started: bool,
}

impl Bz2Decoder {
    /// A decoder from the start of the file.
    pub fn new(file: Arc<File>) -> Bz2Decoder {
        Bz2Decoder {
            dec: MultiBzDecoder::new(Input::new(file, 0, u64::MAX)),
            started: false,
        }
    }

    /// The one point of a bzip2 file and the compressed size read.
    pub fn into_points(self) -> (Vec<Point>, u64) {
        let consumed = self.dec.get_ref().offset();
        let start = Point {
            out: 0,
            inp: 0,
            kind: Kind::Start,
        };
        (vec![start], consumed)
    }

    /// Decompresses into `buf`; `Ok(0)` only at the end of the data.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if !self.started {
            self.started = true;
            if self.dec.get_mut().peek(1)?.is_empty() {
                return Err(corrupt(Codec::Bzip2, "empty file"));
            }
        }
        self.dec.read(buf).map_err(|e| {
            let at = self.dec.get_ref().offset();
            if e.kind() == io::ErrorKind::Interrupted {
                e
            } else {
                corrupt(Codec::Bzip2, format!("{e}, near compressed offset {at}"))
            }
        })
    }
}
