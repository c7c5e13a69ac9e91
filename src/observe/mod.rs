//! What jobsd shows of itself while it runs: Prometheus metrics with Dapr's names
//! ([`metrics`]). A leaf: it imports no other room but the trigger contract (the result kinds
//! it counts); the rooms that record hold its handles, and the roles' wiring serves it.

pub mod metrics;

pub use metrics::{
    AppCall, DeliveryMetrics, EngineMetrics, Fired, Format, JobType, LoopSample, Metrics,
    SchedulerMetrics, Sent, Skip, StoreMetrics,
};
