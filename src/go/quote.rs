//! Go's `strconv.Quote` (what `%q` prints), so error texts that embed user input read exactly
//! as Dapr's do.

use std::fmt::Write as _;

/// Quotes `s` the way Go's `strconv.Quote` does: printable runes stay, `"` and `\` are
/// escaped, the C escapes `\a \b \f \n \r \t \v` are used where they exist, other control
/// and non-printable runes become `\xNN`, `\uNNNN` or `\UNNNNNNNN`.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if is_print(c) => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if (c as u32) < 0x10000 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

/// Approximates Go's `unicode.IsPrint`: graphic runes and the ASCII space. Rust has no
/// general-category tables in std, so the non-graphic classes Go rejects are listed: control
/// characters, separators other than U+0020, and the format characters people actually meet
/// (soft hyphen, zero-width and bidi marks, BOM). Unassigned code points are printed as-is.
fn is_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(c,
        '\u{ad}'
        | '\u{600}'..='\u{605}'
        | '\u{61c}'
        | '\u{6dd}'
        | '\u{70f}'
        | '\u{180e}'
        | '\u{200b}'..='\u{200f}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{206f}'
        | '\u{feff}'
        | '\u{fff9}'..='\u{fffb}'
        | '\u{e000}'..='\u{f8ff}'
        | '\u{f0000}'..='\u{10ffff}')
}

/// Go's `strconv.Quote` of a byte string: valid UTF-8 quoted as `%q` does, invalid bytes as
/// `\xNN`.
pub fn quote_bytes(b: &[u8]) -> String {
    let mut out = String::from("\"");
    for chunk in b.utf8_chunks() {
        let valid = quote(chunk.valid());
        // Strip the quotes the helper adds around each piece.
        out.push_str(&valid[1..valid.len() - 1]);
        for byte in chunk.invalid() {
            let _ = write!(out, "\\x{byte:02x}");
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_go_strconv_quote() {
        // Expected values are what Go's fmt.Sprintf("%q", s) prints.
        let cases = [
            ("abc", r#""abc""#),
            ("", r#""""#),
            ("bad\0name", r#""bad\x00name""#),
            ("bad\nname", r#""bad\nname""#),
            ("a\"b\\c", r#""a\"b\\c""#),
            ("tab\there", r#""tab\there""#),
            ("del\u{7f}", r#""del\x7f""#),
            ("c1\u{85}", r#""c1\u0085""#),
            ("µs", r#""µs""#),
            ("日本", r#""日本""#),
            ("zw\u{200b}", r#""zw\u200b""#),
            ("my||job@name", r#""my||job@name""#),
            ("\u{1}\u{1b}", r#""\x01\x1b""#),
        ];
        for (input, want) in cases {
            assert_eq!(quote(input), want, "quote({input:?})");
        }
    }

    #[test]
    fn quote_bytes_escapes_invalid_utf8() {
        assert_eq!(quote_bytes(b"a\xffb\n"), r#""a\xffb\n""#);
        assert_eq!(quote_bytes("é".as_bytes()), "\"é\"");
    }
}
