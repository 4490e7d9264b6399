//! `ferry copy SRC s3://BUCKET/PREFIX --layout=objects`: one walk of SRC, one LIST of
//! the prefix, then one object per file, many PUTs in flight.
//!
//! A file below the smallest part goes up in one PUT, read whole once it has its share
//! of half the memory budget; a larger one as a multipart upload ([`crate::put`], as
//! shards go: recorded while it runs, aborted by the next run if this one is killed)
//! whose parts are read and sent while other objects go up, as many parts in flight
//! over all files as the other half of the budget holds.
//!
//! A file already there is not sent again: the LIST gives each object's size and when
//! it was written; an object of the file's size written at or after the file's mtime
//! is taken as up to date (rclone's `--update --use-server-modtime`), with no request
//! per file. Symlinks go up as `PATH.rclonelink` objects holding their targets;
//! directories are not objects (as in rclone); fifos, sockets and devices have no
//! object form and are left out with a warning; each name of a hardlinked file is an
//! object of its own. The filter rules leave out what they exclude, as for a local
//! copy; with `--delete`, the objects SRC no longer makes are then deleted
//! ([`super::delete`]), unless some of SRC could not be read. `--dry-run` sends and
//! deletes nothing, and counts what would go; `-i` and `-v` are told each object sent
//! or deleted (or, in a dry run, that would be).

use super::delete::{delete_extraneous, Deleting, Made};
use super::keys::key_of;
use super::listing::list_all;
use super::metadata::{encode, S_IFLNK, S_IFREG};
use crate::parts::{MIN_PART, PREFERRED_PART};
use crate::pending;
use crate::plan::{walk_tree, Planned};
use crate::put::{put_file, PutFailure};
use crate::store::Store;
use crate::{Result, S3Error};
use chrono::{DateTime, Utc};
use ferry_core::changes::{Changes, Kind, Reasons, What};
use ferry_core::delete::SourceErrors;
use ferry_core::entry::{RelPath, Timestamp};
use ferry_core::error::{Error, Reporter};
use ferry_core::filter::Filter;
use ferry_core::Stats;
use futures::StreamExt;
use object_store::path::Path as Key;
use object_store::{Attributes, ObjectStore, PutOptions, PutPayload};
use std::collections::{HashMap, HashSet};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Bytes one permit of the memory budget stands for.
const PERMIT: u64 = 64 << 10;

/// How to upload one object per file.
#[derive(Clone, Debug)]
pub struct ObjectsOptions {
    /// Objects (and parts of large ones) in flight at once.
    pub transfers: usize,
    /// Bytes read and not yet sent, at most (at least one part's worth is allowed).
    pub memory: u64,
    /// Walker threads.
    pub threads: usize,
    /// Which entries of SRC go up (the filter rules); None: all.
    pub filter: Option<Arc<Filter>>,
    /// Afterwards, delete the objects SRC no longer makes (`--delete`; see
    /// [`super::delete`]); not when some of SRC could not be read.
    pub delete: bool,
    /// Delete the objects the filter rules exclude too (`--delete-excluded`).
    pub delete_excluded: bool,
    /// Send and delete nothing: only count (and tell `changes`) what would be
    /// (`--dry-run`).
    pub dry_run: bool,
    /// Told about every object sent or deleted (`-i`, `-v`).
    pub changes: Option<Arc<dyn Changes>>,
}

/// What an upload of objects did.
#[derive(Clone, Debug, Default)]
pub struct SentObjects {
    /// Objects the tree makes.
    pub objects: usize,
    /// Objects sent by this run.
    pub sent: usize,
    /// Bytes of them.
    pub bytes: u64,
    /// Objects up to date there already.
    pub kept: usize,
    /// Nodes with no object form (fifos, sockets, devices), left out.
    pub left_out: usize,
    /// Unfinished multipart uploads of a killed run aborted.
    pub aborted: usize,
    /// Objects deleted (`--delete`).
    pub deleted: usize,
}

/// One object to send.
struct Upload {
    key: String,
    /// The node's path below SRC.
    path: Vec<u8>,
    size: u64,
    /// A symlink's target, which is the object's content.
    target: Option<Vec<u8>>,
    attributes: Attributes,
    /// What sending it does: a new object, or one replaced (why).
    what: What,
}

impl Upload {
    fn kind(&self) -> Kind {
        match self.target {
            Some(_) => Kind::Symlink,
            None => Kind::File,
        }
    }
}

