//! The demo's sample tree (the ZCM-DE folders of seed 000, its Table I) and the check
//! that a copy of it is identical.

use anyhow::{bail, Context};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The file sizes of the paper's folders: 512 B doubling up to 1 MiB.
const SIZES: [u64; 12] = [
    512,
    1 << 10,
    2 << 10,
    4 << 10,
    8 << 10,
    16 << 10,
    32 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
    512 << 10,
    1 << 20,
];
/// No folder holds more than this many bytes, so the demo stays under a minute.
const FOLDER_BYTES: u64 = 16 << 20;

/// One folder of the sample.
pub struct Folder {
    /// Its name below the sample's root.
    pub name: String,
    /// How many files it holds.
    pub files: usize,
}

fn folder_name(size: u64) -> String {
    if size >= 1 << 20 {
        format!("{}MiB", size >> 20)
    } else if size >= 1 << 10 {
        format!("{}KiB", size >> 10)
    } else {
        format!("{size}B")
    }
}

/// Makes the sample tree in `root`, at most `files` files a folder; returns its folders
/// in order, the mixed one last.
pub fn make(root: &Path, files: usize) -> anyhow::Result<Vec<Folder>> {
    // Seeded, so the sample is the same every run.
    let mut rng = fastrand::Rng::with_seed(0x9E37_79B9_7F4A_7C15);
    let mut buf = vec![0u8; 1 << 20];
    let mut folders = Vec::new();
    let mut write_folder = |name: String, sizes: &mut dyn Iterator<Item = u64>| {
        let dir = root.join(&name);
        fs::create_dir_all(&dir)?;
        let mut n = 0;
        for size in sizes {
            let data = &mut buf[..size as usize];
            rng.fill(data);
            fs::write(dir.join(format!("f{n:05}")), data)?;
            n += 1;
        }
        folders.push(Folder { name, files: n });
        anyhow::Ok(())
    };
    for size in SIZES {
        let n = (files as u64).min((FOLDER_BYTES / size).max(32)) as usize;
        write_folder(folder_name(size), &mut std::iter::repeat_n(size, n))?;
    }
    let mut pick = fastrand::Rng::with_seed(7);
    let mix = files.min(500);
    write_folder(
        "mix".into(),
        &mut (0..mix).map(|_| SIZES[pick.usize(..SIZES.len())]),
    )?;
    Ok(folders)
}

/// Checks that every file and directory of `a` is in `b` with the same bytes, mode and
/// mtime; returns how many files it compared.
pub fn check_identical(a: &Path, b: &Path) -> anyhow::Result<usize> {
    let mut n = 0;
    for e in fs::read_dir(a)? {
        let e = e?;
        let other = b.join(e.file_name());
        let (ma, mb) = (
            e.metadata()?,
            fs::symlink_metadata(&other).with_context(|| format!("{} missing", other.display()))?,
        );
        if ma.mode() != mb.mode() || ma.mtime() != mb.mtime() || ma.mtime_nsec() != mb.mtime_nsec()
        {
            bail!("{}: metadata differs", other.display());
        }
        if ma.is_dir() {
            n += check_identical(&e.path(), &other)?;
        } else {
            if fs::read(e.path())? != fs::read(&other)? {
                bail!("{}: content differs", other.display());
            }
            n += 1;
        }
    }
    Ok(n)
}
