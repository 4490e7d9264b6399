//! Sequential codecs: bzip2, lz4, lzma (`lzma_alone`), lzip, compress (`.Z`) and lzop;
//! and xz read forward, stream by stream (how it is indexed, and read from a pipe), and
//! gzip and zstd member by member (read from a pipe).
//!
//! None of these has places a decoder can start again from that a reader could find
//! cheaply, so a file of theirs has one seek point, its start, and is read forward.
//! [`SeqDecoder`] reads every stream (member, frame) of a file in turn, as `bzcat`,
//! `lz4 -dc`, `lzip -dc` and `lzop -dc` do, and stops at the first bytes after a stream
//! that do not start another: those are *trailing garbage*, which is not an error here
//! ([`SeqDecoder::trailing_garbage`] says where it starts; what to make of it is the
//! caller's choice). Everything else wrong is an error naming the codec and the
//! compressed offset. Memory is bounded by each format's own limits (said per module),
//! never by a size the input states.
//!
//! [`stream_decoder`] gives the same decoder over any reader (a pipe), for `unpack` of
//! standard input.

mod bzip2;
mod forward;
mod lz4;
mod lzma;
mod lzop;
mod lzw;
mod reader;

use std::io::{self, Read};

use crate::{corrupt, Codec};
pub(crate) use reader::Src;

/// The most memory the lzma and lzip decoders may take: xz's largest preset (`-9`)
/// needs 65 MiB; an input may ask for up to 4 GiB, which is not allocated for it.
pub const LZMA_MEMORY: u64 = 256 << 20;

/// One stream of a sequential codec being decoded; it owns the input while it does.
pub(crate) trait Member: Send {
    /// Decompresses into `buf` (not empty); `Ok(0)` at the end of this stream.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    /// The compressed offset the decoder has read to.
    fn offset(&self) -> u64;
    /// The input, just after this stream's last byte.
    fn into_src(self: Box<Self>) -> Src;
}

/// Whether `head` (up to 16 bytes; fewer only at the end of the input) starts another
/// stream of `codec` after one has ended.
fn starts_another(codec: Codec, head: &[u8]) -> bool {
    match codec {
        // The magics `detect` knows (gzip's `1f 8b 08`, zstd's frames and skippable
        // frames, xz's stream header, bzip2's `BZh` and block size).
        Codec::Bzip2 | Codec::Gzip | Codec::Zstd | Codec::Xz => crate::detect(head) == Some(codec),
        Codec::Lz4 => lz4::starts_frame(head),
        Codec::Lzip => head.starts_with(b"LZIP"),
        Codec::Lzop => head.starts_with(&lzop::MAGIC),
        // An lzma_alone file and a compress file hold one stream.
        _ => false,
    }
}

/// The decoder of one stream of `codec`, starting at `src`'s position.
fn open(codec: Codec, src: Src) -> io::Result<Box<dyn Member>> {
    Ok(match codec {
        Codec::Bzip2 => Box::new(bzip2::Bz2Member::new(src)),
        Codec::Lzma => Box::new(lzma::LzmaMember::lzma_alone(src)?),
        Codec::Lzip => Box::new(lzma::LzmaMember::lzip(src)?),
        Codec::Lz4 => Box::new(lz4::Lz4Member::new(src)),
        Codec::Lzop => Box::new(lzop::LzopMember::new(src)),
        Codec::Compress => Box::new(lzw::LzwMember::new(src)),
        Codec::Xz => Box::new(lzma::LzmaMember::xz(src)?),
        Codec::Gzip => Box::new(forward::GzMember::new(src)),
        Codec::Zstd => Box::new(forward::ZstdMember::new(src)?),
    })
}

enum State {
    /// Between streams (or before the first), with the input.
    Between(Src),
    /// Inside a stream.
    In(Box<dyn Member>),
    /// At the end (of the data; garbage may follow), with the input.
    Done(Src),
    /// After an error: every read fails again.
    Failed,
}

/// Decodes every stream of a sequentially compressed input, from its start.
pub struct SeqDecoder {
    codec: Codec,
    state: State,
    streams: u64,
    trailing: Option<u64>,
}

