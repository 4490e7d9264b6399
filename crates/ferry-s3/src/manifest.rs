//! The manifest: the object written last, naming every shard of an upload (its key,
//! size, ETag, the fingerprint of its members) and every member's place in it, so a
//! reader lists the tree or reads one member without opening a shard's index.
//!
//! Stored as JSON compressed with zstd. It is untrusted input: [`Manifest::decode`]
//! bounds its size, and checks every shard key, offset and member path before anything
//! uses them; a manifest that fails is refused whole, with one line naming the object
//! and what is wrong.

use crate::{Result, S3Error};
use serde::{Deserialize, Serialize};
use std::io::Read;

/// The format string the manifest begins with. In this version a shard's members are
/// those of its members the upload still names (a rerun keeps unchanged members where
/// they are), each with the fingerprint of its metadata and its content hash; a file
/// renamed since it was stored names the path its shard holds it under
/// ([`Member::sp`]); the directory shards are the last ones, unchanged directories
/// kept in those they are in, and name the tree's root (the member of empty path).
/// A ferry that knows only an earlier format refuses it by its format, instead of
/// misreading several directory shards, or a renamed file under its stored name.
pub const FORMAT: &str = "ferry-s3 4";

/// The format of a ferry of a few days before: [`FORMAT_V2`] with renamed members.
/// Still read.
pub const FORMAT_V3: &str = "ferry-s3 3";

/// The format before: one directory shard, of every directory but the root; no
/// renamed members. Still read.
pub const FORMAT_V2: &str = "ferry-s3 2";

/// The format an earlier ferry wrote: a shard's members are all it holds, without
/// fingerprints or hashes. Still read.
pub const FORMAT_V1: &str = "ferry-s3 1";

/// The newest snapshot's manifest under the prefix (a copy of `snapshots/NAME.ferry`).
pub const NAME: &str = "manifest.ferry";

/// The most bytes a manifest decompresses to.
pub const MAX_DECODED: u64 = 1 << 30;

/// The largest manifest object read (compressed): 128 MiB, an eighth of
/// [`MAX_DECODED`] (the JSON compresses about tenfold). A larger object is refused
/// from the GET's headers, before its body is read.
pub const MAX_STORED: u64 = 128 << 20;

/// The largest record of one shard read (`shards/FP.json`, a manifest of that shard
/// alone, written beside it): 16 MiB stored, 256 MiB decompressed. A shard of 1 GiB of
/// empty files has about 2 million members, whose record takes about 40 MB of JSON.
pub const MAX_RECORD: u64 = 16 << 20;
/// The most a shard's record may decompress to.
pub const MAX_RECORD_DECODED: u64 = 256 << 20;

/// The longest member path taken.
const MAX_PATH: usize = 64 << 10;

/// An upload, as its manifest describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: String,
    /// The snapshot's name (see [`crate::snapshot`]); none in a shard's record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// The shards, the directory shard last.
    pub shards: Vec<Shard>,
}

/// One shard: a ferry archive object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// The xxh3-128 of its members' metadata (see [`crate::plan`]), 32 hex digits; the
    /// object is `shards/FINGERPRINT.far` under the prefix.
    pub fingerprint: String,
    /// The object's length.
    pub size: u64,
    /// The object's ETag when it was written.
    pub etag: Option<String>,
    /// Whether it is the shard of directories, unpacked last.
    pub dirs: bool,
    /// How many members the shard holds (directories above them aside); none: as many
    /// as `members` names (an upload of [`FORMAT_V1`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<u64>,
    /// Its members this upload names, in archive order: all it holds when it was
    /// packed by this upload, those still unchanged when it was kept from an earlier
    /// one.
    pub members: Vec<Member>,
}

/// One member of a shard.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Its path when it is UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p: Option<String>,
    /// Its path in hex when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub px: Option<String>,
    /// Its kind (the index's numbers: 0 file, 1 dir, 2 symlink, 3 hardlink, 4 fifo,
    /// 5 char device, 6 block device).
    pub k: u8,
    /// Its size (files).
    pub s: u64,
    /// Its mtime (seconds, nanoseconds).
    pub m: (i64, u32),
    /// Its permission bits.
    pub mode: u32,
    /// Where its header starts in the shard.
    pub o: u64,
    /// Where its stored data ends.
    pub e: u64,
    /// The fingerprint of its metadata as the upload's walk saw it (16 hex digits, see
    /// [`crate::plan::member_fingerprint`]): a rerun keeps the member where it is when
    /// the walk sees the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub f: Option<String>,
    /// A file's content hash, the xxh3-128 its shard's index records (32 hex digits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x: Option<String>,
    /// Its path in the shard when the snapshot names it otherwise (UTF-8): a file
    /// renamed or moved since it was stored, found there by its metadata and content
    /// hash, and so kept where it is (see [`crate::renames`]). Files only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sp: Option<String>,
    /// The same in hex, when it is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spx: Option<String>,
}

