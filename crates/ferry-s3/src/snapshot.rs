//! Snapshots: every upload of shards is one. Its manifest is kept as
//! `snapshots/NAME.ferry`, NAME the upload's start in UTC (`20261201T203015Z`, with
//! `.2`, `.3` ... when that second is taken already); `manifest.ferry` is then written
//! to name it the newest ([`Newest`], a few bytes of JSON). `s3://B/P@NAME` reads one
//! snapshot; a snapshot stays until `ferry prune` removes it ([`crate::prune`]), and
//! is written again only by a prune's compaction, naming the same members in other
//! shards ([`crate::compact`]).

use crate::manifest::{Manifest, MAX_STORED};
use crate::store::Store;
use crate::{Result, S3Error};
use futures::TryStreamExt;
use object_store::{ObjectStoreExt, PutPayload};

/// What `manifest.ferry` holds: the name of the newest snapshot. (An upload from
/// before snapshots holds its whole manifest there, zstd-compressed, still read.)
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Newest {
    /// [`NEWEST_FORMAT`].
    pub format: String,
    /// The newest snapshot.
    pub snapshot: String,
    /// When a prune last wrote that snapshot again (compacting the shards it names):
    /// the pointer then changes too, and with it its ETag, by which readers keep their
    /// copy of the manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewritten: Option<String>,
}

/// The format string of [`Newest`].
pub const NEWEST_FORMAT: &str = "ferry-s3 newest 1";

impl Newest {
    /// The bytes naming `name` the newest.
    pub fn encode(name: &str) -> Vec<u8> {
        Newest::encode_rewritten(name, None)
    }

    /// The bytes naming `name` the newest, written again by a prune at `when`.
    pub fn encode_rewritten(name: &str, when: Option<&str>) -> Vec<u8> {
        let n = Newest {
            format: NEWEST_FORMAT.into(),
            snapshot: name.into(),
            rewritten: when.map(String::from),
        };
        serde_json::to_vec(&n).unwrap_or_default()
    }

    /// The snapshot `body` names, when it is a [`Newest`] (it begins with `{`; a
    /// manifest is zstd); an error (`what` naming the object) when it is one, but bad.
    pub fn decode(body: &[u8], what: &str) -> Option<Result<String>> {
        if body.first() != Some(&b'{') {
            return None;
        }
        let bad = |why: String| S3Error::new(format!("{what}: bad manifest: {why}"));
        let n: Newest = match serde_json::from_slice(body) {
            Ok(n) => n,
            Err(e) => return Some(Err(bad(e.to_string()))),
        };
        Some(match (n.format == NEWEST_FORMAT, is_name(&n.snapshot)) {
            (true, true) => Ok(n.snapshot),
            (false, _) => Err(bad(format!("format {:?}, not {NEWEST_FORMAT:?}", n.format))),
            (_, false) => Err(bad(format!("snapshot name {:?}", n.snapshot))),
        })
    }
}

/// The folder of snapshots under the prefix.
pub const DIR: &str = "snapshots";

/// The most uploads given one second's name.
const MOST_IN_A_SECOND: u32 = 9999;

/// A snapshot's name parsed: its second, and its place among that second's.
fn parse(name: &str) -> Option<(i64, u32)> {
    let (base, n) = match name.split_once('.') {
        Some((base, n)) => {
            let ok = !n.starts_with('0') && n.len() <= 4 && n.bytes().all(|b| b.is_ascii_digit());
            (base, if ok { n.parse().ok()? } else { return None })
        }
        None => (name, 1),
    };
    if !(1..=MOST_IN_A_SECOND).contains(&n) || name.ends_with(".1") {
        return None;
    }
    Some((ferry_core::utc::parse_basic(base)?, n))
}

/// Whether `name` is a snapshot's name.
pub fn is_name(name: &str) -> bool {
    parse(name).is_some()
}

/// When the snapshot `name` was begun, in seconds after the epoch.
pub fn time_of(name: &str) -> Option<i64> {
    parse(name).map(|(secs, _)| secs)
}

