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

/// Go's `json.Marshal` of a `json.RawMessage` (its `appendCompact` with HTML escaping):
/// `raw` without the whitespace between tokens, `<`, `>`, `&`, U+2028 and U+2029 written as
/// `\u` escapes, everything else byte for byte. `None` when `raw` is not one JSON value (Go
/// fails the whole Marshal then).
pub fn compact(raw: &[u8]) -> Option<Vec<u8>> {
    serde_json::from_slice::<serde::de::IgnoredAny>(raw).ok()?;
    let mut out = Vec::with_capacity(raw.len());
    let (mut in_string, mut escaped) = (false, false);
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        match b {
            b'<' | b'>' | b'&' => {
                let _ = write!(HexOut(&mut out), "\\u{:04x}", b);
            }
            // U+2028 / U+2029 in UTF-8.
            0xE2 if raw.get(i + 1) == Some(&0x80)
                && matches!(raw.get(i + 2), Some(0xA8 | 0xA9)) =>
            {
                out.extend_from_slice(if raw[i + 2] == 0xA8 {
                    b"\\u2028"
                } else {
                    b"\\u2029"
                });
                i += 2;
            }
            b' ' | b'\t' | b'\n' | b'\r' if !in_string => {}
            _ => out.push(b),
        }
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if b == b'"' {
            in_string = true;
        }
        i += 1;
    }
    Some(out)
}

/// `write!` into a byte vector.
struct HexOut<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for HexOut<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compacts_like_go_json_marshal_of_raw_message() {
        assert_eq!(
            compact(br#"{  "foo": [ 12, 4 ] }"#).unwrap(),
            br#"{"foo":[12,4]}"#
        );
        assert_eq!(
            compact(br#" "a b\" <&>\u2028" "#).unwrap(),
            br#""a b\" \u003c\u0026\u003e\u2028""#
        );
        assert_eq!(compact("\"\u{2028}\"".as_bytes()).unwrap(), br#""\u2028""#);
        assert_eq!(compact(b"null").unwrap(), b"null");
        assert_eq!(compact(b"{"), None);
        assert_eq!(compact(b"1 2"), None);
    }

    #[test]
    fn escapes_like_go_json_marshal() {
        let mut out = String::new();
        write_str(&mut out, "a\"b\\c\n<x>&\u{1}\u{2028}µs");
        assert_eq!(out, r#""a\"b\\c\n\u003cx\u003e\u0026\u0001\u2028µs""#);
    }
}
