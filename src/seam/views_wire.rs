//! jobsd's views on the wire: the engine's [`JobView`], [`JobStatus`], [`Run`] and
//! [`ListFilter`] as `jobsd.v1` / `jobsd.scheduler.v1` messages and back. jobsd's own gRPC API
//! answers with them, and a jobsd replica sends them to sidecars in remote mode.

use std::time::SystemTime;

use chrono::{DateTime, Utc};

use super::{HeldExecution, JobState, JobStatus, JobView, ListFilter, ListPage, Run, RunOutcome};
use crate::proto::jobsd_api as jv1;
use crate::proto::jobsd_replica as jsv1;
use crate::proto::jobsd_store::StoredRun;

/// `success`, `failed`, `cancelled`, `timed_out`, `skipped`, `undeliverable` (`unknown` for
/// an unset outcome).
pub fn outcome_name(outcome: RunOutcome) -> &'static str {
    match outcome {
        RunOutcome::Success => "success",
        RunOutcome::Failed => "failed",
        RunOutcome::Cancelled => "cancelled",
        RunOutcome::TimedOut => "timed_out",
        RunOutcome::Skipped => "skipped",
        RunOutcome::Undeliverable => "undeliverable",
        RunOutcome::Running => "running",
        RunOutcome::Unspecified => "unknown",
    }
}

/// The outcome named `name` ([`outcome_name`]).
pub fn outcome_named(name: &str) -> Option<RunOutcome> {
    [
        RunOutcome::Success,
        RunOutcome::Failed,
        RunOutcome::Cancelled,
        RunOutcome::TimedOut,
        RunOutcome::Skipped,
        RunOutcome::Undeliverable,
        RunOutcome::Running,
    ]
    .into_iter()
    .find(|o| outcome_name(*o) == name)
}

/// An instant as a protobuf `Timestamp`.
pub fn stamp(t: Option<DateTime<Utc>>) -> Option<prost_types::Timestamp> {
    t.map(|t| SystemTime::from(t).into())
}

fn instant(t: Option<prost_types::Timestamp>) -> Option<DateTime<Utc>> {
    t.and_then(|t| DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).ok()?))
}

/// A status as `jobsd.v1.JobStatus`.
pub fn status_to_wire(s: JobStatus) -> jv1::JobStatus {
    let state = s.state.unwrap_or(JobState::Active);
    jv1::JobStatus {
        state: state.as_str().to_owned(),
        paused: state == JobState::Paused,
        next_fire_time: stamp(s.next_fire_time),
        last_fire_nominal: stamp(s.last_fire_nominal),
        last_fire_actual: stamp(s.last_fire_actual),
        last_outcome: s
            .last_outcome
            .map(|o| outcome_name(o).to_owned())
            .unwrap_or_default(),
        last_error: s.last_error.unwrap_or_default(),
        counters: Some(jv1::Counters {
            delivered: s.delivered,
            succeeded: s.succeeded,
            failed_attempts: s.failed_attempts,
            dropped: s.dropped,
            staged: s.staged_count,
            skipped: s.skipped.into_iter().collect(),
            on_exhausted: s.on_exhausted.into_iter().collect(),
        }),
        ticks: s.ticks,
        current_attempt: s.current_attempt,
        in_flight: s.in_flight,
        staged: s.staged,
        waiting: s.waiting.unwrap_or_default(),
        finished_at: stamp(s.finished_at),
        paused_at: stamp(s.paused_at),
        paused_reason: s.paused_reason.unwrap_or_default(),
        paused_note: s.paused_note.unwrap_or_default(),
        held: s.held.into_iter().map(held_to_wire).collect(),
    }
}

/// A held execution as `jobsd.v1.HeldExecution`.
pub fn held_to_wire(h: HeldExecution) -> jv1::HeldExecution {
    jv1::HeldExecution {
        execution_id: h.execution_id.to_string(),
        attempt: h.attempt,
        nominal_time: stamp(Some(h.nominal)),
        started: stamp(Some(h.started)),
        lease_until: stamp(h.lease_until),
    }
}

/// A `jobsd.v1.HeldExecution` of job `name` (an unreadable id is left out).
fn held_from_wire(h: jv1::HeldExecution, name: &str) -> Option<HeldExecution> {
    Some(HeldExecution {
        execution_id: crate::trigger::ExecutionId::parse(&h.execution_id)?,
        name: name.to_owned(),
        attempt: h.attempt,
        nominal: instant(h.nominal_time)?,
        started: instant(h.started)?,
        lease_until: instant(h.lease_until),
        ended: None,
    })
}

