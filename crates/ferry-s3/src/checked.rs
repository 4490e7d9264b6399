//! A shard's bytes checked against the manifest on their way to the unpacker: every
//! member the shard's tar holds must be one the manifest names for that shard at that
//! offset, with the same stored name, kind and mode (and size, for a file); the
//! directories above a shard's members, which every shard holds, must be directories
//! the manifest names. A member's headers are parsed here (by the strict tar reader)
//! and held back until they pass, so the unpacker never sees a member that does not.
//!
//! On the first member that does not pass, nothing more goes to the unpacker: the rest
//! of the shard is read for its headers alone, each other member that does not pass is
//! reported (one error line a path), as is each member the manifest names that the
//! shard lacks, and the stream then fails, which ends the shard's unpacking (the
//! download goes on with the next shard; the errors make its exit status 1). A shard whose members
//! all pass but that lacks some the manifest names is unpacked; each missing member is
//! reported.

use crate::manifest::{Member, Shard};
use ferry_archive::tar::{Reader, TarEntry, TarKind};
use ferry_core::entry::RelPath;
use ferry_core::error::{Error, Reporter};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::io::{self, Read};
use std::rc::Rc;

/// Stored data read at once to pass on.
const PIECE: usize = 256 << 10;

/// What the tar reader has pulled from the shard and not yet handed on.
#[derive(Default)]
struct Held {
    bytes: Vec<u8>,
    /// Whether pulled bytes are kept (not once the stream has failed: the rest of the
    /// shard is only looked at).
    keep: bool,
}

/// The shard's bytes as the tar reader pulls them, kept in [`Held`].
struct Tee<R> {
    inner: R,
    held: Rc<RefCell<Held>>,
}

impl<R: Read> Read for Tee<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let mut held = self.held.borrow_mut();
        if held.keep {
            held.bytes.extend_from_slice(&buf[..n]);
        }
        Ok(n)
    }
}

/// Where the stream stands.
enum State {
    /// Between members: the next headers are to be read and checked.
    Headers,
    /// Inside a member that passed: its stored data goes on.
    Data,
    /// Past the end of the tar: the rest (the shard's index) goes on as it is.
    Tail,
    /// A member did not pass: the stream fails with this.
    Failed(String),
}

/// The members of one shard, and the directories of the whole manifest.
pub struct Expected<'m> {
    by_offset: HashMap<u64, usize>,
    /// By the path the shard stores them under (the first of a path), to say what is
    /// wrong with a member found at another offset.
    by_path: HashMap<Vec<u8>, usize>,
    members: &'m [Member],
    dirs: &'m HashSet<Vec<u8>>,
}

impl<'m> Expected<'m> {
    /// What `shard` must hold; `dirs`: every directory the manifest names.
    pub fn new(shard: &'m Shard, dirs: &'m HashSet<Vec<u8>>) -> Expected<'m> {
        let by_offset = shard
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| (m.o, i))
            .collect();
        let mut by_path = HashMap::new();
        for (i, m) in shard.members.iter().enumerate() {
            by_path.entry(m.stored_path()).or_insert(i);
        }
        Expected {
            by_offset,
            by_path,
            members: &shard.members,
            dirs,
        }
    }
}

/// The manifest's number for a member's kind (as in its index).
fn kind_number(k: TarKind) -> u8 {
    match k {
        TarKind::File => 0,
        TarKind::Dir => 1,
        TarKind::Symlink => 2,
        TarKind::HardLink => 3,
        TarKind::Fifo => 4,
        TarKind::CharDevice => 5,
        TarKind::BlockDevice => 6,
    }
}

fn kind_name(k: u8) -> &'static str {
    match k {
        0 => "a file",
        1 => "a directory",
        2 => "a symlink",
        3 => "a hardlink",
        4 => "a fifo",
        5 => "a character device",
        _ => "a block device",
    }
}

/// A shard's stream (`R`), checked against what the manifest says it holds.
pub struct Checked<'a, R: Read> {
    reader: Option<Reader<Tee<R>>>,
    rest: Option<R>,
    held: Rc<RefCell<Held>>,
    /// Of `held`, the bytes that passed, and those of them already handed on.
    ready: usize,
    sent: usize,
    state: State,
    piece: Vec<u8>,
    expected: Expected<'a>,
    seen: Vec<bool>,
    shown: String,
    reporter: &'a dyn Reporter,
}

