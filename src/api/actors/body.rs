//! The JSON bodies of daprd's reminder and timer routes, read as Go's `encoding/json` reads
//! them into `CreateReminderRequest` / `CreateTimerRequest` (`pkg/actors/api`): keys match
//! case-insensitively (an exact match wins), unknown keys are ignored, `data` is kept as the
//! raw JSON it was sent as, and `null` leaves a field unset.

use std::collections::HashMap;

use serde_json::value::RawValue;

use crate::go::json_stream;
use crate::proto::common::{
    JobFailurePolicy, JobFailurePolicyConstant, JobFailurePolicyDrop, job_failure_policy::Policy,
};
use crate::schedule::duration;

/// A reminder or timer body.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ActorBody {
    /// `data`: the raw JSON value as sent (`None` when absent).
    pub data: Option<Vec<u8>>,
    /// `dueTime`.
    pub due_time: Option<String>,
    /// `period`.
    pub period: Option<String>,
    /// `ttl`.
    pub ttl: Option<String>,
    /// `callback` (timers).
    pub callback: Option<String>,
    /// `overwrite` (reminders; `None` = true).
    pub overwrite: Option<bool>,
    /// `failurePolicy` or `failure_policy` (reminders).
    pub failure_policy: Option<JobFailurePolicy>,
}

/// Why a body was refused; the text follows Go's `encoding/json` where it has one, and
/// goes after `failed deserializing HTTP body: `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BodyError(pub String);

/// How `reflect` names the struct daprd's `CreateReminderRequest.UnmarshalJSON` decodes into,
/// as Go's type errors for a body that is not an object print it.
const REMINDER_GO_TYPE: &str = "struct { Data json.RawMessage \"json:\\\"data\\\"\"; \
     FailurePolicy *common.JobFailurePolicy \"json:\\\"failure_policy,omitempty\\\"\"; \
     *api.createReminderAlias }";

/// The JSON fields of that struct: its own two, then those promoted from the embedded
/// `*createReminderAlias` (`Name`, `ActorType`, `ActorID` have no tag; `ConcurrencyKey` is
/// `json:"-"`; the alias's `data` and `failure_policy` are shadowed).
const REMINDER_FIELDS: [&str; 9] = [
    "data",
    "failure_policy",
    "Name",
    "ActorType",
    "ActorID",
    "dueTime",
    "period",
    "ttl",
    "overwrite",
];

/// Reads a reminder body as daprd does (`json.NewDecoder(r.Body).Decode` into
/// `CreateReminderRequest`, whose `UnmarshalJSON` runs `encoding/json` on an anonymous
/// struct): the first JSON value only, Go's syntax errors, bytes that are not UTF-8 read as
/// U+FFFD, keys matched exactly or else case-insensitively, the last of a repeated key kept,
/// and the first type error reported in Go's words. `failure_policy` goes through
/// `encoding/json` into the generated proto struct, whose oneof no JSON names: an object
/// is an empty policy, whatever it holds; `failurePolicy` is no field at all.
pub fn parse_reminder(body: &[u8]) -> Result<ActorBody, BodyError> {
    let value = json_stream::first_value(body).map_err(BodyError)?;
    let text = json_stream::lossy(value);
    let kind = json_kind(&text);
    if kind != "object" {
        return Err(BodyError(format!(
            "json: cannot unmarshal {kind} into Go value of type {REMINDER_GO_TYPE}"
        )));
    }
    let Entries(entries) = serde_json::from_str(&text).map_err(|e| BodyError(e.to_string()))?;
    let mut out = ActorBody::default();
    for (key, raw) in entries {
        let Some(field) = go_field(&REMINDER_FIELDS, &key) else {
            continue;
        };
        let kind = json_kind(raw.get());
        match field {
            "data" => out.data = Some(raw.get().as_bytes().to_vec()),
            "failure_policy" => match kind {
                "null" => out.failure_policy = None,
                "object" => {
                    let Entries(inner) =
                        serde_json::from_str(raw.get()).map_err(|e| BodyError(e.to_string()))?;
                    for (key, raw) in inner {
                        let kind = json_kind(raw.get());
                        if go_field(&["Policy"], &key).is_some() && kind != "null" {
                            return Err(BodyError(format!(
                                "json: cannot unmarshal {kind} into Go struct field \
                                 JobFailurePolicy.failure_policy.Policy of type \
                                 common.isJobFailurePolicy_Policy"
                            )));
                        }
                    }
                    out.failure_policy = Some(JobFailurePolicy { policy: None });
                }
                _ => {
                    return Err(BodyError(format!(
                        "json: cannot unmarshal {kind} into Go struct field .failure_policy \
                         of type common.JobFailurePolicy"
                    )));
                }
            },
            "overwrite" => match kind {
                "null" => out.overwrite = None,
                "bool" => out.overwrite = Some(raw.get() == "true"),
                _ => return Err(alias_type_error(kind, field, "bool")),
            },
            _ => {
                let text = match kind {
                    "null" => continue,
                    "string" => serde_json::from_str::<String>(raw.get())
                        .map_err(|e| BodyError(e.to_string()))?,
                    _ => return Err(alias_type_error(kind, field, "string")),
                };
                match field {
                    "dueTime" => out.due_time = Some(text),
                    "period" => out.period = Some(text),
                    "ttl" => out.ttl = Some(text),
                    // The actor and the name come from the path.
                    _ => {}
                }
            }
        }
    }
    Ok(out)
}

