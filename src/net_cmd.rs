//! `ferry copy` with a remote end: `[USER@]HOST:PATH` over ssh, or
//! `ferry://HOST[:PORT]/PATH`, a daemon, over TLS. One protocol, two transports.

use crate::cli::CopyArgs;
use crate::job::Job;
use crate::progress;
use ferry_core::changes::Changes;
use ferry_core::stats::Snapshot;
use ferry_net::client::{self, Options};
use ferry_net::conn::{Limits, Paced, ReadHalf, WriteHalf};
use ferry_net::dial::{connect, DaemonUrl, Dial};
use ferry_net::proto::Mirror;
use ferry_net::ssh::{location, Location, Ssh};
use ferry_net::tls::KnownServers;
use ferry_net::transfer::{Source, SourceWalk};
use ferry_net::NetError;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// Where a path of a copy is.
enum Place {
    Local,
    Ssh { host: String, path: Vec<u8> },
    Daemon(DaemonUrl),
}

fn place(arg: &OsStr) -> anyhow::Result<Place> {
    if let Some(url) = DaemonUrl::parse(arg.as_bytes()) {
        return Ok(Place::Daemon(url?));
    }
    Ok(match location(arg) {
        Location::Local => Place::Local,
        Location::Remote { host, path } => Place::Ssh { host, path },
    })
}

/// Whether SRC or DST names a remote path.
pub fn is_remote(args: &CopyArgs) -> bool {
    let remote = |p: &std::path::Path| !matches!(place(p.as_os_str()), Ok(Place::Local));
    args.srcs.iter().any(|p| remote(p)) || remote(&args.dst)
}

/// A connection to the other end: ssh's child, or a daemon's socket.
struct Link {
    r: ReadHalf,
    w: WriteHalf,
    ssh: Option<Ssh>,
    /// Who the other end is, for messages.
    name: String,
}

fn open_link(args: &CopyArgs, remote: Place) -> anyhow::Result<(Link, Vec<u8>)> {
    let ra = &args.remote;
    let limits = Limits {
        idle: Duration::from_secs(300),
        bwlimit: ra.bwlimit,
    };
    match remote {
        Place::Ssh { host, path } => {
            let mut ssh = Ssh::spawn(&ra.rsh, &host, &ra.remote_ferry)?;
            let (r, w) = ssh.streams()?;
            let (r, w): (ReadHalf, WriteHalf) = match ra.bwlimit {
                Some(rate) => (Box::new(Paced::new(r, rate)), Box::new(Paced::new(w, rate))),
                None => (Box::new(r), Box::new(w)),
            };
            let link = Link {
                r,
                w,
                ssh: Some(ssh),
                name: host,
            };
            Ok((link, path))
        }
        Place::Daemon(url) => {
            let notice =
                |line: &str| crate::report::to_stderr(format_args!("ferry: warning: {line}"));
            let dial = Dial {
                insecure: ra.insecure,
                fingerprint: ra.fingerprint.clone(),
                known: KnownServers::default_path().map(KnownServers::at),
                limits,
                notice: &notice,
            };
            let (r, w) = connect(&url, &dial).map_err(|e| anyhow::anyhow!("{e}"))?;
            let link = Link {
                r,
                w: Box::new(std::io::BufWriter::with_capacity(64 << 10, w)),
                ssh: None,
                name: url.server(),
            };
            Ok((link, url.path))
        }
        Place::Local => anyhow::bail!("neither SRC nor DST is remote"),
    }
}

fn read_token(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    let token =
        std::fs::read(path).map_err(|e| anyhow::anyhow!("{}: read token: {e}", path.display()))?;
    let token = token.trim_ascii().to_vec();
    if token.is_empty() {
        anyhow::bail!("{}: the token file is empty", path.display());
    }
    Ok(token)
}

/// `ferry copy` with a remote SRC or DST.
pub fn run_remote_copy(args: CopyArgs) -> anyhow::Result<ExitCode> {
    let job = Job::new(args.output, &args.src, &args.dst);
    Ok(job.or_fatal(remote_job(&args, &job)))
}