impl<'a, R: Read> Checked<'a, R> {
    /// `inner`, the bytes of the shard `shown` (its URL, for messages), checked against
    /// `expected`; each member that fails is reported to `reporter`.
    pub fn new(
        inner: R,
        expected: Expected<'a>,
        shown: String,
        reporter: &'a dyn Reporter,
    ) -> Checked<'a, R> {
        let held = Rc::new(RefCell::new(Held {
            bytes: Vec::new(),
            keep: true,
        }));
        let tee = Tee {
            inner,
            held: held.clone(),
        };
        Checked {
            reader: Some(Reader::new(tee)),
            rest: None,
            held,
            ready: 0,
            sent: 0,
            state: State::Headers,
            piece: Vec::new(),
            seen: vec![false; expected.members.len()],
            expected,
            shown,
            reporter,
        }
    }

    /// Whether a member did not pass (each such member is reported): the stream then
    /// failed, and the shard was not unpacked from there on.
    pub fn refused(&self) -> bool {
        matches!(self.state, State::Failed(_))
    }

    /// Why member `e` may not be unpacked, if it may not.
    fn refusal(&mut self, e: &TarEntry) -> Option<String> {
        let path = crate::manifest::member_path(&e.path);
        let kind = kind_number(e.kind);
        if path.is_empty() && kind != 1 {
            return Some("the tree's root, not as a directory".to_string());
        }
        let at = self.expected.by_offset.get(&e.header_offset);
        let by_path = || match path.is_empty() {
            true => None,
            false => self.expected.by_path.get(path),
        };
        let Some(&i) = at.or_else(by_path) else {
            // The root, and the directories above a shard's members, which every
            // shard holds.
            if kind == 1 && (path.is_empty() || self.expected.dirs.contains(path)) {
                return None;
            }
            return Some(format!(
                "{} in the shard that the manifest does not name for it",
                kind_name(kind)
            ));
        };
        let m = &self.expected.members[i];
        let why = if self.seen[i] {
            "in the shard twice".to_string()
        } else if path != m.stored_path() {
            format!(
                "at byte {}, where the manifest places {}",
                e.header_offset,
                String::from_utf8_lossy(&m.stored_path()).escape_debug()
            )
        } else if kind != m.k {
            format!(
                "{} in the shard, {} in the manifest",
                kind_name(kind),
                kind_name(m.k)
            )
        } else if kind == 0 && e.size != m.s {
            format!("{} bytes in the shard, {} in the manifest", e.size, m.s)
        } else if e.header_offset != m.o {
            format!(
                "at byte {} of the shard, the manifest says {}",
                e.header_offset, m.o
            )
        } else if e.mode != m.mode {
            format!(
                "mode {:o} in the shard, {:o} in the manifest",
                e.mode, m.mode
            )
        } else {
            self.seen[i] = true;
            return None;
        };
        self.seen[i] = true;
        Some(why)
    }

    fn report(&self, path: &[u8], why: String) {
        let path = RelPath::from_bytes(path.strip_suffix(b"/").unwrap_or(path).to_vec());
        self.reporter.error(&Error::dst(
            &path,
            "download",
            io::Error::other(format!("{}: {why}", self.shown)),
        ));
    }

    /// Reports each member the manifest names for the shard that it did not hold;
    /// returns how many.
    fn report_missing(&self) -> usize {
        let mut missing = 0;
        for (m, _) in self
            .expected
            .members
            .iter()
            .zip(&self.seen)
            .filter(|(_, seen)| !**seen)
        {
            self.report(
                &m.path(),
                format!("{} the manifest names, not in the shard", kind_name(m.k)),
            );
            missing += 1;
        }
        missing
    }

    /// After member `first` did not pass: the rest of the shard looked at for its
    /// headers alone, everything that does not pass reported; the stream then fails.
    fn fail(&mut self, first: &[u8]) {
        {
            let mut held = self.held.borrow_mut();
            held.keep = false;
            held.bytes = Vec::new();
        }
        (self.ready, self.sent) = (0, 0);
        let mut refused = 1;
        let mut ended = "";
        if let Some(mut reader) = self.reader.take() {
            loop {
                match reader.next_entry() {
                    Ok(Some(e)) => {
                        if let Some(why) = self.refusal(&e) {
                            self.report(&e.path, why);
                            refused += 1;
                        }
                    }
                    Ok(None) => break,
                    Err(_) => {
                        ended = " (and its tar is damaged after it)";
                        break;
                    }
                }
            }
        }
        refused += self.report_missing();
        self.state = State::Failed(format!(
            "the shard does not hold what the manifest says ({refused} members differ, \
             each reported; the first {}){ended}: nothing unpacked from there on",
            String::from_utf8_lossy(first).escape_debug()
        ));
    }
}

impl<R: Read> Read for Checked<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        loop {
            if self.sent < self.ready {
                let mut held = self.held.borrow_mut();
                let n = out.len().min(self.ready - self.sent);
                out[..n].copy_from_slice(&held.bytes[self.sent..self.sent + n]);
                self.sent += n;
                if self.sent == held.bytes.len() {
                    held.bytes.clear();
                    (self.ready, self.sent) = (0, 0);
                }
                return Ok(n);
            }
            match &self.state {
                State::Failed(why) => return Err(io::Error::other(why.clone())),
                State::Tail => {
                    return match self.rest.as_mut() {
                        Some(rest) => rest.read(out),
                        None => Ok(0),
                    }
                }
                State::Data => {
                    let Some(reader) = self.reader.as_mut() else {
                        return Ok(0);
                    };
                    if self.piece.is_empty() {
                        self.piece = vec![0u8; PIECE];
                    }
                    let n = reader
                        .read_data(&mut self.piece)
                        .map_err(io::Error::other)?;
                    if n == 0 {
                        self.state = State::Headers;
                    }
                }
                State::Headers => {
                    let Some(reader) = self.reader.as_mut() else {
                        return Ok(0);
                    };
                    match reader.next_entry().map_err(io::Error::other)? {
                        Some(e) => match self.refusal(&e) {
                            None => self.state = State::Data,
                            Some(why) => {
                                self.report(&e.path, why);
                                self.fail(&e.path);
                            }
                        },
                        None => {
                            self.report_missing();
                            self.rest = self.reader.take().map(|r| r.into_inner().inner);
                            self.state = State::Tail;
                        }
                    }
                }
            }
            // What the reader pulled for what passed goes on.
            self.ready = self.held.borrow().bytes.len();
        }
    }
}
