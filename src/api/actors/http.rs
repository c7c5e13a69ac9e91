//! daprd's HTTP actor routes (`pkg/api/http/actors.go`): reminders, timers, method calls,
//! and actor state.

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderMap, StatusCode, Uri};

use super::errors::ReminderOp;
use super::{body, errors, names, reminder_json, state as actor_state};
use crate::actors::reminders::data_from_json;
use crate::actors::{ActorRef, MethodCall, NewReminder, NewTimer};
use crate::api::http_parts::{
    API_TOKEN_HEADER, STREAM_TOO_LARGE, Shared, json_response, read_body, read_body_as_daprd,
};
use crate::api::{ApiError, ApiState};
use crate::go;
use crate::observe::trace::{self, TRACEPARENT};

/// The actor routes, to merge into the API router.
pub fn routes() -> Router<Shared> {
    Router::new()
        .route(
            "/v1.0/actors/{actor_type}/{actor_id}/method/{method}",
            get(invoke).post(invoke).put(invoke).delete(invoke),
        )
        .route(
            "/v1.0/actors/{actor_type}/{actor_id}/reminders/{name}",
            post(register_reminder)
                .put(register_reminder)
                .get(get_reminder)
                .delete(unregister_reminder),
        )
        .route(
            "/v1.0/actors/{actor_type}/{actor_id}/timers/{name}",
            post(register_timer)
                .put(register_timer)
                .delete(unregister_timer),
        )
        .route(
            "/v1.0/actors/{actor_type}/{actor_id}/state",
            post(state_transaction).put(state_transaction),
        )
        .route(
            "/v1.0/actors/{actor_type}/{actor_id}/state/{key}",
            get(get_state),
        )
}

/// The `{actorType}`, `{actorId}` and trailing `{name}` (or `{method}`) of an actor route as
/// daprd reads them: chi's segments of the escaped path, each `url.QueryUnescape`d (`+` is
/// a space); Go keeps bytes that are not UTF-8, which only fail later, at the Scheduler.
struct ActorPath {
    /// The actor type (U+FFFD for bytes that are not UTF-8).
    actor_type: String,
    /// The actor id (likewise).
    actor_id: String,
    /// The reminder or timer name, or the method (likewise).
    name: String,
    /// Whether all three were UTF-8.
    utf8: bool,
}

impl ActorPath {
    /// Reads `/v1.0/actors/{actorType}/{actorId}/<kind>/{name}`. An empty type or id is no
    /// route of daprd's: 404 `ERR_DIRECT_INVOKE`, as service invocation answers.
    fn of(uri: &Uri) -> Result<Self, ApiError> {
        let mut segments = uri.path().split('/').skip(3);
        let actor_type = segments.next().unwrap_or_default();
        let actor_id = segments.next().unwrap_or_default();
        let name = segments.nth(1).unwrap_or_default();
        if actor_type.is_empty() || actor_id.is_empty() {
            return Err(ApiError::no_route());
        }
        let mut utf8 = true;
        let mut param = |key: &str, raw: &str| -> Result<String, ApiError> {
            let bytes =
                go::url::query_unescape(raw).map_err(|e| ApiError::unescape_param(key, e))?;
            Ok(String::from_utf8(bytes).unwrap_or_else(|e| {
                utf8 = false;
                String::from_utf8_lossy(e.as_bytes()).into_owned()
            }))
        };
        Ok(ActorPath {
            actor_type: param("actorType", actor_type)?,
            actor_id: param("actorId", actor_id)?,
            name: param("name", name)?,
            utf8,
        })
    }

    fn actor(&self) -> ActorRef {
        ActorRef::new(&self.actor_type, &self.actor_id)
    }
}

fn respond(result: Result<Response, ApiError>) -> Response {
    result.unwrap_or_else(IntoResponse::into_response)
}

/// Reads and decodes a timer body, or a reminder body (`reminder`: daprd reads those its
/// own way, see [`body::parse_reminder`]).
async fn actor_body(
    state: &ApiState,
    body: Body,
    reminder: bool,
) -> Result<body::ActorBody, ApiError> {
    // daprd's json.Decoder reads through the limited stream: its error is a decode error.
    let bytes = read_body_as_daprd(body, state.body_limit())
        .await?
        .ok_or_else(|| ApiError::malformed_request(STREAM_TOO_LARGE))?;
    let parse = if reminder {
        body::parse_reminder
    } else {
        body::parse
    };
    parse(&bytes).map_err(ApiError::malformed_request)
}

