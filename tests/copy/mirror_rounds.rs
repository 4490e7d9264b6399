//! `ferry copy --delete` against `rsync -aHAX --delete`, by random rounds of changes
//! (tests/common/rounds.rs makes them, tests/common/rounds_check.rs checks each
//! round): for several seeds, a tree of every kind is changed round after round, and
//! after each round a dry run must write nothing and list exactly what differs, the
//! mirror must make DST_F equal to SRC in every respect and to rsync's DST_R in every
//! respect but atimes (rsync's known differences apart), and a dry run after it must
//! list nothing.
//!
//! On a loop-mounted XFS (clones) for the plain rounds and an ext4 for the `-c` rounds
//! (which also rewrite files keeping size and mtime, a change only a comparison of
//! content sees; the plain rounds leave those out, as neither tool looks for them
//! without `-c`). Without root the rounds run in the temp directory without owner
//! changes, and say so (a failure under FERRY_TEST_NO_SKIP=1).
//!
//! `FERRY_TEST_ROUND_SEEDS=5,6,7` runs other seeds, `FERRY_TEST_ROUNDS=N` N rounds a
//! seed: for a longer search than CI's. `FERRY_TEST_ROUNDS_DIR=DIR` runs them in DIR
//! (not on a scratch filesystem) and keeps the trees, to look at a failure.

use crate::common::mount::{mount_image, Mounted};
use crate::common::rounds_check::{local_ferry, run_rounds, Plan};
use crate::common::rounds_known as known;
use crate::common::{is_root, skip};
use std::time::Instant;

/// A scratch filesystem made by `mkfs` (root), or `None` after saying why the rounds
/// run in the temp directory instead.
fn filesystem(mkfs: &str, args: &[&str]) -> Option<Mounted> {
    match mount_image(512 << 20, mkfs, args) {
        Ok(m) => Some(m),
        Err(e) => {
            skip(&format!(
                "{e}: the rounds run in the temp directory, without owner changes"
            ));
            None
        }
    }
}

/// Seeds and rounds a seed, from the environment if it says.
fn seeds_and_rounds(seeds: &[u64], rounds: usize) -> (Vec<u64>, usize) {
    let seeds = std::env::var("FERRY_TEST_ROUND_SEEDS")
        .ok()
        .map(|s| {
            s.split(',')
                .map(|n| n.trim().parse().expect("FERRY_TEST_ROUND_SEEDS: numbers"))
                .collect()
        })
        .unwrap_or_else(|| seeds.to_vec());
    let rounds = std::env::var("FERRY_TEST_ROUNDS")
        .ok()
        .map(|n| n.parse().expect("FERRY_TEST_ROUNDS: a number"))
        .unwrap_or(rounds);
    (seeds, rounds)
}

/// Runs the rounds of each seed in a scratch directory of its own on `fs` (or in the
/// temp directory), with the local mirror command.
fn rounds_on(fs: Option<&Mounted>, seeds: &[u64], rounds: usize, checksum: bool) {
    let (seeds, rounds) = seeds_and_rounds(seeds, rounds);
    // FERRY_TEST_ROUNDS_DIR: run there instead, and keep the trees (to look at a
    // failure).
    let keep = std::env::var_os("FERRY_TEST_ROUNDS_DIR").map(std::path::PathBuf::from);
    let base = match (&keep, fs) {
        (Some(dir), _) => dir.clone(),
        (None, Some(m)) => m.path().to_path_buf(),
        (None, None) => std::env::temp_dir(),
    };
    for seed in seeds {
        let tmp = tempfile::Builder::new()
            .prefix(&format!("rounds-{seed}-"))
            .disable_cleanup(keep.is_some())
            .tempdir_in(&base)
            .expect("scratch directory");
        let plan = Plan {
            seed,
            rounds,
            changes: 25,
            checksum,
            owners: is_root(),
        };
        let start = Instant::now();
        let Some(outcome) = run_rounds(tmp.path(), &plan, &mut local_ferry) else {
            return;
        };
        eprintln!(
            "{plan:?}: {} changes, {} lines listed, {:.1} s; known differences met:",
            outcome.changes,
            outcome.listed,
            start.elapsed().as_secs_f64(),
        );
        eprintln!("  changes: {:?}", outcome.kinds);
        for k in known::ALL {
            let met: Vec<&String> = outcome
                .known
                .iter()
                .filter(|line| line.contains(&format!(": {}: ", k.name)))
                .collect();
            if let Some(first) = met.first() {
                eprintln!("  {} x {:?} ({}), e.g. {first}", met.len(), k.name, k.why);
            }
        }
    }
}

#[test]
fn mirror_rounds_match_rsync() {
    let fs = filesystem("mkfs.xfs", &["-q", "-m", "reflink=1"]);
    rounds_on(fs.as_ref(), &[1, 2, 3, 4, 5, 6], 12, false);
}

#[test]
fn mirror_rounds_with_checksum_match_rsync() {
    let fs = filesystem("mkfs.ext4", &["-q"]);
    rounds_on(fs.as_ref(), &[11, 12, 13], 10, true);
}

/// The rounds fail a mirror that leaves out `--delete`, and one that writes in a dry
/// run (so they can fail at all).
#[test]
fn mirror_rounds_catch_a_broken_mirror() {
    let breakages: [(&str, &[&str]); 2] = [
        ("never deletes", &["--delete"]),
        ("writes in a dry run", &["-n"]),
    ];
    for (what, dropped) in breakages {
        let tmp = tempfile::tempdir().expect("scratch directory");
        let plan = Plan {
            seed: 5,
            rounds: 2,
            changes: 25,
            checksum: false,
            owners: false,
        };
        let mut broken = |src: &std::path::Path, dst: &std::path::Path, args: &[&str]| {
            let kept: Vec<&str> = args
                .iter()
                .copied()
                .filter(|a| !dropped.contains(a))
                .collect();
            local_ferry(src, dst, &kept)
        };
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_rounds(tmp.path(), &plan, &mut broken)
        }));
        match ran {
            Ok(None) => return, // no rsync: said why
            Ok(Some(_)) => panic!("the rounds passed a mirror that {what}"),
            Err(_) => {}
        }
    }
}