/// Orders snapshot names oldest first.
pub fn order(a: &str, b: &str) -> std::cmp::Ordering {
    parse(a).cmp(&parse(b))
}

/// The object name of the snapshot `name` under the prefix.
pub fn object(name: &str) -> String {
    format!("{DIR}/{name}.ferry")
}

/// The name for an upload begun at `now` (seconds after the epoch), after the newest
/// snapshot `newest`: the second's name, or one after the newest when that is not later
/// (the same second, or a clock behind the one that named it).
pub fn next_name(now: i64, newest: Option<&str>) -> String {
    let mine = ferry_core::utc::basic(now);
    let Some((secs, n)) = newest.and_then(parse) else {
        return mine;
    };
    if (now, 1) > (secs, n) {
        return mine;
    }
    let base = ferry_core::utc::basic(secs);
    match n < MOST_IN_A_SECOND {
        true => format!("{base}.{}", n + 1),
        false => ferry_core::utc::basic(secs + 1),
    }
}

/// The snapshots under the prefix, oldest first.
pub async fn list(store: &Store) -> Result<Vec<String>> {
    let listed = store.list_folder(DIR).await?;
    let mut names: Vec<String> = listed
        .iter()
        .filter_map(|m| {
            m.location
                .filename()?
                .strip_suffix(".ferry")
                .map(str::to_string)
        })
        .filter(|n| is_name(n))
        .collect();
    names.sort_by(|a, b| order(a, b));
    Ok(names)
}

/// Reads and checks the manifest of snapshot `name`.
pub async fn read(store: &Store, name: &str) -> Result<Manifest> {
    let key = store.key(&object(name));
    let shown = format!("s3://{}/{key}", store.loc.bucket);
    let bytes = read_bytes(store, name, "read the snapshot").await?;
    let m = Manifest::decode(&bytes, &shown)?;
    named_so(&m, name, &shown)?;
    Ok(m)
}

/// Writes `m` as the snapshot `name`'s manifest (an upload's, or one a prune's
/// compaction wrote again).
pub async fn write(store: &Store, name: &str, m: &Manifest) -> Result<()> {
    let key = store.key(&object(name));
    store
        .s3
        .put(&key, PutPayload::from(m.encode()))
        .await
        .map_err(|e| store.error(&key, "write the manifest", &e))?;
    Ok(())
}

/// Writes `manifest.ferry` naming `name` the newest; `rewritten`: when a prune wrote
/// it again (see [`Newest::rewritten`]).
pub async fn write_newest(store: &Store, name: &str, rewritten: Option<&str>) -> Result<()> {
    let key = store.key(crate::manifest::NAME);
    let body = Newest::encode_rewritten(name, rewritten);
    store
        .s3
        .put(&key, PutPayload::from(body))
        .await
        .map_err(|e| store.error(&key, "write the manifest", &e))?;
    Ok(())
}

/// The stored bytes of snapshot `name`'s manifest (at most [`MAX_STORED`]); `op` says
/// what failed.
pub async fn read_bytes(store: &Store, name: &str, op: &str) -> Result<Vec<u8>> {
    let key = store.key(&object(name));
    let got = store
        .s3
        .get(&key)
        .await
        .map_err(|e| store.error(&key, op, &e))?;
    crate::body::gather(store, &key, op, got, MAX_STORED).await
}

/// Checks that the manifest `m`, read as snapshot `name` (`shown` in messages), names
/// itself so: a snapshot's object replaced by another's is refused.
pub fn named_so(m: &Manifest, name: &str, shown: &str) -> Result<()> {
    match m.snapshot.as_deref() == Some(name) {
        true => Ok(()),
        false => Err(S3Error::new(format!(
            "{shown}: bad manifest: it names itself {:?}, not {name:?}",
            m.snapshot.as_deref().unwrap_or("nothing")
        ))),
    }
}

