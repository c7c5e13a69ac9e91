//! The bytes daprd puts in the body of `POST /job/<name>` (`dapr-jobs-api.md` §4.4): the JSON
//! text of a `google.protobuf.Value`, or the raw Any value trimmed like Go's
//! `bytes.TrimSpace`.

use bytes::Bytes;
use prost::Message;
use prost_types::value::Kind;

use super::Error;

/// The type URL daprd decodes and sends as JSON text; data scheduled over HTTP carries it.
pub(crate) const VALUE_TYPE_URL: &str = "type.googleapis.com/google.protobuf.Value";

/// The HTTP body for a job's data.
///
/// Errors only for a `google.protobuf.Value` that is corrupt or has no JSON form (NaN,
/// infinities, an unset value inside a struct or list), where daprd fails the delivery too.
pub(crate) fn http_body(data: Option<&prost_types::Any>) -> Result<Bytes, Error> {
    let Some(any) = data else {
        return Ok(Bytes::new());
    };
    if any.type_url != VALUE_TYPE_URL {
        let value = trim_space(&any.value);
        // Most bodies are already trimmed: share the stored buffer instead of copying it.
        return Ok(if value.len() == any.value.len() {
            Bytes::from(any.value.clone())
        } else {
            Bytes::copy_from_slice(value)
        });
    }
    let value = prost_types::Value::decode(any.value.as_slice())
        .map_err(|e| Error::Data(format!("google.protobuf.Value: {e}")))?;
    // An unset top-level value is what an HTTP-scheduled job without data stores; daprd
    // (HEAD, #10251) delivers it as an empty body rather than failing.
    if value.kind.is_none() {
        return Ok(Bytes::new());
    }
    let mut out = Vec::with_capacity(any.value.len() + 2);
    write_value(&mut out, &value)?;
    Ok(Bytes::from(out))
}

/// Appends protojson's compact form of `value`, which is what Go's `structpb.Value.MarshalJSON`
/// gives apart from its deliberately random extra spaces.
fn write_value(out: &mut Vec<u8>, value: &prost_types::Value) -> Result<(), Error> {
    match &value.kind {
        None => Err(Error::Data(
            "google.protobuf.Value: none of the oneof fields is set".into(),
        )),
        Some(Kind::NullValue(_)) => {
            out.extend_from_slice(b"null");
            Ok(())
        }
        Some(Kind::BoolValue(b)) => {
            out.extend_from_slice(if *b { b"true" } else { b"false" });
            Ok(())
        }
        Some(Kind::NumberValue(n)) => write_number(out, *n),
        Some(Kind::StringValue(s)) => {
            write_string(out, s);
            Ok(())
        }
        Some(Kind::StructValue(s)) => {
            out.push(b'{');
            // BTreeMap iterates in byte order of the keys, the order protojson sorts them in.
            for (i, (key, field)) in s.fields.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(out, key);
                out.push(b':');
                write_value(out, field)?;
            }
            out.push(b'}');
            Ok(())
        }
        Some(Kind::ListValue(list)) => {
            out.push(b'[');
            for (i, item) in list.values.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item)?;
            }
            out.push(b']');
            Ok(())
        }
    }
}

/// Go's protojson number form: shortest round-trip digits, plain notation for magnitudes in
/// [1e-6, 1e21) (so `123`, not serde_json's `123.0`), otherwise `1e+21` / `1e-7`.
fn write_number(out: &mut Vec<u8>, n: f64) -> Result<(), Error> {
    if !n.is_finite() {
        return Err(Error::Data(format!(
            "google.protobuf.Value.number_value: invalid {n} value"
        )));
    }
    let abs = n.abs();
    let text = if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let e = format!("{n:e}");
        match e.split_once('e') {
            Some((mantissa, exp)) if !exp.starts_with('-') => format!("{mantissa}e+{exp}"),
            _ => e,
        }
    } else {
        format!("{n}")
    };
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

