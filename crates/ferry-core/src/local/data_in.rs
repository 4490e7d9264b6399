//! A file's data into the destination: written by the mover's ladder (clone >
//! `copy_file_range` > buffered), checked against the source's hash where asked, and
//! whether an existing file already holds it.

use super::{other, DstDir, LocalTreeSink, DAMAGED};
use crate::data;
use crate::entry::{Entry, EntryKind, RelPath, Timestamp};
use crate::error::{Context, Error, Result};
use crate::meta;
use crate::sink::FileData;
use rustix::fs::{self as rfs, AtFlags, Mode, OFlags, Stat, StatxFlags};
use rustix::io::Errno;
use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};

impl LocalTreeSink<'_> {
    pub(super) fn write_data(
        &self,
        fd: &OwnedFd,
        path: &RelPath,
        size: u64,
        data: FileData<'_>,
    ) -> Result<()> {
        // Data with a hash recorded at the source (an archive member) is hashed as it
        // is moved and checked against it, always; with --verify, the destination is
        // read back and checked against the recorded hash, or else against the data
        // as read now.
        let recorded = data.recorded_hash();
        let verify = self.update.verify || recorded.is_some();
        let dst = fd.as_fd();
        // A source that changed while it was read is not copied: what was read may be
        // a version that never existed, under the old mtime (removed by the caller).
        let mut unchanged = Ok(());
        let moved = match data {
            FileData::File {
                fd: src,
                maybe_sparse,
                stamp,
            } => {
                let moved = self
                    .mover
                    .copy_file(src.as_fd(), size, maybe_sparse, dst, verify);
                if let (Ok(_), Some(stamp)) = (&moved, stamp) {
                    unchanged = stamp.check(src.as_fd(), path);
                }
                moved
            }
            FileData::Range {
                fd: src,
                offset,
                runs,
                ..
            } => self
                .mover
                .transfer(src, dst, &data::run_segments(offset, runs), size, verify),
            FileData::Bytes { bytes, runs, .. } => {
                self.mover.transfer_bytes(bytes, dst, runs, size, verify)
            }
            FileData::Stream { reader, runs } => self
                .mover
                .transfer_stream(reader, dst, 0, runs, size, verify),
            FileData::Buffered { reader, runs } => self
                .mover
                .transfer_buffered(reader, dst, runs, size, verify),
        }
        .at_dst(path, "copy data")?;
        unchanged?;
        // Holes at the end (or a file that is all holes) need the length set.
        if moved.written_end.unwrap_or(0) < size {
            rfs::ftruncate(dst, size).at_dst(path, "set length")?;
        }
        if self.mover.sparse == data::Sparse::Never && size > 0 {
            self.mover
                .fill_holes(dst, size)
                .at_dst(path, "fill holes")?;
        }
        self.stats.count_method(moved.method);
        if let (Some(want), Some(got)) = (recorded, moved.hash) {
            if got != want {
                return Err(Error::dst(path, "verify", other(DAMAGED)));
            }
        }
        if !self.update.verify {
            return Ok(());
        }
        let (want, differs) = match (recorded, moved.hash) {
            (Some(want), _) => (want, "content differs from the hash recorded in the source"),
            (None, Some(want)) => (want, "destination content differs from source"),
            (None, None) => return Ok(()),
        };
        let got = data::hash_range(fd, 0, size).at_dst(path, "verify")?;
        if got != want {
            return Err(Error::dst(path, "verify", other(differs)));
        }
        Ok(())
    }

    /// Whether the existing file (status `st`) was made by this job: an archive may hold
    /// a name twice, the same size and mtime but other data, and the later member wins.
    /// Its ctime says so first; since metadata set on another name of its inode (a
    /// hardlink twin) moves the ctime too, its birth time confirms it where the
    /// filesystem keeps one.
    fn written_by_this_job(&self, dir: &DstDir, name: &CStr, st: &Stat) -> bool {
        let changed = Timestamp {
            sec: st.st_ctime,
            nsec: st.st_ctime_nsec as u32,
        };
        if changed < self.started {
            return false;
        }
        let flags = AtFlags::SYMLINK_NOFOLLOW;
        match rfs::statx(&*dir.fd, name, flags, StatxFlags::BTIME) {
            Ok(x) if x.stx_mask & StatxFlags::BTIME.bits() != 0 => {
                let born = Timestamp {
                    sec: x.stx_btime.tv_sec,
                    nsec: x.stx_btime.tv_nsec,
                };
                born >= self.started
            }
            _ => true,
        }
    }

    /// True when the existing destination file already holds the source's content.
    pub(super) fn up_to_date(
        &self,
        dir: &DstDir,
        name: &CStr,
        st: &Stat,
        entry: &Entry,
        data: &FileData<'_>,
    ) -> Result<bool> {
        let EntryKind::File { size, .. } = entry.kind else {
            return Ok(false);
        };
        if st.st_size as u64 != size || self.written_by_this_job(dir, name, st) {
            return Ok(false);
        }
        if !self.update.checksum {
            return Ok(meta::mtime_of(st) == entry.meta.mtime);
        }
        let ours = match data {
            FileData::File { fd, .. } => data::hash_range(fd, 0, size),
            FileData::Range {
                fd, offset, runs, ..
            } => data::hash_runs(*fd, *offset, runs, size),
            FileData::Bytes { bytes, runs, .. } => data::hash_bytes(bytes, runs, size)
                .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof)),
            // A stream cannot be read twice: copy it.
            FileData::Stream { .. } | FileData::Buffered { .. } => return Ok(false),
        }
        .at(&entry.path, "read")?;
        // Reading must not change the atime the copy is meant to keep.
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = match rfs::openat(&*dir.fd, name, flags | OFlags::NOATIME, Mode::empty()) {
            Err(Errno::PERM) => rfs::openat(&*dir.fd, name, flags, Mode::empty()),
            other => other,
        }
        .at_dst(&entry.path, "open destination")?;
        let theirs = data::hash_range(&fd, 0, size).at_dst(&entry.path, "read destination")?;
        Ok(theirs == ours)
    }
}
