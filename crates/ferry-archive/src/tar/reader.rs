//! The streaming reader: reads blocks from any `Read`, tracks the absolute offset,
//! assembles entries from their headers and hands out their data.

use std::io::{self, Read};

use super::entry::{self, Pending, TarEntry, TarKind};
use super::error::{TarError, TarErrorKind};
use super::header::{self, Block, Header};
use super::pax::{self, Globals};
use super::sparse::{self, Map10Parser, Plan, Run};
use super::{BLOCK_SIZE, MAX_LONG_NAME, MAX_PAX_HEADER};

/// Size of the scratch buffer used to skip data.
const SKIP_CHUNK: usize = 16 << 10;

/// Where the reader stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Between entries or inside one.
    Reading,
    /// The end of the archive was reached.
    Done,
    /// An error was returned: the position in the stream is no longer meaningful.
    Failed,
}

/// A strict, streaming tar reader over any [`Read`].
///
/// Call [`next_entry`](Reader::next_entry) for each member, and
/// [`read_data`](Reader::read_data) (or [`data`](Reader::data)) for its stored data;
/// whatever is not read is skipped by the next `next_entry`. After an error every call
/// fails with [`TarErrorKind::Stopped`]. Wrap an unbuffered source (a file, a socket) in
/// a [`std::io::BufReader`]: headers are read one block at a time.
pub struct Reader<R: Read> {
    inner: R,
    offset: u64,
    /// Unread stored data of the current entry.
    remaining: u64,
    /// Block padding after the current entry's data.
    padding: u64,
    globals: Globals,
    state: State,
    /// Skips data without reading it, where the stream allows (see
    /// [`Reader::with_skip`]).
    skip_by: Option<fn(&mut R, u64) -> io::Result<()>>,
    /// The stream ended where a header would start, without end-of-archive blocks.
    unterminated: bool,
}

impl<R: Read> Reader<R> {
    /// A reader of the tar stream `inner`, which starts at offset 0.
    pub fn new(inner: R) -> Self {
        Reader {
            inner,
            offset: 0,
            remaining: 0,
            padding: 0,
            globals: Globals::default(),
            state: State::Reading,
            skip_by: None,
            unterminated: false,
        }
    }

    /// A reader that skips members' data with `skip_by` (a seek forward) instead of
    /// reading it: a scan of a tar file for its headers alone. A member cut short by the
    /// file's end is then not noticed here: the caller checks members' data against the
    /// file's length.
    pub fn with_skip(inner: R, skip_by: fn(&mut R, u64) -> io::Result<()>) -> Self {
        Reader {
            skip_by: Some(skip_by),
            ..Reader::new(inner)
        }
    }

    /// Offset in the stream of the next byte the reader would read. After the end of
    /// the archive, the offset just past the end-of-archive blocks.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The underlying stream.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// Gives back the underlying stream, positioned at [`offset`](Reader::offset).
    pub fn into_inner(self) -> R {
        self.inner
    }

    /// Reads the headers of the next entry, skipping the unread data of the current one.
    /// Returns `Ok(None)` at the end of the archive (and on every call after it).
    pub fn next_entry(&mut self) -> Result<Option<TarEntry>, TarError> {
        match self.state {
            State::Done => return Ok(None),
            State::Failed => return Err(self.error(TarErrorKind::Stopped)),
            State::Reading => {}
        }
        let result = self.read_next_entry();
        if result.is_err() {
            self.state = State::Failed;
        }
        result
    }

    /// Whether the archive ended (`next_entry` returned `Ok(None)`) where the stream
    /// did, with no end-of-archive blocks: most likely cut short (a copy, a download or
    /// a pipe that broke at a member boundary), which the caller should say.
    pub fn unterminated(&self) -> bool {
        self.unterminated
    }

    /// Whether an error was returned: every later call fails with
    /// [`TarErrorKind::Stopped`].
    pub fn has_failed(&self) -> bool {
        self.state == State::Failed
    }

