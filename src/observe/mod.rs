//! What an operator sees of jobsd's work: Prometheus metrics with Dapr's names
//! ([`metrics`]); tracing ([`trace`]: the W3C `traceparent` sent with every delivery and read
//! from creates; [`otlp`]: one span per delivery attempt, exported over OTLP when
//! `--otlp-endpoint` is set). A leaf: it imports no other room but the trigger contract; the
//! rooms that record hold its handles, and the roles' wiring serves it.

pub mod metrics;
pub mod otlp;
pub mod trace;

pub use metrics::{
    AppCall, DeliveryMetrics, EngineMetrics, Exhausted, Fired, Format, JobType, LoopSample,
    Metrics, PlacementMetrics, SchedulerMetrics, Sent, SidecarError, Skip, StoreMetrics,
};