impl Member {
    /// A member with path `path`.
    pub fn with_path(path: &[u8]) -> Member {
        let (p, px) = path_fields(path);
        Member {
            p,
            px,
            k: 0,
            s: 0,
            m: (0, 0),
            mode: 0,
            o: 0,
            e: 0,
            f: None,
            x: None,
            sp: None,
            spx: None,
        }
    }

    /// The same member named `path` by the snapshot, its path in the shard kept.
    pub fn renamed(&self, path: &[u8]) -> Member {
        let stored = self.stored_path();
        let (p, px) = path_fields(path);
        let (sp, spx) = match stored == path {
            true => (None, None),
            false => path_fields(&stored),
        };
        Member {
            p,
            px,
            sp,
            spx,
            ..self.clone()
        }
    }

    /// Its content hash, when recorded.
    pub fn hash(&self) -> Option<u128> {
        u128::from_str_radix(self.x.as_deref()?, 16).ok()
    }

    /// Its path's bytes, as the snapshot names it (checked by [`Manifest::decode`]).
    pub fn path(&self) -> Vec<u8> {
        path_of(&self.p, &self.px).unwrap_or_default()
    }

    /// Its path as its shard's tar and index hold it: [`Member::path`] but for a
    /// renamed file.
    pub fn stored_path(&self) -> Vec<u8> {
        path_of(&self.sp, &self.spx).unwrap_or_else(|| self.path())
    }

    /// Whether the snapshot names it otherwise than its shard does.
    pub fn is_renamed(&self) -> bool {
        self.sp.is_some() || self.spx.is_some()
    }
}

/// A member's path as the manifest names it, from the path its tar header or index
/// entry gives: without the `/`s a directory's ends in, the root (`.`, `./`) empty.
pub fn member_path(raw: &[u8]) -> &[u8] {
    let path = raw.strip_suffix(b"/").unwrap_or(raw);
    match path {
        b"." => b"",
        other => other,
    }
}

/// A path as a member's two fields keep it: UTF-8, or else hex.
fn path_fields(path: &[u8]) -> (Option<String>, Option<String>) {
    match std::str::from_utf8(path) {
        Ok(s) => (Some(s.to_string()), None),
        Err(_) => (
            None,
            Some(path.iter().map(|b| format!("{b:02x}")).collect()),
        ),
    }
}

/// The path two such fields give, if either is there.
fn path_of(text: &Option<String>, hex: &Option<String>) -> Option<Vec<u8>> {
    match (text, hex) {
        (Some(p), _) => Some(p.as_bytes().to_vec()),
        (None, Some(x)) => Some(unhex(x).unwrap_or_default()),
        (None, None) => None,
    }
}

/// The bytes of `x`, two hex digits each.
pub(crate) fn unhex(x: &str) -> Option<Vec<u8>> {
    if x.len() % 2 != 0 {
        return None;
    }
    (0..x.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(x.get(i..i + 2)?, 16).ok())
        .collect()
}

impl Shard {
    /// The object's name under the prefix.
    pub fn name(&self) -> String {
        shard_name(&self.fingerprint)
    }

    /// Whether the upload names every member the shard holds.
    pub fn whole(&self) -> bool {
        self.held.is_none_or(|n| n == self.members.len() as u64)
    }
}

/// The object name of the shard with `fingerprint`.
pub fn shard_name(fingerprint: &str) -> String {
    format!("shards/{fingerprint}.far")
}

/// The object name of its record (`shards/FP.json`, a manifest of that shard alone,
/// written once the shard is whole).
pub fn record_name(fingerprint: &str) -> String {
    format!("shards/{fingerprint}.json")
}

impl Manifest {
    /// The manifest's bytes, as stored.
    pub fn encode(&self) -> Vec<u8> {
        let json = serde_json::to_vec(self).unwrap_or_default();
        zstd::encode_all(json.as_slice(), 3).unwrap_or_default()
    }

    /// Reads and checks a stored manifest; `what` names it in errors.
    pub fn decode(bytes: &[u8], what: &str) -> Result<Manifest> {
        Manifest::decode_within(bytes, what, MAX_DECODED)
    }

    /// As [`Manifest::decode`], refusing one that decompresses to more than `most`
    /// bytes.
    pub fn decode_within(bytes: &[u8], what: &str, most: u64) -> Result<Manifest> {
        let bad = |why: String| S3Error::new(format!("{what}: bad manifest: {why}"));
        let mut json = Vec::new();
        zstd::stream::read::Decoder::new(bytes)
            .and_then(|d| d.take(most + 1).read_to_end(&mut json))
            .map_err(|e| bad(format!("not zstd: {e}")))?;
        if json.len() as u64 > most {
            return Err(bad(format!("larger than {most} bytes")));
        }
        let m: Manifest = serde_json::from_slice(&json).map_err(|e| bad(e.to_string()))?;
        m.check().map_err(bad)?;
        Ok(m)
    }

