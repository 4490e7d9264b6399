//! `unpack`: an archive as a source, pushing its members into the same local-tree sink
//! `copy` uses, so metadata, holes, hardlinks, resume and errors behave the same.
//!
//! A ferry archive file is read through its index: each member's tar header is checked
//! against its index entry, then its data is moved straight from the archive file:
//! cloned where the filesystem allows (the data is block-aligned), else copied. Any
//! other tar, or an archive on a pipe, is streamed through the strict tar reader.
//!
//! Nothing is written outside the destination: member paths are made relative and
//! refused if they contain `..`, and directories are opened one component at a time
//! without following symlinks, so a symlink in the archive cannot redirect a later
//! member. Directory metadata is applied last, deepest first.

use super::archive::{Archive, ArchiveError};
use super::convert::{from_index, from_tar, runs_of};
use crate::tar::Reader;
use ferry_core::data::{Mover, Reflink, Sparse};
use ferry_core::entry::{Entry, EntryKind, Metadata, RelPath};
use ferry_core::error::{Error, Reporter};
use ferry_core::local::{DstDir, LocalTreeSink, Update};
use ferry_core::sink::{FileData, TreeSink};
use ferry_core::Stats;
use std::io::{self, BufReader, Read};
use std::os::fd::AsFd;
use std::path::Path;

/// How to unpack.
#[derive(Clone, Copy, Debug, Default)]
pub struct UnpackOptions {
    /// Clone policy for member data.
    pub reflink: Reflink,
    /// Hole policy.
    pub sparse: Sparse,
    /// Compare content, not size and mtime, to decide an existing file is up to date.
    pub checksum: bool,
    /// Re-read every written file and compare its hash with the member's.
    pub verify: bool,
}

/// Places entries given by path under the destination.
struct Extractor<'a> {
    sink: LocalTreeSink<'a>,
    root: DstDir,
    /// The parent directory of the last member, which the next one likely shares.
    cached: Option<(RelPath, DstDir)>,
    /// Directories (the root included) whose metadata is applied at the end.
    dirs: Vec<Entry>,
    reporter: &'a dyn Reporter,
}

fn parent_of(path: &RelPath) -> RelPath {
    let b = path.as_bytes();
    let cut = b.len() - path.file_name().len();
    RelPath::from_bytes(b[..cut.saturating_sub(1)].to_vec())
}

impl<'a> Extractor<'a> {
    fn new(
        dst: &Path,
        mover: &'a Mover,
        opts: &UnpackOptions,
        stats: &'a Stats,
        reporter: &'a dyn Reporter,
    ) -> Result<Self, Error> {
        let sink = LocalTreeSink::new(
            dst,
            mover,
            Update {
                checksum: opts.checksum,
                verify: opts.verify,
            },
            stats,
            reporter,
        );
        let root_entry = Entry {
            path: RelPath::root(),
            kind: EntryKind::Dir,
            meta: Metadata::default(),
        };
        let root = sink.root(&root_entry)?;
        Ok(Extractor {
            sink,
            root,
            cached: None,
            dirs: Vec::new(),
            reporter,
        })
    }

    fn parent(&mut self, path: &RelPath) -> Result<DstDir, Error> {
        let parent = parent_of(path);
        if let Some((p, d)) = &self.cached {
            if *p == parent {
                return Ok(d.clone());
            }
        }
        let dir = if parent.is_root() {
            self.root.clone()
        } else {
            self.sink.dir_at(&parent, true)?
        };
        self.cached = Some((parent, dir.clone()));
        Ok(dir)
    }

    fn put(&mut self, entry: Entry, data: Option<FileData<'_>>) -> Result<(), Error> {
        if entry.kind == EntryKind::Dir {
            if !entry.path.is_root() {
                self.sink.dir_at(&entry.path, true)?;
            }
            self.dirs.push(entry);
            return Ok(());
        }
        if entry.path.is_root() {
            return Err(Error::new(
                &entry.path,
                "unpack",
                io::Error::other("a member that is not a directory names the destination itself"),
            ));
        }
        let parent = self.parent(&entry.path)?;
        self.sink.leaf(&parent, &entry, data)
    }

