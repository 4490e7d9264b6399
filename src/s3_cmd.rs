//! `ferry copy` to and from `s3://BUCKET/PREFIX`, `ferry ls s3://...` and `ferry cat
//! s3://... PATH`: flags into ferry-s3's options, and the job's summary.

use crate::cli::{CatArgs, CopyArgs, Layout, LsArgs, PruneArgs};
use crate::job::Job;
use anyhow::Context;
use ferry_archive::read::unpack::UnpackOptions;
use ferry_archive::write::pack::PackOptions;
use ferry_s3::download::{download, DownloadOptions};
use ferry_s3::shard::PackShard;
use ferry_s3::upload::{upload, UploadOptions};
use ferry_s3::{Location, Store};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

/// Whether `p` names an S3 location.
pub fn is_s3(p: &Path) -> bool {
    p.as_os_str().as_bytes().starts_with(b"s3://")
}

/// Whether `copy` goes to or from S3.
pub fn is_s3_copy(args: &CopyArgs) -> bool {
    args.srcs.iter().any(|p| is_s3(p)) || is_s3(&args.dst)
}

fn open(p: &Path) -> anyhow::Result<Arc<Store>> {
    let url = p.to_str().context("an s3:// location must be UTF-8")?;
    let loc = Location::parse(url).context("not an s3:// location")??;
    Ok(Arc::new(Store::open(&loc)?))
}

/// `ferry copy` with an `s3://` end.
pub fn run_copy(args: CopyArgs) -> anyhow::Result<ExitCode> {
    crate::malloc_tuning::map_large_buffers();
    crate::malloc_tuning::arenas_per_core();
    let job = Job::new(args.output, &args.src, &args.dst);
    Ok(job.or_fatal(copy_job(&args, &job)))
}

fn copy_job(args: &CopyArgs, job: &Job<'_>) -> anyhow::Result<ExitCode> {
    job.summary_on_interrupt()?;
    let objects_upload = is_s3(&args.dst) && args.s3.layout == Layout::Objects;
    let unsupported = match (is_s3(&args.dst), objects_upload) {
        (true, true) => args.not_for_objects_upload(),
        (true, false) => args.not_for_shards_upload(),
        (false, _) => args.not_for_s3(),
    };
    if let Some(flag) = unsupported {
        anyhow::bail!("{flag}: not supported for a copy to or from S3 yet");
    }
    if is_s3(&args.src) && is_s3(&args.dst) {
        anyhow::bail!("an s3:// SRC and DST: one end of a copy must be local");
    }
    let threads = args.jobs.unwrap_or_else(ferry_core::copy::default_threads);
    let counting = job.counting();
    if objects_upload {
        let store = open(&args.dst)?;
        crate::s3_objects::upload(args, store, threads, &job.stats, &counting)?;
    } else if is_s3(&args.dst) {
        let store = open(&args.dst)?;
        let opts = UploadOptions {
            shard_size: args.s3.shard_size,
            // 8 x 5 MiB: as fast as 16 against a local Garage, 40 MiB less (kernel tree).
            parts_in_flight: args.s3.transfers.unwrap_or(8),
            pack: PackShard {
                pack: PackOptions {
                    threads: 1,
                    ..PackOptions::default()
                },
            },
            threads,
            filter: crate::filters::compile(&args.filter)?,
        };
        let done = upload(&args.src, store, &opts, &job.stats, &counting)?;
        crate::report::to_stderr(format_args!(
            "ferry s3: {} shards: {} sent ({} bytes), {} there already (holding {} \
             unchanged members, {} bytes{}); snapshot {}{}",
            done.shards,
            done.sent,
            done.bytes_sent,
            done.kept,
            done.members_kept,
            done.bytes_kept,
            if done.renamed > 0 {
                format!(
                    ", of which {} files renamed or moved, {} bytes",
                    done.renamed, done.bytes_renamed
                )
            } else {
                String::new()
            },
            done.snapshot,
            if done.aborted > 0 {
                format!(
                    "; {} unfinished uploads of an earlier run aborted",
                    done.aborted
                )
            } else {
                String::new()
            }
        ));
    } else {
        let store = open(&args.src)?;
        if !crate::s3_objects::has_manifest(&store)? {
            crate::s3_objects::download(args, &store, &job.stats, &counting)?;
            return Ok(job.finish());
        }
        let opts = DownloadOptions {
            unpack: UnpackOptions {
                threads,
                reflink: args.data.reflink.into(),
                sparse: args.data.sparse.into(),
                checksum: args.data.checksum,
                verify: args.data.verify,
                numeric_owner: false,
                dir_metadata: true,
                keep_old: false,
                keep_partial: false,
            },
            // 8 x 4 MiB ahead keep a local Garage's answers flowing; memory stays bounded.
            ranges_in_flight: args.s3.transfers.unwrap_or(8),
        };
        download(store, &args.dst, &opts, &job.stats, &counting)?;
    }
    Ok(job.finish())
}

/// `ferry ls s3://... [MEMBER...]`: exit status 1 when a MEMBER named matched nothing,
/// or some object was refused or could not be read (each reported, naming it).
pub fn run_ls(args: LsArgs) -> anyhow::Result<ExitCode> {
    let store = open(&args.archive)?;
    let stats = ferry_core::Stats::default();
    let reporter = ferry_core::error::Counting {
        inner: &crate::report::StderrReporter::for_archive(&args.archive),
        stats: &stats,
    };
    let select = crate::archive_cmd::selection(&args.members)?;
    let wanted = |path: &[u8]| select.selects(&ferry_core::RelPath::from_bytes(path.to_vec()));
    let rows = ferry_s3::cat::ls(&store, &wanted, crate::s3_objects::TRANSFERS, &reporter)?;
    // Names are members of the upload: its location is the root they are shown under.
    select.report_unmatched("ls", &reporter);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for row in &rows {
        print_row(&mut out, row, args.long).context("write")?;
    }
    std::io::Write::flush(&mut out).context("write")?;
    Ok(match stats.snapshot().errors {
        0 => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    })
}

