//! daprd's HTTP actor routes (`pkg/api/http/actors.go`): reminders, timers, method calls,
//! and the state routes (answered with daprd's error for a sidecar without an actor state
//! store).

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderMap, StatusCode, Uri};

use super::{body, errors, names, reminder_json};
use crate::actors::reminders::data_from_json;
use crate::actors::{ActorRef, MethodCall, NewReminder, NewTimer};
use crate::api::http_parts::{API_TOKEN_HEADER, Shared, json_response, read_body};
use crate::api::{ApiError, ApiState};
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
            post(no_state).put(no_state),
        )
        .route(
            "/v1.0/actors/{actor_type}/{actor_id}/state/{key}",
            get(no_state),
        )
}

/// `{actor_type}/{actor_id}/…/{name}` of a route.
type Named = Path<(String, String, String)>;

fn respond(result: Result<Response, ApiError>) -> Response {
    result.unwrap_or_else(IntoResponse::into_response)
}

/// Reads and decodes a reminder or timer body.
async fn actor_body(state: &ApiState, body: Body) -> Result<body::ActorBody, ApiError> {
    let bytes = read_body(body, state.body_limit()).await?;
    body::parse(&bytes).map_err(ApiError::malformed_request)
}

/// `POST|PUT …/reminders/{name}`: 204.
async fn register_reminder(
    State(state): State<Shared>,
    Path((actor_type, actor_id, name)): Named,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let traceparent = trace::valid(headers.get(TRACEPARENT).map(|v| v.as_bytes()));
    respond(
        async {
            let b = actor_body(&state, body).await?;
            state
                .register_reminder(NewReminder {
                    actor: ActorRef::new(&actor_type, &actor_id),
                    name,
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
async fn get_reminder(
    State(state): State<Shared>,
    Path((actor_type, actor_id, name)): Named,
) -> Response {
    respond(
        async {
            let reminder = state
                .get_reminder(&ActorRef::new(&actor_type, &actor_id), &name)
                .await?;
            Ok(json_response(reminder_json(&reminder)))
        }
        .await,
    )
}

/// `DELETE …/reminders/{name}`: 204, also when there was none.
async fn unregister_reminder(
    State(state): State<Shared>,
    Path((actor_type, actor_id, name)): Named,
) -> Response {
    respond(
        async {
            state
                .unregister_reminder(&ActorRef::new(&actor_type, &actor_id), &name)
                .await?;
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        .await,
    )
}

/// `POST|PUT …/timers/{name}`: 204.
async fn register_timer(
    State(state): State<Shared>,
    Path((actor_type, actor_id, name)): Named,
    body: Body,
) -> Response {
    respond(
        async {
            let b = actor_body(&state, body).await?;
            state.register_timer(NewTimer {
                actor: ActorRef::new(&actor_type, &actor_id),
                name,
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
async fn unregister_timer(
    State(state): State<Shared>,
    Path((actor_type, actor_id, name)): Named,
) -> StatusCode {
    state.unregister_timer(&ActorRef::new(&actor_type, &actor_id), &name);
    StatusCode::NO_CONTENT
}

/// The actor state routes: 500 `ERR_ACTOR_RUNTIME_NOT_FOUND` (jobsd keeps no actor state).
async fn no_state() -> Response {
    errors::runtime_not_found().into_response()
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
    Path((actor_type, actor_id, method)): Named,
    uri: Uri,
    mut headers: HeaderMap,
    body: Body,
) -> Response {
    respond(
        async {
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
                if !NOT_FORWARDED.contains(&name.as_str()) {
                    response.headers_mut().append(name, value.clone());
                }
            }
            Ok(response)
        }
        .await,
    )
}
