//! The demo's third step: ferry's archive mounted (FUSE), walked and read, beside the
//! unpacked tree read natively.

use super::archive_step::Packed;
use super::sample;
use super::scratch::{ferry, run, timed};
use anyhow::Context;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Unmounts the demo's mount however the step ends.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Ok(mut cmd) = ferry() {
            let _ = run(cmd.arg("umount").arg(&self.0));
        }
    }
}

/// Walks the tree at `dir`, reading every file when `read` is set; returns how many
/// entries it saw.
fn walk(dir: &Path, read: bool) -> anyhow::Result<usize> {
    let mut n = 0;
    for e in fs::read_dir(dir)? {
        let e = e?;
        n += 1;
        if e.file_type()?.is_dir() {
            n += walk(&e.path(), read)?;
        } else if read {
            std::io::copy(&mut fs::File::open(e.path())?, &mut std::io::sink())?;
        }
    }
    Ok(n)
}

/// Mounts `packed.archive` in `dir`, times how soon it answers, a walk of every name
/// and a read of every file against the same on the unpacked tree, checks the mounted
/// tree against `src`, and unmounts. A machine without FUSE skips the step, saying why.
pub fn run_mount(src: &Path, dir: &Path, packed: &Packed) -> anyhow::Result<()> {
    println!(
        "3. mount: ferry's archive as a read-only filesystem (FUSE), against the unpacked tree\n"
    );
    let mnt = dir.join("mnt");
    fs::create_dir_all(&mnt)?;
    let usable = match timed(|| run(ferry()?.arg("mount").arg(&packed.archive).arg(&mnt))) {
        Ok(t) => t,
        Err(e) => {
            println!("   skipped: the mount failed ({e:#})\n");
            return Ok(());
        }
    };
    let mounted = Mounted(mnt.clone());
    println!(
        "   `ferry mount` returned with the mount answering after {:.0} ms",
        usable * 1e3
    );
    let _ = std::io::stdout().flush();
    let mut rows = Vec::new();
    for (what, read) in [("walk every name", false), ("read every file", true)] {
        let native = timed(|| walk(&packed.unpacked, read).map(drop))?;
        let through = timed(|| walk(&mnt, read).map(drop))?;
        rows.push((what, native, through));
    }
    println!(
        "{:>16} {:>10} {:>10} {:>12}",
        "", "unpacked", "mounted", "mount/tree"
    );
    for (what, native, through) in rows {
        println!(
            "{what:>16} {native:>9.3}s {through:>9.3}s {:>11.1}x",
            through / native
        );
    }
    let checked = sample::check_identical(src, &mnt).context("the mounted tree differs")?;
    let one = fs::read(mnt.join(&packed.member))?;
    println!(
        "   checked: the mounted tree is identical to the source ({checked} files; {} is {} bytes)",
        packed.member,
        one.len()
    );
    drop(mounted);
    println!("   unmounted with `ferry umount`\n");
    Ok(())
}
