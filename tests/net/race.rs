//! A client's path is resolved beneath the served root when it is used, never by a
//! name checked earlier: a component swapped between a directory and a symlink
//! leading out of the root, by a local thread or by another client, while uploads
//! and downloads go through it, never makes one write or read outside the root.
//! Bounded: so many rounds, or so long, whichever comes first.

use crate::common::build::*;
use crate::common::scratch;
use crate::copy::s;
use crate::daemon::Daemon;
use rustix::fs::{renameat_with, RenameFlags, CWD};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

const ROUNDS: usize = 60;
const LIMIT: Duration = Duration::from_secs(60);

/// What `outside` holds, by name.
fn names_in(outside: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(outside)
        .expect("read outside")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Swaps `root/sw` (first a directory) with `root/sw.alt` (a symlink to `outside`),
/// each time in one step, until `stop`; counts the swaps.
fn swap_until(root: &Path, stop: &AtomicBool, swaps: &AtomicU64) {
    let (a, b) = (root.join("sw"), root.join("sw.alt"));
    while !stop.load(Relaxed) {
        renameat_with(CWD, &a, CWD, &b, RenameFlags::EXCHANGE).expect("exchange");
        swaps.fetch_add(1, Relaxed);
        std::thread::yield_now();
    }
}

struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Relaxed);
    }
}

/// Runs `round` for each round while a thread swaps `root/sw` between a directory
/// holding `inside/f` and a symlink to `outside`.
fn while_swapping(root: &Path, outside: &Path, mut round: impl FnMut(usize)) {
    mkdirs(&root.join("sw"));
    write(&root.join("sw/f"), b"inside");
    symlink(outside, &root.join("sw.alt"));
    let (stop, swaps) = (AtomicBool::new(false), AtomicU64::new(0));
    let start = Instant::now();
    std::thread::scope(|sc| {
        sc.spawn(|| swap_until(root, &stop, &swaps));
        // Stops the swapper however the rounds end (a failed one too).
        let _stop = StopOnDrop(&stop);
        for i in 0..ROUNDS {
            if start.elapsed() > LIMIT {
                break;
            }
            round(i);
        }
    });
    assert!(swaps.load(Relaxed) > 0, "the swapper never ran");
}

#[test]
fn uploads_through_a_component_swapped_with_a_symlink_stay_in_the_root() {
    let sc = scratch();
    mkdirs(&sc.src.join("d"));
    write(&sc.src.join("a"), b"client data");
    write(&sc.src.join("d/b"), b"more client data");
    let d = Daemon::start(&["--insecure"]);
    let outside = sc.tmp.path().join("outside");
    mkdirs(&outside);
    let mut landed = 0;
    while_swapping(&d.root, &outside, |i| {
        let r = d.copy(s(&sc.src), &d.url(&format!("sw/u{i}")), &["--insecure"]);
        landed += usize::from(r.status == 0);
        // Refused (a symlink on the way), or landed: whichever, only inside.
        assert!(r.status == 0 || r.status == 2, "{r}");
    });
    assert_eq!(
        names_in(&outside),
        Vec::<String>::new(),
        "written outside the root"
    );
    eprintln!("{landed} of the uploads landed (beneath the root)");
}

#[test]
fn downloads_through_a_component_swapped_with_a_symlink_read_nothing_outside() {
    let sc = scratch();
    let d = Daemon::start(&["--insecure"]);
    let outside = sc.tmp.path().join("outside");
    mkdirs(&outside);
    write(&outside.join("f"), b"SECRET");
    let mut got = 0;
    while_swapping(&d.root, &outside, |i| {
        // The directory, and the single file in it.
        for (from, to) in [("sw", format!("back{i}")), ("sw/f", format!("one{i}"))] {
            let back = sc.tmp.path().join(to);
            let r = d.copy(&d.url(from), s(&back), &["--insecure"]);
            assert!(r.status == 0 || r.stderr.contains("refused"), "{r}");
            for f in [back.join("f"), back.clone()] {
                if let Ok(bytes) = std::fs::read(&f) {
                    assert_ne!(bytes, b"SECRET", "{} read outside the root", f.display());
                    got += 1;
                }
            }
        }
    });
    eprintln!("{got} files downloaded (from beneath the root)");
}

/// Two clients: one uploads a symlink out of the root at `p/sw{i}` while the other
/// uploads below `p/sw{i}`, started together.
#[test]
fn a_client_uploading_a_symlink_cannot_redirect_another_clients_upload() {
    let sc = scratch();
    let outside = sc.tmp.path().join("outside");
    mkdirs(&outside);
    let d = Daemon::start(&["--insecure"]);
    mkdirs(&d.root.join("p"));
    write(&sc.src.join("f"), b"second client");
    let start = Instant::now();
    for i in 0..ROUNDS {
        if start.elapsed() > LIMIT {
            break;
        }
        let links = sc.tmp.path().join(format!("links{i}"));
        mkdirs(&links);
        symlink(&outside, &links.join(format!("sw{i}")));
        let mut first = d.copy_command(s(&links), &d.url("p"), &["--insecure"]);
        let mut second = d.copy_command(s(&sc.src), &d.url(&format!("p/sw{i}/y")), &["--insecure"]);
        let quiet = |c: &mut std::process::Command| {
            c.stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
        };
        quiet(&mut first);
        quiet(&mut second);
        let (mut a, mut b) = (
            first.spawn().expect("spawn"),
            second.spawn().expect("spawn"),
        );
        let _ = (a.wait(), b.wait());
    }
    assert_eq!(
        names_in(&outside),
        Vec::<String>::new(),
        "written outside the root"
    );
}
