//! POSIX ACLs that GNU tar and bsdtar store as text (`--acls`) in the pax records
//! `SCHILY.acl.access` and `SCHILY.acl.default`, made into the attributes
//! `system.posix_acl_access` and `system.posix_acl_default` the kernel takes, and the
//! text pack writes for those attributes (see [`acl_text`]). ferry's own archives carry
//! the attributes as `SCHILY.xattr` records too, which GNU tar and bsdtar do not restore
//! as ACLs; where a member has both, the attribute record wins.
//!
//! The text is a list of entries, one a line (GNU tar) or separated by commas (bsdtar,
//! star), each `TAG:QUALIFIER:PERMS`, with `:ID` after it from bsdtar and star: TAG is
//! `user`, `group`, `mask` or `other` (or its first letter); QUALIFIER is empty for the
//! file's owner and group, the mask and others, else a user or group name or number;
//! PERMS is made of `r`, `w`, `x` and `-`; `#` starts a comment. A name takes the id it
//! has here, as owners do (see [`crate::owners`]), else the entry's ID.

use crate::owners::{LocalIds, OwnerNames};
use ferry_core::entry::{escaped, Xattr};

/// The pax keys that hold ACLs, each with the attribute it becomes.
const RECORDS: [(&[u8], &[u8]); 2] = [
    (b"SCHILY.acl.access", b"system.posix_acl_access"),
    (b"SCHILY.acl.default", b"system.posix_acl_default"),
];

/// Whether pax record `key` holds an ACL.
pub fn is_acl_key(key: &[u8]) -> bool {
    attribute_of(key).is_some()
}

/// The attribute the ACL in pax record `key` stands for, if it holds one.
pub fn attribute_of(key: &[u8]) -> Option<&'static [u8]> {
    RECORDS.iter().find(|(k, _)| *k == key).map(|(_, a)| *a)
}

/// The pax record that holds attribute `name` as text, if it is an ACL.
pub fn record_of(name: &[u8]) -> Option<&'static [u8]> {
    RECORDS.iter().find(|(_, a)| *a == name).map(|(k, _)| *k)
}

// Entry tags of the kernel's ACL attribute format.
const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const GROUP: u16 = 0x08;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;
/// The id of an entry without a qualifier.
const NO_ID: u32 = u32::MAX;
/// The attribute format's version, its first four bytes.
const VERSION: u32 = 2;

/// The ACL attributes the pax records `pax` (a member's) give, with names looked up in
/// `ids`; an access ACL that says no more than the mode is left out. An error says what
/// is wrong with which record.
pub fn acl_xattrs(pax: &[(Vec<u8>, Vec<u8>)], ids: &mut LocalIds) -> Result<Vec<Xattr>, String> {
    let mut out = Vec::new();
    for (key, attr) in RECORDS {
        let Some((_, text)) = pax.iter().rev().find(|(k, _)| k == key) else {
            continue;
        };
        let access = attr == b"system.posix_acl_access";
        let entries =
            parse(text, ids).map_err(|why| format!("{}: {why}", String::from_utf8_lossy(key)))?;
        if !(access && entries.len() == 3) {
            out.push(Xattr {
                name: attr.to_vec(),
                value: encode(&entries),
            });
        }
    }
    Ok(out)
}

/// An entry: tag, id, permission bits.
type AclEntry = (u16, u32, u16);

/// The entries of an ACL's text, sorted as the kernel wants them, checked to make a
/// valid ACL: one owner, owning group and other entry each, a mask where there are
/// named entries, no name twice.
fn parse(text: &[u8], ids: &mut LocalIds) -> Result<Vec<AclEntry>, String> {
    let mut entries = Vec::new();
    for raw in text.split(|&b| b == b'\n' || b == b',') {
        let raw = raw.split(|&b| b == b'#').next().unwrap_or_default();
        let raw = raw.trim_ascii();
        if raw.is_empty() {
            continue;
        }
        entries.push(parse_entry(raw, ids).map_err(|why| format!("{}: {why}", escaped(raw)))?);
    }
    entries.sort_unstable();
    if entries
        .windows(2)
        .any(|w| (w[0].0, w[0].1) == (w[1].0, w[1].1))
    {
        return Err("an entry given twice".into());
    }
    let count = |tag| entries.iter().filter(|e| e.0 == tag).count();
    if [USER_OBJ, GROUP_OBJ, OTHER].iter().any(|&t| count(t) != 1) {
        return Err("not one entry each for the owner, the group and others".into());
    }
    if count(USER) + count(GROUP) > 0 && count(MASK) == 0 {
        return Err("named entries without a mask".into());
    }
    Ok(entries)
}