fn remote_job(args: &CopyArgs, job: &Job<'_>) -> anyhow::Result<ExitCode> {
    job.summary_on_interrupt()?;
    if args.takes_from_dirs() {
        anyhow::bail!("--link-dest and --reflink-dest: not supported for a remote copy yet");
    }
    let token = args
        .remote
        .token_file
        .as_deref()
        .map(read_token)
        .transpose()?;
    let opts = Options {
        token,
        checksum: args.data.checksum,
        compress: args.remote.compress,
        verify: args.data.verify,
        threads: args.jobs.unwrap_or_else(ferry_core::copy::default_threads),
        walk: SourceWalk {
            rules: listed_rules(args, job)?,
            one_file_system: args.one_file_system,
            dereference: args.dereference,
            keep_newer: args.update,
        },
        mirror: Mirror {
            delete: args.mirror.delete || args.mirror.delete_excluded,
            delete_excluded: args.mirror.delete_excluded,
            max_delete: args.mirror.max_delete,
            dry_run: args.mirror.dry_run,
            changes: false,
        },
    };
    let printer = crate::itemize::printer(&args.mirror, args.output.json);
    let changes = printer.as_deref();
    let dst = place(args.dst.as_os_str())?;
    let srcs = args
        .srcs
        .iter()
        .map(|p| place(p.as_os_str()))
        .collect::<anyhow::Result<Vec<Place>>>()?;
    let remote_srcs = srcs.iter().filter(|p| !matches!(p, Place::Local)).count();
    match (dst, remote_srcs) {
        (Place::Local, n) if n == srcs.len() => downloads(args, job, srcs, &opts, changes),
        (Place::Local, _) => anyhow::bail!(
            "some SRCs are remote and some local: one end of a copy must be local, the \
             other remote"
        ),
        (remote, 0) => upload(args, job, remote, &opts, changes),
        _ => anyhow::bail!(
            "{} and {}: both are remote; one end of a copy must be local",
            args.srcs[0].display(),
            args.dst.display()
        ),
    }
}

/// The filter rules `args` give, with the list of `--files-from`: taken for an upload
/// (SRC is here, where its paths are checked and the missing ones said now), refused
/// for a download.
fn listed_rules(args: &CopyArgs, job: &Job<'_>) -> anyhow::Result<ferry_core::filter::Rules> {
    let rules = crate::filters::rules(&args.filter)?;
    if rules.listed().is_none() {
        crate::files_from::refused(args)?;
        return Ok(rules);
    }
    if !matches!(place(args.dst.as_os_str())?, Place::Local) {
        crate::files_from::refused(args)?;
        let rules = crate::files_from::settle_kinds(&args.src, rules)?;
        crate::files_from::report_missing_up_front(&args.src, &rules, job);
        return Ok(rules);
    }
    anyhow::bail!(
        "--files-from: over ssh and ferry:// only for an upload, where SRC is here (a \
         download's list is not taken yet)"
    )
}

/// Copies the local SRCs to `remote` over one connection: one tree, or several each
/// under its name (`ferry copy a b HOST:DST`, `ferry copy proj HOST:bk/`).
fn upload(
    args: &CopyArgs,
    job: &Job<'_>,
    remote: Place,
    opts: &Options,
    changes: Option<&dyn Changes>,
) -> anyhow::Result<ExitCode> {
    // A missing SRC is said before anything is started at the other end.
    for src in &args.srcs {
        if let Err(e) = std::fs::symlink_metadata(src) {
            let err = ferry_core::Error::new(&ferry_core::RelPath::root(), "open source", e);
            let line = match args.srcs.len() {
                1 => job.reporter.line(&err),
                _ => format!("{}: open source: {}", src.display(), err.os),
            };
            return Ok(job.fatal(&line));
        }
    }
    let listed = opts.walk.rules.listed().is_some();
    let named = match &args.srcs[..] {
        // With a list, SRC's contents go into DST, as rsync puts them.
        [src] if listed || !crate::goes_in_by_name(src, &args.dst) => None,
        srcs => Some(crate::several::named_sources(srcs)?),
    };
    let source = match &named {
        Some(named) => Source::Named(named),
        None => Source::Tree(&args.srcs[0]),
    };
    let stats = &job.stats;
    let counting = job.counting();
    let show = job.show_progress();
    let ended = over_link(args, remote, |r, w, path| match named {
        None => progress::with_progress(show, &args.srcs[0], stats, || {
            client::upload(r, w, source, path, opts, stats, &counting, changes)
        }),
        Some(_) => progress::with_totals(
            show,
            |_| {},
            stats,
            || client::upload(r, w, source, path, opts, stats, &counting, changes),
        ),
    })?;
    Ok(match ended {
        Ok(theirs) => {
            written_there(job, &theirs, opts.mirror.dry_run);
            job.finish()
        }
        Err(Ended::Path(e)) => job.fatal(&job.reporter.line(&e)),
        Err(Ended::Line(line)) => job.fatal(&line),
    })
}