    /// Checks what a reader relies on.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        if ![FORMAT, FORMAT_V3, FORMAT_V2, FORMAT_V1].contains(&self.format.as_str()) {
            return Err(format!("format {:?}, not {FORMAT:?}", self.format));
        }
        if let Some(name) = &self.snapshot {
            if !crate::snapshot::is_name(name) {
                return Err(format!("snapshot name {name:?}"));
            }
        }
        let mut seen = std::collections::HashSet::new();
        let mut dirs_begun = false;
        for (i, s) in self.shards.iter().enumerate() {
            let fp = &s.fingerprint;
            if fp.len() != 32 || !fp.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!(
                    "shard {i}: fingerprint {fp:?} is not 32 hex digits"
                ));
            }
            if !seen.insert(fp.clone()) {
                return Err(format!("shard {fp} named twice"));
            }
            // The directory shards last (unpacked after the files, their metadata set
            // once everything below is there).
            if !s.dirs && dirs_begun {
                return Err(format!("shard {fp}: after a directory shard"));
            }
            dirs_begun |= s.dirs;
            if s.size > crate::parts::MAX_OBJECT {
                return Err(format!("shard {fp}: size {} too large", s.size));
            }
            if s.held.is_some_and(|n| n < s.members.len() as u64) {
                return Err(format!("shard {fp}: names more members than it holds"));
            }
            let mut end = 0;
            for m in &s.members {
                check_member(m, s).map_err(|why| format!("shard {fp}: {why}"))?;
                // In archive order, one after another: a download of some members
                // fetches their ranges and reads them as one tar.
                if m.o < end {
                    return Err(format!(
                        "shard {fp}: member at byte {} overlaps the one before it",
                        m.o
                    ));
                }
                end = m.e;
            }
        }
        Ok(())
    }
}

/// Checks a member's path: `text` or `hex` (not both, and one unless `optional`), a
/// plain relative path, empty only for a directory (the root); returns it.
fn check_path(
    text: &Option<String>,
    hex: &Option<String>,
    k: u8,
    optional: bool,
) -> std::result::Result<Vec<u8>, String> {
    if text.is_some() && hex.is_some() || !optional && text.is_none() && hex.is_none() {
        return Err("a member with no path, or two".into());
    }
    if let Some(x) = hex {
        if unhex(x).is_none() {
            return Err(format!("member path {x:?} is not hex"));
        }
    }
    let path = path_of(text, hex).unwrap_or_default();
    let shown = String::from_utf8_lossy(&path).escape_debug().to_string();
    if path.is_empty() && (k != 1 || optional) {
        return Err("a member with an empty path".into());
    }
    if path.len() > MAX_PATH || path.contains(&0) || path.starts_with(b"/") {
        return Err(format!("member {shown}: bad path"));
    }
    if !path.is_empty()
        && path
            .split(|&b| b == b'/')
            .any(|c| c.is_empty() || c == b"." || c == b"..")
    {
        return Err(format!(
            "member {shown}: path leaves the tree or is not plain"
        ));
    }
    Ok(path)
}

