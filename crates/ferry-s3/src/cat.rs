//! Reading without downloading: the manifest (kept in `$XDG_CACHE_HOME/ferry/s3`,
//! revalidated by its ETag with a conditional GET), `ls` from it, and `cat` of one
//! member with one ranged GET of its headers and data, parsed by the strict tar reader.
//! A warm `cat` finds its member in a lookup table kept beside the cached manifest
//! ([`crate::lookup`]) instead of parsing the manifest, and asks for the member's bytes
//! while the manifest is revalidated, on a second connection: the bytes are used only
//! if the manifest has not changed. (A second request on one connection waited about
//! 40 ms for its body on Garage, curl too: the server's Nagle against the client's
//! delayed ACK; a first request on a connection does not.)
//!
//! Where there is no manifest, both read the prefix's plain objects
//! ([`crate::objects::read`]): `cat` sends that object's GET beside the manifest's, so
//! a plain object costs one round trip (and a cold `cat` of a member one GET more,
//! answered 404).

use crate::body::{gather, BodyReader};
use crate::lookup::{self, Hit};
use crate::manifest::{shard_name, Manifest, Member, MAX_STORED, NAME};
use crate::objects::read::{cat_object, get_file};
use crate::store::Store;
use crate::{Result, S3Error};
use ferry_archive::tar::Reader;
use ferry_core::error::Reporter;
use object_store::{GetOptions, GetRange, GetResult, ObjectStore};
use std::io::{self, Read, Write};
use std::path::PathBuf;

fn cache_file(store: &Store) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap_or_default();
    let h = xxhash_rust::xxh3::xxh3_64(format!("{endpoint}\0{}", store.loc).as_bytes());
    Some(base.join("ferry").join("s3").join(format!("{h:016x}")))
}

/// The manifest's stored bytes and ETag; `cached`: the server said the cached copy is
/// current.
pub(crate) struct Fetched {
    pub(crate) body: Vec<u8>,
    pub(crate) etag: Option<String>,
    pub(crate) cached: bool,
    /// The snapshot `manifest.ferry` named the newest, whose manifest `body` is.
    pub(crate) named: Option<String>,
}

/// The manifest's bytes, from the cache when the server says they have not changed;
/// None if there is no manifest.
pub(crate) async fn fetch_bytes(store: &Store) -> Result<Option<Fetched>> {
    let key = store.manifest_key();
    let cached = cache_file(store).and_then(|c| {
        let bytes = std::fs::read(c).ok()?;
        let (etag, body) = bytes.split_at(bytes.iter().position(|&b| b == b'\n')?);
        Some((String::from_utf8(etag.to_vec()).ok()?, body[1..].to_vec()))
    });
    let opts = GetOptions {
        if_none_match: cached.as_ref().map(|c| c.0.clone()),
        ..GetOptions::default()
    };
    let got = match store.s3.get_opts(&key, opts).await {
        Ok(got) => got,
        Err(object_store::Error::NotModified { .. }) => {
            let (etag, body) = cached.unwrap_or_default();
            return Ok(Some(Fetched {
                body,
                etag: Some(etag),
                cached: true,
                named: None,
            }));
        }
        Err(object_store::Error::NotFound { source, .. })
            if !source.to_string().contains("NoSuchBucket") =>
        {
            return Ok(None);
        }
        Err(e) => return Err(store.error(&key, "read the manifest", &e)),
    };
    let etag = got.meta.e_tag.clone();
    let body = gather(store, &key, "read the manifest", got, MAX_STORED).await?;
    let shown = format!("s3://{}/{key}", store.loc.bucket);
    let (body, named) = match crate::snapshot::Newest::decode(&body, &shown) {
        None => (body, None),
        Some(name) => {
            // The newest snapshot's manifest, cached under the ETag of what names it:
            // a prune that writes the snapshot again writes the pointer again too.
            let name = name?;
            let body =
                crate::snapshot::read_bytes(store, &name, "read the newest snapshot").await?;
            (body, Some(name))
        }
    };
    Ok(Some(Fetched {
        body,
        etag,
        cached: false,
        named,
    }))
}

/// Keeps a manifest just fetched (and found good) in the cache.
pub(crate) fn remember(store: &Store, f: &Fetched) {
    let (Some(cache), Some(etag), false) = (cache_file(store), &f.etag, f.cached) else {
        return;
    };
    let _ = std::fs::create_dir_all(cache.parent().unwrap_or(&cache));
    let tmp = cache.with_extension("tmp");
    let mut data = etag.clone().into_bytes();
    data.push(b'\n');
    data.extend_from_slice(&f.body);
    if std::fs::write(&tmp, data).is_ok() {
        let _ = std::fs::rename(tmp, cache);
    }
}

pub(crate) fn shown_key(store: &Store) -> String {
    format!("s3://{}/{}", store.loc.bucket, store.manifest_key())
}

/// The manifest at `store`'s location, None if there is none.
pub async fn fetch_manifest(store: &Store) -> Result<Option<Manifest>> {
    let Some(f) = fetch_bytes(store).await? else {
        return Ok(None);
    };
    let manifest = decode(store, &f)?;
    remember(store, &f);
    Ok(Some(manifest))
}

