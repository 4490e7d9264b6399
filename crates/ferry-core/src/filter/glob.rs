//! rsync's patterns as globset's globs: the pieces of a pattern, what `**` means where
//! it stands, anchoring, and the variants (`dir/***`, a trailing `/`) a pattern is
//! compiled into (see [`super`] for the syntax).

use super::MAX_INNER_DOUBLE_STARS;
use globset::GlobBuilder;

/// One piece of a pattern: text as globset reads it, or a `**`.
#[derive(Debug)]
enum Piece {
    Text(String),
    DoubleStar,
}

/// The globs an rsync pattern is compiled into, each with whether it matches
/// directories only; an error says why the pattern cannot be used.
pub(super) fn globs_of(pattern: &str) -> Result<Vec<(globset::Glob, bool)>, String> {
    // `dir/***`: the directory itself, and everything below it.
    let variants: Vec<(String, bool)> = if let Some(base) = pattern.strip_suffix("/***") {
        vec![(base.to_owned(), true), (format!("{base}/**"), false)]
    } else if let Some(base) = pattern.strip_suffix('/') {
        vec![(base.to_owned(), true)]
    } else {
        vec![(pattern.to_owned(), false)]
    };
    let mut out = Vec::new();
    for (text, dir_only) in variants {
        let (anchored, text) = match text.strip_prefix('/') {
            Some(rest) => (true, rest),
            None => (false, text.as_str()),
        };
        if text.is_empty() || text.starts_with('/') {
            return Err("matches no path".into());
        }
        for glob in glob_texts(text, anchored)? {
            let built = GlobBuilder::new(&glob)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|e| e.kind().to_string())?;
            out.push((built, dir_only));
        }
    }
    Ok(out)
}

/// The glob texts (globset's syntax) that together match what `text` (without its
/// leading and trailing `/`) matches in rsync.
fn glob_texts(text: &str, anchored: bool) -> Result<Vec<String>, String> {
    let pieces = pieces(text);
    let inner = (0..pieces.len())
        .filter(|&i| matches!(pieces[i], Piece::DoubleStar) && !whole_component(&pieces, i))
        .count();
    if inner > MAX_INNER_DOUBLE_STARS {
        return Err(format!(
            "more than {MAX_INNER_DOUBLE_STARS} `**` inside names (not between slashes)"
        ));
    }
    let starts_double = matches!(pieces.first(), Some(Piece::DoubleStar));
    // Unanchored: at any depth, at a `/` boundary (a `**` in front already is).
    let mut texts = vec![match anchored || starts_double {
        true => String::new(),
        false => "**/".to_owned(),
    }];
    for (i, piece) in pieces.iter().enumerate() {
        let add: Vec<&str> = match piece {
            Piece::Text(t) => vec![t],
            Piece::DoubleStar => match position(&pieces, i) {
                // `**/x`, `x/**`, `**`: globset's own, with rsync's meaning.
                (None | Some(b'/'), None) | (None, Some(b'/')) => vec!["**"],
                // `a/**/b`: at least one directory between, as in rsync (globset's
                // `a/**/b` also matches `a/b`).
                (Some(b'/'), Some(b'/')) => vec!["*/**"],
                // Inside a name: any bytes, or any bytes with a `/` among them.
                _ => vec!["*", "*/**/*"],
            },
        };
        texts = texts
            .iter()
            .flat_map(|t| add.iter().map(move |a| format!("{t}{a}")))
            .collect();
    }
    Ok(texts)
}

/// Whether the `**` at `i` is a whole component (between slashes or the pattern's ends).
fn whole_component(pieces: &[Piece], i: usize) -> bool {
    let (before, after) = position(pieces, i);
    before.is_none_or(|b| b == b'/') && after.is_none_or(|a| a == b'/')
}

/// The bytes just before and after piece `i` (None at the pattern's ends).
fn position(pieces: &[Piece], i: usize) -> (Option<u8>, Option<u8>) {
    let last = |p: &Piece| match p {
        Piece::Text(t) => t.as_bytes().last().copied(),
        Piece::DoubleStar => Some(b'*'),
    };
    let first = |p: &Piece| match p {
        Piece::Text(t) => t.as_bytes().first().copied(),
        Piece::DoubleStar => Some(b'*'),
    };
    let before = i.checked_sub(1).and_then(|j| last(&pieces[j]));
    let after = pieces.get(i + 1).and_then(first);
    (before, after)
}

/// Cuts an rsync pattern into globset text and `**`s. Braces, which globset reads as
/// alternatives and rsync as themselves, are escaped; so is everything in a pattern
/// without wildcards, which rsync compares as it is (a `\` included).
fn pieces(text: &str) -> Vec<Piece> {
    let wild = text.contains(['*', '?', '[']);
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if !wild {
            if matches!(c, '\\' | '{' | '}' | ']') {
                cur.push('\\');
            }
            cur.push(c);
            continue;
        }
        match c {
            '\\' => {
                cur.push('\\');
                if let Some(next) = chars.next() {
                    cur.push(next);
                }
            }
            '[' => {
                // Copied as it is up to its `]`; a `]` first (after a negation) is in
                // the class.
                cur.push('[');
                if let Some(neg) = chars.next_if(|&n| n == '!' || n == '^') {
                    cur.push(neg);
                }
                if let Some(bracket) = chars.next_if_eq(&']') {
                    cur.push(bracket);
                }
                for n in chars.by_ref() {
                    cur.push(n);
                    if n == ']' {
                        break;
                    }
                }
            }
            '{' | '}' => {
                cur.push('\\');
                cur.push(c);
            }
            '*' => {
                let mut run = 1;
                while chars.peek() == Some(&'*') {
                    chars.next();
                    run += 1;
                }
                if run == 1 {
                    cur.push('*');
                } else {
                    if !cur.is_empty() {
                        out.push(Piece::Text(std::mem::take(&mut cur)));
                    }
                    out.push(Piece::DoubleStar);
                }
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(Piece::Text(cur));
    }
    out
}
