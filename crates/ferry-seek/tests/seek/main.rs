//! ferry-seek against files made by the real tools (gzip, pigz, zstd, pzstd, xz, bzip2):
//! random reads equal the same bytes of the decompressed data, random access costs what it
//! should, damaged input is an error and never a panic.

mod bzip2;
mod gzip;
mod hostile;
mod huge;
mod seq;
mod xz;
mod zstd;

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ferry_seek::{Codec, Compressed, Indexing, SeekIndex};

/// A scratch directory with `data` written in it and compressed by the tools.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub data: Vec<u8>,
}

impl Fixture {
    /// `len` bytes of tar-like data: runs of text, random bytes and zeros.
    pub fn new(seed: u64, len: usize) -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = sample(seed, len);
        std::fs::write(dir.path().join("data"), &data).expect("write data");
        Fixture { dir, data }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs `cmd` (a shell command line) with the data on stdin into `name`; `None` (after
    /// a skip) when the tool is missing.
    pub fn compress(&self, name: &str, cmd: &str) -> Option<PathBuf> {
        let tool = cmd.split_whitespace().next().unwrap_or(cmd);
        if !have(tool) {
            ferry_testkit::skip(&format!("{tool} is not installed"));
            return None;
        }
        let out = self.path(name);
        shell(&format!("{cmd} < data > {name}"), self.dir.path());
        Some(out)
    }
}

pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub fn shell(cmd: &str, dir: &Path) {
    let st = Command::new("sh")
        .args(["-c", cmd])
        .current_dir(dir)
        .status()
        .expect("sh");
    assert!(st.success(), "{cmd}: {st}");
}

/// Deterministic data that compresses like a tar of a source tree (roughly 3-4x).
pub fn sample(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let words: Vec<&[u8]> = [
        "fn ", "let ", "mut ", "struct ", "impl ", "return ", "self", "match ", "=> ", "{\n",
        "}\n", "(", ")", "; ", "// ", "the ", "file ", "offset ", "read ", "0x", "\t",
    ]
    .iter()
    .map(|w| w.as_bytes())
    .collect();
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        let run = rng.usize(1..64 << 10);
        match rng.u8(0..10) {
            0 => v.extend(std::iter::repeat_n(0u8, run)),
            1 => v.extend((0..run).map(|_| rng.u8(..))),
            _ => {
                let end = v.len() + run;
                while v.len() < end {
                    v.extend_from_slice(words[rng.usize(..words.len())]);
                    if rng.u8(..) < 40 {
                        v.extend(rng.u32(..).to_string().bytes());
                    }
                }
            }
        }
    }
    v.truncate(len);
    v
}

/// Indexes `path` reading it in odd-sized pieces, checks the stream equals `data`.
pub fn index(path: &Path, codec: Codec, span: u64, data: &[u8]) -> SeekIndex {
    let file = File::open(path).expect("open");
    let mut head = [0u8; 6];
    let n = File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .expect("head");
    if n > 0 {
        assert_eq!(ferry_seek::detect(&head[..n]), Some(codec));
    }
    let mut ix = Indexing::new(file, codec, span).expect("indexing");
    let mut got = Vec::with_capacity(data.len());
    let mut buf = vec![0u8; 100_003];
    // Stop a little early, as a tar reader would at the end-of-archive blocks.
    let stop = data.len().saturating_sub(5000);
    while got.len() < stop {
        let n = ix.read(&mut buf).expect("read");
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    assert!(
        got.len() <= data.len() && got[..] == data[..got.len()],
        "stream differs"
    );
    let index = ix.finish().expect("finish");
    assert_eq!(index.decompressed_len(), data.len() as u64);
    assert_eq!(
        index.compressed_len(),
        std::fs::metadata(path).expect("stat").len()
    );
    let again = SeekIndex::from_bytes(&index.to_bytes()).expect("from_bytes");
    assert_eq!(again.points(), index.points());
    again
}

/// `n` random reads (some across points, some at the end) equal the data.
pub fn check_reads(path: &Path, index: SeekIndex, data: &[u8], n: usize, seed: u64) -> Compressed {
    let c = Compressed::new(File::open(path).expect("open"), index);
    let mut rng = fastrand::Rng::with_seed(seed);
    let len = data.len() as u64;
    let mut buf = vec![0u8; 1 << 20];
    for i in 0..n {
        let want = match i % 4 {
            0 => rng.usize(0..=300),
            1 => rng.usize(0..=128 << 10),
            _ => rng.usize(0..=1 << 20),
        };
        let off = match i % 5 {
            0 => len.saturating_sub(rng.u64(0..=(want as u64 + 10))),
            1 => len + rng.u64(0..3),
            _ => rng.u64(0..=len),
        };
        let got = c.read_at(&mut buf[..want], off).expect("read_at");
        let end = (off.min(len) as usize + want).min(data.len());
        let expect = &data[off.min(len) as usize..end];
        assert_eq!(got, expect.len(), "length at {off}+{want}");
        assert!(buf[..got] == *expect, "bytes at {off}+{want}");
    }
    // And the whole file in kernel-sized pieces, in order.
    let mut off = 0u64;
    while off < len {
        let got = c.read_at(&mut buf[..128 << 10], off).expect("read_at");
        assert!(got > 0);
        assert!(
            buf[..got] == data[off as usize..off as usize + got],
            "sequential at {off}"
        );
        off += got as u64;
    }
    c
}

/// Four threads each read a run of pieces in order from random places, as the kernel
/// reads several files at once; every piece equals the data.
pub fn check_threads(c: &Compressed, data: &[u8]) {
    std::thread::scope(|s| {
        for t in 0..4u64 {
            s.spawn(move || {
                let mut rng = fastrand::Rng::with_seed(t);
                let mut buf = vec![0u8; 256 << 10];
                for _ in 0..12 {
                    let mut off = rng.u64(0..data.len() as u64);
                    for _ in 0..8 {
                        let n = c.read_at(&mut buf, off).expect("read_at");
                        assert!(buf[..n] == data[off as usize..off as usize + n], "at {off}");
                        off += n as u64;
                    }
                }
            });
        }
    });
}

#[test]
fn the_public_types_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Compressed>();
    send_sync::<SeekIndex>();
    send::<Indexing>();
}
