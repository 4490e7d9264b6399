//! What a node is once extracted here: the one rule `unpack`, the FUSE mount and the
//! kernel (EROFS) image share, so that a mounted tree is the tree `unpack` makes.
//!
//! A table keeps what the archive says (its numeric owner and its owner's names, the
//! mode its header gives); where that is not what an extraction makes, this decides:
//!
//! - the owner is the one its user and group names have on this machine, where it has
//!   them, else the archive's numbers, when [`by_name_here`] says so (as root, not
//!   `--numeric-owner`), as GNU tar extracts; otherwise the numbers;
//! - a symlink's mode is 0777 whatever its header says: Linux symlinks have no mode of
//!   their own, and an extracted one is 0777;
//! - a directory the archive needs but never names (the root too, when there is no
//!   `./` member) has what `mkdir` gives it here: 0777 less this process's umask, and
//!   this process's user and group (its time is the one the table gives, where an
//!   extraction's is the time it ran).
//!
//! `unpack` gives each member its owner through the same [`LocalIds::ids`] and
//! [`by_name_here`]; the kernel makes its symlinks 0777.

use super::read::{Extras, Node, NodeKind, Table, TreeError};
use crate::owners::{by_name_here, LocalIds};
use crate::read::archive::ReadAt;
use std::sync::{Mutex, PoisonError};

/// A node's mode and owner as an extraction here makes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shown {
    /// Permission bits, setuid, setgid and sticky included.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
}

/// The permission bits a node of `kind` whose header gives `mode` has once extracted.
pub fn mode_here(kind: NodeKind, mode: u32) -> u32 {
    match kind {
        NodeKind::Symlink => 0o777,
        _ => mode & 0o7777,
    }
}

/// The rule (see the module's doc), with the ids names have here looked up once each.
pub struct Here {
    /// Set when owners go by name.
    ids: Option<Mutex<LocalIds>>,
    /// What a directory the archive never names is made with.
    made: Shown,
}

impl Here {
    /// Owners by name when `by_name`, else the archive's numbers.
    pub fn by_name(by_name: bool) -> Here {
        Here {
            ids: by_name.then(Mutex::default),
            made: Shown {
                mode: 0o777 & !umask(),
                uid: rustix::process::geteuid().as_raw(),
                gid: rustix::process::getegid().as_raw(),
            },
        }
    }

    /// What an extraction by this process makes: owners by name as root unless
    /// `numeric_owner` ([`by_name_here`]).
    pub fn for_this_process(numeric_owner: bool) -> Here {
        Here::by_name(by_name_here(numeric_owner))
    }

    /// Node `n` as extracted here, given its `extras` (which hold its owner's names).
    pub fn shown(&self, n: &Node, extras: &Extras) -> Shown {
        if n.made {
            return self.made;
        }
        let (uid, gid) = match &self.ids {
            Some(ids) => {
                fn name(n: &[u8]) -> Option<&[u8]> {
                    (!n.is_empty()).then_some(n)
                }
                ids.lock().unwrap_or_else(PoisonError::into_inner).ids(
                    name(&extras.user),
                    name(&extras.group),
                    n.uid,
                    n.gid,
                )
            }
            None => (n.uid, n.gid),
        };
        Shown {
            mode: mode_here(n.kind, n.mode),
            uid,
            gid,
        }
    }

    /// Node `n` of `table` as extracted here; its extras are read only when owners go
    /// by name and it has any.
    pub fn node<R: ReadAt>(&self, table: &Table<R>, n: &Node) -> Result<Shown, TreeError> {
        let extras = match self.ids.is_some() && !n.made && n.extras.1 > 0 {
            true => table.extras(n)?,
            false => Extras::default(),
        };
        Ok(self.shown(n, &extras))
    }
}

/// This process's umask, read from /proc (reading it with `umask(2)` would set it, for
/// a moment, under every other thread); 022 where /proc does not say.
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("Umask:"))?;
            u32::from_str_radix(line["Umask:".len()..].trim(), 8).ok()
        })
        .map_or(0o022, |m| m & 0o777)
}
