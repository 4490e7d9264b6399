//! EROFS on-disk structures, as the kernel's `fs/erofs/erofs_fs.h` and
//! Documentation/filesystems/erofs.rst define them, encoded little-endian into byte
//! arrays: the superblock, a device slot, the 64-byte (extended) inode, a chunk index,
//! a dirent, and the inline xattr header and entry.
//!
//! Only what an image over tar data needs is here: uncompressed inodes, chunk-based
//! files whose chunks point into the archive (an extra device), flat directories and
//! symlinks whose data is in the image itself.

/// Where the superblock starts (the first 1,024 bytes are left to boot sectors).
pub const SUPER_OFFSET: u64 = 1024;
/// The superblock's magic number.
pub const MAGIC: u32 = 0xE0F5_E1E2;
/// Block size in bits: 512-byte blocks, so that every tar member's data (which starts
/// on a 512-byte boundary) is a block of the archive.
pub const BLOCK_BITS: u8 = 9;
/// Block size in bytes.
pub const BLOCK: u64 = 1 << BLOCK_BITS;
/// Size of the superblock.
pub const SUPER_LEN: usize = 128;
/// Size of a device slot.
pub const DEVICE_SLOT_LEN: usize = 128;
/// Size of an extended inode.
pub const INODE_LEN: usize = 64;
/// Inodes are addressed in units of this many bytes (a nid is an offset / 32).
pub const INODE_SLOT: u64 = 32;
/// Size of a dirent.
pub const DIRENT_LEN: usize = 12;
/// Size of a chunk index.
pub const CHUNK_INDEX_LEN: usize = 8;
/// Size of the inline xattr header.
pub const XATTR_HEADER_LEN: usize = 12;
/// Size of an xattr entry's fixed part.
pub const XATTR_ENTRY_LEN: usize = 4;
/// The longest name a dirent holds.
pub const NAME_MAX: usize = 255;
/// A chunk index's address of a hole.
pub const NULL_ADDR: u32 = u32::MAX;
/// The largest chunk, in bits over the block size (the chunk format's 5-bit field).
pub const MAX_CHUNK_BITS: u32 = 31;

/// Incompatible feature: chunk-based files.
pub const INCOMPAT_CHUNKED_FILE: u32 = 0x4;
/// Incompatible feature: a device table (extra devices).
pub const INCOMPAT_DEVICE_TABLE: u32 = 0x8;
/// Chunk format flag: 8-byte chunk indexes (with a device id), not a block map.
pub const CHUNK_FORMAT_INDEXES: u16 = 0x20;

/// Inode data layouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Data in consecutive blocks of the image from `raw_blkaddr`.
    FlatPlain = 0,
    /// Data in chunks, each found through a chunk index after the inode.
    ChunkBased = 4,
}

/// File types of a dirent (the kernel's `FT_*`).
pub mod file_type {
    /// Regular file.
    pub const REG: u8 = 1;
    /// Directory.
    pub const DIR: u8 = 2;
    /// Character device.
    pub const CHR: u8 = 3;
    /// Block device.
    pub const BLK: u8 = 4;
    /// Named pipe.
    pub const FIFO: u8 = 5;
    /// Symbolic link.
    pub const SYMLINK: u8 = 7;
}

/// The superblock's variable fields.
#[derive(Clone, Debug, Default)]
pub struct Super {
    /// nid of the root directory (must fit 16 bits).
    pub root_nid: u16,
    /// Number of inodes.
    pub inos: u64,
    /// Blocks of the image (the primary device).
    pub blocks: u32,
    /// Volume UUID.
    pub uuid: [u8; 16],
    /// Volume name.
    pub volume_name: [u8; 16],
    /// Number of extra devices.
    pub extra_devices: u16,
    /// Where the device table starts, in units of [`DEVICE_SLOT_LEN`] from byte 0.
    pub devt_slotoff: u16,
}

