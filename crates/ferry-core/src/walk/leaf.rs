//! One leaf of the walk: a file, symlink, fifo or device of a directory, read into an
//! entry (and, for a file the sink wants the data of, opened) and pushed into the sink.

use super::*;

impl<S: TreeSink> Walker<'_, S> {
    /// Pushes one non-directory entry of `node` (open as `open`) into the sink.
    pub(super) fn leaf(&self, node: &Node<S::Dir>, open: &OpenDir<S::Dir>, n: &Name) {
        let path = node.entry.path.join(n.name.as_bytes());
        if let Err(e) = self.leaf_inner(open, n, &path) {
            self.report(&e);
        }
    }

    pub(super) fn leaf_inner(
        &self,
        open: &OpenDir<S::Dir>,
        n: &Name,
        path: &RelPath,
    ) -> Result<()> {
        if n.kind == FileType::RegularFile && self.sink.wants_data() {
            let fd = match self.cfg.dereference {
                true => self.opener.open_following(&*open.src, &n.name),
                false => self.opener.open(&*open.src, &n.name),
            }
            .at(path, "open")?;
            if let Some(p) = &self.prefetch {
                p.watch(&fd);
            }
            let st = rfs::fstat(&fd).at(path, "stat")?;
            if self.cfg.skip.contains(&InodeKey::of(&st)) {
                self.skipped(path);
                return Ok(());
            }
            if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
                return Err(Error::new(
                    path,
                    "open",
                    std::io::Error::other("changed type while copying"),
                ));
            }
            let mut meta = meta::from_stat(&st);
            meta.xattrs = meta::read_xattrs(&fd).at(path, "read xattrs")?;
            // A pseudo-file (`/proc`, `/sys`) is what it gives read to its end.
            let (fd, size, maybe_sparse, stamp) =
                match pseudo::snapshot(&fd, &st).at(path, "read")? {
                    Some((snapshot, len)) => (snapshot, len, false, None),
                    None => (
                        fd,
                        st.st_size as u64,
                        (st.st_blocks as u64) * 512 < st.st_size as u64,
                        Some(crate::stamp::Stamp::of(&st)),
                    ),
                };
            let entry = Entry {
                path: path.clone(),
                kind: EntryKind::File { size },
                meta,
                links: link_info(&st),
            };
            let data = FileData::File {
                fd,
                maybe_sparse,
                stamp,
            };
            return self.sink.leaf(&open.dst, &entry, Some(data));
        }
        let follow = match self.cfg.dereference {
            true => AtFlags::empty(),
            false => AtFlags::SYMLINK_NOFOLLOW,
        };
        let st = rfs::statat(&*open.src, n.name.as_c_str(), follow).at(path, "stat")?;
        let mut meta = meta::from_stat(&st);
        let kind = match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => EntryKind::File {
                size: st.st_size as u64,
            },
            FileType::Symlink => EntryKind::Symlink {
                target: rfs::readlinkat(&*open.src, n.name.as_c_str(), Vec::new())
                    .at(path, "read link")?
                    .into_bytes(),
            },
            FileType::Fifo => EntryKind::Fifo,
            FileType::CharacterDevice => EntryKind::CharDevice { rdev: st.st_rdev },
            FileType::BlockDevice => EntryKind::BlockDevice { rdev: st.st_rdev },
            FileType::Socket if self.sink.wants_sockets() => EntryKind::Socket,
            FileType::Socket => {
                self.reporter.warn(&format!("{path}: skipping socket"));
                return Ok(());
            }
            FileType::Directory => {
                return Err(Error::new(
                    path,
                    "stat",
                    std::io::Error::other("became a directory while copying"),
                ));
            }
            FileType::Unknown => {
                return Err(Error::new(
                    path,
                    "stat",
                    std::io::Error::other("unknown file type"),
                ))
            }
        };
        // Nodes that cannot be opened keep their xattrs too (read by name, unfollowed),
        // as do files a sink wants no data of (a file opened for its data has them from
        // its descriptor).
        let opened = self.sink.wants_data() && matches!(kind, EntryKind::File { .. });
        if self.sink.wants_xattrs() && !opened {
            meta.xattrs = xattr::read(&xattr::Node::named(open.src.as_fd(), &n.name))
                .at(path, "read xattrs")?;
        }
        self.sink.leaf(
            &open.dst,
            &Entry {
                path: path.clone(),
                kind,
                meta,
                links: link_info(&st),
            },
            None,
        )
    }
}

/// The source inode and its link count, for files with more than one name.
fn link_info(st: &rfs::Stat) -> Option<(InodeKey, u64)> {
    (st.st_nlink > 1).then_some((InodeKey::of(st), st.st_nlink))
}
