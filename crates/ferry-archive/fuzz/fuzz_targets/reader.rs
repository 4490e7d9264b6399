//! Fuzzes the tar reader: arbitrary bytes in, every entry and all data read, the
//! reader's promises checked (see `exercise.rs`), never a panic.
#![no_main]

#[path = "../exercise.rs"]
mod exercise;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    exercise::exercise(data);
});
