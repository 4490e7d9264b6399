//! ferry-net: ferry over the network, as rsync does it over ssh, or to a daemon.
//!
//! `ferry copy SRC HOST:DST` runs `ssh HOST ferry serve --stdio` ([`ssh`]) and speaks
//! ferry's protocol over the child's pipes; the serving end ([`serve`]) speaks it over
//! its standard input and output. A transport is nothing more than a byte stream each
//! way (`Read` and `Write`), so TLS carries the same protocol: `ferry serve --listen`
//! ([`daemon`]) serves many clients over TLS ([`tls`], [`conn`]), each job admitted
//! when a place is free ([`admission`]) and uploads placed with buffers of one shared
//! pool (`ferry_core::pool`); `ferry copy SRC ferry://HOST/PATH` reaches it ([`dial`]).
//!
//! The protocol ([`frame`], [`proto`]): a handshake (magic, version), one request
//! (upload or download, the remote path, options), then length-prefixed frames of
//! bounded size. The receiver first streams a manifest of what its destination holds
//! ([`manifest`]); the sender packs its tree as a ferry archive, leaving out what is
//! up to date, and streams it in data frames ([`stream`]): the archive format is the
//! wire format, and the receiver unpacks it with the same code as `ferry unpack -`,
//! checking every file's content hash against the archive's index as it arrives
//! ([`transfer`]).
//!
//! ```no_run
//! use ferry_net::{client, ssh};
//! # fn main() -> Result<(), ferry_net::NetError> {
//! let mut conn = ssh::Ssh::spawn("ssh -p 2222", "backup@host", "ferry")?;
//! let stats = ferry_core::Stats::default();
//! struct Quiet;
//! impl ferry_core::error::Reporter for Quiet {
//!     fn error(&self, _: &ferry_core::error::Error) {}
//!     fn warn(&self, _: &str) {}
//! }
//! let opts = client::Options::default();
//! let (r, w) = conn.streams()?;
//! let src = ferry_net::transfer::Source::Tree("/srv/tree".as_ref());
//! client::upload(r, w, src, b"/data/tree", &opts, &stats, &Quiet, None)?;
//! conn.finish()?;
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub mod admission;
pub mod apply;
pub mod beneath;
pub mod charge;
pub mod client;
pub mod conn;
pub mod daemon;
pub mod deltas;
pub mod dial;
pub mod frame;
pub mod handshake;
pub mod manifest;
pub mod meta_wire;
pub mod plan;
pub mod preauth;
pub mod proto;
pub mod serve;
pub mod ssh;
pub mod stream;
#[cfg(test)]
mod test_support;
pub mod tls;
pub mod transfer;

use ferry_archive::read::ArchiveError;
use std::io;

/// Why a network copy could not run or go on (one line each).
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// Reading or writing the connection failed.
    #[error("connection: {0}")]
    Io(#[from] io::Error),
    /// The peer closed the connection where a frame was to start.
    #[error("the other end closed the connection")]
    Closed,
    /// The peer closed the connection in the middle of a frame.
    #[error("the other end closed the connection in the middle of a frame")]
    ClosedMidFrame,
    /// A frame announced more bytes than a frame may hold.
    #[error("malformed frame: {len} bytes, more than the {max} a frame may hold")]
    TooLarge {
        /// What the frame announced.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// A frame that does not decode, or is not the one expected here.
    #[error("malformed frame: {0}")]
    Frame(String),
    /// The first bytes are not ferry's handshake.
    #[error("handshake: {0}")]
    Handshake(String),
    /// The other end stopped the job, saying why.
    #[error("{0}")]
    Remote(String),
    /// A path on the serving side was refused.
    #[error("{0}")]
    Refused(String),
    /// The local end's tree could not be read or written at all.
    #[error("{}: {}: {}", .0.path, .0.op, .0.os)]
    Path(ferry_core::error::Error),
    /// The archive stream could not be unpacked.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// The ssh command could not be run, or failed.
    #[error("{0}")]
    Ssh(String),
    /// TLS could not be set up, or the server's certificate is not the one pinned.
    #[error("TLS: {0}")]
    Tls(String),
}

impl NetError {
    /// A malformed-frame error.
    pub fn frame(why: impl Into<String>) -> Self {
        NetError::Frame(why.into())
    }
}
