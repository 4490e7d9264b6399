//! Member names as `tar -t` shows them (GNU tar's default `escape` quoting style, in a
//! UTF-8 locale): printable characters as they are, a backslash doubled, the C
//! escapes `\a \b \f \n \r \t \v`, and every other byte (a control character, a byte
//! that is not UTF-8) as three octal digits, `\200`.

use std::fmt::Write;

/// `bytes` as `tar -tv` shows a name.
///
/// ```
/// use ferry_archive::read::quote::tar_quoted;
/// assert_eq!(tar_quoted(b"\xc3\xa9\x80a\nb\\c\x01"), "é\\200a\\nb\\\\c\\001");
/// ```
pub fn tar_quoted(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => s.push_str("\\\\"),
                '\x07' => s.push_str("\\a"),
                '\x08' => s.push_str("\\b"),
                '\x0c' => s.push_str("\\f"),
                '\n' => s.push_str("\\n"),
                '\r' => s.push_str("\\r"),
                '\t' => s.push_str("\\t"),
                '\x0b' => s.push_str("\\v"),
                c if c.is_control() => {
                    let mut buf = [0u8; 4];
                    octal(&mut s, c.encode_utf8(&mut buf).as_bytes());
                }
                c => s.push(c),
            }
        }
        octal(&mut s, chunk.invalid());
    }
    s
}

/// Each byte as a backslash and three octal digits.
fn octal(s: &mut String, bytes: &[u8]) {
    for b in bytes {
        let _ = write!(s, "\\{b:03o}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_gnu_tar_shows_them() {
        // `LANG=C.UTF-8 tar -tvf` of these names (GNU tar 1.34).
        assert_eq!(
            tar_quoted(b"\xc3\xa9\x80a\nb\\c\x01d\x7fe f\tg\rh"),
            "é\\200a\\nb\\\\c\\001d\\177e f\\tg\\rh"
        );
        assert_eq!(tar_quoted(b"\xff\xfe"), "\\377\\376");
        assert_eq!(tar_quoted("\u{85}".as_bytes()), "\\302\\205");
    }
}
