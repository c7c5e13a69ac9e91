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
mod delivery;
mod engine;
mod placement;
mod scheduler;
pub mod server;
mod store;

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::registry::Registry;

pub use cells::{Buckets, Fixed, Level, Tally};
pub use delivery::{AppCall, DeliveryMetrics};
pub use engine::{EngineMetrics, Exhausted, Fired, LoopSample, Skip};
pub use placement::PlacementMetrics;
pub use scheduler::{JobType, SchedulerMetrics, Sent, SidecarError};
pub use store::StoreMetrics;

/// Nanoseconds per second and per millisecond: the integer unit durations are recorded in.
pub(super) const NS_PER_S: f64 = 1e9;
/// See [`NS_PER_S`].
pub(super) const NS_PER_MS: f64 = 1e6;

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
    /// Dapr placement's metrics (a replica serving placement).
    placement: PlacementMetrics,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("enabled", &self.is_enabled())
            .finish()
    }
}

/// Labels of every jobsd family in the sidecar role.
pub(super) fn app_labels(
    app_id: &str,
    namespace: &str,
) -> Vec<(Cow<'static, str>, Cow<'static, str>)> {
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
    /// labels (the Scheduler's carry `type`, as Dapr's). With `placement`, placement's too.
    pub fn replica(placement: bool) -> Self {
        let mut registry = Registry::default();
        let scheduler = SchedulerMetrics::register(&mut registry);
        let engine = EngineMetrics::register(&mut registry);
        let store = StoreMetrics::register(&mut registry);
        let mut metrics = Self::from_parts(
            registry,
            DeliveryMetrics::default(),
            engine,
            store,
            scheduler,
        );
        if placement && let Some(shared) = metrics.0.as_mut().and_then(Arc::get_mut) {
            shared.placement = PlacementMetrics::register(&mut shared.registry);
        }
        metrics
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
            placement: PlacementMetrics::default(),
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

    /// The placement service's handle (disabled unless a replica serves placement).
    pub fn placement(&self) -> PlacementMetrics {
        self.0
            .as_ref()
            .map(|s| s.placement.clone())
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
#[cfg(test)]
mod tests {
    use super::*;
    use crate::trigger::TriggerResult;

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
