//! The bytes daprd puts in the body of `POST /job/<name>` (`dapr-jobs-api.md` §4.4): the JSON
//! text of a `google.protobuf.Value`, or the raw Any value trimmed like Go's
//! `bytes.TrimSpace`.

use bytes::Bytes;
use prost::Message;

use super::Error;
use crate::go::{protojson, text};

/// The type URL daprd decodes and sends as JSON text; data scheduled over HTTP carries it.
pub(crate) use crate::trigger::VALUE_TYPE_URL;

/// The HTTP body for a job's data.
///
/// Errors only for a `google.protobuf.Value` that is corrupt or has no JSON form (NaN,
/// infinities, an unset value inside a struct or list), where daprd fails the delivery too.
pub(crate) fn http_body(data: Option<&prost_types::Any>) -> Result<Bytes, Error> {
    let Some(any) = data else {
        return Ok(Bytes::new());
    };
    if any.type_url != VALUE_TYPE_URL {
        let value = text::trim_space(&any.value);
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
    let mut out = String::with_capacity(any.value.len() + 2);
    protojson::write_value(&mut out, &value).map_err(|e| Error::Data(e.0))?;
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use prost_types::value::Kind;
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
