//! daprd's app health checks (`--enable-app-health-check`): a probe loop that publishes
//! whether the app is healthy, so triggers are held back while it is not.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::Error;
use super::grpc::Grpc;
use super::http::Http;

/// How the app's health is probed (daprd's `--app-health-*` flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheckConfig {
    /// Path an HTTP app is probed on with `GET` (`--app-health-check-path`). gRPC apps are
    /// probed with `AppCallbackHealthCheck.HealthCheck` instead.
    pub path: String,
    /// Time between probes (`--app-health-probe-interval`, given in seconds).
    pub interval: Duration,
    /// Time one probe may take before it counts as failed (`--app-health-probe-timeout`,
    /// given in milliseconds).
    pub timeout: Duration,
    /// Consecutive failed probes that make the app unhealthy (`--app-health-threshold`); one
    /// successful probe makes it healthy again. 0 counts as 1.
    pub threshold: u32,
}

impl Default for HealthCheckConfig {
    /// daprd's defaults: `/healthz`, every 5 s, 500 ms timeout, 3 failures.
    fn default() -> Self {
        Self {
            path: "/healthz".into(),
            interval: Duration::from_secs(5),
            timeout: Duration::from_millis(500),
            threshold: 3,
        }
    }
}

/// What one probe calls.
#[derive(Debug, Clone)]
pub(crate) enum Prober {
    /// `GET <path>` on an HTTP app.
    Http(Http, String),
    /// `HealthCheck` on a gRPC app.
    Grpc(Grpc),
}

impl Prober {
    async fn probe(&self) -> Result<(), Error> {
        match self {
            Prober::Http(http, path) => http.probe(path).await,
            Prober::Grpc(grpc) => grpc.probe().await,
        }
    }
}

/// Starts the probe loop and returns the health it publishes. Like daprd the app starts out
/// unhealthy; unlike daprd (which waits one interval) the first probe runs at once, so a
/// healthy app is served without delay. The loop ends when `stop` is cancelled or every
/// receiver is gone.
pub(crate) fn spawn(
    prober: Prober,
    config: &HealthCheckConfig,
    stop: CancellationToken,
) -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    let interval = config.interval.max(Duration::from_millis(1));
    let timeout = config.timeout;
    let threshold = config.threshold.max(1);
    tokio::spawn(async move {
        // Start at the threshold: unhealthy until a probe succeeds.
        let mut failures = threshold;
        let mut first = true;
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tx.closed() => break,
                _ = ticker.tick() => {}
            }
            let outcome = tokio::select! {
                _ = stop.cancelled() => break,
                r = tokio::time::timeout(timeout, prober.probe()) => r,
            };
            match outcome {
                Ok(Ok(())) => failures = 0,
                Ok(Err(e)) => {
                    failures = failures.saturating_add(1);
                    tracing::debug!(error = %e, failures, "app health probe failed");
                }
                Err(_) => {
                    failures = failures.saturating_add(1);
                    tracing::debug!(?timeout, failures, "app health probe timed out");
                }
            }
            let healthy = failures < threshold;
            if first {
                // Published even when unchanged: receivers learn that the app's health is now
                // known (see `Delivery::await_first_probe`).
                first = false;
                tx.send_replace(healthy);
                if healthy {
                    tracing::info!("App entered healthy status");
                }
                continue;
            }
            tx.send_if_modified(|current| {
                if *current == healthy {
                    return false;
                }
                *current = healthy;
                if healthy {
                    tracing::info!("App entered healthy status");
                } else {
                    tracing::warn!(failures, "App entered un-healthy status");
                }
                true
            });
        }
        tracing::debug!("app health probes stopped");
    });
    rx
}
