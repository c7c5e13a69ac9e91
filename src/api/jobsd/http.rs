//! jobsd's HTTP routes:
//!
//! - `POST /jobsd/v1/jobs/{name}`: a Dapr job body (same fields, parsing, validation, errors,
//!   `overwrite`) plus `"labels"`, a string map; 204. `Idempotency-Key` and `If-Match` as in
//!   [`conditions`].
//! - `GET /jobsd/v1/jobs/{name}`: `{"job", "labels", "policy", "status", "etag"}` and the
//!   `ETag` header; the job active or finished (kept for `--finished-retention`).
//! - `DELETE /jobsd/v1/jobs/{name}`: the job, its history and finished record; 204. With
//!   `If-Match`, only if the job meets it (412 otherwise).
//! - `GET /jobsd/v1/jobs/{name}/runs?limit=&before=`: the run history, newest first.
//! - `POST /jobsd/v1/jobs/{name}/pause` with an optional `{"note": "..."}`: no tick fires
//!   until it is resumed; 204.
//! - `POST /jobsd/v1/jobs/{name}/resume`: it goes on (a job not paused is left as it is); 204.
//! - `GET /jobsd/v1/jobs?prefix=&label=k=v&state=active|paused|finished&pageSize=&pageToken=`.
//! - `POST /jobsd/v1/jobs:pause`, `POST /jobsd/v1/jobs:resume`: many at once (`bulk.rs`).
//! - `POST /jobsd/v1/preview`: a create checked, its next fire times, nothing stored
//!   (`preview.rs`).
//! - `GET /jobsd/v1/clock`, `POST /jobsd/v1/clock/advance`: the `--test-clock` (`clock.rs`).

use std::collections::BTreeMap;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderMap, HeaderValue, StatusCode, Uri};

use super::conditions;
use super::{DEFAULT_RUNS, MAX_RUNS, bad_request, json, steer};
use crate::api::http_parts::{Shared, json_response, read_body};
use crate::api::http_request::{parse_schedule_request, query_params};
use crate::api::{ApiError, ApiState};
use crate::observe::trace::{self, TRACEPARENT};
use crate::schedule::policy_json;
use crate::seam::{JobExtras, JobState, ListFilter};

/// The routes of this file (`super::routes` has all of jobsd's).
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/jobsd/v1/jobs", get(list))
        .route(
            "/jobsd/v1/jobs/{name}",
            get(get_view).post(create).delete(delete),
        )
        .route("/jobsd/v1/jobs/{name}/runs", get(runs))
        .route("/jobsd/v1/jobs/{name}/pause", post(pause))
        .route("/jobsd/v1/jobs/{name}/resume", post(resume))
        .route("/jobsd/v1/jobs/{name}/trigger", post(trigger))
        .route("/jobsd/v1/jobs/{name}/backfill", post(backfill))
}

pub(super) fn respond(result: Result<Response, ApiError>) -> Response {
    result.unwrap_or_else(IntoResponse::into_response)
}

/// What a create body carries beside Dapr's job: labels, policy and jobsd's failure policy.
/// A `"failurePolicy"` with jobsd's kinds or members is taken out of the body Dapr's parser
/// reads (which knows only `drop` and `constant`).
pub(super) fn split_body(bytes: &[u8]) -> Result<(Option<Vec<u8>>, JobExtras), ApiError> {
    let mut extras = JobExtras::default();
    if bytes.is_empty() {
        return Ok((None, extras));
    }
    // A body Dapr's parser refuses is refused by it, with Dapr's error: only read ours here.
    let Ok(serde_json::Value::Object(mut body)) = serde_json::from_slice(bytes) else {
        return Ok((None, extras));
    };
    if let Some(labels) = body.get("labels").cloned() {
        extras.labels = serde_json::from_value::<Option<BTreeMap<String, String>>>(labels)
            .map_err(|e| bad_request(format!("labels: {e}")))?
            .unwrap_or_default();
    }
    if let Some(policy) = body.get("policy").cloned().filter(|v| !v.is_null()) {
        extras.policy = Some(policy_json::policy_from_json(policy).map_err(bad_request)?);
    }
    let jobsd_failure = body
        .get("failurePolicy")
        .is_some_and(policy_json::is_jobsd_failure_policy);
    if !jobsd_failure {
        return Ok((None, extras));
    }
    let failure = body.remove("failurePolicy").unwrap_or_default();
    extras.failure_policy = Some(policy_json::failure_from_json(failure).map_err(bad_request)?);
    let rest = serde_json::to_vec(&body).map_err(|e| bad_request(format!("body: {e}")))?;
    Ok((Some(rest), extras))
}

async fn create(State(state): State<Shared>, uri: Uri, headers: HeaderMap, body: Body) -> Response {
    let traceparent = trace::valid(headers.get(TRACEPARENT).map(HeaderValue::as_bytes));
    respond(
        async {
            let conditions = conditions::from_headers(&headers)?;
            let bytes = read_body(body, state.body_limit()).await?;
            let (rest, mut extras) = split_body(&bytes)?;
            let req = parse_schedule_request(&state, &uri, rest.as_deref().unwrap_or(&bytes))?;
            extras.traceparent = traceparent;
            let Some(conditions) = conditions else {
                state.schedule_job_with(req, extras).await?;
                return Ok(StatusCode::NO_CONTENT.into_response());
            };
            state.check_extras(&req, &extras)?;
            let applied = state.schedule_job_guarded(req, extras, conditions).await?;
            Ok(conditions::http_response(&applied))
        }
        .await,
    )
}

