use prost::Message;
use prost_types::value::Kind;
use prost_types::{Any, Duration, ListValue, Timestamp, Value};

use super::scalar::parse_duration;
use super::*;
use crate::go::protojson::{write_float, write_value};
use crate::proto::common::job_failure_policy::Policy;
use crate::proto::common::{JobFailurePolicy, JobFailurePolicyConstant, JobFailurePolicyDrop};
use crate::proto::internals::JobHttpRequest;
use crate::proto::runtime;

fn parse(body: &str) -> Result<JobHttpRequest, String> {
    parse_job_http_request(body.as_bytes()).map_err(|e| e.to_string())
}

fn value_json(v: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, v)
        .map(|()| out)
        .unwrap_or_else(|e| JsonError::from(e).to_string())
}

#[test]
fn reads_both_field_spellings() {
    let req = parse(
        r#"{"schedule":"@daily","repeats":3,"due_time":"10s","ttl":"11s","overwrite":true,
            "failure_policy":{"constant":{"interval":"1.5s","max_retries":5}}}"#,
    )
    .unwrap_or_default();
    assert_eq!(req.schedule.as_deref(), Some("@daily"));
    assert_eq!(req.repeats, Some(3));
    assert_eq!(req.due_time.as_deref(), Some("10s"));
    assert_eq!(req.ttl.as_deref(), Some("11s"));
    assert_eq!(req.overwrite, Some(true));
    let Some(Policy::Constant(c)) = req.failure_policy.and_then(|p| p.policy) else {
        panic!("constant policy expected");
    };
    assert_eq!(
        c.interval,
        Some(Duration {
            seconds: 1,
            nanos: 500_000_000
        })
    );
    assert_eq!(c.max_retries, Some(5));

    let req = parse(r#"{"dueTime":"0s","failurePolicy":{"drop":{}}}"#).unwrap_or_default();
    assert_eq!(req.due_time.as_deref(), Some("0s"));
    assert!(matches!(
        req.failure_policy.and_then(|p| p.policy),
        Some(Policy::Drop(_))
    ));
}