/// A JSON string with protojson's escapes; serde_json escapes exactly the same characters
/// (`"`, `\`, controls below U+0020 as `\b \f \n \r \t` or lowercase `\u00xx`).
fn write_string(out: &mut Vec<u8>, s: &str) {
    // Writing a &str into a Vec cannot fail; fall back to an escaped literal form just in case.
    if serde_json::to_writer(&mut *out, s).is_err() {
        out.extend_from_slice(b"\"\"");
    }
}

/// Go's `bytes.TrimSpace`: drops leading and trailing white space runes (ASCII `\t \n \v \f
/// \r` and space, U+0085, U+00A0 and the other Unicode `White_Space` runes). Trimming stops at
/// the first rune that is not white space, and at bytes that are not valid UTF-8.
pub(crate) fn trim_space(s: &[u8]) -> &[u8] {
    let mut start = 0;
    while let Some((c, len)) = decode_first(&s[start..]) {
        if !is_space(c) {
            break;
        }
        start += len;
    }
    let mut end = s.len();
    while end > start {
        match decode_last(&s[start..end]) {
            Some((c, len)) if is_space(c) => end -= len,
            _ => break,
        }
    }
    &s[start..end]
}

/// Go's `unicode.IsSpace`.
fn is_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n'
            | '\u{0B}'
            | '\u{0C}'
            | '\r'
            | ' '
            | '\u{85}'
            | '\u{A0}'
            | '\u{1680}'
            | '\u{2000}'
            ..='\u{200A}' | '\u{2028}' | '\u{2029}' | '\u{202F}' | '\u{205F}' | '\u{3000}'
    )
}

/// Length of the UTF-8 sequence a lead byte announces (0 for a byte that cannot start one).
fn utf8_len(lead: u8) -> usize {
    match lead {
        0x00..=0x7F => 1,
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => 0,
    }
}

/// The first rune of `s` and its length, or `None` if `s` is empty or starts with invalid
/// UTF-8 (Go decodes that as `RuneError`, which is not a space).
fn decode_first(s: &[u8]) -> Option<(char, usize)> {
    let len = utf8_len(*s.first()?);
    let bytes = s.get(..len).filter(|_| len > 0)?;
    let c = std::str::from_utf8(bytes).ok()?.chars().next()?;
    Some((c, len))
}

/// The last rune of `s` and its length, following Go's `utf8.DecodeLastRune`: look back at most
/// four bytes for a rune start, and accept only a valid rune that ends exactly at the end.
fn decode_last(s: &[u8]) -> Option<(char, usize)> {
    let end = s.len();
    let last = *s.last()?;
    if last < 0x80 {
        return Some((char::from(last), 1));
    }
    let limit = end.saturating_sub(4);
    let mut start = end - 1;
    while start > limit && (s[start] & 0xC0) == 0x80 {
        start -= 1;
    }
    let (c, len) = decode_first(&s[start..])?;
    (start + len == end).then_some((c, len))
}

#[cfg(test)]
mod tests {
    use prost_types::{ListValue, Struct, Value};

    use super::*;

    fn value_any(kind: Option<Kind>) -> prost_types::Any {
        prost_types::Any {
            type_url: VALUE_TYPE_URL.into(),
            value: Value { kind }.encode_to_vec(),
        }
    }

    fn body(kind: Kind) -> String {
        let b = http_body(Some(&value_any(Some(kind)))).expect("encodable");
        String::from_utf8(b.to_vec()).expect("utf-8")
    }

