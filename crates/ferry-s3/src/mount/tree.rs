//! The tree a mount of an upload serves, built from its shards' own indexes.
//!
//! Each shard is a ferry archive whose index holds every member's full metadata
//! (owners, nanosecond times, xattrs, sparse runs, content hashes, link targets), which
//! the manifest does not carry. So the tree is built, once per manifest, by reading
//! each shard's footer and index (a few ranged GETs per shard, through the block cache)
//! and adding every entry, in manifest order, to one [`TreeBuilder`] with its offsets
//! moved to the shard's addresses ([`super::blocks`]): the builder resolves the shards
//! into one tree exactly as for one archive (the directory shard, last, sets the
//! directories' metadata; hardlinks never cross shards). The caller keeps the table in
//! the mount cache, keyed by the manifest's ETag, so the next mount reads nothing but
//! the manifest's ETag.
//!
//! Everything read is untrusted: the footer and every entry are checked as `unpack`
//! checks a local archive's (bounds, the entries tiling the tar data, the index's
//! checksum), and a member the builder cannot place is left out and reported. Only
//! what the manifest names is added: of a shard kept from an earlier upload, the
//! members it lists (a file it names otherwise than the shard does under the
//! manifest's name), and of the directories every shard holds, those the directory
//! shard names.

use super::blocks::{layout, ShardObject};
use ferry_archive::index::{Footer, Index, IndexEntry, FOOTER_LEN};
use ferry_archive::tree::{DirDefaults, Skipped, TreeBuilder};
use ferry_mount::data::DataAt;
use std::io::{self, BufReader, Read};

/// How many skipped members are kept to be reported.
const SKIPPED_KEPT: usize = 1000;

/// What the manifest makes of an entry of a shard's index.
pub enum Named {
    /// Not one of its members.
    Not,
    /// A member, under the name the index gives.
    AsStored,
    /// A member under this name (a file renamed since it was stored).
    As(Vec<u8>),
}

/// A tree built from an upload's shards.
pub struct Built {
    /// The tree.
    pub builder: TreeBuilder,
    /// Members left out, and why (the first [`SKIPPED_KEPT`]).
    pub skipped: Vec<Skipped>,
    /// The end of the address space the shards take.
    pub data_end: u64,
}

/// Reads `data` from `pos` on.
struct Reader<'a> {
    data: &'a dyn DataAt,
    pos: u64,
}

impl Read for Reader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.data.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// Builds the tree of the shards `shards` (in manifest order) whose bytes `data`
/// holds at their addresses; `shown(i)` names shard `i` in errors. Of shard `i`'s
/// index, only the entries `named(i, entry)` takes are added, under the name it
/// gives: a shard kept from an earlier upload holds members this one no longer names.
pub fn build(
    data: &dyn DataAt,
    shards: &[ShardObject],
    shown: impl Fn(usize) -> String,
    named: impl Fn(usize, &IndexEntry) -> Named,
) -> Result<Built, String> {
    let (bases, data_end) = layout(shards.iter().map(|s| s.size))
        .ok_or_else(|| "the shards are larger than 16 EiB".to_string())?;
    let mut builder: Option<TreeBuilder> = None;
    let mut skipped = Vec::new();
    for (i, s) in shards.iter().enumerate() {
        let bad = |e: &dyn std::fmt::Display| format!("{}: {e}", shown(i));
        let base = bases[i];
        if s.size < FOOTER_LEN + 1024 {
            return Err(bad(&"not a ferry archive (too short)"));
        }
        let mut raw = [0u8; FOOTER_LEN as usize];
        let got = data
            .read_at(&mut raw, base + s.size - FOOTER_LEN)
            .map_err(|e| bad(&e))?;
        if got != raw.len() {
            return Err(bad(&"shorter than the manifest says"));
        }
        let footer = Footer::parse(&raw, s.size)
            .map_err(|e| bad(&e))?
            .ok_or_else(|| bad(&"not a ferry archive (no index)"))?;
        let r = BufReader::with_capacity(
            256 << 10,
            Reader {
                data,
                pos: base + footer.index_offset,
            },
        );
        for e in Index::new(footer).entries(r) {
            let (_, mut e) = e.map_err(|e| bad(&e))?;
            match named(i, &e) {
                Named::Not => continue,
                Named::AsStored => {}
                Named::As(path) => e.path = path,
            }
            e.header_offset += base;
            e.data_offset += base;
            let b = builder.get_or_insert_with(|| {
                TreeBuilder::new(DirDefaults {
                    mode: 0o755,
                    uid: e.uid,
                    gid: e.gid,
                    mtime: e.mtime,
                })
            });
            if let Err(why) = b.add(&e) {
                if skipped.len() < SKIPPED_KEPT {
                    skipped.push(why);
                }
            }
        }
    }
    let builder = builder.unwrap_or_else(|| {
        TreeBuilder::new(DirDefaults {
            mode: 0o755,
            uid: 0,
            gid: 0,
            mtime: (0, 0),
        })
    });
    Ok(Built {
        builder,
        skipped,
        data_end,
    })
}
