//! Compaction, a prune's last step before it deletes: a shard of which the kept
//! snapshots name less than half the bytes, and not every member, is rewritten. Its
//! live members (those a kept snapshot names) are copied, range by range, into new
//! shards, each with an index made of the old shards' own entries moved to their new
//! places; every kept snapshot that named them is then written again to point there,
//! and the old shard is dead like any other.
//!
//! The bytes pass through this machine: the object_store crate offers no
//! `UploadPartCopy`, and most members are far below the 5 MiB a copied part must
//! have. The live ranges are fetched, each from the object its manifest names (its
//! ETag), in GETs of up to 4 MiB, several ahead, each spanning the dead gaps under
//! 1 MiB between them (cheaper than a GET each); only live bytes are written. A member's content is not checked here: it is checked
//! against the hash its manifest records whenever it is read, as before.
//!
//! A new shard's key is the fingerprint of what it holds (the old shards and their
//! ranges), and its record is written beside it once it is whole, as an upload's: a
//! prune killed after writing it finds it on its rerun.

use crate::body::BodyReader;
use crate::manifest::{Manifest, Member, Shard, FORMAT};
use crate::store::Store;
use crate::stream_put::{put_stream, PartWriter};
use crate::{Result, S3Error};
use ferry_archive::index::{Footer, Index, IndexEntry, IndexWriter, FOOTER_LEN};
use ferry_core::error::Reporter;
use futures::StreamExt;
use object_store::{GetOptions, GetRange, ObjectStore};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{Read, Write};
use std::ops::Range;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Semaphore};

/// What a compacted shard's fingerprint hashes first.
const TAG: &[u8] = b"ferry-s3 compacted 1\0";

/// Parts in flight while a new shard goes up.
const PARTS_IN_FLIGHT: usize = 8;

/// The largest index of a shard read (a shard of 1 GiB of empty files: about 2
/// million entries, some 300 MB).
const MAX_INDEX: u64 = 1 << 30;

/// A shard worth compacting: its record and the members the kept snapshots name.
#[derive(Clone, Debug)]
pub struct Sparse {
    /// The shard as a manifest records it, its members those named, in archive order,
    /// each once.
    pub shard: Shard,
    /// The bytes those members take in it.
    pub live: u64,
}

/// The bytes `m` takes in `shard`: its headers and data, padded to its tar block
/// (none for a member whose range a manifest places past the shard's end: such a
/// shard is not compacted, [`sparse_shards`]).
fn span(m: &Member, shard: &Shard) -> u64 {
    m.e.next_multiple_of(512)
        .min(shard.size)
        .saturating_sub(m.o)
}

/// The most bytes kept after a compaction, for each byte the kept snapshots name: a
/// margin below the 1.5 promised, for the new shards' indexes and padding.
const MOST_KEPT: f64 = 1.4;