fn check_member(m: &Member, s: &Shard) -> std::result::Result<(), String> {
    let path = check_path(&m.p, &m.px, m.k, false)?;
    let shown = String::from_utf8_lossy(&path).escape_debug().to_string();
    if m.is_renamed() {
        check_path(&m.sp, &m.spx, m.k, true).map_err(|why| format!("{shown}: stored as {why}"))?;
        if m.k != 0 || s.dirs {
            return Err(format!("member {shown}: renamed, and not a file"));
        }
    }
    if m.k > 6 {
        return Err(format!("member {shown}: kind {}", m.k));
    }
    if m.o >= m.e || m.e > s.size {
        return Err(format!(
            "member {shown}: range {}..{} outside the shard's {} bytes",
            m.o, m.e, s.size
        ));
    }
    if m.m.1 >= 1_000_000_000 {
        return Err(format!("member {shown}: bad mtime"));
    }
    let hex = |x: &Option<String>, digits: usize| {
        x.as_ref()
            .is_none_or(|x| x.len() == digits && x.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    if !hex(&m.f, 16) || !hex(&m.x, 32) {
        return Err(format!("member {shown}: fingerprint or hash not hex"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        let mut a = Member::with_path(b"a/b");
        (a.s, a.o, a.e) = (3, 0, 4096 + 3);
        let mut odd = Member::with_path(b"x\xff\nz");
        (odd.o, odd.e) = (8192, 9000);
        Manifest {
            format: FORMAT.into(),
            snapshot: Some("20261201T203015Z".into()),
            shards: vec![Shard {
                fingerprint: "0123456789abcdef0123456789abcdef".into(),
                size: 10240,
                etag: Some("\"e\"".into()),
                dirs: false,
                held: Some(3),
                members: vec![a, odd],
            }],
        }
    }

    /// A change that spoils a manifest.
    type Change = Box<dyn Fn(&mut Manifest)>;

    fn refused(m: &Manifest) -> String {
        let json = serde_json::to_vec(m).unwrap();
        let bytes = zstd::encode_all(json.as_slice(), 1).unwrap();
        let e = Manifest::decode(&bytes, "s3://b/p/manifest.ferry").unwrap_err();
        assert!(
            e.0.starts_with("s3://b/p/manifest.ferry: bad manifest"),
            "{e}"
        );
        e.0
    }

    #[test]
    fn round_trips_odd_names() {
        let m = sample();
        let back = Manifest::decode(&m.encode(), "m").unwrap();
        assert_eq!(back, m);
        assert_eq!(back.shards[0].members[1].path(), b"x\xff\nz");
    }

    #[test]
    fn a_renamed_member_keeps_its_stored_name_until_named_so_again() {
        let m = sample().shards[0].members[0].clone();
        let moved = m.renamed(b"new/\xffname");
        assert_eq!(moved.path(), b"new/\xffname");
        assert_eq!(moved.stored_path(), b"a/b");
        assert!(moved.is_renamed() && moved.px.is_some() && moved.sp.is_some());
        let again = moved.renamed(b"third");
        assert_eq!(
            (again.path(), again.stored_path()),
            (b"third".to_vec(), b"a/b".to_vec())
        );
        let home = again.renamed(b"a/b");
        assert!(!home.is_renamed());
        assert_eq!(home, m);
        let mut shown = sample();
        shown.shards[0].members[0] = moved;
        assert_eq!(Manifest::decode(&shown.encode(), "m").unwrap(), shown);
    }

    #[test]
    fn malformed_manifests_are_refused() {
        assert!(Manifest::decode(b"not zstd", "m").is_err());
        let garbage = zstd::encode_all(&b"{\"format\": 3"[..], 1).unwrap();
        assert!(Manifest::decode(&garbage, "m")
            .unwrap_err()
            .0
            .contains("bad manifest"));
        let cases: Vec<(&str, Change)> = vec![
            ("format", Box::new(|m| m.format = "other".into())),
            (
                "fingerprint",
                Box::new(|m| m.shards[0].fingerprint = "../../x".into()),
            ),
            (
                "leaves",
                Box::new(|m| m.shards[0].members[0].p = Some("a/../../etc".into())),
            ),
            (
                "bad path",
                Box::new(|m| m.shards[0].members[0].p = Some("/etc/passwd".into())),
            ),
            ("outside", Box::new(|m| m.shards[0].members[0].e = 1 << 40)),
            ("kind", Box::new(|m| m.shards[0].members[0].k = 9)),
            (
                "not hex",
                Box::new(|m| m.shards[0].members[1].px = Some("zz".into())),
            ),
            (
                "two",
                Box::new(|m| m.shards[0].members[1].p = Some("a".into())),
            ),
            ("twice", Box::new(|m| m.shards.push(m.shards[0].clone()))),
            ("too large", Box::new(|m| m.shards[0].size = u64::MAX)),
            ("overlaps", Box::new(|m| m.shards[0].members[1].o = 100)),
            ("more members", Box::new(|m| m.shards[0].held = Some(1))),
            (
                "not hex",
                Box::new(|m| m.shards[0].members[0].x = Some("x".repeat(32))),
            ),
            (
                "snapshot name",
                Box::new(|m| m.snapshot = Some("../x".into())),
            ),
            (
                "stored as member ../x: path leaves",
                Box::new(|m| m.shards[0].members[0].sp = Some("../x".into())),
            ),
            (
                "stored as member /x: bad path",
                Box::new(|m| m.shards[0].members[0].sp = Some("/x".into())),
            ),
            (
                "stored as a member with an empty path",
                Box::new(|m| m.shards[0].members[0].sp = Some(String::new())),
            ),
            (
                "stored as a member with no path, or two",
                Box::new(|m| {
                    let a = &mut m.shards[0].members[0];
                    (a.sp, a.spx) = (Some("c".into()), Some("63".into()));
                }),
            ),
            (
                "renamed, and not a file",
                Box::new(|m| {
                    let a = &mut m.shards[0].members[0];
                    (a.k, a.sp) = (2, Some("c".into()));
                }),
            ),
        ];
        for (what, change) in cases {
            let mut m = sample();
            change(&mut m);
            let e = refused(&m);
            assert!(e.contains(what), "{what}: {e}");
        }
    }
}
