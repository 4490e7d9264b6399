//! `--layout=objects`: a tree as one plain object per file under the prefix, for data
//! that other S3 tools (rclone, the AWS CLI, s3fs) must read as it is, with each file's
//! metadata in object user metadata the way rclone keeps it ([`metadata`]); and any
//! such prefix (no ferry manifest in it, whoever wrote it) read back into a tree.
//!
//! [`keys`] maps paths to keys and checks listed keys; [`listing`] lists a prefix and
//! reads each object's metadata; [`upload`] sends (and with `--delete`, [`delete`]
//! removes what SRC no longer has), [`download`] fetches, both with many requests in
//! flight; [`read`] is `ls` and `cat` of such a prefix.

pub mod delete;
pub mod download;
pub mod keys;
pub mod listing;
pub mod metadata;
pub mod read;
pub mod upload;

pub use download::{download_objects, FetchOptions};
pub use upload::{upload_objects, ObjectsOptions, SentObjects};

/// Whether the prefix holds plain objects rather than a ferry upload (no manifest, but
/// objects); an error when it holds neither (see [`listing::plain_objects_here`]).
pub fn holds_plain_objects(store: &crate::Store) -> crate::Result<bool> {
    use object_store::ObjectStoreExt;
    let key = store.manifest_key();
    if store.loc.snapshot.is_some() {
        // A snapshot is of an upload in shards, never of plain objects.
        return match store.rt.block_on(store.s3.get_range(&key, 0..1)) {
            Ok(_) => Ok(false),
            Err(object_store::Error::NotFound { .. }) => Err(crate::cat::no_upload(store)),
            Err(e) => Err(store.error(&key, "read the snapshot", &e)),
        };
    }
    // A GET of one byte, not a HEAD: errors of a HEAD have no body to tell a wrong
    // region or key by.
    match store.rt.block_on(store.s3.get_range(&key, 0..1)) {
        Ok(_) => Ok(false),
        Err(object_store::Error::NotFound { .. }) => {
            listing::plain_objects_here(store).map(|()| true)
        }
        Err(e) => Err(store.error(&key, "read the manifest", &e)),
    }
}

/// The error for a prefix that holds neither a ferry upload nor any object.
pub fn nothing_here(store: &crate::Store) -> crate::S3Error {
    crate::S3Error::new(format!(
        "{}: no ferry upload here (no {}) and no objects",
        store.loc,
        crate::manifest::NAME
    ))
}
