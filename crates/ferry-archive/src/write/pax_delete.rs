//! `pack --pax-option=delete=PATTERN`, as GNU tar's: the pax keywords matching a glob
//! pattern are left out of every header. ferry carries out what leaving each out means,
//! so the index still says what the headers say:
//!
//! - `atime`: no access times (a reader takes the mtime for one not stored);
//! - `mtime`: times in whole seconds, from the ustar header's field;
//! - `ctime`, and any keyword ferry does not write (`LIBARCHIVE.*`): nothing to leave out;
//! - `SCHILY.xattr.NAME`: the extended attribute NAME; `SCHILY.acl.access` and
//!   `SCHILY.acl.default`: that ACL (ferry writes an ACL as both its attribute and its
//!   text, and leaves out both).
//!
//! Keywords a member cannot be stored without where it needs them (`path`, `linkpath`,
//! `size`, owners, the sparse map's, and the `comment` that aligns data) are refused, as
//! is a pattern that matches one of them (`delete=*`).

use crate::read::acl;
use crate::tar::xattr::schily_key;
use ferry_core::entry::Metadata;
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// Keywords ferry needs wherever it writes them, and what they carry.
const NEEDED: [(&str, &str); 11] = [
    ("path", "names longer than the ustar header holds"),
    (
        "linkpath",
        "link targets longer than the ustar header holds",
    ),
    ("size", "files of 8 GiB or more"),
    ("uid", "owner ids past 2097151 (use --owner)"),
    ("gid", "group ids past 2097151 (use --group)"),
    (
        "uname",
        "owner names over 32 bytes (use --owner or --numeric-owner)",
    ),
    (
        "gname",
        "group names over 32 bytes (use --group or --numeric-owner)",
    ),
    ("GNU.sparse.major", "sparse files"),
    ("GNU.sparse.minor", "sparse files"),
    ("GNU.sparse.realsize", "sparse files"),
    ("comment", "the padding that puts file data on 4 KiB"),
];

/// The keywords `delete=` patterns leave out.
#[derive(Clone, Debug, Default)]
pub struct PaxDelete {
    patterns: Option<GlobSet>,
    /// `atime` matched.
    pub atime: bool,
    /// `mtime` matched.
    pub mtime: bool,
}

impl PaxDelete {
    /// The keywords `patterns` (each a `delete=` value) match; an error names a pattern
    /// that does not parse or that matches a keyword ferry needs.
    pub fn new(patterns: &[String]) -> Result<PaxDelete, String> {
        if patterns.is_empty() {
            return Ok(PaxDelete::default());
        }
        let mut set = GlobSetBuilder::new();
        for p in patterns {
            let glob = GlobBuilder::new(p)
                .backslash_escape(true)
                .build()
                .map_err(|e| format!("delete={p}: {e}"))?;
            let one = glob.compile_matcher();
            if let Some((key, why)) = NEEDED.iter().find(|(k, _)| one.is_match(k)) {
                return Err(format!(
                    "delete={p}: it would leave out `{key}`, which ferry needs for {why}"
                ));
            }
            set.add(glob);
        }
        let set = set.build().map_err(|e| e.to_string())?;
        Ok(PaxDelete {
            atime: set.is_match("atime"),
            mtime: set.is_match("mtime"),
            patterns: Some(set),
        })
    }

    /// Whether any pattern was given.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_none()
    }

    /// `meta` without what the patterns leave out.
    pub fn apply(&self, meta: &mut Metadata) {
        let Some(set) = &self.patterns else {
            return;
        };
        if self.mtime {
            let was = meta.mtime;
            meta.mtime.nsec = 0;
            if meta.atime == was {
                meta.atime = meta.mtime;
            }
        }
        if self.atime {
            meta.atime = meta.mtime;
        }
        let matched = |key: &[u8]| set.is_match(OsStr::from_bytes(key));
        meta.xattrs.retain(|x| {
            let acl = acl::record_of(&x.name).is_some_and(&matched);
            !acl && !matched(&schily_key(&x.name))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_core::entry::{Timestamp, Xattr};

    fn deleting(patterns: &[&str]) -> Result<PaxDelete, String> {
        PaxDelete::new(&patterns.iter().map(|p| p.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn keywords_ferry_needs_are_refused_by_name() {
        for p in ["path", "*", "size", "GNU.sparse.*", "u*", "comment"] {
            let err = deleting(&[p]).expect_err(p);
            assert!(
                err.starts_with(&format!("delete={p}: it would leave out `")),
                "{err}"
            );
        }
        assert!(deleting(&["[a"]).is_err(), "a pattern that does not parse");
        for p in [
            "atime",
            "ctime",
            "*time",
            "SCHILY.*",
            "LIBARCHIVE.xattr.*",
            "mtime",
        ] {
            deleting(&[p]).unwrap_or_else(|e| panic!("{p}: {e}"));
        }
    }

    #[test]
    fn what_is_left_out_is_left_out_of_the_metadata_too() {
        let t = |sec, nsec| Timestamp { sec, nsec };
        let mut meta = Metadata {
            mtime: t(10, 5),
            atime: t(10, 5),
            xattrs: vec![
                Xattr {
                    name: b"user.keep".to_vec(),
                    value: b"1".to_vec(),
                },
                Xattr {
                    name: b"user.drop".to_vec(),
                    value: b"2".to_vec(),
                },
                Xattr {
                    name: b"system.posix_acl_access".to_vec(),
                    value: vec![2, 0, 0, 0],
                },
            ],
            ..Metadata::default()
        };
        deleting(&["mtime", "SCHILY.xattr.user.d*", "SCHILY.acl.access"])
            .unwrap()
            .apply(&mut meta);
        assert_eq!(
            (meta.mtime, meta.atime),
            (t(10, 0), t(10, 0)),
            "atime followed mtime"
        );
        let names: Vec<&[u8]> = meta.xattrs.iter().map(|x| x.name.as_slice()).collect();
        assert_eq!(names, [b"user.keep".as_slice()]);
        let mut meta = Metadata {
            mtime: t(10, 5),
            atime: t(99, 1),
            ..Metadata::default()
        };
        let d = deleting(&["*time"]).unwrap();
        assert!(d.atime && d.mtime);
        d.apply(&mut meta);
        assert_eq!((meta.mtime, meta.atime), (t(10, 0), t(10, 0)));
    }
}
