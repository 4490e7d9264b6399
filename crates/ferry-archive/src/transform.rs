//! GNU tar's `--transform` (`--xform`): sed-like `s/REGEX/REPLACEMENT/FLAGS`
//! expressions that rename members as they are written.
//!
//! As GNU tar (and its manual's "Modifying File and Member Names"): any delimiter may
//! follow the `s`; REGEX is a POSIX basic regular expression (`\(`, `\)`, `\{`, `\}`,
//! with GNU's `\+`, `\?`, `\|`, `\<`, `\>`), extended with the `x` flag; the flags
//! are `g` (every match), a number N (the Nth match, with `g` the Nth and those after
//! it), `i` (ignore case), `x`, and the scopes `r`/`R` (member names), `s`/`S`
//! (symlink targets), `h`/`H` (hardlink targets), all on unless turned off. The
//! replacement takes `\1`..`\9`, `&` (the match), `\L`, `\U`, `\E` (lower or upper
//! case until `\E`), `\l`, `\u` (the next character), and `\` before any other
//! character for that character. Expressions (several options, or `;` between them)
//! apply in order, each to the result of the one before.
//!
//! Where ferry differs: an empty match with `g` moves on by one character, as sed does
//! (GNU tar 1.34 loops forever on `s/b*/-/g`); a name with fewer matches than a match
//! number N is left as it is, as sed leaves it (GNU tar 1.34 makes `last` `llast`
//! with `s/[a-c]/X/2`); a hardlink's target is always the name its first member was
//! stored under (so it cannot point at a name the archive lacks).

use regex::bytes::{Captures, Regex, RegexBuilder};
use std::borrow::Cow;

/// A list of expressions, in the order given.
#[derive(Debug, Default)]
pub struct Transform {
    rules: Vec<Rule>,
}

/// What a rule applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Scope {
    members: bool,
    symlinks: bool,
    hardlinks: bool,
}

#[derive(Debug)]
struct Rule {
    regex: Regex,
    replacement: Vec<Piece>,
    /// Replace from the `nth` match on (1-based) ...
    nth: usize,
    /// ... and every one after it, or only that one.
    global: bool,
    scope: Scope,
}

/// One part of a replacement.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Text(Vec<u8>),
    /// A group (0: the whole match).
    Group(usize),
    /// `\L`, `\U`, `\E`.
    Case(Case),
    /// `\l`, `\u`: the next character only.
    NextCase(Case),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    Lower,
    Upper,
    Keep,
}

impl Transform {
    /// Adds the expressions of one `--transform` option (several may be separated by
    /// `;`). The error says what is wrong in words, with the expression.
    pub fn add(&mut self, option: &str) -> Result<(), String> {
        let mut rest = option;
        while !rest.is_empty() {
            let (rule, after) = parse_rule(rest).map_err(|why| format!("{option}: {why}"))?;
            self.rules.push(rule);
            rest = after;
        }
        Ok(())
    }

    /// Whether there is no expression at all.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// A member's new name.
    pub fn member<'n>(&self, name: &'n [u8]) -> Cow<'n, [u8]> {
        self.apply(name, |s| s.members)
    }

    /// A symlink's new target.
    pub fn symlink_target<'n>(&self, target: &'n [u8]) -> Cow<'n, [u8]> {
        self.apply(target, |s| s.symlinks)
    }

    fn apply<'n>(&self, name: &'n [u8], applies: impl Fn(Scope) -> bool) -> Cow<'n, [u8]> {
        let mut out = Cow::Borrowed(name);
        for rule in self.rules.iter().filter(|r| applies(r.scope)) {
            if let Some(new) = rule.replace(&out) {
                out = Cow::Owned(new);
            }
        }
        out
    }
}

impl Rule {
    /// `name` with this rule's matches replaced; None when nothing was.
    fn replace(&self, name: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        let mut copied = 0;
        let mut replaced = false;
        for (i, caps) in self.regex.captures_iter(name).enumerate() {
            let Some(whole) = caps.get(0) else { continue };
            if i + 1 < self.nth {
                continue;
            }
            out.extend_from_slice(&name[copied..whole.start()]);
            expand(&self.replacement, &caps, &mut out);
            copied = whole.end();
            replaced = true;
            if !self.global {
                break;
            }
        }
        replaced.then(|| {
            out.extend_from_slice(&name[copied..]);
            out
        })
    }
}

