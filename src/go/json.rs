//! Go's `encoding/json` string encoding, which daprd's actor routes use (`json.Marshal`,
//! `json.NewEncoder`): like protojson's, plus the HTML-safe escapes of `<`, `>`, `&` and of
//! U+2028 / U+2029.

use std::fmt::Write as _;

/// Appends `s` as Go's `json.Marshal` writes a string.
pub fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_go_json_marshal() {
        let mut out = String::new();
        write_str(&mut out, "a\"b\\c\n<x>&\u{1}\u{2028}µs");
        assert_eq!(out, r#""a\"b\\c\n\u003cx\u003e\u0026\u0001\u2028µs""#);
    }
}
