//! Where a file's data lies on disk, from the kernel's extent map (`FS_IOC_FIEMAP`): enough
//! to tell whether a copy shares blocks with another file (a clone) or has its own.

use rustix::ioctl::{ioctl, opcode, Updater};
use std::io;
use std::os::fd::AsFd;
use std::path::Path;

/// `struct fiemap` without its extents: what the request's number is made from.
#[repr(C)]
#[derive(Default)]
struct Header {
    start: u64,
    length: u64,
    flags: u32,
    mapped_extents: u32,
    extent_count: u32,
    reserved: u32,
}

/// `struct fiemap_extent`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Extent {
    logical: u64,
    physical: u64,
    length: u64,
    reserved64: [u64; 2],
    flags: u32,
    reserved: [u32; 3],
}

/// Extents asked for at a time.
const BATCH: usize = 64;

/// A request and room for its answer, laid out as the kernel reads and writes them.
#[repr(C)]
struct Request {
    header: Header,
    extents: [Extent; BATCH],
}

/// Write dirty data back first, so delayed allocations are mapped too.
const FLAG_SYNC: u32 = 0x1;
const EXTENT_LAST: u32 = 0x1;
const EXTENT_SHARED: u32 = 0x2000;

/// Bytes of `path`'s data that lie in extents it shares with another file (cloned, or
/// cloned from). Fails where the filesystem has no extent map.
pub fn shared_bytes(path: &Path) -> io::Result<u64> {
    const FIEMAP: rustix::ioctl::Opcode = opcode::read_write::<Header>(b'f', 11);
    let file = std::fs::File::open(path)?;
    let mut shared = 0;
    let mut from = 0u64;
    loop {
        let mut req = Request {
            header: Header {
                start: from,
                length: u64::MAX - from,
                flags: FLAG_SYNC,
                extent_count: BATCH as u32,
                ..Header::default()
            },
            extents: [Extent::default(); BATCH],
        };
        // SAFETY: FS_IOC_FIEMAP reads a `struct fiemap` and writes up to
        // `extent_count` extents after it; `Request` lays out the header and room for
        // that many (`#[repr(C)]`).
        unsafe { ioctl(file.as_fd(), Updater::<FIEMAP, Request>::new(&mut req)) }?;
        let got = &req.extents[..req.header.mapped_extents as usize];
        for e in got {
            if e.flags & EXTENT_SHARED != 0 {
                shared += e.length;
            }
        }
        match got.last() {
            Some(e) if e.flags & EXTENT_LAST == 0 => from = e.logical + e.length,
            _ => return Ok(shared),
        }
    }
}
