//! The Dapr error model of the jobs API: one [`ApiError`] that renders as daprd's HTTP body and
//! as its gRPC status.
//!
//! daprd has three kinds of errors on these routes, and each renders differently:
//! - dapr/kit errors (every `DAPR_SCHEDULER_*` reason): JSON `{"errorCode","message","details"}`
//!   with one `google.rpc.ErrorInfo`, and over gRPC a status with the same ErrorInfo;
//! - legacy `messages.APIError`s (`ERR_MALFORMED_REQUEST`, `ERR_BODY_READ`, `ERR_INTERNAL`, …):
//!   JSON `{"errorCode","message"}` without details;
//! - Go `http.Error` plain text (bad URL escapes, a wrong `dapr-api-token`).

use std::collections::{BTreeMap, HashMap};

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde::Serialize;
use tonic_types::{ErrorDetails, StatusExt};

use crate::seam;

/// The ErrorInfo domain of every Dapr error.
pub const DOMAIN: &str = "dapr.io";

/// Type URL of `google.rpc.ErrorInfo`, as the HTTP body names it.
pub const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";

/// Dapr's error reasons for the jobs API (`pkg/messages/errorcodes`, category `job`), plus the
/// legacy error codes these routes can return.
pub mod reason {
    /// The Scheduler refused or failed `ScheduleJob`.
    pub const SCHEDULE_JOB: &str = "DAPR_SCHEDULER_SCHEDULE_JOB";
    /// The POST body carried a job name.
    pub const JOB_NAME: &str = "DAPR_SCHEDULER_JOB_NAME";
    /// The job name is empty.
    pub const JOB_NAME_EMPTY: &str = "DAPR_SCHEDULER_JOB_NAME_EMPTY";
    /// `GetJob` failed (including "not found").
    pub const GET_JOB: &str = "DAPR_SCHEDULER_GET_JOB";
    /// `ListJobs` failed.
    pub const LIST_JOBS: &str = "DAPR_SCHEDULER_LIST_JOBS";
    /// `DeleteJob` or `DeleteJobsByPrefix` failed.
    pub const DELETE_JOB: &str = "DAPR_SCHEDULER_DELETE_JOB";
    /// A gRPC `ScheduleJob` without a job.
    pub const EMPTY: &str = "DAPR_SCHEDULER_EMPTY";
    /// Neither `schedule` nor `dueTime` is set.
    pub const SCHEDULE_EMPTY: &str = "DAPR_SCHEDULER_SCHEDULE_EMPTY";
    /// Legacy: the body is not a valid `JobHTTPRequest`.
    pub const MALFORMED_REQUEST: &str = "ERR_MALFORMED_REQUEST";
    /// Legacy: the body could not be read.
    pub const BODY_READ: &str = "ERR_BODY_READ";
    /// Legacy: the response could not be encoded.
    pub const INTERNAL: &str = "ERR_INTERNAL";
    /// Legacy: the sidecar is not ready (`GET /v1.0/healthz`).
    pub const HEALTH_NOT_READY: &str = "ERR_HEALTH_NOT_READY";
    /// jobsd's own routes: the body is larger than `--max-body-size` (Dapr's routes answer
    /// as daprd does, 400 `ERR_BODY_READ` `stream too large`).
    pub const BODY_TOO_LARGE: &str = "ERR_REQUEST_BODY_TOO_LARGE";
}

/// An error of the jobs API, rendered exactly as daprd renders it over HTTP and gRPC.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// A dapr/kit error: JSON body with one ErrorInfo detail, gRPC status with the same detail.
    #[error("{message}")]
    Kit {
        /// gRPC status code.
        code: tonic::Code,
        /// HTTP status.
        http: StatusCode,
        /// ErrorInfo reason, also the HTTP `errorCode`.
        reason: String,
        /// Status message.
        message: String,
        /// ErrorInfo metadata (sorted, as Go's map encoding emits it).
        metadata: BTreeMap<String, String>,
    },
    /// A legacy daprd `APIError`: `{"errorCode","message"}` without details; over gRPC a plain
    /// status.
    #[error("{message}")]
    Legacy {
        /// gRPC status code.
        code: tonic::Code,
        /// HTTP status.
        http: StatusCode,
        /// The `errorCode` of the body.
        error_code: &'static str,
        /// The message.
        message: String,
    },
    /// Go's `http.Error`: a `text/plain` body (the message plus a newline).
    #[error("{message}")]
    PlainText {
        /// HTTP status.
        http: StatusCode,
        /// The message, without the trailing newline.
        message: String,
    },
}