/// Appends the replacement for one match to `out`, case conversions applied.
fn expand(pieces: &[Piece], caps: &Captures<'_>, out: &mut Vec<u8>) {
    let mut case = Case::Keep;
    let mut next = Case::Keep;
    let mut push = |text: &[u8], case: Case, next: &mut Case| {
        for &b in text {
            let this = match *next {
                Case::Keep => case,
                once => {
                    *next = Case::Keep;
                    once
                }
            };
            out.push(match this {
                Case::Lower => b.to_ascii_lowercase(),
                Case::Upper => b.to_ascii_uppercase(),
                Case::Keep => b,
            });
        }
    };
    for piece in pieces {
        match piece {
            Piece::Text(t) => push(t, case, &mut next),
            Piece::Group(g) => {
                let text = caps.get(*g).map_or(&b""[..], |m| m.as_bytes());
                push(text, case, &mut next);
            }
            Piece::Case(c) => {
                case = *c;
                next = Case::Keep;
            }
            Piece::NextCase(c) => next = *c,
        }
    }
}

/// Parses one `s/REGEX/REPLACEMENT/FLAGS` from the start of `text`; returns it and
/// what follows its `;` (or nothing).
fn parse_rule(text: &str) -> Result<(Rule, &str), String> {
    let mut chars = text.char_indices();
    match chars.next() {
        Some((_, 's')) => {}
        _ => return Err("an expression starts with `s` (s/REGEX/REPLACEMENT/FLAGS)".into()),
    }
    let delim = match chars.next() {
        Some((_, c)) if c != '\\' && c != '\n' => c,
        _ => return Err("no delimiter after `s`".into()),
    };
    let body = &text[1 + delim.len_utf8()..];
    let (regex, after) =
        until_delimiter(body, delim).ok_or("the regular expression is not ended")?;
    let (replacement, after) =
        until_delimiter(after, delim).ok_or("the replacement is not ended")?;
    let (flags, rest) = match after.find(';') {
        Some(i) => (&after[..i], &after[i + 1..]),
        None => (after, ""),
    };
    let mut rule_flags = Flags::default();
    let mut number = String::new();
    for c in flags.chars() {
        match c {
            'g' => rule_flags.global = true,
            'i' => rule_flags.ignore_case = true,
            'x' => rule_flags.extended = true,
            'r' | 'R' => rule_flags.scope.members = c == 'r',
            's' | 'S' => rule_flags.scope.symlinks = c == 's',
            'h' | 'H' => rule_flags.scope.hardlinks = c == 'h',
            '0'..='9' => number.push(c),
            ' ' | '\t' => {}
            other => return Err(format!("unknown flag `{other}`")),
        }
    }
    let nth = match number.as_str() {
        "" => 1,
        n => match n.parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => return Err(format!("the match number {n} is not a positive number")),
        },
    };
    let pattern = match rule_flags.extended {
        true => from_extended(&regex)?,
        false => from_basic(&regex)?,
    };
    let regex = RegexBuilder::new(&pattern)
        .case_insensitive(rule_flags.ignore_case)
        .dot_matches_new_line(true)
        .build()
        .map_err(|e| format!("the regular expression is not valid: {e}"))?;
    let replacement = parse_replacement(&replacement, regex.captures_len() - 1)?;
    let rule = Rule {
        regex,
        replacement,
        nth,
        global: rule_flags.global,
        scope: rule_flags.scope,
    };
    Ok((rule, rest))
}

struct Flags {
    global: bool,
    ignore_case: bool,
    extended: bool,
    scope: Scope,
}

impl Default for Flags {
    fn default() -> Self {
        Flags {
            global: false,
            ignore_case: false,
            extended: false,
            scope: Scope {
                members: true,
                symlinks: true,
                hardlinks: true,
            },
        }
    }
}

/// The text up to the first `delim` not escaped by `\` (escapes kept for the regex or
/// replacement parser), and what follows it.
fn until_delimiter(text: &str, delim: char) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        if c == delim {
            return Some((out, &text[i + c.len_utf8()..]));
        }
        if c == '\\' {
            // Kept escaped, as GNU tar keeps it: `\|` with `|` as the delimiter is
            // still an alternation in a basic expression, a `|` in an extended one.
            out.push('\\');
            if let Some((_, d)) = chars.next() {
                out.push(d);
            }
            continue;
        }
        out.push(c);
    }
    None
}

