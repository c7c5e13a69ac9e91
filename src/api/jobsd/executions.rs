//! Async completion on jobsd's API: an app that answered a trigger "later" (HTTP `202` with
//! `Jobsd-Async: true`, or a plain `202` for a job with `policy.lease`; gRPC response metadata
//! `jobsd-async: true`) ends the execution it was handed here, by the execution id the trigger
//! carried:
//!
//! - `POST /jobsd/v1/executions/{id}/heartbeat`, optionally `{"lease": "10m"}` (a Go duration,
//!   1s to 24h, the lease's new length): the lease runs from now again.
//! - `POST /jobsd/v1/executions/{id}/complete`: the attempt succeeded.
//! - `POST /jobsd/v1/executions/{id}/fail` with `{"error": "text"}`: the attempt failed; the
//!   job's failure policy decides (a retry keeps the execution id).
//!
//! Each answers `200` with the execution (`leaseUntil` while held, `ended` once ended), once
//! the change is durable; `404` for an execution not held for this app (unknown, ended, or
//! another app's), `409` for a complete of an execution that ended otherwise (or a fail of
//! one completed). A repeated complete (or fail) answers as the first did. The same calls are
//! `jobsd.v1.Jobs` `Heartbeat`, `CompleteExecution` and `FailExecution`.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use super::{bad_request, route_error};
use crate::api::http_parts::{Shared, json_response, read_body};
use crate::api::{ApiError, ApiState};
use crate::proto::jobsd_api as jv1;
use crate::schedule::job_policy::lease_length;
use crate::seam::{ExecutionCall, HeldExecution, views_wire};

/// The routes, to merge into the API router.
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/jobsd/v1/executions/{id}/heartbeat", post(heartbeat))
        .route("/jobsd/v1/executions/{id}/complete", post(complete))
        .route("/jobsd/v1/executions/{id}/fail", post(fail))
}

/// The error text of a fail that gives none.
const NO_ERROR_TEXT: &str = "failed by the app";

impl ApiState {
    /// Applies `call` to this app's held execution `id`.
    pub async fn execution_call(
        &self,
        id: String,
        call: ExecutionCall,
    ) -> Result<HeldExecution, ApiError> {
        let scheduler = Arc::clone(&self.scheduler);
        let metadata = self.job_metadata();
        let not_held = |e| route_error(e, "ERR_EXECUTION_NOT_FOUND", "ERR_EXECUTION_ENDED");
        scheduler
            .executions()
            .map_err(not_held)?
            .execution_call(metadata, id, call)
            .await
            .map_err(not_held)
    }

    /// The refusal of `policy.lease` by a sidecar whose scheduler cannot hold executions.
    pub(super) fn check_lease_policy(&self, lease: bool) -> Result<(), ApiError> {
        if lease && self.scheduler.as_executions().is_none() {
            return Err(bad_request(
                "policy.lease: async completion needs jobsd's embedded scheduler; it is not \
                 available with --scheduler-host-address"
                    .to_owned(),
            ));
        }
        Ok(())
    }
}

/// A heartbeat's `lease`, checked; the error names the field.
pub fn heartbeat_call(lease: &str) -> Result<ExecutionCall, ApiError> {
    Ok(ExecutionCall::Heartbeat(
        lease_length("lease", lease).map_err(bad_request)?,
    ))
}

/// A fail's error text (a default one when empty).
pub fn fail_call(error: String) -> ExecutionCall {
    ExecutionCall::Fail(if error.is_empty() {
        NO_ERROR_TEXT.to_owned()
    } else {
        error
    })
}

fn time(t: Option<DateTime<Utc>>) -> Value {
    t.map_or(Value::Null, |t| {
        Value::String(t.to_rfc3339_opts(SecondsFormat::AutoSi, true))
    })
}

/// `{"executionId", "name", "attempt", "nominalTime", "started", "leaseUntil", "ended"}`.
fn execution_json(h: &HeldExecution) -> String {
    json!({
        "executionId": h.execution_id.to_string(),
        "name": h.name,
        "attempt": h.attempt,
        "nominalTime": time(Some(h.nominal)),
        "started": time(Some(h.started)),
        "leaseUntil": time(h.lease_until),
        "ended": h.ended.map(|e| e.as_str()),
    })
    .to_string()
}

/// An optional JSON body with only the members `T` knows; an empty body is `T::default()`.
async fn body_of<T>(state: &ApiState, body: Body) -> Result<T, ApiError>
where
    T: serde::de::DeserializeOwned + Default,
{
    let bytes = read_body(body, state.body_limit()).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(&bytes).map_err(|e| bad_request(format!("body: {e}")))
}

/// The body of a heartbeat.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct HeartbeatBody {
    /// The lease's new length (Go duration); absent keeps its length.
    #[serde(default)]
    lease: String,
}

/// The body of a complete: nothing (an empty object is fine).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CompleteBody {}

/// The body of a fail.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FailBody {
    /// Why the attempt failed.
    #[serde(default)]
    error: String,
}

async fn answer(state: &ApiState, id: String, call: ExecutionCall) -> Result<Response, ApiError> {
    let held = state.execution_call(id, call).await?;
    Ok(json_response(execution_json(&held)))
}

fn respond(result: Result<Response, ApiError>) -> Response {
    result.unwrap_or_else(IntoResponse::into_response)
}

async fn heartbeat(State(state): State<Shared>, Path(id): Path<String>, body: Body) -> Response {
    respond(
        async {
            let body: HeartbeatBody = body_of(&state, body).await?;
            answer(&state, id, heartbeat_call(&body.lease)?).await
        }
        .await,
    )
}

async fn complete(State(state): State<Shared>, Path(id): Path<String>, body: Body) -> Response {
    respond(
        async {
            let CompleteBody {} = body_of(&state, body).await?;
            answer(&state, id, ExecutionCall::Complete).await
        }
        .await,
    )
}

async fn fail(State(state): State<Shared>, Path(id): Path<String>, body: Body) -> Response {
    respond(
        async {
            let body: FailBody = body_of(&state, body).await?;
            answer(&state, id, fail_call(body.error)).await
        }
        .await,
    )
}

/// A held (or just ended) execution as `jobsd.v1.HeldExecution` and its job's name.
pub fn execution_to_wire(h: HeldExecution) -> (Option<jv1::HeldExecution>, String) {
    let name = h.name.clone();
    (Some(views_wire::held_to_wire(h)), name)
}