/// `ferry ls --snapshots s3://...`: one line a snapshot, oldest first.
pub fn run_ls_snapshots(args: LsArgs) -> anyhow::Result<ExitCode> {
    let store = open(&args.archive)?;
    let rows = store.rt.block_on(ferry_s3::snapshot::summaries(&store))?;
    if rows.is_empty() {
        // No snapshot: no upload here at all (an error), or one from before snapshots.
        let newest = store.rt.block_on(ferry_s3::cat::need_manifest(&store))?;
        if newest.snapshot.is_none() {
            crate::report::to_stderr(format_args!(
                "ferry ls: {}: one upload, from before uploads were snapshots (the next \
                 upload makes the first)",
                store.loc
            ));
        }
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for row in &rows {
        writeln!(
            out,
            "{}  {:>9} members  {:>15} bytes  {:>15} only here",
            row.name, row.members, row.bytes, row.only
        )
        .context("write")?;
    }
    out.flush().context("write")?;
    Ok(ExitCode::SUCCESS)
}

/// `ferry prune s3://...`.
pub fn run_prune(args: PruneArgs) -> anyhow::Result<ExitCode> {
    let store = open(&args.url)?;
    let opts = ferry_s3::prune::PruneOptions {
        keep: args
            .keep
            .map_or(1, |n| usize::try_from(n).unwrap_or(usize::MAX)),
        keep_within: args.keep_within,
        dry_run: args.dry_run,
        no_compact: args.no_compact,
        shard_size: args.shard_size,
    };
    let reporter = crate::report::StderrReporter::for_archive(&args.url);
    let done = ferry_s3::prune::prune(&store, &opts, &reporter)?;
    let would = if args.dry_run {
        "would delete"
    } else {
        "deleted"
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for name in &done.deleted {
        writeln!(out, "{would} snapshot {name}").context("write")?;
    }
    out.flush().context("write")?;
    crate::report::to_stderr(format_args!(
        "ferry prune: {} snapshots kept, {} {would}; {} objects of shards {would} ({} bytes)",
        done.kept.len(),
        done.deleted.len(),
        done.objects,
        done.bytes
    ));
    if done.compacted > 0 && args.dry_run {
        crate::report::to_stderr(format_args!(
            "ferry prune: would compact {} sparse shards, copying {} bytes of live members",
            done.compacted, done.copied
        ));
    } else if done.compacted > 0 {
        crate::report::to_stderr(format_args!(
            "ferry prune: {} sparse shards compacted: {} bytes of live members copied into \
             {} new shards; {} snapshots written again",
            done.compacted, done.copied, done.written, done.rewritten
        ));
    }
    if let Some(reader) = &done.left_for {
        crate::report::to_stderr(format_args!(
            "ferry prune: dead shards left while {reader} reads the prefix; a later prune \
             deletes them"
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// One line of `ls s3://...`: kind letter and mode, size, (`-l`) mtime in UTC, path.
fn print_row(
    out: &mut dyn std::io::Write,
    row: &ferry_s3::cat::Row,
    long: bool,
) -> std::io::Result<()> {
    let kind = b"-dlhpcb"[usize::from(row.kind.min(6))] as char;
    write!(out, "{kind}{:04o} {:>12} ", row.mode, row.size)?;
    if long {
        write!(
            out,
            "{} ",
            ferry_core::utc::date_time(row.mtime.0, row.mtime.1)
        )?;
    }
    out.write_all(&row.path)?;
    out.write_all(b"\n")
}

/// `ferry cat s3://... PATH`.
pub fn run_cat(args: CatArgs) -> anyhow::Result<ExitCode> {
    let store = open(&args.archive)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    let path = args.path.as_os_str().as_bytes();
    let path = path.strip_prefix(b"./").unwrap_or(path);
    ferry_s3::cat::cat(&store, path.strip_suffix(b"/").unwrap_or(path), &mut out)?;
    std::io::Write::flush(&mut out).context("write")?;
    Ok(ExitCode::SUCCESS)
}

/// `ferry mount s3://...` (and `ferry index s3://...`): the upload opened for
/// ferry-mount's filesystem, its table from the mount cache or built now and kept there.
pub fn open_for_mount(
    url: &Path,
    blocks: ferry_s3::mount::blocks::BlockOptions,
    cache_dir: Option<&Path>,
) -> anyhow::Result<ferry_mount::source::Opened> {
    crate::malloc_tuning::map_large_buffers();
    crate::malloc_tuning::arenas_per_core();
    let store = open(url)?;
    let opts = ferry_s3::mount::MountOptions {
        blocks,
        cache_dir: cache_dir
            .map(Path::to_path_buf)
            .or_else(ferry_mount::cache::dir),
    };
    Ok(ferry_s3::mount::open(store, &opts)?)
}

/// The block cache `ferry mount s3://...` asks for.
pub fn block_options(s3: &crate::cli::S3MountArgs) -> ferry_s3::mount::blocks::BlockOptions {
    ferry_s3::mount::blocks::BlockOptions {
        cache_bytes: s3.cache_size,
        block: s3.block_size,
        timeout: std::time::Duration::from_secs(s3.timeout.max(1)),
    }
}
