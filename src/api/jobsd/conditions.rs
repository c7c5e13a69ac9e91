//! `Idempotency-Key` and `If-Match` (issue 13, E3) on the create routes — Dapr's
//! (`POST /v1.0-alpha1/jobs/{name}`, `/v1.0/jobs/{name}`, gRPC `ScheduleJob[Alpha1]`) and
//! jobsd's (`POST /jobsd/v1/jobs/{name}`, `jobsd.v1.Jobs/ScheduleJob`) — and `If-Match` on
//! jobsd's delete (HTTP and gRPC). gRPC takes them as metadata `idempotency-key`, `if-match`.
//!
//! A request with neither header takes the plain path, byte for byte as before. With one:
//! - written: Dapr's answer (204 / empty message) plus `ETag` (HTTP header; gRPC metadata
//!   `etag`, and jobsd's `ScheduleJobResponse.etag`) of the version stored;
//! - a repeat under its `Idempotency-Key`: the same answer (the first request's etag), plus
//!   `Idempotent-Replayed: true` (gRPC metadata `idempotent-replayed`); nothing written;
//! - the key first used with another request: 422 `ERR_IDEMPOTENCY_KEY_REUSED` (gRPC
//!   `InvalidArgument`), nothing written;
//! - `If-Match` not met: 412 `ERR_PRECONDITION_FAILED` (gRPC `FailedPrecondition`), nothing
//!   written;
//! - a malformed header: 400 `ERR_MALFORMED_REQUEST` (gRPC `InvalidArgument`) naming it;
//! - a scheduler that cannot check them (remote mode on a Dapr Scheduler): 400 naming the
//!   header, nothing stored.
//!
//! The rules themselves (etags, the 24 h window, scoping) are `jobs`'s
//! ([`crate::jobs::guard`]).

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use tonic::metadata::MetadataMap;

use super::bad_request;
use crate::api::{ApiError, ApiState, with_timeout};
use crate::proto::{dapr_scheduler as sv1, runtime as rv1};
use crate::seam::guard::{self, IDEMPOTENCY_KEY, IF_MATCH};
use crate::seam::{Conditions, Guarded, IfMatch, JobExtras};

/// The response header (lower-cased: gRPC metadata) saying a create was a repeat.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// The gRPC metadata key of the etag of a conditional write.
pub const ETAG_METADATA: &str = "etag";

/// What a conditional write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The etag of the version stored (empty for a delete).
    pub etag: String,
    /// A repeat under its `Idempotency-Key`: nothing was written.
    pub replayed: bool,
}

/// The conditions of an HTTP request; `None` when it has neither header. Several `If-Match`
/// lines are one list, as HTTP combines them.
pub fn from_headers(headers: &HeaderMap) -> Result<Option<Conditions>, ApiError> {
    let text = |name: &str, value: &HeaderValue| {
        value
            .to_str()
            .map(str::to_owned)
            .map_err(|_| bad_request(format!("{name}: only visible ASCII is allowed")))
    };
    let keys: Vec<_> = headers.get_all(IDEMPOTENCY_KEY).iter().collect();
    let matches: Vec<_> = headers.get_all(IF_MATCH).iter().collect();
    if keys.is_empty() && matches.is_empty() {
        return Ok(None);
    }
    let key = match keys.as_slice() {
        [] => None,
        [one] => Some(text(IDEMPOTENCY_KEY, one)?),
        _ => {
            return Err(bad_request(format!(
                "{IDEMPOTENCY_KEY}: given more than once"
            )));
        }
    };
    let if_match = (!matches.is_empty())
        .then(|| {
            matches
                .iter()
                .map(|v| text(IF_MATCH, v))
                .collect::<Result<Vec<_>, _>>()
                .map(|values| values.join(", "))
        })
        .transpose()?;
    parse(key.as_deref(), if_match.as_deref()).map(Some)
}

/// The conditions of a gRPC request (metadata `idempotency-key`, `if-match`); `None` when it
/// has neither.
pub fn from_metadata(metadata: &MetadataMap) -> Result<Option<Conditions>, ApiError> {
    let text = |name: &str| -> Result<Option<String>, ApiError> {
        let values: Vec<_> = metadata.get_all(name.to_ascii_lowercase()).iter().collect();
        match values.as_slice() {
            [] => Ok(None),
            [one] => one
                .to_str()
                .map(|v| Some(v.to_owned()))
                .map_err(|_| bad_request(format!("{name}: only visible ASCII is allowed"))),
            _ => Err(bad_request(format!("{name}: given more than once"))),
        }
    };
    let key = text(IDEMPOTENCY_KEY)?;
    let if_match = text(IF_MATCH)?;
    if key.is_none() && if_match.is_none() {
        return Ok(None);
    }
    parse(key.as_deref(), if_match.as_deref()).map(Some)
}

