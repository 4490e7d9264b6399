//! The `ferry` command: parses flags, runs one job, prints what happened.
//!
//! Exit status: 0 when everything was done, 1 when some paths failed (each printed on
//! its own line), 2 when the job could not run at all.

mod archive_cmd;
mod archive_out;
mod cli;
mod compression;
mod copy_args;
mod demo;
mod docs_cmd;
mod files_from;
mod filters;
mod frames_out;
mod itemize;
mod job;
mod ls_format;
mod malloc_tuning;
mod mount_cmd;
mod net_cmd;
mod pack_list;
mod plain_out;
mod progress;
mod read_ahead;
mod report;
mod restamp_args;
mod s3_cmd;
mod s3_objects;
mod serve_cmd;
mod several;
mod vcs;

use anyhow::Context;
use cli::{Command, CopyArgs};
use ferry_core::{copy_tree, CopyOptions};
use job::Job;
use report::StderrReporter;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::parse();
    raise_fd_limit();
    reserve_descriptor_table();
    // Commands whose output is their point.
    if matches!(
        cli.command,
        Command::Ls(_) | Command::Cat(_) | Command::Completions(_) | Command::Man(_)
    ) {
        end_quietly_on_closed_pipe();
    }
    let result = match cli.command {
        Command::Copy(args) if s3_cmd::is_s3_copy(&args) => s3_cmd::run_copy(args),
        Command::Ls(args) if s3_cmd::is_s3(&args.archive) && (args.json || args.human) => Err(
            anyhow::anyhow!("ls of an s3:// upload takes neither --json nor -h"),
        ),
        Command::Ls(args) if s3_cmd::is_s3(&args.archive) && args.snapshots => {
            s3_cmd::run_ls_snapshots(args)
        }
        Command::Ls(args) if args.snapshots => Err(anyhow::anyhow!(
            "--snapshots lists the snapshots of an s3:// upload"
        )),
        Command::Ls(args) if s3_cmd::is_s3(&args.archive) => s3_cmd::run_ls(args),
        Command::Cat(args) if s3_cmd::is_s3(&args.archive) && !args.more.is_empty() => Err(
            anyhow::anyhow!("cat of an s3:// upload prints one member at a time"),
        ),
        Command::Cat(args) if s3_cmd::is_s3(&args.archive) => s3_cmd::run_cat(args),
        Command::Copy(args) if net_cmd::is_remote(&args) => net_cmd::run_remote_copy(args),
        Command::Copy(args) => run_copy(args),
        Command::Prune(args) => s3_cmd::run_prune(args),
        Command::Serve(args) => Ok(serve_cmd::run_serve(args)),
        Command::Pack(args) => archive_cmd::run_pack(args),
        Command::Unpack(args) => archive_cmd::run_unpack(args),
        Command::Ls(args) => archive_cmd::run_ls(args),
        Command::Cat(args) => archive_cmd::run_cat(args),
        Command::Demo(args) => demo::run(args),
        Command::Mount(args) => mount_cmd::run_mount(args),
        Command::Umount(args) => mount_cmd::run_umount(args),
        Command::MountWatch(args) => mount_cmd::run_watch(args),
        Command::Index(args) => mount_cmd::run_index(args),
        Command::Completions(args) => docs_cmd::run_completions(args),
        Command::Man(args) => docs_cmd::run_man(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            report::to_stderr(format_args!("ferry: {e:#}"));
            ExitCode::from(2)
        }
    }
}

/// For a command whose output is its point (`ls`, `cat`, `pack -`): once the reader of
/// standard output has gone (`ferry cat A F | head`), end as `cat` and `tar` do, killed
/// by SIGPIPE without a word, instead of reporting the failed write as an error.
pub fn end_quietly_on_closed_pipe() {
    // SAFETY: restores the default action of a signal, which involves no handler code;
    // called from the main thread before any other thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The walker keeps a descriptor open per directory in progress: allow as many as the
/// hard limit does.
fn raise_fd_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut lim = getrlimit(Resource::Nofile);
    if lim.current < lim.maximum {
        lim.current = lim.maximum;
        let _ = setrlimit(Resource::Nofile, lim);
    }
}

/// Descriptors the table is grown to hold at start: pack's blocks in flight hold up to
/// about 4,400 files open (see `ferry_archive::write::fill`).
const DESCRIPTOR_TABLE: u64 = 8192;

