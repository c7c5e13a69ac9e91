//! What every HTTP handler of the API uses: the shared state handle, the token header,
//! reading a body within the size limit, a JSON answer.

use std::sync::Arc;

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

/// Reads the whole body, up to `limit` bytes.
pub async fn read_body(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            Err(ApiError::body_too_large(limit))
        }
        Err(e) => Err(ApiError::body_read(e)),
    }
}

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