/// The shards to compact among those the manifests `kept` (oldest first) name, the
/// newest manifest's first, but those in `protected` and those the manifests record
/// otherwise one from another (size, ETag, members at one offset that differ in range
/// or stored name, or a member not on a tar block): each of which they name less than
/// half the bytes and not every member; then, while the shards kept would still hold more than
/// [`MOST_KEPT`] times the bytes named, the next sparsest, so that however the dead
/// bytes are spread, the prefix stays near the size of what it keeps.
pub fn sparse_shards(kept: &[&Manifest], protected: &HashSet<String>) -> Vec<Sparse> {
    let mut order: Vec<&str> = Vec::new();
    let mut named: HashMap<&str, (&Shard, BTreeMap<u64, &Member>)> = HashMap::new();
    let mut odd: HashSet<&str> = HashSet::new();
    for m in kept.iter().rev() {
        for s in &m.shards {
            let (first, members) = named.entry(&s.fingerprint).or_insert_with(|| {
                order.push(&s.fingerprint);
                (s, BTreeMap::new())
            });
            if (first.size, &first.etag, first.held) != (s.size, &s.etag, s.held) {
                odd.insert(&s.fingerprint);
            }
            for m in &s.members {
                let before = members.insert(m.o, m);
                let differs = |b: &Member| b.e != m.e || b.stored_path() != m.stored_path();
                if before.is_some_and(differs) || m.o % 512 != 0 {
                    odd.insert(&s.fingerprint);
                }
            }
        }
    }
    // Members in order must not overlap once padded to their blocks.
    for (fp, (shard, members)) in &named {
        let mut end = 0;
        for m in members.values() {
            if m.o < end {
                odd.insert(fp);
            }
            end = m.o + span(m, shard);
        }
    }
    // Every shard's stored and named bytes (a shard named whole needs all it has), and
    // those that may be compacted, sparsest first.
    let (mut stored, mut needed) = (0u64, 0u64);
    let mut candidates = Vec::new();
    for fp in order {
        let (shard, members) = &named[fp];
        stored += shard.size;
        let partial = shard.held.is_some_and(|held| (members.len() as u64) < held);
        if !partial || protected.contains(fp) || odd.contains(fp) {
            needed += shard.size;
            continue;
        }
        let live: u64 = members.values().map(|m| span(m, shard)).sum();
        needed += live;
        candidates.push((live as f64 / shard.size.max(1) as f64, fp, live));
    }
    candidates.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out = Vec::new();
    for (ratio, fp, live) in candidates {
        let (shard, members) = &named[fp];
        if ratio >= 0.5 && stored as f64 <= MOST_KEPT * needed as f64 {
            break;
        }
        stored -= shard.size - live;
        out.push(Sparse {
            shard: Shard {
                members: members.values().map(|&m| m.clone()).collect(),
                ..(*shard).clone()
            },
            live,
        });
    }
    out
}

/// What a compaction made: the new shards, and where each member moved.
#[derive(Debug, Default)]
pub struct Compacted {
    /// The shards rewritten (now dead).
    pub old: HashSet<String>,
    /// The new shards, each with all its members.
    pub new: Vec<Shard>,
    /// Bytes copied.
    pub copied: u64,
    /// Each moved member's new shard (an index into `new`) and offset, by its old
    /// shard and offset.
    moved: HashMap<(String, u64), (usize, u64)>,
}

/// Rewrites `sparse` into new shards of about `shard_size` bytes (an old shard's
/// members stay together, so a hardlink stays beside its target). A shard whose index
/// does not agree with its manifest is left as it is, with a warning.
pub fn compact(
    store: &Arc<Store>,
    sparse: Vec<Sparse>,
    shard_size: u64,
    reporter: &dyn Reporter,
) -> Result<Compacted> {
    let mut sources = Vec::new();
    for sp in sparse {
        match live_entries(store, &sp) {
            Ok(entries) => sources.push((sp, entries)),
            Err(e) => reporter.warn(&format!("{e}: not compacted")),
        }
    }
    // Directories go into directory shards, files into others.
    let mut groups: Vec<Vec<(Sparse, Vec<IndexEntry>)>> = Vec::new();
    let (dirs, files): (Vec<_>, Vec<_>) = sources.into_iter().partition(|s| s.0.shard.dirs);
    for sources in [files, dirs] {
        let mut size = 0;
        let mut open = false;
        for source in sources {
            let live = source.0.live;
            match groups.last_mut() {
                Some(group) if open && size + live <= shard_size => group.push(source),
                _ => {
                    size = 0;
                    groups.push(vec![source]);
                }
            }
            open = true;
            size += live;
        }
    }
    let mut out = Compacted::default();
    for group in groups {
        let shard = write_group(store, &group)?;
        let i = out.new.len();
        // The new shard's members are the group's, in order, at their new places.
        let old = group.iter().flat_map(|(sp, _)| {
            let fp = &sp.shard.fingerprint;
            sp.shard.members.iter().map(move |m| (fp, m.o))
        });
        for ((fp, o), placed) in old.zip(&shard.members) {
            out.old.insert(fp.clone());
            out.moved.insert((fp.clone(), o), (i, placed.o));
        }
        out.copied += group.iter().map(|(sp, _)| sp.live).sum::<u64>();
        out.new.push(shard);
    }
    Ok(out)
}