/// A `jobsd.v1.JobStatus` as the engine's status.
pub fn status_from_wire(s: jv1::JobStatus) -> JobStatus {
    let counters = s.counters.unwrap_or_default();
    JobStatus {
        state: Some(JobState::parse(&s.state).unwrap_or(JobState::Active)),
        next_fire_time: instant(s.next_fire_time),
        last_fire_nominal: instant(s.last_fire_nominal),
        last_fire_actual: instant(s.last_fire_actual),
        last_outcome: outcome_named(&s.last_outcome),
        last_error: (!s.last_error.is_empty()).then_some(s.last_error),
        delivered: counters.delivered,
        succeeded: counters.succeeded,
        failed_attempts: counters.failed_attempts,
        dropped: counters.dropped,
        staged_count: counters.staged,
        skipped: counters.skipped.into_iter().collect(),
        on_exhausted: counters.on_exhausted.into_iter().collect(),
        ticks: s.ticks,
        current_attempt: s.current_attempt,
        in_flight: s.in_flight,
        staged: s.staged,
        waiting: (!s.waiting.is_empty()).then_some(s.waiting),
        finished_at: instant(s.finished_at),
        paused_at: instant(s.paused_at),
        paused_reason: (!s.paused_reason.is_empty()).then_some(s.paused_reason),
        paused_note: (!s.paused_note.is_empty()).then_some(s.paused_note),
        held: s
            .held
            .into_iter()
            .filter_map(|h| held_from_wire(h, ""))
            .collect(),
    }
}

/// A run as `jobsd.v1.Run` (with its latency).
pub fn run_to_wire(r: Run) -> jv1::Run {
    let latency = match (instant(r.run.started), instant(r.run.finished)) {
        (Some(a), Some(b)) => (b - a).max(chrono::TimeDelta::zero()).to_std().ok(),
        _ => None,
    }
    .and_then(|d| prost_types::Duration::try_from(d).ok());
    let outcome = match r.run.outcome() {
        RunOutcome::Success => jv1::RunOutcome::Success,
        RunOutcome::Failed => jv1::RunOutcome::Failed,
        RunOutcome::Cancelled => jv1::RunOutcome::Cancelled,
        RunOutcome::TimedOut => jv1::RunOutcome::TimedOut,
        RunOutcome::Skipped => jv1::RunOutcome::Skipped,
        RunOutcome::Undeliverable => jv1::RunOutcome::Undeliverable,
        RunOutcome::Running => jv1::RunOutcome::Running,
        RunOutcome::Unspecified => jv1::RunOutcome::Unspecified,
    };
    jv1::Run {
        seq: r.seq,
        execution_id: r.run.execution_id,
        nominal_time: r.run.nominal,
        attempt: r.run.attempt,
        started: r.run.started,
        finished: r.run.finished,
        latency,
        outcome: outcome.into(),
        http_status: r.run.http_status,
        grpc_code: r.run.grpc_code,
        error: r.run.error,
        trigger: r.run.trigger,
    }
}

/// A `jobsd.v1.Run` as the engine's run (the two outcome enums share their numbers).
pub fn run_from_wire(r: jv1::Run) -> Run {
    Run {
        seq: r.seq,
        run: StoredRun {
            execution_id: r.execution_id,
            nominal: r.nominal_time,
            attempt: r.attempt,
            started: r.started,
            finished: r.finished,
            outcome: RunOutcome::try_from(r.outcome).map_or(0, i32::from),
            http_status: r.http_status,
            grpc_code: r.grpc_code,
            error: r.error,
            trigger: r.trigger,
        },
    }
}

/// `before` of the next page of runs: the oldest one's number when the page is full.
pub fn next_before(runs: &[Run], limit: usize) -> Option<u64> {
    (limit > 0 && runs.len() == limit)
        .then(|| runs.last().map(|r| r.seq))
        .flatten()
}

/// A view as the replica sends it.
pub fn view_to_wire(v: JobView) -> jsv1::JobView {
    jsv1::JobView {
        name: v.name,
        job: Some(v.job),
        labels: v.labels.into_iter().collect(),
        status: Some(status_to_wire(v.status)),
        policy: v.policy,
        failure_policy: v.failure_policy,
        etag: v.etag,
    }
}

/// A view as the replica sent it.
pub fn view_from_wire(v: jsv1::JobView) -> JobView {
    let mut status = status_from_wire(v.status.unwrap_or_default());
    for held in &mut status.held {
        held.name.clone_from(&v.name);
    }
    JobView {
        name: v.name,
        job: v.job.unwrap_or_default(),
        labels: v.labels.into_iter().collect(),
        status,
        policy: v.policy,
        failure_policy: v.failure_policy,
        etag: v.etag,
    }
}

/// A page as the replica sends it.
pub fn page_to_wire(page: ListPage) -> jsv1::ListJobsResponse {
    jsv1::ListJobsResponse {
        jobs: page.jobs.into_iter().map(view_to_wire).collect(),
        next_page_token: page.next_page_token.unwrap_or_default(),
    }
}

