//! glibc malloc's tuning for the long jobs that move many buffers between threads
//! (the daemon, S3 copies): how much freed memory stays in the process.

/// Buffers of a MiB and more are mapped and unmapped, never kept in malloc's arenas:
/// glibc otherwise raises its mmap threshold to the size of the last large buffer freed
/// (5 MiB parts, 4 MiB ranges), after which such buffers come from, and stay in, the
/// arena of whichever thread allocated them.
pub fn map_large_buffers() {
    // SAFETY: sets a malloc tuning parameter; no memory is touched.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// As many malloc arenas as cores: glibc's default, 8 per core, lets each of the
/// daemon's threads (one per connection, its workers) settle in an arena of its own and
/// keep its freed memory there; at 128 clients that was about 5 MiB of RSS beyond the
/// pool. Threads on different cores still allocate in parallel.
pub fn arenas_per_core() {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let cores = i32::try_from(cores).unwrap_or(i32::MAX);
    // SAFETY: sets a malloc tuning parameter; no memory is touched.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, cores);
    }
}
