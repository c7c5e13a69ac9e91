//! The lines of jobsd's export format, version 1 (`docs/export-format.md`): a header, one line
//! per job, a trailer. Every job line holds the job as stored (Dapr's fields with the instants
//! they resolved to at creation, jobsd's settings, its generation) and its progress, so that
//! an import continues the job where it was. Job lines refuse members they do not know, so a
//! misspelt member in a hand-edited file fails on its line instead of being dropped.

use std::collections::BTreeMap;

use base64::Engine as _;
use chrono::{DateTime, SecondsFormat, Utc};
use prost_types::{Any, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::go::protojson::{format_duration, parse_duration};
use crate::proto::dapr_scheduler as sv1;
use crate::proto::jobsd_api as jv1;
use crate::proto::jobsd_store::{self as st, stored_job::Begin};
use crate::schedule::policy_json;
use crate::schedule::policy_messages::dapr_failure_policy;
use crate::seam::BackupRecord;
use crate::seam::views_wire::{outcome_name, outcome_named, stamp};
use crate::trigger::ExecutionId;

/// `"format"` of the header line.
pub const FORMAT: &str = "jobsd-export";
/// The version this jobsd writes and reads.
pub const VERSION: u32 = 1;

/// The first line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`VERSION`] when written by this jobsd.
    pub version: u32,
    /// The app the jobs were exported from.
    #[serde(default)]
    pub app: String,
    /// Its namespace.
    #[serde(default)]
    pub namespace: String,
    /// When the export began (RFC 3339).
    #[serde(default)]
    pub exported_at: String,
    /// The exporting jobsd stopped firing the jobs first (`?handover=true`): the lines are
    /// their final state there.
    #[serde(default)]
    pub handover: bool,
}

/// The last line: `{"end":true,"jobs":N}`. A stream without it was cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trailer {
    /// Always `true`.
    pub end: bool,
    /// Job lines written.
    pub jobs: u64,
}

/// A line an export writes in place of the rest when it fails part way:
/// `{"error":"..."}`; no trailer follows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorLine {
    /// What went wrong.
    pub error: String,
}

/// One job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct JobLine {
    name: String,
    /// The job version's generation, 16 hex digits: its etag, which stays valid after the move.
    generation: String,
    job: DaprJob,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    labels: BTreeMap<String, String>,
    /// jobsd's tick policy, as `POST /jobsd/v1/jobs/{name}` takes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    policy: Option<Value>,
    /// jobsd's failure policy (its kinds or `onExhausted`), as the create takes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failure_policy: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    traceparent: Option<String>,
    /// Where the job's clock started (no dueTime): its creation time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    start: Option<String>,
    /// The first tick, when a dueTime was given (resolved at creation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    due_at: Option<String>,
    /// The ttl, resolved at creation: no tick after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    progress: Option<Progress>,
    /// Set for a job that finished (kept for jobsd's views): it is restored as finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    finished_at: Option<String>,
}

/// Dapr's job fields as given (the strings, not what they resolved to).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DaprJob {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    schedule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    repeats: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    due_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ttl: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data: Option<Data>,
    /// Dapr's failure policy as stored (`{"drop":{}}` or `{"constant":{...}}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failure_policy: Option<Value>,
}

/// The payload as the `google.protobuf.Any` it is stored as, byte for byte.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Data {
    #[serde(default)]
    type_url: String,
    /// Base64 (standard, padded) of the Any's value bytes.
    #[serde(default)]
    value: String,
}

/// The job's progress and status counters (its stored counter).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Progress {
    /// Ticks done (succeeded or given up).
    #[serde(default)]
    ticks: u32,
    /// Nominal time of the last tick done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_tick: Option<String>,
    /// Failed attempts of the current tick.
    #[serde(default)]
    attempts: u32,
    #[serde(default)]
    delivered: u64,
    #[serde(default)]
    succeeded: u64,
    #[serde(default)]
    failed_attempts: u64,
    #[serde(default)]
    dropped: u64,
    #[serde(default)]
    staged: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    skipped: BTreeMap<String, u64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    on_exhausted: BTreeMap<String, u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_nominal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_actual: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_outcome: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    last_error: String,
    /// Runs recorded so far (the history itself is not exported).
    #[serde(default)]
    runs: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    paused: Option<PausedLine>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    held: Vec<HeldLine>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PausedLine {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    at: Option<String>,
    #[serde(default)]
    reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    note: String,
}