/// The index entries of `sp`'s live members, read from the shard's own index and
/// checked against the manifest's record of each.
fn live_entries(store: &Store, sp: &Sparse) -> Result<Vec<IndexEntry>> {
    let shard = &sp.shard;
    let key = store.key(&shard.name());
    let shown = format!("s3://{}/{key}", store.loc.bucket);
    let bad = |why: &dyn std::fmt::Display| S3Error::new(format!("{shown}: {why}"));
    let get = |range: std::ops::Range<u64>| {
        let opts = GetOptions {
            if_match: shard.etag.clone(),
            range: Some(GetRange::Bounded(range)),
            ..GetOptions::default()
        };
        store
            .rt
            .block_on(store.s3.get_opts(&key, opts))
            .map_err(|e| store.error(&key, "read", &e))
    };
    if shard.size < FOOTER_LEN {
        return Err(bad(&"too short to be a shard"));
    }
    let got = get(shard.size - FOOTER_LEN..shard.size)?;
    // A ranged GET of 64 bytes: its body is read as a stream of at most that many.
    let mut bytes = Vec::with_capacity(FOOTER_LEN as usize);
    Read::take(BodyReader::new(store, got), FOOTER_LEN)
        .read_to_end(&mut bytes)
        .map_err(|e| bad(&e))?;
    let footer = Footer::parse(&bytes, shard.size)
        .map_err(|e| bad(&e))?
        .ok_or_else(|| bad(&"no index"))?;
    if footer.index_len > MAX_INDEX {
        return Err(bad(&format_args!("an index of {} bytes", footer.index_len)));
    }
    let start = footer.index_offset;
    let got = get(start..start + footer.index_len)?;
    let wanted: HashMap<u64, &Member> = shard.members.iter().map(|m| (m.o, m)).collect();
    let mut found = Vec::with_capacity(wanted.len());
    for e in Index::new(footer).entries(BodyReader::new(store, got)) {
        let (_, e) = e.map_err(|e| bad(&e))?;
        let Some(m) = wanted.get(&e.header_offset) else {
            continue;
        };
        let path = crate::manifest::member_path(&e.path);
        // The index is untrusted as the manifest is: its offsets must agree with the
        // member's range, checked without overflow, its data on a tar block (so the
        // member ends where its span says).
        let ends = e.data_offset.checked_add(e.stored) == Some(m.e);
        let on_blocks = e.data_offset % 512 == 0 && e.header_offset % 512 == 0;
        let stored = m.stored_path();
        if path != stored || e.data_offset < e.header_offset || !ends || !on_blocks {
            return Err(bad(&format_args!(
                "its index places {} otherwise than the manifest",
                String::from_utf8_lossy(&stored).escape_debug()
            )));
        }
        found.push(e);
    }
    if found.len() != wanted.len() {
        return Err(bad(&"its index lacks members the manifest names"));
    }
    Ok(found)
}

/// The fingerprint of a new shard holding `group`'s live members.
fn fingerprint(group: &[(Sparse, Vec<IndexEntry>)]) -> String {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(TAG);
    h.update(&[is_dirs(group) as u8]);
    for (sp, _) in group {
        h.update(sp.shard.fingerprint.as_bytes());
        for m in &sp.shard.members {
            h.update(&m.o.to_le_bytes());
            h.update(&m.e.to_le_bytes());
        }
    }
    format!("{:032x}", h.digest128())
}

/// Whether `group` is of directory shards (then so is the shard made of it).
fn is_dirs(group: &[(Sparse, Vec<IndexEntry>)]) -> bool {
    group.first().is_some_and(|(sp, _)| sp.shard.dirs)
}

