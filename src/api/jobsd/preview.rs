//! `POST /jobsd/v1/preview[?name=&count=]` and `jobsd.v1.Jobs/Preview`: a job body as
//! `POST /jobsd/v1/jobs/{name}` takes it (same parsing, validation and errors: the create's
//! own code), plus `"count"` (default 10, at most 1000). The answer is the job as jobsd's GET
//! would show it once created, plus `"zone"` and `"ticks"`: its next fire times in UTC and in
//! the schedule's zone, with notes where a daylight-saving gap or repeat changes a tick.
//! Nothing is stored; an existing job of the name is no error. The name (`?name=`, default
//! `preview`) is checked as a create's and chooses the job's jitter offset.
//!
//! `GET /jobsd/v1/jobs/{name}/next[?count=]` and `jobsd.v1.Jobs/NextFireTimes`: a stored job's
//! next fire times in the same form, from its progress (embedded scheduler only).

use axum::Router;
use axum::body::Body;
use axum::extract::Path;
use axum::extract::State;
use axum::response::Response;
use axum::routing::{get, post};
use chrono::{DateTime, SecondsFormat, Utc};
use http::Uri;
use serde_json::{Value, json};

use super::{bad_request, json};
use crate::api::http_parts::{Shared, json_response, read_body};
use crate::api::http_request::{RouteName, parse_schedule_body, query_params};
use crate::api::{ApiError, ApiState};
use crate::proto::jobsd_api as jv1;
use crate::proto::runtime as rv1;
use crate::schedule::preview::{DEFAULT_COUNT, MAX_COUNT, PreviewTick};
use crate::seam::views_wire::stamp;
use crate::seam::{self, JobExtras, JobPreview, NextFireTimes};

/// The name a preview checks when none is given.
pub(super) const DEFAULT_NAME: &str = "preview";

impl ApiState {
    /// Checks a create of `req` with `extras` exactly as [`ApiState::schedule_job_with`] does
    /// and previews its first `count` ticks (1 to [`MAX_COUNT`]); stores nothing.
    pub async fn preview_job(
        &self,
        req: rv1::ScheduleJobRequest,
        extras: JobExtras,
        count: usize,
    ) -> Result<JobPreview, ApiError> {
        check_count(count)?;
        self.check_extras(&req, &extras)?;
        let now = self.clock.now();
        self.submit_job(req, extras, move |_, request, extras| async move {
            seam::preview_job(request, extras, now, count)
        })
        .await
    }

    /// The next `count` fire times (1 to [`MAX_COUNT`]) of this app's job `name`, from its
    /// stored progress.
    pub async fn next_fire_times(
        &self,
        name: String,
        count: usize,
    ) -> Result<NextFireTimes, ApiError> {
        check_count(count)?;
        let metadata = self.job_metadata();
        self.scheduler
            .views()
            .map_err(super::view_error)?
            .next_fire_times(metadata, name, count)
            .await
            .map_err(super::view_error)
    }
}

/// 400 unless `count` is 1 to [`MAX_COUNT`].
fn check_count(count: usize) -> Result<(), ApiError> {
    if (1..=MAX_COUNT).contains(&count) {
        Ok(())
    } else {
        Err(bad_request(format!(
            "count: {count} is not between 1 and {MAX_COUNT}"
        )))
    }
}

/// The `"count"` member of a preview body, or `?count=`, or the default.
fn count_of(body: &[u8], query: &[(String, String)]) -> Result<usize, ApiError> {
    let given = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("count").cloned());
    match given {
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| bad_request(format!("count: {n} is not a whole number"))),
        Some(other) => Err(bad_request(format!("count: {other} is not a number"))),
        None => match query.iter().find(|(k, _)| k == "count") {
            Some((_, v)) => v
                .parse()
                .map_err(|_| bad_request(format!("count: {v:?} is not a valid number"))),
            None => Ok(DEFAULT_COUNT),
        },
    }
}

/// The routes, to merge into jobsd's router.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/jobsd/v1/preview", post(preview))
        .route("/jobsd/v1/jobs/{name}/next", get(next))
}

/// `GET /jobsd/v1/jobs/{name}/next[?count=]`: `{"name", "zone", "paused", "ticks"}`.
async fn next(State(state): State<Shared>, Path(name): Path<String>, uri: Uri) -> Response {
    super::http::respond(
        async {
            let query = query_params(uri.query().unwrap_or_default())?;
            let count = count_of(b"", &query)?;
            let next = state.next_fire_times(name.clone(), count).await?;
            Ok(json_response(
                json!({
                    "name": name,
                    "zone": next.preview.zone,
                    "paused": next.paused,
                    "ticks": ticks_json(&next.preview.ticks),
                })
                .to_string(),
            ))
        }
        .await,
    )
}

/// `POST /jobsd/v1/preview`.
async fn preview(State(state): State<Shared>, uri: Uri, body: Body) -> Response {
    super::http::respond(
        async {
            let bytes = read_body(body, state.body_limit()).await?;
            let query = query_params(uri.query().unwrap_or_default())?;
            let name = query
                .iter()
                .find(|(k, _)| k == "name")
                .map_or(DEFAULT_NAME.to_owned(), |(_, v)| v.clone());
            let count = count_of(&bytes, &query)?;
            let (rest, extras) = super::http::split_body(&bytes)?;
            let req = parse_schedule_body(
                &state,
                RouteName::new(name),
                rest.as_deref().unwrap_or(&bytes),
            )?;
            let preview = state.preview_job(req, extras, count).await?;
            Ok(json_response(preview_json(&preview)?))
        }
        .await,
    )
}

fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// Ticks as their JSON objects.
fn ticks_json(ticks: &[PreviewTick]) -> Vec<Value> {
    ticks
        .iter()
        .map(|t| {
            json!({
                "time": time(t.time),
                "fireTime": time(t.fire_time),
                "local": t.local,
                "abbreviation": t.abbreviation,
                "notes": t.notes,
            })
        })
        .collect()
}

/// jobsd's GET body of the job, plus `"zone"` and `"ticks"`.
fn preview_json(p: &JobPreview) -> Result<String, ApiError> {
    let ticks = ticks_json(&p.preview.ticks);
    let view = json::view(&p.view)?;
    let more = json!({ "zone": p.preview.zone, "ticks": ticks }).to_string();
    // The view's object, then the preview's members.
    Ok(format!("{},{}", &view[..view.len() - 1], &more[1..]))
}

/// A preview's ticks as their `jobsd.v1` messages.
pub(super) fn ticks_to_wire(ticks: Vec<PreviewTick>) -> Vec<jv1::PreviewTick> {
    ticks
        .into_iter()
        .map(|t| jv1::PreviewTick {
            time: stamp(Some(t.time)),
            fire_time: stamp(Some(t.fire_time)),
            local: t.local,
            abbreviation: t.abbreviation,
            notes: t.notes,
        })
        .collect()
}
