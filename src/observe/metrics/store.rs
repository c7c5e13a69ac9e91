//! The store's commits (`jobsd_store_*`): how long each took, how many ops it carried, and
//! how many failed.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

use super::Buckets;
use super::NS_PER_S;

/// Buckets of a store commit's duration in seconds (one `fdatasync` for many writes).
const COMMIT_SECONDS: [f64; 13] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];

/// Buckets of the ops one store commit carries.
const BATCH_OPS: [f64; 14] = [
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0,
];

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
    pub(super) fn register(registry: &mut Registry) -> Self {
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
