//! A lookup table kept beside the cached manifest, so a warm `cat` finds its member
//! without decompressing and parsing the whole manifest: one line per member,
//! `HEXPATH TAB FINGERPRINT TAB START TAB END TAB KIND`, then `TAB HEXSTORED` for a file
//! its shard holds under another name, sorted by the hex of the path
//! (which sorts as the path's bytes do), after a first line naming the manifest's ETag.
//! A lookup finds the line by binary search, reading only the lines it looks at. The file is local and
//! written by ferry, but read as untrusted all the same: anything unexpected makes the
//! lookup give up, and the caller parses the manifest instead.

use crate::manifest::Manifest;
use std::io::Write;
use std::path::Path;

const HEADER: &str = "ferry-s3-lookup 2";

/// Where a member is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    /// Its shard's fingerprint.
    pub fingerprint: String,
    /// Where its headers start in the shard.
    pub start: u64,
    /// Where its data ends.
    pub end: u64,
    /// Its kind, in the index's numbers.
    pub kind: u8,
    /// Its path in the shard, when the snapshot names it otherwise.
    pub stored: Option<Vec<u8>>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes the table of `m`, whose ETag is `etag`, to `path` (through a temporary file
/// renamed over it). Failing to is no error: the next lookup parses the manifest.
pub fn write(path: &Path, etag: &str, m: &Manifest) {
    let mut lines: Vec<String> = m
        .shards
        .iter()
        .flat_map(|s| {
            s.members.iter().map(move |mb| {
                let stored = match mb.is_renamed() {
                    true => format!("\t{}", hex(&mb.stored_path())),
                    false => String::new(),
                };
                format!(
                    "{}\t{}\t{}\t{}\t{}{stored}\n",
                    hex(&mb.path()),
                    s.fingerprint,
                    mb.o,
                    mb.e,
                    mb.k
                )
            })
        })
        .collect();
    lines.sort();
    let tmp = path.with_extension("lookup-tmp");
    let written = std::fs::File::create(&tmp).and_then(|f| {
        let mut w = std::io::BufWriter::new(f);
        writeln!(w, "{HEADER}\t{etag}")?;
        for l in &lines {
            w.write_all(l.as_bytes())?;
        }
        w.flush()
    });
    if written.is_ok() {
        let _ = std::fs::rename(&tmp, path);
    } else {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// The longest line read: two paths (a member's, and the one its shard stores it
/// under) of [`crate::manifest`]'s 64 KiB longest, in hex, and the rest.
const MAX_LINE: u64 = 288 << 10;

/// The table's file, read a line at a time where it is needed: a warm `cat` of one
/// member in a table of millions reads a few dozen blocks, not the table.
struct Table {
    file: std::fs::File,
    len: u64,
}

impl Table {
    /// The line starting at `at`, without its newline, and where the next one starts;
    /// None past the end, for a line longer than [`MAX_LINE`], or if reading fails.
    fn line_at(&self, at: u64) -> Option<(Vec<u8>, u64)> {
        use std::os::unix::fs::FileExt;
        if at >= self.len {
            return None;
        }
        let mut line = Vec::new();
        let mut buf = [0u8; 4096];
        let mut pos = at;
        while pos < self.len && (line.len() as u64) < MAX_LINE {
            let n = self.file.read_at(&mut buf, pos).ok()?;
            if n == 0 {
                break;
            }
            if let Some(end) = buf[..n].iter().position(|&b| b == b'\n') {
                line.extend_from_slice(&buf[..end]);
                return Some((line, pos + end as u64 + 1));
            }
            line.extend_from_slice(&buf[..n]);
            pos += n as u64;
        }
        ((line.len() as u64) < MAX_LINE).then_some((line, self.len))
    }
}

/// Finds `member` in the table at `path` made for the manifest with ETag `etag`:
/// None when the table cannot be used, Some(None) when it has no such member.
pub fn find(path: &Path, etag: &str, member: &[u8]) -> Option<Option<Hit>> {
    let file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let table = Table { file, len };
    let (first, body) = table.line_at(0)?;
    if first != format!("{HEADER}\t{etag}").as_bytes() {
        return None;
    }
    let key = hex(member);
    let key = key.as_bytes();
    let key_of = |line: &[u8]| {
        line.split(|&b| b == b'\t')
            .next()
            .unwrap_or_default()
            .to_vec()
    };
    // The first line whose key is not below `key` starts at or after `lo` (`lo` only
    // ever moves past a line whose key is below), within a line or so of `hi` (`hi`
    // may fall inside that line, and `lo` then pass it): once the two are close, or
    // crossed, the lines from `lo` on are read one by one.
    let (mut lo, mut hi) = (body, len);
    while hi.saturating_sub(lo) > 4096 {
        let mid = lo + (hi - lo) / 2;
        let (_, next) = table.line_at(mid)?;
        if next >= hi {
            hi = mid;
            continue;
        }
        let (line, after) = table.line_at(next)?;
        if key_of(&line).as_slice() < key {
            lo = after;
        } else {
            hi = mid;
        }
    }
    let mut at = lo;
    while at < len {
        let (line, next) = table.line_at(at)?;
        let k = key_of(&line);
        if k.as_slice() == key {
            return parse(&line).map(Some);
        }
        if k.as_slice() > key {
            return Some(None);
        }
        at = next;
    }
    Some(None)
}

fn parse(line: &[u8]) -> Option<Hit> {
    let text = std::str::from_utf8(line).ok()?;
    let mut f = text.split('\t').skip(1);
    let hit = Hit {
        fingerprint: f.next()?.to_string(),
        start: f.next()?.parse().ok()?,
        end: f.next()?.parse().ok()?,
        kind: f.next()?.parse().ok()?,
        stored: match f.next() {
            Some(x) => Some(crate::manifest::unhex(x)?),
            None => None,
        },
    };
    let sane = hit.fingerprint.len() == 32
        && hit.fingerprint.bytes().all(|b| b.is_ascii_hexdigit())
        && hit.start < hit.end;
    sane.then_some(hit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{Member, Shard, FORMAT};

    #[test]
    fn finds_every_member_and_only_them() {
        let members: Vec<Member> = (0..5000u64)
            .map(|i| {
                let mut m = Member::with_path(format!("d{}/f{i}", i % 7).as_bytes());
                (m.o, m.e, m.k) = (i * 10, i * 10 + 5, 0);
                m
            })
            .collect();
        let m = Manifest {
            format: FORMAT.into(),
            snapshot: None,
            shards: vec![Shard {
                fingerprint: "0123456789abcdef0123456789abcdef".into(),
                size: 1 << 20,
                etag: None,
                dirs: false,
                held: None,
                members,
            }],
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        write(&path, "\"e1\"", &m);
        for i in [0u64, 1, 2500, 4999] {
            let hit = find(&path, "\"e1\"", format!("d{}/f{i}", i % 7).as_bytes());
            assert_eq!(hit.unwrap().unwrap().start, i * 10);
        }
        assert_eq!(find(&path, "\"e1\"", b"d0/nope"), Some(None));
        // Long paths put the middle of the search inside a line: the bounds may cross,
        // and every member is still found.
        let long: Vec<Member> = [(b'a', 1500), (b'b', 1000), (b'c', 2500), (b'd', 3000)]
            .iter()
            .enumerate()
            .map(|(i, &(c, n))| {
                let mut m = Member::with_path(&vec![c; n]);
                (m.o, m.e, m.k) = (i as u64 * 10, i as u64 * 10 + 5, 0);
                m
            })
            .collect();
        let mut lm = m.clone();
        lm.shards[0].members = long;
        write(&path, "\"e2\"", &lm);
        for (i, &(c, n)) in [(b'a', 1500), (b'b', 1000), (b'c', 2500), (b'd', 3000)]
            .iter()
            .enumerate()
        {
            let hit = find(&path, "\"e2\"", &vec![c; n]).unwrap().unwrap();
            assert_eq!(hit.start, i as u64 * 10);
        }
        write(&path, "\"e1\"", &m);
        assert_eq!(find(&path, "\"e1\"", b"zzz"), Some(None));
        assert_eq!(find(&path, "\"other\"", b"d0/f0"), None);
        std::fs::write(&path, "ferry-s3-lookup 1\t\"e1\"\n64\tnot-hex\t1\t2\t0\n").unwrap();
        assert_eq!(find(&path, "\"e1\"", b"d"), None);
        // A line longer than any the table writes: given up on, not read whole.
        let long = format!("ferry-s3-lookup 1\t\"e1\"\n{}\n", "6".repeat(1 << 20));
        std::fs::write(&path, long).unwrap();
        assert_eq!(find(&path, "\"e1\"", b"f"), None);
    }
}
