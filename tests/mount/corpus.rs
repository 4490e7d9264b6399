//! Every archive of the corpus ([`common::corpus`]: every tar this machine writes, in
//! every format) mounts as the tree `unpack` makes of it, field by field: type, mode,
//! owner, size, times, content, symlink targets, xattrs, hardlinks and their link
//! counts, by FUSE and by the kernel. Known differences are those the corpus table
//! lists ([`corpus_check::KNOWN`]).

use super::common::corpus_check::{self, Check};
use super::common::{corpus, fuse_here, scratch};
use ferry_testkit::skip_unless_root;

#[test]
fn every_archive_of_the_corpus_mounts_as_the_tree_unpack_makes() {
    if skip_unless_root() || !fuse_here() {
        return;
    }
    let s = scratch();
    corpus::source_tree(&s.src);
    let archives = corpus::write_all(&s.src, &s.tmp.path().join("archives"));
    let checks = [Check::Unpack, Check::Fuse, Check::Kernel];
    let mut outcomes = Vec::new();
    for a in &archives {
        let work = s.tmp.path().join("out").join(&a.name);
        outcomes.extend(corpus_check::read(a, &work, &checks));
    }
    corpus_check::judge(&outcomes, &checks);
}
