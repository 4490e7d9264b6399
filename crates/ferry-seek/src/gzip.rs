//! gzip: one decoder that walks members, records zran-style seek points while indexing,
//! and starts again from one of them for random access.
//!
//! While indexing, each member is inflated in gzip mode (zlib checks the header, the CRC-32
//! and the length of every member) with `Z_BLOCK`, so inflate stops at every deflate block
//! boundary. At a boundary at least `span` bytes of output after the last point, a point
//! records the compressed offset, the bits of the previous byte still unused, and the
//! dictionary (inflate's last <= 32 KiB of output, kept zlib-compressed). Starting there is
//! a raw inflate primed with those bits and given that dictionary (`inflatePrime`,
//! `inflateSetDictionary`); at the end of that member the decoder skips its 8-byte trailer
//! and goes on with the next member in gzip mode. A member's start is also a point (with
//! nothing to restore) when it falls `span` after the last one.
//!
//! Inflate is zlib-rs (through its zlib C API, `libz-rs-sys`); the unsafe calls are all in
//! [`Inflater`], a small owner of one `z_stream`.

use std::ffi::{c_int, c_uint, CStr};
use std::fs::File;
use std::io;
use std::sync::Arc;

use libz_rs_sys as z;

use crate::index::{Kind, Point};
use crate::input::Input;
use crate::{corrupt, Codec};

/// A deflate dictionary: the last 32 KiB of output.
const WINDOW: usize = 32 << 10;
/// zlib's window bits for a gzip member (15 + 16) and for raw deflate (-15).
const GZIP_BITS: c_int = 31;
const RAW_BITS: c_int = -15;

/// One zlib `z_stream` set up for inflate, freed on drop.
///
/// Safety argument for every `unsafe` block below: the stream is boxed, so its address
/// (which zlib keeps in its state and checks) never changes after `inflateInit2_`; it is
/// initialised once in [`Inflater::new`] and ended once in `Drop`; `next_in`/`next_out`
/// point into slices borrowed for the duration of the one `inflate` call that uses them,
/// and are cleared after it, so zlib never keeps a pointer past its borrow.
struct Inflater {
    strm: Box<z::z_stream>,
}

// SAFETY: the z_stream's pointers either are null between calls or point to memory owned
// by zlib-rs's state (allocated with the Rust allocator); nothing is tied to a thread.
unsafe impl Send for Inflater {}

/// What one call of [`Inflater::inflate`] did.
struct Step {
    used: usize,
    made: usize,
    ret: c_int,
}

impl Inflater {
    fn new(window_bits: c_int) -> io::Result<Inflater> {
        let mut strm = Box::new(z::z_stream::default());
        // SAFETY: see the type's doc; `strm` has zalloc/zfree set by `default()`.
        let ret = unsafe {
            z::inflateInit2_(
                &mut *strm,
                window_bits,
                z::zlibVersion(),
                std::mem::size_of::<z::z_stream>() as c_int,
            )
        };
        if ret != z::Z_OK {
            return Err(io::Error::other(format!(
                "cannot start inflate (zlib error {ret})"
            )));
        }
        Ok(Inflater { strm })
    }

    /// Back to the start of a stream of the given kind, keeping the allocations.
    fn reset(&mut self, window_bits: c_int) -> io::Result<()> {
        // SAFETY: see the type's doc.
        let ret = unsafe { z::inflateReset2(&mut *self.strm, window_bits) };
        self.check(ret, "reset")
    }

    fn prime(&mut self, bits: u8, value: u8) -> io::Result<()> {
        // SAFETY: see the type's doc.
        let ret =
            unsafe { z::inflatePrime(&mut *self.strm, c_int::from(bits), c_int::from(value)) };
        self.check(ret, "prime")
    }

    fn set_dictionary(&mut self, dict: &[u8]) -> io::Result<()> {
        // SAFETY: see the type's doc; zlib copies the dictionary before returning.
        let ret = unsafe {
            z::inflateSetDictionary(&mut *self.strm, dict.as_ptr(), dict.len() as c_uint)
        };
        self.check(ret, "set dictionary")
    }

    /// Copies the current dictionary (up to 32 KiB) into `out`.
    fn dictionary(&self, out: &mut [u8; WINDOW]) -> io::Result<usize> {
        let mut len: c_uint = 0;
        // SAFETY: see the type's doc; `out` has room for 32 KiB, zlib's largest window.
        let ret = unsafe { z::inflateGetDictionary(&*self.strm, out.as_mut_ptr(), &mut len) };
        self.check(ret, "get dictionary")?;
        Ok((len as usize).min(WINDOW))
    }

