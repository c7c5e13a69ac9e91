//! The metrics server (`--metrics-port`, `--metrics-listen-address`): `GET /metrics` in the
//! Prometheus text format, or OpenMetrics when the scraper asks for it. daprd serves its
//! exposition on every path (its handler sits at `/`), so any other GET path answers the same.
//!
//! Unlike daprd's, the server can ask for the API token (the sidecar passes `DAPR_API_TOKEN`
//! unless `--metrics-require-token=false`): job names and app ids are in the labels. A scrape
//! sends it as `dapr-api-token` or as `Authorization: Bearer <token>` (what Prometheus'
//! `authorization` scrape setting sends); without it the answer is daprd's 401
//! `invalid api token`.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::{Format, Metrics};

/// Serves `metrics` on `listener` until `stop` is cancelled (requests in progress finish);
/// with `token`, only to scrapes that send it.
pub async fn serve(
    listener: TcpListener,
    metrics: Metrics,
    token: Option<String>,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let token = token.filter(|t| !t.is_empty()).map(Arc::<str>::from);
    let router = Router::new()
        .fallback(scrape)
        .with_state(Scrape { metrics, token });
    crate::serve::http(listener, router, stop).await
}

/// What a scrape needs: the metrics, and the token it must send (if any).
#[derive(Clone)]
struct Scrape {
    metrics: Metrics,
    token: Option<Arc<str>>,
}

/// Whether `headers` carry `token`, as `dapr-api-token` or `Authorization: Bearer`.
fn carries_token(headers: &HeaderMap, token: &str) -> bool {
    let matches = |given: &[u8]| crate::serve::token_matches(given, token.as_bytes());
    let api_token = headers
        .get("dapr-api-token")
        .is_some_and(|v| matches(v.as_bytes()));
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
        .is_some_and(matches);
    api_token | bearer
}

/// Answers a scrape; only GET (and HEAD) are served.
async fn scrape(
    State(Scrape { metrics, token }): State<Scrape>,
    method: axum::http::Method,
    headers: HeaderMap,
) -> Response {
    if let Some(token) = token.as_deref()
        && !carries_token(&headers, token)
    {
        return (StatusCode::UNAUTHORIZED, "invalid api token\n").into_response();
    }
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
