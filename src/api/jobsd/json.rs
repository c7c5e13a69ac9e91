//! The JSON bodies of jobsd's routes. The `job` member is exactly what Dapr's GET answers.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};

use crate::api::json::view_job_to_json;
use crate::api::{ApiError, scheduler_to_runtime_job};
use crate::schedule::policy_json;
use crate::seam::views_wire::{next_before, outcome_name};
use crate::seam::{JobView, ListPage, Run};

fn time(t: Option<DateTime<Utc>>) -> Value {
    t.map_or(Value::Null, |t| {
        Value::String(t.to_rfc3339_opts(SecondsFormat::AutoSi, true))
    })
}

fn stamp(t: Option<&prost_types::Timestamp>) -> Option<DateTime<Utc>> {
    t.and_then(|t| DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).ok()?))
}

/// `{"name", "job": <Dapr's GET body>, "labels", "policy", "status"}`.
pub fn view(view: &JobView) -> Result<String, ApiError> {
    let job = scheduler_to_runtime_job(view.name.clone(), view.job.clone());
    let job = view_job_to_json(&job).map_err(ApiError::encode_json)?;
    let s = &view.status;
    let rest = json!({
        "name": view.name,
        "etag": view.etag,
        "labels": view.labels,
        "policy": view.policy.as_ref().map_or(Value::Null, policy_json::policy_to_json),
        "failurePolicy": view
            .failure_policy
            .as_ref()
            .map_or(Value::Null, policy_json::failure_to_json),
        "status": {
            "state": s.state.map_or("active", |st| st.as_str()),
            "paused": s.state == Some(crate::seam::JobState::Paused),
            "nextFireTime": time(s.next_fire_time),
            "lastFireTime": {
                "nominal": time(s.last_fire_nominal),
                "actual": time(s.last_fire_actual),
            },
            "lastOutcome": s.last_outcome.map(outcome_name),
            "lastError": s.last_error,
            "counters": {
                "delivered": s.delivered,
                "succeeded": s.succeeded,
                "failedAttempts": s.failed_attempts,
                "dropped": s.dropped,
                "staged": s.staged_count,
                "skipped": s.skipped,
                "onExhausted": s.on_exhausted,
            },
            "ticks": s.ticks,
            "currentAttempt": s.current_attempt,
            "inFlight": s.in_flight,
            "staged": s.staged,
            "waiting": s.waiting,
            "finishedAt": time(s.finished_at),
            "pausedAt": time(s.paused_at),
            "pausedReason": s.paused_reason,
            "pausedNote": s.paused_note,
            "held": s.held.iter().map(|h| json!({
                "executionId": h.execution_id.to_string(),
                "attempt": h.attempt,
                "nominalTime": time(Some(h.nominal)),
                "started": time(Some(h.started)),
                "leaseUntil": time(h.lease_until),
            })).collect::<Vec<_>>(),
        },
    });
    // `job` first, spliced in as Dapr's encoder wrote it.
    let rest = rest.to_string();
    Ok(format!("{{\"job\":{job},{}", &rest[1..]))
}

/// One run.
fn run(r: &Run) -> Value {
    let started = stamp(r.run.started.as_ref());
    let finished = stamp(r.run.finished.as_ref());
    let latency = match (started, finished) {
        (Some(a), Some(b)) => Value::from((b - a).num_microseconds().unwrap_or(0) as f64 / 1000.0),
        _ => Value::Null,
    };
    let mut m = Map::new();
    m.insert("seq".into(), r.seq.into());
    m.insert("executionId".into(), r.run.execution_id.clone().into());
    let trigger = if r.run.trigger.is_empty() {
        "schedule"
    } else {
        r.run.trigger.as_str()
    };
    m.insert("trigger".into(), trigger.into());
    m.insert("nominalTime".into(), time(stamp(r.run.nominal.as_ref())));
    m.insert("attempt".into(), r.run.attempt.into());
    m.insert("started".into(), time(started));
    m.insert("finished".into(), time(finished));
    m.insert("latencyMs".into(), latency);
    m.insert("outcome".into(), outcome_name(r.run.outcome()).into());
    m.insert(
        "httpStatus".into(),
        (r.run.http_status != 0).then_some(r.run.http_status).into(),
    );
    m.insert("grpcCode".into(), r.run.grpc_code.into());
    m.insert(
        "error".into(),
        (!r.run.error.is_empty())
            .then(|| r.run.error.clone())
            .into(),
    );
    Value::Object(m)
}

/// `{"runs": [...], "nextBefore": <seq> | null}`.
pub fn runs(runs: &[Run], limit: usize) -> String {
    let next = next_before(runs, limit);
    json!({
        "runs": runs.iter().map(run).collect::<Vec<_>>(),
        "nextBefore": next,
    })
    .to_string()
}

/// `{"jobs": [...], "nextPageToken": "..." | null}`.
pub fn page(page: &ListPage) -> Result<String, ApiError> {
    let mut out = String::from("{\"jobs\":[");
    for (i, v) in page.jobs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&view(v)?);
    }
    out.push_str("],\"nextPageToken\":");
    out.push_str(&Value::from(page.next_page_token.clone()).to_string());
    out.push('}');
    Ok(out)
}
