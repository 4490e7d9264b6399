//! Owner names. A tar header carries the user and group names beside the numeric ids,
//! and tar, run as root, restores ownership by name where that name exists on the
//! machine extracting (the same user may have another id there). Pack writes the names
//! this machine has for the ids it packs; unpack, as root, gives each member the ids
//! its names have here. Each name or id is looked up once.

use ferry_core::Metadata;
use nix::unistd::{Gid, Group, Uid, User};
use std::collections::HashMap;

/// The names of user and group ids, looked up once each.
#[derive(Default)]
pub struct OwnerNames {
    users: HashMap<u32, Option<Box<[u8]>>>,
    groups: HashMap<u32, Option<Box<[u8]>>>,
}

impl OwnerNames {
    /// The names of user `uid` and group `gid` here, where they have one.
    pub fn of(&mut self, uid: u32, gid: u32) -> (Option<&[u8]>, Option<&[u8]>) {
        let OwnerNames { users, groups } = self;
        (user_name(users, uid), group_name(groups, gid))
    }

    /// The name of user `uid` here, if it has one.
    pub fn user(&mut self, uid: u32) -> Option<&[u8]> {
        user_name(&mut self.users, uid)
    }

    /// The name of group `gid` here, if it has one.
    pub fn group(&mut self, gid: u32) -> Option<&[u8]> {
        group_name(&mut self.groups, gid)
    }
}

/// The name of user `uid` in `users`, looked up the first time.
fn user_name(users: &mut HashMap<u32, Option<Box<[u8]>>>, uid: u32) -> Option<&[u8]> {
    let name = users.entry(uid).or_insert_with(|| {
        let user = User::from_uid(Uid::from_raw(uid)).ok().flatten()?;
        Some(user.name.into_bytes().into())
    });
    name.as_deref()
}

/// The name of group `gid` in `groups`, looked up the first time.
fn group_name(groups: &mut HashMap<u32, Option<Box<[u8]>>>, gid: u32) -> Option<&[u8]> {
    let name = groups.entry(gid).or_insert_with(|| {
        let group = Group::from_gid(Gid::from_raw(gid)).ok().flatten()?;
        Some(group.name.into_bytes().into())
    });
    name.as_deref()
}

/// Whether members get the owners their names have here (else the archive's numbers):
/// as GNU tar does, when root extracts (only root sets owners) and `numeric_owner` is
/// not asked for. The one rule `unpack`, the mount and the kernel image follow (see
/// [`crate::tree::shown`]).
pub fn by_name_here(numeric_owner: bool) -> bool {
    !numeric_owner && rustix::process::geteuid().is_root()
}

/// The ids user and group names have here, looked up once each.
#[derive(Default)]
pub struct LocalIds {
    users: HashMap<Box<[u8]>, Option<u32>>,
    groups: HashMap<Box<[u8]>, Option<u32>>,
}

impl LocalIds {
    /// The uid and gid `meta` should have here: those of the names `user` and `group`
    /// where this machine has them, else the archive's numbers. `None` when they are
    /// the ones `meta` has.
    pub fn owner(
        &mut self,
        user: Option<&[u8]>,
        group: Option<&[u8]>,
        meta: &Metadata,
    ) -> Option<(u32, u32)> {
        let (uid, gid) = self.ids(user, group, meta.uid, meta.gid);
        ((uid, gid) != (meta.uid, meta.gid)).then_some((uid, gid))
    }

    /// The uid and gid an owner of the archive's `uid` and `gid`, called `user` and
    /// `group` there, has here: those of the names where this machine has them, else
    /// the numbers.
    pub fn ids(
        &mut self,
        user: Option<&[u8]>,
        group: Option<&[u8]>,
        uid: u32,
        gid: u32,
    ) -> (u32, u32) {
        (
            user.and_then(|name| self.user(name)).unwrap_or(uid),
            group.and_then(|name| self.group(name)).unwrap_or(gid),
        )
    }

    /// The uid of the user called `name` here, if there is one.
    pub fn user(&mut self, name: &[u8]) -> Option<u32> {
        id_of(&mut self.users, name, |n| {
            User::from_name(n).map(|u| u.map(|u| u.uid.as_raw()))
        })
    }

    /// The gid of the group called `name` here, if there is one.
    pub fn group(&mut self, name: &[u8]) -> Option<u32> {
        id_of(&mut self.groups, name, |n| {
            Group::from_name(n).map(|g| g.map(|g| g.gid.as_raw()))
        })
    }
}

/// The id `name` has in `known`, looked up with `look` the first time.
fn id_of(
    known: &mut HashMap<Box<[u8]>, Option<u32>>,
    name: &[u8],
    look: impl FnOnce(&str) -> nix::Result<Option<u32>>,
) -> Option<u32> {
    if let Some(id) = known.get(name) {
        return *id;
    }
    let id = std::str::from_utf8(name)
        .ok()
        .filter(|n| !n.is_empty())
        .and_then(|n| look(n).ok().flatten());
    known.insert(name.into(), id);
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_named_and_an_unused_id_is_not() {
        let mut names = OwnerNames::default();
        assert_eq!(names.of(0, 0), (Some(&b"root"[..]), Some(&b"root"[..])));
        // Far above any id a system hands out.
        assert_eq!(names.of(3_999_999_999, 3_999_999_999), (None, None));
        // Found once, kept.
        assert_eq!(names.users.len(), 2);
    }

    #[test]
    fn names_known_here_decide_the_owner_and_others_keep_the_numbers() {
        let mut ids = LocalIds::default();
        let meta = Metadata {
            uid: 1234,
            gid: 5678,
            ..Metadata::default()
        };
        assert_eq!(ids.owner(Some(b"root"), Some(b"root"), &meta), Some((0, 0)));
        assert_eq!(ids.owner(Some(b"no such user"), None, &meta), None);
        assert_eq!(ids.owner(Some(b"\xff"), Some(b""), &meta), None);
        let root = Metadata::default();
        assert_eq!(ids.owner(Some(b"root"), Some(b"root"), &root), None);
    }
}
