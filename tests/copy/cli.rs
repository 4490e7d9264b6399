//! The command line: what a successful run prints (nothing, unless `--json`), and
//! what ferry refuses with exit status 2 (usage errors, a missing SRC, a directory onto
//! a file, copying a directory into itself), leaving everything as it was.

use crate::common::build::*;
use crate::common::compare::assert_same_tree;
use crate::common::run::{copy, copy_ok, run, with_open_file_limit, FERRY};
use crate::common::{scratch, trees};
use std::path::Path;
use std::process::Command;

#[test]
fn a_successful_run_prints_nothing_when_not_on_a_terminal() {
    let s = scratch();
    trees::mixed(&s.src);
    let r = copy_ok(&s.src, &s.dst, &[]);
    assert!(
        r.stdout.is_empty() && r.stderr.is_empty(),
        "expected silence: {r}"
    );
}

/// Runs `ferry copy src dst` expecting exit status 2, an error line, and no DST.
fn refused(src: &Path, dst: &Path) {
    refused_with(src, dst, &[])
}

/// [`refused`], with `args` given.
fn refused_with(src: &Path, dst: &Path, args: &[&str]) {
    let existed = dst.exists();
    let r = copy(src, dst, args);
    r.assert_status(2);
    assert!(!r.errors().is_empty(), "no error line says why: {r}");
    assert_eq!(dst.exists(), existed, "{} was created: {r}", dst.display());
}

#[test]
fn refuses_to_copy_a_directory_into_itself() {
    let s = scratch();
    let reference = s.tmp.path().join("reference");
    trees::mixed(&s.src);
    trees::mixed(&reference);
    let alias = s.tmp.path().join("alias");
    symlink(&s.src, &alias);

    refused(&s.src, &s.src.join("inside"));
    refused(&s.src, &s.src.join("a/b/new/deeper"));
    refused(&s.src, &s.src);
    refused(&s.src, &s.src.join("a"));
    refused(&s.src, &alias.join("through_a_symlink"));
    // A symlink to SRC named with a trailing slash is followed (without one it is
    // copied as the link, as `cp -a` copies it: see single.rs).
    let followed = std::path::PathBuf::from(format!("{}/", alias.display()));
    refused(&followed, &s.src.join("a/x"));
    assert_same_tree(&reference, &s.src);
}

/// A DST inside SRC that the walk never enters is no copy into itself: the rules
/// exclude it (or a directory on the way), or with `-x` it is on another filesystem,
/// as a backup disk mounted below `/` is for `ferry copy -x / /mnt/backup/root`.
#[test]
fn a_dst_inside_src_the_walk_leaves_out_is_copied_into() {
    let s = scratch();
    trees::mixed(&s.src);
    let reference = s.tmp.path().join("reference");
    copy_ok(&s.src, &reference, &[]);
    for (dst, rules) in [
        ("backup/root", &["--exclude", "/backup"][..]),
        ("out/deep/er", &["--exclude", "out/"][..]),
    ] {
        let dst = s.src.join(dst);
        // Made first, SRC's own times put back: the copy is then of SRC as it was.
        mkdirs(dst.parent().unwrap());
        restore_times(&s.src, &std::fs::metadata(&reference).unwrap());
        for delete in [&[][..], &["--delete"][..]] {
            let args = [rules, delete].concat();
            copy_ok(&s.src, &dst, &args);
            assert_same_tree(&reference, &dst);
        }
        std::fs::remove_dir_all(
            s.src
                .join(dst.strip_prefix(&s.src).unwrap().iter().next().unwrap()),
        )
        .expect("remove the copy");
    }
    // Excluded by another name: still into itself.
    refused_with(&s.src, &s.src.join("inside"), &["--exclude", "/elsewhere"]);

    if crate::common::skip_unless_root() {
        return;
    }
    let mnt = s.src.join("mnt");
    mkdirs(&mnt);
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "ferry-test", mnt.to_str().unwrap()])
        .status()
        .expect("run mount");
    assert!(mounted.success(), "mount a tmpfs");
    let unmount = || {
        let _ = Command::new("umount").arg(&mnt).status();
    };
    let dst = mnt.join("root");
    let r = copy(&s.src, &dst, &["-x"]);
    let refused_without_x = copy(&s.src, &mnt.join("other"), &[]);
    unmount();
    r.assert_ok();
    refused_without_x.assert_status(2);
}

