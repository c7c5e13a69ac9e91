//! Shared helpers for the API integration tests: the real engine over a memory store, the
//! API servers on 127.0.0.1:0, and a raw HTTP/1.1 client that sends paths byte for byte.
#![allow(dead_code)]

pub mod actor_app;
pub mod app;
pub mod certs;
pub mod cli;
pub mod clockwork;
pub mod dapr_scheduler;
pub mod replica;
pub mod running;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use jobsd::api::{self, ApiState};
use jobsd::clock::ManualClock;
use jobsd::config::{self, AppProtocol};
use jobsd::engine::Engine;
use jobsd::proto::dapr_scheduler as sv1;
use jobsd::seam::Scheduler;
use jobsd::store;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Where the manual clocks of the trigger tests start.
pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
}

/// 127.0.0.1 on a port the system picks.
pub fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// How long a test waits for something that happens on real time (a probe, a reconnect) before
/// it gives up: far more than it takes on a loaded machine, so that only a hang fails.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Polls `check` every 10 ms until it holds; panics with `what` after `PATIENCE`.
pub async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !check().await {
        assert!(
            Instant::now() < deadline,
            "timed out after {PATIENCE:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The metadata of app `app_id`'s jobs in namespace `default`.
pub fn app_metadata(app_id: &str) -> sv1::JobMetadata {
    sv1::JobMetadata {
        app_id: app_id.into(),
        namespace: "default".into(),
        target: Some(sv1::JobTargetMetadata {
            r#type: Some(sv1::job_target_metadata::Type::Job(sv1::TargetJob {})),
        }),
        concurrency_key: None,
    }
}

/// Seconds after `t0()` at which each run of a `/jobsd/v1/jobs/{name}/runs` answer started,
/// oldest first (the answer is newest first).
pub fn started_after_t0(runs: &serde_json::Value) -> Vec<i64> {
    let mut secs: Vec<i64> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| {
            let at = DateTime::parse_from_rfc3339(run["started"].as_str().unwrap())
                .unwrap()
                .with_timezone(&Utc);
            (at - t0()).num_seconds()
        })
        .collect();
    secs.reverse();
    secs
}

/// A one-shot job due at once.
pub fn due_now() -> sv1::Job {
    sv1::Job {
        due_time: Some("0s".into()),
        ..Default::default()
    }
}

/// A sidecar of `myapp` on free loopback ports, in front of the app at `app` (none: no app
/// port) speaking `protocol`, embedded unless `scheduler_hosts` names replicas.
pub fn sidecar_config(
    app: Option<SocketAddr>,
    protocol: AppProtocol,
    scheduler_hosts: &[String],
) -> config::Sidecar {
    config::Sidecar {
        app_id: "myapp".into(),
        namespace: "default".into(),
        metrics_namespace: "default".into(),
        app_address: app,
        app_protocol: protocol,
        http_addrs: vec!["127.0.0.1:0".parse().unwrap()],
        grpc_addrs: vec!["127.0.0.1:0".parse().unwrap()],
        public_addr: None,
        data_dir: "unused".into(),
        max_body_size: 4 << 20,
        api_token: None,
        app_api_token: None,
        app_max_concurrency: config::DEFAULT_MAX_IN_FLIGHT,
        app_call_timeout: Some(jobsd::delivery::DEFAULT_CALL_TIMEOUT),
        health_check: None,
        resources_paths: Vec::new(),
        scheduler_hosts: scheduler_hosts.to_vec(),
        scheduler_tls: None,
        scheduler_job_streams: 3,
        placement: None,
        history: jobsd::engine::history::Options::default(),
        // The default: only the near future in memory, the rest paged in from the store.
        horizon: Some(std::time::Duration::from_secs(300)),
        store: jobsd::store::RedbOptions::default(),
        max_backfill_ticks: jobsd::engine::DEFAULT_MAX_BACKFILL_TICKS,
        otlp_endpoint: None,
        metrics: None,
        test_clock: false,
        console: true,
        metrics_require_token: true,
    }
}

/// Health probes every 20 ms that fail at the first miss; the timeout only bounds a hung probe,
/// so it is generous (a probe answered late on a loaded machine is not a failed one).
pub fn fast_health_check() -> config::HealthCheck {
    config::HealthCheck {
        path: "/healthz".into(),
        interval: Duration::from_millis(20),
        timeout: Duration::from_secs(10),
        threshold: 1,
    }
}

/// A scheduler backed by the real engine over a fresh memory store, with a clock that never
/// moves (so nothing fires while the API is under test).
pub fn engine() -> Arc<dyn Scheduler> {
    let clock = ManualClock::new(Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap());
    Arc::new(Engine::new(Arc::new(store::Memory::new()), Arc::new(clock)))
}

/// API state for `app_id` in `namespace` over `scheduler`.
pub fn state(scheduler: Arc<dyn Scheduler>, app_id: &str, namespace: &str) -> ApiState {
    ApiState {
        app_id: app_id.to_owned(),
        namespace: namespace.to_owned(),
        api_token: None,
        max_body_size: 4 << 20,
        max_backfill_ticks: jobsd::engine::DEFAULT_MAX_BACKFILL_TICKS,
        mode: "embedded",
        scheduler_hosts: None,
        app_started: tokio::sync::watch::channel(true).1,
        actors: jobsd::actors::ActorRuntime::without_app(
            Arc::new(jobsd::actors::SchedulerReminders::new(
                scheduler.clone(),
                app_id,
                namespace,
            )),
            Arc::new(jobsd::clock::SystemClock),
        ),
        scheduler,
        clock: Arc::new(jobsd::clock::SystemClock),
        test_clock: None,
    }
}

/// Serves the HTTP API on an ephemeral port.
pub async fn serve_http(state: ApiState) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = api::http::router(state);
    tokio::spawn(async move {
        let _ = jobsd::serve::http(listener, router, Default::default()).await;
    });
    addr
}

