//! Prometheus metrics: daprd's job metrics (`dapr_component_job_*`) in the sidecar role, the
//! Dapr Scheduler's (`dapr_scheduler_*`) in the replica role, and jobsd's own (`jobsd_*`):
//! trigger lateness, delivery time by outcome, triggers in flight, skipped ticks, the trigger
//! loop's jobs, and store commits.
//!
//! One [`Metrics`] per process role, passed explicitly (no global registry: tests in one
//! process must not see each other's counts). Each room records through a typed handle
//! ([`DeliveryMetrics`], [`EngineMetrics`], [`StoreMetrics`], [`SchedulerMetrics`]) whose
//! label sets were resolved when the role started: a trigger costs a few relaxed atomic adds,
//! no lock and no allocation. A disabled handle (`Default`, or any handle of
//! [`Metrics::disabled`]) records nothing and does not read the clock. Values that are state
//! rather than events (jobs tracked, staged, streams connected) are sampled at scrape time by
//! hooks ([`Metrics::on_scrape`]), so the hot paths never touch them.
//!
//! Labels are `app_id` and `namespace` (daprd's), Dapr's own (`operation`, `success`,
//! `type`), and bounded sets of jobsd's (`outcome`, `reason`); never a job name.

mod cells;
mod scheduler;
pub mod server;

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

pub use cells::{Buckets, Fixed, Level, Tally};
pub use scheduler::{JobType, SchedulerMetrics, Sent, SidecarError};

use crate::trigger::TriggerResult;

/// daprd's latency buckets in milliseconds (`GetLatencyDistribution`'s default in
/// `pkg/config`), for `dapr_component_job_latencies`.
const DAPR_LATENCY_MS: [f64; 34] = [
    1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 13.0, 16.0, 20.0, 25.0, 30.0, 40.0, 50.0, 65.0, 80.0,
    100.0, 130.0, 160.0, 200.0, 250.0, 300.0, 400.0, 500.0, 650.0, 800.0, 1_000.0, 2_000.0,
    5_000.0, 10_000.0, 20_000.0, 50_000.0, 100_000.0,
];

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

/// Buckets of a store commit's duration in seconds (one `fdatasync` for many writes).
const COMMIT_SECONDS: [f64; 13] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];

/// Buckets of the ops one store commit carries.
const BATCH_OPS: [f64; 14] = [
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0,
];

/// Nanoseconds per second and per millisecond: the integer unit durations are recorded in.
const NS_PER_S: f64 = 1e9;
/// See [`NS_PER_S`].
const NS_PER_MS: f64 = 1e6;

/// Which exposition a scrape gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The Prometheus text format 0.0.4, as daprd serves it: the default.
    Prometheus,
    /// OpenMetrics 1.0 text, for scrapers that ask for it (Prometheus does).
    OpenMetrics,
}

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics when it names it, else the
    /// Prometheus text format (a plain `curl`, or an older scraper).
    pub fn for_accept(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    /// The `Content-Type` of this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => prometheus_text::CONTENT_TYPE,
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// A scrape-time hook: samples some state into gauges before the registry is encoded.
pub type ScrapeHook = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// Longest a scrape waits for one hook (a trigger loop busy with a huge batch): the gauges
/// keep their last sample rather than hold the scrape.
const HOOK_PATIENCE: Duration = Duration::from_secs(2);

/// The metrics of one process role. Cheap to clone; [`Metrics::disabled`] (the default)
/// records nothing.
#[derive(Clone, Default)]
pub struct Metrics(Option<Arc<Shared>>);

/// What every clone of one [`Metrics`] shares.
struct Shared {
    /// Every family, registered once at start; encoded on each scrape.
    registry: Registry,
    /// Samplers run before each encode.
    hooks: Mutex<Vec<ScrapeHook>>,
    /// daprd's job metrics and jobsd's app-call gauge.
    delivery: DeliveryMetrics,
    /// The trigger loop's metrics.
    engine: EngineMetrics,
    /// The store's commits.
    store: StoreMetrics,
    /// The Dapr Scheduler's metrics (replica role).
    scheduler: SchedulerMetrics,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("enabled", &self.is_enabled())
            .finish()
    }
}

