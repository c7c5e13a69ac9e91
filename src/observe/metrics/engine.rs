//! The trigger loop's metrics (`jobsd_*`): lateness and outcome of every trigger, skipped
//! and exhausted ticks, jobs created and deleted, and the jobs the loop holds (sampled at
//! scrape time). Also the bounded label vocabularies (`reason`, `outcome`) they use.

use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::NS_PER_S;
use super::{Buckets, Fixed, Level};
use crate::trigger::TriggerResult;

/// Buckets of trigger lateness in seconds: sub-millisecond when healthy, up to an hour for a
/// catch-up after downtime.
const LATENESS_SECONDS: [f64; 17] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0,
    3600.0,
];

/// Buckets of a delivery's duration in seconds (one app call, or a round trip on a stream).
const DELIVERY_SECONDS: [f64; 15] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Why a tick was skipped rather than fired: a bounded set, the `reason` label of
/// `jobsd_ticks_skipped_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// The job can never fire again (its ttl or repeats ran out while nobody fired it; a
    /// create whose ttl has already passed): it is deleted unfired.
    Expired,
    /// A missed-tick policy dropped a tick that came due while nobody could fire it.
    Missed,
    /// An overlap policy dropped a tick that came due while the previous one was running.
    Overlap,
    /// `whileTargetDown: skip` dropped a tick that came due while the app could not take it.
    TargetDown,
    /// The tick came due while its job was paused (counted when the job is resumed).
    Paused,
}

impl Skip {
    /// Every reason, in the order they are exposed.
    pub const ALL: [Skip; 5] = [
        Skip::Expired,
        Skip::Missed,
        Skip::Overlap,
        Skip::TargetDown,
        Skip::Paused,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Skip::Expired => "expired",
            Skip::Missed => "missed",
            Skip::Overlap => "overlap",
            Skip::TargetDown => "target_down",
            Skip::Paused => "paused",
        }
    }
}

/// What followed a tick whose failure policy was spent (`failurePolicy.onExhausted`): the
/// `reason` label of `jobsd_ticks_exhausted_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exhausted {
    /// Given up; the schedule goes on (Dapr's behaviour).
    Drop,
    /// The job was paused.
    Pause,
    /// Its dead-letter job was created.
    DeadLetter,
    /// Its dead-letter job could not be created (both names taken, or the write failed).
    DeadLetterFailed,
}

impl Exhausted {
    /// Every reason, in the order they are exposed.
    pub const ALL: [Exhausted; 4] = [
        Exhausted::Drop,
        Exhausted::Pause,
        Exhausted::DeadLetter,
        Exhausted::DeadLetterFailed,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Exhausted::Drop => "drop",
            Exhausted::Pause => "pause",
            Exhausted::DeadLetter => "dead_letter",
            Exhausted::DeadLetterFailed => "dead_letter_failed",
        }
    }
}

/// The result kinds of a trigger, in the order of [`EngineCells::durations`].
const OUTCOMES: [TriggerResult; 5] = [
    TriggerResult::Success,
    TriggerResult::Failed,
    TriggerResult::Undeliverable,
    TriggerResult::Cancel,
    TriggerResult::Held,
];

/// Index of a result in [`OUTCOMES`].
fn outcome_index(result: TriggerResult) -> usize {
    match result {
        TriggerResult::Success | TriggerResult::Accepted => 0,
        TriggerResult::Held => 4,
        TriggerResult::Failed => 1,
        TriggerResult::Undeliverable => 2,
        TriggerResult::Cancel => 3,
    }
}

/// The trigger loop's metrics (`engine`): lateness and outcome of every trigger it hands
/// out, skipped ticks, jobs created and deleted through it, and (sampled at scrape time,
/// [`EngineMetrics::sample`]) the jobs it tracks.
#[derive(Clone, Default, Debug)]
pub struct EngineMetrics(Option<Arc<EngineCells>>);

/// The cells of [`EngineMetrics`].
#[derive(Debug)]
struct EngineCells {
    /// `jobsd_trigger_lateness_seconds`.
    lateness: Buckets,
    /// `jobsd_triggers_in_flight`.
    in_flight: Level,
    /// `jobsd_trigger_duration_seconds{outcome}`, in [`OUTCOMES`] order.
    durations: [Buckets; OUTCOMES.len()],
    /// `jobsd_ticks_skipped_total{reason}`, in [`Skip::ALL`] order.
    skipped: [Counter; Skip::ALL.len()],
    /// `jobsd_ticks_exhausted_total{reason}`, in [`Exhausted::ALL`] order.
    exhausted: [Counter; Exhausted::ALL.len()],
    /// `jobsd_jobs_created_total`.
    created: Counter,
    /// `jobsd_jobs_deleted_total`.
    deleted: Counter,
    /// `jobsd_jobs`.
    jobs: Level,
    /// `jobsd_jobs_staged`.
    staged: Level,
    /// `jobsd_jobs_queued`.
    queued: Level,
    /// `jobsd_queue_overdue_seconds`.
    overdue: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// `jobsd_executions_held`.
    held: Level,
}

/// When a trigger was handed out, for [`EngineMetrics::answered`] (nothing when disabled).
#[derive(Debug, Clone, Copy)]
pub struct Fired(Option<Instant>);

/// What the trigger loop holds at one moment ([`EngineMetrics::sample`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct LoopSample {
    /// Jobs tracked.
    pub jobs: usize,
    /// Jobs staged (nobody can take their trigger).
    pub staged: usize,
    /// Jobs waiting in the time queue (due or not).
    pub queued: usize,
    /// How far past due the earliest queued trigger is (zero when none is overdue).
    pub overdue: Duration,
    /// Executions held under a lease (async completion).
    pub held: usize,
}

