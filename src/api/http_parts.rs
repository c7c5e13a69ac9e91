//! What every HTTP handler of the API uses: the shared state handle, the token header,
//! reading a body within the size limit, a JSON answer.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use http_body_util::{BodyExt, LengthLimitError, Limited};

use super::{ApiError, ApiState};

/// The header carrying the API token (daprd's `APITokenHeader`).
pub const API_TOKEN_HEADER: &str = "dapr-api-token";

/// What the handlers share: behind an `Arc`, so that handing it to a request (axum clones the
/// state for every one) copies no strings.
pub type Shared = Arc<ApiState>;

/// How long a request's body may take to arrive once its handler reads it: the header
/// deadline (`crate::serve`) does not cover the body, and a client trickling it a byte a
/// minute would hold its connection slot for ever. As long as the Scheduler call it leads to
/// may take (daprd's `rpcTimeout`).
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Reads the whole body, up to `limit` bytes, within [`BODY_READ_TIMEOUT`]; too slow a body
/// is a 400 `ERR_BODY_READ`, daprd's answer to a body that cannot be read.
pub async fn read_body(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    let read = tokio::time::timeout(BODY_READ_TIMEOUT, Limited::new(body, limit).collect());
    match read.await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {
            Err(ApiError::body_too_large(limit))
        }
        Ok(Err(e)) => Err(ApiError::body_read(e)),
        Err(_) => Err(ApiError::body_read(format_args!(
            "the body did not arrive within {}s",
            BODY_READ_TIMEOUT.as_secs()
        ))),
    }
}

/// Reads a body of one of Dapr's routes as daprd does behind `--max-body-size` (dapr/kit's
/// `LimitReadCloser`): `Ok(None)` for a body over `limit` bytes (its handler then answers with
/// `stream too large`), except that a body of exactly `limit + 1` bytes is cut to `limit` and
/// read as if whole (Go's body reader hands the end of the body with the read that crosses
/// the limit). Too slow a body is a 400 `ERR_BODY_READ`, as in [`read_body`].
pub async fn read_body_as_daprd(body: Body, limit: usize) -> Result<Option<Bytes>, ApiError> {
    let over = limit.saturating_add(1);
    let read = tokio::time::timeout(BODY_READ_TIMEOUT, Limited::new(body, over).collect());
    match read.await {
        Ok(Ok(collected)) => {
            let bytes = collected.to_bytes();
            Ok(Some(if bytes.len() > limit {
                bytes.slice(..limit)
            } else {
                bytes
            }))
        }
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => Ok(None),
        Ok(Err(e)) => Err(ApiError::body_read(e)),
        Err(_) => Err(ApiError::body_read(format_args!(
            "the body did not arrive within {}s",
            BODY_READ_TIMEOUT.as_secs()
        ))),
    }
}

/// What dapr/kit's `LimitReadCloser` says of a body over the limit.
pub const STREAM_TOO_LARGE: &str = "stream too large";

pub fn json_response(body: String) -> Response {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}
