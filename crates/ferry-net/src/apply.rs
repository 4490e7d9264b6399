//! The plan's frames, both ends: after the archive stream, the sender sends what it
//! found besides data ([`crate::plan`]): the paths to delete (`--delete`), in `Delete`
//! frames, and the metadata-only changes, in `Meta` frames, then `PlanEnd`. The
//! receiver carries them out beneath its destination's root descriptor, by the local
//! copy's rules ([`ferry_core::delete::remove_below`], [`ferry_core::touch`]), and
//! tells each change; in a dry run it only tells.
//!
//! A receiver takes `Delete` frames only when its client asked for `--delete`: a
//! sender cannot make it delete anything otherwise, and never anything outside its
//! destination (each path is a path of plain names, reached without following a
//! symlink).

use crate::frame::{expect_frame, Fields, Kind, PutFields, MAX_FRAME};
use crate::meta_wire::{LocalOwners, WireMeta};
use crate::plan::{kind_of_byte, MetaChange, RESTORE};
use crate::proto::{unexpected, Mirror, MAX_PATH};
use crate::stream::{lock, report_message, Shared};
use crate::NetError;
use ferry_core::changes::Changes;
use ferry_core::delete::{remove_below, DeleteLimit, DeleteOptions};
use ferry_core::entry::RelPath;
use ferry_core::error::Reporter;
use ferry_core::filter::Filter;
use ferry_core::meta::MetaWriter;
use ferry_core::touch::{Touch, Toucher};
use ferry_core::Stats;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;

/// Payload bytes a plan frame is filled to before it is sent.
const BATCH: usize = 256 << 10;

// A batch and one more record (a path, metadata with its xattrs) fit in a frame.
const _: () = assert!(BATCH + MAX_PATH + crate::meta_wire::MAX_XATTR_BYTES + 4096 < MAX_FRAME);

/// Sends the plan's frames: `deletions` (none unless asked), `metas`, then `PlanEnd`.
pub(crate) fn send_plan<W: Write>(
    out: &Shared<W>,
    deletions: &[RelPath],
    metas: &[MetaChange],
) -> io::Result<()> {
    let mut batch = Vec::new();
    let flush = |batch: &mut Vec<u8>, kind: Kind, force: bool| -> io::Result<()> {
        if batch.len() >= BATCH || (force && !batch.is_empty()) {
            lock(out).frame(kind, batch)?;
            batch.clear();
        }
        Ok(())
    };
    for path in deletions.iter().filter(|p| p.as_bytes().len() <= MAX_PATH) {
        batch.put_bytes(path.as_bytes());
        flush(&mut batch, Kind::Delete, false)?;
    }
    flush(&mut batch, Kind::Delete, true)?;
    for m in metas.iter().filter(|m| m.path.as_bytes().len() <= MAX_PATH) {
        m.encode(&mut batch);
        flush(&mut batch, Kind::Meta, false)?;
    }
    flush(&mut batch, Kind::Meta, true)?;
    lock(out).frame(Kind::PlanEnd, &[])
}

/// How the receiver carries out a plan.
pub(crate) struct Receiving<'a> {
    /// What the client asked for.
    pub(crate) mirror: Mirror,
    /// The copy's filter rules (what they exclude is kept when deleting).
    pub(crate) filter: Option<&'a Filter>,
    /// Told of every change, where anybody listens.
    pub(crate) changes: Option<&'a dyn Changes>,
    /// `--max-delete`, shared with the unpack's removals.
    pub(crate) limit: Option<&'a DeleteLimit>,
    pub(crate) stats: &'a Stats,
    pub(crate) reporter: &'a dyn Reporter,
}