/// `{"appID": …, "namespace": …}`, the ErrorInfo metadata of every jobs error.
fn owner_metadata(app_id: &str, namespace: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("appID".to_owned(), app_id.to_owned()),
        ("namespace".to_owned(), namespace.to_owned()),
    ])
}

impl ApiError {
    /// daprd's `apierrors.Empty(what, …)`: InvalidArgument/400 `<what> is empty`.
    pub fn empty(what: &str, reason: &str, app_id: &str, namespace: &str) -> Self {
        ApiError::Kit {
            code: tonic::Code::InvalidArgument,
            http: StatusCode::BAD_REQUEST,
            reason: reason.to_owned(),
            message: format!("{what} is empty"),
            metadata: owner_metadata(app_id, namespace),
        }
    }

    /// `Job is empty` (a gRPC `ScheduleJob` without a job).
    pub fn job_empty(app_id: &str, namespace: &str) -> Self {
        Self::empty("Job", reason::EMPTY, app_id, namespace)
    }

    /// `Name is empty`.
    pub fn name_empty(app_id: &str, namespace: &str) -> Self {
        Self::empty("Name", reason::JOB_NAME_EMPTY, app_id, namespace)
    }

    /// `Schedule is empty` (neither schedule nor dueTime set).
    pub fn schedule_empty(app_id: &str, namespace: &str) -> Self {
        Self::empty("Schedule", reason::SCHEDULE_EMPTY, app_id, namespace)
    }

    /// The POST body named the job: `Set the job name in the url only`; its metadata carries
    /// the app ID only, as daprd's does.
    pub fn name_in_url_only(app_id: &str) -> Self {
        ApiError::Kit {
            code: tonic::Code::InvalidArgument,
            http: StatusCode::BAD_REQUEST,
            reason: reason::JOB_NAME.to_owned(),
            message: "Set the job name in the url only".to_owned(),
            metadata: BTreeMap::from([("appID".to_owned(), app_id.to_owned())]),
        }
    }

    /// The Scheduler failed `ScheduleJob`: its code (`Unknown` becomes `Internal`) and the HTTP
    /// status of that code.
    pub fn schedule_job(err: &seam::Error, app_id: &str, namespace: &str) -> Self {
        let code = match err.code {
            tonic::Code::Unknown => tonic::Code::Internal,
            code => code,
        };
        ApiError::Kit {
            code,
            http: http_status_from_code(code),
            reason: reason::SCHEDULE_JOB.to_owned(),
            message: format!("failed to schedule job due to: {err}"),
            metadata: owner_metadata(app_id, namespace),
        }
    }

    /// The Scheduler failed `GetJob` (not found included): always Internal/500.
    pub fn get_job(err: &seam::Error, app_id: &str, namespace: &str) -> Self {
        Self::internal_kit(
            reason::GET_JOB,
            format!("failed to get job due to: {err}"),
            app_id,
            namespace,
        )
    }

    /// The Scheduler failed `DeleteJob` or `DeleteByNamePrefix`: always Internal/500.
    pub fn delete_job(err: &seam::Error, app_id: &str, namespace: &str) -> Self {
        Self::internal_kit(
            reason::DELETE_JOB,
            format!("failed to delete job due to: {err}"),
            app_id,
            namespace,
        )
    }

    /// The Scheduler failed `ListJobs`: always Internal/500.
    pub fn list_jobs(err: &seam::Error, app_id: &str, namespace: &str) -> Self {
        Self::internal_kit(
            reason::LIST_JOBS,
            format!("failed to list jobs due to: {err}"),
            app_id,
            namespace,
        )
    }

