//! `ferry demo`: ferry's story on a built-in sample, side by side with the tools people
//! use for each job, in under a minute.
//!
//! The sample is the folders of the ZCM-DE experiment (seed 000, its Table I): files of
//! 512 B to 1 MiB and a mixed folder. Step 1 copies each folder one file at a time, with
//! `cp -a` and with ferry; step 2 packs, unpacks, lists and reads one member with ferry
//! and with GNU tar (on a fresh XFS when root, so ferry clones); step 3 mounts ferry's
//! archive and reads it against the unpacked tree. Every result of ferry's is checked
//! against the source, and everything is removed at the end.

mod archive_step;
mod copy_step;
mod mount_step;
mod sample;
mod scratch;

use crate::cli::DemoArgs;
use crate::report::StderrReporter;
use ferry_core::{copy_tree, CopyOptions, Stats};
use scratch::LoopMount;
use std::process::ExitCode;
use std::time::Instant;

/// Runs the demo.
pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let builder = || {
        let mut b = tempfile::Builder::new();
        b.prefix("ferry-demo");
        b
    };
    let tmp = match &args.dir {
        Some(d) => builder().tempdir_in(d)?,
        None => builder().tempdir()?,
    };
    // Loop mounts only in a directory of the demo's own choosing.
    let (ext4, xfs) = match args.dir {
        Some(_) => (None, None),
        None => (
            LoopMount::try_new(tmp.path(), "ext4", "ext4"),
            LoopMount::try_new(tmp.path(), "xfs", "xfs"),
        ),
    };
    let root = ext4.as_ref().map_or(tmp.path(), |m| m.dir.as_path());
    let place = match &ext4 {
        Some(m) => format!("a fresh loop-mounted {}", m.fs),
        None => "a temporary directory".to_string(),
    };
    println!("ferry demo, on {place} at {}", root.display());
    let src = root.join("src");
    let folders = sample::make(&src, args.files)?;
    let total: usize = folders.iter().map(|f| f.files).sum();
    println!(
        "sample: the ZCM-DE folders (seed 000, Table I): {} folders of 512 B to 1 MiB files and a mixed one, {total} files; warm cache\n",
        folders.len()
    );
    copy_step::run_copies(&src, root, &folders)?;

    // The archive step works where ferry can clone, when it could make such a place.
    let (arch_root, arch_src) = match &xfs {
        Some(m) => {
            let to = m.dir.join("src");
            let reporter = StderrReporter {
                src: &src,
                dst: &to,
                src_is_archive: false,
            };
            copy_tree(
                &src,
                &to,
                &CopyOptions::default(),
                &Stats::default(),
                &reporter,
            )?;
            (m.dir.clone(), to)
        }
        None => (root.to_path_buf(), src.clone()),
    };
    let mix = folders.last().expect("the sample has its mixed folder");
    let member = format!("{}/f{:05}", mix.name, mix.files.saturating_sub(1));
    let packed = archive_step::run_archives(&arch_src, &arch_root, xfs.is_some(), &member)?;
    mount_step::run_mount(&arch_src, &arch_root, &packed)?;

    println!(
        "done in {:.0} s; everything made is removed. bench/ has the full benchmarks, docs/benchmarks.md their results.",
        started.elapsed().as_secs_f64()
    );
    drop(xfs);
    drop(ext4);
    tmp.close()?;
    Ok(ExitCode::SUCCESS)
}
