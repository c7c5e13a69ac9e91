//! The metrics server (`--metrics-port`, `--metrics-listen-address`): `GET /metrics` in the
//! Prometheus text format, or OpenMetrics when the scraper asks for it. daprd serves its
//! exposition on every path (its handler sits at `/`), so any other GET path answers the same.

use std::net::SocketAddr;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::{Format, Metrics};

/// A bound metrics server, serving until its stop token is cancelled.
pub struct MetricsServer {
    /// Where it listens (the port resolved, so `:0` becomes the real port).
    pub addr: SocketAddr,
    /// The server task.
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl MetricsServer {
    /// Binds `addr` and serves `metrics` until `stop` is cancelled. Fails only if the address
    /// cannot be bound.
    pub async fn bind(
        addr: SocketAddr,
        metrics: Metrics,
        stop: CancellationToken,
    ) -> std::io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let router = Router::new().fallback(scrape).with_state(metrics);
        let task = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await
        });
        tracing::info!(%addr, "metrics server listening");
        Ok(MetricsServer { addr, task })
    }

    /// Waits for the server to stop (after its stop token is cancelled).
    pub async fn stopped(self) -> std::io::Result<()> {
        self.task
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }
}

/// Answers a scrape; only GET (and HEAD) are served.
async fn scrape(
    State(metrics): State<Metrics>,
    method: axum::http::Method,
    headers: HeaderMap,
) -> Response {
    if method != axum::http::Method::GET && method != axum::http::Method::HEAD {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = Format::for_accept(accept);
    match metrics.render(format).await {
        Some(body) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(format.content_type()),
            )],
            body,
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
