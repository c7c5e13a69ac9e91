//! Writing: `protojson.Marshal` of `runtime.v1.Job` for GET, and the `Any` forms it needs.

use std::fmt::Write as _;

use prost::Message;
use prost_types::value::Kind;
use prost_types::{Any, Duration, ListValue, Struct, Timestamp, Value};

use super::{JsonError, VALUE_TYPE_URL};
use crate::go::protojson::{
    Obj, format_duration, trim_fraction, write_float, write_list, write_str, write_struct,
    write_value,
};
use crate::go::quote::quote;
use crate::proto::common::{JobFailurePolicy, job_failure_policy::Policy};
use crate::proto::runtime;

/// `protojson.Marshal` of a `runtime.v1.Job`.
pub fn job_to_json(job: &runtime::Job) -> Result<String, JsonError> {
    let mut out = String::new();
    write_job(&mut out, job)?;
    Ok(out)
}

/// [`job_to_json`] for jobsd's own views (`/jobsd/v1`, `jobsd jobs`). A job daprd made without
/// data holds an `Any` of a `google.protobuf.Value` with no kind, which has no JSON form:
/// Dapr's GET answers 500 for it (and jobsd's Dapr routes do the same), but jobsd's views show
/// the job, without data, which is what daprd meant.
pub fn view_job_to_json(job: &runtime::Job) -> Result<String, JsonError> {
    if job.data.as_ref().is_some_and(is_no_data) {
        let without = runtime::Job {
            data: None,
            ..job.clone()
        };
        return job_to_json(&without);
    }
    job_to_json(job)
}

/// Whether `any` is daprd's "no data": an `Any` of a `google.protobuf.Value` with no kind.
fn is_no_data(any: &Any) -> bool {
    any.type_url.rsplit('/').next() == Some("google.protobuf.Value")
        && Value::decode(any.value.as_slice()).is_ok_and(|v| v.kind.is_none())
}

/// Appends the protojson of a `runtime.v1.Job` to `out`.
pub fn write_job(out: &mut String, job: &runtime::Job) -> Result<(), JsonError> {
    let mut obj = Obj::new(out);
    if !job.name.is_empty() {
        write_str(obj.key("name"), &job.name);
    }
    if let Some(schedule) = &job.schedule {
        write_str(obj.key("schedule"), schedule);
    }
    if let Some(repeats) = job.repeats {
        let _ = write!(obj.key("repeats"), "{repeats}");
    }
    if let Some(due_time) = &job.due_time {
        write_str(obj.key("dueTime"), due_time);
    }
    if let Some(ttl) = &job.ttl {
        write_str(obj.key("ttl"), ttl);
    }
    if let Some(data) = &job.data {
        write_any(obj.key("data"), data)?;
    }
    if let Some(policy) = &job.failure_policy {
        write_failure_policy(obj.key("failurePolicy"), policy)?;
    }
    obj.close();
    Ok(())
}

fn write_failure_policy(out: &mut String, policy: &JobFailurePolicy) -> Result<(), JsonError> {
    let mut obj = Obj::new(out);
    match &policy.policy {
        None => {}
        Some(Policy::Drop(_)) => obj.key("drop").push_str("{}"),
        Some(Policy::Constant(c)) => {
            let out = obj.key("constant");
            let mut inner = Obj::new(out);
            if let Some(interval) = &c.interval {
                let text = format_duration(interval)?;
                write_str(inner.key("interval"), &text);
            }
            if let Some(max) = c.max_retries {
                let _ = write!(inner.key("maxRetries"), "{max}");
            }
            inner.close();
        }
    }
    obj.close();
    Ok(())
}