    fn internal_kit(reason: &str, message: String, app_id: &str, namespace: &str) -> Self {
        ApiError::Kit {
            code: tonic::Code::Internal,
            http: StatusCode::INTERNAL_SERVER_ERROR,
            reason: reason.to_owned(),
            message,
            metadata: owner_metadata(app_id, namespace),
        }
    }

    /// 400 `ERR_MALFORMED_REQUEST` `failed deserializing HTTP body: <detail>`.
    pub fn malformed_request(detail: impl std::fmt::Display) -> Self {
        ApiError::Legacy {
            code: tonic::Code::InvalidArgument,
            http: StatusCode::BAD_REQUEST,
            error_code: reason::MALFORMED_REQUEST,
            message: format!("failed deserializing HTTP body: {detail}"),
        }
    }

    /// 404 `ERR_DIRECT_INVOKE`: what daprd answers when none of its API routes serves a
    /// request (its router hands it to service invocation, which finds no app id in it).
    pub fn no_route() -> Self {
        ApiError::Legacy {
            code: tonic::Code::NotFound,
            http: StatusCode::NOT_FOUND,
            error_code: "ERR_DIRECT_INVOKE",
            message: "failed getting app id either from the URL path or the header dapr-app-id"
                .to_owned(),
        }
    }

    /// 400 `ERR_BODY_READ` `failed to read request body: <detail>`.
    pub fn body_read(detail: impl std::fmt::Display) -> Self {
        ApiError::Legacy {
            code: tonic::Code::InvalidArgument,
            http: StatusCode::BAD_REQUEST,
            error_code: reason::BODY_READ,
            message: format!("failed to read request body: {detail}"),
        }
    }

    /// 413 `ERR_REQUEST_BODY_TOO_LARGE`: the body is over `limit` bytes.
    pub fn body_too_large(limit: usize) -> Self {
        ApiError::Legacy {
            code: tonic::Code::ResourceExhausted,
            http: StatusCode::PAYLOAD_TOO_LARGE,
            error_code: reason::BODY_TOO_LARGE,
            message: format!(
                "failed to read request body: the body is larger than the limit of {limit} bytes (--max-body-size)"
            ),
        }
    }

    /// 500 `ERR_INTERNAL` `failed to encode response as JSON: <detail>`.
    pub fn encode_json(detail: impl std::fmt::Display) -> Self {
        ApiError::Legacy {
            code: tonic::Code::Internal,
            http: StatusCode::INTERNAL_SERVER_ERROR,
            error_code: reason::INTERNAL,
            message: format!("failed to encode response as JSON: {detail}"),
        }
    }

    /// 400 text/plain: a route parameter is not a valid query escape.
    pub fn unescape_param(key: &str, detail: impl std::fmt::Display) -> Self {
        ApiError::PlainText {
            http: StatusCode::BAD_REQUEST,
            message: format!(
                "failed to unescape request parameter {}. Error: {detail}",
                crate::go::quote::quote(key)
            ),
        }
    }

    /// 500 `ERR_HEALTH_NOT_READY` `dapr is not ready`, daprd's answer to `/v1.0/healthz`
    /// before its readiness targets are met.
    pub fn health_not_ready() -> Self {
        ApiError::Legacy {
            code: tonic::Code::Internal,
            http: StatusCode::INTERNAL_SERVER_ERROR,
            error_code: reason::HEALTH_NOT_READY,
            message: "dapr is not ready".to_owned(),
        }
    }

    /// 401 text/plain `invalid api token`, daprd's `APITokenAuthMiddleware` answer.
    pub fn invalid_api_token() -> Self {
        ApiError::PlainText {
            http: StatusCode::UNAUTHORIZED,
            message: "invalid api token".to_owned(),
        }
    }