/// When the object for `p` must have been written to be up to date.
fn not_before(t: (i64, u32)) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.0, t.1)
}

/// The objects `list` makes under `prefix`; the rest reported and counted.
fn objects_of(
    list: &[Planned],
    prefix: &str,
    out: &mut SentObjects,
    reporter: &dyn Reporter,
) -> Vec<(Upload, (i64, u32))> {
    let by_path: HashMap<&[u8], &Planned> = list
        .iter()
        .filter(|p| p.kind == 0)
        .map(|p| (p.path.as_slice(), p))
        .collect();
    let mut uploads = Vec::new();
    for p in list {
        // A later name of a hardlinked file: the first name's metadata, its own key.
        let (node, link) = match p.kind {
            0 => (p, false),
            2 => (p, true),
            3 => match by_path.get(p.link.as_slice()) {
                Some(first) => (*first, false),
                None => continue,
            },
            1 => continue,
            _ => {
                out.left_out += 1;
                reporter.warn(&format!(
                    "{}: a fifo, socket or device has no object form; left out",
                    RelPath::from_bytes(p.path.clone())
                ));
                continue;
            }
        };
        let path = RelPath::from_bytes(p.path.clone());
        let key = match key_of(prefix, &p.path, link) {
            Ok(k) => k,
            Err(why) => {
                // The store's limit, not a failure to read SRC: no bar to --delete.
                reporter.error(&Error::dst(
                    &path,
                    "name an object",
                    std::io::Error::other(why),
                ));
                continue;
            }
        };
        let (kind, size) = match link {
            true => (S_IFLNK, p.link.len() as u64),
            false => (S_IFREG, node.size),
        };
        let t = |(sec, nsec)| Timestamp { sec, nsec };
        let attributes = encode(
            t(node.mtime),
            t(node.atime),
            kind | node.mode,
            node.owner.0,
            node.owner.1,
        );
        let target = link.then(|| p.link.clone());
        let upload = Upload {
            key,
            path: p.path.clone(),
            size,
            target,
            attributes,
            what: What::Created,
        };
        uploads.push((upload, node.mtime));
    }
    uploads
}

