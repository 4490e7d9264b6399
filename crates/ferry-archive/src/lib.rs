//! ferry-archive: the ferry archive format.
//!
//! A ferry archive is an ordinary POSIX pax tar whose file data starts on 4 KiB
//! boundaries, followed by an index. The [`tar`] module reads any tar stream (ferry's,
//! GNU tar's, bsdtar's) strictly: hostile input ends in an error naming the offset.
#![deny(missing_docs)]

pub mod index;
pub mod owners;
pub mod read;
pub mod spill;
pub mod tar;
pub mod transform;
pub mod tree;
pub mod write;