/// The manifest fetched as `f`, checked; read as a snapshot, it must name itself so.
pub(crate) fn decode(store: &Store, f: &Fetched) -> Result<Manifest> {
    let shown = match &f.named {
        Some(name) => format!(
            "s3://{}/{}",
            store.loc.bucket,
            store.key(&crate::snapshot::object(name))
        ),
        None => shown_key(store),
    };
    let manifest = Manifest::decode(&f.body, &shown)?;
    if let Some(name) = store.loc.snapshot.as_ref().or(f.named.as_ref()) {
        crate::snapshot::named_so(&manifest, name, &shown)?;
    }
    Ok(manifest)
}

pub(crate) fn no_upload(store: &Store) -> S3Error {
    match &store.loc.snapshot {
        Some(name) => S3Error::new(format!(
            "{}: no snapshot {name} here (`ferry ls --snapshots` lists them)",
            store.loc
        )),
        None => S3Error::new(format!("{}: no ferry upload here (no {NAME})", store.loc)),
    }
}

/// Where member `path` is, in the manifest `f`: from the lookup table when the cached
/// manifest is current, else from the manifest (and the table is made for the next
/// time).
fn locate(store: &Store, f: Fetched, path: &[u8]) -> Result<Option<Hit>> {
    let table = cache_file(store).map(|c| c.with_extension("lookup"));
    if let (true, Some(table), Some(etag)) = (f.cached, &table, &f.etag) {
        if let Some(found) = lookup::find(table, etag, path) {
            return Ok(found);
        }
    }
    let m = decode(store, &f)?;
    remember(store, &f);
    if let (Some(table), Some(etag)) = (&table, &f.etag) {
        lookup::write(table, etag, &m);
    }
    let found = m
        .shards
        .iter()
        .flat_map(|s| s.members.iter().map(move |m| (s, m)))
        .find(|(_, m)| m.path() == path);
    Ok(found.map(|(s, m)| Hit {
        fingerprint: s.fingerprint.clone(),
        start: m.o,
        end: m.e,
        kind: m.k,
        stored: m.is_renamed().then(|| m.stored_path()),
    }))
}

/// The manifest, or an error saying there is none.
pub async fn need_manifest(store: &Store) -> Result<Manifest> {
    fetch_manifest(store).await?.ok_or_else(|| no_upload(store))
}

/// One line of `ls`: a member of an upload, or an object of a prefix of plain objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// Its kind, in the index's numbers (0 file, 1 dir, 2 symlink, 3 hardlink, 4 fifo,
    /// 5 char device, 6 block device).
    pub kind: u8,
    /// Its permission bits.
    pub mode: u32,
    /// Its size (files).
    pub size: u64,
    /// Its mtime (seconds, nanoseconds).
    pub mtime: (i64, u32),
    /// Its path.
    pub path: Vec<u8>,
}

impl Row {
    fn of_member(m: &Member) -> Row {
        Row {
            kind: m.k,
            mode: m.mode,
            size: m.s,
            mtime: m.m,
            path: m.path(),
        }
    }

    fn of_entry(e: &ferry_core::entry::Entry) -> Row {
        use ferry_core::entry::EntryKind;
        let (kind, size) = match e.kind {
            EntryKind::File { size } => (0, size),
            EntryKind::Dir => (1, 0),
            _ => (2, 0),
        };
        Row {
            kind,
            mode: e.meta.mode,
            size,
            mtime: (e.meta.mtime.sec, e.meta.mtime.nsec),
            path: e.path.as_bytes().to_vec(),
        }
    }
}

/// The rows of `ls` whose paths `wanted` takes, in path order: the members of the
/// upload at `store`, or where there is none, its plain objects (a HEAD each of those
/// taken, `transfers` at a time; a key refused or an object that could not be read is
/// reported and left out).
pub fn ls(
    store: &Store,
    wanted: &dyn Fn(&[u8]) -> bool,
    transfers: usize,
    reporter: &dyn Reporter,
) -> Result<Vec<Row>> {
    let Some(m) = store.rt.block_on(fetch_manifest(store))? else {
        let entries = crate::objects::read::list_entries(store, wanted, transfers, reporter)?;
        return Ok(entries.iter().map(Row::of_entry).collect());
    };
    let mut all: Vec<Row> = m
        .shards
        .iter()
        .flat_map(|s| &s.members)
        .map(Row::of_member)
        // The root (a directory shard's member of empty path) is not listed.
        .filter(|r| !r.path.is_empty() && wanted(&r.path))
        .collect();
    all.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(all)
}

/// Writes the content of the file member `path` to `out`.
pub fn cat(store: &Store, path: &[u8], out: &mut dyn Write) -> Result<()> {
    cat_following(store, path, out, 0)
}

/// Hardlinks followed at most: a manifest and shards made to loop stop here.
const MAX_LINKS: usize = 8;