    /// A gRPC call without the right `dapr-api-token`: daprd's
    /// `ErrorFromHTTPResponseCode(401, detail)` — Unauthenticated `Unauthorized` with an
    /// ErrorInfo carrying `http.code` and `http.error_message`.
    pub fn grpc_unauthenticated(detail: &str) -> Self {
        // daprd cuts the detail to 63 bytes to fit an ErrorInfo metadata value.
        let detail: String = if detail.len() >= 63 {
            let mut end = 63;
            while !detail.is_char_boundary(end) {
                end -= 1;
            }
            detail[..end].to_owned()
        } else {
            detail.to_owned()
        };
        ApiError::Kit {
            code: tonic::Code::Unauthenticated,
            http: StatusCode::UNAUTHORIZED,
            reason: "Unauthorized".to_owned(),
            message: "Unauthorized".to_owned(),
            metadata: BTreeMap::from([
                ("http.code".to_owned(), "401".to_owned()),
                ("http.error_message".to_owned(), detail),
            ]),
        }
    }

    /// The HTTP status of this error.
    pub fn http_status(&self) -> StatusCode {
        match self {
            ApiError::Kit { http, .. }
            | ApiError::Legacy { http, .. }
            | ApiError::PlainText { http, .. } => *http,
        }
    }

    /// The HTTP body and its content type.
    pub fn http_body(&self) -> (&'static str, Vec<u8>) {
        match self {
            ApiError::Kit {
                reason,
                message,
                metadata,
                ..
            } => {
                let body = KitBody {
                    error_code: reason,
                    message,
                    details: [ErrorInfoJson {
                        type_url: ERROR_INFO_TYPE,
                        domain: DOMAIN,
                        metadata,
                        reason,
                    }],
                };
                ("application/json", go_json(&body))
            }
            ApiError::Legacy {
                error_code,
                message,
                ..
            } => {
                let body = LegacyBody {
                    error_code,
                    message,
                };
                ("application/json", go_json(&body))
            }
            ApiError::PlainText { message, .. } => {
                let mut body = message.clone().into_bytes();
                body.push(b'\n');
                ("text/plain; charset=utf-8", body)
            }
        }
    }
}

/// The body of a dapr/kit error; field order is Go's struct order.
#[derive(Serialize)]
struct KitBody<'a> {
    #[serde(rename = "errorCode")]
    error_code: &'a str,
    message: &'a str,
    details: [ErrorInfoJson<'a>; 1],
}

/// An ErrorInfo detail as dapr/kit writes it: a Go map, so its keys are sorted.
#[derive(Serialize)]
struct ErrorInfoJson<'a> {
    #[serde(rename = "@type")]
    type_url: &'a str,
    domain: &'a str,
    metadata: &'a BTreeMap<String, String>,
    reason: &'a str,
}

/// The body of a legacy `APIError`.
#[derive(Serialize)]
struct LegacyBody<'a> {
    #[serde(rename = "errorCode")]
    error_code: &'a str,
    message: &'a str,
}

/// JSON as Go's `encoding/json` writes it: compact, with `<`, `>`, `&`, U+2028 and U+2029
/// escaped.
fn go_json<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing these plain structs of strings cannot fail; an empty object keeps the
    // response well-formed should it ever.
    let plain = serde_json::to_string(value).unwrap_or_else(|_| "{}".to_owned());
    // Outside strings serde_json never writes these characters, so replacing them everywhere
    // only touches string contents.
    let mut out = String::with_capacity(plain.len());
    for c in plain.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out.into_bytes()
}

