//! What a stream reader notes of each member it placed, for the index that follows a
//! ferry archive in the stream ([`super::tail`]): where the member's headers start, the
//! content hash of its data as it went by, the seconds of its mtime where its headers
//! gave no more (the index then gives the nanoseconds and the atime), and the path it
//! was placed at (which `--strip-components` and `--transform` make other than the
//! stored one).
//!
//! Records are kept encoded, one after another, in a buffer that moves to an unnamed
//! temporary file past a few MiB, so memory does not grow with the member count.

use ferry_core::entry::RelPath;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};

/// Bytes of records held in memory before they move to a temporary file.
const HELD_BYTES: usize = 4 << 20;

/// A member a stream reader placed (see the module's doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    /// Stream offset of its first header: what the index names it by.
    pub header_offset: u64,
    /// The content hash of its data, where all of it was read.
    pub hash: Option<u128>,
    /// Its mtime's seconds, where its headers gave its times to the second alone (no
    /// pax header of its own, no atime): the index may give them exactly.
    pub header_secs: Option<i64>,
    /// Where it was placed, below the destination.
    pub path: RelPath,
}

const HAS_HASH: u8 = 1;
const HAS_SECS: u8 = 2;

/// Appends a record of these fields to `out`.
fn encode(
    header_offset: u64,
    hash: Option<u128>,
    header_secs: Option<i64>,
    path: &[u8],
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(&header_offset.to_le_bytes());
    let flags = u8::from(hash.is_some()) * HAS_HASH + u8::from(header_secs.is_some()) * HAS_SECS;
    out.push(flags);
    if let Some(hash) = hash {
        out.extend_from_slice(&hash.to_le_bytes());
    }
    if let Some(secs) = header_secs {
        out.extend_from_slice(&secs.to_le_bytes());
    }
    // A path longer than 4 GiB cannot come out of a tar header this reader takes.
    out.extend_from_slice(&(path.len() as u32).to_le_bytes());
    out.extend_from_slice(path);
}

impl Placed {
    /// The next record in `r`, None at its end.
    fn decode(r: &mut dyn Read) -> io::Result<Option<Placed>> {
        let mut word = [0u8; 8];
        match r.read_exact(&mut word) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        let header_offset = u64::from_le_bytes(word);
        let mut flags = [0u8; 1];
        r.read_exact(&mut flags)?;
        let hash = match flags[0] & HAS_HASH {
            0 => None,
            _ => {
                let mut h = [0u8; 16];
                r.read_exact(&mut h)?;
                Some(u128::from_le_bytes(h))
            }
        };
        let header_secs = match flags[0] & HAS_SECS {
            0 => None,
            _ => {
                r.read_exact(&mut word)?;
                Some(i64::from_le_bytes(word))
            }
        };
        let mut len = [0u8; 4];
        r.read_exact(&mut len)?;
        let mut path = vec![0u8; u32::from_le_bytes(len) as usize];
        r.read_exact(&mut path)?;
        Ok(Some(Placed {
            header_offset,
            hash,
            header_secs,
            path: RelPath::from_bytes(path),
        }))
    }
}

/// The members a stream carried and a reader placed (or printed), in archive order
/// (see the module's doc).
#[derive(Default)]
pub struct StreamHashes {
    held: Vec<u8>,
    spill: Option<BufWriter<File>>,
    /// The first failure to write the spill file: the records are then incomplete, and
    /// nothing is checked.
    failed: Option<io::Error>,
    /// The offset just past the end-of-archive blocks.
    pub(crate) tar_end: u64,
    /// Header offsets of members noted but not placed from the stream's bytes (see
    /// [`StreamHashes::leave_out`]), in order.
    left_out: Vec<u64>,
    /// For each path more than one member was placed at, the header offset of the last:
    /// the notes of the others stand for nothing there any more.
    pub(crate) last_of_repeated: HashMap<RelPath, u64>,
    /// Paths hardlink members of the stream linked to, with how many: names of theirs
    /// this run made.
    pub(crate) linked_to: HashMap<RelPath, u64>,
}

impl StreamHashes {
    /// Notes the hash of the data of the member whose headers start at
    /// `header_offset` (a member printed, not placed), named `name`; members come in
    /// archive order.
    pub fn push(&mut self, header_offset: u64, hash: u128, name: &[u8]) {
        self.note(header_offset, Some(hash), None, name);
    }