/// Labels of every jobsd family in the sidecar role.
fn app_labels(app_id: &str, namespace: &str) -> Vec<(Cow<'static, str>, Cow<'static, str>)> {
    vec![
        ("app_id".into(), app_id.to_owned().into()),
        ("namespace".into(), namespace.to_owned().into()),
    ]
}

impl Metrics {
    /// Records nothing; every handle it gives is disabled.
    pub fn disabled() -> Self {
        Metrics(None)
    }

    /// The sidecar of `app_id` in `namespace`: daprd's job metrics, the app calls in flight,
    /// and, with the embedded scheduler (`embedded`), the trigger loop's and the store's.
    pub fn sidecar(app_id: &str, namespace: &str, embedded: bool) -> Self {
        let mut registry = Registry::default();
        let delivery = DeliveryMetrics::register(&mut registry, app_id, namespace);
        let own = registry.sub_registry_with_labels(app_labels(app_id, namespace).into_iter());
        let (engine, store) = if embedded {
            (EngineMetrics::register(own), StoreMetrics::register(own))
        } else {
            (EngineMetrics::default(), StoreMetrics::default())
        };
        Self::from_parts(
            registry,
            delivery,
            engine,
            store,
            SchedulerMetrics::default(),
        )
    }

    /// A scheduler replica (`jobsd scheduler`): the Dapr Scheduler's metrics, the trigger
    /// loop's and the store's. A replica serves many apps, so jobsd's families carry no app
    /// labels (the Scheduler's carry `type`, as Dapr's).
    pub fn replica() -> Self {
        let mut registry = Registry::default();
        let scheduler = SchedulerMetrics::register(&mut registry);
        let engine = EngineMetrics::register(&mut registry);
        let store = StoreMetrics::register(&mut registry);
        Self::from_parts(
            registry,
            DeliveryMetrics::default(),
            engine,
            store,
            scheduler,
        )
    }

    fn from_parts(
        registry: Registry,
        delivery: DeliveryMetrics,
        engine: EngineMetrics,
        store: StoreMetrics,
        scheduler: SchedulerMetrics,
    ) -> Self {
        Metrics(Some(Arc::new(Shared {
            registry,
            hooks: Mutex::default(),
            delivery,
            engine,
            store,
            scheduler,
        })))
    }

    /// Whether anything is recorded (`--enable-metrics`).
    pub fn is_enabled(&self) -> bool {
        self.0.is_some()
    }

    /// The delivery's handle (disabled outside the sidecar role).
    pub fn delivery(&self) -> DeliveryMetrics {
        self.0
            .as_ref()
            .map(|s| s.delivery.clone())
            .unwrap_or_default()
    }

    /// The trigger loop's handle.
    pub fn engine(&self) -> EngineMetrics {
        self.0
            .as_ref()
            .map(|s| s.engine.clone())
            .unwrap_or_default()
    }

    /// The store's handle.
    pub fn store(&self) -> StoreMetrics {
        self.0.as_ref().map(|s| s.store.clone()).unwrap_or_default()
    }

    /// The Scheduler service's handle (disabled outside the replica role).
    pub fn scheduler(&self) -> SchedulerMetrics {
        self.0
            .as_ref()
            .map(|s| s.scheduler.clone())
            .unwrap_or_default()
    }

    /// Runs `hook` before every scrape (to sample state into gauges). A no-op when disabled.
    pub fn on_scrape(&self, hook: ScrapeHook) {
        if let Some(shared) = &self.0 {
            shared
                .hooks
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(hook);
        }
    }