/// The `If-Match` of a delete; `None` without one. An `Idempotency-Key` on a delete is
/// refused: a delete is idempotent already, and a key that did nothing would mislead.
pub fn delete_condition(conditions: Option<Conditions>) -> Result<Option<IfMatch>, ApiError> {
    match conditions {
        Some(Conditions {
            idempotency_key: Some(_),
            ..
        }) => Err(bad_request(format!(
            "{IDEMPOTENCY_KEY}: only creates take one (a delete is idempotent)"
        ))),
        other => Ok(other.and_then(|c| c.if_match)),
    }
}

fn parse(key: Option<&str>, if_match: Option<&str>) -> Result<Conditions, ApiError> {
    Ok(Conditions {
        idempotency_key: key
            .map(guard::idempotency_key)
            .transpose()
            .map_err(bad_request)?,
        if_match: if_match
            .map(IfMatch::parse)
            .transpose()
            .map_err(bad_request)?,
    })
}

/// The refusal of a condition, as this API answers it.
fn refused(outcome: Guarded) -> Result<Applied, ApiError> {
    match outcome {
        Guarded::Written { etag } => Ok(Applied {
            etag,
            replayed: false,
        }),
        Guarded::Replayed { etag } => Ok(Applied {
            etag,
            replayed: true,
        }),
        Guarded::PreconditionFailed(message) => Err(ApiError::Legacy {
            code: tonic::Code::FailedPrecondition,
            http: StatusCode::PRECONDITION_FAILED,
            error_code: "ERR_PRECONDITION_FAILED",
            message,
        }),
        Guarded::KeyReused(message) => Err(ApiError::Legacy {
            code: tonic::Code::InvalidArgument,
            http: StatusCode::UNPROCESSABLE_ENTITY,
            error_code: "ERR_IDEMPOTENCY_KEY_REUSED",
            message,
        }),
    }
}

impl ApiState {
    /// `ScheduleJob` (Dapr's checks and errors, jobsd's settings checked by the caller)
    /// under `conditions`.
    pub async fn schedule_job_guarded(
        &self,
        req: rv1::ScheduleJobRequest,
        extras: JobExtras,
        conditions: Conditions,
    ) -> Result<Applied, ApiError> {
        let request = self.scheduler_request(req)?;
        let job_name = request.name.clone();
        let scheduler = Arc::clone(&self.scheduler);
        let outcome = with_timeout(async move {
            let header = conditions.first_header().unwrap_or(guard::IF_MATCH);
            scheduler
                .guards(header)?
                .schedule_job_guarded(request, extras, conditions)
                .await
        })
        .await
        .map_err(|e| self.schedule_error(&job_name, true, e))?;
        refused(outcome)
    }

    /// `DeleteJob` of job `name` only if it meets `if_match`.
    pub async fn delete_job_guarded(
        &self,
        name: String,
        if_match: IfMatch,
    ) -> Result<Applied, ApiError> {
        if name.is_empty() {
            return Err(ApiError::name_empty(&self.app_id, &self.namespace));
        }
        let request = sv1::DeleteJobRequest {
            name,
            metadata: Some(self.job_metadata()),
        };
        let scheduler = Arc::clone(&self.scheduler);
        let outcome = with_timeout(async move {
            scheduler
                .guards(guard::IF_MATCH)?
                .delete_job_guarded(request, if_match)
                .await
        })
        .await
        .map_err(|e| {
            if e.code == tonic::Code::InvalidArgument {
                bad_request(e.message)
            } else {
                ApiError::delete_job(&e, &self.app_id, &self.namespace)
            }
        })?;
        refused(outcome)
    }
}

/// The HTTP answer of a conditional write: 204 with `ETag` and, for a repeat,
/// `Idempotent-Replayed: true`.
pub fn http_response(applied: &Applied) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let headers = response.headers_mut();
    if let Ok(etag) = HeaderValue::from_str(&applied.etag)
        && !applied.etag.is_empty()
    {
        headers.insert(header::ETAG, etag);
    }
    if applied.replayed {
        headers.insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    }
    response
}

/// A gRPC answer of a conditional write: `message` with metadata `etag` and, for a repeat,
/// `idempotent-replayed: true`.
pub fn grpc_response<T>(message: T, applied: &Applied) -> tonic::Response<T> {
    let mut response = tonic::Response::new(message);
    let metadata = response.metadata_mut();
    if let Ok(etag) = applied.etag.parse()
        && !applied.etag.is_empty()
    {
        metadata.insert(ETAG_METADATA, etag);
    }
    if applied.replayed {
        metadata.insert(
            IDEMPOTENT_REPLAYED,
            tonic::metadata::MetadataValue::from_static("true"),
        );
    }
    response
}
