//! The Dapr Scheduler's metrics (`pkg/scheduler/monitoring` of Dapr 1.18), recorded by a
//! `jobsd scheduler` replica under Dapr's names and labels: jobs created, deleted and refused
//! and triggers by result (label `type`), bulk deletions, errors talking to sidecars (label
//! `reason`), the concurrency limits' gates (label `concurrency_key`), trigger latency, and
//! the connected sidecars.

use std::sync::Arc;
use std::time::Instant;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::{Buckets, Fixed, Level, NS_PER_MS};
use crate::trigger::TriggerResult;

/// The Dapr Scheduler's buckets of `trigger_latency`, in milliseconds.
const SCHEDULER_LATENCY_MS: [f64; 6] = [0.0, 100.0, 500.0, 1_000.0, 5_000.0, 10_000.0];

/// The kind of target a job has: the `type` label of the Scheduler's metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobType {
    /// An app job.
    Job,
    /// An actor reminder.
    Actor,
    /// No target in the metadata.
    Unknown,
}

impl JobType {
    /// Every type, in the order they are exposed.
    const ALL: [JobType; 3] = [JobType::Job, JobType::Actor, JobType::Unknown];

    fn index(self) -> usize {
        match self {
            JobType::Job => 0,
            JobType::Actor => 1,
            JobType::Unknown => 2,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            JobType::Job => "job",
            JobType::Actor => "actor",
            JobType::Unknown => "unknown",
        }
    }
}

/// Why talking to a sidecar failed: the `reason` label of `sidecar_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SidecarError {
    /// A trigger could not be sent on a WatchJobs stream.
    SendFailed,
    /// Reading a WatchJobs stream failed (not its end, not a cancel).
    RecvFailed,
    /// A request named no namespace or app id (or, with mTLS, another identity).
    AuthFailed,
}

impl SidecarError {
    /// Every reason, in the order they are exposed.
    const ALL: [SidecarError; 3] = [
        SidecarError::SendFailed,
        SidecarError::RecvFailed,
        SidecarError::AuthFailed,
    ];

    fn index(self) -> usize {
        match self {
            SidecarError::SendFailed => 0,
            SidecarError::RecvFailed => 1,
            SidecarError::AuthFailed => 2,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            SidecarError::SendFailed => "send_failed",
            SidecarError::RecvFailed => "recv_failed",
            SidecarError::AuthFailed => "auth_failed",
        }
    }
}

