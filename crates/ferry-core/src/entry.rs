//! The entry model: what every source produces and every sink consumes.
//!
//! An [`Entry`] is one node of a tree: its path relative to the tree's root (raw bytes,
//! because Linux names need not be UTF-8), its [`EntryKind`] and its [`Metadata`].

use std::fmt;

/// A path relative to the root of a tree, as raw bytes without a leading `/`.
///
/// The root itself is the empty path.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelPath(Vec<u8>);

impl RelPath {
    /// The root of a tree.
    pub fn root() -> Self {
        RelPath(Vec::new())
    }

    /// Wraps bytes already known to be a relative path.
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        RelPath(bytes)
    }

    /// This path with `name` appended as one more component.
    pub fn join(&self, name: &[u8]) -> Self {
        let mut v = Vec::with_capacity(self.0.len() + 1 + name.len());
        v.extend_from_slice(&self.0);
        if !v.is_empty() {
            v.push(b'/');
        }
        v.extend_from_slice(name);
        RelPath(v)
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The last component (the whole path for a top-level entry, empty for the root).
    pub fn file_name(&self) -> &[u8] {
        match self.0.iter().rposition(|&b| b == b'/') {
            Some(i) => &self.0[i + 1..],
            None => &self.0,
        }
    }

    /// The directory holding this path (the root for a top-level entry and for the
    /// root itself).
    pub fn parent(&self) -> RelPath {
        let cut = self.0.len() - self.file_name().len();
        RelPath(self.0[..cut.saturating_sub(1)].to_vec())
    }

    /// True for the root of the tree.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }
}

/// Shows the path on one line: bytes that are not printable UTF-8 are escaped (`\n`,
/// `\xFF`), so an error message naming a hostile file name stays one line.
impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str(".");
        }
        write_escaped(f, &self.0)
    }
}

impl fmt::Debug for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}

/// `bytes` as [`write_escaped`] writes them, for a message.
pub fn escaped(bytes: &[u8]) -> String {
    let mut s = String::new();
    let _ = write_escaped(&mut s, bytes);
    s
}

/// Writes `bytes` with control characters and invalid UTF-8 escaped.
pub fn write_escaped(f: &mut impl fmt::Write, bytes: &[u8]) -> fmt::Result {
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\n' => f.write_str("\\n")?,
                '\t' => f.write_str("\\t")?,
                '\\' => f.write_str("\\\\")?,
                c if c.is_control() => write!(f, "\\x{:02X}", c as u32)?,
                c => f.write_char(c)?,
            }
        }
        for b in chunk.invalid() {
            write!(f, "\\x{b:02X}")?;
        }
    }
    Ok(())
}

/// A point in time with nanoseconds, as stored in an inode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timestamp {
    /// Seconds since the epoch (may be negative).
    pub sec: i64,
    /// Nanoseconds, 0..1_000_000_000.
    pub nsec: u32,
}

/// Identifies an inode on the source side, so a sink can recreate hardlinks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InodeKey {
    /// Device number.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
}

impl InodeKey {
    /// The inode a `stat` describes.
    pub fn of(st: &rustix::fs::Stat) -> Self {
        InodeKey {
            dev: st.st_dev,
            ino: st.st_ino,
        }
    }

    /// The inode whose metadata `m` is.
    pub fn of_metadata(m: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        InodeKey {
            dev: m.dev(),
            ino: m.ino(),
        }
    }
}

/// What kind of node an entry is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A directory.
    Dir,
    /// A regular file of `size` bytes.
    File {
        /// Logical size in bytes.
        size: u64,
    },
    /// A symbolic link with its target, never followed.
    Symlink {
        /// The raw target bytes.
        target: Vec<u8>,
    },
    /// Another name for an earlier entry of the same stream.
    HardLink {
        /// The earlier entry's path.
        target: RelPath,
    },
    /// A named pipe.
    Fifo,
    /// A character device.
    CharDevice {
        /// The device number.
        rdev: u64,
    },
    /// A block device.
    BlockDevice {
        /// The device number.
        rdev: u64,
    },
    /// A Unix socket's node (made again as a node, as `cp -a` and `rsync -a` make it;
    /// what listened on it does not come along). Only a sink that
    /// [wants them](crate::sink::TreeSink::wants_sockets) is given one.
    Socket,
}

impl EntryKind {
    /// A short lowercase name for messages and listings.
    pub fn name(&self) -> &'static str {
        match self {
            EntryKind::Dir => "directory",
            EntryKind::File { .. } => "file",
            EntryKind::Symlink { .. } => "symlink",
            EntryKind::HardLink { .. } => "hardlink",
            EntryKind::Fifo => "fifo",
            EntryKind::CharDevice { .. } => "character device",
            EntryKind::BlockDevice { .. } => "block device",
            EntryKind::Socket => "socket",
        }
    }
}

/// One extended attribute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Xattr {
    /// Full name with namespace, e.g. `user.comment`.
    pub name: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
}

/// Everything `cp -a` preserves about a node besides its data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Metadata {
    /// Permission bits including setuid, setgid and sticky (`mode & 0o7777`).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Last access.
    pub atime: Timestamp,
    /// Last modification.
    pub mtime: Timestamp,
    /// Extended attributes (all namespaces the reader could see).
    pub xattrs: Vec<Xattr>,
}

/// One node of a tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Where it is, relative to the tree's root.
    pub path: RelPath,
    /// What it is.
    pub kind: EntryKind,
    /// Its metadata.
    pub meta: Metadata,
    /// For a node that is not a directory and has more than one name (a file, and also
    /// a symlink, fifo or device, as `cp -a` keeps them): its source inode and link
    /// count, so the sink can make the other names hardlinks.
    pub links: Option<(InodeKey, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_and_file_name() {
        let p = RelPath::root().join(b"a").join(b"b c");
        assert_eq!(p.as_bytes(), b"a/b c");
        assert_eq!(p.file_name(), b"b c");
        assert_eq!(RelPath::root().join(b"x").file_name(), b"x");
        assert!(RelPath::root().is_root());
    }

    #[test]
    fn display_escapes_hostile_names() {
        let p = RelPath::from_bytes(b"a\nb\xff\\c\x01".to_vec());
        assert_eq!(p.to_string(), "a\\nb\\xFF\\\\c\\x01");
        assert_eq!(RelPath::root().to_string(), ".");
    }
}