/// An execution held under a lease (async completion).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HeldLine {
    execution_id: String,
    nominal_time: String,
    attempt: u32,
    started: String,
    lease_until: String,
    /// The lease's length (protojson duration, `"300s"`).
    lease: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    kind: String,
}

/// An RFC 3339 text of a stored instant.
fn time_text(t: &Timestamp) -> Result<String, String> {
    let at = u32::try_from(t.nanos)
        .ok()
        .and_then(|nanos| DateTime::<Utc>::from_timestamp(t.seconds, nanos))
        .ok_or_else(|| format!("timestamp {}s {}ns is out of range", t.seconds, t.nanos))?;
    Ok(at.to_rfc3339_opts(SecondsFormat::AutoSi, true))
}

fn opt_time(t: Option<&Timestamp>) -> Result<Option<String>, String> {
    t.map(time_text).transpose()
}

/// A stored instant of an RFC 3339 text; the error names `field`.
fn parse_time(field: &str, text: &str) -> Result<Timestamp, String> {
    let at = DateTime::parse_from_rfc3339(text)
        .map_err(|e| format!("{field}: {text:?} is not an RFC 3339 time ({e})"))?
        .with_timezone(&Utc);
    stamp(Some(at)).ok_or_else(|| format!("{field}: {text:?} is out of range"))
}

fn parse_opt_time(field: &str, text: Option<&str>) -> Result<Option<Timestamp>, String> {
    text.map(|t| parse_time(field, t)).transpose()
}

/// Dapr's failure policy as JSON, through jobsd's (which holds Dapr's kinds too).
fn dapr_policy_json(p: &crate::proto::common::JobFailurePolicy) -> Value {
    use crate::proto::common::job_failure_policy::Policy;
    use jv1::failure_policy::Kind;
    let kind = match &p.policy {
        Some(Policy::Drop(d)) => Some(Kind::Drop(*d)),
        Some(Policy::Constant(c)) => Some(Kind::Constant(*c)),
        None => None,
    };
    policy_json::failure_to_json(&jv1::FailurePolicy {
        kind,
        ..Default::default()
    })
}

/// Dapr's failure policy of its JSON.
fn dapr_policy_of(value: Value) -> Result<crate::proto::common::JobFailurePolicy, String> {
    use jv1::failure_policy::Kind;
    let p = policy_json::failure_from_json(value).map_err(|e| format!("job.{e}"))?;
    match &p.kind {
        Some(Kind::Drop(_) | Kind::Constant(_)) if p.on_exhausted.is_empty() => {
            Ok(dapr_failure_policy(&p))
        }
        None => Ok(crate::proto::common::JobFailurePolicy { policy: None }),
        _ => Err("job.failurePolicy: Dapr's failure policy is drop or constant".to_owned()),
    }
}

/// The job line of `record`, without its newline.
pub fn write_record(out: &mut Vec<u8>, record: &BackupRecord) -> Result<(), String> {
    let stored = &record.job;
    let job = stored.job.clone().unwrap_or_default();
    let (start, due_at) = match &stored.begin {
        Some(Begin::Start(t)) => (Some(time_text(t)?), None),
        Some(Begin::DueTime(t)) => (None, Some(time_text(t)?)),
        None => (None, None),
    };
    let line = JobLine {
        name: record.name.clone(),
        generation: format!("{:016x}", stored.generation),
        job: DaprJob {
            schedule: job.schedule,
            repeats: job.repeats,
            due_time: job.due_time,
            ttl: job.ttl,
            data: job.data.map(|any| Data {
                type_url: any.type_url,
                value: base64::engine::general_purpose::STANDARD.encode(any.value),
            }),
            failure_policy: job.failure_policy.as_ref().map(dapr_policy_json),
        },
        labels: stored.labels.clone().into_iter().collect(),
        policy: stored.policy.as_ref().map(policy_json::policy_to_json),
        failure_policy: stored
            .failure_policy
            .as_ref()
            .map(policy_json::failure_to_json),
        traceparent: (!stored.traceparent.is_empty()).then(|| stored.traceparent.clone()),
        start,
        due_at,
        expires_at: opt_time(stored.expiration.as_ref())?,
        progress: record.counter.as_ref().map(progress_line).transpose()?,
        finished_at: opt_time(record.finished_at.as_ref())?,
    };
    serde_json::to_writer(out, &line).map_err(|e| e.to_string())
}

