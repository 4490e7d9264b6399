//! Writing ferry archives: header encoding and the pack sink.

pub mod fill;
pub mod header;
pub mod pack;
mod pack_sink;
pub mod pax_delete;
pub mod restamp;
pub mod stream_out;