/// One snapshot, as `ferry ls --snapshots` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Its name.
    pub name: String,
    /// Its members (directories too).
    pub members: u64,
    /// The bytes of its files.
    pub bytes: u64,
    /// The bytes stored in shards that no other snapshot names: what pruning it frees.
    pub only: u64,
}

/// Every snapshot under the prefix, oldest first, with what it holds; a snapshot that
/// cannot be read or is damaged is an error naming it.
pub async fn summaries(store: &Store) -> Result<Vec<Summary>> {
    use futures::StreamExt;
    let names = list(store).await?;
    let manifests: Vec<Manifest> = futures::stream::iter(names.iter().map(|n| read(store, n)))
        .buffered(8)
        .try_collect()
        .await?;
    // How many snapshots name each stored member (its shard and offset).
    let mut named: std::collections::HashMap<(&str, u64), u32> = Default::default();
    for m in &manifests {
        for s in &m.shards {
            for member in &s.members {
                *named.entry((s.fingerprint.as_str(), member.o)).or_default() += 1;
            }
        }
    }
    Ok(names
        .iter()
        .zip(&manifests)
        .map(|(name, m)| {
            let members = m
                .shards
                .iter()
                .flat_map(|s| s.members.iter().map(move |x| (s, x)));
            let mut out = Summary {
                name: name.clone(),
                members: 0,
                bytes: 0,
                only: 0,
            };
            for (s, x) in members {
                // The root (a directory shard's member of empty path) is no entry of
                // the tree as `ls` lists it.
                out.members += u64::from(!(s.dirs && x.path().is_empty()));
                out.bytes += x.s;
                if named.get(&(s.fingerprint.as_str(), x.o)) == Some(&1) {
                    out.only += x.e - x.o;
                }
            }
            out
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_is_named_and_a_bad_name_refused() {
        let body = Newest::encode("20261201T203015Z.2");
        assert_eq!(
            Newest::decode(&body, "m").unwrap().unwrap(),
            "20261201T203015Z.2"
        );
        assert!(Newest::decode(b"\x28\xb5\x2f\xfd", "m").is_none());
        for bad in [
            &br#"{"format":"ferry-s3 newest 1","snapshot":"../x"}"#[..],
            br#"{"format":"other","snapshot":"20261201T203015Z"}"#,
            b"{not json",
        ] {
            let e = Newest::decode(bad, "s3://b/p/manifest.ferry")
                .unwrap()
                .unwrap_err();
            assert!(
                e.0.starts_with("s3://b/p/manifest.ferry: bad manifest"),
                "{e}"
            );
        }
    }

    #[test]
    fn names_order_by_time_then_count() {
        let t = 1_796_157_015; // 20261201T203015Z
        assert_eq!(next_name(t, None), "20261201T203015Z");
        assert_eq!(next_name(t, Some("20261201T203014Z")), "20261201T203015Z");
        assert_eq!(next_name(t, Some("20261201T203015Z")), "20261201T203015Z.2");
        assert_eq!(
            next_name(t, Some("20261201T203015Z.9")),
            "20261201T203015Z.10"
        );
        // A clock behind the newest name still names a later one.
        assert_eq!(
            next_name(t - 60, Some("20261201T203015Z.2")),
            "20261201T203015Z.3"
        );
        let mut names = vec![
            "20261201T203015Z.10",
            "20261201T203016Z",
            "20261201T203015Z",
            "20261201T203015Z.9",
        ];
        names.sort_by(|a, b| order(a, b));
        assert_eq!(
            names,
            [
                "20261201T203015Z",
                "20261201T203015Z.9",
                "20261201T203015Z.10",
                "20261201T203016Z"
            ]
        );
        for bad in [
            "20261201T203015Z.1",
            "20261201T203015Z.01",
            "20261201T203015Z.",
            "x",
            "20261201T203015Z.10000",
            "../20261201T203015Z",
        ] {
            assert!(!is_name(bad), "{bad}");
        }
        assert_eq!(time_of("20261201T203015Z.3"), Some(t));
    }
}