fn progress_line(c: &st::StoredCounter) -> Result<Progress, String> {
    Ok(Progress {
        ticks: c.count,
        last_tick: opt_time(c.last_trigger.as_ref())?,
        attempts: c.attempts,
        delivered: c.delivered,
        succeeded: c.succeeded,
        failed_attempts: c.failed_attempts,
        dropped: c.dropped,
        staged: c.staged,
        skipped: c.skipped.clone().into_iter().collect(),
        on_exhausted: c.on_exhausted.clone().into_iter().collect(),
        last_nominal: opt_time(c.last_nominal.as_ref())?,
        last_actual: opt_time(c.last_actual.as_ref())?,
        last_outcome: (c.last_outcome != 0).then(|| outcome_name(c.last_outcome()).to_owned()),
        last_error: c.last_error.clone(),
        runs: c.runs,
        paused: c
            .paused
            .as_ref()
            .map(|p| -> Result<PausedLine, String> {
                Ok(PausedLine {
                    at: opt_time(p.at.as_ref())?,
                    reason: p.reason.clone(),
                    note: p.note.clone(),
                })
            })
            .transpose()?,
        held: c.held.iter().map(held_line).collect::<Result<_, _>>()?,
    })
}

fn held_line(h: &st::HeldExecution) -> Result<HeldLine, String> {
    let id =
        ExecutionId::from_slice(&h.execution_id).ok_or("a held execution's id is not 16 bytes")?;
    let lease = prost_types::Duration {
        seconds: h.lease_nanos / 1_000_000_000,
        nanos: i32::try_from(h.lease_nanos % 1_000_000_000).unwrap_or(0),
    };
    Ok(HeldLine {
        execution_id: id.to_string(),
        nominal_time: opt_time(h.nominal.as_ref())?.unwrap_or_default(),
        attempt: h.attempt,
        started: opt_time(h.started.as_ref())?.unwrap_or_default(),
        lease_until: opt_time(h.lease_until.as_ref())?.unwrap_or_default(),
        // The text protojson's errors read with elsewhere (`api::json::JsonError`).
        lease: format_duration(&lease).map_err(|e| format!("proto: {e}"))?,
        kind: h.kind.clone(),
    })
}

/// A job line read back; the error says what is wrong (naming the member), and the name when
/// the line had one.
pub fn read_record(line: &[u8]) -> Result<BackupRecord, (Option<String>, String)> {
    let parsed: JobLine = serde_json::from_slice(line).map_err(|e| {
        // The name, if the line has one, to say which job failed.
        let name = serde_json::from_slice::<Value>(line)
            .ok()
            .and_then(|v| v.get("name").and_then(Value::as_str).map(str::to_owned));
        (name, e.to_string())
    })?;
    let name = parsed.name.clone();
    record_of(parsed).map_err(|e| (Some(name), e))
}

