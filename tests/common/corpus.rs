//! The archive corpus (issue 33): one source tree with the odd things archives carry,
//! written at test time by every tar this machine has, in every format each writes.
//! Nothing is committed; [`write_all`] makes the archives in a scratch directory.
//!
//! The writers: GNU tar (`--format=v7|oldgnu|gnu|ustar|posix`, `--sparse` in the old
//! GNU form and as pax `--sparse-version=0.0|0.1|1.0`, an incremental `-g` archive with
//! dumpdirs, the first volume of a multi-volume `-M` archive), bsdtar
//! (`--format=ustar|pax|gnutar|v7`), Python's tarfile (USTAR, GNU, PAX, writing one
//! member with owner ids that are not this machine's for its names and a symlink whose
//! header says 0755), Debian's `pax` (`-x ustar|tar`) and `busybox tar`; and GNU tar
//! given the files alone (no directory members: every directory is made by the
//! extraction, the mount shows it as `mkdir` makes it). A writer that
//! cannot store a member (a long name in v7 or ustar) leaves it out and goes on, as
//! each of them does; the extractions compared are of the same archive, so they miss
//! the same members.

use super::build::{chmod, chown, device, fifo, hardlink, mkdirs, set_xattr, sparse_file};
use super::build::{stamp_times, symlink, write};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One archive of the corpus.
pub struct Archive {
    /// Its name in the corpus (`tool-format[-variant]`), as the table of known
    /// differences names it.
    pub name: String,
    pub path: PathBuf,
    /// Directories (relative, bytes; empty: the root) the archive never names: an
    /// extraction makes them at the time it runs.
    pub made_dirs: Vec<Vec<u8>>,
}

/// The owner ids Debian gives `daemon` and `staff`: a member the source tree gives
/// them is written with those names.
pub const DAEMON: u32 = 1;
pub const STAFF: u32 = 50;

/// Makes the corpus's source tree at `root` (which exists): long names (over 100 and
/// over 255 bytes of path), names that are not UTF-8 or hold a newline, a symlink, a
/// hardlink, an empty directory, a fifo, a character device, a sparse file, an
/// executable, a setuid file, a file with an xattr, one with an ACL naming daemon,
/// files owned by named (daemon, staff) and unnamed ids; every time with nanoseconds. Needs root (devices, owners).
pub fn source_tree(root: &Path) {
    write(&root.join("plain"), b"plain file\n");
    write(&root.join("run.sh"), b"#!/bin/sh\necho corpus\n");
    chmod(&root.join("run.sh"), 0o755);
    write(&root.join("suid"), b"setuid\n");
    chmod(&root.join("suid"), 0o4755);
    write(&root.join("l".repeat(150)), b"a 150-byte name\n");
    let deep = root
        .join("d".repeat(70))
        .join("e".repeat(70))
        .join("f".repeat(70));
    mkdirs(&deep);
    write(&deep.join("g".repeat(60)), b"a 275-byte path\n");
    write(&root.join(OsStr::from_bytes(b"caf\xe9")), b"not UTF-8\n");
    write(&root.join("new\nline"), b"a newline in the name\n");
    symlink("plain", &root.join("link"));
    hardlink(&root.join("plain"), &root.join("hard"));
    mkdirs(&root.join("empty"));
    fifo(&root.join("fifo"));
    device(
        &root.join("null"),
        rustix::fs::FileType::CharacterDevice,
        1,
        3,
    );
    sparse_file(
        &root.join("sparse"),
        1 << 20,
        &[(256 << 10, b"data"), (768 << 10, b"more")],
    );
    write(&root.join("xattr"), b"has an xattr\n");
    set_xattr(&root.join("xattr"), "user.corpus", b"value");
    write(&root.join("acl"), b"readable by daemon\n");
    set_xattr(&root.join("acl"), "system.posix_acl_access", &ACL);
    write(&root.join("owned"), b"daemon:staff\n");
    chown(&root.join("owned"), DAEMON, STAFF);
    write(&root.join("numeric"), b"no names here\n");
    chown(&root.join("numeric"), 12345, 23456);
    stamp_times(root);
}

