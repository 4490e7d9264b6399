//! The live progress bar on a terminal: entries (files, symlinks and other
//! non-directories), bytes, entries/s, MiB/s (binary units, as the byte counts) and
//! ETA; where standard error is not a terminal (`--progress` into a log), the same
//! as one line every few seconds. The total is counted by a second walk running alongside the job, so the job
//! never waits.

use ferry_core::count::{count_trees, Totals};
use ferry_core::Stats;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use crate::report::human_bytes;

/// Runs `job` while a progress bar (when `enabled`) shows `stats` against the totals of
/// the tree at `src`.
pub fn with_progress<T>(enabled: bool, src: &Path, stats: &Stats, job: impl FnOnce() -> T) -> T {
    with_progress_of(enabled, &[src], stats, job)
}

/// [`with_progress`] of a job over several trees (`ferry pack a b A`).
pub fn with_progress_of<T>(
    enabled: bool,
    srcs: &[&Path],
    stats: &Stats,
    job: impl FnOnce() -> T,
) -> T {
    with_totals(enabled, |totals| count_trees(srcs, totals), stats, job)
}

/// Runs `job` while a progress bar (when `enabled`) shows `stats` against the totals
/// that `count` fills in alongside (it must set `complete` when done).
pub fn with_totals<T>(
    enabled: bool,
    count: impl FnOnce(&Totals) + Send,
    stats: &Stats,
    job: impl FnOnce() -> T,
) -> T {
    if !enabled {
        return job();
    }
    let totals = Totals::default();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| count(&totals));
        s.spawn(|| draw(stats, &totals, &stop));
        let out = job();
        stop.store(true, Relaxed);
        out
    })
}

/// Set when the job is told to stop: the bar clears itself ...
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// ... and says so here (true while no bar is drawn).
static NO_BAR: AtomicBool = AtomicBool::new(true);

/// For a job told to stop: clears the progress bar, if one is drawn, so what is printed
/// next stands alone. Waits at most a few of the bar's ticks.
pub fn clear_for_interrupt() {
    INTERRUPTED.store(true, Relaxed);
    let asked = Instant::now();
    while !NO_BAR.load(Relaxed) && asked.elapsed() < Duration::from_millis(500) {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// How often a line of progress is printed where standard error is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(5);

fn draw(stats: &Stats, totals: &Totals, stop: &AtomicBool) {
    let lines = !std::io::stderr().is_terminal();
    let bar = match lines {
        true => ProgressBar::hidden(),
        false => ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr_with_hz(10)),
    };
    let style = ProgressStyle::with_template("{bar:30.cyan/blue} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    let start = Instant::now();
    let mut last_line = start;
    NO_BAR.store(false, Relaxed);
    while !stop.load(Relaxed) && !INTERRUPTED.load(Relaxed) {
        let (done_bytes, total_bytes, line) = message(stats, totals, start);
        if lines {
            if last_line.elapsed() >= LINE_EVERY {
                last_line = Instant::now();
                crate::report::to_stderr(format_args!("progress: {line}"));
            }
        } else {
            bar.set_length(total_bytes.max(1));
            bar.set_position(done_bytes.min(total_bytes));
            bar.set_message(line);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if lines && !INTERRUPTED.load(Relaxed) {
        // Where the job ended, for the log.
        let (.., line) = message(stats, totals, start);
        crate::report::to_stderr(format_args!("progress: {line}"));
    }
    bar.finish_and_clear();
    // Written out by now: a job told to stop exits as soon as this is set.
    drop(bar);
    NO_BAR.store(true, Relaxed);
}

/// Bytes done, bytes in all, and the line saying how far the job is.
fn message(stats: &Stats, totals: &Totals, start: Instant) -> (u64, u64, String) {
    let s = stats.snapshot();
    let done_files = s.files + s.others + s.skipped;
    let done_bytes = s.bytes + s.skipped_bytes;
    let total_files = totals.entries.load(Relaxed);
    let total_bytes = totals.bytes.load(Relaxed);
    let secs = start.elapsed().as_secs_f64().max(1e-3);
    let counted = totals.complete.load(Relaxed);
    let eta = if counted && done_bytes > 0 && total_bytes > done_bytes {
        let left = (total_bytes - done_bytes) as f64 * secs / done_bytes as f64;
        format!("ETA {}", fmt_secs(left))
    } else if counted {
        String::new()
    } else {
        "counting…".to_string()
    };
    let line = format!(
        "{done_files}/{total_files}{} entries  {}/{}  {:.0} entries/s  {}/s  {eta}{}",
        if counted { "" } else { "+" },
        human_bytes(done_bytes),
        human_bytes(total_bytes),
        done_files as f64 / secs,
        human_bytes((done_bytes as f64 / secs) as u64),
        if s.errors > 0 {
            format!("  {} errors", s.errors)
        } else {
            String::new()
        },
    );
    (done_bytes, total_bytes, line)
}

fn fmt_secs(s: f64) -> String {
    let s = s.round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s / 60 % 60)
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}
