//! Hand-made tar archives: headers with any field value, pax records, bad checksums.

/// One header block under construction.
#[derive(Clone)]
pub struct Header(pub [u8; 512]);

impl Header {
    /// A ustar header for `path`, type `flag`, `size` data bytes.
    pub fn ustar(flag: u8, path: &[u8], size: u64) -> Self {
        let mut h = Header([0; 512]);
        h.set(0, path)
            .octal(100, 8, 0o644)
            .octal(108, 8, 1000)
            .octal(116, 8, 1000)
            .octal(124, 12, size)
            .octal(136, 12, 1_600_000_000)
            .set(156, &[flag])
            .set(257, b"ustar\x0000")
            .set(265, b"user")
            .set(297, b"group");
        h
    }

    /// An old GNU header (magic `ustar  \0`).
    pub fn gnu(flag: u8, path: &[u8], size: u64) -> Self {
        let mut h = Self::ustar(flag, path, size);
        h.set(257, b"ustar  \0");
        h
    }

    /// Writes `bytes` at `at`.
    pub fn set(&mut self, at: usize, bytes: &[u8]) -> &mut Self {
        self.0[at..at + bytes.len()].copy_from_slice(bytes);
        self
    }

    /// Writes `value` in octal, zero-filled, NUL-terminated, in the field at `at`.
    pub fn octal(&mut self, at: usize, len: usize, value: u64) -> &mut Self {
        let text = format!("{value:0w$o}\0", w = len - 1);
        self.set(at, text.as_bytes())
    }

    /// The block with its checksum computed.
    pub fn block(&self) -> [u8; 512] {
        let mut b = self.0;
        b[148..156].copy_from_slice(b"        ");
        let sum: u32 = b.iter().map(|&c| u32::from(c)).sum();
        b[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        b
    }
}

/// A pax record `LEN KEY=VALUE\n` with the right length.
pub fn record(key: &[u8], value: &[u8]) -> Vec<u8> {
    let body_len = key.len() + value.len() + 3; // ' ', '=', '\n'
    let mut len = body_len + 1;
    while body_len + len.to_string().len() != len {
        len = body_len + len.to_string().len();
    }
    let mut r = format!("{len} ").into_bytes();
    r.extend_from_slice(key);
    r.push(b'=');
    r.extend_from_slice(value);
    r.push(b'\n');
    r
}

/// `data` padded with NULs to whole blocks.
pub fn pad(data: &[u8]) -> Vec<u8> {
    let mut v = data.to_vec();
    v.resize(data.len().div_ceil(512) * 512, 0);
    v
}

/// An archive under construction.
#[derive(Default, Clone)]
pub struct Archive(pub Vec<u8>);

impl Archive {
    /// Appends a header, its checksum computed.
    pub fn header(mut self, h: &Header) -> Self {
        self.0.extend_from_slice(&h.block());
        self
    }

    /// Appends data padded to whole blocks.
    pub fn data(mut self, d: &[u8]) -> Self {
        self.0.extend(pad(d));
        self
    }

    /// Appends bytes as they are.
    pub fn raw(mut self, bytes: &[u8]) -> Self {
        self.0.extend_from_slice(bytes);
        self
    }

    /// Appends a pax header of type `flag` (`x` or `g`) holding `records`.
    pub fn pax(self, flag: u8, records: &[(&[u8], &[u8])]) -> Self {
        let body: Vec<u8> = records.iter().flat_map(|(k, v)| record(k, v)).collect();
        self.pax_body(flag, &body)
    }

    /// Appends a pax header of type `flag` with `body` as it is.
    pub fn pax_body(self, flag: u8, body: &[u8]) -> Self {
        self.header(&Header::ustar(flag, b"PaxHeaders/x", body.len() as u64))
            .data(body)
    }

    /// Appends a regular file.
    pub fn file(self, path: &[u8], data: &[u8]) -> Self {
        self.header(&Header::ustar(b'0', path, data.len() as u64))
            .data(data)
    }

    /// Appends the two zero blocks.
    pub fn end(mut self) -> Self {
        self.0.extend([0u8; 1024]);
        self
    }

    /// The bytes.
    pub fn bytes(self) -> Vec<u8> {
        self.0
    }
}

/// A pax 1.0 sparse file: `map` text and `data` in its data area.
pub fn sparse10(realsize: u64, map_text: &str, data: &[u8]) -> Archive {
    let mut area = pad(map_text.as_bytes());
    area.extend_from_slice(data);
    let real = realsize.to_string();
    Archive::default()
        .pax(
            b'x',
            &[
                (b"GNU.sparse.major", b"1"),
                (b"GNU.sparse.minor", b"0"),
                (b"GNU.sparse.name", b"sparse"),
                (b"GNU.sparse.realsize", real.as_bytes()),
            ],
        )
        .header(&Header::ustar(
            b'0',
            b"GNUSparseFile.0/sparse",
            area.len() as u64,
        ))
        .data(&area)
}