/// daprd's `HTTPStatusFromCode` (grpc-gateway's table).
pub fn http_status_from_code(code: tonic::Code) -> StatusCode {
    use tonic::Code::*;
    match code {
        Ok => StatusCode::OK,
        Cancelled => StatusCode::REQUEST_TIMEOUT,
        Unknown | Internal | DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
        InvalidArgument | FailedPrecondition | OutOfRange => StatusCode::BAD_REQUEST,
        DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        NotFound => StatusCode::NOT_FOUND,
        AlreadyExists | Aborted => StatusCode::CONFLICT,
        PermissionDenied => StatusCode::FORBIDDEN,
        Unauthenticated => StatusCode::UNAUTHORIZED,
        ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Unavailable => StatusCode::SERVICE_UNAVAILABLE,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (content_type, body) = self.http_body();
        let mut response = (self.http_status(), body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        if matches!(self, ApiError::PlainText { .. }) {
            // Go's http.Error sets it; clients that sniff would otherwise guess.
            headers.insert(
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            );
        }
        response
    }
}

/// Longest gRPC status message sent, in bytes. It travels in the `grpc-message` trailer (and
/// again in `grpc-status-details-bin`), and grpc-core clients (Python, Node, C#, …) refuse a
/// response whose metadata passes 16 KiB: a 100,000-character job name echoed whole would turn
/// a clear refusal into a transport error on the client. HTTP bodies carry the whole text.
pub const MAX_GRPC_MESSAGE: usize = 2048;

/// `message`, cut in the middle when it is longer than [`MAX_GRPC_MESSAGE`]: the start (what
/// failed) and the end (why) stay.
fn grpc_message(message: String) -> String {
    if message.len() <= MAX_GRPC_MESSAGE {
        return message;
    }
    let half = MAX_GRPC_MESSAGE / 2;
    let mut head = half;
    while !message.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = message.len() - half;
    while !message.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}…({} bytes cut)…{}",
        &message[..head],
        tail - head,
        &message[tail..]
    )
}

impl From<ApiError> for tonic::Status {
    fn from(err: ApiError) -> Self {
        match err {
            ApiError::Kit {
                code,
                reason,
                message,
                metadata,
                ..
            } => {
                let metadata: HashMap<String, String> = metadata.into_iter().collect();
                tonic::Status::with_error_details(
                    code,
                    grpc_message(message),
                    ErrorDetails::with_error_info(reason, DOMAIN, metadata),
                )
            }
            ApiError::Legacy { code, message, .. } => {
                tonic::Status::new(code, grpc_message(message))
            }
            ApiError::PlainText { http, message } => {
                tonic::Status::new(code_from_http_status(http), grpc_message(message))
            }
        }
    }
}

