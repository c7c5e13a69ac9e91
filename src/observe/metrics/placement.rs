//! Dapr 1.18 placement's metrics (`pkg/placement/monitoring`), recorded by a `jobsd scheduler`
//! replica serving placement (`--placement-enabled`): the sidecars connected and those with
//! actor types, by `host_namespace`, and whether this replica leads.

use std::sync::Arc;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The `host_namespace` label.
type NamespaceLabel = Vec<(&'static str, String)>;

/// `dapr_placement_runtimes_total`, `dapr_placement_actor_runtimes_total` (by
/// `host_namespace`), `dapr_placement_leader_status` and `dapr_placement_raft_leader_status`
/// (1 while this replica leads placement; jobsd has no raft, its leadership is the same).
#[derive(Clone, Default, Debug)]
pub struct PlacementMetrics(Option<Arc<PlacementCells>>);

#[derive(Debug, Default)]
struct PlacementCells {
    runtimes: Family<NamespaceLabel, Gauge>,
    actor_runtimes: Family<NamespaceLabel, Gauge>,
    leader: Gauge,
    raft_leader: Gauge,
}

impl PlacementMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let cells = PlacementCells::default();
        registry.register(
            "dapr_placement_runtimes_total",
            "The total number of runtimes reported to placement service",
            cells.runtimes.clone(),
        );
        registry.register(
            "dapr_placement_actor_runtimes_total",
            "The total number of actor runtimes reported to placement service",
            cells.actor_runtimes.clone(),
        );
        registry.register(
            "dapr_placement_leader_status",
            "Placement server leadership status (1 for leader, 0 for not leader)",
            cells.leader.clone(),
        );
        registry.register(
            "dapr_placement_raft_leader_status",
            "Raft server leadership status (1 for leader, 0 for not leader)",
            cells.raft_leader.clone(),
        );
        PlacementMetrics(Some(Arc::new(cells)))
    }

    /// The streams of `namespace`: all, and those whose sidecar hosts actor types.
    pub fn set_runtimes(&self, namespace: &str, all: usize, actors: usize) {
        if let Some(c) = &self.0 {
            let label = vec![("host_namespace", namespace.to_owned())];
            c.runtimes
                .get_or_create(&label)
                .set(i64::try_from(all).unwrap_or(i64::MAX));
            c.actor_runtimes
                .get_or_create(&label)
                .set(i64::try_from(actors).unwrap_or(i64::MAX));
        }
    }

    /// Whether this replica leads placement.
    pub fn set_leader(&self, leads: bool) {
        if let Some(c) = &self.0 {
            c.leader.set(i64::from(leads));
            c.raft_leader.set(i64::from(leads));
        }
    }
}