#[test]
fn usage_and_fatal_errors_exit_2() {
    let s = scratch();
    let missing = s.tmp.path().join("missing");
    refused(&missing, &s.dst);
    let dst_file = s.tmp.path().join("dst_file");
    write(&dst_file, b"a file where DST should be a directory");
    refused(&s.src, &dst_file);
    for args in [
        &["copy"][..],
        &["copy", "--reflink=sometimes", "a", "b"],
        &["copy", "--jobs", "many", "a", "b"],
        &["no-such-command"],
    ] {
        let mut cmd = Command::new(FERRY);
        cmd.args(args);
        run(cmd).assert_status(2);
    }
}

#[test]
fn a_closed_stderr_does_not_turn_an_error_into_a_crash() {
    // As in `ferry copy ... 2>&1 | head -1`: the reader of stderr is gone before ferry
    // reports. The error still ends the run with status 2, not a panic's 101.
    let s = scratch();
    let missing = s.tmp.path().join("missing");
    let (reader, writer) = rustix::pipe::pipe().expect("pipe");
    drop(reader);
    let status = Command::new(FERRY)
        .arg("copy")
        .arg(&missing)
        .arg(&s.dst)
        .stderr(std::process::Stdio::from(writer))
        .status()
        .expect("run ferry");
    assert_eq!(status.code(), Some(2));
}

#[test]
fn copies_within_a_low_limit_on_open_files() {
    // Each worker keeps its chain of source and destination directories open: under
    // `ulimit -n 64` (a hard limit ferry cannot raise) 16 workers, and even 4, ran out
    // of descriptors on a tree 10 deep. ferry now runs fewer workers and says so.
    let s = scratch();
    trees::deep(&s.src);
    let (src, dst) = (s.src.as_os_str(), s.dst.as_os_str());
    let r = run(with_open_file_limit(
        64,
        &["copy".as_ref(), "-j".as_ref(), "16".as_ref(), src, dst],
    ));
    r.assert_ok();
    assert!(
        r.stderr.contains("limit on open files is 64"),
        "{}",
        r.stderr
    );
    assert_same_tree(&s.src, &s.dst);
}

/// Runs `ferry copy SRC DST` on a terminal (a pseudo-terminal `script` makes), checks
/// the progress bar's units, and returns the last line it printed, the summary for a
/// person. `None` (after saying why) where `script` is missing.
fn last_line_on_a_terminal(src: &Path, dst: &Path) -> Option<String> {
    let command = format!("{FERRY} copy '{}' '{}'", src.display(), dst.display());
    let out = match Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            crate::common::skip(&format!("script (bsdutils) cannot run: {e}"));
            return None;
        }
    };
    assert!(out.status.success(), "{command}: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "\n");
    // The bar's rates are in the binary units of its byte counts (it showed MB/s).
    assert!(!text.contains("MB/s"), "decimal units in the bar: {text}");
    // After the escape sequences that clear the bar.
    let line = text
        .lines()
        .rev()
        .find_map(|l| l.find("ferry: ").map(|at| &l[at..]));
    Some(
        line.unwrap_or_else(|| panic!("no summary line: {text}"))
            .to_owned(),
    )
}

/// Issue 21: the summary line on a terminal counts symlinks and the other entries
/// beside files and directories, and `skipped` (`up to date`) counts every kind of
/// entry already there, not files only, as the README says.
#[test]
fn the_summary_on_a_terminal_counts_every_kind_and_up_to_date_every_entry() {
    let s = scratch();
    trees::mixed(&s.src);
    let expected = trees::count(&s.src);
    assert!(expected.others > 0, "the mixed tree has no symlink");
    let Some(line) = last_line_on_a_terminal(&s.src, &s.dst) else {
        return;
    };
    let counts = format!(
        "ferry: {} files, {} dirs, {} others (symlinks, fifos, devices), ",
        expected.files, expected.dirs, expected.others
    );
    assert!(
        line.starts_with(&counts),
        "{line:?} does not start {counts:?}"
    );
    let again = copy_ok(&s.src, &s.dst, &["--json"]);
    again.json().assert_counts(&[
        ("files", 0),
        ("others", 0),
        ("skipped", expected.files + expected.others),
    ]);
}

/// The mirroring flags are all taken by a copy over ssh (what they do there:
/// tests/net/mirror.rs): none is refused as one it cannot honour.
#[test]
fn mirroring_flags_are_taken_by_a_remote_copy() {
    let s = scratch();
    let remote = Path::new("nosuchhost.invalid:dst");
    // Taken (none is refused as one a remote copy cannot honour): the copy goes as far
    // as reaching the host, which does not exist.
    for flag in ["--delete", "--dry-run", "-v", "-i", "--max-delete=3"] {
        let r = copy(&s.src, remote, &[flag]);
        r.assert_status(2);
        assert!(
            !r.stderr.contains("not supported") && r.stderr.contains("nosuchhost.invalid"),
            "{flag}: {}",
            r.stderr
        );
    }
}
