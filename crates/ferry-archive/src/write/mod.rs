//! Writing ferry archives: header encoding and the pack sink.

pub mod fill;
pub mod header;
pub mod pack;
pub mod stream_out;
