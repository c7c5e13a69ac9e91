//! Go's `encoding/json` string encoding, which daprd's actor routes use (`json.Marshal`,
//! `json.NewEncoder`): like protojson's, plus the HTML-safe escapes of `<`, `>`, `&` and of
//! U+2028 / U+2029; and `json.Marshal` of a value decoded into `any` (actor state).

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
            // Go 1.22 and later.
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
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

/// Appends Go's `json.Marshal` of `value` as `encoding/json` decodes JSON into `any`: object
/// members sorted by key (a `map[string]any`; the last of a repeated key kept), every number
/// a `float64` (so `1.0` is `1`, and integers beyond 2^53 are rounded), strings HTML-safe.
pub fn marshal_any(out: &mut String, value: &serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_float(out, n.as_f64().unwrap_or_default()),
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                marshal_any(out, item);
            }
            out.push(']');
        }
        Value::Object(members) => {
            let mut sorted: Vec<_> = members.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_str(out, key);
                out.push(':');
                marshal_any(out, item);
            }
            out.push('}');
        }
    }
}

/// Go's `float64` encoder: the shortest digits that read back, fixed notation for magnitudes
/// in `[1e-6, 1e21)` (and 0), else exponent notation with a signed exponent of at least one
/// digit (`1e+21`, `1e-7`).
fn write_float(out: &mut String, f: f64) {
    let abs = f.abs();
    if abs == 0.0 || (1e-6..1e21).contains(&abs) {
        let _ = write!(out, "{f}");
        return;
    }
    let text = format!("{f:e}");
    match text.split_once('e') {
        Some((mantissa, exp)) if !exp.starts_with('-') => {
            let _ = write!(out, "{mantissa}e+{exp}");
        }
        _ => out.push_str(&text),
    }
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

    fn marshal(json: &str) -> String {
        let mut out = String::new();
        marshal_any(&mut out, &serde_json::from_str(json).unwrap());
        out
    }

    #[test]
    fn marshals_any_like_go() {
        // Members sorted, the last of a repeated key kept, whitespace gone.
        assert_eq!(
            marshal(r#"{ "b": 1, "a": [true, null], "b": 2 }"#),
            r#"{"a":[true,null],"b":2}"#
        );
        // float64: integral values without a fraction, exponents beyond Go's fixed range.
        assert_eq!(
            marshal("[1.0, -0.5, 1e20, 1e21, 123456789e15, 1e-6, 1.5e-7, 9007199254740993]"),
            "[1,-0.5,100000000000000000000,1e+21,1.23456789e+23,0.000001,1.5e-7,9007199254740992]"
        );
        assert_eq!(marshal("0.1"), "0.1");
        assert_eq!(marshal("-0.0"), "-0");
        // HTML-safe strings, Go 1.22's short escapes.
        assert_eq!(
            marshal(r#""<a>&\u0008\u000c\u0001""#),
            r#""\u003ca\u003e\u0026\b\f\u0001""#
        );
    }
}
