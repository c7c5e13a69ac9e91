//! A real HTTP actor app for the actor tests: serves `GET /dapr/config` with its actor types,
//! records every reminder, timer, method call and deactivation (with the manual clock's time
//! of arrival), answers reminders as scripted per reminder name (fail the first n calls,
//! cancel on the n-th), and tracks how many calls run at once per actor.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, put};
use chrono::{DateTime, Utc};
use jobsd::clock::{Clock, ManualClock};
use tokio::net::TcpListener;

/// One call the app received.
#[derive(Debug, Clone)]
pub struct Call {
    /// `remind`, `timer`, `method` or `deactivate`.
    pub kind: &'static str,
    pub actor_type: String,
    pub actor_id: String,
    /// Reminder, timer or method name (empty for a deactivation).
    pub name: String,
    pub body: String,
    /// The manual clock when the call arrived.
    pub at: DateTime<Utc>,
    /// jobsd's execution-context headers (`jobsd-*`) of a reminder call.
    pub context: HashMap<String, String>,
}

/// How the app answers a reminder.
#[derive(Debug, Clone, Copy, Default)]
pub struct Script {
    /// The first `fail` calls answer 500.
    pub fail: usize,
    /// The n-th call (1-based) answers 200 with `X-DaprReminderCancel: true`.
    pub cancel_at: Option<usize>,
}

#[derive(Clone)]
pub struct ActorApp {
    pub calls: Arc<Mutex<Vec<Call>>>,
    pub scripts: Arc<Mutex<HashMap<String, Script>>>,
    pub config: Arc<Mutex<String>>,
    clock: ManualClock,
    /// Calls running now and the most ever seen at once, per actor.
    running: Arc<Mutex<HashMap<String, (usize, usize)>>>,
    /// How long a method call takes (real time).
    pub method_delay: Arc<Mutex<Duration>>,
}

impl ActorApp {
    /// An app hosting `DemoActor` and `Other` (idle timeout 1 h).
    pub fn new(clock: ManualClock) -> Self {
        ActorApp {
            calls: Arc::default(),
            scripts: Arc::default(),
            config: Arc::new(Mutex::new(
                r#"{"entities":["DemoActor","Other"],"actorIdleTimeout":"1h"}"#.to_owned(),
            )),
            clock,
            running: Arc::default(),
            method_delay: Arc::default(),
        }
    }

    /// The calls of `kind` for `name` (any actor).
    pub fn calls_of(&self, kind: &str, name: &str) -> Vec<Call> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.kind == kind && c.name == name)
            .cloned()
            .collect()
    }

    /// Reminder ticks of `actor_id`'s reminder `name`.
    pub fn reminds(&self, actor_id: &str, name: &str) -> Vec<Call> {
        self.calls_of("remind", name)
            .into_iter()
            .filter(|c| c.actor_id == actor_id)
            .collect()
    }

    /// The most calls ever running at once for `actor_id`.
    pub fn max_concurrent(&self, actor_id: &str) -> usize {
        self.running
            .lock()
            .unwrap()
            .get(actor_id)
            .map_or(0, |(_, max)| *max)
    }

    pub fn script(&self, name: &str, script: Script) {
        self.scripts.lock().unwrap().insert(name.to_owned(), script);
    }

    fn record(&self, kind: &'static str, t: &str, id: &str, name: &str, body: &Bytes) -> usize {
        let mut calls = self.calls.lock().unwrap();
        calls.push(Call {
            kind,
            actor_type: t.to_owned(),
            actor_id: id.to_owned(),
            name: name.to_owned(),
            body: String::from_utf8_lossy(body).into_owned(),
            at: self.clock.now(),
            context: HashMap::new(),
        });
        calls
            .iter()
            .filter(|c| c.kind == kind && c.name == name && c.actor_id == id)
            .count()
    }
}

async fn config(State(app): State<ActorApp>) -> Response {
    let body = app.config.lock().unwrap().clone();
    ([("content-type", "application/json")], body).into_response()
}

async fn remind(
    State(app): State<ActorApp>,
    Path((t, id, name)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let n = app.record("remind", &t, &id, &name, &body);
    if let Some(call) = app.calls.lock().unwrap().last_mut() {
        call.context = headers
            .iter()
            .filter(|(k, _)| k.as_str().starts_with("jobsd-"))
            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
            .collect();
    }
    let script = app
        .scripts
        .lock()
        .unwrap()
        .get(&name)
        .copied()
        .unwrap_or_default();
    if n <= script.fail {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    if script.cancel_at == Some(n) {
        return (StatusCode::OK, [("X-DaprReminderCancel", "true")]).into_response();
    }
    StatusCode::OK.into_response()
}

async fn timer(
    State(app): State<ActorApp>,
    Path((t, id, name)): Path<(String, String, String)>,
    body: Bytes,
) -> StatusCode {
    app.record("timer", &t, &id, &name, &body);
    StatusCode::OK
}

async fn method(
    State(app): State<ActorApp>,
    Path((t, id, name)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    {
        let mut running = app.running.lock().unwrap();
        let entry = running.entry(id.clone()).or_default();
        entry.0 += 1;
        entry.1 = entry.1.max(entry.0);
    }
    let delay = *app.method_delay.lock().unwrap();
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    app.record("method", &t, &id, &name, &body);
    app.running.lock().unwrap().get_mut(&id).unwrap().0 -= 1;
    match name.as_str() {
        "missing" => StatusCode::NOT_FOUND.into_response(),
        "boom" => (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response(),
        _ => {
            let echo = headers
                .get("x-echo")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            (
                StatusCode::OK,
                [("content-type", "application/json"), ("x-app", "yes")],
                format!(
                    r#"{{"method":"{name}","echo":"{echo}","body":{}}}"#,
                    body.len()
                ),
            )
                .into_response()
        }
    }
}

async fn deactivate(
    State(app): State<ActorApp>,
    Path((t, id)): Path<(String, String)>,
) -> StatusCode {
    app.record("deactivate", &t, &id, "", &Bytes::new());
    StatusCode::OK
}

/// Serves `app` on `addr` (a free loopback port when `None`).
pub async fn serve_on(app: ActorApp, addr: Option<SocketAddr>) -> SocketAddr {
    serve_until(app, addr, tokio_util::sync::CancellationToken::new()).await
}

/// Serves `app` on `addr` until `stop` is cancelled (then the port is free again).
pub async fn serve_until(
    app: ActorApp,
    addr: Option<SocketAddr>,
    stop: tokio_util::sync::CancellationToken,
) -> SocketAddr {
    let router = Router::new()
        .route("/dapr/config", get(config))
        .route("/healthz", get(|| async { StatusCode::OK }))
        .route("/actors/{t}/{id}/method/remind/{name}", put(remind))
        .route("/actors/{t}/{id}/method/timer/{name}", put(timer))
        .route("/actors/{t}/{id}/method/{name}", put(method))
        .route("/actors/{t}/{id}", delete(deactivate))
        .with_state(app);
    let listener = TcpListener::bind(addr.unwrap_or_else(|| "127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await
    });
    addr
}