/// `group`'s live members as the new shard holds them (under the names they are
/// stored under, whatever a snapshot names them): one after another, each taking its
/// span, in order.
fn layout(group: &[(Sparse, Vec<IndexEntry>)]) -> Vec<Member> {
    let mut at = 0;
    let members = group.iter().flat_map(|(sp, _)| {
        sp.shard
            .members
            .iter()
            .map(move |m| (m, span(m, &sp.shard)))
    });
    members
        .map(|(m, span)| {
            let placed = Member {
                o: at,
                e: at + (m.e - m.o),
                ..m.renamed(&m.stored_path())
            };
            at += span;
            placed
        })
        .collect()
}

/// Writes (or, written by a killed prune, finds) the shard of `group`'s live members;
/// its record.
fn write_group(store: &Arc<Store>, group: &[(Sparse, Vec<IndexEntry>)]) -> Result<Shard> {
    let fp = fingerprint(group);
    let members = layout(group);
    let at: u64 = group.iter().map(|(sp, _)| sp.live).sum();
    if let Some(found) = store.rt.block_on(crate::upload::recorded(store, &fp)) {
        let same = found.members.len() == members.len()
            && found.members.iter().zip(&members).all(|(a, b)| a.o == b.o);
        if same {
            return Ok(found);
        }
    }
    let name = crate::manifest::shard_name(&fp);
    let key = store.key(&name);
    let part = crate::parts::part_size(at.saturating_mul(2)).unwrap_or(crate::parts::MAX_PART);
    let (parts_tx, parts_rx) = mpsc::channel(1);
    let (ended_tx, ended_rx) = oneshot::channel::<Result<()>>();
    let sending = {
        let (store, key) = (store.clone(), key.clone());
        store.clone().rt.spawn(async move {
            let parts = Arc::new(Semaphore::new(PARTS_IN_FLIGHT));
            put_stream(&store, &key, parts_rx, ended_rx, &parts).await
        })
    };
    let (mut out, _) = PartWriter::new(part, parts_tx);
    let written = copy_group(store, group, &members, &mut out);
    drop(out);
    let size = written.as_ref().ok().copied();
    let _ = ended_tx.send(written.map(|_| ()));
    let (put, ()) = store
        .rt
        .block_on(sending)
        .map_err(|e| S3Error::new(e.to_string()))??;
    let shard = Shard {
        fingerprint: fp,
        size: size.unwrap_or_default(),
        etag: put.e_tag,
        dirs: is_dirs(group),
        held: Some(members.len() as u64),
        members,
    };
    store
        .rt
        .block_on(crate::upload::write_record(store, &shard))?;
    Ok(shard)
}

/// Dead bytes between two live ranges fetched rather than sent for with one GET more
/// (on loopback a GET's round trip costs more than a MiB's transfer; members a third
/// of which are live made one GET each, 17,000 for a kernel tree's shards).
const GAP: u64 = 1 << 20;

/// Bytes per GET.
const RANGE: u64 = 4 << 20;

/// GETs in flight ahead of the writer.
const GETS_AHEAD: usize = 8;

/// The GETs that fetch the ranges `live` (in order, apart): at most [`RANGE`] bytes
/// each, spanning dead gaps of at most [`GAP`].
fn windows(live: &[Range<u64>]) -> Vec<Range<u64>> {
    let mut out: Vec<Range<u64>> = Vec::new();
    for r in live {
        let mut start = r.start;
        if let Some(w) = out.last_mut() {
            if start - w.end <= GAP && w.end - w.start < RANGE {
                w.end = r.end.min(w.start + RANGE);
                start = w.end;
            }
        }
        while start < r.end {
            let end = (start + RANGE).min(r.end);
            out.push(start..end);
            start = end;
        }
    }
    out
}

/// A window's bytes, or why not.
type Fetched = std::result::Result<(Range<u64>, bytes::Bytes), S3Error>;