    /// Notes tar member `t`, placed at `path`, its data hashed as `hash` (a file whose
    /// data was read whole); members come in archive order. Nothing is noted of a
    /// member with neither a hash nor times the index may make finer.
    pub(crate) fn note_placed(
        &mut self,
        t: &crate::tar::TarEntry,
        hash: Option<u128>,
        path: &RelPath,
    ) {
        let header_secs = t.seconds_only().then_some(t.mtime.0);
        if hash.is_some() || header_secs.is_some() {
            self.note(t.header_offset, hash, header_secs, path.as_bytes());
        }
    }

    /// Notes a member placed at `path`; members come in archive order.
    fn note(
        &mut self,
        header_offset: u64,
        hash: Option<u128>,
        header_secs: Option<i64>,
        path: &[u8],
    ) {
        if self.failed.is_some() {
            return;
        }
        encode(header_offset, hash, header_secs, path, &mut self.held);
        if self.held.len() >= HELD_BYTES {
            if let Err(e) = self.spill_held() {
                self.failed = Some(e);
            }
        }
    }

    /// Leaves the members whose headers start at `header_offsets` (in any order) out of
    /// the check: they were noted as read, but not placed from those bytes (a file
    /// found up to date, or one that failed).
    pub fn leave_out(&mut self, mut header_offsets: Vec<u64>) {
        header_offsets.sort_unstable();
        self.left_out = header_offsets;
    }

    /// Notes that the member whose headers start at `header_offset` is placed at
    /// `path`, where an earlier member was placed (or a directory an earlier member
    /// needed): whatever was noted there before is superseded.
    pub(crate) fn placed_again(&mut self, path: &RelPath, header_offset: u64) {
        self.last_of_repeated.insert(path.clone(), header_offset);
    }

    /// Notes that a hardlink member links to `target` (where it was placed).
    pub(crate) fn linked(&mut self, target: &RelPath) {
        *self.linked_to.entry(target.clone()).or_default() += 1;
    }

    /// Sets where the tar data ended: the index of a ferry archive starts there.
    pub fn set_tar_end(&mut self, tar_end: u64) {
        self.tar_end = tar_end;
    }

    fn spill_held(&mut self) -> io::Result<()> {
        let out = match &mut self.spill {
            Some(out) => out,
            none => none.insert(BufWriter::new(tempfile::tempfile()?)),
        };
        out.write_all(&self.held)?;
        self.held.clear();
        Ok(())
    }

    /// All records, in the order they came.
    pub(crate) fn into_records(mut self) -> io::Result<Records> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let spilled = match self.spill.take() {
            Some(out) => {
                let mut file = out.into_inner().map_err(|e| e.into_error())?;
                file.seek(SeekFrom::Start(0))?;
                Some(BufReader::new(file))
            }
            None => None,
        };
        Ok(Records {
            spilled,
            held: io::Cursor::new(self.held),
            left_out: self.left_out,
        })
    }
}

/// The records of [`StreamHashes`], read back in order.
pub(crate) struct Records {
    spilled: Option<BufReader<File>>,
    held: io::Cursor<Vec<u8>>,
    left_out: Vec<u64>,
}

impl Records {
    /// The next record of a member not left out.
    pub(crate) fn next(&mut self) -> io::Result<Option<Placed>> {
        loop {
            let next = self.next_any()?;
            match next {
                Some(p) if self.left_out.binary_search(&p.header_offset).is_ok() => {}
                other => return Ok(other),
            }
        }
    }

    fn next_any(&mut self) -> io::Result<Option<Placed>> {
        if let Some(file) = &mut self.spilled {
            match Placed::decode(file)? {
                Some(p) => return Ok(Some(p)),
                None => self.spilled = None,
            }
        }
        Placed::decode(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(i: u64) -> Placed {
        Placed {
            header_offset: i * 512,
            hash: (i % 3 != 0).then_some(u128::from(i) << 64 | 7),
            header_secs: (i % 2 == 0).then_some(-(i as i64)),
            path: RelPath::from_bytes(format!("d/{i}").into_bytes()),
        }
    }

    /// Records come back whole and in order, from the spill file and then from memory,
    /// without those left out.
    #[test]
    fn spilled_records_read_back_in_order() {
        let mut hashes = StreamHashes::default();
        let n = 400_000;
        for i in 0..n {
            let p = placed(i);
            hashes.note(p.header_offset, p.hash, p.header_secs, p.path.as_bytes());
        }
        assert!(
            hashes.spill.is_some(),
            "past the limit the records move out"
        );
        hashes.leave_out(vec![5 * 512, 1024]);
        let mut records = hashes.into_records().expect("records");
        for i in (0..n).filter(|&i| i != 2 && i != 5) {
            assert_eq!(records.next().expect("read"), Some(placed(i)));
        }
        assert_eq!(records.next().expect("read"), None);
    }
}
