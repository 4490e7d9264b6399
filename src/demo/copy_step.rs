//! The demo's first step: each folder of the sample copied one file at a time (as a
//! simple copier does), by `cp -a`, and by ferry, in files per second.

use super::sample::{self, Folder};
use super::scratch::{installed, run, timed};
use crate::report::StderrReporter;
use anyhow::{bail, Context};
use ferry_core::{copy_tree, CopyOptions, Stats};
use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::Command;

/// The baseline: one file at a time, keeping only modes.
fn copy_one_at_a_time(src: &Path, dst: &Path) -> anyhow::Result<()> {
    fs::create_dir_all(dst)?;
    for e in fs::read_dir(src)? {
        let e = e?;
        let to = dst.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_one_at_a_time(&e.path(), &to)?;
        } else {
            fs::copy(e.path(), &to)?;
        }
    }
    Ok(())
}

/// Copies every folder of `src` into `root` three ways and prints a line for each;
/// ferry's copy ends up in `root/ferry`, checked against `src`.
pub fn run_copies(src: &Path, root: &Path, folders: &[Folder]) -> anyhow::Result<()> {
    let with_cp = installed("cp");
    println!("1. copy: each folder copied one file at a time, by `cp -a` and by ferry (files/s)\n");
    println!(
        "{:>8} {:>6} {:>14} {:>10} {:>10} {:>13}",
        "folder", "files", "one-at-a-time", "cp -a", "ferry", "vs cp -a"
    );
    let stats = Stats::default();
    let opts = CopyOptions::default();
    let (mut t_one, mut t_cp, mut t_ferry) = (0.0, 0.0, 0.0);
    for f in folders {
        let from = src.join(&f.name);
        let one = timed(|| copy_one_at_a_time(&from, &root.join("plain").join(&f.name)))?;
        let cp = if with_cp {
            let to = root.join("cp").join(&f.name);
            fs::create_dir_all(root.join("cp"))?;
            timed(|| run(Command::new("cp").arg("-a").arg(&from).arg(&to)))?
        } else {
            f64::NAN
        };
        let to = root.join("ferry").join(&f.name);
        let reporter = StderrReporter {
            src: &from,
            dst: &to,
            src_is_archive: false,
        };
        let fast = timed(|| Ok(copy_tree(&from, &to, &opts, &stats, &reporter)?))?;
        (t_one, t_cp, t_ferry) = (t_one + one, t_cp + cp, t_ferry + fast);
        print_line(&f.name, f.files, one, cp, fast);
    }
    let total: usize = folders.iter().map(|f| f.files).sum();
    print_line("all", total, t_one, t_cp, t_ferry);
    if stats.snapshot().errors > 0 {
        bail!("ferry reported {} errors", stats.snapshot().errors);
    }
    let checked = sample::check_identical(src, &root.join("ferry"))
        .context("ferry's copy is not identical")?;
    println!(
        "   checked: ferry's copy is identical to the source ({checked} files: bytes, mode, mtime)"
    );
    println!("   (one-at-a-time keeps only modes; cp -a and ferry keep all metadata)\n");
    Ok(())
}

/// One line of the copy table: files/s of each way, and ferry's speedup over `cp -a`.
fn print_line(name: &str, files: usize, one: f64, cp: f64, ferry: f64) {
    let rate = |t: f64| files as f64 / t;
    let cp_col = if cp.is_nan() {
        "-".to_string()
    } else {
        format!("{:.0}", rate(cp))
    };
    let speedup = if cp.is_nan() {
        "-".to_string()
    } else {
        format!("{:.1}x", cp / ferry)
    };
    println!(
        "{name:>8} {files:>6} {:>14.0} {cp_col:>10} {:>10.0} {speedup:>13}",
        rate(one),
        rate(ferry)
    );
    let _ = std::io::stdout().flush();
}
