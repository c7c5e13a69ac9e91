//! Creating many jobs in one call, each checked and answered as a create of its own and the
//! lot stored together (one commit in jobsd's own scheduler):
//!
//! - gRPC `jobsd.v1.Jobs/ScheduleJobs` (`grpc.rs`);
//! - `POST /jobsd/v1/jobs:batch` with `{"jobs": [{"name": "a", <the body of POST
//!   /jobsd/v1/jobs/a>}, …]}`: 200 with `{"results": [{"name", "status"}, …]}`, one per job in
//!   order, `status` 204 for a job stored, else the status and the `error` body (`errorCode`,
//!   `message`) its own create would have answered.

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use http::{HeaderMap, HeaderValue, StatusCode};
use serde_json::{Value, json};

use super::http::{respond, split_body};
use super::{bad_request, conditions};
use crate::api::http_parts::{Shared, json_response, read_body};
use crate::api::http_request::{RouteName, parse_schedule_body};
use crate::api::{ApiError, ApiState, with_timeout};
use crate::observe::trace::{self, TRACEPARENT};
use crate::proto::runtime as rv1;
use crate::seam::{self, Conditions, JobExtras, MAX_SCHEDULE_BATCH, untravelled_field};

impl ApiState {
    /// Creates each of `jobs` as [`ApiState::schedule_job_with`] would, with its answer (in
    /// order), stored together. `Err` only for a batch refused as a whole (too many jobs).
    pub async fn schedule_jobs(
        &self,
        jobs: Vec<(rv1::ScheduleJobRequest, JobExtras)>,
    ) -> Result<Vec<Result<(), ApiError>>, ApiError> {
        check_size(jobs.len())?;
        let mut outcomes = Vec::with_capacity(jobs.len());
        // Per job sent on: its slot, its name and whether it carries jobsd's settings.
        let mut sent = Vec::with_capacity(jobs.len());
        let mut requests = Vec::with_capacity(jobs.len());
        for (req, extras) in jobs {
            let checked = self
                .check_extras(&req, &extras)
                .and_then(|()| self.scheduler_request(req));
            match checked {
                Ok(request) => {
                    let jobsd_settings = untravelled_field(&extras).is_some();
                    sent.push((outcomes.len(), request.name.clone(), jobsd_settings));
                    requests.push((request, extras));
                    outcomes.push(Ok(()));
                }
                Err(e) => outcomes.push(Err(e)),
            }
        }
        if requests.is_empty() {
            return Ok(outcomes);
        }
        let scheduler = std::sync::Arc::clone(&self.scheduler);
        let answers = with_timeout(async move { scheduler.schedule_jobs(requests).await }).await;
        for (i, (slot, name, jobsd_settings)) in sent.into_iter().enumerate() {
            let answer = match &answers {
                Ok(each) => each.get(i).cloned().unwrap_or_else(|| {
                    Err(seam::Error::new(
                        tonic::Code::Internal,
                        "the scheduler answered fewer jobs than it was sent",
                    ))
                }),
                Err(e) => Err(e.clone()),
            };
            if let Err(e) = answer {
                outcomes[slot] = Err(self.schedule_error(&name, jobsd_settings, e));
            }
        }
        Ok(outcomes)
    }
}

/// Refuses a batch of more than [`MAX_SCHEDULE_BATCH`] jobs.
fn check_size(n: usize) -> Result<(), ApiError> {
    if n > MAX_SCHEDULE_BATCH {
        return Err(bad_request(format!(
            "jobs: at most {MAX_SCHEDULE_BATCH} per call, got {n}"
        )));
    }
    Ok(())
}

/// Refuses `Idempotency-Key` and `If-Match` on a batch: each applies to one job.
pub(super) fn refuse_conditions(given: Option<Conditions>) -> Result<(), ApiError> {
    match given.and_then(|c| c.first_header()) {
        Some(header) => Err(bad_request(format!(
            "{header} applies to one job: create the job alone to use it"
        ))),
        None => Ok(()),
    }
}

