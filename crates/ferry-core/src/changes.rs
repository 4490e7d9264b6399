//! What a job changes in its destination, entry by entry: told to a [`Changes`] as it
//! happens (or, in a dry run, as it would), for `-v` (names) and `-i` (what and why).

use crate::entry::{EntryKind, RelPath};
use rustix::fs::FileType;
use std::fmt;

/// The kind of an entry changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file (or another name of one).
    File,
    /// A directory.
    Dir,
    /// A symlink.
    Symlink,
    /// A fifo, a device or a socket.
    Special,
}

impl Kind {
    /// The kind of an entry.
    pub fn of_entry(kind: &EntryKind) -> Kind {
        match kind {
            EntryKind::File { .. } | EntryKind::HardLink { .. } => Kind::File,
            EntryKind::Dir => Kind::Dir,
            EntryKind::Symlink { .. } => Kind::Symlink,
            EntryKind::Fifo
            | EntryKind::CharDevice { .. }
            | EntryKind::BlockDevice { .. }
            | EntryKind::Socket => Kind::Special,
        }
    }

    /// The kind of a node by its type on disk.
    pub fn of_type(t: FileType) -> Kind {
        match t {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Dir,
            FileType::Symlink => Kind::Symlink,
            _ => Kind::Special,
        }
    }

    /// A short name for a listing.
    pub fn name(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Dir => "dir",
            Kind::Symlink => "symlink",
            Kind::Special => "special",
        }
    }
}

/// Why an entry is changed: the fields of the destination that differ from the source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reasons(u16);

impl Reasons {
    /// The size differs.
    pub const SIZE: Reasons = Reasons(1);
    /// The mtime differs (for a file whose data is compared by size and mtime).
    pub const MTIME: Reasons = Reasons(1 << 1);
    /// The content differs (`--checksum`).
    pub const CONTENT: Reasons = Reasons(1 << 2);
    /// Something of another kind is in the way.
    pub const KIND: Reasons = Reasons(1 << 3);
    /// The symlink's target differs.
    pub const TARGET: Reasons = Reasons(1 << 4);
    /// The permission bits differ.
    pub const MODE: Reasons = Reasons(1 << 5);
    /// The owner or group differs.
    pub const OWNER: Reasons = Reasons(1 << 6);
    /// The times differ (metadata only: the data is the same).
    pub const TIMES: Reasons = Reasons(1 << 7);
    /// The extended attributes differ.
    pub const XATTRS: Reasons = Reasons(1 << 8);
    /// The device number differs.
    pub const DEVICE: Reasons = Reasons(1 << 9);
    /// Its metadata differs, and it has names the source's node has not (that may lie
    /// outside DST): it is replaced rather than changed.
    pub const LINKS: Reasons = Reasons(1 << 10);

    const NAMES: [(Reasons, &'static str); 11] = [
        (Reasons::SIZE, "size"),
        (Reasons::MTIME, "mtime"),
        (Reasons::CONTENT, "content"),
        (Reasons::KIND, "kind"),
        (Reasons::TARGET, "target"),
        (Reasons::MODE, "mode"),
        (Reasons::OWNER, "owner"),
        (Reasons::TIMES, "times"),
        (Reasons::XATTRS, "xattrs"),
        (Reasons::DEVICE, "device"),
        (Reasons::LINKS, "links"),
    ];

    /// No reason.
    pub fn none() -> Reasons {
        Reasons(0)
    }

    /// `self` and `other` together.
    pub fn with(self, other: Reasons) -> Reasons {
        Reasons(self.0 | other.0)
    }

    /// `self` with `other` if `differs`.
    pub fn with_if(self, differs: bool, other: Reasons) -> Reasons {
        if differs {
            self.with(other)
        } else {
            self
        }
    }

    /// Whether there is no reason.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The reasons as bits (for a message to another ferry).
    pub fn bits(self) -> u16 {
        self.0
    }

    /// The reasons of `bits` this ferry knows (from another ferry's message).
    pub fn from_bits(bits: u16) -> Reasons {
        let known = Reasons::NAMES.iter().fold(0, |a, (r, _)| a | r.0);
        Reasons(bits & known)
    }
}

/// The reasons, comma-separated (`size,mtime`).
impl fmt::Display for Reasons {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (r, name) in Reasons::NAMES {
            if self.0 & r.0 != 0 {
                if !first {
                    f.write_str(",")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

/// What happens to an entry of the destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum What {
    /// Made where nothing was.
    Created,
    /// Its data (or the node itself) replaced, for these reasons.
    Updated(Reasons),
    /// Only its metadata set, for these reasons.
    Meta(Reasons),
    /// Removed: the source does not have it (`--delete`).
    Deleted,
}

/// Told about every change to the destination, from many threads at once.
pub trait Changes: Send + Sync {
    /// The entry at `path`, of `kind`, is (or in a dry run would be) changed so.
    fn change(&self, path: &RelPath, kind: Kind, what: What);
}

impl fmt::Debug for dyn Changes + '_ {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Changes")
    }
}
