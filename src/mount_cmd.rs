//! `ferry mount`, `ferry umount` and `ferry index`: flags in, the ferry-mount library
//! does the work, one line out.
//!
//! A background mount is this same program run again with `--foreground`, its own
//! process group, standard error going to the log and standard output a pipe back to
//! the first: the child writes `ready` there once the kernel answers the mount (or the
//! error that stopped it), so `ferry mount` returns only when the mount can be used.

use crate::cli::{CacheArgs, IndexArgs, MountArgs, MountMode, MountWatchArgs, UmountArgs};
use crate::report::to_stderr;
use crate::s3_cmd::block_options;
use anyhow::{anyhow, Context};
use ferry_archive::tree::Skipped;
use ferry_mount::fs::{ArchiveFs, Options};
use ferry_mount::session::{self, MountOptions};
use ferry_mount::source::{self, Opened, Origin};
use ferry_s3::mount::blocks::BlockOptions;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

/// How long `ferry mount` waits for its background child to say the mount is ready
/// (the index is already built by then: this is only the mount itself).
const READY_WITHIN: std::time::Duration = std::time::Duration::from_secs(60);

/// Set in the environment of the background child: its stdout is the pipe to report on.
const NOTIFY_ENV: &str = "FERRY_MOUNT_NOTIFY";

pub fn run_mount(mut args: MountArgs) -> anyhow::Result<ExitCode> {
    let notify = std::env::var_os(NOTIFY_ENV).is_some();
    if !args.mountpoint.is_dir() {
        return fail(
            notify,
            anyhow!("{}: not a directory to mount on", args.mountpoint.display()),
        );
    }
    // A second mount on a mountpoint would hide the first one.
    if !notify && session::is_mounted(&args.mountpoint) {
        return fail(
            notify,
            anyhow!(
                "{}: something is mounted there already (ferry umount it first)",
                args.mountpoint.display()
            ),
        );
    }
    // The archive as /proc/mounts and df show it, and as the background child opens
    // it: whatever directory either runs in.
    if !crate::s3_cmd::is_s3(&args.archive) {
        args.archive = std::path::absolute(&args.archive)
            .with_context(|| format!("{}: resolve its path", args.archive.display()))?;
    }
    if !notify && kernel_mode(&args)? {
        match run_kernel(&args) {
            Err(e) if args.mode == MountMode::Auto => to_stderr(format_args!(
                "ferry: warning: the kernel could not mount it ({e:#}); mounting with FUSE"
            )),
            done => return done,
        }
    }
    // Built (or found in the cache) before anything else, so its errors come first and
    // the background child finds the index ready.
    let opened = match open_source(&args.archive, block_options(&args.s3), &args.cache) {
        Ok(o) => o,
        Err(e) => return fail(notify, e),
    };
    if !args.foreground {
        report(&opened, false);
        drop(opened);
        return spawn_background(&args);
    }
    if !notify {
        report(&opened, false);
    }
    let (stop_tx, stop_rx) = std::sync::mpsc::channel();
    ctrlc::set_handler(move || {
        let _ = stop_tx.send(());
    })
    .context("set the interrupt handler")?;
    let entries = opened.table.len();
    let opts = MountOptions {
        allow_other: args.allow_other,
        threads: args.jobs,
        fsname: args.archive.display().to_string(),
    };
    let data = std::sync::Arc::clone(&opened.data);
    let fs = ArchiveFs::new(
        opened,
        Options {
            numeric_owner: args.numeric_owner,
            ..Options::default()
        },
    );
    let mut watchdog = None;
    let served = session::serve(
        fs,
        &args.mountpoint,
        &opts,
        || {
            watchdog = start_watchdog(&args.mountpoint);
            if notify {
                tell_parent("ready");
            } else {
                to_stderr(format_args!(
                    "ferry: {} mounted on {} ({entries} entries); Ctrl-C unmounts",
                    args.archive.display(),
                    args.mountpoint.display()
                ));
            }
        },
        stop_rx,
    );
    // Told this process unmounted, the watchdog leaves the mountpoint alone.
    if let Some(mut child) = watchdog {
        if let Some(mut pipe) = child.stdin.take() {
            let _ = pipe.write_all(ferry_mount::watch::DONE);
        }
        let _ = child.wait();
    }
    if let Some(said) = data.summary() {
        to_stderr(format_args!("ferry: {}: {said}", args.archive.display()));
    }
    match served {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => fail(notify, e.into()),
    }
}

/// The archive at `archive`, or the upload at an `s3://` location, opened to be served.
/// (`blocks`: how an upload's blocks are fetched and cached).
fn open_source(archive: &Path, blocks: BlockOptions, cache: &CacheArgs) -> anyhow::Result<Opened> {
    if crate::s3_cmd::is_s3(archive) {
        return crate::s3_cmd::open_for_mount(archive, blocks, cache.cache_dir.as_deref());
    }
    Ok(source::open(archive, cache.cache_dir.as_deref())?)
}

