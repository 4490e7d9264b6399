//! The serving end's side of the handshake, after the hellos: the client's token, if
//! the server has one, checked before anything else is read, then its request.
//!
//! Before the token is checked a frame is small: a frame's length is checked before
//! anything is allocated for it, a token frame holds at most [`MAX_TOKEN`] bytes, and
//! a request frame's bytes past [`SMALL_REQUEST`] are taken from the daemon's budget
//! for handshakes ([`Pending::reserve`]); and they arrive in memory only as they are
//! read. The daemon's
//! limits on connections in their handshake are [`crate::preauth`]'s.

use crate::frame::{read_head, Frame, Kind};
use crate::preauth::{same_secret, Pending, MAX_TOKEN};
use crate::proto::{unexpected, Request};
use crate::NetError;
use std::io::Read;

/// A request frame up to this size (a path, a few rules) is read without the budget:
/// the places in the handshake bound how many there are at once.
const SMALL_REQUEST: usize = 16 << 10;

/// Reads the client's token (checked against `token`, the server's, when it has one)
/// and its request. The outer error is a connection that failed or sent what is not
/// a frame (the client may not hear why); the inner one a request refused (it is told).
pub fn read_request(
    input: &mut impl Read,
    token: Option<&[u8]>,
    mut pending: Option<&mut Pending>,
) -> Result<Result<Request, NetError>, NetError> {
    let (mut kind, mut len) = next_head(input)?;
    if kind == Kind::Auth {
        let got = read_payload(input, kind, len, MAX_TOKEN)?;
        if let Some(want) = token {
            if let Err(refused) = check(pending.as_deref_mut(), Some(&got), want) {
                return Ok(Err(refused));
            }
        }
        (kind, len) = next_head(input)?;
    } else if let Some(want) = token {
        // Refused before the frame is read.
        return Ok(Err(check(pending.as_deref_mut(), None, want)
            .err()
            .unwrap_or_else(|| NetError::frame("no token"))));
    }
    if kind != Kind::Request {
        let payload = read_payload(input, kind, len, MAX_TOKEN)?;
        return Ok(Err(unexpected(Frame { kind, payload }, "a request")));
    }
    let reserved = match pending.as_deref() {
        Some(p) if len > SMALL_REQUEST => Some(p.reserve(len)?),
        _ => None,
    };
    let payload = read_payload(input, kind, len, usize::MAX)?;
    let request = Request::decode(&payload);
    drop((payload, reserved));
    if let Some(p) = pending {
        p.done();
    }
    Ok(request)
}

fn check(pending: Option<&mut Pending>, got: Option<&[u8]>, want: &[u8]) -> Result<(), NetError> {
    match pending {
        Some(p) => p.check_token(got, want),
        None if got.is_some_and(|t| same_secret(t, want)) => Ok(()),
        None => Err(NetError::Refused(
            "wrong or missing token (--token-file): refused".into(),
        )),
    }
}

fn next_head(input: &mut impl Read) -> Result<(Kind, usize), NetError> {
    read_head(input)?.ok_or(NetError::Closed)
}

/// The payload of a `kind` frame of `len` bytes (checked against the frame limit
/// already), at most `max`: read as it arrives, never allocated ahead of its bytes.
fn read_payload(
    input: &mut impl Read,
    kind: Kind,
    len: usize,
    max: usize,
) -> Result<Vec<u8>, NetError> {
    if len > max {
        return Err(NetError::frame(format!(
            "a {kind:?} frame of {len} bytes before the client is authenticated: more \
             than the {max} it may hold"
        )));
    }
    let mut payload = Vec::new();
    input.take(len as u64).read_to_end(&mut payload)?;
    if payload.len() < len {
        return Err(NetError::ClosedMidFrame);
    }
    Ok(payload)
}