impl Super {
    /// The 128-byte superblock.
    pub fn encode(&self) -> [u8; SUPER_LEN] {
        let mut b = [0u8; SUPER_LEN];
        put32(&mut b, 0, MAGIC);
        // checksum (4) and feature_compat (8) stay 0: no checksum, no compat features.
        b[12] = BLOCK_BITS;
        put16(&mut b, 14, self.root_nid);
        put64(&mut b, 16, self.inos);
        // build_time (24), build_time_nsec (32): compact inodes only; none are written.
        put32(&mut b, 36, self.blocks);
        // meta_blkaddr (40) 0: nids count from byte 0; xattr_blkaddr (44) 0: no shared xattrs.
        b[48..64].copy_from_slice(&self.uuid);
        b[64..80].copy_from_slice(&self.volume_name);
        let mut incompat = INCOMPAT_CHUNKED_FILE;
        if self.extra_devices > 0 {
            incompat |= INCOMPAT_DEVICE_TABLE;
        }
        put32(&mut b, 80, incompat);
        put16(&mut b, 86, self.extra_devices);
        put16(&mut b, 88, self.devt_slotoff);
        // dirblkbits (90) 0: directory blocks are filesystem blocks.
        b
    }
}

/// A device slot: an extra device of `blocks` blocks, addressed by its own device id
/// (`mapped_blkaddr` 0: not part of a unified address space). The tag is left empty,
/// so the image mounts only with the device named (`-o device=`).
pub fn device_slot(blocks: u32) -> [u8; DEVICE_SLOT_LEN] {
    let mut b = [0u8; DEVICE_SLOT_LEN];
    put32(&mut b, 64, blocks);
    b
}

/// An extended (64-byte) inode's fields.
#[derive(Clone, Debug, Default)]
pub struct Inode {
    /// Data layout.
    pub layout: u8,
    /// Inline xattr count (the header's 12 bytes count as one, then 4-byte units).
    pub xattr_icount: u16,
    /// Type and permission bits.
    pub mode: u16,
    /// Size in bytes.
    pub size: u64,
    /// `i_u`: a block address, a device number, or chunk info.
    pub u: u32,
    /// Inode number for 32-bit `stat`.
    pub ino: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Modification time, seconds.
    pub mtime: i64,
    /// Modification time, nanoseconds.
    pub mtime_nsec: u32,
    /// Link count.
    pub nlink: u32,
}

impl Inode {
    /// The 64-byte extended inode.
    pub fn encode(&self) -> [u8; INODE_LEN] {
        let mut b = [0u8; INODE_LEN];
        // i_format: bit 0 the version (1: extended), bits 1-3 the data layout.
        put16(&mut b, 0, 1 | (u16::from(self.layout) << 1));
        put16(&mut b, 2, self.xattr_icount);
        put16(&mut b, 4, self.mode);
        put64(&mut b, 8, self.size);
        put32(&mut b, 16, self.u);
        put32(&mut b, 20, self.ino);
        put32(&mut b, 24, self.uid);
        put32(&mut b, 28, self.gid);
        put64(&mut b, 32, self.mtime as u64);
        put32(&mut b, 40, self.mtime_nsec);
        put32(&mut b, 44, self.nlink);
        b
    }
}

/// `i_u` of a chunk-based inode: chunks of `BLOCK << chunk_bits` bytes, with indexes.
pub fn chunk_info(chunk_bits: u32) -> u32 {
    u32::from(CHUNK_FORMAT_INDEXES | (chunk_bits as u16 & 0x1f))
}

/// `i_u` of a device: the kernel's `new_encode_dev` of `major:minor`.
pub fn encode_rdev(major: u32, minor: u32) -> u32 {
    (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & !0xff) << 12)
}

/// A chunk index: `blkaddr` on device `device` ([`NULL_ADDR`]: a hole).
pub fn chunk_index(device: u16, blkaddr: u32) -> [u8; CHUNK_INDEX_LEN] {
    let mut b = [0u8; CHUNK_INDEX_LEN];
    put16(&mut b, 2, device);
    put32(&mut b, 4, blkaddr);
    b
}