/// In the background child, an error also goes back to the waiting parent.
fn fail(notify: bool, e: anyhow::Error) -> anyhow::Result<ExitCode> {
    if notify {
        tell_parent(&format!("error: {e:#}"));
    }
    Err(e)
}

/// Writes one line to the parent, then lets go of the pipe (standard output becomes
/// /dev/null), so the parent's read ends.
fn tell_parent(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        let _ = rustix::stdio::dup2_stdout(&null);
    }
}

/// Warns of what the tar reader of `archive` read liberally (`warnings`) and of the
/// members its tree left out (`skipped`): the same lines for both mount modes.
fn warn_of_reading(archive: &Path, warnings: &[String], skipped: &[Skipped]) {
    for w in warnings {
        to_stderr(format_args!("ferry: warning: {}: {w}", archive.display()));
    }
    for s in skipped {
        to_stderr(format_args!(
            "ferry: warning: {}: {s}: not shown",
            archive.display()
        ));
    }
}

/// Warns of what the tar reader read liberally, of members left out, of slow
/// compressed reads and (unless `index_only`, which fails on it) of an index that could
/// not be kept.
fn report(opened: &Opened, index_only: bool) {
    warn_of_reading(&opened.path, &opened.warnings, &opened.skipped);
    if let Some(advice) = &opened.advice {
        to_stderr(format_args!(
            "ferry: warning: {}: {advice}",
            opened.path.display()
        ));
    }
    if let (Origin::Unsaved(why), false) = (&opened.origin, index_only) {
        to_stderr(format_args!(
            "ferry: warning: the index was not kept in the cache: {why}"
        ));
    }
}

fn log_path(args: &MountArgs) -> anyhow::Result<PathBuf> {
    if let Some(p) = &args.log {
        return Ok(p.clone());
    }
    let dir = args
        .cache
        .cache_dir
        .clone()
        .or_else(ferry_mount::cache::dir)
        .ok_or_else(|| anyhow!("no cache directory for the log: give --log FILE"))?;
    std::fs::create_dir_all(&dir).with_context(|| format!("{}: create", dir.display()))?;
    Ok(dir.join("mount.log"))
}

/// Runs the mount in a child of its own and waits for it to say it is ready.
fn spawn_background(args: &MountArgs) -> anyhow::Result<ExitCode> {
    let log = log_path(args)?;
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .with_context(|| format!("{}: open the log", log.display()))?;
    let me = std::env::current_exe().context("find the ferry program")?;
    let mut cmd = Command::new(me);
    cmd.arg("mount")
        .arg("--foreground")
        .arg("--jobs")
        .arg(args.jobs.to_string())
        .arg("--cache-size")
        .arg(args.s3.cache_size.to_string())
        .arg("--block-size")
        .arg(args.s3.block_size.to_string())
        .arg("--timeout")
        .arg(args.s3.timeout.to_string())
        .arg(&args.archive)
        .arg(&args.mountpoint)
        .env(NOTIFY_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log_file)
        .process_group(0);
    if args.numeric_owner {
        cmd.arg("--numeric-owner");
    }
    if args.allow_other {
        cmd.arg("--allow-other");
    }
    if let Some(dir) = &args.cache.cache_dir {
        cmd.arg("--cache-dir").arg(dir);
    }
    let mut child = cmd.spawn().context("start the mount")?;
    let (tx, rx) = std::sync::mpsc::channel();
    if let Some(out) = child.stdout.take() {
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(out).read_line(&mut line);
            let _ = tx.send(line);
        });
    }
    let Ok(line) = rx.recv_timeout(READY_WITHIN) else {
        let _ = child.kill();
        let _ = child.wait();
        let _ = session::unmount(&args.mountpoint, true);
        return Err(anyhow!(
            "{}: the mount did not answer within {} s; see {}",
            args.mountpoint.display(),
            READY_WITHIN.as_secs(),
            log.display()
        ));
    };
    match line.trim_end() {
        "ready" => Ok(ExitCode::SUCCESS),
        l => {
            let why = l.strip_prefix("error: ").unwrap_or(l);
            let _ = child.wait();
            if why.is_empty() {
                Err(anyhow!(
                    "the mount stopped before it was ready; see {}",
                    log.display()
                ))
            } else {
                Err(anyhow!("{why}"))
            }
        }
    }
}