    /// The exposition in `format`, after running the scrape hooks; `None` when disabled.
    pub async fn render(&self, format: Format) -> Option<String> {
        let shared = self.0.as_ref()?;
        let hooks = shared
            .hooks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for hook in hooks {
            if tokio::time::timeout(HOOK_PATIENCE, hook()).await.is_err() {
                tracing::debug!(
                    "a metrics sampler took too long; its gauges keep their last value"
                );
            }
        }
        let mut out = String::new();
        let encoded = match format {
            Format::Prometheus => prometheus_text::encode(&mut out, &shared.registry),
            Format::OpenMetrics => text::encode(&mut out, &shared.registry),
        };
        // Writing to a String cannot fail, and our metrics encode without error.
        encoded.ok()?;
        if format == Format::Prometheus {
            // The only `unknown` families are [`Tally`] counts (Dapr's counters whose names do
            // not end in `_total`). The Prometheus text format allows such a counter, and daprd
            // types them `counter`: clients that read only typed samples (Go's expfmt users,
            // Dapr's own tests among them) find them only so.
            out = out
                .split_inclusive('\n')
                .map(|line| match line.strip_prefix("# TYPE ") {
                    Some(rest) if rest.ends_with(" untyped\n") => {
                        format!(
                            "# TYPE {} counter\n",
                            &rest[..rest.len() - " untyped\n".len()]
                        )
                    }
                    _ => line.to_owned(),
                })
                .collect();
        }
        Some(out)
    }
}

/// daprd's job metrics (`pkg/diagnostics/component_monitoring.go`), recorded per call to the
/// app that the app answered: `dapr_component_job_success_count` for 2xx / `OK`,
/// `dapr_component_job_failure_count` for any other answer (a 404 / `NotFound` included,
/// though the trigger counts as SUCCESS and is not retried), both labelled `app_id`,
/// `namespace`, `operation="job_trigger_op"`, and the call's time in
/// `dapr_component_job_latencies` (milliseconds, daprd's buckets, plus `success`). A call
/// the app never answered (refused, reset, timed out) is counted in none of them, as in
/// daprd; jobsd's `jobsd_trigger_duration_seconds{outcome="failed"}` has it.
#[derive(Clone, Default, Debug)]
pub struct DeliveryMetrics(Option<Arc<DeliveryCells>>);

/// The cells of [`DeliveryMetrics`].
#[derive(Debug)]
struct DeliveryCells {
    /// `dapr_component_job_success_count`.
    success: Tally,
    /// `dapr_component_job_failure_count`.
    failure: Tally,
    /// `dapr_component_job_latencies{success="true"}`.
    latency_ok: Buckets,
    /// `dapr_component_job_latencies{success="false"}`.
    latency_failed: Buckets,
    /// `jobsd_app_calls_in_flight`.
    in_flight: Level,
}

impl DeliveryMetrics {
    fn register(registry: &mut Registry, app_id: &str, namespace: &str) -> Self {
        let cells = DeliveryCells {
            success: Tally::default(),
            failure: Tally::default(),
            latency_ok: Buckets::new(&DAPR_LATENCY_MS, NS_PER_MS),
            latency_failed: Buckets::new(&DAPR_LATENCY_MS, NS_PER_MS),
            in_flight: Level::default(),
        };
        let mut dapr_labels = app_labels(app_id, namespace);
        dapr_labels.push(("operation".into(), "job_trigger_op".into()));
        let dapr = registry.sub_registry_with_labels(dapr_labels.into_iter());
        dapr.register(
            "dapr_component_job_success_count",
            "The number of successful job triggers",
            cells.success.clone(),
        );
        dapr.register(
            "dapr_component_job_failure_count",
            "The number of failed job triggers",
            cells.failure.clone(),
        );
        dapr.register(
            "dapr_component_job_latencies",
            "The latency of the response from the app that processed the triggered job",
            Fixed::new(vec![
                (vec![("success", "true".into())], cells.latency_ok.clone()),
                (
                    vec![("success", "false".into())],
                    cells.latency_failed.clone(),
                ),
            ]),
        );
        let own = registry.sub_registry_with_labels(app_labels(app_id, namespace).into_iter());
        own.register(
            "jobsd_app_calls_in_flight",
            "Calls to the app for job triggers that have not been answered yet",
            cells.in_flight.clone(),
        );
        DeliveryMetrics(Some(Arc::new(cells)))
    }

