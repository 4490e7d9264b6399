//! A mutation loop over signatures and op streams taken from real deltas: whatever the
//! bytes, decoding and applying never panic, a delta against any signature that
//! decodes stays inside that signature's basis and gives exactly the new file's size,
//! and the output never grows past its declared size. `FERRY_FUZZ_SECS` bounds the
//! loop (3 s by default), `FERRY_FUZZ_SEED` picks the inputs.

use crate::util::{file_at, random};
use ferry_delta::{delta, signature, Apply, Op, Signature};
use std::fs::File;
use std::os::fd::AsFd;
use std::panic::{self, AssertUnwindSafe};
use std::time::{Duration, Instant};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn mutate(rng: &mut fastrand::Rng, data: &mut Vec<u8>) {
    for _ in 0..rng.usize(1..4) {
        let at = rng.usize(..=data.len());
        match rng.u8(..6) {
            0 if at < data.len() => data[at] ^= 1 << rng.u8(..8),
            1 if at < data.len() => data[at] = rng.u8(..),
            2 => data.truncate(at),
            3 => {
                let n = rng.usize(..12);
                let bytes: Vec<u8> = (0..n).map(|_| rng.u8(..)).collect();
                data.splice(at..at, bytes);
            }
            4 => {
                // A run of continuation bytes: numbers that never end, or are huge.
                let n = rng.usize(1..12);
                data.splice(at..at, std::iter::repeat_n(0xff, n));
            }
            _ if at < data.len() => {
                let end = (at + rng.usize(..64)).min(data.len());
                let copy = data[at..end].to_vec();
                let to = rng.usize(..=data.len());
                data.splice(to..to, copy);
            }
            _ => {}
        }
    }
}

struct Fixture {
    basis: File,
    basis_len: u64,
    new: File,
    new_len: u64,
    out: File,
}

/// Decodes `bytes` as a signature and, when it decodes, runs a delta against it.
fn exercise_signature(fx: &Fixture, bytes: &[u8]) -> bool {
    let Ok(sig) = Signature::decode(bytes) else {
        return false;
    };
    let mut given = 0;
    delta(&fx.new, fx.new_len, &sig, |op: Op<'_>| {
        if let Op::Copy { basis_offset, len } = op {
            assert!(basis_offset + len <= sig.basis_size(), "{op:?}");
        }
        given += op.len();
        Ok::<_, std::io::Error>(())
    })
    .expect("delta");
    assert_eq!(given, fx.new_len);
    true
}

/// Applies `bytes` as an op stream for an output of the new file's size.
fn exercise_ops(fx: &Fixture, bytes: &[u8]) -> bool {
    fx.out.set_len(0).expect("truncate");
    let mut apply = Apply::new(fx.basis.as_fd(), fx.basis_len, fx.out.as_fd(), fx.new_len);
    let whole = apply.push_encoded(bytes).is_ok_and(|n| n == bytes.len());
    let finished = whole && apply.finish().is_ok();
    let len = fx.out.metadata().expect("stat").len();
    assert!(len <= fx.new_len, "output grew to {len}");
    if finished {
        assert_eq!(len, fx.new_len);
    }
    finished
}

#[test]
fn mutated_signatures_and_ops_never_panic() {
    let seed = env_u64("FERRY_FUZZ_SEED", 1);
    let limit = Duration::from_secs(env_u64("FERRY_FUZZ_SECS", 3));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = fastrand::Rng::with_seed(seed);
    let basis = random(&mut rng, 50_000);
    let mut new = basis.clone();
    new.splice(20_000..20_000, random(&mut rng, 3000));
    new.truncate(45_000);
    let fx = Fixture {
        basis: file_at(&dir.path().join("basis"), &basis),
        basis_len: basis.len() as u64,
        new: file_at(&dir.path().join("new"), &new),
        new_len: new.len() as u64,
        out: file_at(&dir.path().join("out"), b""),
    };
    let sig = signature(&fx.basis, fx.basis_len, 4096).expect("signature");
    let sig_wire = sig.encode();
    let mut ops_wire = Vec::new();
    delta(&fx.new, fx.new_len, &sig, |op: Op<'_>| {
        op.encode(&mut ops_wire);
        Ok::<_, std::io::Error>(())
    })
    .expect("delta");
    assert!(exercise_signature(&fx, &sig_wire));
    assert!(exercise_ops(&fx, &ops_wire));
    assert!(std::fs::read(dir.path().join("out")).expect("read") == new);

    let start = Instant::now();
    let (mut done, mut accepted, mut panics) = (0u64, 0u64, Vec::new());
    while start.elapsed() < limit {
        let sig_case = done % 2 == 0;
        let mut data = if sig_case {
            sig_wire.clone()
        } else {
            ops_wire.clone()
        };
        mutate(&mut rng, &mut data);
        let run = panic::catch_unwind(AssertUnwindSafe(|| {
            if sig_case {
                exercise_signature(&fx, &data)
            } else {
                exercise_ops(&fx, &data)
            }
        }));
        match run {
            Ok(ok) => accepted += u64::from(ok),
            Err(_) => panics.push((sig_case, data)),
        }
        done += 1;
        if panics.len() > 5 {
            break;
        }
    }
    eprintln!(
        "fuzz delta: seed {seed}, {done} inputs in {:.1?}, {accepted} accepted, {} panics",
        start.elapsed(),
        panics.len()
    );
    assert!(done > 0);
    assert!(
        panics.is_empty(),
        "inputs that panicked (signature?, bytes): {panics:?}"
    );
}