/// Grows the table of descriptors now, while this is the only thread. When a process
/// with several threads outgrows its table, the kernel waits for an RCU grace period
/// before the new one takes over (`expand_fdtable`), and the thread opening a file
/// stalls meanwhile: packing the kernel tree on XFS, the walker waited 17.6 ms in one
/// such stall (`perf record -e sched:sched_switch`, session 18). Grown early, it costs
/// a few microseconds and 64 KiB.
fn reserve_descriptor_table() {
    let limit = ferry_core::limits::open_files_limit().unwrap_or(DESCRIPTOR_TABLE);
    let highest = limit.min(DESCRIPTOR_TABLE).saturating_sub(1);
    // Only a matter of speed: where this fails the table grows as it is needed.
    if let Ok(root) = std::fs::File::open("/") {
        let _ = rustix::io::fcntl_dupfd_cloexec(&root, highest as i32);
    }
}

fn run_copy(args: CopyArgs) -> anyhow::Result<ExitCode> {
    let job = Job::new(args.output, &args.src, &args.dst);
    let rules = files_from::refused(&args)
        .and_then(|()| filters::rules(&args.filter))
        .and_then(|rules| files_from::settle_kinds(&args.src, rules))
        .and_then(|rules| Ok(rules.compile()?));
    let filter = match rules {
        Ok(filter) => filter.map(std::sync::Arc::new),
        Err(e) => return Ok(job.or_fatal(Err(e))),
    };
    let opts = CopyOptions {
        threads: args.jobs.unwrap_or_else(ferry_core::copy::default_threads),
        reflink: args.data.reflink.into(),
        sparse: args.data.sparse.into(),
        checksum: args.data.checksum,
        verify: args.data.verify,
        zero_scan: !args.no_zero_scan,
        filter,
        delete: args.mirror.delete || args.mirror.delete_excluded,
        delete_excluded: args.mirror.delete_excluded,
        changes: itemize::printer(&args.mirror, args.output.json),
        dry_run: args.mirror.dry_run,
        keep_newer: args.update,
        one_file_system: args.one_file_system,
        dereference: args.dereference,
        link_dests: args.link_dests(),
        max_delete: args
            .mirror
            .max_delete
            .map(|n| std::sync::Arc::new(ferry_core::delete::DeleteLimit::new(n))),
    };
    Ok(job.or_fatal(copy_job(&args, &opts, &job)))
}

/// Whether the one SRC `src` goes into `dst` under its own name: a directory named
/// without a trailing slash into a DST named with one (`ferry copy proj bk/`), as
/// `cp -a proj bk/` and `rsync -a proj bk/` put it in `bk/proj`. Else a directory's
/// contents become DST (`ferry copy proj bk`, `proj/ bk/`: `rsync -a proj/ bk/`).
pub(crate) fn goes_in_by_name(src: &std::path::Path, dst: &std::path::Path) -> bool {
    let slash = |p: &std::path::Path| p.as_os_str().as_encoded_bytes().ends_with(b"/");
    slash(dst)
        && !slash(src)
        && several::own_name(src).is_some()
        && std::fs::symlink_metadata(src).is_ok_and(|m| m.is_dir())
}

/// `ferry copy` as `job`: an error returned means it could not run at all.
fn copy_job(args: &CopyArgs, opts: &CopyOptions, job: &Job<'_>) -> anyhow::Result<ExitCode> {
    job.summary_on_interrupt()?;
    let one = match &args.srcs[..] {
        // A list names paths below SRC, not SRC itself (as rsync's does).
        [src] if args.list.files_from.is_some() => Some(src),
        [src] if !goes_in_by_name(src, &args.dst) => Some(src),
        _ => None,
    };
    if let Some(src) = one {
        let copied = progress::with_progress(job.show_progress(), src, &job.stats, || {
            copy_tree(src, &args.dst, opts, &job.stats, &job.reporter)
        });
        if copied.is_ok() {
            files_from::report_missing(src, opts.filter.as_deref(), job);
        }
        return Ok(match copied {
            Ok(()) => job.finish(),
            Err(e) => job.fatal(&job.reporter.line(&e)),
        });
    }
    // Several SRCs, or one named into `DST/`: each into DST under its own name, as
    // `cp -a A B DST/` and `rsync -a A DST/` put them.
    std::fs::create_dir_all(&args.dst)
        .with_context(|| format!("{}: make destination", args.dst.display()))?;
    for src in &args.srcs {
        let Some(name) = several::own_name(src) else {
            anyhow::bail!(
                "{}: with several SRCs each needs a name of its own to take in DST",
                src.display()
            );
        };
        let into = args.dst.join(name);
        let reporter = StderrReporter {
            src,
            dst: &into,
            src_is_archive: false,
        };
        let copied = progress::with_progress(job.show_progress(), src, &job.stats, || {
            copy_tree(src, &into, opts, &job.stats, &reporter)
        });
        // One SRC that cannot be copied at all is reported; the others are copied.
        if let Err(e) = copied {
            report::to_stderr(format_args!("ferry: {}", reporter.line(&e)));
            ferry_core::Stats::bump(&job.stats.errors);
        }
    }
    Ok(job.finish())
}