/// `POST|PUT …/reminders/{name}`: 204.
async fn register_reminder(
    State(state): State<Shared>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let traceparent = trace::valid(headers.get(TRACEPARENT).map(|v| v.as_bytes()));
    respond(
        async {
            let path = ActorPath::of(&uri)?;
            let b = actor_body(&state, body, true).await?;
            if !path.utf8 {
                let period = Some(b.period.as_deref());
                return Err(state
                    .reminder_not_utf8(ReminderOp::Create, &path.actor_type, &path.name, period)
                    .await);
            }
            state
                .register_reminder(NewReminder {
                    actor: path.actor(),
                    name: path.name,
                    due_time: b.due_time,
                    period: b.period,
                    ttl: b.ttl,
                    data: b.data.as_deref().and_then(data_from_json),
                    failure_policy: b.failure_policy,
                    overwrite: b.overwrite,
                    traceparent,
                })
                .await?;
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        .await,
    )
}

/// `GET …/reminders/{name}`: 200 with daprd's reminder JSON.
async fn get_reminder(State(state): State<Shared>, uri: Uri) -> Response {
    respond(
        async {
            let path = ActorPath::of(&uri)?;
            if !path.utf8 {
                return Err(state
                    .reminder_not_utf8(ReminderOp::Get, &path.actor_type, &path.name, None)
                    .await);
            }
            let reminder = state.get_reminder(&path.actor(), &path.name).await?;
            Ok(json_response(reminder_json(&reminder)))
        }
        .await,
    )
}

/// `DELETE …/reminders/{name}`: 204, also when there was none.
async fn unregister_reminder(State(state): State<Shared>, uri: Uri) -> Response {
    respond(
        async {
            let path = ActorPath::of(&uri)?;
            if !path.utf8 {
                return Err(state
                    .reminder_not_utf8(ReminderOp::Delete, &path.actor_type, &path.name, None)
                    .await);
            }
            state.unregister_reminder(&path.actor(), &path.name).await?;
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        .await,
    )
}

/// `POST|PUT …/timers/{name}`: 204.
async fn register_timer(State(state): State<Shared>, uri: Uri, body: Body) -> Response {
    respond(
        async {
            let path = ActorPath::of(&uri)?;
            let b = actor_body(&state, body, false).await?;
            state.register_timer(NewTimer {
                actor: path.actor(),
                name: path.name,
                due_time: b.due_time.unwrap_or_default(),
                period: b.period.unwrap_or_default(),
                ttl: b.ttl.unwrap_or_default(),
                callback: b.callback.unwrap_or_default(),
                data: b.data,
            })?;
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        .await,
    )
}

/// `DELETE …/timers/{name}`: always 204.
async fn unregister_timer(State(state): State<Shared>, uri: Uri) -> Response {
    respond(ActorPath::of(&uri).map(|path| {
        state.unregister_timer(&path.actor(), &path.name);
        StatusCode::NO_CONTENT.into_response()
    }))
}

/// `POST|PUT …/state`: a transaction of upserts and deletes, 204.
async fn state_transaction(State(state): State<Shared>, uri: Uri, body: Body) -> Response {
    respond(
        async {
            let path = ActorPath::of(&uri)?;
            ApiState::reject_internal_type(&path.actor_type)?;
            let bytes = read_body_as_daprd(body, state.body_limit())
                .await?
                .ok_or_else(|| ApiError::malformed_request(STREAM_TOO_LARGE))?;
            let ops =
                actor_state::parse_transaction(&bytes).map_err(ApiError::malformed_request)?;
            let changes = ops.into_iter().map(actor_state::change_of).collect();
            state
                .actor_state_transaction(&path.actor(), changes)
                .await?;
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        .await,
    )
}

/// `GET …/state/{key}`: the value as stored (200, `application/json`), or 204 when the key
/// holds nothing.
async fn get_state(State(state): State<Shared>, uri: Uri) -> Response {
    respond(
        async {
            let path = ActorPath::of(&uri)?;
            let value = state.get_actor_state(&path.actor(), &path.name).await?;
            if value.is_empty() {
                return Ok(StatusCode::NO_CONTENT.into_response());
            }
            Ok(([(http::header::CONTENT_TYPE, "application/json")], value).into_response())
        }
        .await,
    )
}

/// Request headers not handed on to the app: hop-by-hop ones, the length (recomputed), the
/// host and the caller's API token.
const NOT_FORWARDED: [&str; 9] = [
    "host",
    "content-length",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "upgrade",
    "proxy-connection",
    API_TOKEN_HEADER,
];

/// `GET|POST|PUT|DELETE …/method/{method}`: the app's `PUT /actors/…/method/{method}` in
/// the actor's turn; a 200 (or an answer with `X-DaprErrorResponseHeader`) comes back with
/// the app's status, headers and body.
async fn invoke(
    State(state): State<Shared>,
    uri: Uri,
    mut headers: HeaderMap,
    body: Body,
) -> Response {
    respond(
        async {
            let ActorPath {
                actor_type,
                actor_id,
                name: method,
                ..
            } = ActorPath::of(&uri)?;
            for (param, value) in [("actorType", &actor_type), ("actorId", &actor_id)] {
                names::validate(value)
                    .map_err(|e| errors::bad_request(format!("invalid {param}: {e}")))?;
            }
            let body = read_body(body, state.body_limit()).await?;
            for name in NOT_FORWARDED {
                headers.remove(name);
            }
            let answer = state
                .invoke_actor(MethodCall {
                    actor: ActorRef::new(&actor_type, &actor_id),
                    method,
                    query: uri.query().map(str::to_owned),
                    headers,
                    body,
                })
                .await?;
            let mut response = Response::new(Body::from(answer.body));
            *response.status_mut() = answer.status;
            for (name, value) in &answer.headers {
                if !NOT_FORWARDED.contains(&name.as_str()) && name != http::header::CONTENT_TYPE {
                    response.headers_mut().append(name, value.clone());
                }
            }
            // daprd sets the app's first content type, and `application/json` when it gave
            // none (`respondWithData`).
            let content_type = answer
                .headers
                .get(http::header::CONTENT_TYPE)
                .filter(|v| !v.is_empty())
                .cloned()
                .unwrap_or(http::HeaderValue::from_static("application/json"));
            response
                .headers_mut()
                .insert(http::header::CONTENT_TYPE, content_type);
            Ok(response)
        }
        .await,
    )
}