/// daprd's `CodeFromHTTPStatus`, for the few errors born as HTTP statuses.
fn code_from_http_status(status: StatusCode) -> tonic::Code {
    match status.as_u16() {
        408 => tonic::Code::Cancelled,
        400 => tonic::Code::Internal,
        504 => tonic::Code::DeadlineExceeded,
        404 => tonic::Code::NotFound,
        409 => tonic::Code::AlreadyExists,
        403 => tonic::Code::PermissionDenied,
        401 => tonic::Code::Unauthenticated,
        429 => tonic::Code::ResourceExhausted,
        501 => tonic::Code::Unimplemented,
        503 => tonic::Code::Unavailable,
        200..=299 => tonic::Code::Ok,
        _ => tonic::Code::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_grpc_messages_keep_their_start_and_end() {
        let long = format!(
            "job name is invalid \"{}é\": must be at most 512 characters",
            "n".repeat(100_000)
        );
        let status = tonic::Status::from(ApiError::schedule_job(
            &seam::Error::new(tonic::Code::Unknown, long.clone()),
            "myapp",
            "default",
        ));
        assert!(
            status.message().len() < MAX_GRPC_MESSAGE + 40,
            "{}",
            status.message().len()
        );
        assert!(
            status
                .message()
                .starts_with("failed to schedule job due to")
        );
        assert!(status.message().ends_with("must be at most 512 characters"));
        assert!(status.message().contains("bytes cut"));
        // Short ones are Dapr's, byte for byte.
        assert_eq!(grpc_message("x".repeat(10)), "x".repeat(10));
    }

    fn body_json(err: &ApiError) -> serde_json::Value {
        serde_json::from_slice(&err.http_body().1).unwrap_or(serde_json::Value::Null)
    }

    #[test]
    fn kit_body_has_one_error_info_with_sorted_metadata() {
        let err = ApiError::name_empty("myapp", "default");
        let (ct, body) = err.http_body();
        assert_eq!(ct, "application/json");
        assert_eq!(
            String::from_utf8_lossy(&body),
            r#"{"errorCode":"DAPR_SCHEDULER_JOB_NAME_EMPTY","message":"Name is empty","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","domain":"dapr.io","metadata":{"appID":"myapp","namespace":"default"},"reason":"DAPR_SCHEDULER_JOB_NAME_EMPTY"}]}"#
        );
        assert_eq!(err.http_status(), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn name_in_body_carries_app_id_only() {
        let v = body_json(&ApiError::name_in_url_only("myapp"));
        assert_eq!(
            v["details"][0]["metadata"],
            serde_json::json!({"appID": "myapp"})
        );
        assert_eq!(v["message"], "Set the job name in the url only");
    }

    #[test]
    fn schedule_errors_map_codes_and_statuses() {
        let exists = seam::Error::new(
            tonic::Code::AlreadyExists,
            "job already exists: 'app||default||myapp||j'",
        );
        let err = ApiError::schedule_job(&exists, "myapp", "default");
        assert_eq!(err.http_status(), StatusCode::CONFLICT);
        assert_eq!(
            body_json(&err)["message"],
            "failed to schedule job due to: rpc error: code = AlreadyExists desc = job already exists: 'app||default||myapp||j'"
        );
        let status = tonic::Status::from(err);
        assert_eq!(status.code(), tonic::Code::AlreadyExists);

        let unknown = seam::Error::new(tonic::Code::Unknown, "job failed validation: x");
        let err = ApiError::schedule_job(&unknown, "a", "n");
        assert_eq!(err.http_status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(tonic::Status::from(err).code(), tonic::Code::Internal);

        let not_found = seam::Error::new(tonic::Code::NotFound, "job not found: x");
        let err = ApiError::get_job(&not_found, "a", "n");
        assert_eq!(err.http_status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(tonic::Status::from(err).code(), tonic::Code::Internal);
    }

    #[test]
    fn grpc_status_carries_error_info() {
        let status = tonic::Status::from(ApiError::schedule_empty("myapp", "ns"));
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert_eq!(status.message(), "Schedule is empty");
        let info = status.get_details_error_info().expect("ErrorInfo");
        assert_eq!(info.reason, reason::SCHEDULE_EMPTY);
        assert_eq!(info.domain, DOMAIN);
        assert_eq!(
            info.metadata.get("appID").map(String::as_str),
            Some("myapp")
        );
        assert_eq!(
            info.metadata.get("namespace").map(String::as_str),
            Some("ns")
        );
    }

    #[test]
    fn legacy_and_plain_bodies() {
        let err = ApiError::malformed_request("proto: x");
        assert_eq!(
            String::from_utf8_lossy(&err.http_body().1),
            r#"{"errorCode":"ERR_MALFORMED_REQUEST","message":"failed deserializing HTTP body: proto: x"}"#
        );
        let err = ApiError::invalid_api_token();
        assert_eq!(
            err.http_body(),
            ("text/plain; charset=utf-8", b"invalid api token\n".to_vec())
        );
        assert_eq!(err.http_status(), StatusCode::UNAUTHORIZED);
    }

    #[test]
    fn go_json_escapes_html_characters() {
        let err = ApiError::encode_json("<a&b>");
        assert_eq!(
            String::from_utf8_lossy(&err.http_body().1),
            r#"{"errorCode":"ERR_INTERNAL","message":"failed to encode response as JSON: \u003ca\u0026b\u003e"}"#
        );
    }

    #[test]
    fn grpc_unauthenticated_is_daprds_shape() {
        let status = tonic::Status::from(ApiError::grpc_unauthenticated(
            "authentication error: api token mismatch",
        ));
        assert_eq!(status.code(), tonic::Code::Unauthenticated);
        assert_eq!(status.message(), "Unauthorized");
        let info = status.get_details_error_info().expect("ErrorInfo");
        assert_eq!(info.reason, "Unauthorized");
        assert_eq!(
            info.metadata.get("http.error_message").map(String::as_str),
            Some("authentication error: api token mismatch")
        );
    }
}