impl EngineMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let cells = EngineCells {
            lateness: Buckets::new(&LATENESS_SECONDS, NS_PER_S),
            in_flight: Level::default(),
            durations: std::array::from_fn(|_| Buckets::new(&DELIVERY_SECONDS, NS_PER_S)),
            skipped: Default::default(),
            exhausted: Default::default(),
            created: Counter::default(),
            deleted: Counter::default(),
            jobs: Level::default(),
            staged: Level::default(),
            queued: Level::default(),
            overdue: Gauge::default(),
            held: Level::default(),
        };
        registry.register(
            "jobsd_trigger_lateness_seconds",
            "How late triggers were handed out: actual time minus nominal time (the tick, plus \
             retry intervals)",
            cells.lateness.clone(),
        );
        registry.register(
            "jobsd_triggers_in_flight",
            "Triggers handed out (to the app, an actor or a WatchJobs stream) and not answered \
             yet",
            cells.in_flight.clone(),
        );
        registry.register(
            "jobsd_trigger_duration_seconds",
            "Time from handing a trigger out to its result, by outcome",
            Fixed::new(
                OUTCOMES
                    .iter()
                    .map(|&r| {
                        let at = outcome_index(r);
                        (
                            vec![("outcome", r.outcome().to_owned())],
                            cells.durations[at].clone(),
                        )
                    })
                    .collect(),
            ),
        );
        registry.register(
            "jobsd_ticks_skipped",
            "Ticks that were not fired, by reason",
            Fixed::new(
                Skip::ALL
                    .iter()
                    .zip(&cells.skipped)
                    .map(|(r, c)| (vec![("reason", r.as_str().to_owned())], c.clone()))
                    .collect(),
            ),
        );
        registry.register(
            "jobsd_ticks_exhausted",
            "Ticks whose failure policy was spent, by what followed (failurePolicy.onExhausted)",
            Fixed::new(
                Exhausted::ALL
                    .iter()
                    .zip(&cells.exhausted)
                    .map(|(r, c)| (vec![("reason", r.as_str().to_owned())], c.clone()))
                    .collect(),
            ),
        );
        registry.register(
            "jobsd_jobs_created",
            "Jobs created or overwritten through this process",
            cells.created.clone(),
        );
        registry.register(
            "jobsd_jobs_deleted",
            "Jobs deleted through this process (by name, name prefix or owner)",
            cells.deleted.clone(),
        );
        registry.register(
            "jobsd_jobs",
            "Jobs the trigger loop holds in memory: those due before its horizon (`--horizon`; \
             every job that can still fire with `--horizon 0`, and on a cluster replica every \
             job of its partitions)",
            cells.jobs.clone(),
        );
        registry.register(
            "jobsd_jobs_staged",
            "Jobs whose trigger found nobody to take it, waiting for their target",
            cells.staged.clone(),
        );
        registry.register(
            "jobsd_jobs_queued",
            "Jobs waiting in the trigger loop's time queue",
            cells.queued.clone(),
        );
        registry.register(
            "jobsd_queue_overdue_seconds",
            "How far past due the earliest queued trigger is (0 when the loop keeps up)",
            cells.overdue.clone(),
        );
        registry.register(
            "jobsd_executions_held",
            "Executions the app answered \"later\" (async completion), held under a lease until \
             it completes or fails them",
            cells.held.clone(),
        );
        EngineMetrics(Some(Arc::new(cells)))
    }

    /// A trigger was handed out `lateness` after its nominal time.
    pub fn fired(&self, lateness: chrono::TimeDelta) -> Fired {
        let Some(cells) = &self.0 else {
            return Fired(None);
        };
        cells
            .lateness
            .observe_duration(lateness.to_std().unwrap_or_default());
        cells.in_flight.add(1);
        Fired(Some(Instant::now()))
    }

    /// The trigger handed out at `fired` came back with `result`.
    pub fn answered(&self, fired: Fired, result: TriggerResult) {
        let (Some(cells), Some(at)) = (&self.0, fired.0) else {
            return;
        };
        cells.in_flight.add(-1);
        cells.durations[outcome_index(result)].observe_duration(at.elapsed());
    }

    /// A tick was skipped for `reason`.
    pub fn skipped(&self, reason: Skip) {
        self.skipped_many(reason, 1);
    }

    /// `n` ticks were skipped for `reason`.
    pub fn skipped_many(&self, reason: Skip, n: u64) {
        if let Some(cells) = &self.0 {
            let at = Skip::ALL.iter().position(|r| *r == reason).unwrap_or(0);
            cells.skipped[at].inc_by(n);
        }
    }

    /// A tick's failure policy was spent, and `then` followed.
    pub fn exhausted(&self, then: Exhausted) {
        if let Some(cells) = &self.0 {
            let at = Exhausted::ALL.iter().position(|r| *r == then).unwrap_or(0);
            cells.exhausted[at].inc();
        }
    }

    /// A job was created (or overwritten).
    pub fn created(&self) {
        if let Some(cells) = &self.0 {
            cells.created.inc();
        }
    }

    /// `n` jobs were deleted.
    pub fn deleted(&self, n: u64) {
        if let Some(cells) = &self.0 {
            cells.deleted.inc_by(n);
        }
    }

    /// Sets the sampled gauges (at scrape time).
    pub fn sample(&self, s: LoopSample) {
        if let Some(cells) = &self.0 {
            let n = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
            cells.jobs.set(n(s.jobs));
            cells.staged.set(n(s.staged));
            cells.queued.set(n(s.queued));
            cells.overdue.set(s.overdue.as_secs_f64());
            cells.held.set(n(s.held));
        }
    }
}
