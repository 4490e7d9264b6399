//! zstd: a seek point at the start of a frame, about every `span` bytes of output.
//!
//! While indexing, frames are decoded one after another with libzstd's streaming
//! decoder, which reports the end of each frame (all of it decoded and flushed, its
//! checksum checked when it has one); the compressed offset there is where the next frame
//! starts. A decoder started at a frame goes on through the following frames (skippable
//! frames, which `pzstd` writes, are skipped), so a read may cross frames freely.
//! A file of one frame (what `zstd`, `zstd -T0`, `zstd -B` and `zstd --long` make) has one
//! point and is read sequentially.

use std::fs::File;
use std::io;
use std::sync::Arc;

use zstd::stream::raw::{Decoder, Operation};

use crate::index::{Kind, Point};
use crate::input::Input;
use crate::{corrupt, Codec};

/// Decodes a zstd file from a frame's start onwards.
pub(crate) struct ZstdDecoder {
    dec: Decoder<'static>,
    input: Input,
    out: u64,
    in_frame: bool,
    done: bool,
    /// Where bytes that start no frame follow the last one.
    trailing: Option<u64>,
    stalls: u8,
    /// While indexing: the span and the points so far.
    recorder: Option<(u64, Vec<Point>)>,
}

impl ZstdDecoder {
    /// A decoder from the start of the file that records a point about every `span` bytes.
    pub fn indexing(file: Arc<File>, span: u64) -> io::Result<ZstdDecoder> {
        let mut d = ZstdDecoder::resume(file, 0, 0)?;
        d.recorder = Some((span, Vec::new()));
        Ok(d)
    }

    /// A decoder starting at the frame at compressed `inp`, output offset `out`.
    pub fn resume(file: Arc<File>, inp: u64, out: u64) -> io::Result<ZstdDecoder> {
        Ok(ZstdDecoder {
            dec: Decoder::new()?,
            input: Input::new(file, inp, u64::MAX),
            out,
            in_frame: false,
            done: false,
            trailing: None,
            stalls: 0,
            recorder: None,
        })
    }

    /// Where trailing garbage (bytes that start no frame) follows the last frame, once
    /// the end is reached.
    pub fn trailing_garbage(&self) -> Option<u64> {
        self.trailing
    }

    /// The points recorded (indexing only) and the compressed size read.
    pub fn into_points(self) -> (Vec<Point>, u64) {
        let consumed = self.input.offset();
        (self.recorder.map(|r| r.1).unwrap_or_default(), consumed)
    }

    /// Decompresses into `buf`; `Ok(0)` only at the end of the data.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.done {
                return Ok(0);
            }
            let have = self.input.fill()?;
            if !self.in_frame {
                let at = self.input.offset();
                if !have {
                    if at == 0 {
                        return Err(corrupt(Codec::Zstd, "empty file"));
                    }
                    self.done = true;
                    return Ok(0);
                }
                // Bytes that start no frame after the last: trailing garbage.
                if at > 0 && crate::detect(self.input.peek(4)?) != Some(Codec::Zstd) {
                    self.trailing = Some(at);
                    self.done = true;
                    return Ok(0);
                }
                let out = self.out;
                if let Some((span, points)) = self.recorder.as_mut() {
                    if points
                        .last()
                        .is_none_or(|p| out >= p.out.saturating_add(*span))
                    {
                        points.push(Point {
                            out,
                            inp: at,
                            kind: Kind::Start,
                        });
                    }
                }
                self.in_frame = true;
            } else if !have {
                // The decoder may still hold output for a full buffer; otherwise truncated.
                let st = self.run(&[], buf)?;
                if st.bytes_written > 0 {
                    return Ok(st.bytes_written);
                }
                return Err(corrupt(
                    Codec::Zstd,
                    format!(
                        "the file ends inside a zstd frame, at compressed offset {} \
                         (truncated?)",
                        self.input.offset()
                    ),
                ));
            }
            let at = self.input.offset();
            let st = {
                let (dec, input) = (&mut self.dec, &self.input);
                dec.run_on_buffers(input.avail(), buf).map_err(|e| {
                    corrupt(Codec::Zstd, format!("{e}, near compressed offset {at}"))
                })?
            };
            self.input.consume(st.bytes_read);
            self.out += st.bytes_written as u64;
            if st.remaining == 0 {
                self.in_frame = false;
            }
            if st.bytes_written > 0 {
                self.stalls = 0;
                return Ok(st.bytes_written);
            }
            if st.bytes_read == 0 && self.in_frame {
                self.stalls += 1;
                if self.stalls > 2 {
                    return Err(corrupt(
                        Codec::Zstd,
                        format!("the decoder stalled at compressed offset {at}"),
                    ));
                }
            } else {
                self.stalls = 0;
            }
        }
    }

    fn run(&mut self, input: &[u8], buf: &mut [u8]) -> io::Result<zstd::stream::raw::Status> {
        let at = self.input.offset();
        let st = self
            .dec
            .run_on_buffers(input, buf)
            .map_err(|e| corrupt(Codec::Zstd, format!("{e}, near compressed offset {at}")))?;
        self.out += st.bytes_written as u64;
        if st.remaining == 0 {
            self.in_frame = false;
        }
        Ok(st)
    }
}