/// A page as the replica sent it.
pub fn page_from_wire(page: jsv1::ListJobsResponse) -> ListPage {
    ListPage {
        jobs: page.jobs.into_iter().map(view_from_wire).collect(),
        next_page_token: (!page.next_page_token.is_empty()).then_some(page.next_page_token),
    }
}

/// A filter as `jobsd.v1.ListJobsRequest`.
pub fn filter_to_wire(f: ListFilter) -> jv1::ListJobsRequest {
    jv1::ListJobsRequest {
        prefix: f.name_prefix,
        labels: f.labels.into_iter().collect(),
        state: f.state.map(|s| s.as_str().to_owned()).unwrap_or_default(),
        page_size: u32::try_from(f.page_size).unwrap_or(u32::MAX),
        page_token: f.page_token.unwrap_or_default(),
    }
}

/// A `jobsd.v1.ListJobsRequest` as a filter; the error names the bad field.
pub fn filter_from_wire(req: jv1::ListJobsRequest) -> Result<ListFilter, String> {
    let state = if req.state.is_empty() {
        None
    } else {
        Some(JobState::parse(&req.state).ok_or_else(|| {
            format!(
                "state: {:?} is not one of active, paused, finished",
                req.state
            )
        })?)
    };
    Ok(ListFilter {
        name_prefix: req.prefix,
        labels: req.labels.into_iter().collect(),
        state,
        page_size: req.page_size as usize,
        page_token: (!req.page_token.is_empty()).then_some(req.page_token),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_runs_and_filters_survive_the_wire() {
        let t = DateTime::from_timestamp(1_800_000_000, 123_000).unwrap();
        let status = JobStatus {
            state: Some(JobState::Finished),
            next_fire_time: None,
            last_fire_nominal: Some(t),
            last_fire_actual: Some(t + chrono::TimeDelta::milliseconds(3)),
            last_outcome: Some(RunOutcome::TimedOut),
            last_error: Some("slow".into()),
            delivered: 4,
            succeeded: 1,
            failed_attempts: 3,
            dropped: 1,
            staged_count: 2,
            skipped: [("overlap".to_owned(), 5)].into(),
            ticks: 2,
            current_attempt: 1,
            in_flight: false,
            staged: true,
            waiting: Some("concurrency key \"a\" is at its limit".into()),
            finished_at: Some(t),
            on_exhausted: [("dead_letter".to_owned(), 1)].into(),
            paused_at: None,
            paused_reason: None,
            paused_note: None,
            held: vec![HeldExecution {
                execution_id: crate::trigger::ExecutionId::for_tick("app||ns||a||j", t),
                // A status does not carry the job's name: the view fills it in.
                name: String::new(),
                attempt: 2,
                nominal: t,
                started: t + chrono::TimeDelta::seconds(1),
                lease_until: Some(t + chrono::TimeDelta::minutes(5)),
                ended: None,
            }],
        };
        assert_eq!(status_from_wire(status_to_wire(status.clone())), status);
        let paused = JobStatus {
            state: Some(JobState::Paused),
            paused_at: Some(t),
            paused_reason: Some("manual".into()),
            paused_note: Some("maintenance".into()),
            ..status
        };
        assert_eq!(status_from_wire(status_to_wire(paused.clone())), paused);
        for o in [
            RunOutcome::Success,
            RunOutcome::Failed,
            RunOutcome::Cancelled,
            RunOutcome::TimedOut,
            RunOutcome::Skipped,
            RunOutcome::Undeliverable,
        ] {
            assert_eq!(outcome_named(outcome_name(o)), Some(o));
            let run = Run {
                seq: 9,
                run: StoredRun {
                    execution_id: "id".into(),
                    nominal: stamp(Some(t)),
                    attempt: 2,
                    started: stamp(Some(t)),
                    finished: stamp(Some(t + chrono::TimeDelta::milliseconds(7))),
                    outcome: o.into(),
                    http_status: 503,
                    grpc_code: Some(14),
                    error: "e".into(),
                    trigger: "backfill".into(),
                },
            };
            let wire = run_to_wire(run.clone());
            assert_eq!(
                wire.latency,
                Some(prost_types::Duration {
                    seconds: 0,
                    nanos: 7_000_000
                })
            );
            assert_eq!(run_from_wire(wire), run);
        }
        let filter = ListFilter {
            name_prefix: "a".into(),
            labels: vec![("k".into(), "v".into())],
            state: Some(JobState::Paused),
            page_size: 10,
            page_token: Some("a:x".into()),
        };
        assert_eq!(
            filter_from_wire(filter_to_wire(filter.clone())).unwrap(),
            filter
        );
        let bad = jv1::ListJobsRequest {
            state: "gone".into(),
            ..Default::default()
        };
        assert!(filter_from_wire(bad).unwrap_err().starts_with("state:"));
    }
}
