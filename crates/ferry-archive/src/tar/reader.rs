//! The streaming reader: reads blocks from any `Read`, tracks the absolute offset,
//! assembles entries from their headers and hands out their data.

use std::io::{self, Read};

use super::entry::{self, Pending, TarEntry, TarKind};
use super::error::{Member, TarError, TarErrorKind};
use super::header::{self, Block, Header};
use super::pax::{self, Globals};
use super::sparse::{self, Map10Parser, Plan, Run};
use super::warning::{Severity, TarWarning, Warnings};
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
    /// A block read ahead (after a header-only member whose size is not 0) and given
    /// back: the next block to read. The offset does not count it.
    peeked: Option<Block>,
    /// The path of the last member returned, for errors after it.
    last: Option<Vec<u8>>,
    /// What was read liberally, for the caller to report.
    warnings: Warnings,
    /// Return files continued from another volume (`M`) as entries, for a listing
    /// (see [`Reader::listing`]).
    listing: bool,
    /// The last entry returned is such a continuation, from this byte of its file.
    continued_at: Option<u64>,
    /// The current entry's data laid out in file order ([`Reader::lay_out`]), and how
    /// much of it was read: `read_data` reads it from there.
    laid_out: Option<(std::fs::File, u64)>,
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
            peeked: None,
            last: None,
            warnings: Warnings::default(),
            listing: false,
            continued_at: None,
            laid_out: None,
        }
    }

    /// A reader for a listing: a file continued from another volume of a multi-volume
    /// archive (`M`), which an extraction leaves out with an error (GNU tar does not
    /// extract it either), is returned as a file entry of the part stored here, and
    /// [`Reader::continued_at`] says where in the file that part starts, as `tar -tv`
    /// lists it.
    pub fn listing(mut self) -> Self {
        self.listing = true;
        self
    }

    /// Where in its file the last entry returned starts, when it continues a file from
    /// another volume (only a [`Reader::listing`] returns those).
    pub fn continued_at(&self) -> Option<u64> {
        self.continued_at
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

    /// Gives back the underlying stream, positioned at [`offset`](Reader::offset)
    /// (except right after a directory, link, device or fifo whose header claims a size,
    /// when the reader holds the block after it).
    pub fn into_inner(self) -> R {
        self.inner
    }

    /// What the reader read liberally (as GNU tar reads it) or left out since the last
    /// call: callers report each, as a warning or, for [`Severity::Error`], as an error
    /// that leaves the rest of the archive read. Bounded: past a few hundred, they are
    /// counted in one.
    pub fn take_warnings(&mut self) -> Vec<TarWarning> {
        self.warnings.take(self.offset)
    }

    /// Reads the headers of the next entry, skipping the unread data of the current one.
    /// Returns `Ok(None)` at the end of the archive (and on every call after it).
    pub fn next_entry(&mut self) -> Result<Option<TarEntry>, TarError> {
        match self.state {
            State::Done => return Ok(None),
            State::Failed => return Err(self.error(TarErrorKind::Stopped)),
            State::Reading => {}
        }
        self.continued_at = None;
        let result = self.read_next_entry();
        match &result {
            Ok(Some(t)) => self.last = Some(t.path.clone()),
            Ok(None) => {}
            Err(_) => self.state = State::Failed,
        }
        let last = self.last.clone().map(Member::After);
        result.map_err(|e| e.about(last))
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
        let result = match &self.laid_out {
            Some((file, at)) => std::os::unix::fs::FileExt::read_exact_at(file, buf, *at)
                .map(|()| buf.len())
                .map_err(|e| self.error(TarErrorKind::Io(e))),
            None => match self.read_some(buf) {
                Ok(0) => Err(self.error(TarErrorKind::UnexpectedEof)),
                other => other,
            },
        };
        if let (Ok(n), Some((_, at))) = (&result, &mut self.laid_out) {
            *at += *n as u64;
        }
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

    /// Makes a sparse file whose map is out of order, repeats a run or has runs that
    /// overlap readable in order: reads its stored data on into a temporary file in
    /// `dir` (see [`ferry_core::sparse::lay_out`]), laid out in file order, and gives `t`
    /// the map of that (which [`Reader::read_data`] then reads). Any other entry is left
    /// as it is. Call it before reading any of the entry's data; an entry listed or
    /// skipped, or indexed by its offsets in the archive, keeps its map as stored.
    ///
    /// When the temporary file fails (no room), the stream is still usable: `t` is left
    /// as it was and the rest of its data is skipped by the next [`Reader::next_entry`].
    pub fn lay_out(
        &mut self,
        t: &mut TarEntry,
        dir: Option<std::os::fd::BorrowedFd<'_>>,
    ) -> Result<(), TarError> {
        let Some(runs) = t
            .sparse
            .as_deref()
            .filter(|r| !ferry_core::sparse::in_order(r))
        else {
            return Ok(());
        };
        let (mut pos, mut failed) = (0u64, None);
        let laid = ferry_core::sparse::lay_out(runs, dir, |at, buf| {
            // Stored bytes that a later run overwrote are read past.
            let read = self.skip_data(at - pos).and_then(|()| self.fill_data(buf));
            pos = at + buf.len() as u64;
            read.map_err(|e| {
                failed = Some(e);
                io::Error::other("the archive's data")
            })
        });
        let (file, map) = match (laid, failed) {
            (_, Some(e)) => return Err(e),
            (Ok(laid), None) => laid,
            // The temporary file failed: the stream has lost nothing.
            (Err(e), None) => return Err(self.error(TarErrorKind::Io(e))),
        };
        // What the last runs left unread (overwritten bytes) goes with the padding.
        self.padding = self.padding.saturating_add(self.remaining);
        t.stored = map.iter().map(|r| r.1).sum();
        t.sparse = Some(map);
        self.remaining = t.stored;
        self.laid_out = Some((file, 0));
        Ok(())
    }

    /// Reads past `n` bytes of the current entry's data (at most what is left of it).
    fn skip_data(&mut self, n: u64) -> Result<(), TarError> {
        let n = n.min(self.remaining);
        self.skip(n).inspect_err(|_| self.state = State::Failed)?;
        self.remaining -= n;
        Ok(())
    }

    /// Fills `buf` from the current entry's data.
    fn fill_data(&mut self, mut buf: &mut [u8]) -> Result<(), TarError> {
        while !buf.is_empty() {
            match self.read_data(buf)? {
                0 => {
                    self.state = State::Failed;
                    return Err(self.error(TarErrorKind::UnexpectedEof));
                }
                n => buf = &mut buf[n..],
            }
        }
        Ok(())
    }

    fn read_next_entry(&mut self) -> Result<Option<TarEntry>, TarError> {
        if self.laid_out.take().is_some() {
            // The laid-out data is in the temporary file, not in the stream.
            self.remaining = 0;
        }
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
            let flag = header.typeflag();
            match flag {
                b'x' | b'X' => {
                    let records = self.read_pax(&header, at)?;
                    let before = pending.pax.replace(records);
                    repeated(&mut pending, at, flag, before.is_some());
                }
                b'L' | b'K' => {
                    let name = self.read_long_name(&header, at)?;
                    let slot = match flag {
                        b'L' => &mut pending.long_name,
                        _ => &mut pending.long_link,
                    };
                    let before = slot.replace(name);
                    repeated(&mut pending, at, flag, before.is_some());
                }
                b'g' => {
                    self.read_global(&header, at)?;
                    if pending.is_empty() {
                        header_offset = self.offset;
                    }
                }
                b'M' if self.listing => {
                    let from = header.gnu_offset().map_err(|k| TarError::new(at, k))?;
                    let entry = self.finish_entry(&header, &pending, header_offset, at)?;
                    self.continued_at = Some(from);
                    return Ok(Some(entry));
                }
                b'V' | b'M' => {
                    self.skip_unextracted(&header, &pending, at)?;
                    (pending, header_offset) = (Pending::default(), self.offset);
                }
                _ => {
                    return self
                        .finish_entry(&header, &pending, header_offset, at)
                        .map(Some)
                }
            }
        }
    }

    /// Skips a volume label (`V`, which GNU tar and bsdtar skip) or a file continued
    /// from another volume (`M`, which GNU tar without `-M` does not extract, and
    /// counts as an error, and neither does this reader), with what extension headers
    /// came before it.
    fn skip_unextracted(
        &mut self,
        header: &Header<'_>,
        pending: &Pending,
        at: u64,
    ) -> Result<(), TarError> {
        let size = header.size().map_err(|k| TarError::new(at, k))?;
        self.skip(size.saturating_add(padding(size)))?;
        if header.typeflag() == b'M' {
            let name = name_of(header, pending);
            let message = "not extracted: it continues a file from another volume of a \
                           multi-volume archive (GNU tar -M reads those)"
                .to_string();
            self.note(at, Some(&name), message, Severity::Error);
        }
        Ok(())
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

    /// A zero block at `at`: the end-of-archive marker. Reads its second block. A
    /// second block that is not zero (or cut short) ends the archive too, with GNU tar's
    /// warning ("A lone zero block"); what follows is not read, as GNU tar reads none.
    fn end_marker(&mut self, pending: &Pending, at: u64) -> Result<Option<TarEntry>, TarError> {
        if !pending.is_empty() {
            return Err(TarError::new(
                at,
                TarErrorKind::Invalid("end of archive right after an extension header"),
            ));
        }
        let mut second = [0u8; BLOCK_SIZE as usize];
        let mut filled = 0;
        while let Some(rest) = second.get_mut(filled..).filter(|r| !r.is_empty()) {
            match self.read_some(rest)? {
                0 => break,
                n => filled += n,
            }
        }
        if filled > 0 && !header::is_zero(&second) {
            let message = format!(
                "a lone zero block, then {}: read as the end of the archive, as GNU tar \
                 does; what follows it is ignored",
                if filled < second.len() {
                    "a partial block"
                } else {
                    "a block that is not zero"
                }
            );
            self.warn(at, None, message);
        }
        self.state = State::Done;
        Ok(None)
    }

    /// Reads the body of an extension header at `at`, refusing one over `limit`
    /// bytes (before reading it).
    fn read_extension(
        &mut self,
        header: &Header<'_>,
        at: u64,
        limit: u64,
        what: &'static str,
    ) -> Result<Vec<u8>, TarError> {
        let size = header.size().map_err(|k| TarError::new(at, k))?;
        if size > limit {
            return Err(TarError::new(
                at,
                TarErrorKind::TooLarge { what, size, limit },
            ));
        }
        self.read_body(size)
    }

    /// Reads and parses the body of the pax `x` (or Solaris `X`) header at `at`.
    fn read_pax(&mut self, header: &Header<'_>, at: u64) -> Result<Vec<pax::Record>, TarError> {
        let body = self.read_extension(header, at, MAX_PAX_HEADER, "pax header")?;
        parse_pax(&body, at + BLOCK_SIZE)
    }

    /// Reads the name in the body of the GNU `L` or `K` header at `at`.
    fn read_long_name(&mut self, header: &Header<'_>, at: u64) -> Result<Vec<u8>, TarError> {
        let what = match header.typeflag() {
            b'L' => "long name",
            _ => "long link",
        };
        let body = self.read_extension(header, at, MAX_LONG_NAME, what)?;
        long_name(&body).map_err(|k| TarError::new(at, k))
    }

    /// Reads a pax global header, merging it into the globals (before or among a
    /// member's extension headers: GNU tar applies it either way).
    fn read_global(&mut self, header: &Header<'_>, at: u64) -> Result<(), TarError> {
        let body = self.read_extension(header, at, MAX_PAX_HEADER, "pax global header")?;
        let records = parse_pax(&body, at + BLOCK_SIZE)?;
        for message in self.globals.apply(records) {
            self.warn(at, None, message);
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
            .map_err(|k| TarError::new(at, k).about(Some(Member::In(name_of(header, pending)))))?;
        let mut entry = built.entry;
        let notes = pending.notes.iter().cloned();
        for (offset, message) in notes.chain(built.warnings.into_iter().map(|w| (at, w))) {
            self.warn(offset, Some(&entry.path), message);
        }
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
        if built.claimed > 0 {
            self.claimed_data(&entry, built.claimed)?;
        }
        Ok(entry)
    }

    /// After a header of a kind without data (POSIX: no data follows it, whatever its
    /// size) that claims `claimed` bytes: if the next block is a header (or the end),
    /// no data follows, and it is given back to be read next, as GNU tar, bsdtar and Go
    /// read it. If it is neither, the writer did store data there (old writers stored a
    /// directory's): it is skipped, which is where GNU tar's search for the next header
    /// lands ("Skipping to next header"), with a warning.
    fn claimed_data(&mut self, entry: &TarEntry, claimed: u64) -> Result<(), TarError> {
        let at = self.offset;
        let Some(block) = self.read_block()? else {
            return Ok(());
        };
        if header::is_zero(&block) || header::checksum_ok(&block) {
            self.offset -= BLOCK_SIZE;
            self.peeked = Some(block);
            return Ok(());
        }
        let area = claimed.saturating_add(padding(claimed));
        self.skip(area.saturating_sub(BLOCK_SIZE))?;
        self.warn(
            at,
            Some(&entry.path),
            format!(
                "a {} whose header claims a size of {claimed}, and no header after it: the \
                 {area} bytes there skipped as its data",
                kind_name(entry.kind)
            ),
        );
        Ok(())
    }

    /// Notes a warning about `member` (None: the last one read before) at `at`.
    fn warn(&mut self, at: u64, member: Option<&[u8]>, message: String) {
        self.note(at, member, message, Severity::Warning);
    }

    fn note(&mut self, at: u64, member: Option<&[u8]>, message: String, severity: Severity) {
        let member = match member {
            Some(m) => Some(Member::In(m.to_vec())),
            None => self.last.clone().map(Member::After),
        };
        self.warnings.push(TarWarning {
            offset: at,
            member,
            message,
            severity,
        });
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
        if let Some(block) = self.peeked.take() {
            self.offset += BLOCK_SIZE;
            return Ok(Some(block));
        }
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

/// The name in a GNU `L`/`K` body: its bytes up to the first NUL, whatever follows
/// (as GNU tar and bsdtar read it).
fn long_name(body: &[u8]) -> Result<Vec<u8>, TarErrorKind> {
    let name = header::cstr(body);
    if name.is_empty() {
        return Err(TarErrorKind::Invalid(
            "a GNU long name or link header that is empty",
        ));
    }
    Ok(name.to_vec())
}

/// Notes in `pending` that the extension header of type `flag` at `at` replaced one
/// before it for the same member, if it did: the last one wins, as in GNU tar, bsdtar
/// and Go. (Warned of once the member is known: see `finish_entry`.)
fn repeated(pending: &mut Pending, at: u64, flag: u8, replaced: bool) {
    if replaced {
        let what = extension_name(flag);
        let message = format!("two {what} for one member: the last one is used");
        pending.notes.push((at, message));
    }
}

/// The name the member whose header is `header` goes by, for an error in it.
fn name_of(header: &Header<'_>, pending: &Pending) -> Vec<u8> {
    pending.long_name.clone().unwrap_or_else(|| header.path())
}

/// A kind in words, for messages.
fn kind_name(kind: TarKind) -> &'static str {
    match kind {
        TarKind::File => "regular file",
        TarKind::Dir => "directory",
        TarKind::Symlink => "symlink",
        TarKind::HardLink => "hardlink",
        TarKind::CharDevice => "character device",
        TarKind::BlockDevice => "block device",
        TarKind::Fifo => "fifo",
    }
}

/// The words for an extension header's type flag, for messages.
fn extension_name(flag: u8) -> &'static str {
    match flag {
        b'L' => "GNU long name headers (type 'L')",
        b'K' => "GNU long link headers (type 'K')",
        _ => "pax extended headers (type 'x')",
    }
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
