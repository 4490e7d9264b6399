//! `ferry mount --kernel`: the archive mounted by the kernel's EROFS, no FUSE.
//!
//! [`image`] builds (or finds in the cache) the EROFS image of the archive's tree,
//! whose files' chunks point into the archive; [`attach`] mounts it read-only with the
//! archive as its extra device: file-backed where the kernel can (Linux 6.12 and later,
//! `CONFIG_EROFS_FS_BACKED_BY_FILE`), else through two loop devices, freed when the
//! filesystem is unmounted and on every failure.
//!
//! The kernel reads file data as it is stored: it does not check the content hashes a
//! ferry archive records (the FUSE mount does).

pub mod attach;
pub mod image;

pub use attach::{mount, unmount, Attached, Backing};
pub use image::{prepare, Image, ImageOrigin};
