//! Reading without downloading: the manifest (kept in `$XDG_CACHE_HOME/ferry/s3`,
//! revalidated by its ETag with a conditional GET), `ls` from it, and `cat` of one
//! member with one ranged GET of its headers and data, parsed by the strict tar reader.

use crate::manifest::{Manifest, Member, NAME};
use crate::store::Store;
use crate::{Result, S3Error};
use ferry_archive::tar::Reader;
use object_store::{GetOptions, ObjectStore, ObjectStoreExt};
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

/// The manifest at `store`'s location, None if there is none.
pub async fn fetch_manifest(store: &Store) -> Result<Option<Manifest>> {
    let key = store.key(NAME);
    let cache = cache_file(store);
    let cached = cache.as_ref().and_then(|c| {
        let bytes = std::fs::read(c).ok()?;
        let (etag, body) = bytes.split_at(bytes.iter().position(|&b| b == b'\n')?);
        Some((String::from_utf8(etag.to_vec()).ok()?, body[1..].to_vec()))
    });
    let opts = GetOptions {
        if_none_match: cached.as_ref().map(|c| c.0.clone()),
        ..GetOptions::default()
    };
    let what = format!("s3://{}/{key}", store.loc.bucket);
    let got = match store.s3.get_opts(&key, opts).await {
        Ok(got) => got,
        Err(object_store::Error::NotModified { .. }) => {
            let body = cached.map(|c| c.1).unwrap_or_default();
            return Manifest::decode(&body, &what).map(Some);
        }
        Err(object_store::Error::NotFound { source, .. })
            if !source.to_string().contains("NoSuchBucket") =>
        {
            return Ok(None);
        }
        Err(e) => return Err(store.error(&key, "read the manifest", &e)),
    };
    let etag = got.meta.e_tag.clone();
    let body = got
        .bytes()
        .await
        .map_err(|e| store.error(&key, "read the manifest", &e))?;
    let manifest = Manifest::decode(&body, &what)?;
    if let (Some(cache), Some(etag)) = (cache, etag) {
        let _ = std::fs::create_dir_all(cache.parent().unwrap_or(&cache));
        let tmp = cache.with_extension("tmp");
        let mut data = etag.into_bytes();
        data.push(b'\n');
        data.extend_from_slice(&body);
        if std::fs::write(&tmp, data).is_ok() {
            let _ = std::fs::rename(tmp, cache);
        }
    }
    Ok(Some(manifest))
}

/// The manifest, or an error saying there is none.
pub async fn need_manifest(store: &Store) -> Result<Manifest> {
    fetch_manifest(store)
        .await?
        .ok_or_else(|| S3Error::new(format!("{}: no ferry upload here (no {NAME})", store.loc)))
}

/// Writes one line per member (`ls`): kind letter, mode, size, path.
pub fn ls(store: &Store, out: &mut dyn Write) -> Result<()> {
    let m = store.rt.block_on(need_manifest(store))?;
    let mut all: Vec<&Member> = m.shards.iter().flat_map(|s| &s.members).collect();
    all.sort_by_key(|m| m.path());
    let write = |out: &mut dyn Write, m: &Member| -> io::Result<()> {
        let kind = b"-dlhpcb"[usize::from(m.k.min(6))] as char;
        write!(out, "{kind}{:04o} {:>12} ", m.mode, m.s)?;
        out.write_all(&m.path())?;
        out.write_all(b"\n")
    };
    for member in all {
        write(out, member).map_err(|e| S3Error::new(format!("write: {e}")))?;
    }
    Ok(())
}

/// Writes the content of the file member `path` to `out`.
pub fn cat(store: &Store, path: &[u8], out: &mut dyn Write) -> Result<()> {
    let m = store.rt.block_on(need_manifest(store))?;
    let shown = String::from_utf8_lossy(path).to_string();
    let find = |p: &[u8]| {
        m.shards
            .iter()
            .flat_map(|s| s.members.iter().map(move |m| (s, m)))
            .find(|(_, m)| m.path() == p)
    };
    let (shard, member) = find(path)
        .ok_or_else(|| S3Error::new(format!("{shown}: no such member in {}", store.loc)))?;
    let key = store.key(&shard.name());
    let bytes = store
        .rt
        .block_on(store.s3.get_range(&key, member.o..member.e))
        .map_err(|e| store.error(&key, "read", &e))?;
    let mut reader = Reader::new(&bytes[..]);
    let bad = |e: &dyn std::fmt::Display| {
        S3Error::new(format!("{shown}: in s3://{}/{key}: {e}", store.loc.bucket))
    };
    let entry = reader
        .next_entry()
        .map_err(|e| bad(&e))?
        .ok_or_else(|| bad(&"no member at the manifest's offset"))?;
    if entry.path.strip_suffix(b"/").unwrap_or(&entry.path) != path {
        return Err(bad(&"the member there has another name"));
    }
    match (member.k, &entry.link_target) {
        (0, _) => {}
        (3, Some(target)) => {
            let target = target.clone();
            return cat(store, &target, out);
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
