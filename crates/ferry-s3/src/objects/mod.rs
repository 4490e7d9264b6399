//! `--layout=objects`: a tree as one plain object per file under the prefix, for data
//! that other S3 tools (rclone, the AWS CLI, s3fs) must read as it is, with each file's
//! metadata in object user metadata the way rclone keeps it ([`metadata`]); and any
//! such prefix (no ferry manifest in it, whoever wrote it) read back into a tree.
//!
//! [`keys`] maps paths to keys and checks listed keys; [`upload`] sends, [`download`]
//! fetches, both with many requests in flight.

pub mod download;
pub mod keys;
pub mod metadata;
pub mod upload;

pub use download::{download_objects, FetchOptions};
pub use upload::{upload_objects, ObjectsOptions, SentObjects};

/// Whether the prefix holds plain objects rather than a ferry upload (no manifest, but
/// objects); an error when it holds neither.
pub fn holds_plain_objects(store: &crate::Store) -> crate::Result<bool> {
    use object_store::ObjectStoreExt;
    let key = store.key(crate::manifest::NAME);
    // A GET of one byte, not a HEAD: errors of a HEAD have no body to tell a wrong
    // region or key by.
    match store.rt.block_on(store.s3.get_range(&key, 0..1)) {
        Ok(_) => Ok(false),
        Err(object_store::Error::NotFound { .. }) => match download::any_objects(store)? {
            true => Ok(true),
            false => Err(crate::S3Error::new(format!(
                "{}: no ferry upload and no objects here",
                store.loc
            ))),
        },
        Err(e) => Err(store.error(&key, "read the manifest", &e)),
    }
}
