//! `ferry demo`: the ZCM-DE experiment (seed 000, its Table I) on this machine.
//!
//! Makes folders of same-size files from 512 B to 1 MiB plus a mixed folder, copies each
//! folder with a plain one-file-at-a-time copy and with ferry, prints files/s side by
//! side with the speedup, checks ferry's copy is identical, and removes everything.

use crate::cli::DemoArgs;
use crate::report::StderrReporter;
use anyhow::{bail, Context};
use ferry_core::{copy_tree, CopyOptions, Stats};
use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::process::{Command, Stdio};
use std::time::Instant;

/// The file sizes of the paper's folders: 512 B doubling up to 1 MiB.
const SIZES: [u64; 12] = [
    512,
    1 << 10,
    2 << 10,
    4 << 10,
    8 << 10,
    16 << 10,
    32 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
    512 << 10,
    1 << 20,
];
/// No folder holds more than this many bytes, so the demo stays under a minute.
const FOLDER_BYTES: u64 = 16 << 20;

fn folder_name(size: u64) -> String {
    if size >= 1 << 20 {
        format!("{}MiB", size >> 20)
    } else if size >= 1 << 10 {
        format!("{}KiB", size >> 10)
    } else {
        format!("{size}B")
    }
}

/// Makes the sample tree; returns (folder name, file count) in order.
fn make_sample(root: &Path, files: usize) -> anyhow::Result<Vec<(String, usize)>> {
    // Seeded, so the sample is the same every run.
    let mut rng = fastrand::Rng::with_seed(0x9E37_79B9_7F4A_7C15);
    let mut buf = vec![0u8; 1 << 20];
    let mut folders = Vec::new();
    let mut write_folder =
        |name: String, sizes: &mut dyn Iterator<Item = u64>| -> anyhow::Result<usize> {
            let dir = root.join(&name);
            fs::create_dir_all(&dir)?;
            let mut n = 0;
            for size in sizes {
                let data = &mut buf[..size as usize];
                rng.fill(data);
                fs::write(dir.join(format!("f{n:05}")), data)?;
                n += 1;
            }
            folders.push((name, n));
            Ok(n)
        };
    for size in SIZES {
        let n = (files as u64).min((FOLDER_BYTES / size).max(32)) as usize;
        write_folder(folder_name(size), &mut std::iter::repeat_n(size, n))?;
    }
    let mut pick = fastrand::Rng::with_seed(7);
    let mix = files.min(500);
    write_folder(
        "mix".into(),
        &mut (0..mix).map(|_| SIZES[pick.usize(..SIZES.len())]),
    )?;
    Ok(folders)
}

/// The baseline: one file at a time, as a simple copier does.
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

/// Every file of `a` is in `b` with the same bytes, mode and mtime.
fn check_identical(a: &Path, b: &Path) -> anyhow::Result<usize> {
    let mut n = 0;
    for e in fs::read_dir(a)? {
        let e = e?;
        let other = b.join(e.file_name());
        let (ma, mb) = (
            e.metadata()?,
            fs::symlink_metadata(&other).with_context(|| format!("{} missing", other.display()))?,
        );
        if ma.mode() != mb.mode() || ma.mtime() != mb.mtime() || ma.mtime_nsec() != mb.mtime_nsec()
        {
            bail!("{}: metadata differs", other.display());
        }
        if ma.is_dir() {
            n += check_identical(&e.path(), &other)?;
        } else {
            if fs::read(e.path())? != fs::read(&other)? {
                bail!("{}: content differs", other.display());
            }
            n += 1;
        }
    }
    Ok(n)
}