    /// Applies directory metadata, deepest first, so setting one never disturbs another.
    fn finish(mut self) {
        if !self.dirs.iter().any(|e| e.path.is_root()) {
            if let Err(err) = self.sink.settle_unnamed_root() {
                self.reporter.error(&err);
            }
        }
        self.dirs.sort_by_key(|e| {
            std::cmp::Reverse(
                e.path.as_bytes().iter().filter(|&&b| b == b'/').count()
                    + usize::from(!e.path.is_root()),
            )
        });
        for e in &self.dirs {
            let dir = if e.path.is_root() {
                Ok(self.root.clone())
            } else {
                self.sink.dir_at(&e.path, false)
            };
            if let Err(err) = dir.and_then(|d| self.sink.finish_dir(&d, e)) {
                self.reporter.error(&err);
            }
        }
    }
}

fn refused(raw: &[u8], why: &'static str) -> Error {
    Error::new(
        &RelPath::from_bytes(raw.to_vec()),
        "unpack",
        io::Error::other(why),
    )
}

/// Unpacks an archive file into `dst`. Per-member failures go to `reporter` and the
/// rest goes on; an archive that cannot be read on is an error.
pub fn unpack_file(
    archive: &Archive,
    dst: &Path,
    opts: &UnpackOptions,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<(), ArchiveError> {
    let Some(index) = archive.index() else {
        let r = BufReader::with_capacity(
            1 << 20,
            super::archive::At {
                file: archive.file(),
                pos: 0,
            },
        );
        return unpack_stream(r, dst, opts, stats, reporter);
    };
    let mover = Mover::new(opts.reflink, opts.sparse);
    let mut ex = Extractor::new(dst, &mover, opts, stats, reporter)
        .map_err(|e| ArchiveError::Io(io::Error::other(e.to_string())))?;
    let fd = archive.file().as_fd();
    let mut result = Ok(());
    for e in &index.entries {
        if let Err(err) = archive.check_member(e) {
            result = Err(err);
            break;
        }
        let entry = match from_index(e) {
            Ok(entry) => entry,
            Err(why) => {
                reporter.error(&refused(&e.path, why));
                continue;
            }
        };
        let runs = runs_of((!e.runs.is_empty()).then_some(e.runs.as_slice()), e.size);
        let data = matches!(entry.kind, EntryKind::File { .. }).then_some(FileData::Range {
            fd,
            offset: e.data_offset,
            runs: &runs,
        });
        if let Err(err) = ex.put(entry, data) {
            reporter.error(&err);
        }
    }
    ex.finish();
    result
}

/// Unpacks a tar stream (any tar: ferry's, GNU tar's, bsdtar's) into `dst`.
pub fn unpack_stream(
    input: impl Read,
    dst: &Path,
    opts: &UnpackOptions,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<(), ArchiveError> {
    let mover = Mover::new(opts.reflink, opts.sparse);
    let mut ex = Extractor::new(dst, &mover, opts, stats, reporter)
        .map_err(|e| ArchiveError::Io(io::Error::other(e.to_string())))?;
    let mut reader = Reader::new(input);
    let result = loop {
        let t = match reader.next_entry() {
            Ok(Some(t)) => t,
            Ok(None) => break Ok(()),
            Err(e) => break Err(e.into()),
        };
        let entry = match from_tar(&t) {
            Ok(entry) => entry,
            Err(why) => {
                reporter.error(&refused(&t.path, why));
                continue;
            }
        };
        let runs = runs_of(t.sparse.as_deref(), t.size);
        let mut body = reader.data();
        let data = matches!(entry.kind, EntryKind::File { .. }).then_some(FileData::Stream {
            reader: &mut body,
            runs: &runs,
        });
        if let Err(err) = ex.put(entry, data) {
            reporter.error(&err);
        }
    };
    ex.finish();
    result
}
