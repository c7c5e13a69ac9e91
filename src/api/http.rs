//! daprd's HTTP Jobs API on axum: `POST/GET/DELETE /v1.0-alpha1/jobs/{name}`,
//! `/v1.0/jobs/{name}` and `/v1.0/schedule/jobs/{name}`, the health and metadata routes the
//! SDKs call, and one extension: `GET /v1.0/jobs[?prefix=]` lists this app's jobs.
//!
//! Behaviour follows daprd (`pkg/api/http`): paths are cleaned like chi's
//! `CleanPathMiddleware`, the `{name}` segment is `url.QueryUnescape`d (so `+` is a space),
//! `dapr-api-token` is enforced on everything but the health routes, bodies are protojson,
//! errors are Dapr's, a body over `--max-body-size` too (400 `stream too large`); jobsd's own
//! routes answer that with a 413 `ERR_REQUEST_BODY_TOO_LARGE`.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use tower::ServiceExt;

use super::error::ApiError;
pub use super::http_parts::API_TOKEN_HEADER;
use super::http_parts::{STREAM_TOO_LARGE, Shared, json_response, read_body_as_daprd};
use super::http_request::{
    RouteName, invalid_utf8_marshal_error, parse_schedule_request, query_param,
};
use super::{ApiState, json};
use crate::go;
use crate::observe::trace::{self, TRACEPARENT};

/// The three route prefixes daprd serves jobs under.
const JOB_ROUTES: [&str; 3] = [
    "/v1.0-alpha1/jobs/{name}",
    "/v1.0/jobs/{name}",
    "/v1.0/schedule/jobs/{name}",
];

/// The HTTP API as an axum router (state applied). Serve it with HTTP/1.1 and h2c.
pub fn router(state: ApiState) -> Router {
    let state = Arc::new(state);
    let mut routes = Router::new();
    for path in JOB_ROUTES {
        routes = routes.route(path, post(schedule_job).get(get_job).delete(delete_job));
    }
    let routes = routes
        .route("/v1.0/jobs", get(list_jobs))
        .route("/v1.0/healthz", get(healthz))
        .route("/v1.0/healthz/outbound", get(healthz_outbound))
        .route("/v1.0/metadata", get(metadata))
        .merge(super::actors::http::routes())
        // A method daprd's routes do not serve falls through its router to service
        // invocation, as an unknown path does (jobsd's own routes answer 405).
        .method_not_allowed_fallback(not_found)
        .merge(super::jobsd::routes())
        .with_state(Arc::clone(&state));
    // A path that matches nothing is cleaned (`//`, `.`, `..`, trailing `/`) and routed
    // once more, as chi's CleanPath and StripSlashes middlewares do before daprd routes.
    let strict = routes.clone().fallback(not_found);
    let routes = routes.fallback(move |req: Request| route_cleaned(strict.clone(), req));
    // The token is fixed for the router's life: without one the check is left out rather
    // than run as a no-op on every request. It runs before routing, as chi's middlewares do
    // (`Router::layer` would wrap each route inside axum's method dispatch, whose `Allow`
    // header then lands on the 401).
    let auth = state
        .required_token()
        .is_some()
        .then(|| middleware::from_fn_with_state(state, authenticate));
    // Around the whole router, as Go's server and daprd's tracing middleware are (a refused
    // token's answer has a traceparent too).
    Router::new().fallback_service(
        tower::ServiceBuilder::new()
            .layer(middleware::from_fn(go_request_target))
            .layer(middleware::from_fn(answer_traceparent))
            .option_layer(auth)
            .layer(middleware::from_fn(dapr_routing))
            .service(routes),
    )
}

