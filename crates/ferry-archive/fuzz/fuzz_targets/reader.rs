//! Fuzzes the tar reader: arbitrary bytes in, every entry and all data read, the
//! reader's promises checked (see `exercise.rs`), never a panic. Each input is also
//! tried with its header checksums fixed, to get past the first header.
#![no_main]

#[path = "../exercise.rs"]
mod exercise;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    exercise::exercise(data);
    if let Some(fixed) = exercise::with_fixed_checksums(data) {
        exercise::exercise(&fixed);
    }
});
