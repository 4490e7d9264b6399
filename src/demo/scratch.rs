//! Where the demo works: fresh loop-mounted filesystems when it can make them (as root),
//! and running and timing the commands it compares.

use anyhow::{bail, Context};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// A fresh filesystem in an image file, loop-mounted; unmounted when dropped. File
/// creation on a big, long-lived filesystem is slow and erratic; a fresh one shows what
/// the tools themselves cost.
pub struct LoopMount {
    /// Where it is mounted.
    pub dir: PathBuf,
    /// The filesystem's type (`ext4`, `xfs`).
    pub fs: &'static str,
}

impl LoopMount {
    /// Makes and mounts a fresh `fs` of 4 GiB in `tmp/NAME`, when running as root and
    /// `mkfs.FS` is installed; None otherwise.
    pub fn try_new(tmp: &Path, name: &str, fs: &'static str) -> Option<LoopMount> {
        if !rustix::process::geteuid().is_root() {
            return None;
        }
        let img = tmp.join(format!("{name}.img"));
        let dir = tmp.join(name);
        let force = if fs == "xfs" { "-f" } else { "-F" };
        let made = fs::File::create(&img)
            .and_then(|f| f.set_len(4 << 30))
            .is_ok()
            && fs::create_dir(&dir).is_ok()
            && succeeds(
                Command::new(format!("mkfs.{fs}"))
                    .args(["-q", force])
                    .arg(&img),
            )
            && succeeds(
                Command::new("mount")
                    .args(["-o", "loop"])
                    .arg(&img)
                    .arg(&dir),
            );
        made.then_some(LoopMount { dir, fs })
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        if !succeeds(Command::new("umount").arg(&self.dir)) {
            let _ = succeeds(Command::new("umount").arg("-l").arg(&self.dir));
        }
    }
}

/// Runs `cmd` with its output discarded; whether it ran and succeeded.
pub fn succeeds(cmd: &mut Command) -> bool {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether `program` can be run (it is on PATH).
pub fn installed(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Times `f` after writing back what earlier steps left dirty, so no tool pays for
/// another's writeback.
pub fn timed(f: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<f64> {
    rustix::fs::sync();
    let t = Instant::now();
    f()?;
    Ok(t.elapsed().as_secs_f64())
}

/// Runs `cmd` to its end, ignoring its standard output; an error with its standard
/// error if it fails.
pub fn run(cmd: &mut Command) -> anyhow::Result<()> {
    output(cmd).map(drop)
}

/// Runs `cmd` to its end and returns its standard output; an error if it fails.
pub fn output(cmd: &mut Command) -> anyhow::Result<Vec<u8>> {
    let out = cmd
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("run {:?}", cmd.get_program()))?;
    if !out.status.success() {
        bail!(
            "{:?} failed: {}",
            cmd.get_program(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

/// The ferry binary running this demo, to time its commands as a user runs them.
pub fn ferry() -> anyhow::Result<Command> {
    Ok(Command::new(
        std::env::current_exe().context("find the ferry binary")?,
    ))
}