/// The `concurrency_key` label set of the gate families.
type KeyLabel = Vec<(&'static str, String)>;

/// The Dapr Scheduler's metrics, by target `type`: `dapr_scheduler_jobs_created_total`,
/// `…_jobs_triggered_total` (acked SUCCESS), `…_jobs_failed_total` (acked FAILED),
/// `…_jobs_undelivered_total` (no stream, or the stream went away), `…_jobs_deleted_total`,
/// `…_jobs_created_failed_total` (a create the store refused: a bad schedule, an existing
/// name without overwrite), `…_trigger_latency` (milliseconds from sending a trigger to its
/// ack, Dapr's buckets, for SUCCESS and FAILED); `…_jobs_bulk_deleted_total` (deletions by
/// metadata or name prefix), `…_sidecar_errors_total` by `reason`; the gates of the
/// concurrency limits by `concurrency_key` (`…_concurrency_inflight`, `…_concurrency_pending`,
/// `…_concurrency_throttled_total`); and `…_sidecars_connected` (WatchJobs streams, sampled
/// at scrape time).
#[derive(Clone, Default, Debug)]
pub struct SchedulerMetrics(Option<Arc<SchedulerCells>>);

/// The cells of [`SchedulerMetrics`], per [`JobType`] in [`JobType::ALL`] order.
#[derive(Debug)]
struct SchedulerCells {
    created: [Counter; 3],
    triggered: [Counter; 3],
    failed: [Counter; 3],
    undelivered: [Counter; 3],
    deleted: [Counter; 3],
    created_failed: [Counter; 3],
    latency: [Buckets; 3],
    bulk_deleted: Counter,
    /// Per [`SidecarError`] in [`SidecarError::ALL`] order.
    sidecar_errors: [Counter; 3],
    inflight: Family<KeyLabel, Gauge>,
    pending: Family<KeyLabel, Gauge>,
    throttled: Family<KeyLabel, Counter>,
    sidecars: Level,
}

/// When a trigger went out on a stream, for [`SchedulerMetrics::answered`].
#[derive(Debug, Clone, Copy)]
pub struct Sent(Option<Instant>);

/// A family of one metric per [`JobType`], labelled `type`.
fn by_type<M: Clone>(cells: &[M; 3]) -> Fixed<M> {
    Fixed::new(
        JobType::ALL
            .iter()
            .map(|t| {
                (
                    vec![("type", t.as_str().to_owned())],
                    cells[t.index()].clone(),
                )
            })
            .collect(),
    )
}

impl SchedulerMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let cells = SchedulerCells {
            created: Default::default(),
            triggered: Default::default(),
            failed: Default::default(),
            undelivered: Default::default(),
            deleted: Default::default(),
            created_failed: Default::default(),
            latency: std::array::from_fn(|_| Buckets::new(&SCHEDULER_LATENCY_MS, NS_PER_MS)),
            bulk_deleted: Counter::default(),
            sidecar_errors: Default::default(),
            inflight: Family::default(),
            pending: Family::default(),
            throttled: Family::default(),
            sidecars: Level::default(),
        };
        registry.register(
            "dapr_scheduler_sidecars_connected",
            "The number of dapr sidecars actively connected to the scheduler service",
            cells.sidecars.clone(),
        );
        for (name, help, family) in [
            (
                "dapr_scheduler_jobs_created",
                "The total number of jobs scheduled",
                &cells.created,
            ),
            (
                "dapr_scheduler_jobs_triggered",
                "The total number of successfully triggered jobs",
                &cells.triggered,
            ),
            (
                "dapr_scheduler_jobs_failed",
                "The total number of failed jobs",
                &cells.failed,
            ),
            (
                "dapr_scheduler_jobs_undelivered",
                "The total number of undelivered jobs",
                &cells.undelivered,
            ),
            (
                "dapr_scheduler_jobs_deleted",
                "The total number of deleted jobs",
                &cells.deleted,
            ),
            (
                "dapr_scheduler_jobs_created_failed",
                "The total number of failed job creation attempts",
                &cells.created_failed,
            ),
        ] {
            registry.register(name, help, by_type(family));
        }
        registry.register(
            "dapr_scheduler_trigger_latency",
            "The total time it takes to trigger a job from the scheduler service",
            by_type(&cells.latency),
        );
        registry.register(
            "dapr_scheduler_jobs_bulk_deleted",
            "The total number of bulk job deletion operations",
            cells.bulk_deleted.clone(),
        );
        registry.register(
            "dapr_scheduler_sidecar_errors",
            "The total number of sidecar communication and authorization errors",
            Fixed::new(
                SidecarError::ALL
                    .iter()
                    .map(|r| {
                        (
                            vec![("reason", r.as_str().to_owned())],
                            cells.sidecar_errors[r.index()].clone(),
                        )
                    })
                    .collect(),
            ),
        );
        registry.register(
            "dapr_scheduler_concurrency_inflight",
            "Current number of in-flight triggers subject to global concurrency limits on this \
             scheduler instance",
            cells.inflight.clone(),
        );
        registry.register(
            "dapr_scheduler_concurrency_pending",
            "Current number of triggers waiting for a concurrency slot on this scheduler \
             instance",
            cells.pending.clone(),
        );
        registry.register(
            "dapr_scheduler_concurrency_throttled",
            "Total number of triggers that were throttled by global concurrency limits",
            cells.throttled.clone(),
        );
        SchedulerMetrics(Some(Arc::new(cells)))
    }

    /// A job of type `t` was stored.
    pub fn created(&self, t: JobType) {
        if let Some(cells) = &self.0 {
            cells.created[t.index()].inc();
        }
    }

    /// The store refused to create a job of type `t`.
    pub fn create_failed(&self, t: JobType) {
        if let Some(cells) = &self.0 {
            cells.created_failed[t.index()].inc();
        }
    }

    /// A job of type `t` was deleted by name (whether or not it existed, as Dapr counts).
    pub fn deleted(&self, t: JobType) {
        if let Some(cells) = &self.0 {
            cells.deleted[t.index()].inc();
        }
    }

    /// Jobs were deleted by metadata or by name prefix.
    pub fn bulk_deleted(&self) {
        if let Some(cells) = &self.0 {
            cells.bulk_deleted.inc();
        }
    }

    /// Talking to a sidecar failed for `reason`.
    pub fn sidecar_error(&self, reason: SidecarError) {
        if let Some(cells) = &self.0 {
            cells.sidecar_errors[reason.index()].inc();
        }
    }

    /// The gate `key` holds `n` triggers in flight now.
    pub fn gate_inflight(&self, key: &str, n: usize) {
        if let Some(cells) = &self.0 {
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            cells
                .inflight
                .get_or_create(&vec![("concurrency_key", key.to_owned())])
                .set(n);
        }
    }

    /// The gate `key` has `n` triggers waiting now.
    pub fn gate_pending(&self, key: &str, n: usize) {
        if let Some(cells) = &self.0 {
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            cells
                .pending
                .get_or_create(&vec![("concurrency_key", key.to_owned())])
                .set(n);
        }
    }

    /// A trigger had to wait for the gate `key`.
    pub fn gate_throttled(&self, key: &str) {
        if let Some(cells) = &self.0 {
            cells
                .throttled
                .get_or_create(&vec![("concurrency_key", key.to_owned())])
                .inc();
        }
    }

    /// A trigger is about to go out on a stream.
    pub fn sending(&self) -> Sent {
        Sent(self.0.as_ref().map(|_| Instant::now()))
    }

    /// A trigger of type `t` sent at `sent` got `result` (`Undeliverable` when it never
    /// reached a stream or the stream went away).
    pub fn answered(&self, t: JobType, sent: Sent, result: TriggerResult) {
        let Some(cells) = &self.0 else {
            return;
        };
        let at = t.index();
        let counter = match result {
            // A stream's acks are only Dapr's two; the others never come back from one.
            TriggerResult::Success | TriggerResult::Cancel | TriggerResult::Accepted => {
                &cells.triggered[at]
            }
            TriggerResult::Failed | TriggerResult::Held => &cells.failed[at],
            TriggerResult::Undeliverable => {
                cells.undelivered[at].inc();
                return;
            }
        };
        counter.inc();
        if let Some(sent) = sent.0 {
            // Dapr records whole milliseconds (`duration.Milliseconds()`), so a trigger acked
            // within the millisecond lands in its `le="0"` bucket; the same here.
            let ms = u64::try_from(sent.elapsed().as_millis()).unwrap_or(u64::MAX);
            cells.latency[at].observe(ms.saturating_mul(1_000_000));
        }
    }

    /// Sets the number of connected WatchJobs streams (at scrape time).
    pub fn set_sidecars(&self, n: usize) {
        if let Some(cells) = &self.0 {
            cells.sidecars.set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Format, Metrics};
    use super::*;

    #[tokio::test]
    async fn replica_families_are_the_scheduler_s_by_type() {
        let m = Metrics::replica(false);
        let s = m.scheduler();
        s.created(JobType::Actor);
        s.answered(JobType::Job, s.sending(), TriggerResult::Success);
        s.answered(JobType::Job, s.sending(), TriggerResult::Undeliverable);
        s.set_sidecars(3);
        s.deleted(JobType::Actor);
        s.create_failed(JobType::Job);
        s.bulk_deleted();
        s.sidecar_error(SidecarError::AuthFailed);
        s.gate_inflight("mytype", 2);
        s.gate_pending("mytype:Send", 5);
        s.gate_throttled("mytype");
        let text = m.render(Format::Prometheus).await.unwrap();
        for line in [
            "dapr_scheduler_jobs_created_total{type=\"actor\"} 1\n",
            "dapr_scheduler_jobs_triggered_total{type=\"job\"} 1\n",
            "dapr_scheduler_jobs_undelivered_total{type=\"job\"} 1\n",
            "dapr_scheduler_trigger_latency_bucket{type=\"job\",le=\"0\"} 1\n",
            "dapr_scheduler_sidecars_connected 3\n",
            "dapr_scheduler_jobs_deleted_total{type=\"actor\"} 1\n",
            "dapr_scheduler_jobs_created_failed_total{type=\"job\"} 1\n",
            "dapr_scheduler_jobs_bulk_deleted_total 1\n",
            "dapr_scheduler_sidecar_errors_total{reason=\"auth_failed\"} 1\n",
            "dapr_scheduler_sidecar_errors_total{reason=\"send_failed\"} 0\n",
            "dapr_scheduler_concurrency_inflight{concurrency_key=\"mytype\"} 2\n",
            "dapr_scheduler_concurrency_pending{concurrency_key=\"mytype:Send\"} 5\n",
            "dapr_scheduler_concurrency_throttled_total{concurrency_key=\"mytype\"} 1\n",
        ] {
            assert!(text.contains(line), "{line:?} missing from:\n{text}");
        }
        assert!(!text.contains("dapr_component_job"));
        assert!(!text.contains("app_id"));
    }
}