    #[test]
    fn values_become_go_protojson_text() {
        assert_eq!(body(Kind::StringValue("someData".into())), r#""someData""#);
        assert_eq!(body(Kind::NumberValue(123.0)), "123");
        assert_eq!(body(Kind::NumberValue(-1.5)), "-1.5");
        assert_eq!(body(Kind::NumberValue(0.1)), "0.1");
        assert_eq!(body(Kind::NumberValue(-0.0)), "-0");
        assert_eq!(body(Kind::NumberValue(1e20)), "100000000000000000000");
        assert_eq!(body(Kind::NumberValue(1e21)), "1e+21");
        assert_eq!(body(Kind::NumberValue(1.5e300)), "1.5e+300");
        assert_eq!(body(Kind::NumberValue(1e-6)), "0.000001");
        assert_eq!(body(Kind::NumberValue(1e-7)), "1e-7");
        assert_eq!(body(Kind::NumberValue(2.5e-10)), "2.5e-10");
        assert_eq!(body(Kind::BoolValue(true)), "true");
        assert_eq!(body(Kind::NullValue(0)), "null");
        assert_eq!(
            body(Kind::StringValue("a\"b\\c\n\u{1}\u{7f}é".into())),
            "\"a\\\"b\\\\c\\n\\u0001\u{7f}é\""
        );
        let mut fields = std::collections::BTreeMap::new();
        fields.insert(
            "expression".to_string(),
            Value {
                kind: Some(Kind::StringValue("val".into())),
            },
        );
        fields.insert(
            "a".to_string(),
            Value {
                kind: Some(Kind::ListValue(ListValue {
                    values: vec![
                        Value {
                            kind: Some(Kind::NumberValue(1.0)),
                        },
                        Value {
                            kind: Some(Kind::BoolValue(false)),
                        },
                    ],
                })),
            },
        );
        assert_eq!(
            body(Kind::StructValue(Struct { fields })),
            r#"{"a":[1,false],"expression":"val"}"#
        );
    }

    #[test]
    fn values_without_json_form_fail() {
        for kind in [
            Kind::NumberValue(f64::NAN),
            Kind::NumberValue(f64::INFINITY),
            Kind::ListValue(ListValue {
                values: vec![Value { kind: None }],
            }),
        ] {
            assert!(http_body(Some(&value_any(Some(kind)))).is_err());
        }
        let corrupt = prost_types::Any {
            type_url: VALUE_TYPE_URL.into(),
            value: vec![0xFF, 0xFF, 0xFF],
        };
        assert!(http_body(Some(&corrupt)).is_err());
    }

    #[test]
    fn unset_value_and_missing_data_give_an_empty_body() {
        assert!(http_body(Some(&value_any(None))).expect("ok").is_empty());
        assert!(http_body(None).expect("ok").is_empty());
        assert!(
            http_body(Some(&prost_types::Any::default()))
                .expect("ok")
                .is_empty()
        );
    }

    #[test]
    fn trim_space_matches_go() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"", b""),
            (b" \t\n\x0b\x0c\r", b""),
            (b"  hello world \n", b"hello world"),
            // wrapperspb.String("hello world"): 0x0a 0x0b are \n \v.
            (b"\x0a\x0bhello world", b"hello world"),
            // wrapperspb.Int64(123): 0x08 is not a space.
            (b"\x08\x7b", b"\x08{"),
            ("\u{a0}\u{3000}x\u{2028}\u{85}".as_bytes(), b"x"),
            ("\u{200b}x".as_bytes(), "\u{200b}x".as_bytes()),
            // Invalid UTF-8 stops trimming on both sides.
            (b"\xff \n", b"\xff"),
            (b" \x80x\x80 ", b"\x80x\x80"),
            // A truncated U+2028 (E2 80 A8) is not a space.
            (b"x\x80\xa8", b"x\x80\xa8"),
            (b"\xe2\x80 x", b"\xe2\x80 x"),
            // Overlong encodings and surrogates are invalid, not spaces.
            (b"\xc0\xa0x", b"\xc0\xa0x"),
            (b"x\xed\xa0\x80", b"x\xed\xa0\x80"),
            (b"\x1c\x1fx", b"\x1c\x1fx"),
        ];
        for (input, want) in cases {
            assert_eq!(trim_space(input), *want, "input {input:?}");
        }
    }

    #[test]
    fn other_type_urls_send_trimmed_raw_bytes() {
        let any = prost_types::Any {
            type_url: "type.googleapis.com/google.type.Expr".into(),
            value: br#"{"expression": "val"}"#.to_vec(),
        };
        assert_eq!(
            http_body(Some(&any)).expect("ok").as_ref(),
            br#"{"expression": "val"}"#
        );
    }
}
