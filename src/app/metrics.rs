//! The metrics server (and the engine's gauges sampled before each scrape), as both roles
//! serve them.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::engine::Engine;
use crate::observe::{self, LoopSample, Metrics};

use super::Error;

/// Binds the metrics server's address, if metrics are on.
pub(super) async fn bind_metrics(addr: Option<SocketAddr>) -> Result<Option<TcpListener>, Error> {
    match addr {
        Some(addr) => TcpListener::bind(addr)
            .await
            .map(Some)
            .map_err(|source| Error::MetricsBind { addr, source }),
        None => Ok(None),
    }
}

/// Serves `metrics` on `listener` (if bound) among `servers`, until `shutdown`; gives the
/// bound address.
pub(super) fn serve_metrics(
    listener: Option<TcpListener>,
    metrics: Metrics,
    token: Option<String>,
    shutdown: &CancellationToken,
    servers: &mut JoinSet<Result<(), Error>>,
) -> Option<SocketAddr> {
    let listener = listener?;
    let addr = listener.local_addr().ok();
    let stop = shutdown.clone();
    servers.spawn(async move {
        observe::metrics::server::serve(listener, metrics, token, stop)
            .await
            .map_err(|e| Error::Serve(format!("metrics: {e}")))
    });
    addr
}

/// Samples the trigger loop's state into `metrics` before every scrape.
pub(super) fn sample_engine(metrics: &Metrics, engine: &Engine, clock: Arc<dyn Clock>) {
    let gauges = metrics.engine();
    let engine = engine.clone();
    metrics.on_scrape(Arc::new(move || {
        let (engine, gauges, clock) = (engine.clone(), gauges.clone(), clock.clone());
        Box::pin(async move {
            let Some(s) = engine.sync().await else {
                return;
            };
            let overdue = s
                .next_due
                .and_then(|due| (clock.now() - due).to_std().ok())
                .unwrap_or_default();
            gauges.sample(LoopSample {
                jobs: s.jobs,
                staged: s.staged,
                queued: s.queued,
                overdue,
                held: s.held,
            });
        })
    }));
}