    fn check(&self, ret: c_int, what: &str) -> io::Result<()> {
        if ret == z::Z_OK {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "inflate {what} failed (zlib error {ret})"
            )))
        }
    }

    /// One `inflate` call with `Z_BLOCK`.
    fn inflate(&mut self, input: &[u8], output: &mut [u8]) -> Step {
        let in_len = input.len().min(c_uint::MAX as usize);
        let out_len = output.len().min(c_uint::MAX as usize);
        let s = &mut *self.strm;
        s.next_in = input.as_ptr();
        s.avail_in = in_len as c_uint;
        s.next_out = output.as_mut_ptr();
        s.avail_out = out_len as c_uint;
        // SAFETY: see the type's doc; both buffers outlive this call.
        let ret = unsafe { z::inflate(s, z::Z_BLOCK) };
        let step = Step {
            used: in_len - s.avail_in as usize,
            made: out_len - s.avail_out as usize,
            ret,
        };
        s.next_in = std::ptr::null();
        s.avail_in = 0;
        s.next_out = std::ptr::null_mut();
        s.avail_out = 0;
        step
    }

    /// Whether the last call stopped at a deflate block boundary that is not the end of
    /// the member (zran's test: bit 7 set, bit 6, "in the last block", clear).
    fn at_block_boundary(&self) -> bool {
        self.strm.data_type & 0xc0 == 0x80
    }

    /// Bits of the last byte consumed that inflate has not used yet.
    fn pending_bits(&self) -> u8 {
        (self.strm.data_type & 7) as u8
    }

    /// zlib's message for the last error, if it set one.
    fn message(&self) -> String {
        if self.strm.msg.is_null() {
            return "invalid data".to_string();
        }
        // SAFETY: zlib sets `msg` to a static NUL-terminated string or leaves it null.
        unsafe { CStr::from_ptr(self.strm.msg) }
            .to_string_lossy()
            .into_owned()
    }
}

impl Drop for Inflater {
    fn drop(&mut self) {
        // SAFETY: see the type's doc; ended exactly once.
        unsafe { z::inflateEnd(&mut *self.strm) };
    }
}

/// Records seek points while indexing.
struct Recorder {
    span: u64,
    points: Vec<Point>,
}

impl Recorder {
    fn due(&self, out: u64) -> bool {
        self.points
            .last()
            .is_none_or(|p| out >= p.out.saturating_add(self.span))
    }
}

/// Decodes a gzip file (all its members) from a seek point onwards.
pub(crate) struct GzDecoder {
    inf: Inflater,
    input: Input,
    /// The current member is inflated raw (resumed mid-member): its trailer is ours to skip.
    raw: bool,
    /// Between members: the next thing is a member header, trailing zeros or the end.
    between: bool,
    done: bool,
    /// Where bytes that start no member follow the last one.
    trailing: Option<u64>,
    out: u64,
    stalls: u8,
    recorder: Option<Recorder>,
    window: Box<[u8; WINDOW]>,
}

impl GzDecoder {
    /// A decoder from the start of the file that records a point about every `span` bytes.
    pub fn indexing(file: Arc<File>, span: u64) -> io::Result<GzDecoder> {
        let mut d = GzDecoder::start(file, 0, 0)?;
        d.recorder = Some(Recorder {
            span,
            points: Vec::new(),
        });
        Ok(d)
    }

    /// A decoder starting at the start of a member at compressed `inp`, output offset `out`.
    fn start(file: Arc<File>, inp: u64, out: u64) -> io::Result<GzDecoder> {
        Ok(GzDecoder {
            inf: Inflater::new(GZIP_BITS)?,
            input: Input::new(file, inp, u64::MAX),
            raw: false,
            between: true,
            done: false,
            trailing: None,
            out,
            stalls: 0,
            recorder: None,
            window: Box::new([0u8; WINDOW]),
        })
    }

    /// A decoder starting at `point` (from a validated index).
    pub fn resume(file: Arc<File>, point: &Point) -> io::Result<GzDecoder> {
        match &point.kind {
            Kind::Start => GzDecoder::start(file, point.inp, point.out),
            Kind::Deflate {
                bits,
                prime,
                window,
            } => {
                let mut d = GzDecoder::start(file, point.inp, point.out)?;
                d.inf.reset(RAW_BITS)?;
                if *bits > 0 {
                    d.inf.prime(*bits, prime >> (8 - bits))?;
                }
                let dict = unpack_window(window)?;
                d.inf.set_dictionary(&dict)?;
                d.raw = true;
                d.between = false;
                Ok(d)
            }
            Kind::XzBlock { .. } => Err(corrupt(Codec::Gzip, "an xz seek point in a gzip index")),
        }
    }

    /// The points recorded (indexing only) and the compressed size read.
    pub fn into_points(self) -> (Vec<Point>, u64) {
        let consumed = self.input.offset();
        (
            self.recorder.map(|r| r.points).unwrap_or_default(),
            consumed,
        )
    }

    /// Where trailing garbage (bytes that start no member, not all zeros) follows the
    /// last member, once the end is reached.
    pub fn trailing_garbage(&self) -> Option<u64> {
        self.trailing
    }

