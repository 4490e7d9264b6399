//! A sparse file's map as an archive stores it, and the file it stands for.
//!
//! A map is a list of runs `(offset in the file, length)`, their bytes stored one after
//! another. ferry writes maps in file order, without overlap, and every reader of data
//! takes that fast path. A tar from elsewhere may list runs out of order, repeat one
//! or let two overlap: GNU tar and bsdtar then write each run where it says, in map
//! order, so a later run's bytes win where runs overlap. [`pieces`] turns any map into
//! that result: what of the stored bytes lands where. [`lay_out`] copies those bytes,
//! in file order, into a temporary file, which is then an ordinary map's stored data.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::FileExt;

/// One run of a sparse map: (offset in the file, length).
pub type Run = (u64, u64);

/// A part of a file's data and where its bytes are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Offset in the file.
    pub at: u64,
    /// Length in bytes (never 0).
    pub len: u64,
    /// Offset of its first byte in the member's stored data.
    pub stored: u64,
}

/// Whether `runs` are in file order, none empty and none overlapping the one before:
/// then the stored data is the file's data in order, as ferry writes it.
pub fn in_order(runs: &[Run]) -> bool {
    let mut end = 0u64;
    for &(at, len) in runs {
        if len == 0 || at < end {
            return false;
        }
        match at.checked_add(len) {
            Some(e) => end = e,
            None => return false,
        }
    }
    true
}

/// What each stored byte of a map becomes when its runs are written in map order:
/// pieces in file order, none overlapping, each taking its bytes from the last run
/// that covers it. A map [`in_order`] gives one piece a run. Runs whose end overflows
/// are cut at 2^64.
pub fn pieces(runs: &[Run]) -> Vec<Piece> {
    if in_order(runs) {
        let mut stored = 0u64;
        return runs
            .iter()
            .map(|&(at, len)| {
                let p = Piece { at, len, stored };
                stored = stored.saturating_add(len);
                p
            })
            .collect();
    }
    // Start of each piece -> (end, stored offset of its first byte).
    let mut held: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    let mut stored = 0u64;
    for &(at, len) in runs {
        let end = at.saturating_add(len);
        let first = stored;
        stored = stored.saturating_add(len);
        if end == at {
            continue;
        }
        // The piece that starts before `at` and reaches into the run keeps its head,
        // and its tail too if it reaches past the run.
        if let Some((&start, &(p_end, p_stored))) = held.range(..at).next_back() {
            if p_end > at {
                held.insert(start, (at, p_stored));
                if p_end > end {
                    held.insert(end, (p_end, p_stored + (end - start)));
                }
            }
        }
        // Pieces that start inside the run lose what the run covers.
        let inside: Vec<u64> = held.range(at..end).map(|(&s, _)| s).collect();
        for start in inside {
            let Some((p_end, p_stored)) = held.remove(&start) else {
                continue;
            };
            if p_end > end {
                held.insert(end, (p_end, p_stored + (end - start)));
            }
        }
        held.insert(at, (end, first));
    }
    held.into_iter()
        .map(|(at, (end, stored))| Piece {
            at,
            len: end - at,
            stored,
        })
        .collect()
}

/// Copies the bytes of a map's [`pieces`] into a new unnamed temporary file in `dir`
/// (the destination being written, so it takes room where the file will; else, or
/// where `dir`'s filesystem makes no unnamed files, in `TMPDIR`), in file order,
/// reading each with `read(stored offset, buffer)`, in the order they are stored (so a
/// stream can be read on, skipping what later runs overwrote). Returns the file and
/// the map of what it holds, which is [`in_order`].
pub fn lay_out(
    runs: &[Run],
    dir: Option<BorrowedFd<'_>>,
    mut read: impl FnMut(u64, &mut [u8]) -> io::Result<()>,
) -> io::Result<(File, Vec<Run>)> {
    let pieces = pieces(runs);
    let mut placed = Vec::with_capacity(pieces.len());
    let mut at = 0u64;
    for p in &pieces {
        placed.push((p.stored, p.len, at));
        at += p.len;
    }
    placed.sort_unstable();
    let file = match dir.map(unnamed_in) {
        Some(Ok(file)) => file,
        _ => tempfile::tempfile()?,
    };
    let mut buf = vec![0u8; 1 << 20];
    for (stored, len, to) in placed {
        let mut done = 0u64;
        while done < len {
            let k = (len - done).min(buf.len() as u64) as usize;
            read(stored + done, &mut buf[..k])?;
            file.write_all_at(&buf[..k], to + done)?;
            done += k as u64;
        }
    }
    Ok((file, pieces.iter().map(|p| (p.at, p.len)).collect()))
}

