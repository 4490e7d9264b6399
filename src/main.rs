//! The `ferry` command: parses flags, runs one job, prints what happened.
//!
//! Exit status: 0 when everything was done, 1 when some paths failed (each printed on
//! its own line), 2 when the job could not run at all.

mod archive_cmd;
mod cli;
mod demo;
mod progress;
mod report;

use clap::Parser;
use cli::{Cli, Command, CopyArgs};
use ferry_core::{copy_tree, CopyOptions, Stats};
use report::{StderrReporter, Summary};
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let cli = Cli::parse();
    raise_fd_limit();
    let result = match cli.command {
        Command::Copy(args) => run_copy(args),
        Command::Pack(args) => archive_cmd::run_pack(args),
        Command::Unpack(args) => archive_cmd::run_unpack(args),
        Command::Ls(args) => archive_cmd::run_ls(args),
        Command::Cat(args) => archive_cmd::run_cat(args),
        Command::Demo(args) => demo::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ferry: {e:#}");
            ExitCode::from(2)
        }
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

fn run_copy(args: CopyArgs) -> anyhow::Result<ExitCode> {
    let opts = CopyOptions {
        threads: args.jobs.unwrap_or_else(ferry_core::copy::default_threads),
        reflink: args.reflink.into(),
        sparse: args.sparse.into(),
        checksum: args.checksum,
        verify: args.verify,
        zero_scan: !args.no_zero_scan,
    };
    let stats = Stats::default();
    let terminal = std::io::stderr().is_terminal();
    let show = terminal && !args.output.no_progress && !args.output.json;
    let start = Instant::now();
    let reporter = StderrReporter {
        src: &args.src,
        dst: &args.dst,
    };
    let copied = progress::with_progress(show, &args.src, &stats, || {
        copy_tree(&args.src, &args.dst, &opts, &stats, &reporter)
    });
    if let Err(e) = copied {
        eprintln!("ferry: {}", reporter.line(&e));
        return Ok(ExitCode::from(2));
    }
    let summary = Summary::new(&stats.snapshot(), start.elapsed().as_secs_f64());
    summary.print(args.output.json, terminal);
    Ok(if summary.errors > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
