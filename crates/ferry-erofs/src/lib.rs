//! ferry-erofs: an EROFS metadata image for a tar archive, so that the kernel mounts
//! the archive itself.
//!
//! The image ([`build`]) holds the tree (inodes, directories, symlinks, xattrs) and,
//! for each file, chunk indexes pointing into the archive, which the kernel reads as
//! the image's extra device: with 512-byte blocks (Linux 6.4 and later) every tar
//! member's data is a run of the archive's blocks, so the archive is not copied.
//! It is written from a tree table ([`ferry_archive::tree`]) that ferry built, or that
//! the archive carries and ferry checked against the tar's headers
//! (`ferry_archive::tree::check`); the format is the kernel's
//! (Documentation/filesystems/erofs.rst, fs/erofs/erofs_fs.h), see [`format`].
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let table: ferry_archive::tree::Table = todo!();
//! let mut out = std::io::BufWriter::new(std::fs::File::create("tree.erofs")?);
//! let built = ferry_erofs::build(&table, 1 << 20, &ferry_erofs::Options::default(), &mut out)?;
//! // mount -t erofs -o ro,device=tree.tar tree.erofs /mnt
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod chunks;
pub mod dir;
pub mod format;
pub mod image;
pub mod walk;
pub mod xattr;

use ferry_archive::tree::Table;

/// Why an image could not be built; the message names the path concerned.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ErofsError(pub String);

/// What the image says of itself.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The volume's UUID.
    pub uuid: [u8; 16],
    /// The volume's name (up to 16 bytes).
    pub volume_name: [u8; 16],
    /// Keep the archive's numeric owners even where its names name others here (see
    /// [`ferry_archive::tree::shown`]: the image shows the tree `unpack` makes).
    pub numeric_owner: bool,
}

/// A built image.
#[derive(Debug)]
pub struct Built {
    /// The image's length in bytes.
    pub len: u64,
    /// How many inodes it holds.
    pub inodes: u64,
    /// What the image leaves out (xattrs EROFS cannot hold), one line each, with the path.
    pub left_out: Vec<String>,
}

/// Writes the image of the tree in `table` to `out` (from its start, front to back,
/// never held whole), over an archive of `archive_len` bytes holding its files' data at
/// the offsets the table records. An image that would be larger than the archive (plus
/// [`image::IMAGE_SLACK`]) is refused, naming the file that makes it so.
pub fn build(
    table: &Table,
    archive_len: u64,
    opts: &Options,
    out: &mut dyn std::io::Write,
) -> Result<Built, ErofsError> {
    let walked = walk::walk(table)?;
    let written = image::write(table, &walked, archive_len, opts, out)?;
    Ok(Built {
        len: written.len,
        inodes: walked.order.len() as u64,
        left_out: written.left_out,
    })
}
