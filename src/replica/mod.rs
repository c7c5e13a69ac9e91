//! The parts of the `jobsd scheduler` role (wired in `crate::app::replica`): one Dapr
//! Scheduler replica. The engine fires into the WatchJobs stream pool; the Scheduler service,
//! gRPC health and reflection share one port.
//!
//! Alone (no `--etcd-endpoints`) it runs over the embedded store and the host list is this
//! replica. In a cluster the store is etcd, the engine follows it and fires only the
//! partitions this member owns ([`cluster`]), and the host list is the live members.

pub mod cluster;
pub mod gates;
pub mod jobs;
pub mod placement;
pub mod pool;
pub mod server;
