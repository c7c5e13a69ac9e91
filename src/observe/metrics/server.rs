//! The metrics server (`--metrics-port`, `--metrics-listen-address`): `GET /metrics` in the
//! Prometheus text format, or OpenMetrics when the scraper asks for it. daprd serves its
//! exposition on every path (its handler sits at `/`), so any other GET path answers the same.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::{Format, Metrics};

/// Serves `metrics` on `listener` until `stop` is cancelled (requests in progress finish).
pub async fn serve(
    listener: TcpListener,
    metrics: Metrics,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let router = Router::new().fallback(scrape).with_state(metrics);
    axum::serve(listener, router)
        .with_graceful_shutdown(stop.cancelled_owned())
        .await
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