/// Copies each remote SRC into the local DST, a connection each: into DST itself, or
/// (several SRCs, or one named without a trailing slash into `DST/`) into DST under
/// the SRC's own name. One SRC that cannot be copied at all is reported; the others
/// are copied.
fn downloads(
    args: &CopyArgs,
    job: &Job<'_>,
    srcs: Vec<Place>,
    opts: &Options,
    changes: Option<&dyn Changes>,
) -> anyhow::Result<ExitCode> {
    let several = srcs.len() > 1;
    let into_dst = args.dst.as_os_str().as_bytes().ends_with(b"/");
    if several && !opts.mirror.dry_run {
        std::fs::create_dir_all(&args.dst)
            .map_err(|e| anyhow::anyhow!("{}: make destination: {e}", args.dst.display()))?;
    }
    let stats = &job.stats;
    let counting = job.counting();
    let show = job.show_progress();
    for (arg, remote) in args.srcs.iter().zip(srcs) {
        let path = remote_path(&remote);
        let by_name = several || (into_dst && !path.ends_with(b"/"));
        let into = match (by_name, remote_name(path)) {
            (false, _) => args.dst.clone(),
            (true, Some(name)) => args.dst.join(OsStr::from_bytes(name)),
            (true, None) => anyhow::bail!(
                "{}: with several SRCs each needs a name of its own to take in DST",
                arg.display()
            ),
        };
        let ended = over_link(args, remote, |r, w, path| {
            progress::with_totals(
                show,
                |_| {},
                stats,
                || client::download(r, w, path, &into, opts, stats, &counting, changes),
            )
        })?;
        let line = match ended {
            Ok(theirs) => {
                sent_there(job, &theirs, opts.mirror.dry_run);
                continue;
            }
            Err(Ended::Path(e)) => job.reporter.line(&e),
            Err(Ended::Line(line)) => line,
        };
        if !several {
            return Ok(job.fatal(&line));
        }
        crate::report::to_stderr(format_args!("ferry: {line}"));
        ferry_core::Stats::bump(&job.stats.errors);
    }
    Ok(job.finish())
}

/// The path a remote place names there.
fn remote_path(place: &Place) -> &[u8] {
    match place {
        Place::Ssh { path, .. } => path,
        Place::Daemon(url) => &url.path,
        Place::Local => b"",
    }
}

/// The last component of a remote path (`a/b/` is `b`); none for `/`, `.` or `..`.
fn remote_name(path: &[u8]) -> Option<&[u8]> {
    let name = path.split(|&b| b == b'/').rfind(|c| !c.is_empty())?;
    (name != b"." && name != b"..").then_some(name)
}

/// Why a connection's job ended early: a local path that could not be used at all,
/// or a line saying what the other end or the connection did.
enum Ended {
    Path(ferry_core::Error),
    Line(String),
}

/// Runs `job` over a connection to `remote` (given the path there), then waits for the
/// other end to finish: the server's counters, or why it ended early.
fn over_link(
    args: &CopyArgs,
    remote: Place,
    job: impl FnOnce(ReadHalf, WriteHalf, &[u8]) -> Result<Snapshot, NetError>,
) -> anyhow::Result<Result<Snapshot, Ended>> {
    let (link, path) = open_link(args, remote)?;
    let Link {
        r,
        w,
        mut ssh,
        name,
    } = link;
    let done = job(r, w, &path);
    let done = done.and_then(|theirs| {
        ssh.as_mut().map_or(Ok(()), Ssh::finish)?;
        Ok(theirs)
    });
    let ending = |ssh: &mut Option<Ssh>| ssh.as_mut().map(|s| format!(" ({})", s.ending()));
    Ok(done.map_err(|e| match e {
        NetError::Path(e) => Ended::Path(e),
        e @ (NetError::Handshake(_) | NetError::Closed | NetError::ClosedMidFrame) => {
            let ending = ending(&mut ssh).unwrap_or_default();
            Ended::Line(format!("{name}: {e}{ending}"))
        }
        e => Ended::Line(format!("{name}: {e}")),
    }))
}

/// After an upload, the summary counts what the server wrote and deleted, and what
/// was left out here as up to date as well as what it found so. After a dry run, what
/// would be written was counted here (nothing was sent).
fn written_there(job: &Job<'_>, theirs: &Snapshot, dry_run: bool) {
    let s = &job.stats;
    s.deleted.store(theirs.deleted, Relaxed);
    s.skipped.fetch_add(theirs.skipped, Relaxed);
    s.skipped_bytes.fetch_add(theirs.skipped_bytes, Relaxed);
    if dry_run {
        return;
    }
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
}

/// After a download, the summary counts what the server left out as up to date too;
/// after a dry run, what it would have sent (nothing was written here).
fn sent_there(job: &Job<'_>, theirs: &Snapshot, dry_run: bool) {
    let s = &job.stats;
    s.skipped.fetch_add(theirs.skipped, Relaxed);
    s.skipped_bytes.fetch_add(theirs.skipped_bytes, Relaxed);
    if dry_run {
        for (counter, v) in [
            (&s.files, theirs.files),
            (&s.dirs, theirs.dirs),
            (&s.others, theirs.others),
            (&s.bytes, theirs.bytes),
        ] {
            counter.fetch_add(v, Relaxed);
        }
    }
}