/// Whether this mount is the kernel's: `--kernel`, or `--mode auto` as root for an
/// uncompressed archive (saying so when auto picks FUSE).
fn kernel_mode(args: &MountArgs) -> anyhow::Result<bool> {
    let mode = if args.kernel {
        MountMode::Kernel
    } else {
        args.mode
    };
    let root = rustix::process::geteuid().is_root();
    let s3 = crate::s3_cmd::is_s3(&args.archive);
    match mode {
        MountMode::Fuse => Ok(false),
        MountMode::Kernel if s3 => Err(anyhow!(
            "--kernel: an s3:// upload is mounted with FUSE only (the kernel reads local files)"
        )),
        MountMode::Kernel if !root => Err(anyhow!(
            "--kernel: only root can have the kernel mount an archive; without it, ferry mounts it with FUSE"
        )),
        MountMode::Kernel if args.foreground => Err(anyhow!(
            "--foreground: a kernel mount has no process to stay attached to"
        )),
        MountMode::Kernel => Ok(true),
        MountMode::Auto => {
            let why_not = if s3 {
                Some("an s3:// upload")
            } else if !root {
                Some("not root")
            } else if args.foreground {
                Some("--foreground")
            } else if !ferry_mount::kernel::image::mountable(&args.archive) {
                Some("the kernel cannot read this archive in place")
            } else {
                None
            };
            if let Some(why) = why_not {
                println!("mounting with FUSE ({why})");
            }
            Ok(why_not.is_none())
        }
    }
}

/// Mounts the archive by the kernel: its EROFS image from the cache or built now.
fn run_kernel(args: &MountArgs) -> anyhow::Result<ExitCode> {
    use ferry_mount::kernel::{self, Backing, ImageOrigin};
    let cache_dir = args.cache.cache_dir.as_deref();
    let image = kernel::prepare(&args.archive, cache_dir, args.numeric_owner)?;
    warn_of_reading(&args.archive, &image.warnings, &image.skipped);
    for l in &image.left_out {
        to_stderr(format_args!("ferry: warning: {l}: not shown"));
    }
    let backing = if args.loop_devices {
        Backing::Loop
    } else {
        Backing::Auto
    };
    let how = kernel::mount(&image.path, &args.archive, &args.mountpoint, backing)?;
    let from = match image.origin {
        ImageOrigin::Cached => "cached image".to_string(),
        ImageOrigin::Built(took, inodes) => {
            format!("image of {inodes} inodes built in {} ms", took.as_millis())
        }
    };
    println!(
        "{} mounted on {} by the kernel (EROFS, {how}; {from}: {})",
        args.archive.display(),
        args.mountpoint.display(),
        image.path.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Unmounts what `ferry mount` made, and nothing else; a busy mount only with `--lazy`.
pub fn run_umount(args: UmountArgs) -> anyhow::Result<ExitCode> {
    match session::made_by_ferry(&args.mountpoint)? {
        session::MadeBy::FerryKernel => ferry_mount::kernel::unmount(&args.mountpoint, args.lazy)?,
        session::MadeBy::FerryFuse => session::unmount(&args.mountpoint, args.lazy)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Starts the watchdog that unmounts the mount at `mountpoint` if this process ends
/// without doing so ([`ferry_mount::watch`]): this program again, in a process group of
/// its own (so a signal to this one's group leaves it be), its standard input a pipe
/// only this process writes to. `None` (with a warning) where it cannot be started.
fn start_watchdog(mountpoint: &Path) -> Option<std::process::Child> {
    let id = ferry_mount::watch::mount_id(mountpoint)?;
    let started = std::env::current_exe().and_then(|me| {
        Command::new(me)
            .arg("mount-watch")
            .arg("--id")
            .arg(id.to_string())
            .arg(mountpoint)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
    });
    match started {
        Ok(child) => Some(child),
        Err(e) => {
            to_stderr(format_args!(
                "ferry: warning: no watchdog for the mount ({e}): if this process is killed, ferry umount {} clears it",
                mountpoint.display()
            ));
            None
        }
    }
}

/// The watchdog itself (see [`start_watchdog`]).
pub fn run_watch(args: MountWatchArgs) -> anyhow::Result<ExitCode> {
    ferry_mount::watch::watch(&args.mountpoint, args.id, std::io::stdin().lock())?;
    Ok(ExitCode::SUCCESS)
}

pub fn run_index(args: IndexArgs) -> anyhow::Result<ExitCode> {
    let opened = open_source(&args.archive, BlockOptions::default(), &args.cache)?;
    report(&opened, true);
    let (origin, nodes) = (opened.origin, opened.table.len());
    let said = match origin {
        Origin::Embedded => "a ferry archive carries its own index: nothing to build".to_string(),
        Origin::Cached(p) => format!("index up to date: {}", shown(&p)),
        Origin::Built(p) => format!("index built: {}", shown(&p)),
        Origin::Unsaved(why) => return Err(anyhow!("the index could not be kept: {why}")),
    };
    println!("{said} ({nodes} entries)");
    Ok(ExitCode::SUCCESS)
}

fn shown(p: &Path) -> String {
    p.display().to_string()
}
