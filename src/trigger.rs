//! The contract between whoever fires a job and whoever delivers it.
//!
//! The engine (embedded sidecar or replica) hands a [`Trigger`] to a [`Sink`]; the sink
//! answers with a [`TriggerResult`]. Sinks are the app delivery (`delivery`), the WatchJobs
//! stream pool of a replica (`replica::pool`), and, in remote mode, the triggers a Scheduler
//! sends arrive here too (`seam::remote`). The composed keys jobs are stored and routed
//! under (`app||…`, `actorreminder||…`) are built in [`keys`] and nowhere else.
//!
//! This module is a leaf: it imports the protos and the pure `schedule` name rules, nothing
//! with I/O.

pub mod context;
pub mod keys;

pub use context::TriggerKind;

use std::sync::Arc;

use crate::proto::dapr_scheduler as sv1;

/// The type URL of job data that is JSON: a `google.protobuf.Value`, delivered to an HTTP
/// app as its JSON text (data scheduled over HTTP carries it).
pub const VALUE_TYPE_URL: &str = "type.googleapis.com/google.protobuf.Value";

/// One firing of a job, handed to the sink.
#[derive(Debug, Clone)]
pub struct Trigger {
    /// Composed key of the job (`app||ns||app||name`, `actorreminder||…`).
    pub key: Arc<str>,
    /// The job's name as its owner gave it (no key prefix).
    pub name: Arc<str>,
    /// The stored payload, passed through unchanged.
    pub data: Option<prost_types::Any>,
    /// Owner and target the job was stored with.
    pub metadata: Arc<sv1::JobMetadata>,
    /// The nominal time this trigger is for (the tick, plus retry intervals); a trigger
    /// received from a Scheduler replica carries the time it arrived (the wire has none).
    /// Delivery logs how late it went out against this time.
    pub scheduled_at: chrono::DateTime<chrono::Utc>,
    /// The nominal time of the execution (the tick, without retry intervals): the
    /// `Jobsd-Scheduled-Time` an app is told. `None` for a trigger received from a Dapr
    /// Scheduler, whose wire does not carry it.
    pub tick: Option<chrono::DateTime<chrono::Utc>>,
    /// Why the execution runs: a tick of the schedule, run now by hand, or a backfill.
    pub kind: TriggerKind,
    /// The execution this trigger is an attempt of: one per job tick, the same on every
    /// retry of that tick (see [`ExecutionId::for_tick`]).
    pub execution_id: ExecutionId,
    /// Which attempt of the execution this is, from 1.
    pub attempt: u32,
    /// W3C `traceparent` of the request that created the job, when its caller sent one.
    pub created_by: Option<Arc<str>>,
}

/// The id of one execution of a job: a name-based (version 5) UUID of the job's composed key
/// and the nominal time of the tick, so every retry of a tick, every replica and every restart
/// name it alike, and two ticks never share one. Its 16 bytes also serve as the W3C trace id
/// of the execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExecutionId(uuid::Uuid);

/// The UUID namespace of jobsd's execution ids (a v5 UUID of "jobsd.execution" in the URL
/// namespace; fixed forever, or ids would change meaning).
const EXECUTION_NAMESPACE: uuid::Uuid =
    uuid::Uuid::from_u128(0x6b2e_0c4f_3a57_5d8e_9f41_2c7a_d0e3_b915);

impl ExecutionId {
    /// The execution of `key`'s tick at `tick` (nominal time, nanosecond precision).
    pub fn for_tick(key: &str, tick: chrono::DateTime<chrono::Utc>) -> Self {
        let name = format!(
            "{key}@{}",
            tick.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
        );
        ExecutionId(uuid::Uuid::new_v5(&EXECUTION_NAMESPACE, name.as_bytes()))
    }

    /// The execution of `key` at nominal time `tick` started for `kind`: a scheduled tick is
    /// [`ExecutionId::for_tick`]; a manual run or a backfilled tick gets an id of its own, so
    /// re-running a past tick never reuses the id the scheduled run of that tick had (an app
    /// keying its work by execution id would otherwise take it for a duplicate).
    pub fn for_execution(
        key: &str,
        tick: chrono::DateTime<chrono::Utc>,
        kind: TriggerKind,
    ) -> Self {
        if kind == TriggerKind::Schedule {
            return Self::for_tick(key, tick);
        }
        let name = format!(
            "{key}@{}#{}",
            tick.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
            kind.as_str()
        );
        ExecutionId(uuid::Uuid::new_v5(&EXECUTION_NAMESPACE, name.as_bytes()))
    }

