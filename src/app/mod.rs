//! Wiring of one role: open the store, build the engine (or, in remote mode, the Scheduler
//! client) and the API servers, serve until told to stop, then shut down in order (stop
//! accepting, finish requests, close the store or the job streams).
//!
//! - `sidecar`: the sidecar ([`Sidecar`]), embedded or in front of Scheduler replicas;
//! - `replica`: the `jobsd scheduler` role ([`Replica`]) over the rooms of `crate::replica`;
//! - `metrics`: the metrics server and the engine's gauges, which both roles serve.
//!
//! The `jobsd jobs` command line needs no wiring: `main` hands it to `crate::cli::run`.

mod metrics;
#[cfg(test)]
mod placement_tests;
pub mod reference;
mod replica;
mod sidecar;

use std::net::SocketAddr;

use tokio::net::TcpListener;

use crate::observe::otlp;
use crate::{delivery, resiliency, store};

pub use replica::Replica;
pub use sidecar::Sidecar;

/// Why a role could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The metrics server's address could not be bound.
    #[error(
        "cannot serve metrics on {addr} (--metrics-listen-address, --metrics-port; \
         --enable-metrics=false turns them off): {source}"
    )]
    MetricsBind {
        /// The address.
        addr: SocketAddr,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The store could not be opened or closed.
    #[error("store: {0}")]
    Store(#[from] store::Error),
    /// gRPC reflection could not be built from the descriptors.
    #[error("grpc reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// A server failed while serving.
    #[error("server: {0}")]
    Serve(String),
    /// The app channel could not be set up.
    #[error("app channel: {0}")]
    Delivery(#[from] delivery::Error),
    /// A resource file could not be loaded.
    #[error("resources: {0}")]
    Resources(#[from] resiliency::Error),
    /// The OTLP span exporter could not be set up.
    #[error("{0}")]
    Otlp(#[from] otlp::Error),
}

/// Binds a role's listener on `addr`.
async fn bind(addr: SocketAddr) -> Result<TcpListener, Error> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind { addr, source })
}

/// Resolves on SIGINT or SIGTERM. On Unix the handlers are installed when this is called,
/// not when the future is first polled: called before a role starts, a signal that arrives
/// while it is still starting (or the moment it answers) stops it once started instead of
/// killing the process with the default action. Must be called within a Tokio runtime.
#[cfg(unix)]
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{Signal, SignalKind, signal};
    let term = signal(SignalKind::terminate()).ok();
    let int = signal(SignalKind::interrupt()).ok();
    async fn wait(s: Option<Signal>) {
        match s {
            Some(mut s) => {
                s.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    }
    async move {
        tokio::select! {
            () = wait(term) => {},
            () = wait(int) => {},
        }
    }
}

/// Resolves on Ctrl-C.
#[cfg(not(unix))]
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
