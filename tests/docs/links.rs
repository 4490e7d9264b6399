//! Every relative link in the README and docs/ leads somewhere: the file exists, and a
//! `#fragment` into a Markdown file is one of its headings as GitHub makes them
//! anchors (lowercase, punctuation dropped, spaces made `-`, a repeated heading
//! numbered `-1`, `-2`...). Links inside code (fenced blocks, backtick spans) are not
//! links.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The repository's root (this crate's manifest directory).
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `text` without its fenced code blocks and inline code spans.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push('\n');
            continue;
        }
        if fenced || line.starts_with("    ") {
            out.push('\n');
            continue;
        }
        // Inline code spans: whatever lies between backticks goes.
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            } else if !in_code {
                out.push(c);
            }
        }
        out.push('\n');
    }
    out
}

/// The anchors GitHub gives the headings of `text`.
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let heading = line.trim_start_matches('#').trim();
        let slug: String = heading
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut anchor = slug.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{slug}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// The targets of the inline links `[text](target)` in `text`.
fn link_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let end = rest.find([')', ' ', '\n']).unwrap_or(rest.len());
        out.push(rest[..end].to_string());
        rest = &rest[end..];
    }
    out
}

/// The Markdown files checked: the README and docs/*.md.
fn documents() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md")];
    let docs = std::fs::read_dir(root().join("docs")).expect("docs/");
    let mut more: Vec<PathBuf> = docs
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    more.sort();
    files.extend(more);
    files
}

/// What is wrong with the link `target` in the document `from`, if anything.
fn broken(from: &Path, target: &str) -> Option<String> {
    let external = target.split_once(':').is_some_and(|(scheme, _)| {
        !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphabetic())
    });
    if external {
        return None;
    }
    let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
    let file = match path {
        "" => from.to_path_buf(),
        p => from.parent().expect("a directory").join(p),
    };
    if !file.exists() {
        return Some(format!("{}: no such file", file.display()));
    }
    let markdown = file.extension().is_some_and(|x| x == "md");
    if fragment.is_empty() || !markdown {
        return None;
    }
    let text = std::fs::read_to_string(&file).expect("read a linked document");
    (!anchors(&text).contains(fragment)).then(|| format!("no heading #{fragment}"))
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let mut bad = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).expect("read a document");
        for target in link_targets(&prose(&text)) {
            checked += 1;
            if let Some(why) = broken(&doc, &target) {
                let shown = doc
                    .strip_prefix(root())
                    .unwrap_or(&doc)
                    .display()
                    .to_string();
                bad.push(format!("{shown}: ({target}): {why}"));
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} links found: is the parsing right?"
    );
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    let text = "# Two commands\n## `ferry copy`: a tree\n### S3 (issue 35)\n## Two commands\n\
                ```\n# not a heading\n```\n";
    let got = anchors(text);
    for want in [
        "two-commands",
        "ferry-copy-a-tree",
        "s3-issue-35",
        "two-commands-1",
    ] {
        assert!(got.contains(want), "{want}: {got:?}");
    }
    assert!(!got.contains("not-a-heading"));
    let broken_one = "see [x](nowhere.md) and `[y](code.md)` and [z](https://e.org/a)";
    assert_eq!(
        link_targets(&prose(broken_one)),
        vec!["nowhere.md", "https://e.org/a"]
    );
}