/// Reads the plan's frames from `r` up to `PlanEnd` and carries them out beneath
/// `root` (messages between them are reported); with no root (a dry run into a
/// destination that does not exist) there is nothing to change.
pub(crate) fn receive_plan(
    r: &mut impl Read,
    root: Option<&OwnedFd>,
    how: &Receiving<'_>,
) -> Result<(), NetError> {
    let delete = DeleteOptions {
        filter: how.filter,
        excluded: how.mirror.delete_excluded,
        dry_run: how.mirror.dry_run,
        changes: how.changes,
        limit: how.limit,
    };
    let writer = MetaWriter::new();
    let mut owners = LocalOwners::default();
    loop {
        let frame = expect_frame(r)?;
        let mut f = Fields::new(&frame.payload, "plan");
        match frame.kind {
            Kind::PlanEnd => break,
            Kind::Delete if !how.mirror.delete => {
                return Err(NetError::frame(
                    "a Delete frame, though --delete was not asked for",
                ))
            }
            Kind::Delete => {
                while !f.is_empty() {
                    let path = RelPath::from_bytes(f.bytes(MAX_PATH)?.to_vec());
                    if let Some(root) = root {
                        remove_below(root, &path, &delete, how.stats, how.reporter);
                    }
                }
            }
            Kind::Meta => {
                while !f.is_empty() {
                    let byte = f.u8()?;
                    let restore = byte & RESTORE != 0;
                    let kind = kind_of_byte(byte & !RESTORE)
                        .ok_or_else(|| NetError::frame(format!("meta: unknown kind {byte}")))?;
                    let path = RelPath::from_bytes(f.bytes(MAX_PATH)?.to_vec());
                    let mut wire = WireMeta::decode(&mut f)?;
                    owners.map(&mut wire);
                    let Some(root) = root else { continue };
                    let toucher = Toucher {
                        root,
                        writer: &writer,
                        dry_run: how.mirror.dry_run,
                        // Giving a directory back its times is no change to tell.
                        changes: how.changes.filter(|_| !restore),
                        reporter: how.reporter,
                    };
                    toucher.touch(&Touch {
                        path: &path,
                        kind,
                        meta: &wire.meta,
                        xattrs_known: wire.xattrs_known,
                    });
                }
            }
            _ => {
                if !report_message(frame.kind, &frame.payload, how.reporter, how.changes)? {
                    return Err(unexpected(frame, "the plan after the data"));
                }
            }
        }
    }
    if let Some(limit) = how.limit {
        limit.warn_refused(how.reporter);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::write_frame;
    use crate::test_support::Collect;

    /// Plan frames naming `paths` to delete, then `PlanEnd`.
    fn deleting(paths: &[&[u8]]) -> Vec<u8> {
        let mut payload = Vec::new();
        for p in paths {
            payload.put_bytes(p);
        }
        let mut wire = Vec::new();
        write_frame(&mut wire, Kind::Delete, &payload).expect("frame");
        write_frame(&mut wire, Kind::PlanEnd, &[]).expect("frame");
        wire
    }

    /// A sender cannot make a receiver delete unless its client asked for `--delete`,
    /// nor ever outside the destination: `..`, absolute and empty components are
    /// errors naming the path, a symlink on the way is not followed.
    #[test]
    fn deletions_stay_inside_the_destination_and_need_delete() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (dst, outside) = (dir.path().join("dst"), dir.path().join("outside"));
        std::fs::create_dir_all(dst.join("d")).expect("mkdir");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::fs::write(outside.join("victim"), b"v").expect("write");
        std::fs::write(dst.join("d/f"), b"f").expect("write");
        std::os::unix::fs::symlink(&outside, dst.join("link")).expect("symlink");
        let stats = Stats::default();
        let seen = Collect::default();
        let how = |delete| Receiving {
            mirror: Mirror {
                delete,
                ..Mirror::default()
            },
            filter: None,
            changes: None,
            limit: None,
            stats: &stats,
            reporter: &seen,
        };
        let root = std::fs::File::open(&dst).expect("open").into();
        let root = Some(&root);
        let wire = deleting(&[b"d/f"]);
        let refused = receive_plan(&mut wire.as_slice(), root, &how(false));
        assert!(refused.is_err());
        assert!(dst.join("d/f").exists());
        let hostile: [&[u8]; 5] = [
            b"../outside/victim",
            b"/etc/passwd",
            b"d//f",
            b"link/victim",
            b".",
        ];
        let wire = deleting(&hostile);
        receive_plan(&mut wire.as_slice(), root, &how(true)).expect("plan");
        assert!(outside.join("victim").exists() && dst.join("d/f").exists());
        let said = seen.0.lock().expect("lock").clone();
        assert_eq!(said.len(), 4, "{said:?}");
        assert!(said.iter().all(|l| l.contains("plain names")), "{said:?}");
        // The symlink itself can go, as a link.
        let wire = deleting(&[b"link", b"d"]);
        receive_plan(&mut wire.as_slice(), root, &how(true)).expect("plan");
        assert!(!dst.join("link").exists() && !dst.join("d").exists());
        assert!(outside.join("victim").exists());
        assert_eq!(stats.snapshot().deleted, 3);
    }
}