    /// A call to the app starts: counted in flight until the returned guard is dropped.
    pub fn call(&self) -> AppCall<'_> {
        AppCall(self.0.as_deref().map(|cells| {
            cells.in_flight.add(1);
            (cells, Instant::now())
        }))
    }
}

/// One call to the app in flight ([`DeliveryMetrics::call`]).
#[derive(Debug)]
pub struct AppCall<'a>(Option<(&'a DeliveryCells, Instant)>);

impl AppCall<'_> {
    /// The app answered: 2xx / `OK` (`accepted`), or anything else.
    pub fn answered(&self, accepted: bool) {
        let Some((cells, started)) = self.0 else {
            return;
        };
        let took = started.elapsed();
        if accepted {
            cells.success.inc();
            cells.latency_ok.observe_duration(took);
        } else {
            cells.failure.inc();
            cells.latency_failed.observe_duration(took);
        }
    }
}

impl Drop for AppCall<'_> {
    fn drop(&mut self) {
        if let Some((cells, _)) = self.0 {
            cells.in_flight.add(-1);
        }
    }
}

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

/// The `outcome` label of a result.
fn outcome_label(result: TriggerResult) -> &'static str {
    match result {
        TriggerResult::Success | TriggerResult::Accepted => "success",
        TriggerResult::Held => "held",
        TriggerResult::Failed => "failed",
        TriggerResult::Undeliverable => "undeliverable",
        TriggerResult::Cancel => "cancelled",
    }
}

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
    fn register(registry: &mut Registry) -> Self {
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
                            vec![("outcome", outcome_label(r).to_owned())],
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

/// The store's commits (the redb writer thread): how long each took and how many ops it
/// carried, and how many failed.
#[derive(Clone, Default, Debug)]
pub struct StoreMetrics(Option<Arc<StoreCells>>);

/// The cells of [`StoreMetrics`].
#[derive(Debug)]
struct StoreCells {
    /// `jobsd_store_commit_duration_seconds`.
    duration: Buckets,
    /// `jobsd_store_commit_ops`.
    ops: Buckets,
    /// `jobsd_store_commit_failures_total`.
    failed: Counter,
    /// `jobsd_store_reads_before_commit_total`.
    reads: Counter,
}

impl StoreMetrics {
    fn register(registry: &mut Registry) -> Self {
        let cells = StoreCells {
            duration: Buckets::new(&COMMIT_SECONDS, NS_PER_S),
            ops: Buckets::new(&BATCH_OPS, 1.0),
            failed: Counter::default(),
            reads: Counter::default(),
        };
        registry.register(
            "jobsd_store_commit_duration_seconds",
            "Time one store commit took (apply and fsync, for every write it carries)",
            cells.duration.clone(),
        );
        registry.register(
            "jobsd_store_commit_ops",
            "Ops one store commit carried (group commit: many writes, one fsync)",
            cells.ops.clone(),
        );
        registry.register(
            "jobsd_store_commit_failures",
            "Store commits that failed (every write in them got the error)",
            cells.failed.clone(),
        );
        registry.register(
            "jobsd_store_reads_before_commit",
            "Reads of the keys a compare-and-swap commit compares (etcd store; none when the \
             writer knows every key's version)",
            cells.reads.clone(),
        );
        StoreMetrics(Some(Arc::new(cells)))
    }

    /// Whether commits are recorded (a disabled handle lets the writer skip its clock reads).
    pub fn is_enabled(&self) -> bool {
        self.0.is_some()
    }

    /// A commit of `ops` ops took `took` and succeeded (`ok`) or failed.
    pub fn committed(&self, ops: usize, took: Duration, ok: bool) {
        if let Some(cells) = &self.0 {
            cells.duration.observe_duration(took);
            cells.ops.observe(u64::try_from(ops).unwrap_or(u64::MAX));
            if !ok {
                cells.failed.inc();
            }
        }
    }

    /// The writer read the keys of a commit before comparing them.
    pub fn read_before_commit(&self) {
        if let Some(cells) = &self.0 {
            cells.reads.inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn disabled_metrics_render_nothing_and_record_nothing() {
        let m = Metrics::disabled();
        assert!(!m.is_enabled());
        assert_eq!(m.render(Format::Prometheus).await, None);
        let fired = m.engine().fired(chrono::TimeDelta::seconds(1));
        m.engine().answered(fired, TriggerResult::Success);
        m.delivery().call().answered(true);
    }

    /// A fourth reason once overflowed a three-cell array and killed the trigger loop.
    #[tokio::test]
    async fn every_skip_reason_is_counted_and_exposed() {
        let m = Metrics::sidecar("myapp", "prod", true);
        for (n, reason) in Skip::ALL.into_iter().enumerate() {
            for _ in 0..=n {
                m.engine().skipped(reason);
            }
        }
        let text = m.render(Format::Prometheus).await.unwrap();
        for (n, reason) in Skip::ALL.into_iter().enumerate() {
            let series = format!("reason=\"{}\"}} {}\n", reason.as_str(), n + 1);
            assert!(
                text.lines()
                    .any(|l| l.starts_with("jobsd_ticks_skipped_total{")
                        && format!("{l}\n").ends_with(&series)),
                "{reason:?}: {text}"
            );
        }
    }

    #[tokio::test]
    async fn sidecar_families_carry_app_labels_and_dapr_names() {
        let m = Metrics::sidecar("myapp", "prod", true);
        m.delivery().call().answered(true);
        m.delivery().call().answered(false);
        let text = m.render(Format::Prometheus).await.unwrap();
        assert!(
            text.contains(
                "dapr_component_job_success_count{app_id=\"myapp\",namespace=\"prod\",\
                 operation=\"job_trigger_op\"} 1\n"
            ),
            "{text}"
        );
        assert!(text.contains(
            "dapr_component_job_latencies_count{app_id=\"myapp\",namespace=\"prod\",\
             operation=\"job_trigger_op\",success=\"false\"} 1\n"
        ));
        assert!(text.contains("jobsd_jobs{app_id=\"myapp\",namespace=\"prod\"} 0\n"));
        assert!(!text.contains("dapr_scheduler"));
        // Typed as daprd types them: Go's expfmt readers skip untyped samples.
        assert!(
            text.contains("# TYPE dapr_component_job_success_count counter\n"),
            "{text}"
        );
        assert!(!text.contains(" untyped\n"), "{text}");

        let open = m.render(Format::OpenMetrics).await.unwrap();
        assert!(open.ends_with("# EOF\n"));
        assert!(open.contains("# TYPE dapr_component_job_success_count unknown\n"));
    }

    #[tokio::test]
    async fn every_skip_and_exhausted_reason_is_counted_under_its_label() {
        let m = Metrics::sidecar("myapp", "prod", true);
        for reason in Skip::ALL {
            m.engine().skipped(reason);
        }
        for then in Exhausted::ALL {
            m.engine().exhausted(then);
        }
        let text = m.render(Format::Prometheus).await.unwrap();
        let labels = "app_id=\"myapp\",namespace=\"prod\"";
        for reason in Skip::ALL {
            let line = format!(
                "jobsd_ticks_skipped_total{{{labels},reason=\"{}\"}} 1\n",
                reason.as_str()
            );
            assert!(text.contains(&line), "{line} in {text}");
        }
        for then in Exhausted::ALL {
            let line = format!(
                "jobsd_ticks_exhausted_total{{{labels},reason=\"{}\"}} 1\n",
                then.as_str()
            );
            assert!(text.contains(&line), "{line} in {text}");
        }
    }
}
