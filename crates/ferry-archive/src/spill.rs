//! Bytes written in order that must not all stay in memory: a [`Spill`] keeps its
//! newest part in memory and moves the rest, once past a limit, to an unnamed
//! temporary file (in `TMPDIR`). Any byte can still be overwritten (an index entry's
//! hash arrives after the entry), and the whole can be read back in order at the end.

use crate::read::archive::At;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;

/// See the module's doc.
pub struct Spill {
    /// The newest bytes: from offset `spilled` on.
    held: Vec<u8>,
    /// How many of the first bytes are in `file`.
    spilled: u64,
    file: Option<File>,
    /// Once `held` is this long, all but its last eighth moves to `file`.
    limit: usize,
    /// What the bytes are, for messages.
    what: &'static str,
}

/// How much is read back from the file at a time.
const CHUNK: usize = 1 << 20;

impl Spill {
    /// An empty store that holds at most about `limit` bytes in memory; `what` names
    /// its contents in errors ("the index").
    pub fn new(limit: usize, what: &'static str) -> Spill {
        Spill {
            held: Vec::new(),
            spilled: 0,
            file: None,
            limit: limit.max(1),
            what,
        }
    }

    /// How many bytes there are.
    pub fn len(&self) -> u64 {
        self.spilled + self.held.len() as u64
    }

    /// True when nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether some of it went to the temporary file.
    pub fn has_spilled(&self) -> bool {
        self.file.is_some()
    }

    /// Appends `bytes`; fails only when they could not be moved to the file.
    pub fn push(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.held.extend_from_slice(bytes);
        self.spill_if_full()
    }

    /// Appends what `encode` writes into the held bytes (no copy).
    pub fn push_with(&mut self, encode: impl FnOnce(&mut Vec<u8>)) -> io::Result<()> {
        encode(&mut self.held);
        self.spill_if_full()
    }

    fn spill_if_full(&mut self) -> io::Result<()> {
        if self.held.len() < self.limit {
            return Ok(());
        }
        let n = self.held.len() - self.limit / 8;
        let what = self.what;
        let file = match &mut self.file {
            Some(file) => file,
            empty => empty.insert(tempfile::tempfile().map_err(|e| error(what, "make", e))?),
        };
        file.write_all_at(&self.held[..n], self.spilled)
            .map_err(|e| error(what, "write", e))?;
        self.held.drain(..n);
        self.spilled += n as u64;
        Ok(())
    }

    /// Overwrites the bytes from `at` on with `bytes`, in the file or in memory.
    pub fn patch(&mut self, at: u64, bytes: &[u8]) -> io::Result<()> {
        let in_file = self.spilled.saturating_sub(at).min(bytes.len() as u64) as usize;
        if let (Some(file), true) = (&self.file, in_file > 0) {
            file.write_all_at(&bytes[..in_file], at)
                .map_err(|e| error(self.what, "write", e))?;
        }
        let rest = &bytes[in_file..];
        if !rest.is_empty() {
            let from = (at + in_file as u64 - self.spilled) as usize;
            self.held[from..from + rest.len()].copy_from_slice(rest);
        }
        Ok(())
    }

    /// Passes every byte, in order, to `out`, a chunk at a time.
    pub fn copy_to(&self, mut out: impl FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        if let Some(file) = &self.file {
            let mut buf = vec![0u8; CHUNK.min(self.spilled as usize)];
            let mut pos = 0;
            while pos < self.spilled {
                let n = buf.len().min((self.spilled - pos) as usize);
                file.read_exact_at(&mut buf[..n], pos)
                    .map_err(|e| error(self.what, "read", e))?;
                out(&buf[..n])?;
                pos += n as u64;
            }
        }
        out(&self.held)
    }

    /// Every byte, in order, as a reader.
    pub fn reader(&self) -> impl Read + '_ {
        let spilled: Box<dyn Read + '_> = match &self.file {
            Some(file) => Box::new(At { file, pos: 0 }.take(self.spilled)),
            None => Box::new(io::empty()),
        };
        io::BufReader::with_capacity(CHUNK, spilled.chain(&self.held[..]))
    }
}

fn error(what: &str, op: &str, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("{op} {what}'s temporary file (in the temp dir, TMPDIR): {e}"),
    )
}
