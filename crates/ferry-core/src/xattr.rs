//! Extended attributes of a node: read from and written to an open file, or by name for
//! nodes that cannot be opened (symlinks, fifos, devices) without following a symlink.
//!
//! By-name access goes through `/proc/self/fd/DIR/NAME` with the `l*xattr` calls, so it
//! works relative to a directory descriptor at any depth.

use crate::entry::Xattr;
use rustix::fs::{self as rfs, XattrFlags};
use rustix::io::Errno;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// The node whose xattrs are read or written.
pub enum Node<'a> {
    /// An open file or directory.
    Fd(BorrowedFd<'a>),
    /// A name in a directory, reached without following a final symlink.
    Named(CString),
}

impl<'a> Node<'a> {
    /// The node `name` in the directory `dir`.
    pub fn named(dir: BorrowedFd<'_>, name: &CStr) -> Node<'a> {
        let mut p = format!("/proc/self/fd/{}/", dir.as_raw_fd()).into_bytes();
        p.extend_from_slice(name.to_bytes());
        // A CStr has no interior NUL, and the prefix has none either.
        Node::Named(CString::new(p).unwrap_or_default())
    }

    fn list(&self, buf: &mut [u8]) -> Result<usize, Errno> {
        match self {
            Node::Fd(fd) => rfs::flistxattr(fd, buf),
            Node::Named(p) => rfs::llistxattr(p.as_c_str(), buf),
        }
    }

    fn get(&self, name: &CStr, buf: &mut [u8]) -> Result<usize, Errno> {
        match self {
            Node::Fd(fd) => rfs::fgetxattr(fd, name, buf),
            Node::Named(p) => rfs::lgetxattr(p.as_c_str(), name, buf),
        }
    }

    /// Sets one attribute.
    pub fn set(&self, name: &CStr, value: &[u8]) -> Result<(), Errno> {
        match self {
            Node::Fd(fd) => rfs::fsetxattr(fd, name, value, XattrFlags::empty()),
            Node::Named(p) => rfs::lsetxattr(p.as_c_str(), name, value, XattrFlags::empty()),
        }
    }

    /// Removes one attribute.
    pub fn remove(&self, name: &CStr) -> Result<(), Errno> {
        match self {
            Node::Fd(fd) => rfs::fremovexattr(fd, name),
            Node::Named(p) => rfs::lremovexattr(p.as_c_str(), name),
        }
    }
}

/// All extended attributes of `node` that this process may read. A filesystem
/// without xattr support yields none.
pub fn read(node: &Node<'_>) -> io::Result<Vec<Xattr>> {
    // Most nodes have no xattrs, or a few: their names fit on the stack. (A zeroed
    // 1 KiB from the heap for every file of a tree made glibc consolidate its free
    // lists each time: 1.4% of a pack's samples, by hand.)
    let (mut names_on_stack, mut names_on_heap) = ([0u8; 1024], Vec::new());
    let names = match read_growing(&mut names_on_stack, &mut names_on_heap, |buf| {
        node.list(buf)
    }) {
        Ok(names) => names,
        Err(Errno::NOTSUP) => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut out = Vec::new();
    for name in names.split(|&b| b == 0).filter(|s| !s.is_empty()) {
        let Ok(cname) = CString::new(name) else {
            continue;
        };
        let (mut value_on_stack, mut value_on_heap) = ([0u8; 256], Vec::new());
        match read_growing(&mut value_on_stack, &mut value_on_heap, |buf| {
            node.get(cname.as_c_str(), buf)
        }) {
            Ok(value) => out.push(Xattr {
                name: name.to_vec(),
                value: value.to_vec(),
            }),
            // Removed between list and get, or not readable by us: nothing to copy.
            Err(Errno::NODATA | Errno::PERM | Errno::ACCESS) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(out)
}

/// What `call` puts into a buffer, given `on_stack` first and then, while it answers
/// `ERANGE` (too small), a heap buffer four times larger each time.
fn read_growing<'b>(
    on_stack: &'b mut [u8],
    on_heap: &'b mut Vec<u8>,
    mut call: impl FnMut(&mut [u8]) -> Result<usize, Errno>,
) -> Result<&'b [u8], Errno> {
    let mut size = match call(on_stack) {
        Ok(n) => return Ok(&on_stack[..n]),
        Err(Errno::RANGE) => on_stack.len() * 4,
        Err(e) => return Err(e),
    };
    loop {
        on_heap.resize(size, 0);
        match call(on_heap) {
            Ok(n) => return Ok(&on_heap[..n]),
            Err(Errno::RANGE) => size *= 4,
            Err(e) => return Err(e),
        }
    }
}

/// True when two attribute lists hold the same names and values, in any order.
pub fn same(a: &[Xattr], b: &[Xattr]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn names_longer_than_the_first_buffer_are_all_read() {
        let file = tempfile::tempfile().expect("temporary file");
        let node = Node::Fd(file.as_fd());
        // 40 names of 64 bytes: 2,600 bytes of names, past the 1 KiB tried first.
        let names: Vec<CString> = (0..40)
            .map(|i| CString::new(format!("user.{i:02}.{}", "n".repeat(56))).unwrap_or_default())
            .collect();
        for (i, name) in names.iter().enumerate() {
            match node.set(name, &[i as u8]) {
                Ok(()) => {}
                Err(Errno::NOTSUP) => {
                    return ferry_testkit::skip("the temporary directory has no user xattrs")
                }
                Err(e) => panic!("setting {name:?}: {e}"),
            }
        }
        let read = read(&node).expect("read xattrs");
        assert_eq!(read.len(), names.len());
        for (i, name) in names.iter().enumerate() {
            assert!(
                read.contains(&Xattr {
                    name: name.to_bytes().to_vec(),
                    value: vec![i as u8],
                }),
                "{name:?}"
            );
        }
    }
}