/// Go's type error for a field promoted from `*createReminderAlias`.
fn alias_type_error(kind: &str, field: &str, go_type: &str) -> BodyError {
    BodyError(format!(
        "json: cannot unmarshal {kind} into Go struct field .createReminderAlias.{field} of \
         type {go_type}"
    ))
}

/// The field `key` names: an exact match, else one equal but for ASCII case (Go's
/// `encoding/json` lookup).
pub(super) fn go_field(fields: &[&'static str], key: &str) -> Option<&'static str> {
    fields
        .iter()
        .find(|f| **f == key)
        .or_else(|| fields.iter().find(|f| f.eq_ignore_ascii_case(key)))
        .copied()
}

/// How Go's type errors name the kind of a (valid) JSON value.
pub(super) fn json_kind(raw: &str) -> &'static str {
    match raw.trim_start().as_bytes().first() {
        Some(b'"') => "string",
        Some(b'{') => "object",
        Some(b'[') => "array",
        Some(b't' | b'f') => "bool",
        Some(b'n') => "null",
        _ => "number",
    }
}

/// An object's members in the order they were written (repeated keys included).
pub(super) struct Entries<'a>(pub(super) Vec<(String, &'a RawValue)>);

impl<'de> serde::Deserialize<'de> for Entries<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Entries<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, &'de RawValue>()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// Reads a timer body. An empty body is Go's `EOF`.
pub fn parse(body: &[u8]) -> Result<ActorBody, BodyError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(BodyError("EOF".to_owned()));
    }
    let fields: HashMap<String, &RawValue> =
        serde_json::from_slice(body).map_err(|e| BodyError(go_syntax_text(&e)))?;
    let find = |name: &str| -> Option<&RawValue> {
        fields.get(name).copied().or_else(|| {
            fields
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| *v)
        })
    };
    let mut out = ActorBody {
        data: find("data").map(|raw| raw.get().as_bytes().to_vec()),
        ..ActorBody::default()
    };
    out.due_time = string_field(find("dueTime"), "dueTime")?;
    out.period = string_field(find("period"), "period")?;
    out.ttl = string_field(find("ttl"), "ttl")?;
    out.callback = string_field(find("callback"), "callback")?;
    if let Some(raw) = find("overwrite").filter(|r| r.get() != "null") {
        out.overwrite = Some(
            serde_json::from_str::<bool>(raw.get())
                .map_err(|_| type_error(raw, "overwrite", "bool"))?,
        );
    }
    let policy = find("failurePolicy").or_else(|| find("failure_policy"));
    if let Some(raw) = policy.filter(|r| r.get() != "null") {
        out.failure_policy = Some(failure_policy(raw)?);
    }
    Ok(out)
}