impl SeqDecoder {
    /// A decoder of `codec` data read from `src`.
    pub(crate) fn new(codec: Codec, src: Src) -> SeqDecoder {
        SeqDecoder {
            codec,
            state: State::Between(src),
            streams: 0,
            trailing: None,
        }
    }

    /// The codec decoded.
    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// Where trailing garbage starts (a compressed offset), once the data has ended and
    /// other bytes follow it; `None` before the end or when nothing follows.
    pub fn trailing_garbage(&self) -> Option<u64> {
        self.trailing
    }

    /// The compressed offset read to: after the end, where the data ends.
    pub fn consumed(&self) -> u64 {
        match &self.state {
            State::Between(s) | State::Done(s) => s.offset(),
            State::In(m) => m.offset(),
            State::Failed => 0,
        }
    }

    fn step(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match std::mem::replace(&mut self.state, State::Failed) {
                State::Failed => return Err(corrupt(self.codec, "read again after an error")),
                State::Done(src) => {
                    self.state = State::Done(src);
                    return Ok(0);
                }
                State::Between(mut src) => {
                    let at = src.offset();
                    let head = src.peek(16)?;
                    if head.is_empty() {
                        if self.streams == 0 {
                            return Err(corrupt(self.codec, "empty file"));
                        }
                        self.state = State::Done(src);
                        return Ok(0);
                    }
                    // xz streams may be followed by stream padding: zero bytes, four
                    // at a time (the .xz format, section 2.2).
                    if self.codec == Codec::Xz && self.streams > 0 && head.starts_with(&[0; 4]) {
                        src.skip(4)?;
                        self.state = State::Between(src);
                        continue;
                    }
                    if self.streams > 0 && !starts_another(self.codec, head) {
                        self.trailing = Some(at);
                        self.state = State::Done(src);
                        return Ok(0);
                    }
                    self.streams += 1;
                    self.state = State::In(open(self.codec, src).map_err(|e| self.named(e, at))?);
                }
                State::In(mut member) => match member.read(buf) {
                    Ok(0) => self.state = State::Between(member.into_src()),
                    Ok(n) => {
                        self.state = State::In(member);
                        return Ok(n);
                    }
                    Err(e) => return Err(self.named(e, member.offset())),
                },
            }
        }
    }

    /// An error of a member told as this codec's, at compressed offset `at`.
    fn named(&self, e: io::Error, at: u64) -> io::Error {
        match e.kind() {
            io::ErrorKind::Interrupted => e,
            io::ErrorKind::UnexpectedEof => corrupt(
                self.codec,
                format!("truncated: the file ends inside a stream, at compressed offset {at}"),
            ),
            _ if e.get_ref().is_some_and(|i| i.is::<crate::SeekError>()) => e,
            _ => corrupt(self.codec, format!("{e}, near compressed offset {at}")),
        }
    }
}

impl Read for SeqDecoder {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.step(buf)
    }
}

/// A decoder of `codec` (a sequential one) reading `file` from its start, by positional
/// reads (so that any number share the file).
pub(crate) fn from_file(codec: Codec, file: std::sync::Arc<std::fs::File>) -> SeqDecoder {
    let input = crate::input::Input::new(file, 0, u64::MAX);
    SeqDecoder::new(codec, Src::new(Box::new(input)))
}

/// A decoder of `codec` reading `input` from its first byte, forward (the sequential
/// codecs, and gzip, zstd and xz member by member); see [`SeqDecoder`].
pub fn stream_decoder(codec: Codec, input: Box<dyn Read + Send>) -> SeqDecoder {
    SeqDecoder::new(codec, Src::new(input))
}

/// Whether `head` starts an lz4 frame or legacy frame (not a skippable frame, whose
/// magic zstd shares).
pub(crate) fn starts_lz4(head: &[u8]) -> bool {
    lz4::starts_frame(head) && !lz4::starts_skippable(head)
}

/// An error of a format decoder: `InvalidData` saying `what`.
pub(crate) fn bad(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}
