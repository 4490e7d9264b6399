//! Files whose size does not say what they hold: the pseudo-files of `/proc` (size 0),
//! `/sys` (size 4096, whatever they give) and the like. `cp` reads every file to its
//! end, whatever its size says; ferry trusts the size (it lays out archives and moves
//! data by it), so such a file is read to its end first, into a snapshot in memory, and
//! that is what is copied or packed, with the size it really has.
//!
//! Told apart by having no blocks (`st_blocks` 0) and a size of at most one page: an
//! empty file or a small sparse one on a disk looks the same, and costs one read more,
//! after which it is copied as before, since it gives exactly its size.

use crate::data::PositionedReader;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};

/// The largest size a pseudo-file reports: a page.
const PAGE: u64 = 4096;

/// What a pseudo-file may give at most: more is an error, not a copy (nothing in
/// `/proc` or `/sys` that is read as a file comes near it).
pub const MAX_SNAPSHOT: u64 = 256 << 20;

/// For the open file `fd` whose status is `st`: when it has no blocks, a size of at
/// most a page, and gives a different number of bytes when read to its end, those
/// bytes in an unnamed file in memory (a `memfd`, which any sink reads as a local
/// file) and their number. `None` for every other file: its size is what it holds.
pub fn snapshot(fd: &OwnedFd, st: &rustix::fs::Stat) -> io::Result<Option<(OwnedFd, u64)>> {
    let size = st.st_size as u64;
    if st.st_blocks != 0 || size > PAGE {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    PositionedReader {
        fd: fd.as_fd(),
        pos: 0,
    }
    .take(MAX_SNAPSHOT + 1)
    .read_to_end(&mut bytes)?;
    let len = bytes.len() as u64;
    if len == size {
        return Ok(None);
    }
    if len > MAX_SNAPSHOT {
        return Err(io::Error::other(format!(
            "gives more than {} MiB though its size says {size} bytes: not read to its end",
            MAX_SNAPSHOT >> 20
        )));
    }
    let memfd = rustix::fs::memfd_create("ferry-snapshot", rustix::fs::MemfdFlags::CLOEXEC)?;
    std::fs::File::from(memfd.try_clone()?).write_all(&bytes)?;
    Ok(Some((memfd, len)))
}
