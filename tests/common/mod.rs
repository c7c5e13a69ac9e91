//! Shared helpers for the API integration tests: the real engine over a memory store, the
//! API servers on 127.0.0.1:0, and a raw HTTP/1.1 client that sends paths byte for byte.
#![allow(dead_code)]

pub mod app;
pub mod clockwork;

use std::net::SocketAddr;
use std::sync::Arc;

use chrono::{TimeZone, Utc};
use jobsd::api::{self, ApiState};
use jobsd::clock::ManualClock;
use jobsd::engine::Engine;
use jobsd::scheduler::Scheduler;
use jobsd::store;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A scheduler backed by the real engine over a fresh memory store, with a clock that never
/// moves (so nothing fires while the API is under test).
pub fn engine() -> Arc<dyn Scheduler> {
    let clock = ManualClock::new(Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap());
    Arc::new(Engine::new(Arc::new(store::Memory::new()), Arc::new(clock)))
}

/// API state for `app_id` in `namespace` over `scheduler`.
pub fn state(scheduler: Arc<dyn Scheduler>, app_id: &str, namespace: &str) -> ApiState {
    ApiState {
        scheduler,
        app_id: app_id.to_owned(),
        namespace: namespace.to_owned(),
        api_token: None,
        max_body_size: 4 << 20,
        mode: "embedded",
        scheduler_hosts: None,
    }
}

/// Serves the HTTP API on an ephemeral port.
pub async fn serve_http(state: ApiState) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = api::http::router(state);
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    addr
}

/// Serves the gRPC API (Dapr service, health, reflection) on an ephemeral port.
pub async fn serve_grpc(state: ApiState) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let extras = api::grpc::health_and_reflection().await.unwrap();
    let dapr = api::grpc::service(state);
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_routes(extras.routes)
            .add_service(dapr)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
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
    parse_response(&raw)
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
