//! Reading archives: opening one (and its index, if it has one), extracting it, listing
//! it and printing one member.

pub mod archive;
pub mod convert;
pub mod list;
pub mod unpack;

pub use archive::{Archive, ArchiveError};
