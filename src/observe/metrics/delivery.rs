//! daprd's job metrics in the sidecar role (`dapr_component_job_*`) and jobsd's app calls in
//! flight: what [`DeliveryMetrics`] records for each call to the app.

use std::sync::Arc;
use std::time::Instant;

use prometheus_client::registry::Registry;

use super::{Buckets, Fixed, Level, Tally};
use super::{NS_PER_MS, app_labels};

/// daprd's latency buckets in milliseconds (`GetLatencyDistribution`'s default in
/// `pkg/config`), for `dapr_component_job_latencies`.
const DAPR_LATENCY_MS: [f64; 34] = [
    1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 13.0, 16.0, 20.0, 25.0, 30.0, 40.0, 50.0, 65.0, 80.0,
    100.0, 130.0, 160.0, 200.0, 250.0, 300.0, 400.0, 500.0, 650.0, 800.0, 1_000.0, 2_000.0,
    5_000.0, 10_000.0, 20_000.0, 50_000.0, 100_000.0,
];

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
    pub(super) fn register(registry: &mut Registry, app_id: &str, namespace: &str) -> Self {
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
