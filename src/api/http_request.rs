//! Reading daprd's job requests: the `{name}` of a route as Go unescapes it, a create body
//! as daprd parses it, query parameters. Shared by Dapr's routes (`api::http`) and jobsd's
//! (`api::jobsd::http`).

use http::Uri;

use super::error::ApiError;
use super::{ApiState, json};
use crate::go;
use crate::proto::{internals::JobHttpRequest, runtime as rv1};
use crate::seam;

/// The `{name}` route parameter after `url.QueryUnescape`. Go keeps the raw bytes, which may
/// not be UTF-8; such a name can only fail later, when it is marshalled for the Scheduler.
pub(crate) struct RouteName {
    /// The name (invalid UTF-8 replaced, only for the emptiness checks).
    pub(crate) text: String,
    /// Whether the unescaped bytes were UTF-8.
    pub(crate) utf8: bool,
}

impl RouteName {
    /// A name given as text (a query parameter).
    pub(crate) fn new(text: String) -> Self {
        RouteName { text, utf8: true }
    }

    /// The last segment of the (cleaned) path: every job route ends in `/{name}`. Taken from
    /// the URI rather than axum's path extractors, which refuse names that are not UTF-8.
    pub(crate) fn from_uri(uri: &Uri) -> Result<Self, ApiError> {
        let raw = uri.path().rsplit('/').next().unwrap_or_default();
        let bytes =
            go::url::query_unescape(raw).map_err(|e| ApiError::unescape_param("name", e))?;
        Ok(match String::from_utf8(bytes) {
            Ok(text) => RouteName { text, utf8: true },
            Err(e) => RouteName {
                text: String::from_utf8_lossy(e.as_bytes()).into_owned(),
                utf8: false,
            },
        })
    }
}

/// What grpc-go answers when asked to send a string field that is not UTF-8.
pub(crate) fn invalid_utf8_marshal_error() -> seam::Error {
    seam::Error::new(
        tonic::Code::Internal,
        "grpc: error while marshaling: string field contains invalid UTF-8",
    )
}

/// A create request as daprd reads `POST …/jobs/{name}`: the name from the URL, the body's
/// fields, daprd's errors.
pub(crate) fn parse_schedule_request(
    state: &ApiState,
    uri: &Uri,
    bytes: &[u8],
) -> Result<rv1::ScheduleJobRequest, ApiError> {
    parse_schedule_body(state, RouteName::from_uri(uri)?, bytes)
}

/// A create body as daprd reads it, for the job `name`.
pub(crate) fn parse_schedule_body(
    state: &ApiState,
    name: RouteName,
    bytes: &[u8],
) -> Result<rv1::ScheduleJobRequest, ApiError> {
    let req = if bytes.is_empty() {
        JobHttpRequest::default()
    } else {
        json::parse_job_http_request(bytes).map_err(ApiError::malformed_request)?
    };
    if !req.name.is_empty() {
        return Err(ApiError::name_in_url_only(&state.app_id));
    }
    let job = rv1::Job {
        name: name.text.trim().to_owned(),
        schedule: req.schedule,
        repeats: req.repeats,
        due_time: req.due_time,
        ttl: req.ttl,
        data: req.data.as_ref().map(json::value_to_any),
        failure_policy: req.failure_policy,
    };
    if !name.utf8 && (job.schedule.is_some() || job.due_time.is_some()) {
        return Err(ApiError::schedule_job(
            &invalid_utf8_marshal_error(),
            &state.app_id,
            &state.namespace,
        ));
    }
    Ok(rv1::ScheduleJobRequest {
        job: Some(job),
        overwrite: req.overwrite.unwrap_or(false),
    })
}

/// The first value of `key` in a query string, form-unescaped.
pub(crate) fn query_param(query: &str, key: &str) -> Result<Option<String>, ApiError> {
    Ok(query_params(query)?
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v))
}

/// Every `key=value` of a query string in order, form-unescaped.
pub(crate) fn query_params(query: &str) -> Result<Vec<(String, String)>, ApiError> {
    let mut params = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let k = go::url::query_unescape(k).map_err(ApiError::malformed_request)?;
        let v = go::url::query_unescape(v).map_err(ApiError::malformed_request)?;
        params.push((
            String::from_utf8_lossy(&k).into_owned(),
            String::from_utf8_lossy(&v).into_owned(),
        ));
    }
    Ok(params)
}