/// A POSIX basic regular expression (with GNU's extensions) as the `regex` crate's
/// syntax: `\(` `\)` `\{` `\}` `\|` `\+` `\?` are the operators, the bare characters
/// literal; `*` at the start (or after `\(`, `\|` or `^`) is literal.
fn from_basic(re: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = re.chars().peekable();
    // Whether a `*` here would be literal: nothing to repeat before it.
    let mut at_start = true;
    while let Some(c) = chars.next() {
        let starts = matches!(c, '^') && at_start;
        match c {
            '\\' => match chars.next() {
                Some(d @ ('(' | ')' | '{' | '}' | '|' | '+' | '?')) => {
                    out.push(d);
                    at_start = matches!(d, '(' | '|');
                    continue;
                }
                Some(d) => escape_after_backslash(d, &mut out)?,
                None => return Err("the regular expression ends in `\\`".into()),
            },
            '[' => bracket(&mut chars, &mut out)?,
            '*' if at_start => out.push_str("\\*"),
            '+' | '?' | '(' | ')' | '{' | '}' | '|' => {
                out.push('\\');
                out.push(c);
            }
            '^' if !at_start => out.push_str("\\^"),
            '$' if chars.peek().is_some_and(|&n| n != '\\') => out.push_str("\\$"),
            other => out.push(other),
        }
        at_start = starts;
    }
    Ok(out)
}