/// A string field; `null` or absent is unset.
fn string_field(raw: Option<&RawValue>, name: &str) -> Result<Option<String>, BodyError> {
    match raw {
        None => Ok(None),
        Some(raw) if raw.get() == "null" => Ok(None),
        Some(raw) => serde_json::from_str::<String>(raw.get())
            .map(Some)
            .map_err(|_| type_error(raw, name, "string")),
    }
}

/// `{"drop":{}}` or `{"constant":{"interval":"<Go duration>","maxRetries":n}}` (the Dapr
/// SDKs' shape; `max_retries` is read too). An empty object is Dapr's default (no policy).
fn failure_policy(raw: &RawValue) -> Result<JobFailurePolicy, BodyError> {
    let value: serde_json::Value =
        serde_json::from_str(raw.get()).map_err(|e| BodyError(go_syntax_text(&e)))?;
    let bad = |why: &str| BodyError(format!("invalid failurePolicy: {why}"));
    let obj = value.as_object().ok_or_else(|| bad("not an object"))?;
    let get = |o: &serde_json::Map<String, serde_json::Value>, k: &str| {
        o.iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(k))
            .map(|(_, v)| v.clone())
    };
    if get(obj, "drop").is_some_and(|v| !v.is_null()) {
        return Ok(JobFailurePolicy {
            policy: Some(Policy::Drop(JobFailurePolicyDrop {})),
        });
    }
    let Some(constant) = get(obj, "constant").filter(|v| !v.is_null()) else {
        return Ok(JobFailurePolicy { policy: None });
    };
    let constant = constant
        .as_object()
        .ok_or_else(|| bad("constant is not an object"))?;
    let interval = match get(constant, "interval") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) => {
            let nanos = duration::parse(&s).map_err(|e| bad(&e.to_string()))?;
            if nanos < 0 {
                return Err(bad("interval is negative"));
            }
            Some(prost_types::Duration {
                seconds: nanos / 1_000_000_000,
                nanos: i32::try_from(nanos % 1_000_000_000).unwrap_or(0),
            })
        }
        Some(_) => return Err(bad("interval is not a string")),
    };
    let max_retries = match get(constant, "maxRetries").or_else(|| get(constant, "max_retries")) {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| bad("maxRetries is not a uint32"))?,
        ),
    };
    Ok(JobFailurePolicy {
        policy: Some(Policy::Constant(JobFailurePolicyConstant {
            interval,
            max_retries,
        })),
    })
}

/// Go's `UnmarshalTypeError` text for a field of the wrong JSON type.
fn type_error(raw: &RawValue, field: &str, go_type: &str) -> BodyError {
    let kind = match raw.get().as_bytes().first() {
        Some(b'"') => "string",
        Some(b'{') => "object",
        Some(b'[') => "array",
        Some(b't' | b'f') => "bool",
        _ => "number",
    };
    BodyError(format!(
        "json: cannot unmarshal {kind} into Go struct field .{field} of type {go_type}"
    ))
}

