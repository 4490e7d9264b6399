//! The archive corpus (issue 33, [`common::corpus`]): archives written here by every
//! tar this machine has, in every format each writes, each listed, unpacked and
//! compared with GNU tar's and bsdtar's extraction of it, and mounted in both modes and
//! compared with the unpack. What differs today is listed, with the reason, in one
//! table ([`corpus_check::KNOWN`]) and in docs/archives.md; anything else fails, and so
//! does a listed difference that no longer happens.

use super::common::corpus_check::{self, doc_line, ALL, KNOWN};
use super::common::{corpus, fuse_here, scratch};
use ferry_testkit::skip_unless_root;

#[test]
fn every_archive_of_the_corpus_reads_as_gnu_tar_and_bsdtar_read_it() {
    if skip_unless_root() || !fuse_here() {
        return;
    }
    let s = scratch();
    corpus::source_tree(&s.src);
    let archives = corpus::write_all(&s.src, &s.tmp.path().join("archives"));
    let mut outcomes = Vec::new();
    for a in &archives {
        let work = s.tmp.path().join("out").join(&a.name);
        outcomes.extend(corpus_check::read(a, &work, ALL));
    }
    corpus_check::judge(&outcomes, ALL);
}

#[test]
fn docs_list_the_known_differences_the_corpus_test_knows() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/archives.md"))
        .expect("read docs/archives.md");
    let section = doc
        .split_once("## Known differences from GNU tar")
        .map(|(_, rest)| rest.split("\n## ").next().unwrap_or_default())
        .expect("docs/archives.md has a \"Known differences from GNU tar\" section");
    let listed: Vec<&str> = section.lines().filter(|l| l.starts_with("- `")).collect();
    let wanted: Vec<String> = KNOWN.iter().map(doc_line).collect();
    assert_eq!(
        listed, wanted,
        "docs/archives.md and corpus_check::KNOWN differ"
    );
}