/// An access ACL in the kernel's form (version 2, then tag, permissions, id per entry):
/// owner rw, user daemon r, group r, mask r, others r.
const ACL: [u8; 44] = {
    let entries: [(u16, u16, u32); 5] = [
        (0x01, 6, u32::MAX),
        (0x02, 4, DAEMON),
        (0x04, 4, u32::MAX),
        (0x10, 4, u32::MAX),
        (0x20, 4, u32::MAX),
    ];
    let mut out = [0u8; 44];
    out[0] = 2;
    let mut i = 0;
    while i < entries.len() {
        let (tag, perm, id) = entries[i];
        let at = 4 + 8 * i;
        let (t, p, d) = (tag.to_le_bytes(), perm.to_le_bytes(), id.to_le_bytes());
        out[at] = t[0];
        out[at + 1] = t[1];
        out[at + 2] = p[0];
        out[at + 3] = p[1];
        out[at + 4] = d[0];
        out[at + 5] = d[1];
        out[at + 6] = d[2];
        out[at + 7] = d[3];
        i += 1;
    }
    out
};

/// Python's tarfile writing the tree at argv[1] to argv[2] in format argv[3]: member
/// by member (one it cannot store is left out, as the other writers do), with `owned`
/// given the ids a Mac has for daemon (501) and staff (20), and the symlink 0755.
const PYTHON: &str = r#"
import os, sys, tarfile
src, out, fmt = sys.argv[1], sys.argv[2], sys.argv[3]
form = {"ustar": tarfile.USTAR_FORMAT, "gnu": tarfile.GNU_FORMAT, "pax": tarfile.PAX_FORMAT}[fmt]
def fix(t):
    if t.name == "./owned":
        t.uid, t.gid = 501, 20
    if t.issym():
        t.mode = 0o755
    return t
with tarfile.open(out, "w", format=form) as tf:
    for top, dirs, files in os.walk(os.fsencode(src)):
        dirs.sort()
        for name in [b""] + sorted(dirs + files) if top == os.fsencode(src) else sorted(dirs + files):
            path = os.path.join(top, name) if name else top
            arc = os.fsdecode(b"." + path[len(os.fsencode(src)):])
            try:
                tf.add(os.fsdecode(path), arcname=arc, recursive=False, filter=fix)
            except ValueError as e:
                print("left out", repr(arc), e, file=sys.stderr)
"#;

/// The writers: (corpus name, program, arguments before the archive's path, arguments
/// after it). Each runs in the source tree and archives `.`; what else one writes
/// goes in `dir`.
fn writers(dir: &Path) -> Vec<(String, &'static str, Vec<String>, Vec<String>)> {
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let mut w = Vec::new();
    let xattrs = ["--xattrs", "--xattrs-include=*", "--acls"];
    for f in ["v7", "oldgnu", "gnu", "ustar", "posix"] {
        let mut args = vec![format!("--format={f}")];
        if f == "posix" {
            args.extend(s(&xattrs));
        }
        args.push("-cf".into());
        w.push((format!("gnutar-{f}"), "tar", args, s(&["."])));
    }
    for f in ["oldgnu", "gnu"] {
        let args = s(&[&format!("--format={f}"), "--sparse", "-cf"]);
        w.push((format!("gnutar-{f}-sparse"), "tar", args, s(&["."])));
    }
    for v in ["0.0", "0.1", "1.0"] {
        let mut args = s(&["--format=posix", "--sparse"]);
        args.push(format!("--sparse-version={v}"));
        args.extend(s(&xattrs));
        args.push("-cf".into());
        w.push((format!("gnutar-posix-sparse-{v}"), "tar", args, s(&["."])));
    }
    let snapshot = dir.join("snapshot.snar").to_string_lossy().into_owned();
    w.push((
        "gnutar-incremental".into(),
        "tar",
        s(&["--format=gnu", "-g", &snapshot, "-cf"]),
        s(&["."]),
    ));
    // The first of the volumes (each 256 KiB) is `gnutar-multivolume`, the second (it
    // opens with the continuation of a member) `gnutar-multivolume-2`; enough of them
    // that tar never asks for another.
    let mut volumes = Vec::new();
    for i in 2..=12 {
        let volume = dir.join(format!("gnutar-multivolume-{i}.tar"));
        volumes.extend(["-f".to_string(), volume.to_string_lossy().into_owned()]);
    }
    volumes.push(".".into());
    w.push((
        "gnutar-multivolume".into(),
        "tar",
        s(&["--format=gnu", "-M", "--tape-length=256", "-cf"]),
        volumes,
    ));
    for f in ["ustar", "pax", "gnutar", "v7"] {
        let args = vec![format!("--format={f}"), "-cf".into()];
        w.push((format!("bsdtar-{f}"), "bsdtar", args, s(&["."])));
    }
    for f in ["ustar", "gnu", "pax"] {
        let args = s(&["-c", PYTHON, "."]);
        w.push((format!("python-{f}"), "python3", args, vec![f.to_string()]));
    }
    for f in ["ustar", "tar"] {
        let args = s(&["-w", "-x", f, "-f"]);
        w.push((format!("pax-{f}"), "pax", args, s(&["."])));
    }
    w.push(("busybox".into(), "busybox", s(&["tar", "-cf"]), s(&["."])));
    // Files only, no directory members: every directory is made by the extraction.
    let list = dir.join("files-only.list").to_string_lossy().into_owned();
    let mut args = s(&["--format=posix", "--no-recursion", "--null", "-T", &list]);
    args.extend(s(&xattrs));
    args.push("-cf".into());
    w.push(("gnutar-files-only".into(), "tar", args, Vec::new()));
    w
}