    /// The id's 16 bytes (never all zero: a v5 UUID has its version bits set).
    pub fn as_bytes(&self) -> &[u8; 16] {
        self.0.as_bytes()
    }

    /// The id whose 16 bytes ([`ExecutionId::as_bytes`]) are `bytes`; `None` for another
    /// length.
    pub fn from_slice(bytes: &[u8]) -> Option<Self> {
        uuid::Uuid::from_slice(bytes).ok().map(ExecutionId)
    }

    /// Parses the hyphenated form [`std::fmt::Display`] prints.
    pub fn parse(s: &str) -> Option<Self> {
        uuid::Uuid::try_parse(s).ok().map(ExecutionId)
    }
}

impl std::fmt::Display for ExecutionId {
    /// Hyphenated lower-case UUID (`6f1c…-…`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

/// What became of a trigger: the one result type from the sink back to the engine, and
/// (through [`TriggerResult::to_wire`] / [`TriggerResult::from_wire`]) the ack on a
/// WatchJobs stream.
///
/// Two narrower types stay on purpose: `schedule::Outcome` is the pure plan's input, which
/// never sees `Undeliverable` (such triggers are staged before the plan is asked), and
/// `delivery` keeps how the app took a successful call (2xx or 404) for its counts only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerResult {
    /// The target took it (Dapr `SUCCESS`).
    Success,
    /// The target failed it; the job's failure policy decides (Dapr `FAILED`).
    Failed,
    /// Nobody could take it (no app, app unhealthy, no stream): the trigger is staged, not
    /// counted, and fires again as soon as the target reports itself deliverable (Dapr
    /// `UNDELIVERABLE`).
    Undeliverable,
    /// The target took it and asks that the job never fire again (an actor answering a
    /// reminder with `X-DaprReminderCancel`): the job is deleted. Dapr's wire has no such
    /// ack, so it travels as `SUCCESS` and the sidecar deletes the reminder itself.
    Cancel,
    /// The target took it and will say later how it went (async completion: HTTP `202` with
    /// `Jobsd-Async: true`, or gRPC response metadata `jobsd-async: true`). The execution
    /// stays in flight under a lease until the app completes or fails it through jobsd's API,
    /// or the lease runs out (a failed attempt). Dapr's wire has no such ack: a sidecar that
    /// cannot hold executions (remote mode) fails the attempt instead.
    Held,
    /// The target answered a plain HTTP `202 Accepted`: held like [`TriggerResult::Held`]
    /// when the job's policy opts in (`policy.lease`), otherwise the success every 2xx is
    /// to Dapr.
    Accepted,
}

impl TriggerResult {
    /// How the result is named in metrics (`outcome` label) and spans (`jobsd.outcome`):
    /// `success`, `failed`, `undeliverable`, `cancelled`, `held`. An [`TriggerResult::Accepted`]
    /// not held is the success it is to Dapr.
    pub fn outcome(self) -> &'static str {
        match self {
            TriggerResult::Success | TriggerResult::Accepted => "success",
            TriggerResult::Held => "held",
            TriggerResult::Failed => "failed",
            TriggerResult::Undeliverable => "undeliverable",
            TriggerResult::Cancel => "cancelled",
        }
    }

    /// The ack a sidecar sends on a WatchJobs stream. Dapr's wire has no `UNDELIVERABLE`
    /// ack: a sidecar that could not deliver answers `FAILED`, as daprd does.
    pub fn to_wire(self) -> sv1::WatchJobsRequestResultStatus {
        match self {
            TriggerResult::Success | TriggerResult::Cancel | TriggerResult::Accepted => {
                sv1::WatchJobsRequestResultStatus::Success
            }
            TriggerResult::Failed | TriggerResult::Undeliverable | TriggerResult::Held => {
                sv1::WatchJobsRequestResultStatus::Failed
            }
        }
    }

    /// The result an ack on a WatchJobs stream stands for; `None` for a status Dapr's
    /// protocol does not have (the Scheduler closes such a stream).
    pub fn from_wire(status: i32) -> Option<TriggerResult> {
        match sv1::WatchJobsRequestResultStatus::try_from(status) {
            Ok(sv1::WatchJobsRequestResultStatus::Success) => Some(TriggerResult::Success),
            Ok(sv1::WatchJobsRequestResultStatus::Failed) => Some(TriggerResult::Failed),
            Err(_) => None,
        }
    }
}

