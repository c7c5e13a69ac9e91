//! The job `failurePolicy.onExhausted: deadLetter` creates when a tick's failure policy is
//! spent: a one-shot job of the same owner (app and namespace, same target kind), named by
//! `deadLetterJob`, due at once, whose data says which execution failed and why. It is
//! written in the same store op as the given-up tick's result ([`DeadLetter`] in the
//! `ResultRecord`), so it exists exactly when that result does: never lost by a crash
//! between two writes, never made twice by a tick delivered again after a restart.
//!
//! # Its data
//!
//! A JSON object, stored as a `google.protobuf.Value`: an HTTP app receives it as the body
//! of `POST /job/<deadLetterJob>`, a gRPC app as the event's data.
//!
//! ```json
//! {"job": "report", "executionId": "6f1c…", "scheduledTime": "2026-01-01T00:00:10Z",
//!  "attempts": 2, "error": "app responded with HTTP status 500", "data": {"k": "v"}}
//! ```
//!
//! - `job`: the failed job's name; `executionId`: the tick's execution id (the W3C trace id
//!   of its attempts); `scheduledTime`: the tick's nominal time (RFC 3339, UTC);
//! - `attempts`: attempts made of the tick; `error`: the last attempt's error text (bounded
//!   as in the run history);
//! - `data`: the failed job's data as JSON when it is JSON — always for data given over HTTP
//!   (a `google.protobuf.Value`), and for other data whose bytes are JSON text; absent when
//!   the job had none. Other data comes as `dataBase64` (the bytes, standard base64) with
//!   `dataTypeUrl` (its `Any` type URL).
//!
//! The job itself has Dapr's defaults (failure policy constant 1 s × 3, `drop`).
//!
//! # Its name
//!
//! `<deadLetterJob>`. When a job of that name exists (an earlier dead letter not yet
//! delivered, or any other job), `<deadLetterJob>-<executionId>`; when that exists too,
//! none is made and the tick is counted as `dead_letter_failed`. A job may not name itself
//! (refused at create), and both names must be valid job names of its owner.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use prost::Message;
use prost_types::value::Kind;
use prost_types::{Any, ListValue, Struct, Value};

use super::convert;
use crate::go::text::trim_space;
use crate::jobs::dead_letter::fallback_name;
use crate::proto::dapr_scheduler as sv1;
use crate::schedule::Plan;
use crate::store::DeadLetter;
use crate::trigger::{ExecutionId, VALUE_TYPE_URL, keys};

/// The tick that was given up, as the dead-letter job's data tells it.
#[derive(Debug, Clone, Copy)]
pub struct Failed<'a> {
    /// The failed job's name.
    pub name: &'a str,
    /// Its execution.
    pub execution_id: ExecutionId,
    /// Its nominal time.
    pub tick: DateTime<Utc>,
    /// Attempts made of it.
    pub attempts: u32,
    /// The last attempt's error text.
    pub error: &'a str,
    /// The failed job's data.
    pub data: Option<&'a Any>,
}

/// A dead-letter job ready to be written with its result, and the plan the trigger loop
/// fires it by once it is.
#[derive(Debug, Clone)]
pub struct DeadLetterJob {
    /// What the store writes.
    pub record: DeadLetter,
    /// When it fires.
    pub plan: Plan,
}

