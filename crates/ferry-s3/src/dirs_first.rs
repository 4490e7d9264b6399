//! Every directory a manifest names made before its directory shards are unpacked,
//! when it has several.
//!
//! Each directory shard sets the metadata of its directories when it ends (deepest
//! first, so setting one never disturbs another). With several, a later one that had
//! to make a directory (an empty one, or one holding only directories: no shard of
//! files makes those) would change its parent's mtime, or open up a read-only parent,
//! after an earlier shard had set the parent's metadata. So before the first directory
//! shard, every directory not there yet is made, as `unpack` makes a member, from a
//! tar of directory headers generated as it is read (no metadata set: the directory
//! shards set it); the directory shards then make nothing.

use ferry_archive::read::select::Selection;
use ferry_archive::read::stream::unpack_stream_pooled;
use ferry_archive::read::unpack::UnpackOptions;
use ferry_archive::write::header::HeaderEncoder;
use ferry_core::entry::{Entry, EntryKind, Metadata, RelPath};
use ferry_core::error::Reporter;
use ferry_core::pool::Share;
use ferry_core::Stats;
use std::io::{self, Read};
use std::path::Path;

/// The directories `paths` (in path order, parents first) as a tar stream of their
/// headers, made as it is read.
struct DirHeaders<'a> {
    paths: std::slice::Iter<'a, &'a [u8]>,
    encoder: HeaderEncoder,
    /// Bytes made and not yet read, from `at` on.
    pending: Vec<u8>,
    at: usize,
    /// Offset in the stream of the next header.
    offset: u64,
    ended: bool,
}

impl Read for DirHeaders<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.at == self.pending.len() {
            self.pending.clear();
            self.at = 0;
            match self.paths.next() {
                Some(path) => {
                    let entry = Entry {
                        path: RelPath::from_bytes(path.to_vec()),
                        kind: EntryKind::Dir,
                        meta: Metadata {
                            mode: 0o700,
                            ..Metadata::default()
                        },
                        links: None,
                    };
                    let (bytes, _) = self.encoder.encode(&entry, None, self.offset);
                    self.pending.extend_from_slice(bytes);
                    self.offset += bytes.len() as u64;
                }
                None if !self.ended => {
                    self.ended = true;
                    self.pending.extend_from_slice(&[0; 1024]);
                }
                None => return Ok(0),
            }
        }
        let n = out.len().min(self.pending.len() - self.at);
        out[..n].copy_from_slice(&self.pending[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Makes below `dst` each of `dirs` (the root aside) not there yet, as `unpack`
/// would (`opts`, without directory metadata); what fails is reported.
pub fn make_dirs(
    dst: &Path,
    dirs: &std::collections::HashSet<Vec<u8>>,
    opts: &UnpackOptions,
    reporter: &dyn Reporter,
) -> ferry_core::error::Result<()> {
    let mut paths: Vec<&[u8]> = dirs
        .iter()
        .map(Vec::as_slice)
        .filter(|p| !p.is_empty())
        .collect();
    paths.sort_unstable();
    let mut headers = DirHeaders {
        paths: paths.iter(),
        encoder: HeaderEncoder::unaligned(),
        pending: Vec::new(),
        at: 0,
        offset: 0,
        ended: false,
    };
    let unpack = UnpackOptions {
        dir_metadata: false,
        keep_old: false,
        keep_partial: false,
        ..*opts
    };
    let pool = Share::private(4, 1 << 20);
    let scratch = Stats::default();
    let all = Selection::all();
    unpack_stream_pooled(&mut headers, dst, &unpack, &all, &pool, &scratch, reporter)
        .map(|_| ())
        .map_err(|e| {
            ferry_core::error::Error::dst(
                &RelPath::root(),
                "make directories",
                io::Error::other(e.to_string()),
            )
        })
}