/// What Go's HTTP server answers before any handler to a request target whose path has a
/// `%` not followed by two hex digits (`url.ParseRequestURI` fails): its bare 400, which
/// closes the connection, with no traceparent (daprd's middlewares never ran).
async fn go_request_target(request: Request, next: Next) -> Response {
    if go::url::valid_path_escapes(request.uri().path()) {
        return next.run(request).await;
    }
    let mut response = Response::new(Body::from("400 Bad Request"));
    *response.status_mut() = StatusCode::BAD_REQUEST;
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    if request.version() <= http::Version::HTTP_11 {
        headers.insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// Routing as daprd's chi router does it, where axum's differs: a path with a `.` or `..`
/// segment is routed cleaned (chi's `CleanPath`; `/v1.0/jobs/..` is `/v1.0`, no route),
/// and `HEAD` matches none of daprd's routes (axum would answer it as `GET`); jobsd's own
/// `/jobsd/…` routes keep axum's `HEAD`.
async fn dapr_routing(mut request: Request, next: Next) -> Response {
    let path = request.uri().path();
    if path.starts_with("/jobsd/") {
        return next.run(request).await;
    }
    if request.method() == Method::HEAD {
        return not_found().await;
    }
    if path
        .split('/')
        .any(|segment| segment == "." || segment == "..")
    {
        let cleaned = go::path::clean_path(path);
        let path_and_query = match request.uri().query() {
            Some(q) => format!("{cleaned}?{q}"),
            None => cleaned,
        };
        let mut parts = request.uri().clone().into_parts();
        parts.path_and_query = path_and_query.parse().ok();
        match Uri::from_parts(parts) {
            Ok(uri) => *request.uri_mut() = uri,
            Err(_) => return not_found().await,
        }
    }
    next.run(request).await
}

/// daprd's HTTP tracing middleware without a tracing configuration: every answer but the
/// health routes' carries a `traceparent`, the caller's when it sent a valid one (its span
/// context passes through daprd's non-recording span unchanged), else the all-zero one.
async fn answer_traceparent(request: Request, next: Next) -> Response {
    if request.uri().path().contains("/healthz") {
        let mut response = next.run(request).await;
        drop_allow(&mut response);
        return response;
    }
    let value = request
        .headers()
        .get(TRACEPARENT)
        .and_then(|v| v.to_str().ok())
        .and_then(trace::TraceParent::parse)
        .map_or_else(
            || HeaderValue::from_static(NO_TRACEPARENT),
            |tp| tp.header_value(),
        );
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.entry(TRACEPARENT).or_insert(value);
    drop_allow(&mut response);
    response
}

/// axum names the methods a route serves (`Allow`) on what its method fallback answers
/// (daprd's 404 below); daprd names none.
fn drop_allow(response: &mut Response) {
    if response.status() == StatusCode::NOT_FOUND {
        response.headers_mut().remove(http::header::ALLOW);
    }
}

/// The `traceparent` of an empty span context, as daprd writes it.
const NO_TRACEPARENT: &str = "00-00000000000000000000000000000000-0000000000000000-00";

/// daprd's public port (`--dapr-public-port`): only the health routes, never behind the
/// API token (as on the API port, where they are exempt).
pub fn public_router(state: ApiState) -> Router {
    Router::new()
        .route("/v1.0/healthz", get(healthz))
        .route("/v1.0/healthz/outbound", get(healthz_outbound))
        .with_state(Arc::new(state))
}

/// daprd's `APITokenAuthMiddleware`: with a token configured, every request but
/// `GET /v1.0/healthz[/outbound]` must carry it.
async fn authenticate(State(state): State<Shared>, req: Request, next: Next) -> Response {
    if let Some(token) = state.required_token() {
        let given = req
            .headers()
            .get(API_TOKEN_HEADER)
            .map_or(&b""[..], HeaderValue::as_bytes);
        if !constant_time_eq(given, token.as_bytes())
            && !exempt_from_token(req.method(), req.uri().path())
        {
            return ApiError::invalid_api_token().into_response();
        }
    }
    next.run(req).await
}

fn exempt_from_token(method: &Method, path: &str) -> bool {
    method == Method::GET
        && matches!(
            path.trim_matches('/'),
            "v1.0/healthz" | "v1.0/healthz/outbound"
        )
}

/// The token comparison of every API route ([`crate::serve::token_matches`]).
pub(crate) use crate::serve::token_matches as constant_time_eq;

async fn route_cleaned(strict: Router, mut req: Request) -> Response {
    let cleaned = go::path::clean_path(req.uri().path());
    if cleaned == req.uri().path() {
        return not_found().await;
    }
    let path_and_query = match req.uri().query() {
        Some(q) => format!("{cleaned}?{q}"),
        None => cleaned,
    };
    let mut parts = req.uri().clone().into_parts();
    parts.path_and_query = path_and_query.parse().ok();
    match Uri::from_parts(parts) {
        Ok(uri) => *req.uri_mut() = uri,
        Err(_) => return not_found().await,
    }
    match strict.oneshot(req).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// What daprd answers for a path (or method) none of its API routes serve: its router hands
/// the request to service invocation, which finds no app id in it (404
/// `ERR_DIRECT_INVOKE`, seen from daprd 1.18.2 by e2e/dapr/differential.sh).
async fn not_found() -> Response {
    ApiError::no_route().into_response()
}

/// `POST …/jobs/{name}`: 204 on success. A well-formed `traceparent` is kept with the job.
async fn schedule_job(
    State(state): State<Shared>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let traceparent = trace::valid(headers.get(TRACEPARENT).map(HeaderValue::as_bytes));
    match schedule_job_inner(&state, &uri, &headers, body, traceparent).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

/// Without `Idempotency-Key` and `If-Match`, daprd's answer; with them, as
/// [`conditions`](super::jobsd::conditions) says.
async fn schedule_job_inner(
    state: &ApiState,
    uri: &Uri,
    headers: &HeaderMap,
    body: Body,
    traceparent: Option<String>,
) -> Result<Response, ApiError> {
    let conditions = super::jobsd::conditions::from_headers(headers)?;
    let bytes = read_body_as_daprd(body, state.body_limit())
        .await?
        .ok_or_else(|| ApiError::body_read(STREAM_TOO_LARGE))?;
    let req = parse_schedule_request(state, uri, &bytes)?;
    let Some(conditions) = conditions else {
        state.schedule_job_traced(req, traceparent).await?;
        return Ok(StatusCode::NO_CONTENT.into_response());
    };
    let extras = crate::seam::JobExtras {
        traceparent,
        ..Default::default()
    };
    let applied = state.schedule_job_guarded(req, extras, conditions).await?;
    Ok(super::jobsd::conditions::http_response(&applied))
}

/// `GET …/jobs/{name}`: 200 with the job's protojson.
async fn get_job(State(state): State<Shared>, uri: Uri) -> Response {
    let result = async {
        // daprd trims the name for POST only.
        let name = RouteName::from_uri(&uri)?;
        if !name.utf8 {
            return Err(ApiError::get_job(
                &invalid_utf8_marshal_error(),
                &state.app_id,
                &state.namespace,
            ));
        }
        let job = state.get_job(name.text).await?;
        json::job_to_json(&job).map_err(ApiError::encode_json)
    }
    .await;
    match result {
        Ok(body) => json_response(body),
        Err(e) => e.into_response(),
    }
}

/// `DELETE …/jobs/{name}`: 204, also when there was no such job.
async fn delete_job(State(state): State<Shared>, uri: Uri) -> Response {
    let result = async {
        let name = RouteName::from_uri(&uri)?;
        if !name.utf8 {
            return Err(ApiError::delete_job(
                &invalid_utf8_marshal_error(),
                &state.app_id,
                &state.namespace,
            ));
        }
        state.delete_job(name.text).await
    }
    .await;
    match result {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => e.into_response(),
    }
}

/// Extension `GET /v1.0/jobs[?prefix=p]`: `{"jobs":[…]}`, this app's jobs (those whose name
/// starts with `p`), by name, each as GET would show it.
async fn list_jobs(State(state): State<Shared>, uri: Uri) -> Response {
    let result = async {
        let prefix = query_param(uri.query().unwrap_or_default(), "prefix")?;
        let mut jobs = state.list_jobs().await?;
        if let Some(prefix) = prefix.as_deref().filter(|p| !p.is_empty()) {
            jobs.retain(|job| job.name.starts_with(prefix));
        }
        jobs.sort_by(|a, b| a.name.cmp(&b.name));
        let mut body = String::from("{\"jobs\":[");
        for (i, job) in jobs.iter().enumerate() {
            if i > 0 {
                body.push(',');
            }
            json::write_job(&mut body, job).map_err(ApiError::encode_json)?;
        }
        body.push_str("]}");
        Ok::<_, ApiError>(body)
    }
    .await;
    match result {
        Ok(body) => json_response(body),
        Err(e) => e.into_response(),
    }
}

/// `GET /v1.0/healthz`: 204 once ready; in remote mode 500 `ERR_HEALTH_NOT_READY` until the
/// Scheduler replicas are known, as daprd's readiness waits for WatchHosts.
async fn healthz(State(state): State<Shared>) -> Response {
    if state.ready() {
        StatusCode::NO_CONTENT.into_response()
    } else {
        ApiError::health_not_ready().into_response()
    }
}

/// `GET /v1.0/healthz/outbound`: 204 once serving (the SDKs wait on it before any call).
async fn healthz_outbound() -> StatusCode {
    StatusCode::NO_CONTENT
}

/// `GET /v1.0/metadata`: the small part of daprd's metadata that applies here, with
/// daprd's `actorRuntime` (status as its name, every hosted type's active actors, whether
/// the host is ready, the placement connection).
async fn metadata(State(state): State<Shared>) -> Response {
    let full = state.metadata();
    let mut body = serde_json::json!({
        "id": state.app_id,
        "runtimeVersion": env!("CARGO_PKG_VERSION"),
        "extended": { "schedulerMode": state.mode },
        "scheduler": match state.scheduler_hosts {
            Some(_) => serde_json::json!({ "connected_addresses": state.connected_scheduler_hosts() }),
            None => serde_json::json!({}),
        },
    });
    if let Some(runtime) = full.actor_runtime {
        let mut actors = serde_json::json!({
            "runtimeStatus": crate::proto::runtime::actor_runtime::ActorRuntimeStatus::try_from(runtime.runtime_status)
                .map(|s| s.as_str_name())
                .unwrap_or("INITIALIZING"),
            "hostReady": runtime.host_ready,
        });
        if !runtime.active_actors.is_empty() {
            actors["activeActors"] = runtime
                .active_actors
                .iter()
                .map(|a| serde_json::json!({ "type": a.r#type, "count": a.count }))
                .collect();
        }
        if !runtime.placement.is_empty() {
            actors["placement"] = runtime.placement.into();
        }
        body["actorRuntime"] = actors;
    }
    json_response(body.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_exemptions_are_daprds() {
        assert!(exempt_from_token(&Method::GET, "/v1.0/healthz"));
        assert!(exempt_from_token(&Method::GET, "/v1.0/healthz/outbound/"));
        assert!(!exempt_from_token(&Method::POST, "/v1.0/healthz"));
        assert!(!exempt_from_token(&Method::GET, "/v1.0/metadata"));
    }

    #[test]
    fn constant_time_eq_compares_bytes() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }

    #[test]
    fn query_param_unescapes() {
        assert_eq!(
            query_param("a=1&prefix=my+job%2F", "prefix").ok().flatten(),
            Some("my job/".to_owned())
        );
        assert_eq!(query_param("", "prefix").ok().flatten(), None);
        assert!(query_param("prefix=%zz", "prefix").is_err());
    }
}