/// One entry, `TAG:QUALIFIER:PERMS[:ID]`.
fn parse_entry(raw: &[u8], ids: &mut LocalIds) -> Result<AclEntry, String> {
    let fields: Vec<&[u8]> = raw.split(|&b| b == b':').collect();
    let (tag, qualifier, perms, id) = match fields[..] {
        [tag, qualifier, perms] => (tag, qualifier, perms, None),
        [tag, qualifier, perms, id] => (tag, qualifier, perms, Some(id)),
        _ => return Err("not TAG:QUALIFIER:PERMS".into()),
    };
    let named = !qualifier.is_empty();
    let tag = match (tag, named) {
        (b"user" | b"u", false) => USER_OBJ,
        (b"user" | b"u", true) => USER,
        (b"group" | b"g", false) => GROUP_OBJ,
        (b"group" | b"g", true) => GROUP,
        (b"mask" | b"m", false) => MASK,
        (b"other" | b"o", false) => OTHER,
        _ => return Err("no such tag, or a qualifier where none is taken".into()),
    };
    let id = match named {
        false => NO_ID,
        true => qualifier_id(tag, qualifier, id, ids)?,
    };
    Ok((tag, id, perm_bits(perms)?))
}

/// The id a named entry's qualifier stands for: a number is that id; a name, the id it
/// has here, else the one the entry gives.
fn qualifier_id(
    tag: u16,
    qualifier: &[u8],
    given: Option<&[u8]>,
    ids: &mut LocalIds,
) -> Result<u32, String> {
    let number = |b: &[u8]| {
        let digits = std::str::from_utf8(b).ok()?;
        digits
            .bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| digits.parse::<u32>().ok())?
    };
    if let Some(id) = number(qualifier) {
        return Ok(id);
    }
    let here = match tag {
        USER => ids.user(qualifier),
        _ => ids.group(qualifier),
    };
    here.or_else(|| given.and_then(number))
        .filter(|&id| id != NO_ID)
        .ok_or_else(|| {
            format!(
                "no id for the name {} here, and none given",
                escaped(qualifier)
            )
        })
}

/// Permission bits from `rwx`, with `-` for a bit not given.
fn perm_bits(perms: &[u8]) -> Result<u16, String> {
    let mut bits = 0;
    for &c in perms {
        let bit = match c {
            b'r' => 4,
            b'w' => 2,
            b'x' => 1,
            b'-' => 0,
            _ => return Err("permissions other than r, w, x and -".into()),
        };
        if bits & bit != 0 {
            return Err("a permission given twice".into());
        }
        bits |= bit;
    }
    match perms.len() {
        1..=3 => Ok(bits),
        _ => Err("permissions other than three of r, w, x and -".into()),
    }
}

/// The text GNU tar writes for an ACL (see the module's doc), of the kernel's
/// attribute `value`: one entry a line, in the kernel's order, with the name this
/// machine has for a named entry's id and the id after it, as star and bsdtar write
/// it (GNU tar drops that field, bsdtar and ferry take the id where the name is
/// unknown); the number alone where there is no name. `None` for a value that is not
/// an ACL.
pub fn acl_text(value: &[u8], names: &mut OwnerNames) -> Option<Vec<u8>> {
    let (version, entries) = value.split_first_chunk::<4>()?;
    if u32::from_le_bytes(*version) != VERSION || entries.len() % 8 != 0 {
        return None;
    }
    let mut out = Vec::with_capacity(entries.len() * 3);
    for e in entries.chunks_exact(8) {
        let tag = u16::from_le_bytes([e[0], e[1]]);
        let perm = u16::from_le_bytes([e[2], e[3]]);
        let id = u32::from_le_bytes([e[4], e[5], e[6], e[7]]);
        let (word, name) = match tag {
            USER_OBJ | USER => ("user", (tag == USER).then(|| names.user(id))),
            GROUP_OBJ | GROUP => ("group", (tag == GROUP).then(|| names.group(id))),
            MASK => ("mask", None),
            OTHER => ("other", None),
            _ => return None,
        };
        // A name that would not read back as one (a number, or holding a separator
        // or a space) is left for the id.
        let readable = |n: &&[u8]| {
            !n.iter().all(u8::is_ascii_digit)
                && !n
                    .iter()
                    .any(|c| b":,#".contains(c) || c.is_ascii_whitespace())
        };
        let name = name.map(|n| n.filter(readable));
        out.extend_from_slice(word.as_bytes());
        out.push(b':');
        match name {
            Some(Some(n)) => out.extend_from_slice(n),
            Some(None) => out.extend_from_slice(id.to_string().as_bytes()),
            None => {}
        }
        out.push(b':');
        for (bit, c) in [(4, b'r'), (2, b'w'), (1, b'x')] {
            out.push(if perm & bit != 0 { c } else { b'-' });
        }
        if let Some(Some(_)) = name {
            out.extend_from_slice(format!(":{id}").as_bytes());
        }
        out.push(b'\n');
    }
    Some(out)
}

