//! A file's metadata as object user metadata, in the keys and formats rclone uses, so
//! each tool reads what the other wrote:
//!
//! | key (`X-Amz-Meta-…`) | value | rclone |
//! |---|---|---|
//! | `mtime` | seconds since the epoch, `.`, nine digits of nanoseconds | its S3 modification time, always written and read |
//! | `atime` | RFC 3339 with nanoseconds | `--metadata` (from its local backend) |
//! | `mode` | `st_mode` in octal, file type bits included (`100644`) | `--metadata` |
//! | `uid`, `gid` | decimal | `--metadata` |
//!
//! Read back, a value that does not parse is left out (the object's LastModified then
//! stands for a missing mtime, as in rclone).

use chrono::{DateTime, SecondsFormat};
use ferry_core::entry::Timestamp;
use object_store::{Attribute, AttributeValue, Attributes};

/// The `st_mode` type bits of a regular file.
pub const S_IFREG: u32 = 0o100000;
/// The `st_mode` type bits of a symlink.
pub const S_IFLNK: u32 = 0o120000;
const S_IFMT: u32 = 0o170000;

/// What the user metadata of one object says (each field when present and valid).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserMeta {
    /// Last modification.
    pub mtime: Option<Timestamp>,
    /// Last access.
    pub atime: Option<Timestamp>,
    /// `st_mode`, type bits included when the writer gave them.
    pub mode: Option<u32>,
    /// Owner.
    pub uid: Option<u32>,
    /// Group.
    pub gid: Option<u32>,
}

/// `t` as rclone writes an mtime: `1700000000.123456789`.
pub fn seconds_string(t: Timestamp) -> String {
    if t.sec < 0 && t.nsec > 0 {
        // -1.5 s is (-2 s, 500,000,000 ns).
        return format!("-{}.{:09}", -(t.sec + 1), 1_000_000_000 - t.nsec);
    }
    format!("{}.{:09}", t.sec, t.nsec)
}

/// An mtime as rclone writes it: seconds, optionally `.` and up to nine digits (more
/// are cut off), optionally negative. Parsed exactly, not through a float.
pub fn parse_seconds(s: &str) -> Option<Timestamp> {
    let (neg, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !(frac.is_empty() || digits(frac)) {
        return None;
    }
    let sec: i64 = whole.parse().ok()?;
    let mut nsec = 0u32;
    for (i, b) in frac.bytes().take(9).enumerate() {
        nsec += u32::from(b - b'0') * 10u32.pow(8 - i as u32);
    }
    Some(match (neg, nsec) {
        (false, _) => Timestamp { sec, nsec },
        (true, 0) => Timestamp { sec: -sec, nsec: 0 },
        (true, n) => Timestamp {
            sec: -sec - 1,
            nsec: 1_000_000_000 - n,
        },
    })
}

fn rfc3339(t: Timestamp) -> Option<String> {
    DateTime::from_timestamp(t.sec, t.nsec).map(|d| d.to_rfc3339_opts(SecondsFormat::Nanos, true))
}

fn parse_rfc3339(s: &str) -> Option<Timestamp> {
    let d = DateTime::parse_from_rfc3339(s).ok()?;
    Some(Timestamp {
        sec: d.timestamp(),
        nsec: d.timestamp_subsec_nanos().min(999_999_999),
    })
}

/// The user metadata to write for a node of `st_mode` `mode` (type bits included).
pub fn encode(mtime: Timestamp, atime: Timestamp, mode: u32, uid: u32, gid: u32) -> Attributes {
    let mut a = Attributes::new();
    let mut put = |k: &'static str, v: String| {
        a.insert(Attribute::Metadata(k.into()), AttributeValue::from(v));
    };
    put("mtime", seconds_string(mtime));
    if let Some(at) = rfc3339(atime) {
        put("atime", at);
    }
    put("mode", format!("{mode:o}"));
    put("uid", uid.to_string());
    put("gid", gid.to_string());
    a
}

/// What `attrs` (of a GET) say.
pub fn decode(attrs: &Attributes) -> UserMeta {
    let get = |k: &'static str| {
        attrs
            .get(&Attribute::Metadata(k.into()))
            .map(|v| v.as_ref().trim().to_string())
    };
    let id = |k| get(k).and_then(|v| v.parse::<u32>().ok());
    UserMeta {
        mtime: get("mtime").and_then(|v| parse_seconds(&v)),
        atime: get("atime").and_then(|v| parse_rfc3339(&v)),
        mode: get("mode")
            .and_then(|v| u32::from_str_radix(&v, 8).ok())
            .filter(|m| *m & !(S_IFMT | 0o7777) == 0),
        uid: id("uid"),
        gid: id("gid"),
    }
}

/// Whether `mode`'s type bits, when it has any, are those of `kind` (`S_IFREG`...).
pub fn is_kind(mode: u32, kind: u32) -> bool {
    mode & S_IFMT == 0 || mode & S_IFMT == kind
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(sec: i64, nsec: u32) -> Timestamp {
        Timestamp { sec, nsec }
    }

    #[test]
    fn mtimes_round_trip_exactly() {
        for t in [
            ts(0, 0),
            ts(1_700_000_000, 123_456_789),
            ts(-2, 500_000_000),
            ts(-3, 0),
        ] {
            assert_eq!(parse_seconds(&seconds_string(t)), Some(t), "{t:?}");
        }
        assert_eq!(seconds_string(ts(1, 5)), "1.000000005");
        assert_eq!(seconds_string(ts(-2, 500_000_000)), "-1.500000000");
        // rclone trims trailing zeros, or writes no fraction at all.
        assert_eq!(
            parse_seconds("1614876543.1"),
            Some(ts(1614876543, 100_000_000))
        );
        assert_eq!(parse_seconds("1614876543"), Some(ts(1614876543, 0)));
        assert_eq!(parse_seconds("1.1234567891"), Some(ts(1, 123_456_789)));
        for bad in [
            "",
            ".",
            ".5",
            "x",
            "1.2.3",
            "1e9",
            " 1",
            "--1",
            "99999999999999999999",
        ] {
            assert_eq!(parse_seconds(bad), None, "{bad}");
        }
    }

    #[test]
    fn attributes_round_trip_and_bad_values_are_left_out() {
        let a = encode(ts(10, 20), ts(30, 40), S_IFREG | 0o4755, 1000, 100);
        let m = decode(&a);
        assert_eq!(
            m,
            UserMeta {
                mtime: Some(ts(10, 20)),
                atime: Some(ts(30, 40)),
                mode: Some(S_IFREG | 0o4755),
                uid: Some(1000),
                gid: Some(100),
            }
        );
        let mut bad = Attributes::new();
        for (k, v) in [
            ("mtime", "soon"),
            ("mode", "9"),
            ("uid", "-1"),
            ("atime", "yesterday"),
        ] {
            bad.insert(Attribute::Metadata(k.into()), v.into());
        }
        assert_eq!(decode(&bad), UserMeta::default());
        // rclone's local backend writes atime with an offset.
        let mut r = Attributes::new();
        r.insert(
            Attribute::Metadata("atime".into()),
            "2023-05-11T17:54:11.523399602+01:00".into(),
        );
        assert_eq!(decode(&r).atime, Some(ts(1683824051, 523_399_602)));
        assert!(is_kind(0o644, S_IFREG) && is_kind(S_IFLNK | 0o777, S_IFLNK));
        assert!(!is_kind(S_IFLNK | 0o777, S_IFREG));
    }
}
