//! Pseudo-files, whose size does not say what they hold (issue 21): `/proc` files say
//! 0 bytes, `/sys` files 4096, whatever they give. Each is copied (and packed) as what
//! it gives read to its end, as `cp -a` copies it; they used to come out empty, or as
//! one "shrank while being read" error each.

use crate::common::run::{copy_ok, run, FERRY};
use crate::common::{scratch, skip};
use std::path::Path;
use std::process::Command;

/// A `/sys` directory of small text files readable by anyone, which hold the same
/// from one read to the next.
const SYS_DIR: &str = "/sys/kernel/mm/transparent_hugepage";

/// Lines of `/proc/cpuinfo` that hold the same from one read to the next (the clock
/// rate changes).
fn steady(text: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(text)
        .lines()
        .filter(|l| !l.starts_with("cpu MHz"))
        .map(str::to_owned)
        .collect()
}

/// Runs a peer program, which must succeed; returns what it printed.
fn peer(program: &str, args: &[&std::ffi::OsStr]) -> Vec<u8> {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn a_proc_file_copies_and_packs_as_what_it_gives() {
    let cpuinfo = Path::new("/proc/cpuinfo");
    let s = scratch();
    let copied = s.tmp.path().join("cpuinfo");
    let r = copy_ok(cpuinfo, &copied, &["--json"]);
    let want = std::fs::read(cpuinfo).expect("read /proc/cpuinfo");
    assert!(!want.is_empty(), "/proc/cpuinfo gives nothing here");
    let got = std::fs::read(&copied).expect("read the copy");
    assert_eq!(steady(&got), steady(&want), "{r}");
    r.json()
        .assert_counts(&[("files", 1), ("bytes", got.len() as u64)]);
    // Packed, its member holds the same, and GNU tar reads it.
    let archive = s.tmp.path().join("cpuinfo.far");
    let packed = run({
        let mut c = Command::new(FERRY);
        c.arg("pack").arg(cpuinfo).arg(&archive);
        c
    });
    packed.assert_ok();
    let out = peer(
        "tar",
        &["-xOf".as_ref(), archive.as_os_str(), "cpuinfo".as_ref()],
    );
    assert_eq!(steady(&out), steady(&want));
}

#[test]
fn a_sys_directory_copies_as_cp_copies_it() {
    let sys = Path::new(SYS_DIR);
    if !sys.is_dir() {
        skip(&format!(
            "{SYS_DIR} is not here (a kernel without transparent hugepages)"
        ));
        return;
    }
    let s = scratch();
    let r = copy_ok(sys, &s.dst, &["--json"]);
    let theirs = s.tmp.path().join("cp");
    peer("cp", &["-a".as_ref(), sys.as_os_str(), theirs.as_os_str()]);
    // diff -r fails, saying how, where the trees differ.
    peer(
        "diff",
        &["-r".as_ref(), s.dst.as_os_str(), theirs.as_os_str()],
    );
    let enabled = std::fs::read(s.dst.join("enabled")).expect("read the copy of enabled");
    assert_eq!(
        enabled,
        std::fs::read(sys.join("enabled")).expect("read enabled")
    );
    assert!(r.json().count("files") > 0, "{r}");
}