/// A dirent: the inode `nid`, its name at `nameoff` in the block, its file type.
pub fn dirent(nid: u64, nameoff: u16, file_type: u8) -> [u8; DIRENT_LEN] {
    let mut b = [0u8; DIRENT_LEN];
    put64(&mut b, 0, nid);
    put16(&mut b, 8, nameoff);
    b[10] = file_type;
    b
}

/// Size of the inline xattr area for `icount` ([`Inode::xattr_icount`]).
pub fn xattr_ibody_len(icount: u16) -> usize {
    if icount == 0 {
        0
    } else {
        XATTR_HEADER_LEN + 4 * (usize::from(icount) - 1)
    }
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_sizes_are_the_kernels() {
        // erofs_fs.h checks these with BUILD_BUG_ON.
        assert_eq!(Super::default().encode().len(), 128);
        assert_eq!(Inode::default().encode().len(), 64);
        assert_eq!(dirent(0, 0, 0).len(), 12);
        assert_eq!(chunk_index(0, 0).len(), 8);
        assert_eq!(device_slot(0).len(), 128);
        assert_eq!(xattr_ibody_len(1), 12);
        assert_eq!(xattr_ibody_len(3), 20);
    }

    #[test]
    fn superblock_fields_sit_where_the_kernel_reads_them() {
        let s = Super {
            root_nid: 48,
            inos: 7,
            blocks: 100,
            extra_devices: 1,
            devt_slotoff: 9,
            ..Super::default()
        }
        .encode();
        assert_eq!(&s[0..4], &[0xe2, 0xe1, 0xf5, 0xe0]);
        assert_eq!(s[12], 9);
        assert_eq!(u16::from_le_bytes([s[14], s[15]]), 48);
        assert_eq!(u64::from_le_bytes(s[16..24].try_into().unwrap()), 7);
        assert_eq!(u32::from_le_bytes(s[36..40].try_into().unwrap()), 100);
        assert_eq!(u32::from_le_bytes(s[80..84].try_into().unwrap()), 0xc);
        assert_eq!(u16::from_le_bytes([s[86], s[87]]), 1);
        assert_eq!(u16::from_le_bytes([s[88], s[89]]), 9);
    }

    #[test]
    fn inode_fields_sit_where_the_kernel_reads_them() {
        let i = Inode {
            layout: Layout::ChunkBased as u8,
            xattr_icount: 2,
            mode: 0o100644,
            size: 1 << 40,
            u: chunk_info(3),
            ino: 5,
            uid: 70000,
            gid: 80000,
            mtime: -2,
            mtime_nsec: 999_999_999,
            nlink: 3,
        }
        .encode();
        assert_eq!(u16::from_le_bytes([i[0], i[1]]), 0b1001);
        assert_eq!(u16::from_le_bytes([i[2], i[3]]), 2);
        assert_eq!(u16::from_le_bytes([i[4], i[5]]), 0o100644);
        assert_eq!(u64::from_le_bytes(i[8..16].try_into().unwrap()), 1 << 40);
        assert_eq!(u32::from_le_bytes(i[16..20].try_into().unwrap()), 0x23);
        assert_eq!(u32::from_le_bytes(i[24..28].try_into().unwrap()), 70000);
        assert_eq!(i64::from_le_bytes(i[32..40].try_into().unwrap()), -2);
        assert_eq!(
            u32::from_le_bytes(i[40..44].try_into().unwrap()),
            999_999_999
        );
        assert_eq!(u32::from_le_bytes(i[44..48].try_into().unwrap()), 3);
        assert!(i[48..].iter().all(|&b| b == 0));
    }

    #[test]
    fn devices_encode_as_new_encode_dev() {
        assert_eq!(encode_rdev(8, 1), 0x801);
        assert_eq!(
            encode_rdev(1, 0x12345),
            0x12345 & 0xff | 1 << 8 | (0x12300 << 12)
        );
        assert_eq!(chunk_index(1, 7), [0, 0, 1, 0, 7, 0, 0, 0]);
    }
}