/// The entries below `root` (relative, as `./a/b`), not directories and directories
/// apart, parents before children.
fn entries(root: &Path) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let (mut others, mut dirs) = (Vec::new(), Vec::new());
    let mut todo = vec![(root.to_path_buf(), b".".to_vec())];
    while let Some((at, rel)) = todo.pop() {
        let mut names: Vec<_> = std::fs::read_dir(&at)
            .unwrap_or_else(|e| panic!("list {}: {e}", at.display()))
            .map(|e| e.expect("a directory entry").file_name())
            .collect();
        names.sort();
        for name in names {
            let path = at.join(&name);
            let child = [&rel[..], b"/", name.as_bytes()].concat();
            match std::fs::symlink_metadata(&path).map(|m| m.is_dir()) {
                Ok(true) => {
                    dirs.push(child.clone());
                    todo.push((path, child));
                }
                _ => others.push(child),
            }
        }
    }
    (others, dirs)
}

/// Writes every archive of the corpus of the tree `src` into `dir`. A writer this
/// machine does not have is skipped with [`super::skip`] (a failure under
/// FERRY_TEST_NO_SKIP=1); one that fails to write anything fails the test.
pub fn write_all(src: &Path, dir: &Path) -> Vec<Archive> {
    mkdirs(dir);
    let (others, dirs) = entries(src);
    let list: Vec<u8> = others
        .iter()
        .flat_map(|p| p.iter().copied().chain([0]))
        .collect();
    std::fs::write(dir.join("files-only.list"), list).expect("write the list of files");
    let mut made = Vec::new();
    for (name, program, before, after) in writers(dir) {
        let path = dir.join(format!("{name}.tar"));
        let mut cmd = Command::new(program);
        cmd.current_dir(src)
            .args(&before)
            .arg(&path)
            .args(&after)
            .stdin(Stdio::null());
        let out = match cmd.output() {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                super::skip(&format!("no {program} for {name} (see scripts/test.sh)"));
                continue;
            }
            Err(e) => panic!("{name}: run {program}: {e}"),
        };
        // Writers exit 1 or 2 for the members they left out; the archive must be there.
        let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        assert!(
            len > 0 && out.status.code().is_some_and(|c| c <= 2),
            "{name}: {cmd:?} wrote no archive ({:?}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        if name == "gnutar-multivolume" {
            let name = format!("{name}-2");
            let path = dir.join(format!("{name}.tar"));
            assert!(path.exists(), "{name}: tar wrote no second volume");
            made.push(Archive {
                name,
                path,
                made_dirs: Vec::new(),
            });
        }
        let made_dirs = match name.as_str() {
            // Names without the leading `./`, as the comparer gives paths.
            "gnutar-files-only" => [Vec::new()]
                .into_iter()
                .chain(dirs.iter().map(|d| d[2..].to_vec()))
                .collect(),
            _ => Vec::new(),
        };
        made.push(Archive {
            name,
            path,
            made_dirs,
        });
    }
    made
}
