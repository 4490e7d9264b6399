//! The demo's second step: the sample packed, unpacked, listed and one member read, by
//! ferry and by GNU tar, side by side.

use super::sample;
use super::scratch::{ferry, installed, output, run, timed};
use anyhow::{bail, Context};
use std::fs;
use std::path::Path;
use std::process::Command;

/// What the archive step leaves for the next one.
pub struct Packed {
    /// ferry's archive of the sample.
    pub archive: std::path::PathBuf,
    /// The sample as ferry unpacked it.
    pub unpacked: std::path::PathBuf,
    /// A member to read (a path below the sample's root).
    pub member: String,
}

/// Packs `src` into `dir` with ferry and GNU tar, unpacks each archive with its own
/// tool, lists both and reads `member` from both; prints the times and checks ferry's
/// results (and that GNU tar reads ferry's archive).
pub fn run_archives(src: &Path, dir: &Path, clones: bool, member: &str) -> anyhow::Result<Packed> {
    let how = if clones {
        "on a fresh XFS, where ferry clones file data in and out"
    } else {
        "file data copied (cloning needs XFS or btrfs, made when run as root)"
    };
    println!("2. archives: the whole sample packed, unpacked, listed, one member read; {how}\n");
    let far = dir.join("sample.far");
    let tar = dir.join("sample.tar");
    let (u_ferry, u_tar) = (dir.join("unpacked-ferry"), dir.join("unpacked-tar"));
    let with_tar = installed("tar");
    let ferry_times = [
        timed(|| run(ferry()?.args(["pack", "--no-progress"]).arg(src).arg(&far)))?,
        timed(|| {
            run(ferry()?
                .args(["unpack", "--no-progress"])
                .arg(&far)
                .arg(&u_ferry))
        })?,
        timed(|| run(ferry()?.arg("ls").arg(&far)))?,
        timed(|| run(ferry()?.arg("cat").arg(&far).arg(member)))?,
    ];
    let tar_times = if with_tar {
        fs::create_dir_all(&u_tar)?;
        let tar_member = format!("./{member}");
        Some([
            timed(|| {
                run(Command::new("tar")
                    .arg("-C")
                    .arg(src)
                    .arg("-cf")
                    .arg(&tar)
                    .arg("."))
            })?,
            timed(|| {
                run(Command::new("tar")
                    .arg("-C")
                    .arg(&u_tar)
                    .arg("-xf")
                    .arg(&tar))
            })?,
            timed(|| run(Command::new("tar").arg("-tf").arg(&tar)))?,
            timed(|| run(Command::new("tar").arg("-xOf").arg(&tar).arg(&tar_member)))?,
        ])
    } else {
        None
    };
    println!(
        "{:>16} {:>10} {:>10} {:>12}",
        "", "ferry", "GNU tar", "tar / ferry"
    );
    let ops = ["pack", "unpack", "list all", "read one member"];
    for (i, op) in ops.iter().enumerate() {
        let f = ferry_times[i];
        match tar_times {
            Some(t) => println!("{op:>16} {:>9.3}s {:>9.3}s {:>11.1}x", f, t[i], t[i] / f),
            None => println!("{op:>16} {f:>9.3}s {:>10} {:>12}", "-", "-"),
        }
    }
    let checked =
        sample::check_identical(src, &u_ferry).context("ferry's unpacked tree is not identical")?;
    println!("   checked: ferry's unpack is identical to the source ({checked} files)");
    if with_tar {
        let listed = |out: Vec<u8>| out.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count();
        let by_tar = listed(output(Command::new("tar").arg("-tf").arg(&far))?);
        let by_ferry = listed(output(ferry()?.arg("ls").arg(&far))?);
        if by_tar != by_ferry {
            bail!("GNU tar lists {by_tar} members of ferry's archive, ferry {by_ferry}");
        }
        println!("   checked: GNU tar reads ferry's archive ({by_tar} members)");
    }
    println!();
    Ok(Packed {
        archive: far,
        unpacked: u_ferry,
        member: member.to_string(),
    })
}