/// An `Any` as protojson writes it: `{}` when empty, else `{"@type": url, "value": …}` for
/// the well-known types with a special JSON form. Types daprd could not resolve are errors,
/// as they are for daprd.
pub fn write_any(out: &mut String, any: &Any) -> Result<(), JsonError> {
    if any.type_url.is_empty() {
        if any.value.is_empty() {
            out.push_str("{}");
            return Ok(());
        }
        return Err(JsonError(
            "google.protobuf.Any: type_url is not set".to_owned(),
        ));
    }
    // Go's resolver looks the message up by the text after the last '/'.
    let name = any.type_url.rsplit('/').next().unwrap_or_default();
    let bytes = any.value.as_slice();
    // Go's text names the cause without the "proto: " its errors print alone.
    let unmarshal_err = |e: prost::DecodeError| {
        let cause = if e.to_string().contains("not UTF-8") {
            "string field contains invalid UTF-8"
        } else {
            "cannot parse invalid wire-format data"
        };
        JsonError(format!(
            "google.protobuf.Any: unable to unmarshal {}: {cause}",
            quote(&any.type_url)
        ))
    };
    let mut value = String::new();
    match name {
        "google.protobuf.Value" => {
            write_value(&mut value, &Value::decode(bytes).map_err(unmarshal_err)?)?
        }
        "google.protobuf.Struct" => {
            write_struct(&mut value, &Struct::decode(bytes).map_err(unmarshal_err)?)?
        }
        "google.protobuf.ListValue" => write_list(
            &mut value,
            &ListValue::decode(bytes).map_err(unmarshal_err)?,
        )?,
        "google.protobuf.Duration" => write_str(
            &mut value,
            &format_duration(&Duration::decode(bytes).map_err(unmarshal_err)?)?,
        ),
        "google.protobuf.Timestamp" => write_str(
            &mut value,
            &format_timestamp(&Timestamp::decode(bytes).map_err(unmarshal_err)?)?,
        ),
        "google.protobuf.Empty" => {
            <()>::decode(bytes).map_err(unmarshal_err)?;
            value.push_str("{}");
        }
        "google.protobuf.Any" => {
            write_any(&mut value, &Any::decode(bytes).map_err(unmarshal_err)?)?
        }
        "google.protobuf.StringValue" => {
            write_str(&mut value, &String::decode(bytes).map_err(unmarshal_err)?)
        }
        "google.protobuf.BytesValue" => {
            use base64::Engine as _;
            let raw = Vec::<u8>::decode(bytes).map_err(unmarshal_err)?;
            write_str(
                &mut value,
                &base64::engine::general_purpose::STANDARD.encode(raw),
            );
        }
        "google.protobuf.BoolValue" => {
            let b = bool::decode(bytes).map_err(unmarshal_err)?;
            value.push_str(if b { "true" } else { "false" });
        }
        "google.protobuf.Int32Value" => {
            let _ = write!(value, "{}", i32::decode(bytes).map_err(unmarshal_err)?);
        }
        "google.protobuf.UInt32Value" => {
            let _ = write!(value, "{}", u32::decode(bytes).map_err(unmarshal_err)?);
        }
        "google.protobuf.Int64Value" => {
            let _ = write!(value, "\"{}\"", i64::decode(bytes).map_err(unmarshal_err)?);
        }
        "google.protobuf.UInt64Value" => {
            let _ = write!(value, "\"{}\"", u64::decode(bytes).map_err(unmarshal_err)?);
        }
        "google.protobuf.DoubleValue" => write_float(
            &mut value,
            f64::decode(bytes).map_err(unmarshal_err)?,
            false,
        ),
        "google.protobuf.FloatValue" => write_float(
            &mut value,
            f64::from(f32::decode(bytes).map_err(unmarshal_err)?),
            true,
        ),
        "dapr.proto.runtime.v1.Job" => {
            let job = runtime::Job::decode(bytes).map_err(unmarshal_err)?;
            return inline_message(out, &any.type_url, |o| write_job(o, &job));
        }
        "dapr.proto.common.v1.JobFailurePolicy" => {
            let policy = JobFailurePolicy::decode(bytes).map_err(unmarshal_err)?;
            return inline_message(out, &any.type_url, |o| write_failure_policy(o, &policy));
        }
        "google.rpc.ErrorInfo" => {
            let info = ErrorInfo::decode(bytes).map_err(unmarshal_err)?;
            return inline_message(out, &any.type_url, |o| {
                write_error_info(o, &info);
                Ok(())
            });
        }
        _ => {
            return Err(JsonError(format!(
                "google.protobuf.Any: unable to resolve {}: not found",
                quote(&any.type_url)
            )));
        }
    }
    let mut obj = Obj::new(out);
    write_str(obj.key("@type"), &any.type_url);
    obj.key("value").push_str(&value);
    obj.close();
    Ok(())
}

/// An `Any` holding a message without a special JSON form, as protojson writes it: `@type`
/// first, then the message's own members.
fn inline_message(
    out: &mut String,
    type_url: &str,
    write: impl FnOnce(&mut String) -> Result<(), JsonError>,
) -> Result<(), JsonError> {
    let mut inner = String::new();
    write(&mut inner)?;
    out.push('{');
    write_str(out, "@type");
    out.push(':');
    write_str(out, type_url);
    let members = inner
        .strip_prefix('{')
        .and_then(|m| m.strip_suffix('}'))
        .unwrap_or_default();
    if !members.is_empty() {
        out.push(',');
        out.push_str(members);
    }
    out.push('}');
    Ok(())
}