async fn get_view(State(state): State<Shared>, Path(name): Path<String>) -> Response {
    respond(
        async {
            let view = state.job_view(name).await?;
            let mut response = json_response(json::view(&view)?);
            if let Ok(etag) = HeaderValue::from_str(&view.etag) {
                response.headers_mut().insert(http::header::ETAG, etag);
            }
            Ok(response)
        }
        .await,
    )
}

async fn delete(
    State(state): State<Shared>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    respond(
        async {
            match conditions::delete_condition(conditions::from_headers(&headers)?)? {
                None => state.delete_job(name).await?,
                Some(if_match) => {
                    state.delete_job_guarded(name, if_match).await?;
                }
            }
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        .await,
    )
}

/// The body of a pause: optional, and only a note.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PauseBody {
    /// Why, shown in the job's status.
    #[serde(default)]
    note: Option<String>,
}

async fn pause(State(state): State<Shared>, Path(name): Path<String>, body: Body) -> Response {
    respond(
        async {
            let bytes = read_body(body, state.body_limit()).await?;
            let body: PauseBody = optional_json(&bytes)?;
            state.pause_job(name, body.note.unwrap_or_default()).await?;
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        .await,
    )
}

async fn resume(State(state): State<Shared>, Path(name): Path<String>) -> Response {
    respond(
        async {
            state.resume_job(name).await?;
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        .await,
    )
}

/// A query parameter parsed as a number, or a 400 naming it.
/// The body of a run-now request (optional).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TriggerBody {
    #[serde(default)]
    overlap: String,
}

/// The body of a backfill request.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BackfillBody {
    start: String,
    end: String,
    #[serde(default)]
    overlap: String,
}

/// `bytes` as JSON of `T`; an empty body is `T::default()`.
fn optional_json<T: serde::de::DeserializeOwned + Default>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(bytes).map_err(|e| bad_request(format!("body: {e}")))
}

async fn trigger(State(state): State<Shared>, Path(name): Path<String>, body: Body) -> Response {
    respond(
        async {
            let bytes = read_body(body, state.body_limit()).await?;
            let body: TriggerBody = optional_json(&bytes)?;
            let overlap = steer::overlap_of(&body.overlap)?;
            let id = state.trigger_job(name, overlap).await?;
            let answer = serde_json::json!({ "executionId": id.to_string() });
            Ok((StatusCode::ACCEPTED, json_response(answer.to_string())).into_response())
        }
        .await,
    )
}

async fn backfill(State(state): State<Shared>, Path(name): Path<String>, body: Body) -> Response {
    respond(
        async {
            let bytes = read_body(body, state.body_limit()).await?;
            let body: BackfillBody =
                serde_json::from_slice(&bytes).map_err(|e| bad_request(format!("body: {e}")))?;
            let start = steer::instant("start", &body.start)?;
            let end = steer::instant("end", &body.end)?;
            let overlap = steer::overlap_of(&body.overlap)?;
            let runs = state.backfill_job(name, (start, end), overlap).await?;
            let executions: Vec<serde_json::Value> = runs
                .iter()
                .map(|(tick, id)| {
                    serde_json::json!({
                        "scheduledTime": crate::trigger::context::rfc3339(*tick),
                        "executionId": id.to_string(),
                    })
                })
                .collect();
            let answer = serde_json::json!({ "count": executions.len(), "executions": executions });
            Ok((StatusCode::ACCEPTED, json_response(answer.to_string())).into_response())
        }
        .await,
    )
}

fn number<T: std::str::FromStr>(value: Option<&String>, name: &str) -> Result<Option<T>, ApiError> {
    value
        .map(|v| {
            v.parse()
                .map_err(|_| bad_request(format!("{name}: {v:?} is not a valid number")))
        })
        .transpose()
}

async fn runs(State(state): State<Shared>, Path(name): Path<String>, uri: Uri) -> Response {
    respond(
        async {
            let params = query_params(uri.query().unwrap_or_default())?;
            let first = |k: &str| params.iter().find(|(key, _)| key == k).map(|(_, v)| v);
            let limit = number::<usize>(first("limit"), "limit")?
                .unwrap_or(DEFAULT_RUNS)
                .clamp(1, MAX_RUNS);
            let before = number::<u64>(first("before"), "before")?;
            let runs = state.list_runs(name, before, limit).await?;
            Ok(json_response(json::runs(&runs, limit)))
        }
        .await,
    )
}

async fn list(State(state): State<Shared>, uri: Uri) -> Response {
    respond(
        async {
            let filter = list_filter(&state, uri.query().unwrap_or_default())?;
            let page = state.list_views(filter).await?;
            Ok(json_response(json::page(&page)?))
        }
        .await,
    )
}

/// A `label` selector `k=v`, or a 400 naming it.
pub(super) fn label_pair(value: &str) -> Result<(String, String), ApiError> {
    let (k, v) = value
        .split_once('=')
        .ok_or_else(|| bad_request(format!("label: {value:?} is not key=value")))?;
    Ok((k.to_owned(), v.to_owned()))
}

/// The filter a list query asks for.
fn list_filter(_state: &ApiState, query: &str) -> Result<ListFilter, ApiError> {
    let mut filter = ListFilter::default();
    for (key, value) in query_params(query)? {
        match key.as_str() {
            "prefix" => filter.name_prefix = value,
            "label" => filter.labels.push(label_pair(&value)?),
            "state" => {
                filter.state = Some(JobState::parse(&value).ok_or_else(|| {
                    bad_request(format!(
                        "state: {value:?} is not one of active, paused, finished"
                    ))
                })?);
            }
            "pageSize" => {
                filter.page_size = number::<usize>(Some(&value), "pageSize")?.unwrap_or(0);
            }
            "pageToken" if !value.is_empty() => filter.page_token = Some(value),
            _ => {}
        }
    }
    Ok(filter)
}
