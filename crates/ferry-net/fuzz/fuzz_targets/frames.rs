//! Fuzzes the frame parser and what is built on it: arbitrary bytes read as frames
//! (each payload at most `MAX_FRAME`, decoded as the message its kind says), then as
//! the archive stream a receiver reads, and finally served as a whole connection by
//! the serving end, as the daemon serves one: beneath a root of its own (a scratch
//! directory), so a request the fuzzer makes up writes nowhere else. Never a panic,
//! never more than a frame allocated.
#![no_main]

use ferry_core::error::{Error, Reporter};
use ferry_net::beneath::Root;
use ferry_net::frame::{read_frame, Kind, MAX_FRAME};
use ferry_net::proto::{decode_done, decode_error, Request};
use ferry_net::serve::{serve, ServeConfig};
use ferry_net::stream::Inbound;
use std::io::Read;

struct Quiet;
impl Reporter for Quiet {
    fn error(&self, _: &Error) {}
    fn warn(&self, _: &str) {}
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut r = data;
    while let Ok(Some(frame)) = read_frame(&mut r) {
        assert!(frame.payload.len() <= MAX_FRAME);
        let _ = match frame.kind {
            Kind::Request => Request::decode(&frame.payload).map(drop),
            Kind::Error => decode_error(&frame.payload).map(drop),
            Kind::Done => decode_done(&frame.payload).map(drop),
            _ => Ok(()),
        };
    }
    let mut inbound = Inbound::new(data, &Quiet);
    let _ = inbound.read_to_end(&mut Vec::new());
    let root = std::env::temp_dir().join("ferry-net-fuzz-root");
    let _ = std::fs::create_dir_all(&root);
    let mut conn = b"FERRYNET".to_vec();
    conn.extend_from_slice(&ferry_net::proto::VERSION.to_le_bytes());
    conn.extend_from_slice(data);
    static ROOT: std::sync::OnceLock<std::sync::Arc<Root>> = std::sync::OnceLock::new();
    let root = ROOT.get_or_init(|| std::sync::Arc::new(Root::open(&root).expect("root")));
    let config = ServeConfig {
        threads: 1,
        root: Some(root.clone()),
        ..ServeConfig::default()
    };
    let _ = serve(conn.as_slice(), Vec::new(), &config);
});
