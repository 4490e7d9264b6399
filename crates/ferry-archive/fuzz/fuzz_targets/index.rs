//! Fuzzes the index reader: arbitrary bytes in, taken as an archive; its footer read and
//! its index gone through, the reader's promises checked (see `exercise_index.rs`),
//! never a panic. Each input is also tried with its footer's checksum fixed.
#![no_main]

#[path = "../exercise_index.rs"]
mod exercise_index;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    exercise_index::exercise_index(data);
    if let Some(fixed) = exercise_index::with_fixed_footer(data) {
        exercise_index::exercise_index(&fixed);
    }
});