/// Serves the gRPC API (Dapr's and jobsd's services, health, reflection) on an ephemeral port.
pub async fn serve_grpc(state: ApiState) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let extras = api::grpc::health_and_reflection().await.unwrap();
    let dapr = api::grpc::service(state.clone());
    let jobsd = api::jobsd::grpc::service(state);
    tokio::spawn(async move {
        let _ = jobsd::serve::grpc_limits(tonic::transport::Server::builder())
            .layer(tower::util::MapResponseLayer::new(
                api::grpc::go_request_errors::<tonic::body::Body>,
            ))
            .add_routes(extras.routes)
            .add_service(dapr)
            .add_service(jobsd)
            .serve_with_incoming(jobsd::serve::capped_incoming(listener))
            .await;
    });
    addr
}

/// One HTTP response, read to the end.
#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON (panics with the body when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!("not JSON ({e}): {:?} (status {})", self.text(), self.status)
        })
    }
}

/// Sends one HTTP/1.1 request with `path` exactly as given and reads the whole response.
pub async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpResponse {
    let raw = http_raw(addr, method, path, headers, body).await;
    parse_response(&raw)
}

/// [`http`], but `None` when no complete response head came back (the server dropped the
/// connection), instead of a panic.
pub async fn try_http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Option<HttpResponse> {
    let raw = http_raw(addr, method, path, headers, body).await;
    raw.windows(4)
        .any(|w| w == b"\r\n\r\n")
        .then(|| parse_response(&raw))
}

/// The bytes of the response to one request sent as given.
async fn http_raw(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    let mut bytes = request.into_bytes();
    bytes.extend_from_slice(body);
    // The server may answer (and close) before reading an oversized body; the answer is
    // what the test checks.
    let _ = stream.write_all(&bytes).await;
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw).await;
    raw
}

fn parse_response(raw: &[u8]) -> HttpResponse {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let rest = &raw[split + 4..];
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_vec()
    };
    HttpResponse {
        status,
        headers,
        body,
    }
}

fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&rest[..eol]).trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = eol + 2;
        out.extend_from_slice(&rest[start..start + size]);
        rest = &rest[start + size + 2..];
    }
    out
}
