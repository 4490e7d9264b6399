//! `ferry copy` with a remote end (`[USER@]HOST:PATH`), over ssh, and `ferry serve
//! --stdio`, what it runs on the other end.

use crate::cli::{CopyArgs, ServeArgs};
use crate::job::Job;
use crate::progress;
use ferry_core::stats::Snapshot;
use ferry_net::client::{self, Options};
use ferry_net::serve::{serve, ServeConfig, Served};
use ferry_net::ssh::{location, Location, Ssh};
use ferry_net::NetError;
use std::io::{self, BufWriter};
use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;

/// Whether SRC or DST names a remote path.
pub fn is_remote(args: &CopyArgs) -> bool {
    args.srcs
        .iter()
        .any(|src| location(src.as_os_str()) != Location::Local)
        || location(args.dst.as_os_str()) != Location::Local
}

/// `ferry copy` with a remote SRC or DST.
pub fn run_remote_copy(args: CopyArgs) -> anyhow::Result<ExitCode> {
    let job = Job::new(args.output, &args.src, &args.dst);
    Ok(job.or_fatal(remote_job(&args, &job)))
}

fn remote_job(args: &CopyArgs, job: &Job<'_>) -> anyhow::Result<ExitCode> {
    job.summary_on_interrupt()?;
    // Not carried over the wire yet: refused rather than silently ignored.
    let m = &args.mirror;
    let unsupported = [
        (m.delete || m.delete_excluded, "--delete"),
        (
            m.dry_run || m.itemize_changes || m.verbose,
            "--dry-run, -i and -v",
        ),
        (!args.filter.given.is_empty(), "--exclude and --include"),
        (args.srcs.len() > 1, "several SRCs"),
        (args.update, "-u/--update"),
        (args.one_file_system, "-x/--one-file-system"),
        (args.dereference, "-L/--dereference"),
    ];
    if let Some((_, flag)) = unsupported.iter().find(|(given, _)| *given) {
        anyhow::bail!("{flag}: not supported for a copy over ssh yet");
    }
    let opts = Options {
        checksum: args.data.checksum,
        compress: args.remote.compress,
        verify: args.data.verify,
        threads: args.jobs.unwrap_or_else(ferry_core::copy::default_threads),
    };
    let (src, dst) = (
        location(args.src.as_os_str()),
        location(args.dst.as_os_str()),
    );
    let (host, remote, upload) = match (src, dst) {
        (Location::Local, Location::Remote { host, path }) => (host, path, true),
        (Location::Remote { host, path }, Location::Local) => (host, path, false),
        _ => anyhow::bail!(
            "{} and {}: both are remote; one end of a copy must be local",
            args.src.display(),
            args.dst.display()
        ),
    };
    let mut ssh = Ssh::spawn(&args.remote.rsh, &host, &args.remote.remote_ferry)?;
    let (r, w) = ssh.streams()?;
    let counting = job.counting();
    let stats = &job.stats;
    let show = job.show_progress();
    let done = match upload {
        true => progress::with_progress(show, &args.src, stats, || {
            client::upload(r, w, &args.src, &remote, &opts, stats, &counting)
        })
        .map(|theirs| written_there(job, &theirs)),
        false => progress::with_totals(
            show,
            |_| {},
            stats,
            || client::download(r, w, &remote, &args.dst, &opts, stats, &counting),
        )
        .map(|theirs| skipped_there(job, &theirs)),
    };
    let done = done.and_then(|()| ssh.finish());
    Ok(match done {
        Ok(()) => job.finish(),
        Err(NetError::Path(e)) => job.fatal(&job.reporter.line(&e)),
        Err(e @ (NetError::Remote(_) | NetError::Refused(_))) => job.fatal(&format!("{host}: {e}")),
        Err(e @ (NetError::Handshake(_) | NetError::Closed | NetError::ClosedMidFrame)) => {
            job.fatal(&format!("{host}: {e} ({})", ssh.ending()))
        }
        Err(e) => job.fatal(&format!("{host}: {e}")),
    })
}

/// After an upload, the summary counts what the server wrote, and what was left out
/// here as up to date as well as what it found so.
fn written_there(job: &Job<'_>, theirs: &Snapshot) {
    let s = &job.stats;
    for (counter, v) in [
        (&s.files, theirs.files),
        (&s.dirs, theirs.dirs),
        (&s.others, theirs.others),
        (&s.bytes, theirs.bytes),
        (&s.cloned, theirs.cloned),
        (&s.kernel_copied, theirs.kernel_copied),
        (&s.buffered, theirs.buffered),
    ] {
        counter.store(v, Relaxed);
    }
    s.skipped.fetch_add(theirs.skipped, Relaxed);
    s.skipped_bytes.fetch_add(theirs.skipped_bytes, Relaxed);
}

/// After a download, the summary counts what the server left out as up to date too.
fn skipped_there(job: &Job<'_>, theirs: &Snapshot) {
    job.stats.skipped.fetch_add(theirs.skipped, Relaxed);
    job.stats
        .skipped_bytes
        .fetch_add(theirs.skipped_bytes, Relaxed);
}

/// `ferry serve --stdio`: exit status 0 when the job was done, 1 when some paths
/// failed (the client was told each), 2 when it could not run or go on.
pub fn run_serve(args: ServeArgs) -> ExitCode {
    let config = ServeConfig {
        threads: args.jobs.unwrap_or_else(ferry_core::copy::default_threads),
    };
    let output = BufWriter::with_capacity(1 << 20, io::stdout());
    match serve(io::stdin().lock(), output, &config) {
        Ok(Served::Done { errors: 0 }) => ExitCode::SUCCESS,
        Ok(Served::Done { .. }) => ExitCode::from(1),
        Ok(Served::Stopped(e)) => {
            // The client was told; say it here only where it may not have heard.
            if !matches!(
                e,
                NetError::Remote(_) | NetError::Refused(_) | NetError::Path(_)
            ) {
                crate::report::to_stderr(format_args!("ferry serve: {e}"));
            }
            ExitCode::from(2)
        }
        Err(e) => {
            crate::report::to_stderr(format_args!("ferry serve: {e}"));
            ExitCode::from(2)
        }
    }
}
