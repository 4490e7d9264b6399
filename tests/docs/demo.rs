//! `ferry demo` (the README's first command): on a small sample in a directory the
//! test gives it, every step runs, every check it prints passes, and it leaves
//! nothing behind.

use crate::common::skip;
use crate::ferry;

#[test]
fn the_demo_runs_every_step_checks_its_results_and_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let where_ = dir.path().to_str().unwrap();
    let r = ferry(&["demo", "--files", "40", "--dir", where_]);
    r.assert_ok();
    for step in [
        "1. copy",
        "checked: ferry's copy is identical to the source",
        "2. archives",
        "checked: ferry's unpack is identical to the source",
        "3. mount",
    ] {
        assert!(
            r.stdout.contains(step),
            "no {step:?} in the demo's output: {r}"
        );
    }
    // GNU tar is on every machine the tests run on; the demo leaves it out only
    // where it is missing.
    assert!(
        r.stdout.contains("checked: GNU tar reads ferry's archive"),
        "GNU tar's check missing: {r}"
    );
    if r.stdout.contains("skipped: the mount failed") {
        skip(&format!("the demo could not mount (no FUSE here?): {r}"));
    } else {
        assert!(
            r.stdout
                .contains("checked: the mounted tree is identical to the source"),
            "the mount step did not check its tree: {r}"
        );
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "the demo left {left:?} behind");
}
