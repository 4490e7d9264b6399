//! A file that keeps changing while a command reads it: a thread rewrites a block of it
//! and appends to it, over and over, until the command ends (issue 32: `pack` and
//! `copy` must tell "file changed as we read it", as GNU tar does).

use super::run::Run;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// Bytes of the file made to change: big enough that reading it takes a while.
pub const SIZE: usize = 64 << 20;

/// Writes `path` (`SIZE` bytes) and runs `command` while a thread changes it; returns
/// what the command did.
pub fn while_changing(path: &Path, command: impl FnOnce() -> Run) -> Run {
    std::fs::write(path, vec![0x5a; SIZE]).expect("write the file to change");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open the file to change");
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0u64;
            while !stop.load(Relaxed) {
                let block = [i as u8; 4096];
                let at = (i * 7919 % (SIZE as u64 / 4096)) * 4096;
                file.write_all_at(&block, at).expect("rewrite a block");
                if i % 8 == 0 {
                    let end = file.metadata().expect("stat").len();
                    file.write_all_at(&block, end).expect("append");
                }
                i += 1;
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        });
        let r = command();
        stop.store(true, Relaxed);
        r
    })
}

/// Checks that `r` told the one file named `name` changed while it was read, and
/// exited with status 1 (as GNU tar does).
pub fn assert_told_changed(r: &Run, name: &str) {
    assert_eq!(r.status, 1, "{r}");
    let errors = r.errors();
    assert_eq!(errors.len(), 1, "{r}");
    assert!(
        errors[0].contains(name) && errors[0].contains("file changed as we read it"),
        "{r}"
    );
}
