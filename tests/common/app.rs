//! A real HTTP app for the sidecar tests: records every `POST /job/{name}` and answers the
//! status configured per name, optionally after a delay; `GET /healthz` answers `healthy`.
//! Names starting with [`ASYNC_PREFIX`] answer `202` with `Jobsd-Async: true` (async
//! completion: the test completes them through jobsd's API).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Jobs whose name starts with this answer `202 Accepted` with `Jobsd-Async: true`.
pub const ASYNC_PREFIX: &str = "async-";

/// What an app received: job name and body.
pub type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// jobsd's execution-context headers (`jobsd-*`, lower case) of every call, by job name.
pub type Contexts = Arc<Mutex<Vec<(String, HashMap<String, String>)>>>;

/// Names of the calls an app has started answering.
pub type Started = Arc<Mutex<Vec<String>>>;

/// An HTTP app: `POST /job/{name}` answers the status configured for the name (200 by
/// default), after the delay configured for it; `GET /healthz` answers `healthy`.
#[derive(Clone)]
pub struct HttpApp {
    pub started: Started,
    pub received: Received,
    pub contexts: Contexts,
    pub status: Arc<Mutex<HashMap<String, u16>>>,
    pub delay: Arc<Mutex<HashMap<String, Duration>>>,
    pub healthy: Arc<Mutex<bool>>,
    /// Calls for a name with a gate wait for one of its permits before answering.
    pub gates: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
}

impl HttpApp {
    pub fn new() -> Self {
        HttpApp {
            started: Started::default(),
            received: Received::default(),
            contexts: Contexts::default(),
            status: Arc::default(),
            delay: Arc::default(),
            healthy: Arc::new(Mutex::new(true)),
            gates: Arc::default(),
        }
    }

    /// Holds every call for `name` until the returned gate gives it a permit.
    pub fn hold(&self, name: &str) -> Arc<Semaphore> {
        let gate = Arc::new(Semaphore::new(0));
        self.gates
            .lock()
            .unwrap()
            .insert(name.to_owned(), gate.clone());
        gate
    }

    /// Calls for `name` the app has started answering.
    pub fn started(&self, name: &str) -> usize {
        self.started
            .lock()
            .unwrap()
            .iter()
            .filter(|n| *n == name)
            .count()
    }

    pub fn bodies(&self, name: &str) -> Vec<String> {
        self.received
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
            .collect()
    }

    pub fn count(&self, name: &str) -> usize {
        self.bodies(name).len()
    }

    /// The `jobsd-*` headers of every call for `name`, oldest first.
    pub fn contexts(&self, name: &str) -> Vec<HashMap<String, String>> {
        self.contexts
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, h)| h.clone())
            .collect()
    }
}

async fn job(
    State(app): State<HttpApp>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    app.started.lock().unwrap().push(name.clone());
    let context = headers
        .iter()
        .filter(|(k, _)| k.as_str().starts_with("jobsd-"))
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    app.contexts.lock().unwrap().push((name.clone(), context));
    let delay = app.delay.lock().unwrap().get(&name).copied();
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    let gate = app.gates.lock().unwrap().get(&name).cloned();
    if let Some(gate) = gate {
        gate.acquire().await.unwrap().forget();
    }
    app.received
        .lock()
        .unwrap()
        .push((name.clone(), body.to_vec()));
    let code = app.status.lock().unwrap().get(&name).copied();
    if code.is_none() && name.starts_with(ASYNC_PREFIX) {
        return (StatusCode::ACCEPTED, [("jobsd-async", "true")]).into_response();
    }
    StatusCode::from_u16(code.unwrap_or(200))
        .unwrap()
        .into_response()
}

async fn healthz(State(app): State<HttpApp>) -> StatusCode {
    if *app.healthy.lock().unwrap() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    }
}

/// Serves `app` on a free loopback port.
pub async fn serve(app: HttpApp) -> SocketAddr {
    let router = Router::new()
        .route("/job/{name}", post(job))
        .route("/healthz", get(healthz))
        .with_state(app);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}