/// A sink's answer with what the run history keeps of it: the result, and for a failure the
/// app's HTTP status or gRPC code and the error text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// What became of the trigger.
    pub result: TriggerResult,
    /// A resiliency timeout cut the attempt short.
    pub timed_out: bool,
    /// HTTP status the app answered with, when it was not 2xx.
    pub http_status: Option<u16>,
    /// gRPC code the app answered with.
    pub grpc_code: Option<i32>,
    /// Why it failed, for people.
    pub error: Option<String>,
}

impl From<TriggerResult> for Report {
    fn from(result: TriggerResult) -> Self {
        Report {
            result,
            timed_out: false,
            http_status: None,
            grpc_code: None,
            error: None,
        }
    }
}

/// The receiver of triggers.
#[async_trait::async_trait]
pub trait Sink: Send + Sync + 'static {
    /// Delivers one trigger and reports what became of it. Called concurrently for different
    /// jobs; never twice at once for the same job.
    async fn deliver(&self, trigger: Trigger) -> TriggerResult;

    /// [`Sink::deliver`] with what the run history keeps of the answer. Sinks that know more
    /// than the result (the app delivery) say it here.
    async fn deliver_reported(&self, trigger: Trigger) -> Report {
        self.deliver(trigger).await.into()
    }

    /// Whether a trigger for `key` could be taken right now. A trigger answered
    /// `Undeliverable` is staged only while this is false (otherwise it is retried at once);
    /// staged triggers come back through `Engine::release`.
    fn is_deliverable(&self, key: &str) -> bool;

    /// Most triggers worth handing to the sink at once (an app's concurrency limit). The
    /// engine keeps the rest queued, in time order, and fires them as answers come back, so a
    /// burst of due jobs never becomes a task per job. Unbounded by default.
    fn capacity(&self) -> usize {
        usize::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_travel_as_daprs_acks() {
        use sv1::WatchJobsRequestResultStatus as Wire;
        assert_eq!(TriggerResult::Success.to_wire(), Wire::Success);
        assert_eq!(TriggerResult::Failed.to_wire(), Wire::Failed);
        assert_eq!(TriggerResult::Undeliverable.to_wire(), Wire::Failed);
        assert_eq!(TriggerResult::Cancel.to_wire(), Wire::Success);
        // Dapr's plain reading of a 202; an explicit async answer cannot be held over the wire.
        assert_eq!(TriggerResult::Accepted.to_wire(), Wire::Success);
        assert_eq!(TriggerResult::Held.to_wire(), Wire::Failed);
        for r in [TriggerResult::Success, TriggerResult::Failed] {
            assert_eq!(TriggerResult::from_wire(r.to_wire() as i32), Some(r));
        }
        assert_eq!(TriggerResult::from_wire(99), None);
    }

    #[test]
    fn execution_ids_are_per_tick_and_stable() {
        use chrono::TimeZone;
        let t = chrono::Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        let a = ExecutionId::for_tick("app||default||myapp||j", t);
        assert_eq!(a, ExecutionId::for_tick("app||default||myapp||j", t));
        assert_ne!(a, ExecutionId::for_tick("app||default||myapp||k", t));
        let later = t + chrono::TimeDelta::nanoseconds(1);
        assert_ne!(a, ExecutionId::for_tick("app||default||myapp||j", later));
        // Fixed forever: stored history and apps' idempotency keys rely on it.
        assert_eq!(
            a.to_string(),
            ExecutionId::parse(&a.to_string()).unwrap().to_string()
        );
        assert_eq!(a.to_string().len(), 36);
        assert_eq!(a.as_bytes()[6] >> 4, 5, "a version 5 UUID");
        assert_eq!(
            ExecutionId::for_execution("app||default||myapp||j", t, TriggerKind::Schedule),
            a
        );
        let manual = ExecutionId::for_execution("app||default||myapp||j", t, TriggerKind::Manual);
        let backfill =
            ExecutionId::for_execution("app||default||myapp||j", t, TriggerKind::Backfill);
        assert!(manual != a && backfill != a && manual != backfill);
    }
}
