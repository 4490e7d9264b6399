//! The walker's own tests: sharing small directories, panics in a worker.

use super::*;
use std::sync::mpsc;
use std::time::Duration;

/// A sink that panics at the file named `boom`.
struct Panicky;

impl TreeSink for Panicky {
    type Dir = ();
    fn root(&self, _: &Entry) -> Result<()> {
        Ok(())
    }
    fn dir(&self, _: &(), _: &Entry) -> Result<()> {
        Ok(())
    }
    fn leaf(&self, _: &(), entry: &Entry, _: Option<FileData<'_>>) -> Result<()> {
        assert!(entry.path.file_name() != b"boom", "a sink bug");
        Ok(())
    }
}

/// A sink that takes a millisecond a leaf and notes which threads pushed leaves.
#[derive(Default)]
struct SlowLeaves(Mutex<std::collections::HashSet<std::thread::ThreadId>>);

impl TreeSink for SlowLeaves {
    type Dir = ();
    fn root(&self, _: &Entry) -> Result<()> {
        Ok(())
    }
    fn dir(&self, _: &(), _: &Entry) -> Result<()> {
        Ok(())
    }
    fn leaf(&self, _: &(), _: &Entry, _: Option<FileData<'_>>) -> Result<()> {
        std::thread::sleep(Duration::from_millis(1));
        let me = std::thread::current().id();
        self.0.lock().expect("lock").insert(me);
        Ok(())
    }
}

/// A directory of a few dozen files, with nothing else to walk, is shared among the
/// workers (a folder of large files is not copied by one alone); with one worker,
/// as pack walks, nothing changes.
#[test]
fn workers_with_nothing_to_do_share_a_small_directory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for f in 0..32 {
        std::fs::write(tmp.path().join(format!("f{f}")), b"x").expect("write");
    }
    for (threads, sharing) in [(4, true), (1, false)] {
        let sink = SlowLeaves::default();
        let cfg = WalkConfig {
            threads,
            ..WalkConfig::default()
        };
        walk(tmp.path(), &sink, &cfg, &crate::count::Silent).expect("walk");
        let pushed_by = sink.0.lock().expect("lock").len();
        assert_eq!(
            pushed_by > 1,
            sharing,
            "{threads} workers: {pushed_by} pushed leaves"
        );
    }
}

#[test]
fn a_panic_in_a_worker_reaches_the_caller_instead_of_hanging_the_walk() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for d in 0..20 {
        let dir = tmp.path().join(format!("d{d}"));
        std::fs::create_dir(&dir).expect("mkdir");
        for f in 0..50 {
            std::fs::write(dir.join(format!("f{f}")), b"x").expect("write");
        }
    }
    std::fs::write(tmp.path().join("d7").join("boom"), b"x").expect("write");
    let root = tmp.path().to_path_buf();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let cfg = WalkConfig {
            threads: 4,
            prefetch: 2,
            ..WalkConfig::default()
        };
        let walked =
            std::panic::catch_unwind(|| walk(&root, &Panicky, &cfg, &crate::count::Silent));
        let _ = tx.send(walked.is_err());
    });
    let panicked = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the walk hung after a worker panicked");
    assert!(panicked, "the worker's panic did not reach the caller");
}