/// The dead-letter job named `target`, of the owner in `metadata`, for `failed`, due at
/// `now`. `None` (logged) if it cannot be made, which the checks at create time rule out.
pub fn dead_letter_job(
    target: &str,
    metadata: &sv1::JobMetadata,
    failed: &Failed<'_>,
    now: DateTime<Utc>,
) -> Option<DeadLetterJob> {
    let keys = keys::job_key(metadata, target).and_then(|key| {
        let fallback = keys::job_key(metadata, &fallback_name(target, failed.execution_id))?;
        Ok((key, fallback))
    });
    let (key, fallback_key) = match keys {
        Ok(keys) => keys,
        Err(e) => {
            tracing::error!(target, error = %e, "dead-letter job has no valid name");
            return None;
        }
    };
    let mut job = sv1::Job {
        due_time: Some(now.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
        data: Some(payload(failed)),
        ..sv1::Job::default()
    };
    let plan = match convert::validate(&mut job, now) {
        Ok(plan) => plan,
        Err(e) => {
            tracing::error!(target, error = %e, "dead-letter job does not validate");
            return None;
        }
    };
    let job = convert::stored_job(job, metadata.clone(), &plan, fastrand::u64(..));
    Some(DeadLetterJob {
        record: DeadLetter {
            key,
            fallback_key,
            job: Some(job),
            due_ms: convert::first_due(&plan),
        },
        plan,
    })
}

/// The dead-letter job's data (see the module's documentation).
fn payload(failed: &Failed<'_>) -> Any {
    let mut fields = BTreeMap::new();
    let mut put = |name: &str, kind: Kind| {
        fields.insert(name.to_owned(), Value { kind: Some(kind) });
    };
    put("job", Kind::StringValue(failed.name.to_owned()));
    put(
        "executionId",
        Kind::StringValue(failed.execution_id.to_string()),
    );
    put(
        "scheduledTime",
        Kind::StringValue(failed.tick.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
    );
    put("attempts", Kind::NumberValue(f64::from(failed.attempts)));
    put("error", Kind::StringValue(failed.error.to_owned()));
    match failed.data.map(original) {
        Some(Original::Json(kind)) => put("data", kind),
        Some(Original::Bytes { base64, type_url }) => {
            put("dataBase64", Kind::StringValue(base64));
            put("dataTypeUrl", Kind::StringValue(type_url));
        }
        Some(Original::None) | None => {}
    }
    Any {
        type_url: VALUE_TYPE_URL.to_owned(),
        value: Value {
            kind: Some(Kind::StructValue(Struct { fields })),
        }
        .encode_to_vec(),
    }
}

/// The failed job's data as the dead letter carries it.
enum Original {
    /// JSON.
    Json(Kind),
    /// Not JSON: its bytes and type.
    Bytes { base64: String, type_url: String },
    /// None (a `google.protobuf.Value` with nothing set: an HTTP create without data).
    None,
}

fn original(data: &Any) -> Original {
    use base64::Engine as _;
    if data.type_url == VALUE_TYPE_URL
        && let Ok(value) = Value::decode(data.value.as_slice())
    {
        return value.kind.map_or(Original::None, Original::Json);
    }
    // What an HTTP app was sent for it: the bytes, trimmed.
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(trim_space(&data.value)) {
        return Original::Json(kind_of(json));
    }
    Original::Bytes {
        base64: base64::engine::general_purpose::STANDARD.encode(&data.value),
        type_url: data.type_url.clone(),
    }
}

/// A JSON value as a `google.protobuf.Value` kind (numbers as doubles, as protojson does).
fn kind_of(json: serde_json::Value) -> Kind {
    match json {
        serde_json::Value::Null => Kind::NullValue(0),
        serde_json::Value::Bool(b) => Kind::BoolValue(b),
        serde_json::Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(f64::NAN)),
        serde_json::Value::String(s) => Kind::StringValue(s),
        serde_json::Value::Array(items) => Kind::ListValue(ListValue {
            values: items
                .into_iter()
                .map(|v| Value {
                    kind: Some(kind_of(v)),
                })
                .collect(),
        }),
        serde_json::Value::Object(map) => Kind::StructValue(Struct {
            fields: map
                .into_iter()
                .map(|(k, v)| {
                    (
                        k,
                        Value {
                            kind: Some(kind_of(v)),
                        },
                    )
                })
                .collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn metadata() -> sv1::JobMetadata {
        sv1::JobMetadata {
            app_id: "app".into(),
            namespace: "ns".into(),
            target: Some(sv1::JobTargetMetadata {
                r#type: Some(sv1::job_target_metadata::Type::Job(sv1::TargetJob {})),
            }),
            concurrency_key: None,
        }
    }

    fn json_of(any: &Any) -> serde_json::Value {
        assert_eq!(any.type_url, VALUE_TYPE_URL);
        let value = Value::decode(any.value.as_slice()).unwrap();
        let mut text = String::new();
        crate::go::protojson::write_value(&mut text, &value).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    fn failed<'a>(data: Option<&'a Any>) -> Failed<'a> {
        Failed {
            name: "report",
            execution_id: ExecutionId::for_tick("k", DateTime::UNIX_EPOCH),
            tick: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 10).unwrap(),
            attempts: 2,
            error: "app responded with HTTP status 500",
            data,
        }
    }

    #[test]
    fn the_data_tells_the_failed_execution_and_carries_json_data_as_json() {
        let original = Any {
            type_url: VALUE_TYPE_URL.into(),
            value: Value {
                kind: Some(kind_of(serde_json::json!({"k": "v", "n": 1}))),
            }
            .encode_to_vec(),
        };
        let f = failed(Some(&original));
        assert_eq!(
            json_of(&payload(&f)),
            serde_json::json!({
                "job": "report",
                "executionId": f.execution_id.to_string(),
                "scheduledTime": "2026-01-01T00:00:10Z",
                "attempts": 2,
                "error": "app responded with HTTP status 500",
                "data": {"k": "v", "n": 1},
            })
        );
    }

    #[test]
    fn other_data_is_json_when_its_bytes_are_else_base64() {
        let raw = |bytes: &[u8]| Any {
            type_url: "type.googleapis.com/google.protobuf.BytesValue".into(),
            value: bytes.to_vec(),
        };
        let text = raw(b" [1, true] ");
        assert_eq!(
            json_of(&payload(&failed(Some(&text))))["data"],
            serde_json::json!([1, true])
        );
        let binary = raw(&[0xff, 0x00]);
        let got = json_of(&payload(&failed(Some(&binary))));
        assert_eq!(got["dataBase64"], "/wA=");
        assert_eq!(
            got["dataTypeUrl"],
            "type.googleapis.com/google.protobuf.BytesValue"
        );
        assert!(got.get("data").is_none());
        // An HTTP create without data stores an empty Value: no data either way.
        let empty = Any {
            type_url: VALUE_TYPE_URL.into(),
            value: Vec::new(),
        };
        let got = json_of(&payload(&failed(Some(&empty))));
        assert!(got.get("data").is_none() && got.get("dataBase64").is_none());
    }

    #[test]
    fn the_job_is_due_now_under_its_name_and_a_fallback() {
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 11).unwrap();
        let f = failed(None);
        let dl = dead_letter_job("dlq", &metadata(), &f, now).unwrap();
        assert_eq!(dl.record.key, "app||ns||app||dlq");
        assert_eq!(
            dl.record.fallback_key,
            format!("app||ns||app||dlq-{}", f.execution_id)
        );
        assert_eq!(dl.plan.next_tick(&Default::default()), Some(now));
        let job = dl.record.job.unwrap();
        assert_eq!(job.metadata, Some(metadata()));
        assert_eq!(
            job.job.unwrap().due_time.as_deref(),
            Some("2026-01-01T00:00:11Z")
        );
    }

    #[test]
    fn a_job_may_not_dead_letter_into_itself_or_an_invalid_name() {
        let check = |target: &str| {
            let on_exhausted = crate::schedule::OnExhausted::DeadLetter(target.to_owned());
            crate::jobs::check_dead_letter(&metadata(), "a", &on_exhausted)
        };
        assert!(check("dlq").is_ok());
        assert!(check("a").unwrap_err().contains("is this job"));
        let long = "x".repeat(480);
        assert!(
            check(&long)
                .unwrap_err()
                .starts_with("failurePolicy.deadLetterJob")
        );
    }
}