/// Fetches `wins` of `shard` on the runtime, [`GETS_AHEAD`] at once, each sent on in
/// order; stops at the first failure or when the receiver has gone.
fn fetch_windows(
    store: &Arc<Store>,
    shard: &Shard,
    wins: Vec<Range<u64>>,
) -> (mpsc::Receiver<Fetched>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(GETS_AHEAD);
    let (store2, key, etag) = (store.clone(), store.key(&shard.name()), shard.etag.clone());
    let task = store.rt.spawn(async move {
        let store = &store2;
        let get = |w: Range<u64>| {
            let opts = GetOptions {
                if_match: etag.clone(),
                range: Some(GetRange::Bounded(w.clone())),
                ..GetOptions::default()
            };
            let key = &key;
            async move {
                let got = store.s3.get_opts(key, opts).await;
                let bytes = match got {
                    Ok(got) => got.bytes().await,
                    Err(e) => Err(e),
                };
                bytes
                    .map(|b| (w, b))
                    .map_err(|e| store.error(key, "read", &e))
            }
        };
        let mut gets = futures::stream::iter(wins).map(get).buffered(GETS_AHEAD);
        while let Some(got) = gets.next().await {
            let failed = got.is_err();
            if tx.send(got).await.is_err() || failed {
                return;
            }
        }
    });
    (rx, task)
}

/// Writes the new shard of `group` to `out`: each old shard's live ranges (fetched
/// in windows, [`windows`]), the end-of-archive blocks, and the index of the entries at
/// their places in `placed` (the [`layout`]). Returns its length.
fn copy_group(
    store: &Arc<Store>,
    group: &[(Sparse, Vec<IndexEntry>)],
    placed: &[Member],
    out: &mut PartWriter,
) -> Result<u64> {
    let io = |e: std::io::Error| S3Error::new(format!("compacting: {e}"));
    let mut index = IndexWriter::default();
    let mut placed = placed.iter();
    for (sp, entries) in group {
        let shard = &sp.shard;
        let mut live: Vec<Range<u64>> = Vec::new();
        for ((m, e), to) in shard.members.iter().zip(entries).zip(placed.by_ref()) {
            let end = m.o + span(m, shard);
            let moved = IndexEntry {
                header_offset: to.o,
                data_offset: to.o + (e.data_offset - e.header_offset),
                ..e.clone()
            };
            index.push(&moved).map_err(io)?;
            match live.last_mut() {
                Some(run) if run.end == m.o => run.end = end,
                _ => live.push(m.o..end),
            }
        }
        let (mut rx, feeder) = fetch_windows(store, shard, windows(&live));
        let copied = copy_live(&live, &mut rx, out);
        rx.close();
        let _ = store.rt.block_on(feeder);
        copied.map_err(|e| {
            S3Error::new(format!(
                "s3://{}/{}: {e}",
                store.loc.bucket,
                store.key(&shard.name())
            ))
        })?;
    }
    let data: u64 = group.iter().map(|(sp, _)| sp.live).sum();
    out.write_all(&[0; 1024]).map_err(io)?;
    let tar_end = data + 1024;
    let tail = index.finish(tar_end, |b| out.write_all(b)).map_err(io)?;
    Ok(tar_end + tail)
}

/// Writes the parts of the windows `rx` delivers that lie in `live`, in order.
fn copy_live(
    live: &[Range<u64>],
    rx: &mut mpsc::Receiver<Fetched>,
    out: &mut PartWriter,
) -> std::result::Result<(), String> {
    let mut next = 0;
    while next < live.len() {
        let (w, bytes) = match rx.blocking_recv() {
            Some(Ok(got)) => got,
            Some(Err(e)) => return Err(e.to_string()),
            None => return Err("the reads stopped".into()),
        };
        if bytes.len() as u64 != w.end - w.start {
            return Err(format!(
                "{} bytes where {} were asked for",
                bytes.len(),
                w.end - w.start
            ));
        }
        while let Some(r) = live.get(next).filter(|r| r.start < w.end) {
            let (from, to) = (r.start.max(w.start), r.end.min(w.end));
            out.write_all(&bytes[(from - w.start) as usize..(to - w.start) as usize])
                .map_err(|e| e.to_string())?;
            if r.end > w.end {
                break;
            }
            next += 1;
        }
    }
    Ok(())
}