/// Uploads the tree `src` as one object per file.
pub fn upload_objects(
    src: &Path,
    store: Arc<Store>,
    opts: &ObjectsOptions,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> Result<SentObjects> {
    let mut out = SentObjects {
        aborted: match opts.dry_run {
            true => 0,
            false => store.rt.block_on(pending::abort_left(&store)),
        },
        ..SentObjects::default()
    };
    let noted = SourceErrors::new(reporter);
    let reporter = &noted;
    let list = walk_tree(src, opts.threads, opts.filter.clone(), reporter)?;
    let listing = store.rt.block_on(list_all(&store))?;
    let there: HashMap<String, (u64, DateTime<Utc>)> = listing
        .iter()
        .map(|m| (m.location.to_string(), (m.size, m.last_modified)))
        .collect();
    let mut todo = Vec::new();
    let mut made = HashSet::new();
    for (mut upload, mtime) in objects_of(&list, &store.loc.prefix, &mut out, reporter) {
        out.objects += 1;
        made.insert(upload.key.clone());
        if let Some((size, written)) = there.get(&upload.key) {
            let current = not_before(mtime).is_some_and(|m| *written >= m);
            let why = Reasons::none()
                .with_if(*size != upload.size, Reasons::SIZE)
                .with_if(!current, Reasons::MTIME);
            if why.is_empty() {
                out.kept += 1;
                stats.skipped.fetch_add(1, Relaxed);
                stats.skipped_bytes.fetch_add(upload.size, Relaxed);
                continue;
            }
            upload.what = What::Updated(why);
        }
        todo.push(upload);
    }
    let sent_one = |out: &mut SentObjects, path: &RelPath, kind: Kind, what: What, bytes| {
        out.sent += 1;
        out.bytes += bytes;
        stats.files.fetch_add(1, Relaxed);
        stats.bytes.fetch_add(bytes, Relaxed);
        if let Some(c) = &opts.changes {
            c.change(path, kind, what);
        }
    };
    if opts.dry_run {
        for u in &todo {
            let path = RelPath::from_bytes(u.path.clone());
            sent_one(&mut out, &path, u.kind(), u.what, u.size);
        }
        todo.clear();
    }
    // Half the budget for small objects read whole, half for the parts of large ones.
    let memory = Arc::new(Budget::new(opts.memory / 2));
    let parts = Arc::new(Semaphore::new(
        (opts.memory / 2 / PREFERRED_PART).max(1) as usize
    ));
    let src = src.to_path_buf();
    let sent = store.rt.block_on(async {
        let mut puts = futures::stream::iter(todo)
            .map(|u| {
                let (store, memory, src) = (store.clone(), memory.clone(), src.clone());
                let parts = parts.clone();
                async move {
                    let path = RelPath::from_bytes(u.path.clone());
                    let (kind, what) = (u.kind(), u.what);
                    let sent = put_object(&store, &src, u, &memory, &parts).await;
                    (path, kind, what, sent)
                }
            })
            .buffer_unordered(opts.transfers.max(1));
        while let Some((path, kind, what, sent)) = puts.next().await {
            match sent {
                Ok(bytes) => sent_one(&mut out, &path, kind, what, bytes),
                Err(Failure::Local(e)) => reporter.error(&Error::new(&path, "read", e)),
                Err(Failure::Store(e)) => return Err(e),
            }
        }
        Ok(())
    });
    sent?;
    if !(opts.delete || opts.delete_excluded) {
        return Ok(out);
    }
    if noted.any() {
        // As `ferry copy --delete` (and rsync: "IO error encountered -- skipping file
        // deletion"): what could not be read is not taken for gone.
        noted.warn(
            "some of SRC could not be read: no object deleted (--delete), so that what \
             could not be read is not taken for gone",
        );
        return Ok(out);
    }
    let dirs: HashSet<Vec<u8>> = list
        .iter()
        .filter(|p| p.kind == 1)
        .map(|p| p.path.clone())
        .collect();
    let how = Deleting {
        filter: opts.filter.as_deref(),
        excluded: opts.delete_excluded,
        dry_run: opts.dry_run,
        changes: opts.changes.as_deref(),
    };
    let made = Made {
        keys: &made,
        dirs: &dirs,
    };
    out.deleted = delete_extraneous(&store, listing, &made, how, stats, &noted)?;
    Ok(out)
}

/// Why an object did not go up: the local file (the job goes on) or the store (it
/// stops: the next request would most likely fail the same way).
enum Failure {
    Local(std::io::Error),
    Store(S3Error),
}

/// Bytes read and not yet sent, bounded: each read waits for its share first.
struct Budget {
    permits: Arc<Semaphore>,
    total: u64,
}

impl Budget {
    fn new(bytes: u64) -> Budget {
        let total = bytes.div_ceil(PERMIT).clamp(1, u32::MAX as u64 / 2);
        Budget {
            permits: Arc::new(Semaphore::new(total as usize)),
            total,
        }
    }

    /// Waits for the share of `len` bytes (the whole budget, when they are more).
    async fn take(&self, len: u64) -> std::result::Result<OwnedSemaphorePermit, Failure> {
        let want = len.div_ceil(PERMIT).clamp(1, self.total) as u32;
        self.permits
            .clone()
            .acquire_many_owned(want)
            .await
            .map_err(|e| Failure::Store(S3Error::new(e.to_string())))
    }
}

/// Sends one object; returns its size.
async fn put_object(
    store: &Arc<Store>,
    src: &Path,
    u: Upload,
    memory: &Budget,
    parts: &Arc<Semaphore>,
) -> std::result::Result<u64, Failure> {
    let key = Key::parse(&u.key).map_err(|e| Failure::Local(std::io::Error::other(e)))?;
    // A small object is read whole first: its share of the budget; a large one's parts
    // each take a place of `parts`.
    let _permit = match u.size < MIN_PART {
        true => Some(memory.take(u.size).await?),
        false => None,
    };
    if let Some(target) = u.target {
        let opts = PutOptions {
            attributes: u.attributes,
            ..PutOptions::default()
        };
        store
            .s3
            .put_opts(&key, PutPayload::from(target), opts)
            .await
            .map_err(|e| Failure::Store(store.error(&key, "put", &e)))?;
        return Ok(u.size);
    }
    let path = src.join(std::ffi::OsStr::from_bytes(&u.path));
    let file = tokio::task::spawn_blocking(move || std::fs::File::open(path))
        .await
        .map_err(std::io::Error::other)
        .and_then(|r| r)
        .map_err(Failure::Local)?;
    match put_file(store, &key, Arc::new(file), u.size, parts, u.attributes).await {
        Ok(_) => Ok(u.size),
        Err(PutFailure::Read(e)) => Err(Failure::Local(std::io::Error::other(e.0))),
        Err(PutFailure::Store(e)) => Err(Failure::Store(e)),
    }
}