/// Times `f` after writing back what earlier steps left dirty, so neither copier pays
/// for the other's writeback.
fn timed(f: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<f64> {
    rustix::fs::sync();
    let t = Instant::now();
    f()?;
    Ok(t.elapsed().as_secs_f64())
}

/// A fresh ext4 filesystem in an image file, loop-mounted; unmounted when dropped.
/// File creation on a big, long-lived filesystem is slow and erratic; a fresh one shows
/// what the copiers themselves cost.
struct LoopMount {
    dir: PathBuf,
}

impl LoopMount {
    /// Makes and mounts a fresh ext4 in `tmp`, when running as root with mkfs.ext4.
    fn try_new(tmp: &Path) -> Option<LoopMount> {
        if !rustix::process::geteuid().is_root() {
            return None;
        }
        let img = tmp.join("ext4.img");
        let dir = tmp.join("mnt");
        let ok = |cmd: &mut Command| {
            cmd.stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        let made = fs::File::create(&img)
            .and_then(|f| f.set_len(4 << 30))
            .is_ok()
            && fs::create_dir(&dir).is_ok()
            && ok(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&img))
            && ok(Command::new("mount")
                .args(["-o", "loop"])
                .arg(&img)
                .arg(&dir));
        made.then_some(LoopMount { dir })
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        let quiet = |args: &[&str]| {
            Command::new("umount")
                .args(args)
                .arg(&self.dir)
                .stderr(Stdio::null())
                .status()
        };
        if !quiet(&[]).is_ok_and(|s| s.success()) {
            let _ = quiet(&["-l"]);
        }
    }
}

/// Runs the demo.
pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let tmp = match &args.dir {
        Some(d) => tempfile::Builder::new()
            .prefix("ferry-demo")
            .tempdir_in(d)?,
        None => tempfile::Builder::new().prefix("ferry-demo").tempdir()?,
    };
    let mount = if args.dir.is_none() {
        LoopMount::try_new(tmp.path())
    } else {
        None
    };
    let root = mount.as_ref().map_or(tmp.path(), |m| m.dir.as_path());
    let src = root.join("src");
    let place = if mount.is_some() {
        "a fresh loop-mounted ext4"
    } else {
        "the temporary directory"
    };
    println!(
        "ferry demo: the ZCM-DE folders (seed 000, Table I), on {place} at {}",
        root.display()
    );
    let folders = make_sample(&src, args.files)?;
    let total: usize = folders.iter().map(|f| f.1).sum();
    println!(
        "made {} folders, {total} files; copying each with one-file-at-a-time and with ferry\n",
        folders.len()
    );
    println!(
        "{:>8} {:>7} {:>16} {:>16} {:>8}",
        "folder", "files", "one-at-a-time/s", "ferry files/s", "speedup"
    );
    let stats = Stats::default();
    let opts = CopyOptions::default();
    let (mut t_base, mut t_ferry) = (0.0, 0.0);
    for (name, n) in &folders {
        let from = src.join(name);
        let base = timed(|| copy_one_at_a_time(&from, &root.join("plain").join(name)))?;
        let to = root.join("ferry").join(name);
        let reporter = StderrReporter {
            src: &from,
            dst: &to,
            src_is_archive: false,
        };
        let fast = timed(|| Ok(copy_tree(&from, &to, &opts, &stats, &reporter)?))?;
        t_base += base;
        t_ferry += fast;
        let (rb, rf) = (*n as f64 / base, *n as f64 / fast);
        println!("{name:>8} {n:>7} {rb:>16.0} {rf:>16.0} {:>7.1}x", rf / rb);
        let _ = std::io::stdout().flush();
    }
    println!(
        "{:>8} {total:>7} {:>16.0} {:>16.0} {:>7.1}x",
        "all",
        total as f64 / t_base,
        total as f64 / t_ferry,
        t_base / t_ferry
    );
    if stats.snapshot().errors > 0 {
        bail!("ferry reported {} errors", stats.snapshot().errors);
    }
    let checked =
        check_identical(&src, &root.join("ferry")).context("ferry's copy is not identical")?;
    println!(
        "\nchecked: ferry's copy is identical to the source ({checked} files: bytes, mode, mtime)"
    );
    println!("(warm cache; one-at-a-time keeps only modes, ferry keeps all metadata; bench/ has the full benchmarks)");
    drop(mount);
    tmp.close()?;
    Ok(ExitCode::SUCCESS)
}