/// The routes, to merge into jobsd's router.
pub(super) fn routes() -> Router<Shared> {
    Router::new().route("/jobsd/v1/jobs:batch", post(create_many))
}

async fn create_many(State(state): State<Shared>, headers: HeaderMap, body: Body) -> Response {
    let traceparent = trace::valid(headers.get(TRACEPARENT).map(HeaderValue::as_bytes));
    respond(
        async {
            refuse_conditions(conditions::from_headers(&headers)?)?;
            let bytes = read_body(body, state.body_limit()).await?;
            let entries = entries_of(&bytes)?;
            check_size(entries.len())?;
            let mut names = Vec::with_capacity(entries.len());
            let mut parsed = Vec::with_capacity(entries.len());
            let mut jobs = Vec::with_capacity(entries.len());
            for (i, entry) in entries.into_iter().enumerate() {
                let (name, job) = parse_entry(&state, i, entry, traceparent.clone());
                names.push(name);
                match job {
                    Ok(job) => {
                        parsed.push(Ok(jobs.len()));
                        jobs.push(job);
                    }
                    Err(e) => parsed.push(Err(e)),
                }
            }
            let mut answers = state.schedule_jobs(jobs).await?.into_iter();
            let results: Vec<Value> = names
                .into_iter()
                .zip(parsed)
                .map(|(name, parsed)| {
                    let answer = match parsed {
                        Ok(_) => answers.next().unwrap_or(Ok(())),
                        Err(e) => Err(e),
                    };
                    result_json(name, answer)
                })
                .collect();
            Ok(json_response(json!({ "results": results }).to_string()))
        }
        .await,
    )
}

/// The `jobs` array of a batch body.
fn entries_of(bytes: &[u8]) -> Result<Vec<Value>, ApiError> {
    let body: Value =
        serde_json::from_slice(bytes).map_err(|e| bad_request(format!("body: {e}")))?;
    match body {
        Value::Object(mut body) => match body.remove("jobs") {
            Some(Value::Array(jobs)) => Ok(jobs),
            Some(_) => Err(bad_request("jobs: expected an array".into())),
            None => Err(bad_request("jobs: missing".into())),
        },
        _ => Err(bad_request(
            "body: expected an object with a \"jobs\" array".into(),
        )),
    }
}

/// Entry `i` of a batch: its name, and the create it asks for as
/// `POST /jobsd/v1/jobs/{name}` would read it (or why not).
fn parse_entry(
    state: &ApiState,
    i: usize,
    entry: Value,
    traceparent: Option<String>,
) -> (
    String,
    Result<(rv1::ScheduleJobRequest, JobExtras), ApiError>,
) {
    let Value::Object(mut fields) = entry else {
        return (
            String::new(),
            Err(bad_request(format!("jobs[{i}]: expected an object"))),
        );
    };
    let name = match fields.remove("name") {
        Some(Value::String(name)) => name,
        Some(_) => {
            let e = bad_request(format!("jobs[{i}].name: expected a string"));
            return (String::new(), Err(e));
        }
        None => String::new(),
    };
    let parsed = serde_json::to_vec(&fields)
        .map_err(|e| bad_request(format!("jobs[{i}]: {e}")))
        .and_then(|bytes| {
            let (rest, mut extras) = split_body(&bytes)?;
            let body = rest.as_deref().unwrap_or(&bytes);
            let req = parse_schedule_body(state, RouteName::new(name.clone()), body)?;
            extras.traceparent = traceparent;
            Ok((req, extras))
        });
    (name, parsed)
}

/// One job's entry of the answer.
fn result_json(name: String, answer: Result<(), ApiError>) -> Value {
    match answer {
        Ok(()) => json!({ "name": name, "status": StatusCode::NO_CONTENT.as_u16() }),
        Err(e) => {
            let (_, body) = e.http_body();
            let error = serde_json::from_slice::<Value>(&body)
                .unwrap_or_else(|_| json!({ "message": String::from_utf8_lossy(&body).trim() }));
            json!({ "name": name, "status": e.http_status().as_u16(), "error": error })
        }
    }
}
