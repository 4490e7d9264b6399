//! ferry-s3: trees in S3-compatible object storage as packed, indexed shards.
//!
//! An upload walks the tree once to plan ([`plan`]): members are cut, in path order,
//! into shards of about `shard_size` bytes (every name of a multiply-linked inode in
//! the shard of its first name, so hardlinks never cross shards), plus one last shard
//! holding the directories alone. Each shard is packed by ferry-archive's `pack` (the
//! one tar writer) as a stream, and sent with a multipart upload whose parts go up in
//! parallel as they are packed ([`stream_put`], [`upload`]). A shard's
//! object key is the fingerprint of its members' metadata, so a rerun finds the shards
//! it already sent, and a changed tree re-sends only the shards whose members changed.
//! The [`manifest`] (every shard with its size, ETag and members' offsets) is written
//! last: until it is, a reader sees the previous upload whole, or nothing.
//!
//! A download ([`download`]) reads the manifest, fetches shards with ranged GETs and
//! unpacks each with unpack's code (hostile-input rules, metadata, holes, hardlinks),
//! the directory shard last so directory metadata is set after everything below it.
//! [`cat`] reads one member with one ranged GET, the manifest cached locally and
//! revalidated by its ETag. [`mount`] serves an upload read-only through ferry-mount's
//! filesystem, with ranged GETs and a block cache.
#![deny(missing_docs)]

pub mod body;
pub mod cat;
pub mod checked;
pub mod claim;
pub mod compact;
pub mod credential_process;
pub mod dirs_first;
pub mod download;
pub mod lease;
pub mod lookup;
pub mod manifest;
pub mod mount;
pub mod objects;
pub mod parts;
pub mod pending;
pub mod plan;
pub mod profile;
pub mod prune;
pub mod put;
pub mod renames;
pub mod shard;
pub mod snapshot;
pub mod store;
pub mod stream_put;
pub mod upload;

pub use object_store;
pub use store::{Location, Store};

/// A failure of an object-storage job: one line naming the object or path.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct S3Error(pub String);

impl S3Error {
    /// An error with this message.
    pub fn new(msg: impl Into<String>) -> S3Error {
        S3Error(msg.into())
    }
}

/// Results of this crate.
pub type Result<T> = std::result::Result<T, S3Error>;
