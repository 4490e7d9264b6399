//! Fuzzes the daemon's side of a connection before it is authenticated: arbitrary
//! bytes after the hello, served with a token, a root and the limits on handshakes
//! (see `exercise_handshake.rs`); never a panic, never a job without the token.
#![no_main]

#[path = "../exercise_handshake.rs"]
mod exercise_handshake;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    exercise_handshake::exercise_handshake(data);
});
