//! Helpers: reading a whole archive, running the real tar programs, rebuilding sparse
//! files.

use std::path::Path;
use std::process::Command;

use ferry_archive::tar::{Reader, TarEntry, TarError};

/// Every entry of `archive` with its stored data, or the first error.
pub fn read_all(archive: &[u8]) -> Result<Vec<(TarEntry, Vec<u8>)>, TarError> {
    let mut reader = Reader::new(archive);
    let mut out = Vec::new();
    while let Some(entry) = reader.next_entry()? {
        let mut data = Vec::new();
        let mut buf = [0u8; 7919]; // odd size: reads that do not line up with blocks
        loop {
            let n = reader.read_data(&mut buf)?;
            if n == 0 {
                break;
            }
            data.extend_from_slice(&buf[..n]);
        }
        out.push((entry, data));
    }
    Ok(out)
}

/// The error reading `archive` ends in; panics if it reads without error.
pub fn read_err(archive: &[u8]) -> TarError {
    match read_all(archive) {
        Ok(entries) => panic!("expected an error, read {} entries", entries.len()),
        Err(e) => e,
    }
}

/// Whether `tool` can be run; if not, says that the calling test is skipped.
pub fn have(tool: &str) -> bool {
    let ok = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        ferry_testkit::skip(&format!(
            "{tool} is not installed (apt-get install tar libarchive-tools)"
        ));
    }
    ok
}

/// Runs `tool args...` in `dir` and returns its stdout; panics with its stderr on failure.
pub fn run(dir: &Path, tool: &str, args: &[&str]) -> Vec<u8> {
    let out = Command::new(tool)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    assert!(
        out.status.success(),
        "{tool} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Makes an archive with `tool args... -f - <names>` run in `dir`, returns its bytes.
pub fn make_archive(dir: &Path, tool: &str, args: &[&str]) -> Vec<u8> {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["-cf", "-", "."]);
    run(dir, tool, &all)
}

/// The logical content of a file entry from its stored data and sparse map.
pub fn logical(entry: &TarEntry, stored: &[u8]) -> Vec<u8> {
    let Some(runs) = &entry.sparse else {
        return stored.to_vec();
    };
    let mut file = vec![0u8; entry.size as usize];
    let mut pos = 0usize;
    for &(offset, len) in runs {
        let (offset, len) = (offset as usize, len as usize);
        file[offset..offset + len].copy_from_slice(&stored[pos..pos + len]);
        pos += len;
    }
    assert_eq!(pos, stored.len(), "runs do not cover the stored data");
    file
}