/// A syntax error in Go's words where they differ little: serde's text without its
/// position suffix.
fn go_syntax_text(e: &serde_json::Error) -> String {
    if e.is_eof() {
        return "unexpected EOF".to_owned();
    }
    if e.is_data() {
        return "json: cannot unmarshal non-object into Go value of type api.CreateReminderRequest"
            .to_owned();
    }
    let text = e.to_string();
    match text.find(" at line ") {
        Some(i) => text[..i].to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_sdk_reminder_body() {
        let body = "{\"reminderName\":\"r1\",\"dueTime\":\"0h0m2s0ms0\\u03bcs\",\"period\":null,\
                    \"data\":\"aGVsbG8=\",\"failurePolicy\":{\"constant\":{\"interval\":\
                    \"0h0m1s0ms0\\u03bcs\",\"maxRetries\":2}}}";
        let b = parse(body.as_bytes()).unwrap();
        assert_eq!(b.due_time.as_deref(), Some("0h0m2s0ms0\u{3bc}s"));
        assert_eq!(b.period, None);
        assert_eq!(b.data.as_deref(), Some(&b"\"aGVsbG8=\""[..]));
        let Some(Policy::Constant(c)) = b.failure_policy.unwrap().policy else {
            panic!("constant policy expected");
        };
        assert_eq!(c.max_retries, Some(2));
        assert_eq!(c.interval.unwrap().seconds, 1);
    }

    #[test]
    fn keys_fold_case_and_exact_wins() {
        let b = parse(br#"{"DUETIME":"1s","Period":"2s","overwrite":false}"#).unwrap();
        assert_eq!(b.due_time.as_deref(), Some("1s"));
        assert_eq!(b.period.as_deref(), Some("2s"));
        assert_eq!(b.overwrite, Some(false));
        let b = parse(br#"{"failure_policy":{"drop":{}}}"#).unwrap();
        assert!(matches!(
            b.failure_policy.unwrap().policy,
            Some(Policy::Drop(_))
        ));
    }

    #[test]
    fn raw_data_is_kept_byte_for_byte() {
        let b = parse(br#"{"data": {"a" : [1, 2]} }"#).unwrap();
        assert_eq!(b.data.as_deref(), Some(&br#"{"a" : [1, 2]}"#[..]));
    }

    #[test]
    fn reminder_bodies_read_as_daprds_decoder() {
        // The first value only; strings that are not UTF-8 read with U+FFFD (B28).
        let b = parse_reminder(b"{\"dueTime\":\"1000h\"}x").unwrap();
        assert_eq!(b.due_time.as_deref(), Some("1000h"));
        let b = parse_reminder(b"{\"dueTime\":\"\xff1s\"}").unwrap();
        assert_eq!(b.due_time.as_deref(), Some("\u{fffd}1s"));
        // `failurePolicy` is no field; `failure_policy` is an empty policy whatever the
        // object holds (B7).
        let b = parse_reminder(br#"{"failurePolicy":{"constant":{"maxRetries":"4"}}}"#).unwrap();
        assert_eq!(b.failure_policy, None);
        let b = parse_reminder(br#"{"failure_policy":{"constant":{"interval":"s"}}}"#).unwrap();
        assert_eq!(b.failure_policy, Some(JobFailurePolicy { policy: None }));
        // Repeated keys: the last wins; `null` leaves a string as it was.
        let b = parse_reminder(br#"{"period":"1s","PERIOD":"2s","period":null}"#).unwrap();
        assert_eq!(b.period.as_deref(), Some("2s"));
    }

    #[test]
    fn reminder_body_errors_are_gos() {
        let err = |b: &[u8]| parse_reminder(b).unwrap_err().0;
        assert_eq!(err(b""), "EOF");
        assert_eq!(
            err(br#"{"overwrite":"true","dueTime":5}"#),
            "json: cannot unmarshal string into Go struct field .createReminderAlias.overwrite \
             of type bool"
        );
        assert_eq!(
            err(br#"{"dueTime":5}"#),
            "json: cannot unmarshal number into Go struct field .createReminderAlias.dueTime of \
             type string"
        );
        assert_eq!(
            err(b"[1]"),
            "json: cannot unmarshal array into Go value of type struct { Data json.RawMessage \
             \"json:\\\"data\\\"\"; FailurePolicy *common.JobFailurePolicy \
             \"json:\\\"failure_policy,omitempty\\\"\"; *api.createReminderAlias }"
        );
        assert_eq!(
            err(b"\xef\xbb\xbf{}"),
            "invalid character '\u{ef}' looking for beginning of value"
        );
        assert_eq!(
            err(br#"{"failure_policy":"drop"}"#),
            "json: cannot unmarshal string into Go struct field .failure_policy of type \
             common.JobFailurePolicy"
        );
        // Nested beyond Go's 10,000 levels (B16).
        let deep = format!("{{\"data\":{}", "[".repeat(10_001));
        assert_eq!(
            err(deep.as_bytes()),
            "invalid character '[' exceeded max depth"
        );
    }

    #[test]
    fn bad_bodies_have_go_texts() {
        assert_eq!(parse(b"").unwrap_err().0, "EOF");
        assert_eq!(
            parse(br#"{"dueTime":5}"#).unwrap_err().0,
            "json: cannot unmarshal number into Go struct field .dueTime of type string"
        );
        assert!(parse(b"{").is_err());
        assert!(parse(b"[1]").is_err());
        assert!(parse(br#"{"failurePolicy":{"constant":{"interval":"1d"}}}"#).is_err());
    }
}
