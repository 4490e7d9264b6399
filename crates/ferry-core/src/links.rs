//! Hardlink tracking for sinks: the first name of a multiply-linked source inode is
//! copied, every later name becomes a link to that copy.
//!
//! Names of one inode can reach different workers at once. The first claims the inode
//! and copies it; the others wait for it (the copier never waits on anything, so this
//! cannot deadlock). If the copy fails, the next claimer copies instead: nothing is lost.
//!
//! The first copy's directory is remembered without keeping it open: names that never
//! come (they lie outside the source) must not hold a descriptor each until the end.

use crate::entry::{InodeKey, RelPath};
use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::sync::{Condvar, Mutex, Weak};

/// Where the first copy of an inode was made.
#[derive(Clone, Debug)]
pub struct Made {
    /// The directory it was made in, while the job still has it open.
    pub dir: Weak<OwnedFd>,
    /// That directory's path, to open it again once closed.
    pub dir_path: RelPath,
    /// Its name there.
    pub name: CString,
}

enum Slot {
    Copying,
    Made { at: Made, names_left: u64 },
}

/// What a name of a multiply-linked inode should do.
#[derive(Debug)]
pub enum Claim {
    /// Copy the data, then call [`Links::made`] or [`Links::failed`].
    Copy,
    /// Make a hardlink to this earlier copy.
    Link(Made),
}

/// The inodes seen so far that have more names to come.
#[derive(Default)]
pub struct Links {
    slots: Mutex<HashMap<InodeKey, Slot>>,
    changed: Condvar,
}

impl Links {
    /// Claims `key` for one of its `nlink` names.
    pub fn claim(&self, key: InodeKey) -> Claim {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match slots.get_mut(&key) {
                None => {
                    slots.insert(key, Slot::Copying);
                    return Claim::Copy;
                }
                Some(Slot::Copying) => {
                    slots = self.changed.wait(slots).unwrap_or_else(|e| e.into_inner());
                }
                Some(Slot::Made { at, names_left }) => {
                    let at = at.clone();
                    *names_left = names_left.saturating_sub(1);
                    if *names_left == 0 {
                        // Every name has been seen.
                        slots.remove(&key);
                    }
                    return Claim::Link(at);
                }
            }
        }
    }

    /// The copy for `key` exists at `at`; `nlink` is the source's link count.
    pub fn made(&self, key: InodeKey, at: Made, nlink: u64) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if nlink > 1 {
            slots.insert(
                key,
                Slot::Made {
                    at,
                    names_left: nlink - 1,
                },
            );
        } else {
            slots.remove(&key);
        }
        self.changed.notify_all();
    }

    /// The copy for `key` failed; the next name to claim it copies instead.
    pub fn failed(&self, key: InodeKey) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.remove(&key);
        self.changed.notify_all();
    }
}
