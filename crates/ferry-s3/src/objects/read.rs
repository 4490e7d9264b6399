//! `ferry ls` and `ferry cat` on a prefix of plain objects (no ferry manifest).
//!
//! `ls`: one LIST, then a HEAD per object (`transfers` at a time), read as a download
//! reads its GETs ([`super::listing`]): mode, owner and mtime from rclone's metadata
//! keys when the object has them, else its size and LastModified. A LIST carries no
//! user metadata, so there is no cheaper way to the modes (rclone's `lsl` also asks
//! per object for its mtimes). `cat`: one GET of `PREFIX/PATH`, PATH checked first as
//! a listed key is, so it cannot reach outside the prefix.

use super::keys::{key_of, listed, Listed, LINK_SUFFIX};
use super::listing::{ask, entry_of, marker_entry, nodes, Got, Wanted};
use crate::store::Store;
use crate::{Result, S3Error};
use ferry_core::entry::{Entry, EntryKind};
use ferry_core::error::{Error, Reporter};
use futures::StreamExt;
use object_store::path::Path as Key;
use object_store::{GetOptions, GetResult, ObjectStore};
use std::io::Write;

/// The entries of the objects under the prefix that `taken` takes (by path), in path
/// order (files, symlinks, and
/// the empty directories `dir/` markers stand for); an object that could not be asked
/// about is reported, naming it, and left out. An error when the prefix holds no plain
/// objects (see `listing::plain_objects_in`).
pub fn list_entries(
    store: &Store,
    taken: &dyn Fn(&[u8]) -> bool,
    transfers: usize,
    reporter: &dyn Reporter,
) -> Result<Vec<Entry>> {
    let mut wanted = nodes(store, true, reporter)?;
    wanted.retain(|w| taken(w.path().as_bytes()));
    let umask = ferry_core::meta::MetaWriter::new().umask();
    let mut entries = store.rt.block_on(
        futures::stream::iter(&wanted)
            .map(|w| async move { (w, described(store, w, umask).await) })
            .buffer_unordered(transfers.max(1))
            .collect::<Vec<_>>(),
    );
    entries.sort_by(|a, b| a.0.path().cmp(b.0.path()));
    let mut out = Vec::with_capacity(entries.len());
    for (w, entry) in entries {
        match entry {
            Ok(e) => out.push(e),
            Err(e) => reporter.error(&Error::new(w.path(), "read", std::io::Error::other(e.0))),
        }
    }
    Ok(out)
}

/// The entry of the listed object `w`, from its HEAD.
async fn described(store: &Store, w: &Wanted, umask: u32) -> Result<Entry> {
    let got = match ask(store, w, true).await? {
        Got::Marker => return Ok(marker_entry(w, umask)),
        Got::Object(got) => got,
    };
    let kind = match w.node {
        Listed::File(_) => EntryKind::File {
            size: got.meta.size,
        },
        // The target is the object's body, which a HEAD does not bring.
        Listed::Symlink(_) => EntryKind::Symlink { target: Vec::new() },
    };
    Ok(entry_of(w, kind, &got.meta, &got.attributes, umask))
}

/// The key of the file `path` below the prefix; an error naming `path` when it is no
/// plain relative path (what a listed key must be).
fn file_key(store: &Store, path: &[u8]) -> Result<Key> {
    let shown = String::from_utf8_lossy(path);
    let refused = |why: &str| S3Error::new(format!("{shown}: refused: {why}"));
    let key = key_of(&store.loc.prefix, path, false).map_err(refused)?;
    match listed(&store.loc.prefix, &key).map_err(refused)? {
        Listed::File(p) if p.as_bytes() == path => {
            Key::parse(&key).map_err(|e| refused(&e.to_string()))
        }
        _ => Err(refused(&format!(
            "names a symlink's object (`{LINK_SUFFIX}`)"
        ))),
    }
}

/// The object of the file `path` and its GET, for `cat` (sent before it is known
/// whether the prefix holds a ferry upload); an error naming PATH when it cannot be an
/// object's name below the prefix (no request is made then).
pub type FileGet = Result<(Key, object_store::Result<GetResult>)>;

/// Sends the GET of the file `path` ([`FileGet`]).
pub(crate) async fn get_file(store: &Store, path: &[u8]) -> FileGet {
    let key = file_key(store, path)?;
    let got = store.s3.get_opts(&key, GetOptions::default()).await;
    Ok((key, got))
}

/// Writes the object of the file `path` to `out`, from `got` (its GET, sent by `get_file`).
pub fn cat_object(store: &Store, path: &[u8], got: FileGet, out: &mut dyn Write) -> Result<()> {
    let (key, got) = got?;
    let shown = String::from_utf8_lossy(path).to_string();
    let got = match got {
        Ok(got) => got,
        Err(object_store::Error::NotFound { .. }) => {
            return Err(S3Error::new(format!("{shown}: {}", missing(store, path))));
        }
        Err(e) => return Err(store.error(&key, "read", &e)),
    };
    let mut body = got.into_stream();
    store.rt.block_on(async {
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| store.error(&key, "read", &e))?;
            out.write_all(&chunk)
                .map_err(|e| S3Error::new(format!("write: {e}")))?;
        }
        Ok(())
    })
}

/// Why there is no object for the file `path`: it is a symlink, a directory, or not
/// there (one more request, only once the GET has failed).
fn missing(store: &Store, path: &[u8]) -> String {
    let Ok(link) = key_of(&store.loc.prefix, path, true) else {
        return format!("no such object in {}", store.loc);
    };
    let link = Key::from(link);
    let opts = GetOptions {
        head: true,
        ..GetOptions::default()
    };
    match store.rt.block_on(store.s3.get_opts(&link, opts)) {
        Ok(_) => format!(
            "not a regular file (a symlink: s3://{}/{link})",
            store.loc.bucket
        ),
        Err(_) => format!("no such object in {}", store.loc),
    }
}
