//! Reading archives: opening one (and its index, if it has one), extracting it, listing
//! it and printing one member, of all members or those asked for.

pub mod acl;
pub mod archive;
mod cat_once;
pub mod convert;
mod extract;
pub mod list;
pub mod lookup;
pub mod order;
mod placed;
pub mod quote;
mod schedule;
pub mod select;
pub mod stream;
pub mod tail;
pub mod unpack;
mod warnings;

pub use archive::{Archive, ArchiveError};
