//! What every job that writes shares: its counters, whether a progress bar is shown,
//! the error reporter, and the summary and exit status at the end, or when it is told
//! to stop.

use crate::cli::OutputArgs;
use crate::report::{StderrReporter, Summary};
use ferry_core::error::Counting;
use ferry_core::Stats;
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

/// One running job.
pub struct Job<'a> {
    /// The job's counters (shared with the handler of a signal to stop).
    pub stats: Arc<Stats>,
    /// Prints one line per failure, naming paths on the source or destination side.
    pub reporter: StderrReporter<'a>,
    output: OutputArgs,
    terminal: bool,
    start: Instant,
    /// Standard output carries the job's data (`pack -`): the JSON summary goes to
    /// standard error.
    stdout_taken: bool,
}

impl<'a> Job<'a> {
    /// A job from `src` to `dst` (as the user named them), printing as `output` says.
    pub fn new(output: OutputArgs, src: &'a Path, dst: &'a Path) -> Self {
        Job {
            stats: Arc::default(),
            reporter: StderrReporter {
                src,
                dst,
                src_is_archive: false,
            },
            output,
            terminal: std::io::stderr().is_terminal(),
            start: Instant::now(),
            stdout_taken: false,
        }
    }

    /// The source is an archive: errors name its members apart from it.
    pub fn reading_archive(mut self) -> Self {
        self.reporter.src_is_archive = true;
        self
    }

    /// Standard output carries the job's data: the JSON summary goes to standard error.
    pub fn summary_on_stderr(&mut self) {
        self.stdout_taken = true;
    }

    /// Whether to show progress: a bar on a terminal, unless told not to or printing
    /// JSON; with `--progress`, always (lines every few seconds off a terminal).
    pub fn show_progress(&self) -> bool {
        self.output.progress || (self.terminal && !self.output.no_progress && !self.output.json)
    }

    /// The reporter, counting the errors it passes on.
    pub fn counting(&self) -> Counting<'_> {
        Counting {
            inner: &self.reporter,
            stats: &self.stats,
        }
    }

    /// Told to stop (SIGINT, SIGTERM, SIGHUP), the job says so, prints its summary as far
    /// as it got (JSON with `"interrupted": true`) and exits with status 130. What it
    /// wrote stays: a file's times are set last, so the same command run again finishes
    /// the job, as after any other interruption. For jobs that have no cleanup of their
    /// own to do (`pack` removes its unfinished archive instead: see `archive_out`).
    pub fn summary_on_interrupt(&self) -> anyhow::Result<()> {
        let (stats, start) = (self.stats.clone(), self.start);
        let (output, terminal, stdout_taken) = (self.output, self.terminal, self.stdout_taken);
        ctrlc::set_handler(move || {
            crate::progress::clear_for_interrupt();
            crate::report::to_stderr(format_args!(
                "ferry: interrupted; the same command run again finishes the job"
            ));
            let mut summary = Summary::new(&stats.snapshot(), start.elapsed().as_secs_f64());
            summary.interrupted = true;
            summary.print(output.json, terminal || output.stats, stdout_taken);
            std::process::exit(130);
        })?;
        Ok(())
    }

    /// Prints the summary; exit status 1 if any path failed.
    pub fn finish(&self) -> ExitCode {
        self.summarize(None)
    }

    /// Prints the summary, with `error` that ended the job, if one did; exit status 1 if
    /// any path failed.
    fn summarize(&self, error: Option<String>) -> ExitCode {
        let mut summary = Summary::new(&self.stats.snapshot(), self.start.elapsed().as_secs_f64());
        summary.error = error;
        summary.print(
            self.output.json,
            self.terminal || self.output.stats,
            self.stdout_taken,
        );
        if summary.errors > 0 {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        }
    }

    /// The exit status of `run`, the job's work: an error it returned (the job could
    /// not start, or not go on) is reported as [`Self::fatal`] reports it, so that with
    /// `--json` every way out prints its one summary.
    pub fn or_fatal(&self, run: anyhow::Result<ExitCode>) -> ExitCode {
        run.unwrap_or_else(|e| self.fatal(&format!("{e:#}")))
    }

    /// Reports why the job could not go on, prints the summary (counting that error and
    /// giving its line as `error`, so a script reading only the summary sees it); exit
    /// status 2.
    pub fn fatal(&self, line: &str) -> ExitCode {
        crate::report::to_stderr(format_args!("ferry: {line}"));
        Stats::bump(&self.stats.errors);
        let _ = self.summarize(Some(line.to_owned()));
        ExitCode::from(2)
    }
}
