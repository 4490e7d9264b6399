//! Object keys and relative paths, both ways: a file at `PATH` below SRC is the object
//! `PREFIX/PATH`, a symlink the object `PREFIX/PATH.rclonelink` holding its target
//! (rclone's `--links` form). A listed key is untrusted: what follows the prefix must
//! be a plain relative path (no empty, `.` or `..` component, no NUL, components of at
//! most 255 bytes, 4,095 in all), or the key is refused, naming it.

use ferry_core::entry::RelPath;

/// The suffix of an object holding a symlink's target, as rclone `--links` writes it.
pub const LINK_SUFFIX: &str = ".rclonelink";
/// The longest file name Linux takes.
const NAME_MAX: usize = 255;
/// The longest path Linux takes, less its NUL.
const PATH_MAX: usize = 4095;

/// What a listed object is below the prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listed {
    /// A file at this path.
    File(RelPath),
    /// A symlink at this path (the object holds its target).
    Symlink(RelPath),
}

/// The key, below `prefix`, of the node at `path` (a symlink when `link`); an error
/// (the reason) when the name cannot be an S3 key.
pub fn key_of(prefix: &str, path: &[u8], link: bool) -> Result<String, &'static str> {
    let name = std::str::from_utf8(path).map_err(|_| "the name is not UTF-8, as S3 keys are")?;
    if name.chars().any(|c| c.is_control()) {
        return Err("the name holds a control character, which object_store keys refuse");
    }
    let suffix = if link { LINK_SUFFIX } else { "" };
    Ok(match prefix.is_empty() {
        true => format!("{name}{suffix}"),
        false => format!("{prefix}/{name}{suffix}"),
    })
}

/// The node the listed `key` stands for, below `prefix`; why not when it is no plain
/// relative path there.
pub fn listed(prefix: &str, key: &str) -> Result<Listed, &'static str> {
    let rel = match prefix.is_empty() {
        true => Some(key),
        false => key.strip_prefix(prefix).and_then(|r| r.strip_prefix('/')),
    }
    .ok_or("not below the prefix")?;
    let (rel, link) = match rel.strip_suffix(LINK_SUFFIX) {
        Some(r) if !r.is_empty() && !r.ends_with('/') => (r, true),
        _ => (rel, false),
    };
    if rel.is_empty() {
        return Err("names the prefix itself");
    }
    if rel.starts_with('/') {
        return Err("absolute path below the prefix");
    }
    if rel.len() > PATH_MAX {
        return Err("path longer than 4,095 bytes");
    }
    for comp in rel.split('/') {
        match comp {
            "" => return Err("empty path component"),
            "." | ".." => return Err("`.` or `..` component: leaves the tree"),
            c if c.contains('\0') => return Err("NUL byte in the path"),
            c if c.len() > NAME_MAX => return Err("path component longer than 255 bytes"),
            _ => {}
        }
    }
    let path = RelPath::from_bytes(rel.as_bytes().to_vec());
    Ok(match link {
        true => Listed::Symlink(path),
        false => Listed::File(path),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(p: &str) -> Listed {
        Listed::File(RelPath::from_bytes(p.into()))
    }

    #[test]
    fn keys_and_paths_map_both_ways() {
        assert_eq!(key_of("p/q", b"a/b c", false).unwrap(), "p/q/a/b c");
        assert_eq!(key_of("", b"l", true).unwrap(), "l.rclonelink");
        assert!(key_of("p", b"bad\xff", false).is_err());
        assert!(key_of("p", b"new\nline", false).is_err());
        assert_eq!(listed("p/q", "p/q/a/b c"), Ok(file("a/b c")));
        assert_eq!(listed("", "x"), Ok(file("x")));
        assert_eq!(
            listed("p", "p/d/l.rclonelink"),
            Ok(Listed::Symlink(RelPath::from_bytes(b"d/l".to_vec())))
        );
        assert_eq!(listed("p", "p/.rclonelink"), Ok(file(".rclonelink")));
    }

    #[test]
    fn hostile_keys_are_refused_saying_why() {
        let long = format!("p/{}", "n".repeat(256));
        let deep = format!("p/{}", "d/".repeat(2100));
        for (key, why) in [
            ("p/../etc/passwd", "leaves the tree"),
            ("p/a/./b", "leaves the tree"),
            ("p/a/..", "leaves the tree"),
            ("p//abs", "absolute"),
            ("p/a//b", "empty path component"),
            ("p/a/", "empty path component"),
            ("p/", "names the prefix"),
            ("pq/x", "not below the prefix"),
            ("p/a\0b", "NUL"),
            (long.as_str(), "longer than 255"),
            (deep.as_str(), "longer than 4,095"),
        ] {
            let err = listed("p", key).expect_err(key);
            assert!(err.contains(why), "{key}: {err}");
        }
    }
}