#[test]
fn repeats_accepts_numbers_and_numeric_strings() {
    for (text, want) in [
        ("3", 3),
        ("\"7\"", 7),
        ("1e2", 100),
        ("3.0", 3),
        ("\"4294967295\"", u32::MAX),
        ("0", 0),
        ("-0", 0),
    ] {
        let req = parse(&format!(r#"{{"repeats":{text}}}"#));
        assert_eq!(req.map(|r| r.repeats), Ok(Some(want)), "{text}");
    }
    for text in ["-1", "1.5", "4294967296", "\" 3\"", "true", "\"x\"", "{}"] {
        let err = parse(&format!(r#"{{"repeats":{text}}}"#)).unwrap_err();
        assert!(
            err.starts_with("proto: (line 1:12): invalid value for uint32 field repeats: "),
            "{text}: {err}"
        );
    }
}

#[test]
fn type_errors_read_like_protojson() {
    assert_eq!(
        parse("[{}]").unwrap_err(),
        "proto: syntax error (line 1:1): unexpected token ["
    );
    assert_eq!(
        parse(r#"{"dueTime": 5}"#).unwrap_err(),
        "proto: (line 1:13): invalid value for string field dueTime: 5"
    );
    assert_eq!(
        parse(r#"{"overwrite":"true"}"#).unwrap_err(),
        r#"proto: (line 1:14): invalid value for bool field overwrite: "true""#
    );
    assert_eq!(
        parse(r#"{"failurePolicy":{"constant":{"interval":"1m"}}}"#).unwrap_err(),
        r#"proto: (line 1:42): invalid google.protobuf.Duration value "1m""#
    );
    assert_eq!(
        parse(r#"{"failurePolicy":5}"#).unwrap_err(),
        "proto: syntax error (line 1:18): unexpected token 5"
    );
    assert_eq!(
        parse("{\"schedule\":\"a\",\n \"schedule\":\"b\"}").unwrap_err(),
        r#"proto: (line 2:2): duplicate field "schedule""#
    );
    assert_eq!(
        parse(r#"{"dueTime":"1s","due_time":"2s"}"#).unwrap_err(),
        r#"proto: (line 1:17): duplicate field "due_time""#
    );
    assert_eq!(
        parse(r#"{"failurePolicy":{"drop":{},"constant":{}}}"#).unwrap_err(),
        r#"proto: (line 1:29): error parsing "constant", oneof dapr.proto.common.v1.JobFailurePolicy.policy is already set"#
    );
    assert_eq!(
        parse(r#"{"schedule":"x""#).unwrap_err(),
        "proto: unexpected EOF"
    );
    // Whitespace only: Go's decoder hands back an empty EOF token (B22).
    assert_eq!(
        parse("  ").unwrap_err(),
        "proto: syntax error (line 1:3): unexpected token "
    );
    assert_eq!(
        parse("\n").unwrap_err(),
        "proto: syntax error (line 2:1): unexpected token "
    );
    assert_eq!(
        parse("{}{}").unwrap_err(),
        "proto: syntax error (line 1:3): unexpected token {"
    );
    assert_eq!(
        parse(r#"{"a":1,}"#).unwrap_err(),
        "proto: syntax error (line 1:8): unexpected token }"
    );
    assert_eq!(
        parse(r#"{"a":tru}"#).unwrap_err(),
        "proto: syntax error (line 1:6): invalid value tru"
    );
    assert_eq!(
        parse(r#"{"data":{"a":1,"a":2}}"#).unwrap_err(),
        r#"proto: (line 1:16): duplicate map key "a""#
    );
}

#[test]
fn null_unsets_fields_but_is_a_value_for_data() {
    let req = parse(r#"{"schedule":null,"repeats":null,"failurePolicy":null,"name":null}"#)
        .unwrap_or_default();
    assert_eq!(req.schedule, None);
    assert_eq!(req.repeats, None);
    assert_eq!(req.failure_policy, None);
    let req = parse(r#"{"data":null}"#).unwrap_or_default();
    assert_eq!(
        req.data,
        Some(Value {
            kind: Some(Kind::NullValue(0))
        })
    );
    // A null still counts for duplicate detection.
    assert!(parse(r#"{"ttl":null,"ttl":"1s"}"#).is_err());
}

#[test]
fn unknown_fields_are_skipped_but_checked() {
    let req =
        parse(r#"{"x":{"y":[1,{"z":null}]},"schedule":"@daily","@type":"q"}"#).unwrap_or_default();
    assert_eq!(req.schedule.as_deref(), Some("@daily"));
    assert!(parse(r#"{"x":[1,]}"#).is_err());
    // Unknown members inside the failure-policy messages too.
    let req = parse(r#"{"failurePolicy":{"drop":{"extra":1},"other":2}}"#).unwrap_or_default();
    assert!(req.failure_policy.is_some());
}

#[test]
fn data_is_any_json_value() {
    let req = parse(
        r#"{"data":{"s":"x\u00e9\ud83d\ude00","n":-1.5e3,"b":false,"l":[1,"2",null],"o":{}}}"#,
    )
    .unwrap_or_default();
    let data = req.data.unwrap_or_default();
    assert_eq!(
        value_json(&data),
        r#"{"b":false,"l":[1,"2",null],"n":-1500,"o":{},"s":"xé😀"}"#
    );
    // An Any-looking object stays a Struct; a JSON string stays a string.
    let req = parse(
        r#"{"data":{"@type":"type.googleapis.com/google.protobuf.StringValue","value":"x"}}"#,
    )
    .unwrap_or_default();
    assert!(matches!(
        req.data.and_then(|v| v.kind),
        Some(Kind::StructValue(_))
    ));
    let req = parse(r#"{"data":"{\"a\":1}"}"#).unwrap_or_default();
    assert_eq!(
        req.data.and_then(|v| v.kind),
        Some(Kind::StringValue(r#"{"a":1}"#.to_owned()))
    );
}

#[test]
fn bad_strings_are_errors() {
    assert!(parse("{\"schedule\":\"a\u{1}\"}").is_err());
    assert_eq!(
        parse(r#"{"failurePolicy":{"constant":{"interval":"315576000001s"}}}"#).unwrap_err(),
        r#"proto: (line 1:42): google.protobuf.Duration value out of range: "315576000001s""#
    );
    // Errors inside a string are placed at its opening quote; a control byte is a rune to
    // `%q` (B31).
    assert_eq!(
        parse(r#"{"schedule":"@daily","data":"\x41"}"#).unwrap_err(),
        r#"proto: syntax error (line 1:29): invalid escape code "\\x" in string"#
    );
    assert_eq!(
        parse("{\"schedule\":\"@daily\",\"data\":\"\t\"}").unwrap_err(),
        r"proto: syntax error (line 1:29): invalid character '\t' in string"
    );
    assert_eq!(
        parse(r#"{"data":"ab\u12"}"#).unwrap_err(),
        r#"proto: syntax error (line 1:9): invalid escape code "\\u12\"}" in string"#
    );
    assert!(parse(r#"{"schedule":"\ud800"}"#).is_err());
    assert!(parse_job_http_request(b"{\"schedule\":\"\xff\"}").is_err());
}

#[test]
fn deep_nesting_is_refused_without_overflowing() {
    let deep = format!(r#"{{"data":{}1{}}}"#, "[".repeat(5000), "]".repeat(5000));
    let err = parse(&deep).unwrap_err();
    // Go's text has no position (B30).
    assert_eq!(err, "proto: exceeded max recursion depth");
    // Nesting prost could not decode again is refused too.
    let deep = format!(r#"{{"data":{}1{}}}"#, "[".repeat(60), "]".repeat(60));
    assert!(parse(&deep).is_err());
    let ok = format!(r#"{{"data":{}1{}}}"#, "[".repeat(20), "]".repeat(20));
    assert!(parse(&ok).is_ok());
    // Objects cost prost the most: 33 levels decode again, 34 do not. Around the depth up to
    // which the check is skipped, the outcome is the same as with the check.
    let objects = |n: usize| format!(r#"{{"data":{}1{}}}"#, r#"{"a":"#.repeat(n), "}".repeat(n));
    for n in 1..=33 {
        let req = parse(&objects(n)).unwrap();
        let data = req.data.unwrap();
        assert!(
            Value::decode(data.encode_to_vec().as_slice()).is_ok(),
            "{n}"
        );
    }
    assert!(parse(&objects(34)).is_err());
}

#[test]
fn durations_follow_protojson() {
    for (text, secs, nanos) in [
        ("0s", 0, 0),
        ("1s", 1, 0),
        ("1.5s", 1, 500_000_000),
        ("-0.001s", 0, -1_000_000),
        ("+2s", 2, 0),
        (".5s", 0, 500_000_000),
        ("1.000000001s", 1, 1),
    ] {
        assert_eq!(
            parse_duration(text),
            Some(Duration {
                seconds: secs,
                nanos
            }),
            "{text}"
        );
    }
    for text in [
        "1m",
        "s",
        "-s",
        "01s",
        "1.0000000001s",
        "1",
        "1.5",
        " 1s",
        "1e3s",
    ] {
        assert_eq!(parse_duration(text), None, "{text}");
    }
    for (secs, nanos, text) in [
        (1, 0, "1s"),
        (1, 500_000_000, "1.500s"),
        (0, 1000, "0.000001s"),
        (3, 1, "3.000000001s"),
        (-1, -500_000_000, "-1.500s"),
        (0, -1, "-0.000000001s"),
        (0, 0, "0s"),
    ] {
        assert_eq!(
            format_duration(&Duration {
                seconds: secs,
                nanos
            })
            .as_deref(),
            Ok(text)
        );
    }
    assert!(
        format_duration(&Duration {
            seconds: 1,
            nanos: -1
        })
        .is_err()
    );
}

#[test]
fn job_json_is_protojson() {
    let data = Value {
        kind: Some(Kind::StringValue("hello world".to_owned())),
    };
    let job = runtime::Job {
        name: "test".to_owned(),
        schedule: Some("@every 1m".to_owned()),
        repeats: Some(123),
        due_time: Some("1000s".to_owned()),
        ttl: Some("123s".to_owned()),
        data: Some(value_to_any(&data)),
        failure_policy: Some(JobFailurePolicy {
            policy: Some(Policy::Constant(JobFailurePolicyConstant {
                interval: Some(Duration {
                    seconds: 3,
                    nanos: 0,
                }),
                max_retries: Some(5),
            })),
        }),
    };
    assert_eq!(
        job_to_json(&job).as_deref(),
        Ok(concat!(
            r#"{"name":"test","schedule":"@every 1m","repeats":123,"dueTime":"1000s","ttl":"123s","#,
            r#""data":{"@type":"type.googleapis.com/google.protobuf.Value","value":"hello world"},"#,
            r#""failurePolicy":{"constant":{"interval":"3s","maxRetries":5}}}"#
        ))
    );
    let bare = runtime::Job {
        failure_policy: Some(JobFailurePolicy {
            policy: Some(Policy::Drop(JobFailurePolicyDrop {})),
        }),
        schedule: Some(String::new()),
        ..Default::default()
    };
    assert_eq!(
        job_to_json(&bare).as_deref(),
        Ok(r#"{"schedule":"","failurePolicy":{"drop":{}}}"#)
    );
}

fn any(type_name: &str, value: Vec<u8>) -> Any {
    Any {
        type_url: format!("type.googleapis.com/google.protobuf.{type_name}"),
        value,
    }
}

fn any_json(a: &Any) -> Result<String, String> {
    let mut out = String::new();
    write_any(&mut out, a)
        .map(|()| out)
        .map_err(|e| e.to_string())
}

#[test]
fn any_renders_well_known_types() {
    let cases: Vec<(Any, &str)> = vec![
        (Any::default(), "{}"),
        (any("StringValue", "x".to_owned().encode_to_vec()), r#""x""#),
        (
            any("BytesValue", b"hi!".to_vec().encode_to_vec()),
            r#""aGkh""#,
        ),
        (any("Int64Value", (-5i64).encode_to_vec()), r#""-5""#),
        (any("UInt64Value", 5u64.encode_to_vec()), r#""5""#),
        (any("Int32Value", (-5i32).encode_to_vec()), "-5"),
        (any("UInt32Value", 7u32.encode_to_vec()), "7"),
        (any("BoolValue", true.encode_to_vec()), "true"),
        (any("DoubleValue", 1.5f64.encode_to_vec()), "1.5"),
        (any("DoubleValue", f64::NAN.encode_to_vec()), r#""NaN""#),
        (any("FloatValue", 0.1f32.encode_to_vec()), "0.1"),
        (any("Empty", Vec::new()), "{}"),
        (
            any(
                "Duration",
                Duration {
                    seconds: 90,
                    nanos: 0,
                }
                .encode_to_vec(),
            ),
            r#""90s""#,
        ),
        (
            any(
                "Timestamp",
                Timestamp {
                    seconds: 1_700_000_000,
                    nanos: 5_000_000,
                }
                .encode_to_vec(),
            ),
            r#""2023-11-14T22:13:20.005Z""#,
        ),
        (
            any(
                "ListValue",
                ListValue {
                    values: vec![Value {
                        kind: Some(Kind::NumberValue(1e21)),
                    }],
                }
                .encode_to_vec(),
            ),
            "[1e+21]",
        ),
    ];
    for (a, value) in cases {
        let want = if a.type_url.is_empty() {
            value.to_owned()
        } else {
            format!(r#"{{"@type":"{}","value":{value}}}"#, a.type_url)
        };
        assert_eq!(any_json(&a), Ok(want));
    }
}

#[test]
fn any_errors_are_protojsons() {
    assert_eq!(
        any_json(&Any {
            type_url: "type.googleapis.com/foo.Bar".to_owned(),
            value: vec![1],
        }),
        Err(r#"proto: google.protobuf.Any: unable to resolve "type.googleapis.com/foo.Bar": not found"#.to_owned())
    );
    assert_eq!(
        any_json(&Any {
            type_url: String::new(),
            value: b"{}".to_vec(),
        }),
        Err("proto: google.protobuf.Any: type_url is not set".to_owned())
    );
    // v1.18's broken "no data" Any: a Value with no kind.
    assert_eq!(
        any_json(&any("Value", Vec::new())),
        Err("proto: google.protobuf.Value: none of the oneof fields is set".to_owned())
    );
    assert!(any_json(&any("Value", vec![0xff])).is_err());
}

#[test]
fn jobsds_views_show_daprds_no_data_as_none_where_dapr_fails() {
    let job = runtime::Job {
        name: "report".into(),
        schedule: Some("@daily".into()),
        data: Some(any("Value", Vec::new())),
        ..runtime::Job::default()
    };
    // Dapr's GET: daprd's error, byte for byte.
    assert_eq!(
        job_to_json(&job).map_err(|e| e.to_string()),
        Err("proto: google.protobuf.Value: none of the oneof fields is set".to_owned())
    );
    assert_eq!(
        view_job_to_json(&job).unwrap(),
        r#"{"name":"report","schedule":"@daily"}"#
    );
    // Data with a JSON form is shown as Dapr shows it; other failures stay failures.
    let with = runtime::Job {
        data: Some(any("StringValue", "x".to_owned().encode_to_vec())),
        ..job.clone()
    };
    assert_eq!(
        view_job_to_json(&with).unwrap(),
        job_to_json(&with).unwrap()
    );
    let broken = runtime::Job {
        data: Some(any("Value", vec![0xff])),
        ..job
    };
    assert!(view_job_to_json(&broken).is_err());
}

#[test]
fn floats_print_like_go() {
    for (n, want) in [
        (100.0, "100"),
        (0.1, "0.1"),
        (-0.0, "-0"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1.5e-7, "1.5e-7"),
        (1e-6, "0.000001"),
        (123456789.125, "123456789.125"),
    ] {
        let mut out = String::new();
        write_float(&mut out, n, false);
        assert_eq!(out, want, "{n}");
    }
}

#[test]
fn data_is_stored_as_gos_wire_bytes() {
    // Go writes a map entry's key and value even when empty; prost leaves them out (B13,
    // daprd 1.18.2's bytes seen by e2e/dapr/differential.sh).
    let stored = |body: &str| value_to_any(&parse(body).unwrap().data.unwrap()).value;
    let hex = |bytes: Vec<u8>| -> String { bytes.iter().map(|b| format!("{b:02x}")).collect() };
    assert_eq!(hex(stored(r#"{"data":{"":""}}"#)), "2a080a060a0012021a00");
    // Without empty keys the bytes are prost's, and prost reads Go's back.
    let plain = parse(r#"{"data":{"a":[1,"",{"b":null}]}}"#)
        .unwrap()
        .data
        .unwrap();
    assert_eq!(value_to_any(&plain).value, plain.encode_to_vec());
    let nested = parse(r#"{"data":{"":{"":null}}}"#).unwrap().data.unwrap();
    let bytes = value_to_any(&nested).value;
    assert_eq!(Value::decode(bytes.as_slice()).unwrap(), nested);
}

#[test]
fn messages_daprd_links_render_inline() {
    // daprd renders any message linked into it (B11, seen by e2e/dapr/differential.sh):
    // `@type` first, then the message's members.
    let policy = JobFailurePolicy {
        policy: Some(Policy::Drop(JobFailurePolicyDrop {})),
    };
    assert_eq!(
        any_json(&Any {
            type_url: "type.googleapis.com/dapr.proto.common.v1.JobFailurePolicy".to_owned(),
            value: policy.encode_to_vec(),
        }),
        Ok(
            r#"{"@type":"type.googleapis.com/dapr.proto.common.v1.JobFailurePolicy","drop":{}}"#
                .to_owned()
        )
    );
    let job = runtime::Job {
        name: "j".to_owned(),
        schedule: Some("@daily".to_owned()),
        ..Default::default()
    };
    assert_eq!(
        any_json(&Any {
            type_url: "type.googleapis.com/dapr.proto.runtime.v1.Job".to_owned(),
            value: job.encode_to_vec(),
        }),
        Ok(
            r#"{"@type":"type.googleapis.com/dapr.proto.runtime.v1.Job","name":"j","schedule":"@daily"}"#
                .to_owned()
        )
    );
    // google.rpc.ErrorInfo: reason 1, domain 2, metadata 3 (keys in order).
    let mut info = Vec::new();
    for (tag, text) in [(1u8, "R"), (2, "dapr.io")] {
        info.extend_from_slice(&[tag << 3 | 2, text.len() as u8]);
        info.extend_from_slice(text.as_bytes());
    }
    for (k, v) in [("b", "2"), ("a", "1")] {
        info.extend_from_slice(&[0x1a, 6, 0x0a, 1, k.as_bytes()[0], 0x12, 1, v.as_bytes()[0]]);
    }
    assert_eq!(
        any_json(&Any {
            type_url: "type.googleapis.com/google.rpc.ErrorInfo".to_owned(),
            value: info,
        }),
        Ok(r#"{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"R","domain":"dapr.io","metadata":{"a":"1","b":"2"}}"#.to_owned())
    );
    // An empty message: only its type.
    assert_eq!(
        any_json(&Any {
            type_url: "type.googleapis.com/dapr.proto.common.v1.JobFailurePolicy".to_owned(),
            value: Vec::new(),
        }),
        Ok(r#"{"@type":"type.googleapis.com/dapr.proto.common.v1.JobFailurePolicy"}"#.to_owned())
    );
}
