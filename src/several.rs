//! Several SRCs in one command (`ferry copy a b DST`, `ferry pack a b A`): the name
//! each takes (its last component, as `cp -a a b DST/` and `tar -cf A a b` give it),
//! refused where it has none or two SRCs would take the same.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

/// The name a SRC takes when several are given: its last component (`a/b/` is `b`);
/// none for `/`, `.` or `..`.
pub fn own_name(src: &Path) -> Option<&OsStr> {
    match src.components().next_back()? {
        Component::Normal(name) => Some(name),
        _ => None,
    }
}

/// Each of `srcs` with the name it takes; an error naming a SRC that has none, or two
/// that would take the same (their members would mix in the archive).
pub fn named_sources(srcs: &[PathBuf]) -> anyhow::Result<Vec<(Vec<u8>, PathBuf)>> {
    let mut named: Vec<(Vec<u8>, PathBuf)> = Vec::with_capacity(srcs.len());
    for src in srcs {
        let Some(name) = own_name(src) else {
            anyhow::bail!(
                "{}: with several SRCs each needs a name of its own to go under",
                src.display()
            );
        };
        let name = name.as_encoded_bytes().to_vec();
        if let Some((_, first)) = named.iter().find(|(n, _)| *n == name) {
            anyhow::bail!(
                "{} and {}: both would go under the name {}: give one SRC of each name",
                first.display(),
                src.display(),
                name.escape_ascii()
            );
        }
        named.push((name, src.clone()));
    }
    Ok(named)
}

/// The directory every one of `named` lies in, if they share one (`-C DIR a b`, or
/// `dir/a dir/b`), which paths below them are told from; otherwise none (the empty
/// path), so they are told as the members they become.
pub fn common_parent(named: &[(Vec<u8>, PathBuf)]) -> PathBuf {
    let parent = |src: &PathBuf| src.parent().map(Path::to_path_buf).unwrap_or_default();
    let first = named
        .first()
        .map(|(_, src)| parent(src))
        .unwrap_or_default();
    match named.iter().all(|(_, src)| parent(src) == first) {
        true => first,
        false => PathBuf::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_last_components_and_must_differ() {
        let srcs: Vec<PathBuf> = ["x/a", "b/", "/y/c"].iter().map(PathBuf::from).collect();
        let named = named_sources(&srcs).expect("named");
        let names: Vec<&[u8]> = named.iter().map(|(n, _)| n.as_slice()).collect();
        assert_eq!(names, [b"a".as_slice(), b"b", b"c"]);
        assert_eq!(common_parent(&named), PathBuf::new());
        let twice: Vec<PathBuf> = ["x/a", "y/a"].iter().map(PathBuf::from).collect();
        let err = named_sources(&twice).unwrap_err().to_string();
        assert!(
            err.contains("x/a and y/a") && err.contains("name a"),
            "{err}"
        );
        let dots: Vec<PathBuf> = ["a", ".."].iter().map(PathBuf::from).collect();
        assert!(named_sources(&dots).is_err());
        let shared: Vec<PathBuf> = ["d/a", "d/b"].iter().map(PathBuf::from).collect();
        assert_eq!(
            common_parent(&named_sources(&shared).expect("named")),
            PathBuf::from("d")
        );
    }
}