/// The kernel's attribute value for `entries`.
fn encode(entries: &[AclEntry]) -> Vec<u8> {
    let mut out = VERSION.to_le_bytes().to_vec();
    for &(tag, id, perm) in entries {
        out.extend_from_slice(&tag.to_le_bytes());
        out.extend_from_slice(&perm.to_le_bytes());
        out.extend_from_slice(&id.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xattrs(records: &[(&str, &str)]) -> Result<Vec<Xattr>, String> {
        let pax: Vec<(Vec<u8>, Vec<u8>)> = records
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
        acl_xattrs(&pax, &mut LocalIds::default())
    }

    /// What `setfacl -m u:1234:rwx,g:55:r` on a 0644 file gives (read back with
    /// `getfattr -e hex`).
    const ACCESS: &str = "0200000001000600ffffffff02000700d204000004000400ffffffff\
                          080004003700000010000700ffffffff20000400ffffffff";

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn gnu_tar_and_bsdtar_text_give_the_kernels_attribute() {
        let gnu = "user::rw-\nuser:1234:rwx\ngroup::r--\ngroup:55:r--\nmask::rwx\nother::r--\n";
        let bsd = "user::rw-,group::r--,other::r--,user:nosuchuser:rwx:1234,\
                   group:nosuchgroup:r--:55,mask::rwx";
        for text in [gnu, bsd] {
            let got = xattrs(&[("SCHILY.acl.access", text)]).expect(text);
            assert_eq!(got.len(), 1);
            assert_eq!(got[0].name, b"system.posix_acl_access");
            assert_eq!(hex(&got[0].value), ACCESS, "{text}");
        }
    }

    #[test]
    fn names_take_their_ids_here_and_a_trivial_access_acl_is_the_mode() {
        let got = xattrs(&[
            ("SCHILY.acl.access", "user::rwx\ngroup::r-x\nother::r-x\n"),
            (
                "SCHILY.acl.default",
                "u::rwx\nu:root:r-x:77\ng::r-x\nm::r-x\no::---\n",
            ),
        ])
        .expect("valid");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].name, b"system.posix_acl_default");
        // root is 0 here, whatever id the archive gave.
        assert_eq!(&got[0].value[12..20], &[2, 0, 5, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn the_text_pack_writes_reads_back_as_the_same_acl() {
        let gnu = "user::rw-\nuser:1234:rwx\ngroup::r--\ngroup:55:r--\nmask::rwx\nother::r--\n";
        let value = &xattrs(&[("SCHILY.acl.access", gnu)]).expect("valid")[0].value;
        let text = acl_text(value, &mut OwnerNames::default()).expect("an ACL");
        assert_eq!(String::from_utf8_lossy(&text), gnu);
        // A name this machine has goes in with its id after it.
        let named = "u::rw-\nu:root:r--\ng::---\ng:root:rw-\nm::rw-\no::---";
        let value = &xattrs(&[("SCHILY.acl.default", named)]).expect("valid")[0].value;
        let text = acl_text(value, &mut OwnerNames::default()).expect("an ACL");
        let text = String::from_utf8(text).expect("text");
        assert_eq!(
            text,
            "user::rw-\nuser:root:r--:0\ngroup::---\ngroup:root:rw-:0\nmask::rw-\nother::---\n"
        );
        let again = xattrs(&[("SCHILY.acl.default", &text)]).expect("valid");
        assert_eq!(&again[0].value, value);
        // Not an ACL: no text.
        for bad in [
            &b""[..],
            b"\x02\0\0\0\x01",
            b"\x01\0\0\0",
            b"\x02\0\0\0\x40\0\0\0\0\0\0\0",
        ] {
            assert_eq!(acl_text(bad, &mut OwnerNames::default()), None);
        }
    }

    #[test]
    fn invalid_acls_are_refused_saying_why() {
        for (text, why) in [
            ("user::rw-\ngroup::r--\n", "not one entry each"),
            (
                "user::rw-\nuser::r--\ngroup::r--\nother::r--",
                "given twice",
            ),
            (
                "user::rw-\nuser:5:r--\ngroup::r--\nother::r--",
                "without a mask",
            ),
            ("user::rwz\ngroup::r--\nother::r--", "permissions other"),
            (
                "user::rw-\ngroup::r--\nother::r--\nbogus::r--",
                "no such tag",
            ),
            (
                "user::rw-\nmask:5:r--\ngroup::r--\nother::r--",
                "no such tag",
            ),
            (
                "u::rw-\nu:no\\x01such:r--\ng::r--\nm::r--\no::r--",
                "no id for the name",
            ),
            ("user:rw-", "not TAG:QUALIFIER:PERMS"),
        ] {
            let err = xattrs(&[("SCHILY.acl.access", text)]).expect_err(text);
            assert!(err.starts_with("SCHILY.acl.access: "), "{err}");
            assert!(err.contains(why), "{text}: {err}");
        }
    }
}
