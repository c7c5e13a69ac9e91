//! Actors across several hosts: a sidecar given `--placement-host-address` reports its actor
//! types to Dapr's placement service (Dapr's own, or `jobsd scheduler --placement-enabled`),
//! places each actor with Dapr's hash ring, and calls actors hosted elsewhere on daprd's
//! internal gRPC API, so jobsd sidecars and daprd sidecars can host one actor type together.
//!
//! - [`ring`]: Dapr's ring, point for point (every sidecar must agree on an actor's host);
//! - [`client`]: the placement stream (report, lock, update, unlock) and lookups;
//! - [`remote`]: `CallActor` and `CallActorReminder` to other sidecars, and the conversions
//!   the receiving side (`api::internal`) uses.

pub mod client;
pub mod remote;
pub mod ring;

pub use client::{Drain, Identity, Lookup, Placement};
pub use remote::{Peers, RemoteError};
pub use ring::Tables;

/// Where a call to an actor goes.
pub enum Route {
    /// This host.
    Local,
    /// Another sidecar.
    Remote(ring::Host, Peers),
    /// No host has the type.
    Nowhere,
}
