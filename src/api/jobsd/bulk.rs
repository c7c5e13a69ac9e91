//! Pausing and resuming many jobs at once:
//!
//! - `POST /jobsd/v1/jobs:pause` with `{"prefix", "labels": {"k": "v"}, "label": "k=v" |
//!   ["k=v", …], "note", "all"}`, or the list route's query (`?prefix=&label=k=v&all=true`):
//!   the calling app's jobs with that name prefix and every one of those labels — exactly
//!   what `GET /jobsd/v1/jobs` with the same `prefix` and `label` lists — that are not
//!   paused yet are paused (as `…/{name}/pause` does each).
//! - `POST /jobsd/v1/jobs:resume`: the same selection (no note); the paused ones resume.
//!
//! Both answer `{"count", "names" (the first 100, in name order), "truncated"}`. A selection
//! with neither prefix nor label would take every job of the app: it is refused unless
//! `"all": true` says so. In remote mode each selected job is paused or resumed by the
//! replica that fires it; in front of a Dapr Scheduler both are refused (412), as a pause by
//! name is.

use std::collections::BTreeMap;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use http::Uri;
use serde_json::json;

use super::{MAX_PAUSE_NOTE, bad_request, view_error};
use crate::api::http_parts::{Shared, json_response, read_body};
use crate::api::http_request::query_params;
use crate::api::{ApiError, ApiState};
use crate::seam::{Bulk, MAX_BULK_NAMES, Selection};

/// A pause note within [`MAX_PAUSE_NOTE`] bytes, or a 400 saying so.
pub(super) fn check_note(note: &str) -> Result<(), ApiError> {
    if note.len() > MAX_PAUSE_NOTE {
        return Err(bad_request(format!(
            "note: {} bytes, at most {MAX_PAUSE_NOTE} are allowed",
            note.len()
        )));
    }
    Ok(())
}

/// A selection that takes everything only when `all` says so.
fn check_selection(selection: &Selection, all: bool) -> Result<(), ApiError> {
    if selection.is_everything() && !all {
        return Err(bad_request(
            "give a prefix or a label to select jobs; an empty selection would take every job \
             of the app (set \"all\": true for that)"
                .to_owned(),
        ));
    }
    Ok(())
}

impl ApiState {
    /// Pauses this app's jobs that `selection` takes and that are not paused yet.
    pub async fn pause_jobs(
        &self,
        selection: Selection,
        all: bool,
        note: String,
    ) -> Result<Bulk, ApiError> {
        check_note(&note)?;
        check_selection(&selection, all)?;
        self.scheduler
            .pausing()
            .map_err(view_error)?
            .pause_jobs(self.job_metadata(), selection, note)
            .await
            .map_err(view_error)
    }

    /// Resumes this app's paused jobs that `selection` takes.
    pub async fn resume_jobs(&self, selection: Selection, all: bool) -> Result<Bulk, ApiError> {
        check_selection(&selection, all)?;
        self.scheduler
            .pausing()
            .map_err(view_error)?
            .resume_jobs(self.job_metadata(), selection)
            .await
            .map_err(view_error)
    }
}

/// `"label"`: one `k=v` or a list of them.
#[derive(Debug, serde::Deserialize)]
#[serde(untagged)]
enum Labels {
    One(String),
    Many(Vec<String>),
}

/// The body of a bulk pause or resume (every member optional).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct BulkBody {
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    label: Option<Labels>,
    #[serde(default)]
    note: Option<String>,
    #[serde(default)]
    all: Option<bool>,
}

/// The selection, `all` and note of a bulk request: its body and its query together.
fn request_of(uri: &Uri, bytes: &[u8]) -> Result<(Selection, bool, Option<String>), ApiError> {
    let body: BulkBody = if bytes.iter().all(u8::is_ascii_whitespace) {
        BulkBody::default()
    } else {
        serde_json::from_slice(bytes).map_err(|e| bad_request(format!("body: {e}")))?
    };
    let mut selection = Selection::default();
    let mut all = body.all.unwrap_or(false);
    let mut prefixes = Vec::new();
    for (key, value) in query_params(uri.query().unwrap_or_default())? {
        match key.as_str() {
            "prefix" => prefixes.push(value),
            "label" => selection.labels.push(super::http::label_pair(&value)?),
            "all" => {
                all |= value
                    .parse::<bool>()
                    .map_err(|_| bad_request(format!("all: {value:?} is not true or false")))?;
            }
            _ => {}
        }
    }
    prefixes.extend(body.prefix);
    if prefixes.windows(2).any(|w| w[0] != w[1]) {
        return Err(bad_request(format!(
            "prefix: given twice, differently ({:?} and {:?})",
            prefixes[0], prefixes[1]
        )));
    }
    selection.name_prefix = prefixes.pop().unwrap_or_default();
    selection.labels.extend(body.labels.unwrap_or_default());
    match body.label {
        Some(Labels::One(pair)) => selection.labels.push(super::http::label_pair(&pair)?),
        Some(Labels::Many(pairs)) => {
            for pair in pairs {
                selection.labels.push(super::http::label_pair(&pair)?);
            }
        }
        None => {}
    }
    Ok((selection, all, body.note))
}

/// Whether more jobs changed than `names` lists (at most [`MAX_BULK_NAMES`]).
pub(super) fn truncated(bulk: &Bulk) -> bool {
    bulk.count > u64::try_from(bulk.names.len().min(MAX_BULK_NAMES)).unwrap_or(u64::MAX)
}

/// `{"count", "names", "truncated"}`.
fn bulk_json(bulk: &Bulk) -> Response {
    json_response(
        json!({
            "count": bulk.count,
            "names": bulk.names,
            "truncated": truncated(bulk),
        })
        .to_string(),
    )
}

/// The routes, to merge into jobsd's router.
pub(super) fn routes() -> Router<Shared> {
    Router::new()
        .route("/jobsd/v1/jobs:pause", post(pause))
        .route("/jobsd/v1/jobs:resume", post(resume))
}

/// `POST /jobsd/v1/jobs:pause`.
async fn pause(State(state): State<Shared>, uri: Uri, body: Body) -> Response {
    super::http::respond(
        async {
            let bytes = read_body(body, state.body_limit()).await?;
            let (selection, all, note) = request_of(&uri, &bytes)?;
            let bulk = state
                .pause_jobs(selection, all, note.unwrap_or_default())
                .await?;
            Ok(bulk_json(&bulk))
        }
        .await,
    )
}

/// `POST /jobsd/v1/jobs:resume`.
async fn resume(State(state): State<Shared>, uri: Uri, body: Body) -> Response {
    super::http::respond(
        async {
            let bytes = read_body(body, state.body_limit()).await?;
            let (selection, all, note) = request_of(&uri, &bytes)?;
            if note.is_some() {
                return Err(bad_request("note: only a pause takes a note".to_owned()));
            }
            Ok(bulk_json(&state.resume_jobs(selection, all).await?))
        }
        .await,
    )
}
