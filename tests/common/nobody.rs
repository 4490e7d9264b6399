//! Running ferry as an unprivileged user. Root reads and writes everything, so as root
//! ferry runs as `nobody` (65534) through `setpriv`, on trees nobody may use.

use super::build::{chmod, chown, mkdirs};
use super::fdwalk;
use super::run::{run, Run, FERRY};
use super::{is_root, scratch, skip, Scratch};
use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const NOBODY: u32 = 65534;

/// Gives the whole tree at `root` (and `root`) to nobody.
pub fn give_to_nobody(root: &Path) {
    let fd = fdwalk::open_dir(root);
    fdwalk::walk_post_order(fd.as_fd(), b"", &mut |dir, name, _| {
        chown(&fdwalk::at(dir, name), NOBODY, NOBODY)
    });
    chown(root, NOBODY, NOBODY);
}

/// A scratch whose DST nobody may create: the temp dir is world-searchable and DST's
/// parent belongs to nobody. Returns it and the DST path to use.
pub fn scratch_for_nobody() -> (Scratch, PathBuf) {
    let s = scratch();
    chmod(s.tmp.path(), 0o755);
    let out = s.tmp.path().join("out");
    mkdirs(&out);
    chown(&out, NOBODY, NOBODY);
    let dst = out.join("dst");
    (s, dst)
}

/// Runs `ferry ARGS..` as nobody when root (as the caller otherwise). `None` when it
/// cannot be done here (the reason is printed).
pub fn ferry_unprivileged<S: AsRef<OsStr>>(args: &[S]) -> Option<Run> {
    let mut cmd = Command::new(FERRY);
    cmd.args(args);
    as_nobody(cmd).map(run)
}

/// `cmd` run as nobody when root (through `setpriv`, its arguments and environment
/// kept), as it is otherwise. `None` when it cannot be done here (the reason is
/// printed).
pub fn as_nobody(cmd: Command) -> Option<Command> {
    if !is_root() {
        return Some(cmd);
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        skip("setpriv (util-linux) is needed to run ferry as nobody");
        return None;
    }
    let ids = NOBODY.to_string();
    let mut out = Command::new("setpriv");
    out.args(["--reuid", &ids, "--regid", &ids, "--clear-groups", "--"])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => out.env(k, v),
            None => out.env_remove(k),
        };
    }
    Some(out)
}