    /// Reads stored data of the current entry into `buf`; returns 0 at its end. For a
    /// sparse file these are the runs' bytes, concatenated in map order.
    pub fn read_data(&mut self, buf: &mut [u8]) -> Result<usize, TarError> {
        if self.state == State::Failed {
            return Err(self.error(TarErrorKind::Stopped));
        }
        let want = usize::try_from(self.remaining).map_or(buf.len(), |r| r.min(buf.len()));
        let Some(buf) = buf.get_mut(..want).filter(|b| !b.is_empty()) else {
            return Ok(0);
        };
        let result = match self.read_some(buf) {
            Ok(0) => Err(self.error(TarErrorKind::UnexpectedEof)),
            other => other,
        };
        match result {
            Ok(n) => {
                self.remaining -= n as u64;
                Ok(n)
            }
            Err(e) => {
                self.state = State::Failed;
                Err(e)
            }
        }
    }

    /// The current entry's stored data as a [`Read`]; errors become [`io::Error`]s that
    /// carry the [`TarError`].
    pub fn data(&mut self) -> DataReader<'_, R> {
        DataReader { reader: self }
    }

    fn error(&self, kind: TarErrorKind) -> TarError {
        TarError::new(self.offset, kind)
    }

    fn read_next_entry(&mut self) -> Result<Option<TarEntry>, TarError> {
        self.skip(self.remaining.saturating_add(self.padding))?;
        (self.remaining, self.padding) = (0, 0);
        let mut header_offset = self.offset;
        let mut pending = Pending::default();
        loop {
            let at = self.offset;
            let Some(block) = self.read_block()? else {
                return self.end_without_marker(&pending);
            };
            if header::is_zero(&block) {
                return self.end_marker(&pending, at);
            }
            let header = Header::parse(&block).map_err(|k| match (at, k) {
                (0, TarErrorKind::BadChecksum) => TarError::new(
                    at,
                    TarErrorKind::Invalid("not a tar archive: no tar header at its start"),
                ),
                (_, k) => TarError::new(at, k),
            })?;
            match header.typeflag() {
                b'x' | b'X' => pending.pax = Some(self.read_pax(&header, at, &pending.pax)?),
                b'L' => {
                    let name = self.read_long_name(&header, at, &pending.long_name, "long name")?;
                    pending.long_name = Some(name);
                }
                b'K' => {
                    let name = self.read_long_name(&header, at, &pending.long_link, "long link")?;
                    pending.long_link = Some(name);
                }
                b'g' | b'V' => {
                    self.read_unattached(&header, at, &pending)?;
                    header_offset = self.offset;
                }
                _ => {
                    return self
                        .finish_entry(&header, &pending, header_offset, at)
                        .map(Some)
                }
            }
        }
    }

    /// The stream ended where a header would start. (GNU tar and bsdtar accept an
    /// archive without its end-of-archive blocks, and so does this reader; but nothing at
    /// all is not an archive, for GNU tar either: most likely a copy or a download that
    /// failed.)
    fn end_without_marker(&mut self, pending: &Pending) -> Result<Option<TarEntry>, TarError> {
        if !pending.is_empty() {
            return Err(self.error(TarErrorKind::UnexpectedEof));
        }
        if self.offset == 0 {
            return Err(self.error(TarErrorKind::Invalid(
                "not a tar archive: the input is empty",
            )));
        }
        self.state = State::Done;
        self.unterminated = true;
        Ok(None)
    }

    /// A zero block at `at`: the end-of-archive marker. Reads its second block.
    fn end_marker(&mut self, pending: &Pending, at: u64) -> Result<Option<TarEntry>, TarError> {
        if !pending.is_empty() {
            return Err(TarError::new(
                at,
                TarErrorKind::Invalid("end of archive right after an extension header"),
            ));
        }
        let second = self.offset;
        match self.read_block()? {
            Some(block) if !header::is_zero(&block) => Err(TarError::new(
                second,
                TarErrorKind::Invalid("a lone zero block is followed by non-zero data"),
            )),
            _ => {
                self.state = State::Done;
                Ok(None)
            }
        }
    }

    /// Reads the body of an `x`, `L` or `K` header at `at`, refusing a second one for
    /// the same entry (`already`) and a body over `limit`.
    fn read_extension<T>(
        &mut self,
        header: &Header<'_>,
        at: u64,
        already: &Option<T>,
        limit: u64,
        what: &'static str,
    ) -> Result<Vec<u8>, TarError> {
        if already.is_some() {
            return Err(TarError::new(
                at,
                TarErrorKind::Invalid("two extension headers of one kind for one entry"),
            ));
        }
        let size = header.size().map_err(|k| TarError::new(at, k))?;
        if size > limit {
            return Err(TarError::new(
                at,
                TarErrorKind::TooLarge { what, size, limit },
            ));
        }
        self.read_body(size)
    }

    /// Reads and parses the body of the pax `x` header at `at`.
    fn read_pax(
        &mut self,
        header: &Header<'_>,
        at: u64,
        already: &Option<Vec<pax::Record>>,
    ) -> Result<Vec<pax::Record>, TarError> {
        let body = self.read_extension(header, at, already, MAX_PAX_HEADER, "pax header")?;
        parse_pax(&body, at + BLOCK_SIZE)
    }

    /// Reads the name in the body of the GNU `L` or `K` header at `at`.
    fn read_long_name(
        &mut self,
        header: &Header<'_>,
        at: u64,
        already: &Option<Vec<u8>>,
        what: &'static str,
    ) -> Result<Vec<u8>, TarError> {
        let body = self.read_extension(header, at, already, MAX_LONG_NAME, what)?;
        long_name(&body).map_err(|k| TarError::new(at, k))
    }

    /// Reads a pax global header (merging it into the globals) or skips a volume label.
    fn read_unattached(
        &mut self,
        header: &Header<'_>,
        at: u64,
        pending: &Pending,
    ) -> Result<(), TarError> {
        if !pending.is_empty() {
            return Err(TarError::new(
                at,
                TarErrorKind::Invalid("global header or volume label inside an entry's headers"),
            ));
        }
        let what = if header.typeflag() == b'g' {
            "pax global header"
        } else {
            "volume label"
        };
        let body = self.read_extension(header, at, &None::<()>, MAX_PAX_HEADER, what)?;
        if header.typeflag() == b'g' {
            let records = parse_pax(&body, at + BLOCK_SIZE)?;
            self.globals
                .apply(records)
                .map_err(|k| TarError::new(at, k))?;
        }
        Ok(())
    }

    /// Builds the entry whose own header is at `at`, reads what follows it of its sparse
    /// map, and sets up its data for reading.
    fn finish_entry(
        &mut self,
        header: &Header<'_>,
        pending: &Pending,
        header_offset: u64,
        at: u64,
    ) -> Result<TarEntry, TarError> {
        let built = entry::build(header, pending, self.globals.records())
            .map_err(|k| TarError::new(at, k))?;
        let mut entry = built.entry;
        self.remaining = built.data_area;
        self.padding = padding(built.data_area);
        let sparse = match built.plan {
            Plan::Plain => None,
            Plan::Runs { realsize, runs } => Some((realsize, runs)),
            Plan::OldGnuExtended { realsize, runs } => {
                Some((realsize, self.read_gnu_extensions(runs)?))
            }
            Plan::Map10 { realsize } => Some((realsize, self.read_map10()?)),
        };
        if let Some((realsize, runs)) = sparse {
            let runs = sparse::validate(runs, realsize, self.remaining)
                .map_err(|k| TarError::new(at, k))?;
            entry.size = realsize;
            entry.sparse = Some(runs);
        }
        if entry.kind != TarKind::File {
            // Only a GNU incremental directory gets here with data (the names it held):
            // not the entry's to read, so it is skipped with the padding, and the
            // entry, like every one that is not a file, stores nothing.
            self.padding = self.padding.saturating_add(self.remaining);
            self.remaining = 0;
        }
        entry.stored = self.remaining;
        entry.header_offset = header_offset;
        entry.data_offset = self.offset;
        Ok(entry)
    }

    /// Reads old GNU sparse extension blocks after the header.
    fn read_gnu_extensions(&mut self, mut runs: Vec<Run>) -> Result<Vec<Run>, TarError> {
        loop {
            let at = self.offset;
            let block = self.expect_block()?;
            let more =
                sparse::parse_extension(&block, &mut runs).map_err(|k| TarError::new(at, k))?;
            if !more {
                return Ok(runs);
            }
        }
    }

    /// Reads the pax 1.0 map from the start of the data area.
    fn read_map10(&mut self) -> Result<Vec<Run>, TarError> {
        let mut parser = Map10Parser::default();
        loop {
            let at = self.offset;
            if self.remaining < BLOCK_SIZE {
                return Err(TarError::new(
                    at,
                    TarErrorKind::BadSparse("map runs past the entry's data"),
                ));
            }
            let block = self.expect_block()?;
            self.remaining -= BLOCK_SIZE;
            let done = parser
                .feed(&block)
                .map_err(|(pos, k)| TarError::new(at + pos as u64, k))?;
            if done {
                return Ok(parser.into_runs());
            }
        }
    }

    /// Reads a body of `size` bytes and its padding; allocates as the bytes arrive.
    fn read_body(&mut self, size: u64) -> Result<Vec<u8>, TarError> {
        // Room for a usual body at once; a claimed size is only trusted up to 64 KiB
        // before the bytes are there.
        let mut body = Vec::with_capacity(size.min(64 << 10) as usize);
        let result = (&mut self.inner).take(size).read_to_end(&mut body);
        self.offset += body.len() as u64;
        result.map_err(|e| self.error(TarErrorKind::Io(e)))?;
        if (body.len() as u64) < size {
            return Err(self.error(TarErrorKind::UnexpectedEof));
        }
        self.skip(padding(size))?;
        Ok(body)
    }

    /// Skips `n` bytes of the stream.
    fn skip(&mut self, mut n: u64) -> Result<(), TarError> {
        if let Some(skip_by) = self.skip_by.filter(|_| n > BLOCK_SIZE) {
            skip_by(&mut self.inner, n).map_err(|e| self.error(TarErrorKind::Io(e)))?;
            self.offset += n;
            return Ok(());
        }
        // Most skips are a block's padding: zero a block for those, not a whole chunk.
        let mut block = [0u8; BLOCK_SIZE as usize];
        let mut chunk = Vec::new();
        let scratch: &mut [u8] = if n <= BLOCK_SIZE {
            &mut block
        } else {
            chunk.resize(SKIP_CHUNK, 0);
            &mut chunk
        };
        while n > 0 {
            let len = usize::try_from(n).map_or(scratch.len(), |n| n.min(scratch.len()));
            let buf = scratch.get_mut(..len).unwrap_or_default();
            match self.read_some(buf)? {
                0 => return Err(self.error(TarErrorKind::UnexpectedEof)),
                got => n -= got as u64,
            }
        }
        Ok(())
    }

    /// Reads one block: `None` at a clean end of stream, an error on a partial block.
    fn read_block(&mut self) -> Result<Option<Block>, TarError> {
        let mut block = [0u8; 512];
        let mut filled = 0;
        while let Some(rest) = block.get_mut(filled..).filter(|r| !r.is_empty()) {
            match self.read_some(rest)? {
                0 if filled == 0 => return Ok(None),
                0 => return Err(self.error(TarErrorKind::UnexpectedEof)),
                n => filled += n,
            }
        }
        Ok(Some(block))
    }

    /// Reads one block that must be there.
    fn expect_block(&mut self) -> Result<Block, TarError> {
        self.read_block()?
            .ok_or_else(|| self.error(TarErrorKind::UnexpectedEof))
    }

    /// One `read` of the stream, retried on `Interrupted`, counted in the offset.
    fn read_some(&mut self, buf: &mut [u8]) -> Result<usize, TarError> {
        loop {
            match self.inner.read(buf) {
                Ok(n) => {
                    let n = n.min(buf.len());
                    self.offset += n as u64;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.error(TarErrorKind::Io(e))),
            }
        }
    }
}

/// Parses a pax body that started at stream offset `body_at`.
fn parse_pax(body: &[u8], body_at: u64) -> Result<Vec<pax::Record>, TarError> {
    pax::parse_records(body).map_err(|(pos, k)| TarError::new(body_at + pos as u64, k))
}

/// The name in a GNU `L`/`K` body: bytes up to a NUL; only NULs may follow.
fn long_name(body: &[u8]) -> Result<Vec<u8>, TarErrorKind> {
    let name = header::cstr(body);
    let rest = body.get(name.len()..).unwrap_or_default();
    if name.is_empty() || !header::is_zero(rest) {
        return Err(TarErrorKind::Invalid("malformed GNU long name"));
    }
    Ok(name.to_vec())
}

/// Bytes of padding after `size` bytes of data, up to the next block boundary.
fn padding(size: u64) -> u64 {
    (BLOCK_SIZE - size % BLOCK_SIZE) % BLOCK_SIZE
}

/// The stored data of the reader's current entry, as a [`Read`].
pub struct DataReader<'a, R: Read> {
    reader: &'a mut Reader<R>,
}

impl<R: Read> Read for DataReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(self.reader.read_data(buf)?)
    }
}