fn record_of(line: JobLine) -> Result<BackupRecord, String> {
    let generation = u64::from_str_radix(&line.generation, 16)
        .map_err(|_| format!("generation: {:?} is not 16 hex digits", line.generation))?;
    let begin = match (&line.start, &line.due_at) {
        (Some(start), None) => Begin::Start(parse_time("start", start)?),
        (None, Some(due)) => Begin::DueTime(parse_time("dueAt", due)?),
        _ => return Err("give exactly one of start and dueAt".to_owned()),
    };
    let data = line
        .job
        .data
        .map(|d| -> Result<Any, String> {
            let value = base64::engine::general_purpose::STANDARD
                .decode(&d.value)
                .map_err(|e| format!("job.data.value: not base64 ({e})"))?;
            Ok(Any {
                type_url: d.type_url,
                value,
            })
        })
        .transpose()?;
    let failure_policy = line.job.failure_policy.map(dapr_policy_of).transpose()?;
    let job = sv1::Job {
        schedule: line.job.schedule,
        repeats: line.job.repeats,
        due_time: line.job.due_time,
        ttl: line.job.ttl,
        data,
        failure_policy,
    };
    let policy = line.policy.map(policy_json::policy_from_json).transpose()?;
    let jobsd_failure = line
        .failure_policy
        .map(policy_json::failure_from_json)
        .transpose()?;
    let stored = st::StoredJob {
        job: Some(job),
        metadata: None,
        generation,
        begin: Some(begin),
        expiration: parse_opt_time("expiresAt", line.expires_at.as_deref())?,
        labels: line.labels.into_iter().collect(),
        traceparent: line.traceparent.unwrap_or_default(),
        policy,
        failure_policy: jobsd_failure,
    };
    Ok(BackupRecord {
        name: line.name,
        counter: line
            .progress
            .map(|p| counter_of(p, generation))
            .transpose()?,
        finished_at: parse_opt_time("finishedAt", line.finished_at.as_deref())?,
        job: stored,
    })
}

fn counter_of(p: Progress, generation: u64) -> Result<st::StoredCounter, String> {
    let last_outcome = match p.last_outcome.as_deref() {
        None => 0,
        Some(name) => outcome_named(name)
            .ok_or_else(|| format!("progress.lastOutcome: unknown outcome {name:?}"))?
            as i32,
    };
    let paused = p
        .paused
        .map(|p| -> Result<st::Paused, String> {
            Ok(st::Paused {
                at: parse_opt_time("progress.paused.at", p.at.as_deref())?,
                reason: p.reason,
                note: p.note,
            })
        })
        .transpose()?;
    Ok(st::StoredCounter {
        // Where the job is due is the importing engine's to work out.
        due_ms: None,
        generation,
        count: p.ticks,
        last_trigger: parse_opt_time("progress.lastTick", p.last_tick.as_deref())?,
        attempts: p.attempts,
        delivered: p.delivered,
        succeeded: p.succeeded,
        failed_attempts: p.failed_attempts,
        dropped: p.dropped,
        staged: p.staged,
        skipped: p.skipped.into_iter().collect(),
        last_nominal: parse_opt_time("progress.lastNominal", p.last_nominal.as_deref())?,
        last_actual: parse_opt_time("progress.lastActual", p.last_actual.as_deref())?,
        last_outcome,
        last_error: p.last_error,
        runs: p.runs,
        paused,
        on_exhausted: p.on_exhausted.into_iter().collect(),
        held: p.held.into_iter().map(held_of).collect::<Result<_, _>>()?,
    })
}

fn held_of(h: HeldLine) -> Result<st::HeldExecution, String> {
    let id = ExecutionId::parse(&h.execution_id).ok_or_else(|| {
        format!(
            "progress.held.executionId: {:?} is not an execution id",
            h.execution_id
        )
    })?;
    let lease = parse_duration(&h.lease)
        .ok_or_else(|| format!("progress.held.lease: {:?} is not a duration", h.lease))?;
    Ok(st::HeldExecution {
        execution_id: id.as_bytes().to_vec(),
        nominal: Some(parse_time("progress.held.nominalTime", &h.nominal_time)?),
        attempt: h.attempt,
        started: Some(parse_time("progress.held.started", &h.started)?),
        lease_until: Some(parse_time("progress.held.leaseUntil", &h.lease_until)?),
        lease_nanos: lease
            .seconds
            .saturating_mul(1_000_000_000)
            .saturating_add(i64::from(lease.nanos)),
        kind: h.kind,
    })
}

#[cfg(test)]
mod tests;
