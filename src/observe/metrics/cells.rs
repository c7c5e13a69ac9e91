//! The metric types jobsd records into: plain atomics, never a lock, never an allocation per
//! observation, encoded by `prometheus-client` at scrape time.
//!
//! `prometheus-client`'s own `Histogram` takes a mutex on every `observe` and its `Family`
//! takes a lock and hashes the label set on every lookup; the hot paths here (one trigger,
//! one app call, one store commit) record into handles resolved once at start instead.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

/// A count that only goes up, exposed under its exact name as the `unknown` type.
///
/// For Dapr's counts whose series names do not end in `_total`
/// (`dapr_component_job_success_count`): an OpenMetrics counter must end in `_total`, and
/// prometheus-client appends it, which would rename the series daprd's dashboards query.
#[derive(Debug, Clone, Default)]
pub struct Tally(Arc<AtomicU64>);

impl Tally {
    /// Adds one.
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// The count so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl EncodeMetric for Tally {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&self.get())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Unknown
    }
}

/// A gauge read from an atomic that the code moves up and down or sets at scrape time.
#[derive(Debug, Clone, Default)]
pub struct Level(Arc<AtomicI64>);

impl Level {
    /// Adds `n` (negative to take away).
    pub fn add(&self, n: i64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// Sets the value.
    pub fn set(&self, v: i64) {
        self.0.store(v, Ordering::Relaxed);
    }

    /// The value now.
    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl EncodeMetric for Level {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&self.get())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }
}

/// A histogram over fixed buckets of integer observations (nanoseconds, or a plain count),
/// each bucket one atomic, the sum another. Exposed in its own unit: `scale` integer units
/// make one exposed unit (1e9 for seconds from nanoseconds, 1e6 for Dapr's milliseconds).
#[derive(Debug, Clone)]
pub struct Buckets(Arc<BucketCells>);

/// The cells of one [`Buckets`].
#[derive(Debug)]
pub struct BucketCells {
    /// Upper bounds (inclusive), ascending, in integer units.
    bounds: Box<[u64]>,
    /// Observations per bucket; one more than `bounds` for `+Inf`.
    counts: Box<[AtomicU64]>,
    /// Sum of the observations, in integer units.
    sum: AtomicU64,
    /// Integer units per exposed unit.
    scale: f64,
}

impl Buckets {
    /// Buckets with these upper bounds, given in the exposed unit (`[0.005, 0.01, …]`
    /// seconds), over observations in integer units `scale` to one exposed unit.
    pub fn new(bounds: &[f64], scale: f64) -> Self {
        // Rounded, not truncated: 0.005 s × 1e9 is 4999999.999… in floating point.
        let bounds: Box<[u64]> = bounds.iter().map(|b| (b * scale).round() as u64).collect();
        let counts = (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect();
        Buckets(Arc::new(BucketCells {
            bounds,
            counts,
            sum: AtomicU64::new(0),
            scale,
        }))
    }

    /// Records one observation of `v` integer units: two relaxed atomic adds.
    pub fn observe(&self, v: u64) {
        let cells = &*self.0;
        let at = cells.bounds.partition_point(|&b| b < v);
        cells.counts[at].fetch_add(1, Ordering::Relaxed);
        cells.sum.fetch_add(v, Ordering::Relaxed);
    }

    /// Records a duration, for buckets over nanoseconds.
    pub fn observe_duration(&self, d: Duration) {
        self.observe(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.0
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }
}

impl EncodeMetric for Buckets {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let cells = &*self.0;
        let buckets: Vec<(f64, u64)> = cells
            .bounds
            .iter()
            .map(|&b| b as f64 / cells.scale)
            .chain(std::iter::once(f64::INFINITY))
            .zip(cells.counts.iter().map(|c| c.load(Ordering::Relaxed)))
            .collect();
        let count = buckets.iter().map(|(_, n)| n).sum();
        let sum = cells.sum.load(Ordering::Relaxed) as f64 / cells.scale;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// One metric family whose label sets are all known at start: each member is a handle
/// resolved once, so recording never looks a label set up (no lock, no hash), and the family
/// is encoded as one (one `# TYPE` line, a sample per label set).
#[derive(Debug)]
pub struct Fixed<M> {
    /// Label set and metric, in the order they are exposed.
    members: Vec<(Vec<(&'static str, String)>, M)>,
}

impl<M: Clone> Fixed<M> {
    /// A family of these members.
    pub fn new(members: Vec<(Vec<(&'static str, String)>, M)>) -> Self {
        Fixed { members }
    }
}

impl<M: EncodeMetric> EncodeMetric for Fixed<M> {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, metric) in &self.members {
            metric.encode(encoder.encode_family(labels)?)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        self.members
            .first()
            .map_or(MetricType::Unknown, |(_, m)| m.metric_type())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_count_each_observation_once_at_its_upper_bound() {
        let h = Buckets::new(&[0.005, 0.01, 1.0], 1e9);
        h.observe(0);
        h.observe(5_000_000); // exactly 5 ms: in `le=0.005`
        h.observe(5_000_001);
        h.observe(2_000_000_000); // beyond every bound: `+Inf`
        let counts: Vec<u64> =
            h.0.counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect();
        assert_eq!(counts, [2, 1, 0, 1]);
        assert_eq!(h.count(), 4);
        assert_eq!(h.0.sum.load(Ordering::Relaxed), 2_010_000_001);
    }
}
