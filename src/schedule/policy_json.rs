//! `"policy"` and jobsd's `"failurePolicy"` in the JSON of `/jobsd/v1/jobs/{name}` (and of
//! the export format's job lines), to and from their `jobsd.v1` messages. Unknown members are refused, naming them; the values are
//! checked by the engine (errors name the field too).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::proto::common;
use crate::proto::jobsd_api as jv1;

/// `"policy"`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Policy {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    catch_up: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    catch_up_window: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    while_target_down: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    overlap: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    max_concurrent: u32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    timeout: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    jitter: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dst: Option<Dst>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    lease: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    concurrency_key: String,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Dst {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    gap: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    repeat: String,
}

/// jobsd's `"failurePolicy"`: one kind, plus what happens once retries are spent.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Failure {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    drop: Option<Empty>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    constant: Option<Constant>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cron: Option<Cron>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exponential: Option<Exponential>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    delays: Option<Delays>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    on_exhausted: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    dead_letter_job: String,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Constant {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    interval: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_retries: Option<u32>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Cron {
    #[serde(default)]
    schedule: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_retries: Option<u32>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Exponential {
    #[serde(default)]
    initial_interval: String,
    #[serde(default, skip_serializing_if = "is_unset")]
    multiplier: f64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    max_interval: String,
    #[serde(default, skip_serializing_if = "is_unset")]
    jitter: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_retries: Option<u32>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    max_elapsed: String,
}

fn is_unset(x: &f64) -> bool {
    *x == 0.0
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Delays {
    #[serde(default)]
    delays: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    repeat_last: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_retries: Option<u32>,
}

/// Members of a `"failurePolicy"` only jobsd reads: with any of them, the object is jobsd's.
const JOBSD_FAILURE_MEMBERS: &[&str] = &[
    "cron",
    "exponential",
    "delays",
    "onExhausted",
    "deadLetterJob",
];

/// Whether a `"failurePolicy"` value uses jobsd's kinds or members (else Dapr parses it).
pub fn is_jobsd_failure_policy(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|m| JOBSD_FAILURE_MEMBERS.iter().any(|k| m.contains_key(*k)))
}

/// A `"policy"` value as its message; the error names the member.
pub fn policy_from_json(value: Value) -> Result<jv1::JobPolicy, String> {
    let p: Policy = serde_json::from_value(value).map_err(|e| format!("policy: {e}"))?;
    let dst = p.dst.map(|d| jv1::DstPolicy {
        gap: d.gap,
        repeat: d.repeat,
    });
    Ok(jv1::JobPolicy {
        catch_up: p.catch_up,
        catch_up_window: p.catch_up_window,
        while_target_down: p.while_target_down,
        overlap: p.overlap,
        max_concurrent: p.max_concurrent,
        timeout: p.timeout,
        jitter: p.jitter,
        dst,
        lease: p.lease,
        concurrency_key: p.concurrency_key,
    })
}

/// A policy message as JSON.
pub fn policy_to_json(p: &jv1::JobPolicy) -> Value {
    let json = Policy {
        catch_up: p.catch_up.clone(),
        catch_up_window: p.catch_up_window.clone(),
        while_target_down: p.while_target_down.clone(),
        overlap: p.overlap.clone(),
        max_concurrent: p.max_concurrent,
        timeout: p.timeout.clone(),
        jitter: p.jitter.clone(),
        dst: p.dst.as_ref().map(|d| Dst {
            gap: d.gap.clone(),
            repeat: d.repeat.clone(),
        }),
        lease: p.lease.clone(),
        concurrency_key: p.concurrency_key.clone(),
    };
    serde_json::to_value(json).unwrap_or(Value::Null)
}

/// A protojson duration (`"1.5s"`), as Dapr's `failurePolicy.constant.interval` is read.
fn proto_duration(field: &str, text: &str) -> Result<Option<prost_types::Duration>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    crate::go::protojson::parse_duration(text)
        .map(Some)
        .ok_or_else(|| format!("{field}: {text:?} is not a duration like \"1.5s\""))
}

fn duration_text(d: Option<&prost_types::Duration>) -> String {
    d.and_then(|d| crate::go::protojson::format_duration(d).ok())
        .unwrap_or_default()
}

/// jobsd's `"failurePolicy"` value as its message; errors name the member.
pub fn failure_from_json(value: Value) -> Result<jv1::FailurePolicy, String> {
    use jv1::failure_policy::Kind;
    let f: Failure = serde_json::from_value(value).map_err(|e| format!("failurePolicy: {e}"))?;
    let mut kinds = Vec::new();
    if f.drop.is_some() {
        kinds.push(Kind::Drop(common::JobFailurePolicyDrop {}));
    }
    if let Some(c) = f.constant {
        kinds.push(Kind::Constant(common::JobFailurePolicyConstant {
            interval: proto_duration("failurePolicy.constant.interval", &c.interval)?,
            max_retries: c.max_retries,
        }));
    }
    if let Some(c) = f.cron {
        kinds.push(Kind::Cron(jv1::CronRetry {
            schedule: c.schedule,
            max_retries: c.max_retries,
        }));
    }
    if let Some(e) = f.exponential {
        kinds.push(Kind::Exponential(jv1::ExponentialRetry {
            initial_interval: e.initial_interval,
            multiplier: e.multiplier,
            max_interval: e.max_interval,
            jitter: e.jitter,
            max_retries: e.max_retries,
            max_elapsed: e.max_elapsed,
        }));
    }
    if let Some(d) = f.delays {
        kinds.push(Kind::Delays(jv1::DelaysRetry {
            delays: d.delays,
            repeat_last: d.repeat_last,
            max_retries: d.max_retries,
        }));
    }
    if kinds.len() > 1 {
        return Err(
            "failurePolicy: give one of drop, constant, cron, exponential, delays".to_owned(),
        );
    }
    Ok(jv1::FailurePolicy {
        kind: kinds.pop(),
        on_exhausted: f.on_exhausted,
        dead_letter_job: f.dead_letter_job,
    })
}

/// jobsd's failure policy message as JSON.
pub fn failure_to_json(p: &jv1::FailurePolicy) -> Value {
    use jv1::failure_policy::Kind;
    let mut json = Failure {
        on_exhausted: p.on_exhausted.clone(),
        dead_letter_job: p.dead_letter_job.clone(),
        ..Failure::default()
    };
    match &p.kind {
        Some(Kind::Drop(_)) => json.drop = Some(Empty {}),
        Some(Kind::Constant(c)) => {
            json.constant = Some(Constant {
                interval: duration_text(c.interval.as_ref()),
                max_retries: c.max_retries,
            });
        }
        Some(Kind::Cron(c)) => {
            json.cron = Some(Cron {
                schedule: c.schedule.clone(),
                max_retries: c.max_retries,
            });
        }
        Some(Kind::Exponential(e)) => {
            json.exponential = Some(Exponential {
                initial_interval: e.initial_interval.clone(),
                multiplier: e.multiplier,
                max_interval: e.max_interval.clone(),
                jitter: e.jitter,
                max_retries: e.max_retries,
                max_elapsed: e.max_elapsed.clone(),
            });
        }
        Some(Kind::Delays(d)) => {
            json.delays = Some(Delays {
                delays: d.delays.clone(),
                repeat_last: d.repeat_last,
                max_retries: d.max_retries,
            });
        }
        None => {}
    }
    serde_json::to_value(json).unwrap_or(Value::Null)
}