/// The cached manifest's ETag, from the first line of the cache file.
fn cached_etag(store: &Store) -> Option<String> {
    let mut line = String::new();
    let file = std::fs::File::open(cache_file(store)?).ok()?;
    io::BufRead::read_line(&mut io::BufReader::new(file), &mut line).ok()?;
    line.strip_suffix('\n').map(str::to_owned)
}

/// The GET of a member's bytes (`hit`), its body not yet read.
async fn get_member(store: &Store, hit: &Hit) -> object_store::Result<GetResult> {
    let opts = GetOptions {
        range: Some(GetRange::Bounded(hit.start..hit.end)),
        ..GetOptions::default()
    };
    store
        .s3
        .get_opts(&store.key(&shard_name(&hit.fingerprint)), opts)
        .await
}

/// Member `path` and the GET of its bytes, found through the lookup table of the
/// cached manifest and sent while the manifest is revalidated; None unless the
/// manifest proved current and the GET was answered (then [`locate`] and one more GET
/// do it the plain way). The body is read only once the manifest is known current.
async fn speculate(store: &Store, path: &[u8]) -> Result<Option<(Hit, GetResult)>> {
    let Some(etag) = cached_etag(store) else {
        return Ok(None);
    };
    let Some(table) = cache_file(store).map(|c| c.with_extension("lookup")) else {
        return Ok(None);
    };
    let Some(Some(hit)) = lookup::find(&table, &etag, path) else {
        return Ok(None);
    };
    let (fresh, bytes) = tokio::join!(fetch_bytes(store), get_member(store, &hit));
    let current = fresh?.is_some_and(|f| f.cached && f.etag.as_deref() == Some(&etag));
    Ok(match (current, bytes) {
        (true, Ok(bytes)) => Some((hit, bytes)),
        _ => None,
    })
}

fn cat_following(store: &Store, path: &[u8], out: &mut dyn Write, links: usize) -> Result<()> {
    let shown = String::from_utf8_lossy(path).to_string();
    let (hit, got) = match store.rt.block_on(speculate(store, path))? {
        Some(found) => found,
        None => {
            // Not in a cached manifest: the manifest, and at the same time (on a second
            // connection) the object a prefix of plain objects would hold for `path`.
            // Its shard gone meanwhile (a prune compacted it after the manifest was
            // read), the manifest is read once more: it names the new shard.
            let mut again = true;
            loop {
                let (manifest, object) = store.rt.block_on(async {
                    match links {
                        0 => {
                            let (m, o) = tokio::join!(fetch_bytes(store), get_file(store, path));
                            (m, Some(o))
                        }
                        _ => (fetch_bytes(store).await, None),
                    }
                });
                let f = match (manifest?, object) {
                    (Some(f), _) => f,
                    (None, Some(object)) => return cat_object(store, path, object, out),
                    (None, None) => return Err(no_upload(store)),
                };
                let hit = locate(store, f, path)?.ok_or_else(|| {
                    S3Error::new(format!("{shown}: no such member in {}", store.loc))
                })?;
                let key = store.key(&shard_name(&hit.fingerprint));
                match store.rt.block_on(get_member(store, &hit)) {
                    Ok(got) => break (hit, got),
                    Err(object_store::Error::NotFound { .. }) if std::mem::take(&mut again) => {}
                    Err(e) => return Err(store.error(&key, "read", &e)),
                }
            }
        }
    };
    let key = store.key(&shard_name(&hit.fingerprint));
    // Read as it arrives, a chunk at a time: a member of any size in bounded memory.
    let mut reader = Reader::new(BodyReader::new(store, got));
    let bad = |e: &dyn std::fmt::Display| {
        S3Error::new(format!("{shown}: in s3://{}/{key}: {e}", store.loc.bucket))
    };
    let mut entry = reader
        .next_entry()
        .map_err(|e| bad(&e))?
        .ok_or_else(|| bad(&"no member at the manifest's offset"))?;
    reader.lay_out(&mut entry, None).map_err(|e| bad(&e))?;
    let stored = hit.stored.as_deref().unwrap_or(path);
    if entry.path.strip_suffix(b"/").unwrap_or(&entry.path) != stored {
        return Err(bad(&"the member there has another name"));
    }
    match (hit.kind, &entry.link_target) {
        (0, _) => {}
        (3, Some(target)) if links < MAX_LINKS => {
            let target = target.clone();
            return cat_following(store, &target, out, links + 1);
        }
        _ => return Err(S3Error::new(format!("{shown}: not a regular file"))),
    }
    let mut data = reader.data();
    let write = |out: &mut dyn Write, data: &mut dyn Read| -> io::Result<()> {
        match &entry.sparse {
            None => {
                io::copy(data, out)?;
            }
            Some(runs) => {
                let mut at = 0;
                for &(off, len) in runs {
                    io::copy(&mut io::repeat(0).take(off - at), out)?;
                    io::copy(&mut data.take(len), out)?;
                    at = off + len;
                }
                io::copy(&mut io::repeat(0).take(entry.size.saturating_sub(at)), out)?;
            }
        }
        Ok(())
    };
    write(out, &mut data).map_err(|e| bad(&e))
}
