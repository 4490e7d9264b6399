//! Mounting through `fusermount3`, the setuid helper of Debian's fuse3 that lets an
//! ordinary user mount: it opens /dev/fuse, mounts it, and passes the open device back
//! over a Unix socket (`_FUSE_COMMFD`). With `auto_unmount` it then waits on that
//! socket and unmounts when the mounting process's end of it closes.

use crate::session::MountOptions;
use rustix::io::FdFlags;
use rustix::net::{
    recvmsg, socketpair, AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags,
    SocketFlags, SocketType,
};
use std::io::{self, IoSliceMut, Read};
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The fusermount3 left waiting to unmount, and the socket it watches: dropping this
/// closes the socket, and fusermount3 unmounts (if still mounted) and exits.
pub struct Helper {
    _socket: OwnedFd,
    child: Child,
}

impl Drop for Helper {
    fn drop(&mut self) {
        // Closing the socket (after this) tells it to finish; reap it then.
        let _ = self.child.try_wait();
    }
}

/// The `-o` options for a mount with `opts`.
pub fn options(opts: &MountOptions) -> String {
    let mut o = String::from("ro,nodev,nosuid,default_permissions,auto_unmount,subtype=ferry");
    o.push_str(",fsname=");
    for c in opts.fsname.chars() {
        if matches!(c, ',' | '\\') {
            o.push('\\');
        }
        o.push(c);
    }
    if opts.allow_other {
        o.push_str(",allow_other");
    }
    o
}

/// Mounts on `mountpoint` with `fusermount3 -o options`; returns the FUSE device and the
/// helper left running. `NotFound` when there is no fusermount3.
pub fn mount(mountpoint: &Path, options: &str) -> io::Result<(OwnedFd, Helper)> {
    let (ours, theirs) = socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    // The helper inherits its end.
    rustix::io::fcntl_setfd(&theirs, FdFlags::empty())?;
    let mut child = Command::new("fusermount3")
        .arg("-o")
        .arg(options)
        .arg("--")
        .arg(mountpoint)
        .env("_FUSE_COMMFD", theirs.as_raw_fd().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    drop(theirs);
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut ancillary = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8; 1];
    let received = recvmsg(
        &ours,
        &mut [IoSliceMut::new(&mut byte)],
        &mut ancillary,
        RecvFlags::CMSG_CLOEXEC,
    );
    let fd = received.ok().and_then(|_| {
        ancillary.drain().find_map(|m| match m {
            RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
            _ => None,
        })
    });
    match fd {
        Some(fd) => Ok((
            fd,
            Helper {
                _socket: ours,
                child,
            },
        )),
        None => {
            let mut why = String::new();
            if let Some(mut err) = child.stderr.take() {
                let _ = err.read_to_string(&mut why);
            }
            let _ = child.wait();
            let why = why.trim().trim_start_matches("fusermount3: ").to_string();
            Err(io::Error::other(if why.is_empty() {
                "fusermount3 did not pass the FUSE device back".to_string()
            } else {
                why
            }))
        }
    }
}