/// `google.rpc.ErrorInfo`, which daprd links (its errors carry it) and so can render in an
/// `Any`; jobsd's own copy, to read it from job data.
#[derive(Clone, PartialEq, prost::Message)]
struct ErrorInfo {
    /// Why the error happened.
    #[prost(string, tag = "1")]
    reason: String,
    /// Who reported it.
    #[prost(string, tag = "2")]
    domain: String,
    /// Details, by key.
    #[prost(btree_map = "string, string", tag = "3")]
    metadata: std::collections::BTreeMap<String, String>,
}

/// The protojson of an `ErrorInfo` (map keys in order, as protojson sorts them).
fn write_error_info(out: &mut String, info: &ErrorInfo) {
    let mut obj = Obj::new(out);
    if !info.reason.is_empty() {
        write_str(obj.key("reason"), &info.reason);
    }
    if !info.domain.is_empty() {
        write_str(obj.key("domain"), &info.domain);
    }
    if !info.metadata.is_empty() {
        let mut map = Obj::new(obj.key("metadata"));
        for (k, v) in &info.metadata {
            write_str(map.key(k), v);
        }
        map.close();
    }
    obj.close();
}

/// protojson's Timestamp text: RFC 3339 in UTC with 0, 3, 6 or 9 fraction digits.
fn format_timestamp(t: &Timestamp) -> Result<String, JsonError> {
    const MIN: i64 = -62_135_596_800; // 0001-01-01T00:00:00Z
    const MAX: i64 = 253_402_300_799; // 9999-12-31T23:59:59Z
    if !(MIN..=MAX).contains(&t.seconds) {
        return Err(JsonError(format!(
            "google.protobuf.Timestamp: seconds out of range {}",
            t.seconds
        )));
    }
    let nanos = u32::try_from(t.nanos)
        .ok()
        .filter(|n| *n <= 999_999_999)
        .ok_or_else(|| {
            JsonError(format!(
                "google.protobuf.Timestamp: nanos out of range {}",
                t.nanos
            ))
        })?;
    let at = chrono::DateTime::from_timestamp(t.seconds, nanos).ok_or_else(|| {
        JsonError(format!(
            "google.protobuf.Timestamp: seconds out of range {}",
            t.seconds
        ))
    })?;
    let text = format!("{}.{nanos:09}", at.format("%Y-%m-%dT%H:%M:%S"));
    Ok(format!("{}Z", trim_fraction(&text)))
}

/// The `data` of an HTTP-scheduled job: an Any of the serialized `google.protobuf.Value`.
pub fn value_to_any(value: &Value) -> Any {
    let mut bytes = Vec::with_capacity(value.encoded_len() + 8);
    encode_value_as_go(value, &mut bytes);
    Any {
        type_url: VALUE_TYPE_URL.to_owned(),
        value: bytes,
    }
}

/// Appends `value`'s wire bytes as Go's `proto.Marshal` writes them, which differ from
/// prost's in one place: a `Struct` map entry always carries its key and value fields, an
/// empty key too (prost leaves defaults out), so `{"":""}` is stored as daprd stores it.
fn encode_value_as_go(value: &Value, out: &mut Vec<u8>) {
    use prost::encoding::{WireType, encode_key, encode_varint};
    let nested = |field: u32, body: Vec<u8>, out: &mut Vec<u8>| {
        encode_key(field, WireType::LengthDelimited, out);
        encode_varint(body.len() as u64, out);
        out.extend_from_slice(&body);
    };
    match &value.kind {
        Some(Kind::StructValue(s)) => {
            let mut body = Vec::new();
            for (key, v) in &s.fields {
                let mut entry = Vec::new();
                nested(1, key.as_bytes().to_vec(), &mut entry);
                let mut inner = Vec::new();
                encode_value_as_go(v, &mut inner);
                nested(2, inner, &mut entry);
                nested(1, entry, &mut body);
            }
            nested(5, body, out);
        }
        Some(Kind::ListValue(l)) => {
            let mut body = Vec::new();
            for v in &l.values {
                let mut inner = Vec::new();
                encode_value_as_go(v, &mut inner);
                nested(1, inner, &mut body);
            }
            nested(6, body, out);
        }
        // Scalars: prost writes a set oneof field as Go does, defaults included.
        _ => value.encode(out).unwrap_or_default(),
    }
}
