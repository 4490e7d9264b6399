//! ferry-core: the entry model, the parallel local-tree walker, the data movers and the
//! local-tree sink that every ferry job is built from.
//!
//! Every job has one shape: a **source** pushes a stream of [`Entry`]s into a **sink**
//! ([`TreeSink`]). `copy` is the local walker ([`walk()`]) pushing into the local-tree
//! sink ([`LocalTreeSink`]) with no serialisation in between. Other endpoints reuse the
//! pieces, not always through the trait: `pack` and the network sender are sinks of the
//! same walk; `unpack`, the network receiver and S3 downloads feed the local-tree sink,
//! partly by path through methods of its own (`dir_at`, `dir_below`, `leaf_again`); an
//! S3 upload collects its walk into a list, then packs each shard by a filtered walk.
//!
//! File data moves by the cheapest path the pair allows ([`data::Mover`]): clone, then
//! `copy_file_range`, then buffered read/write; holes are kept and all-zero blocks that
//! pass through memory become holes.
//!
//! ```no_run
//! use ferry_core::{copy_tree, CopyOptions, Error, Reporter, Stats};
//! struct Print;
//! impl Reporter for Print {
//!     fn error(&self, e: &Error) { eprintln!("{e}") }
//!     fn warn(&self, m: &str) { eprintln!("{m}") }
//! }
//! let stats = Stats::default();
//! copy_tree("src".as_ref(), "dst".as_ref(), &CopyOptions::default(), &stats, &Print)?;
//! println!("{} files, {} errors", stats.snapshot().files, stats.snapshot().errors);
//! # Ok::<(), ferry_core::Error>(())
//! ```
#![deny(missing_docs)]

pub mod changes;
pub mod content;
pub mod copy;
pub mod count;
pub mod data;
pub mod delete;
pub mod entry;
pub mod error;
pub mod filter;
pub mod gate;
pub mod limits;
pub mod links;
pub mod local;
pub mod meta;
pub mod pool;
pub mod prefetch;
pub mod preview;
pub mod pseudo;
pub mod sink;
pub mod sparse;
pub mod stamp;
pub mod stats;
pub mod touch;
pub mod utc;
pub mod walk;
pub mod xattr;
pub mod zero;

pub use copy::{copy_tree, CopyOptions};
pub use entry::{Entry, EntryKind, Metadata, RelPath};
pub use error::{Error, Reporter, Result};
pub use local::LocalTreeSink;
pub use sink::TreeSink;
pub use stats::Stats;
pub use walk::walk;