impl Compacted {
    /// `m` pointing at the new shards, None when it names none of the old ones. Its
    /// members of a new shard are in archive order; the new shards of files go before
    /// the directory shards, those of directories after them.
    pub fn rewrite(&self, m: &Manifest) -> Result<Option<Manifest>> {
        if !m.shards.iter().any(|s| self.old.contains(&s.fingerprint)) {
            return Ok(None);
        }
        let mut named: BTreeMap<usize, Vec<Member>> = BTreeMap::new();
        let mut shards = Vec::new();
        for s in &m.shards {
            if !self.old.contains(&s.fingerprint) {
                shards.push(s.clone());
                continue;
            }
            for member in &s.members {
                let Some(&(i, o)) = self.moved.get(&(s.fingerprint.clone(), member.o)) else {
                    return Err(S3Error::new(format!(
                        "compacting: {} of shard {} was not moved",
                        String::from_utf8_lossy(&member.path()).escape_debug(),
                        s.fingerprint
                    )));
                };
                named.entry(i).or_default().push(Member {
                    o,
                    e: o + (member.e - member.o),
                    ..member.clone()
                });
            }
        }
        for (i, mut members) in named {
            members.sort_by_key(|m| m.o);
            shards.push(Shard {
                members,
                ..self.new[i].clone()
            });
        }
        // The directory shards last, as they were.
        shards.sort_by_key(|s| s.dirs);
        let new = Manifest {
            format: FORMAT.into(),
            shards,
            ..m.clone()
        };
        // What every reader will check of it, checked before it is written.
        new.check()
            .map_err(|why| S3Error::new(format!("compacting: the rewritten manifest: {why}")))?;
        Ok(Some(new))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(path: &str, o: u64, e: u64) -> Member {
        let mut m = Member::with_path(path.as_bytes());
        (m.o, m.e, m.s) = (o, e, (e - o).saturating_sub(512));
        m
    }

    fn shard(fp: char, size: u64, held: u64, members: Vec<Member>, dirs: bool) -> Shard {
        Shard {
            fingerprint: fp.to_string().repeat(32),
            size,
            etag: None,
            dirs,
            held: Some(held),
            members,
        }
    }

    fn manifest(shards: Vec<Shard>) -> Manifest {
        Manifest {
            format: FORMAT.into(),
            snapshot: Some("20261201T000000Z".into()),
            shards,
        }
    }

    #[test]
    fn only_shards_mostly_dead_and_not_whole_are_sparse() {
        let big = |i: u64| member(&format!("f{i}"), i * 10240, i * 10240 + 10000);
        // Named: one of four 10 KiB members (sparse); three of four, by two manifests
        // together (not sparse); all of a small shard whose index outweighs them.
        let a = shard('a', 4 * 10240 + 1024, 4, vec![big(1)], false);
        let b1 = shard('b', 4 * 10240 + 1024, 4, vec![big(0)], false);
        let b2 = shard('b', 4 * 10240 + 1024, 4, vec![big(2), big(3)], false);
        let tiny = shard('c', 10240, 1, vec![member("t", 0, 600)], false);
        let dirs = shard('d', 10240, 1, vec![member("dir", 0, 512 + 1)], true);
        let older = manifest(vec![b1, dirs.clone()]);
        let newer = manifest(vec![a.clone(), b2, tiny, dirs]);
        let sparse = sparse_shards(&[&older, &newer], &HashSet::new());
        assert_eq!(sparse.len(), 1);
        assert_eq!(sparse[0].shard.fingerprint, a.fingerprint);
        assert_eq!(sparse[0].live, 10240);
        let protected = HashSet::from([a.fingerprint.clone()]);
        assert!(sparse_shards(&[&older, &newer], &protected).is_empty());
    }

    #[test]
    fn shards_the_manifests_record_otherwise_are_left() {
        let big = |i: u64| member(&format!("f{i}"), i * 10240, i * 10240 + 10000);
        let a = shard('a', 4 * 10240 + 1024, 4, vec![big(1)], false);
        let sparse = |older: Shard| {
            let (older, newer) = (manifest(vec![older]), manifest(vec![a.clone()]));
            sparse_shards(&[&older, &newer], &HashSet::new()).len()
        };
        assert_eq!(sparse(a.clone()), 1);
        // Another size for it, a member past its end, one off a tar block, one at the
        // same offset ending elsewhere: a hostile or damaged manifest, not compacted.
        let mut other = a.clone();
        other.size = 1 << 30;
        other.members = vec![member("far", 1 << 29, (1 << 29) + 10)];
        assert_eq!(sparse(other), 0);
        let mut off_block = a.clone();
        off_block.members = vec![member("odd", 100, 700)];
        assert_eq!(sparse(off_block), 0);
        let mut longer = a.clone();
        longer.members[0].e += 4096;
        assert_eq!(sparse(longer), 0);
    }

    #[test]
    fn windows_span_small_gaps_and_no_more_than_a_range() {
        const M: u64 = 1 << 20;
        // Small gaps are fetched over; a large one is not; a window stops at 4 MiB.
        let live = [0..100, 200..300, 3 * M..3 * M + 10, 9 * M..19 * M];
        let got = windows(&live);
        assert_eq!(
            got,
            [
                0..300,
                3 * M..3 * M + 10,
                9 * M..13 * M,
                13 * M..17 * M,
                17 * M..19 * M
            ]
        );
        let packed = [0..M, M + 5..3 * M, 3 * M..6 * M];
        assert_eq!(windows(&packed), [0..4 * M, 4 * M..6 * M]);
    }

    #[test]
    fn shards_more_than_half_named_are_compacted_while_the_prefix_holds_too_much() {
        // Three shards of ten 10 KiB members, six named in each: none is under half
        // named, but together they hold 1.67 times what is named. Two are compacted.
        let six = |fp| {
            let members = (0..6)
                .map(|i| member(&format!("{fp}{i}"), i * 10240, i * 10240 + 9728))
                .collect();
            shard(fp, 10 * 10240, 10, members, false)
        };
        let m = manifest(vec![six('a'), six('b'), six('c')]);
        assert_eq!(sparse_shards(&[&m], &HashSet::new()).len(), 2);
    }

    #[test]
    fn a_rewritten_manifest_names_the_new_shard_in_order_before_the_directories() {
        let old = shard(
            'a',
            1 << 20,
            9,
            vec![member("x", 8192, 9000), member("y", 20480, 30000)],
            false,
        );
        let kept = shard('b', 1 << 20, 1, vec![member("z", 0, 700)], false);
        let dirs = shard('d', 10240, 1, vec![member("dir", 0, 513)], true);
        let m = manifest(vec![old.clone(), kept.clone(), dirs.clone()]);
        let new = shard('e', 50000, 2, Vec::new(), false);
        let c = Compacted {
            old: HashSet::from([old.fingerprint.clone()]),
            new: vec![new.clone()],
            copied: 0,
            moved: HashMap::from([
                ((old.fingerprint.clone(), 20480), (0, 1024)),
                ((old.fingerprint.clone(), 8192), (0, 0)),
            ]),
        };
        let got = c.rewrite(&m).unwrap().unwrap();
        let fps: Vec<&str> = got.shards.iter().map(|s| s.fingerprint.as_str()).collect();
        assert_eq!(
            fps,
            [&kept.fingerprint, &new.fingerprint, &dirs.fingerprint]
        );
        let moved = &got.shards[1];
        assert_eq!(moved.held, Some(2));
        let places: Vec<(u64, u64)> = moved.members.iter().map(|m| (m.o, m.e)).collect();
        assert_eq!(places, [(0, 808), (1024, 1024 + 9520)]);
        assert!(c.rewrite(&manifest(vec![kept, dirs])).unwrap().is_none());
        // A member the compaction did not move is an error, not a member lost.
        let mut lost = m.clone();
        lost.shards[0].members.push(member("w", 40960, 41000));
        assert!(c.rewrite(&lost).is_err());
    }
}
