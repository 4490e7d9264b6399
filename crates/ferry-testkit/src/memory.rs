//! Memory that input could size: a `.tar.zst` in the seekable format whose one frame
//! holds GiBs of zeros (a few hundred KB on disk, made in a few MiB), and the peak RSS of
//! a command (GNU time's `%M`, the kernel's rusage of the child).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// A ustar header block for a regular file `name` (under 100 bytes) of `size` bytes.
fn header(name: &str, size: u64) -> [u8; 512] {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    h[100..108].copy_from_slice(b"0000644\0");
    h[108..116].copy_from_slice(b"0000000\0");
    h[116..124].copy_from_slice(b"0000000\0");
    h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    h[136..148].copy_from_slice(b"00000000000\0");
    h[156] = b'0';
    h[257..265].copy_from_slice(b"ustar\x0000");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    h
}

/// Where the data of `zeros` starts in the tar [`zeros_tar_zst`] writes.
pub const ZEROS_AT: u64 = 1536;

/// Writes at `path` a seekable `.tar.zst` (zstd frames and a seek table) of one frame
/// holding a tar of two members: `head`, the 5 bytes `hello`, then `zeros`, `zeros_len`
/// zero bytes (under 4 GiB in all: a frame's size is a `u32`). Encoded streaming.
pub fn zeros_tar_zst(path: &Path, zeros_len: u64) {
    let file = std::fs::File::create(path).expect("create");
    let mut enc = zstd::stream::write::Encoder::new(file, 3).expect("encoder");
    enc.include_checksum(true).expect("checksum");
    let mut total = 0u64;
    let mut put = |enc: &mut zstd::stream::write::Encoder<std::fs::File>, b: &[u8]| {
        enc.write_all(b).expect("write");
        total += b.len() as u64;
    };
    put(&mut enc, &header("head", 5));
    let mut hello = [0u8; 512];
    hello[..5].copy_from_slice(b"hello");
    put(&mut enc, &hello);
    put(&mut enc, &header("zeros", zeros_len));
    let zeros = vec![0u8; 1 << 20];
    let mut left = zeros_len.div_ceil(512) * 512;
    while left > 0 {
        let n = left.min(zeros.len() as u64) as usize;
        put(&mut enc, &zeros[..n]);
        left -= n as u64;
    }
    put(&mut enc, &[0u8; 1024]);
    let mut file = enc.finish().expect("finish");
    let compressed = file.metadata().expect("stat").len();
    // The seek table: a skippable frame with the one entry, then the footer.
    let mut t = Vec::new();
    t.extend(0x184D_2A5Eu32.to_le_bytes());
    t.extend(17u32.to_le_bytes());
    t.extend(u32::try_from(compressed).expect("small").to_le_bytes());
    t.extend(u32::try_from(total).expect("under 4 GiB").to_le_bytes());
    t.extend(1u32.to_le_bytes());
    t.push(0);
    t.extend(0x8F92_EAB1u32.to_le_bytes());
    file.write_all(&t).expect("table");
}

/// Runs `cmd` to its end under GNU time, its standard output to `stdout` (captured in
/// the result when piped): what it did, and its peak RSS in bytes. `None` (after a
/// skip) without /usr/bin/time.
pub fn peak_rss(cmd: &Command, stdout: Stdio) -> Option<(Output, u64)> {
    if !Path::new("/usr/bin/time").exists() {
        crate::skip("GNU time (/usr/bin/time) is not installed");
        return None;
    }
    let report = tempfile::NamedTempFile::new().expect("temp");
    let mut timed = Command::new("/usr/bin/time");
    timed
        .args(["-f", "%M", "-o"])
        .arg(report.path())
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => timed.env(k, v),
            None => timed.env_remove(k),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        timed.current_dir(dir);
    }
    let out = timed
        .stdout(stdout)
        .output()
        .expect("run under /usr/bin/time");
    let kib: u64 = std::fs::read_to_string(report.path())
        .expect("time's report")
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .expect("a number of KiB");
    Some((out, kib << 10))
}
