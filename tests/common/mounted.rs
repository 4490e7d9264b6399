//! A FUSE mount a test made, unmounted when dropped (also when the test fails).

use crate::common::run::{Run, FERRY};
use ferry_mount::session::is_mounted;
use std::path::{Path, PathBuf};

/// Something mounted with `ferry mount` at `at`, unmounted when dropped.
pub struct Mounted {
    pub at: PathBuf,
}

impl Mounted {
    /// Makes `at` if missing and runs `mount` (a `ferry mount` onto it), which must
    /// succeed and leave a mount there.
    pub fn made_by(at: &Path, mount: impl FnOnce() -> Run) -> Mounted {
        std::fs::create_dir_all(at).expect("make the mountpoint");
        mount().assert_ok();
        assert!(
            is_mounted(at),
            "ferry mount returned before the mount was there"
        );
        Mounted {
            at: at.to_path_buf(),
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if is_mounted(&self.at) {
            let _ = std::process::Command::new(FERRY)
                .arg("umount")
                .arg(&self.at)
                .output();
        }
    }
}
