//! Concurrency rules by key on jobsd's routes (`policy.concurrencyKey` of app jobs):
//!
//! - `GET /jobsd/v1/concurrency`: `{"rules": [{"key", "limit"}], "keys": [{"key", "rule",
//!   "limit", "inFlight", "waiting"}]}`: the app's rules, and the keys with executions out or
//!   waiting now (over every replica).
//! - `PUT /jobsd/v1/concurrency/{key}` with `{"limit": N}`: sets the rule of one key, or of
//!   every key with a prefix when `{key}` ends with `*`; 200 with the rule.
//! - `GET /jobsd/v1/concurrency/{key}`: one key as it stands: the rule that covers it (if
//!   any), out and waiting.
//! - `DELETE /jobsd/v1/concurrency/{key}`: the rule; 204, or 404
//!   `ERR_CONCURRENCY_RULE_NOT_FOUND`.

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::StatusCode;
use serde_json::{Value, json};

use super::{bad_request, route_error};
use crate::api::http_parts::{Shared, json_response, read_body};
use crate::api::{ApiError, ApiState};
use crate::jobs::concurrency::{ConcurrencyView, KeyState, Rule, Rules};

/// The routes of this file.
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/jobsd/v1/concurrency", get(list))
        .route(
            "/jobsd/v1/concurrency/{key}",
            get(get_key).put(put_rule).delete(delete_rule),
        )
}

fn error(err: crate::seam::Error) -> ApiError {
    route_error(err, "ERR_CONCURRENCY_RULE_NOT_FOUND", "ERR_JOBSD_BUSY")
}

/// `{"limit": N}`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Limit {
    limit: u32,
}

impl ApiState {
    /// The app's rules and the keys out or waiting.
    pub async fn concurrency_view(&self) -> Result<ConcurrencyView, ApiError> {
        let scheduler = std::sync::Arc::clone(&self.scheduler);
        scheduler
            .concurrency()
            .map_err(error)?
            .concurrency_view(self.job_metadata())
            .await
            .map_err(error)
    }

    /// Sets a rule of the app.
    pub async fn set_concurrency_rule(&self, rule: Rule) -> Result<(), ApiError> {
        let scheduler = std::sync::Arc::clone(&self.scheduler);
        scheduler
            .concurrency()
            .map_err(error)?
            .set_concurrency_rule(self.job_metadata(), rule)
            .await
            .map_err(error)
    }

    /// Deletes a rule of the app; whether there was one.
    pub async fn delete_concurrency_rule(&self, key: String) -> Result<bool, ApiError> {
        let scheduler = std::sync::Arc::clone(&self.scheduler);
        scheduler
            .concurrency()
            .map_err(error)?
            .delete_concurrency_rule(self.job_metadata(), key)
            .await
            .map_err(error)
    }
}

/// A rule as JSON.
fn rule_json(rule: &Rule) -> Value {
    json!({"key": rule.key, "limit": rule.limit})
}

/// A key's state as JSON.
fn key_json(state: &KeyState) -> Value {
    json!({
        "key": state.key,
        "rule": state.rule.as_ref().map(|r| r.0.clone()),
        "limit": state.rule.as_ref().map(|r| r.1),
        "inFlight": state.in_flight,
        "waiting": state.waiting,
    })
}

/// The view as JSON.
pub fn view_json(view: &ConcurrencyView) -> Value {
    json!({
        "rules": view.rules.iter().map(rule_json).collect::<Vec<_>>(),
        "keys": view.keys.iter().map(key_json).collect::<Vec<_>>(),
    })
}

async fn list(State(state): State<Shared>) -> Response {
    match state.concurrency_view().await {
        Ok(view) => json_response(view_json(&view).to_string()),
        Err(e) => e.into_response(),
    }
}

async fn get_key(State(state): State<Shared>, Path(key): Path<String>) -> Response {
    let view = match state.concurrency_view().await {
        Ok(view) => view,
        Err(e) => return e.into_response(),
    };
    let state = view
        .keys
        .iter()
        .find(|k| k.key == key)
        .cloned()
        .unwrap_or_else(|| KeyState {
            rule: Rules::new(view.rules.clone()).resolve(&key),
            key,
            in_flight: 0,
            waiting: 0,
        });
    json_response(key_json(&state).to_string())
}

async fn put_rule(State(state): State<Shared>, Path(key): Path<String>, body: Body) -> Response {
    let answer = async {
        let bytes = read_body(body, state.body_limit()).await?;
        let Limit { limit } =
            serde_json::from_slice(&bytes).map_err(|e| bad_request(format!("body: {e}")))?;
        let rule = Rule { key, limit };
        state.set_concurrency_rule(rule.clone()).await?;
        Ok::<_, ApiError>(json_response(rule_json(&rule).to_string()))
    };
    answer.await.unwrap_or_else(IntoResponse::into_response)
}

async fn delete_rule(State(state): State<Shared>, Path(key): Path<String>) -> Response {
    match state.delete_concurrency_rule(key.clone()).await {
        Ok(true) => StatusCode::NO_CONTENT.into_response(),
        Ok(false) => ApiError::Legacy {
            code: tonic::Code::NotFound,
            http: StatusCode::NOT_FOUND,
            error_code: "ERR_CONCURRENCY_RULE_NOT_FOUND",
            message: format!("no concurrency rule for key {key:?}"),
        }
        .into_response(),
        Err(e) => e.into_response(),
    }
}
