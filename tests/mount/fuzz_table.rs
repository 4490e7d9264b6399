//! A bounded mutation loop over the tree table a ferry archive carries: records changed
//! at random (node fields, dirents, names), every checksum resealed
//! ([`ferry_testkit::table_edit`]), then the archive opened for mounting as `ferry
//! mount` opens it, its checks run, its tree walked and read as the FUSE filesystem
//! walks it, and its EROFS image built; every few rounds it is mounted for real (FUSE)
//! and read whole with a deadline. Nothing may panic or hang; what a table says may be
//! refused.
//!
//! `FERRY_FUZZ_SECS` bounds the loop (default 10 s, as CI runs it), `FERRY_FUZZ_SEED`
//! picks the run (default 1).

use super::common::build::{mkdirs, sparse_file, write};
use super::common::{scratch, trees};
use super::{ferry, fuse_here, is_mounted, pack_plain_index};
use ferry_archive::tree::NodeKind;
use ferry_mount::data::read_member;
use ferry_testkit::table_edit::{field, TableEdit};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// xorshift64*: the same run for the same seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Values that sit on the edges of what a field can mean.
const INTERESTING: [u64; 9] = [
    0,
    1,
    511,
    512,
    4096,
    1 << 32,
    u64::MAX / 2,
    u64::MAX - 1,
    u64::MAX,
];

/// Changes one to four things in the table held by `t`.
fn mutate(rng: &mut Rng, t: &mut TableEdit) {
    let nodes = t.nodes();
    for _ in 0..1 + rng.below(4) {
        let id = rng.below(nodes);
        match rng.below(6) {
            0 => {
                let fields = [field::SIZE, field::A, field::B];
                let f = fields[rng.below(fields.len())];
                let v = match rng.below(3) {
                    0 => INTERESTING[rng.below(INTERESTING.len())],
                    1 => t.get(id, f).wrapping_add(512 * rng.below(9) as u64),
                    _ => t.get(rng.below(nodes), f),
                };
                t.set(id, f, v);
            }
            1 => t.set32(id, field::HEAD, rng.below(4096) as u32),
            2 => t.set32(id, field::PARENT, rng.below(nodes + 2) as u32),
            3 => t.node(id)[field::KIND] = rng.below(8) as u8,
            _ => {
                let records = t.records();
                let at = rng.below(records.len());
                records[at] ^= 1 << rng.below(8);
            }
        }
    }
}

/// Opens the archive at `path` as `ferry mount` does, runs its checks, walks its tree
/// and reads every file as the filesystem would; then builds its kernel image.
fn exercise(path: &Path, cache: &Path) {
    if let Ok(opened) = ferry_mount::source::open(path, Some(cache)) {
        let checked = opened.check_later.map(|c| c(&|_| ()));
        if checked.is_none_or(|c| c.is_ok()) {
            let (table, data) = (&opened.table, &*opened.data);
            for id in 0..table.len().min(10_000) as u32 {
                let Ok(n) = table.node(id) else { continue };
                let _ = table.name(&n);
                match n.kind {
                    NodeKind::Dir => {
                        for d in table.dirents(&n, 0, 512).unwrap_or_default() {
                            let _ = table.lookup(&n, &d.name);
                        }
                    }
                    NodeKind::Symlink => drop(table.target(&n)),
                    NodeKind::File => {
                        if let Ok(x) = table.extras(&n) {
                            let mut buf = vec![0u8; 64 << 10];
                            let pieces = ferry_core::sparse::pieces(&n.runs(&x));
                            let _ = read_member(data, n.a, &pieces, n.size, 0, &mut buf);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    if rustix::process::geteuid().is_root() {
        let _ = ferry_mount::kernel::prepare(path, Some(cache), false);
    }
}

/// Mounts `path` with FUSE and reads the whole tree within a deadline; the mount must
/// answer (or refuse) and come down.
fn mount_and_read(path: &Path, cache: &Path, mnt: &Path) {
    let r = ferry(cache, &[&"mount", &path, &mnt]);
    if r.status != 0 {
        assert_eq!(r.status, 2, "mount of a mutated table: {}", r.stderr);
        return;
    }
    let read = Command::new("timeout")
        .args(["20", "sh", "-c", "find \"$0\" -type f -exec cat {} + >/dev/null 2>&1; ls -lR \"$0\" >/dev/null 2>&1; true"])
        .arg(mnt)
        .status()
        .expect("run find");
    let down = ferry(cache, &[&"umount", &"--lazy", &mnt]);
    let log = std::fs::read_to_string(cache.join("ferry/mount.log")).unwrap_or_default();
    assert!(!log.contains("panicked"), "the mount panicked: {log}");
    assert!(read.success(), "reading a mounted mutated table hung");
    assert_eq!(
        down.status, 0,
        "the mount ended by itself: {}; {log}",
        down.stderr
    );
    assert!(!is_mounted(mnt), "still mounted");
}

#[test]
fn mutated_tables_never_panic_or_hang_the_mount_or_the_image_builder() {
    let s = scratch();
    trees::mixed(&s.src);
    mkdirs(&s.src.join("many"));
    for i in 0..40 {
        write(&s.src.join(format!("many/f{i}")), format!("{i}").as_bytes());
    }
    sparse_file(&s.src.join("holes"), 1 << 20, &[(64 << 10, b"data")]);
    let archive = s.tmp.path().join("t.far");
    let cache = s.tmp.path().join("cache");
    pack_plain_index(&cache, &s.src, &archive);
    let bytes = std::fs::read(&archive).expect("read the archive");
    let mnt = s.tmp.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir");
    let limit = Duration::from_secs(env_u64("FERRY_FUZZ_SECS", 10));
    let seed = env_u64("FERRY_FUZZ_SEED", 1);
    let mut rng = Rng(seed.max(1));
    let mounts = fuse_here();
    let start = Instant::now();
    let (mut rounds, mut crashes) = (0u64, Vec::new());
    let mutated = s.tmp.path().join("m.far");
    while start.elapsed() < limit {
        let mut t = TableEdit::new(bytes.clone());
        mutate(&mut rng, &mut t);
        std::fs::write(&mutated, t.sealed()).expect("write");
        // A fresh cache: nothing built from an earlier round is reused.
        let round_cache = s.tmp.path().join(format!("cache{}", rounds % 2));
        let _ = std::fs::remove_dir_all(&round_cache);
        if catch_unwind(AssertUnwindSafe(|| exercise(&mutated, &round_cache))).is_err() {
            let keep = s.tmp.path().join(format!("crash-{seed}-{rounds}.far"));
            std::fs::copy(&mutated, &keep).expect("keep");
            crashes.push(rounds);
            // Kept where a failing CI's log says; the scratch directory goes.
            let _ = std::fs::copy(
                &keep,
                std::env::temp_dir().join(keep.file_name().unwrap_or_default()),
            );
        }
        if mounts && rounds % 25 == 0 {
            mount_and_read(&mutated, &round_cache, &mnt);
        }
        rounds += 1;
    }
    eprintln!(
        "fuzz tables: seed {seed}, {rounds} rounds in {:.1?}",
        start.elapsed()
    );
    assert!(rounds > 0);
    assert!(
        crashes.is_empty(),
        "rounds that panicked (inputs in {}): {crashes:?}",
        std::env::temp_dir().display()
    );
}
