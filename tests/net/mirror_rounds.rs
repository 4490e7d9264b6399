//! The differential rounds of tests/copy/mirror_rounds.rs over ssh, both ways: after
//! each round of random changes, `ferry copy -n -i --delete` over ssh writes nothing
//! at either end and lists exactly what differs, `ferry copy -i --delete` leaves DST
//! equal to SRC in every respect and to `rsync -aHAX --delete`'s copy in every respect
//! but atimes, and a dry run after it lists nothing.

use crate::common::mount::{mount_image, Mounted};
use crate::common::rounds_check::{run_rounds, Plan};
use crate::common::run::{run, Run, FERRY};
use crate::common::{build::with_slash, is_root, skip};
use crate::sshd::Sshd;
use std::path::Path;
use std::process::Command;

/// `ferry copy -e RSH --remote-ferry FERRY ARGS SRC DST`, its `-i` lines on stdout.
fn over_ssh(sshd: &Sshd, src: &str, dst: &str, args: &[&str]) -> Run {
    let mut cmd = Command::new("timeout");
    cmd.args([
        "-k",
        "5",
        "300",
        FERRY,
        "copy",
        "-e",
        &sshd.rsh(),
        "--remote-ferry",
        FERRY,
    ])
    .args(args)
    .args([src, dst]);
    run(cmd)
}

fn remote(sshd: &Sshd, p: &Path) -> String {
    format!("{}/", sshd.remote(p))
}

fn local(p: &Path) -> String {
    with_slash(p).to_string_lossy().into_owned()
}

/// An XFS to run on (root), or `None` after saying why the rounds run in the temp
/// directory instead.
fn filesystem() -> Option<Mounted> {
    mount_image(512 << 20, "mkfs.xfs", &["-q", "-m", "reflink=1"])
        .map_err(|e| skip(&format!("{e}: the rounds run in the temp directory")))
        .ok()
}

fn plan(seed: u64) -> Plan {
    Plan {
        seed,
        rounds: 6,
        changes: 25,
        checksum: false,
        owners: is_root(),
    }
}

#[test]
fn mirror_rounds_over_ssh_match_rsync_both_ways() {
    let Some(sshd) = Sshd::start() else { return };
    let fs = filesystem();
    let base = fs
        .as_ref()
        .map_or_else(std::env::temp_dir, |m| m.path().to_path_buf());
    let up = tempfile::tempdir_in(&base).expect("scratch");
    let mut upload = |src: &Path, dst: &Path, args: &[&str]| {
        over_ssh(&sshd, &local(src), &remote(&sshd, dst), args)
    };
    if run_rounds(up.path(), &plan(31), &mut upload).is_none() {
        return;
    }
    let down = tempfile::tempdir_in(&base).expect("scratch");
    let mut download = |src: &Path, dst: &Path, args: &[&str]| {
        over_ssh(&sshd, &remote(&sshd, src), &local(dst), args)
    };
    run_rounds(down.path(), &plan(32), &mut download);
}
