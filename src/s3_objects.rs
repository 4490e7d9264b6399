//! `ferry copy` to and from S3 with `--layout=objects` (one plain object per file):
//! flags into ferry-s3's options, and the job's summary.

use crate::cli::CopyArgs;
use ferry_core::error::Reporter;
use ferry_core::local::Update;
use ferry_core::Stats;
use ferry_s3::objects::{download_objects, upload_objects, FetchOptions, ObjectsOptions};
use ferry_s3::Store;
use std::sync::Arc;

/// Objects in flight unless `--transfers` says otherwise (and HEADs of `ls`).
pub const TRANSFERS: usize = 64;
/// Bytes read and not yet sent, at most.
const MEMORY: u64 = 64 << 20;

/// Whether `store`'s prefix holds plain objects rather than a ferry upload.
pub fn has_manifest(store: &Store) -> anyhow::Result<bool> {
    Ok(!ferry_s3::objects::holds_plain_objects(store)?)
}

/// Uploads `args.src` as one object per file.
pub fn upload(
    args: &CopyArgs,
    store: Arc<Store>,
    threads: usize,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> anyhow::Result<()> {
    let opts = ObjectsOptions {
        transfers: args.s3.transfers.unwrap_or(TRANSFERS),
        memory: MEMORY,
        threads,
        filter: crate::filters::compile(&args.filter)?,
        delete: args.mirror.delete || args.mirror.delete_excluded,
        delete_excluded: args.mirror.delete_excluded,
        dry_run: args.mirror.dry_run,
        changes: crate::itemize::printer(&args.mirror, args.output.json),
    };
    let done = upload_objects(&args.src, store, &opts, stats, reporter)?;
    crate::report::to_stderr(format_args!(
        "ferry s3: {}{} objects: {} sent ({} bytes), {} there already{}{}{}",
        match args.mirror.dry_run {
            true => "dry run, nothing sent or deleted: ",
            false => "",
        },
        done.objects,
        done.sent,
        done.bytes,
        done.kept,
        match args.mirror.delete || args.mirror.delete_excluded {
            true => format!("; {} deleted", done.deleted),
            false => String::new(),
        },
        match done.left_out {
            0 => String::new(),
            n => format!("; {n} fifos, sockets or devices left out"),
        },
        match done.aborted {
            0 => String::new(),
            n => format!("; {n} unfinished uploads of an earlier run aborted"),
        }
    ));
    Ok(())
}

/// Downloads the plain objects at `store` into `args.dst`.
pub fn download(
    args: &CopyArgs,
    store: &Store,
    stats: &Stats,
    reporter: &dyn Reporter,
) -> anyhow::Result<()> {
    let opts = FetchOptions {
        transfers: args.s3.transfers.unwrap_or(TRANSFERS),
        update: Update {
            checksum: args.data.checksum,
            verify: args.data.verify,
            keep_newer: false,
            keep_old: false,
            keep_partial: false,
        },
        mover: (args.data.reflink.into(), args.data.sparse.into()),
    };
    download_objects(store, &args.dst, &opts, stats, reporter)?;
    Ok(())
}