/// An unnamed file (`O_TMPFILE`) in directory `dir`.
fn unnamed_in(dir: BorrowedFd<'_>) -> io::Result<File> {
    use rustix::fs::{openat, Mode, OFlags};
    let flags = OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC;
    Ok(File::from(openat(
        dir,
        ".",
        flags,
        Mode::from_raw_mode(0o600),
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file a map makes when its runs are written in order, stored bytes numbered.
    fn written(runs: &[Run], size: usize) -> Vec<Option<u64>> {
        let mut file = vec![None; size];
        let mut stored = 0u64;
        for &(at, len) in runs {
            for i in 0..len {
                file[(at + i) as usize] = Some(stored + i);
            }
            stored += len;
        }
        file
    }

    fn from_pieces(pieces: &[Piece], size: usize) -> Vec<Option<u64>> {
        let mut file = vec![None; size];
        for p in pieces {
            for i in 0..p.len {
                file[(p.at + i) as usize] = Some(p.stored + i);
            }
        }
        file
    }

    #[test]
    fn pieces_are_what_writing_the_runs_in_order_makes() {
        let maps: &[&[Run]] = &[
            &[(0, 10), (20, 5)],
            &[(0, 10), (5, 10)],
            &[(20, 5), (0, 5)],
            &[(0, 5), (0, 5)],
            &[(0, 100), (40, 10)],
            &[(40, 10), (0, 100)],
            &[(10, 10), (0, 5), (12, 30), (11, 0), (3, 9), (50, 1)],
        ];
        for runs in maps {
            let p = pieces(runs);
            assert_eq!(
                from_pieces(&p, 64 + 100),
                written(runs, 64 + 100),
                "{runs:?}"
            );
            assert!(p.windows(2).all(|w| w[0].at + w[0].len <= w[1].at), "{p:?}");
            assert!(p.iter().all(|p| p.len > 0));
        }
        let mut rng = 0x9e37_79b9_u64;
        for _ in 0..2000 {
            let runs: Vec<Run> = (0..rng % 7)
                .map(|_| {
                    rng = rng
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((rng >> 33) % 40, (rng >> 20) % 12)
                })
                .collect();
            rng = rng.wrapping_add(17);
            assert_eq!(
                from_pieces(&pieces(&runs), 64),
                written(&runs, 64),
                "{runs:?}"
            );
        }
    }

    #[test]
    fn only_sorted_disjoint_nonempty_maps_are_in_order() {
        assert!(in_order(&[(0, 10), (10, 5), (30, 1)]));
        assert!(in_order(&[]));
        assert!(!in_order(&[(0, 10), (5, 5)]));
        assert!(!in_order(&[(10, 1), (0, 1)]));
        assert!(!in_order(&[(0, 0)]));
        assert!(!in_order(&[(u64::MAX, 2)]));
    }

    #[test]
    fn a_laid_out_map_holds_the_last_bytes_written_in_file_order() {
        let stored: Vec<u8> = (0..30).collect();
        let runs = [(10, 10), (0, 5), (15, 15)];
        let dir = std::fs::File::open(std::env::temp_dir()).unwrap();
        let (file, map) = lay_out(&runs, Some(std::os::fd::AsFd::as_fd(&dir)), |at, buf| {
            buf.copy_from_slice(&stored[at as usize..at as usize + buf.len()]);
            Ok(())
        })
        .unwrap();
        assert_eq!(map, vec![(0, 5), (10, 5), (15, 15)]);
        let mut got = vec![0u8; 25];
        file.read_exact_at(&mut got, 0).unwrap();
        let want: Vec<u8> = (10..15).chain(0..5).chain(15..30).collect();
        assert_eq!(got, want);
    }
}