    /// At a member boundary: start the next member, or finish at the end (or at trailing
    /// zeros, or at trailing garbage, told by [`GzDecoder::trailing_garbage`]); bytes
    /// that are not gzip at the start are an error.
    fn next_member(&mut self) -> io::Result<()> {
        let at = self.input.offset();
        let head = self.input.peek(3)?;
        if head.is_empty() {
            if at == 0 {
                return Err(corrupt(Codec::Gzip, "empty file"));
            }
            self.done = true;
            return Ok(());
        }
        if head.starts_with(&[0x1f, 0x8b]) {
            self.inf.reset(GZIP_BITS)?;
            self.raw = false;
            let out = self.out;
            if let Some(r) = self.recorder.as_mut().filter(|r| r.due(out)) {
                r.points.push(Point {
                    out,
                    inp: at,
                    kind: Kind::Start,
                });
            }
            self.between = false;
            return Ok(());
        }
        if head[0] == 0 && self.input.rest_is_zeros()? && at > 0 {
            self.done = true;
            return Ok(());
        }
        if at == 0 {
            return Err(corrupt(
                Codec::Gzip,
                "not a gzip file (no gzip header at offset 0)",
            ));
        }
        self.trailing = Some(at);
        self.done = true;
        Ok(())
    }

    fn record_block_point(&mut self) -> io::Result<()> {
        let out = self.out;
        if !self.recorder.as_ref().is_some_and(|r| r.due(out)) {
            return Ok(());
        }
        let bits = self.inf.pending_bits();
        let inp = self.input.offset();
        let len = self.inf.dictionary(&mut self.window)?;
        let window = pack_window(&self.window[..len])?;
        // The byte before `inp`, whose high `bits` bits inflate has not used yet.
        let prime = if bits > 0 { self.byte_before(inp)? } else { 0 };
        if let Some(r) = self.recorder.as_mut() {
            r.points.push(Point {
                out,
                inp,
                kind: Kind::Deflate {
                    bits,
                    prime,
                    window,
                },
            });
        }
        Ok(())
    }

    fn byte_before(&self, inp: u64) -> io::Result<u8> {
        use std::os::unix::fs::FileExt;
        let mut b = [0u8; 1];
        self.input.file().read_exact_at(&mut b, inp - 1)?;
        Ok(b[0])
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
            if self.between {
                self.next_member()?;
                continue;
            }
            if !self.input.fill()? {
                return Err(corrupt(
                    Codec::Gzip,
                    format!(
                        "the file ends inside a gzip member, at compressed offset {} \
                         (truncated?)",
                        self.input.offset()
                    ),
                ));
            }
            let step = self.inf.inflate(self.input.avail(), buf);
            self.input.consume(step.used);
            self.out += step.made as u64;
            match step.ret {
                z::Z_OK | z::Z_BUF_ERROR => {
                    if self.recorder.is_some() && self.inf.at_block_boundary() {
                        self.record_block_point()?;
                    }
                }
                z::Z_STREAM_END => {
                    if self.raw && !self.input.skip(8)? {
                        return Err(corrupt(
                            Codec::Gzip,
                            "the file ends inside a gzip member's trailer (truncated?)",
                        ));
                    }
                    self.between = true;
                }
                _ => {
                    return Err(corrupt(
                        Codec::Gzip,
                        format!(
                            "{} near compressed offset {}",
                            self.inf.message(),
                            self.input.offset()
                        ),
                    ))
                }
            }
            if step.made > 0 {
                self.stalls = 0;
                return Ok(step.made);
            }
            if step.used == 0 && step.ret != z::Z_STREAM_END {
                self.stalls += 1;
                if self.stalls > 2 {
                    return Err(corrupt(
                        Codec::Gzip,
                        format!(
                            "inflate stalled at compressed offset {}",
                            self.input.offset()
                        ),
                    ));
                }
            } else {
                self.stalls = 0;
            }
        }
    }
}

/// zlib-compresses a dictionary for keeping.
fn pack_window(window: &[u8]) -> io::Result<Vec<u8>> {
    let mut out = vec![0u8; crate::index::MAX_PACKED_WINDOW];
    let (packed, ret) =
        zlib_rs::deflate::compress_slice(&mut out, window, zlib_rs::deflate::DeflateConfig::new(6));
    if ret != zlib_rs::ReturnCode::Ok {
        return Err(io::Error::other(format!(
            "cannot compress a seek point's window ({ret:?})"
        )));
    }
    let n = packed.len();
    out.truncate(n);
    Ok(out)
}

/// The dictionary of a point, checked (the index may be hostile).
fn unpack_window(packed: &[u8]) -> io::Result<Vec<u8>> {
    let mut out = vec![0u8; WINDOW];
    let (window, ret) = zlib_rs::inflate::decompress_slice(
        &mut out,
        packed,
        zlib_rs::inflate::InflateConfig::default(),
    );
    if ret != zlib_rs::ReturnCode::Ok {
        return Err(crate::SeekError::BadIndex(format!(
            "a gzip seek point's window does not decompress ({ret:?})"
        ))
        .into());
    }
    let n = window.len();
    out.truncate(n);
    Ok(out)
}