/// A POSIX extended regular expression as the `regex` crate's syntax: the same but
/// for brackets and GNU's word anchors.
fn from_extended(re: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = re.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(d) => escape_after_backslash(d, &mut out)?,
                None => return Err("the regular expression ends in `\\`".into()),
            },
            // A bracket that does not parse is left for the regex crate to refuse.
            '[' => {
                if bracket(&mut chars, &mut out).is_err() {
                    out.push_str("\\[");
                }
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

/// `\d` in a POSIX expression: GNU's anchors and classes where it has them, else the
/// character itself.
fn escape_after_backslash(d: char, out: &mut String) -> Result<(), String> {
    match d {
        '<' => out.push_str("\\b{start}"),
        '>' => out.push_str("\\b{end}"),
        '`' => out.push_str("\\A"),
        '\'' => out.push_str("\\z"),
        'b' | 'B' | 'w' | 'W' | 's' | 'S' => {
            out.push('\\');
            out.push(d);
        }
        'n' => out.push_str("\\n"),
        't' => out.push_str("\\t"),
        // The regex crate matches in linear time, without back-references.
        '1'..='9' => {
            return Err(format!(
                "back-references in the regular expression (\\{d}) are not taken; \
                 they are in the replacement"
            ))
        }
        other => push_literal(other, out),
    }
    Ok(())
}

fn push_literal(c: char, out: &mut String) {
    if c.is_ascii_punctuation() {
        out.push('\\');
    }
    out.push(c);
}

/// A bracket expression after its `[`: POSIX takes a `]` first as a member and a
/// backslash as itself; the regex crate needs both escaped, and `[`, `&`, `~` and `-`
/// pairs too (its set operations), but not `[:alpha:]` and its kin.
fn bracket(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    out: &mut String,
) -> Result<(), String> {
    out.push('[');
    if chars.peek() == Some(&'^') {
        chars.next();
        out.push('^');
    }
    let mut first = true;
    while let Some(c) = chars.next() {
        match c {
            ']' if !first => {
                out.push(']');
                return Ok(());
            }
            '[' if matches!(chars.peek(), Some(':' | '=' | '.')) => {
                let kind = chars.next().unwrap_or(':');
                let mut name = String::new();
                loop {
                    match chars.next() {
                        Some(k) if k == kind && chars.peek() == Some(&']') => {
                            chars.next();
                            break;
                        }
                        Some(k) => name.push(k),
                        None => return Err("a bracket expression is not ended".into()),
                    }
                }
                match kind {
                    ':' => out.push_str(&format!("[:{name}:]")),
                    // An equivalence class or collating symbol of one character: it.
                    _ => name.chars().for_each(|k| push_literal(k, out)),
                }
            }
            '\\' | '[' | '&' | '~' | ']' => {
                out.push('\\');
                out.push(c);
            }
            '-' if chars.peek() == Some(&'-') => out.push_str("\\-"),
            other => out.push(other),
        }
        first = false;
    }
    Err("a bracket expression is not ended".into())
}

/// The replacement text as pieces; `groups` is how many the expression has.
fn parse_replacement(text: &str, groups: usize) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut literal = Vec::new();
    let flush = |literal: &mut Vec<u8>, pieces: &mut Vec<Piece>| {
        if !literal.is_empty() {
            pieces.push(Piece::Text(std::mem::take(literal)));
        }
    };
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        let piece = match c {
            '&' => Piece::Group(0),
            '\\' => match chars.next() {
                Some(d @ '0'..='9') => {
                    let g = d as usize - '0' as usize;
                    if g > groups {
                        return Err(format!(
                            "the replacement names group \\{g}; the expression has {groups}"
                        ));
                    }
                    Piece::Group(g)
                }
                Some('L') => Piece::Case(Case::Lower),
                Some('U') => Piece::Case(Case::Upper),
                Some('E') => Piece::Case(Case::Keep),
                Some('l') => Piece::NextCase(Case::Lower),
                Some('u') => Piece::NextCase(Case::Upper),
                Some('n') => {
                    literal.push(b'\n');
                    continue;
                }
                Some(d) => {
                    let mut buf = [0; 4];
                    literal.extend_from_slice(d.encode_utf8(&mut buf).as_bytes());
                    continue;
                }
                None => return Err("the replacement ends in `\\`".into()),
            },
            other => {
                let mut buf = [0; 4];
                literal.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
                continue;
            }
        };
        flush(&mut literal, &mut pieces);
        pieces.push(piece);
    }
    flush(&mut literal, &mut pieces);
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(exprs: &[&str], name: &str) -> String {
        let mut t = Transform::default();
        for e in exprs {
            t.add(e).expect("expression parses");
        }
        String::from_utf8_lossy(&t.member(name.as_bytes())).into_owned()
    }

    #[test]
    fn expressions_apply_in_order_each_to_the_last_result() {
        // As GNU tar 1.34: `s/a/b/;s/b/c/` makes `abc` `cbc`.
        assert_eq!(run(&["s/a/b/;s/b/c/"], "abc"), "cbc");
        assert_eq!(run(&["s/a/b/", "s/b/c/"], "abc"), "cbc");
    }

    #[test]
    fn basic_syntax_groups_and_literal_operators() {
        assert_eq!(run(&[r"s/\(.\)\(.\)/\2\1/"], "abc"), "bac");
        assert_eq!(run(&["s/a+b/X/"], "a+bc"), "Xc");
        assert_eq!(run(&["s/(x)/Y/"], "a(x)"), "aY");
        assert_eq!(run(&[r"s/o\{2\}/0/"], "foo"), "f0");
        assert_eq!(run(&["s/*a/Z/"], "*ab"), "Zb");
        assert_eq!(run(&[r"s/a\|c/-/g"], "abc"), "-b-");
        assert_eq!(run(&["s/(a|c)/-/gx"], "abc"), "-b-");
    }

    #[test]
    fn numbered_and_global_matches_and_case() {
        // As GNU tar 1.34: `s/[a-c]/\U&/2g` makes `abc` `aBC`.
        assert_eq!(run(&[r"s/[a-c]/\U&/2g"], "abc"), "aBC");
        assert_eq!(run(&["s/a/X/2"], "aaa"), "aXa");
        assert_eq!(run(&[r"s/.*/\u&/"], "readme"), "Readme");
        assert_eq!(run(&[r"s/\(.*\)\.\(.*\)/\U\1\E.\2/"], "ab.c"), "AB.c");
        assert_eq!(run(&["s/A/x/i"], "bab"), "bxb");
    }

    #[test]
    fn empty_matches_move_on_as_sed_does() {
        assert_eq!(run(&["s/x*/-/g"], "abc"), "-a-b-c-");
    }

    #[test]
    fn any_delimiter_and_escaped_delimiters() {
        assert_eq!(run(&["s,^,pkg/,"], "a/b"), "pkg/a/b");
        assert_eq!(run(&[r"s/\//_/g"], "a/b/c"), "a_b_c");
        assert_eq!(run(&["s|[/]|:|"], "a/b"), "a:b");
        // As GNU tar 1.34: an escaped delimiter keeps its meaning in the syntax.
        assert_eq!(run(&[r"s|a\|z|X|g"], "abz"), "XbX");
        assert_eq!(run(&[r"s|a\|z|X|gx"], "a|z"), "X");
        assert_eq!(run(&[r"s,a\,z,X,g"], "a,z"), "X");
    }

    #[test]
    fn brackets_take_posix_members() {
        assert_eq!(run(&["s/[]x]/-/g"], "a]x"), "a--");
        assert_eq!(run(&[r"s/[\]/-/g"], r"a\b"), "a-b");
        assert_eq!(run(&["s/[[:digit:]]\\+/N/"], "v12.3"), "vN.3");
        assert_eq!(run(&["s/[a[]/-/g"], "a[b"), "--b");
    }

    #[test]
    fn scopes_leave_symlink_targets_alone_when_asked() {
        let mut t = Transform::default();
        t.add("s,^,p/,S").expect("parses");
        assert_eq!(&*t.member(b"x"), b"p/x");
        assert_eq!(&*t.symlink_target(b"x"), b"x");
    }

    #[test]
    fn bad_expressions_are_refused_in_words() {
        let mut t = Transform::default();
        for bad in [
            "x/a/b/", "s/a/b", "s/a/b/q", r"s/a/\1/", "s/a/b/0", r"s/\(/x/",
        ] {
            let err = t.add(bad).expect_err(bad);
            assert!(err.starts_with(bad), "{err}");
        }
    }
}
