//! Delivery to real apps on 127.0.0.1: an axum HTTP app and tonic gRPC apps that record what
//! the sidecar sends, checked against daprd's wire rules (`dapr-jobs-api.md` §4.4, §4.5).

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::serve::ListenerExt;
use common::clockwork::WatchedClock;
use http_body_util::BodyExt;
use jobsd::clock::ManualClock;
use jobsd::delivery::{CallTimeout, Delivery, DeliveryConfig, HealthCheckConfig, Protocol};
use jobsd::proto::common::http_extension::Verb;
use jobsd::proto::dapr_scheduler as sv1;
use jobsd::proto::runtime::app_callback_alpha_server::{AppCallbackAlpha, AppCallbackAlphaServer};
use jobsd::proto::runtime::app_callback_health_check_server::{
    AppCallbackHealthCheck, AppCallbackHealthCheckServer,
};
use jobsd::proto::runtime::app_callback_server::{AppCallback, AppCallbackServer};
use jobsd::proto::runtime::{HealthCheckResponse, JobEventRequest, JobEventResponse};
use jobsd::resiliency::{BreakerSettings, CodeRange, Matching, Policy, RetryConfig};
use jobsd::trigger::{Sink, Trigger, TriggerResult};
use prost::Message;
use prost_types::value::Kind;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

const VALUE_URL: &str = "type.googleapis.com/google.protobuf.Value";

// ---------------------------------------------------------------------------------------------
// Helpers

fn trigger(name: &str, data: Option<prost_types::Any>) -> Trigger {
    trigger_for(
        name,
        data,
        Some(sv1::job_target_metadata::Type::Job(sv1::TargetJob {})),
    )
}

fn trigger_for(
    name: &str,
    data: Option<prost_types::Any>,
    target: Option<sv1::job_target_metadata::Type>,
) -> Trigger {
    let key = match &target {
        Some(sv1::job_target_metadata::Type::Actor(a)) => {
            format!("actorreminder||default||{}||{}||{name}", a.r#type, a.id)
        }
        _ => format!("app||default||myapp||{name}"),
    };
    // A second attempt of the tick at 07:00: the execution context says so.
    let tick = chrono::DateTime::parse_from_rfc3339(CONTEXT_TICK)
        .unwrap()
        .to_utc();
    Trigger {
        execution_id: jobsd::trigger::ExecutionId::for_tick(&key, tick),
        attempt: 2,
        created_by: None,
        key: Arc::from(key),
        name: Arc::from(name),
        data,
        metadata: Arc::new(sv1::JobMetadata {
            app_id: "myapp".into(),
            namespace: "default".into(),
            target: Some(sv1::JobTargetMetadata { r#type: target }),
            concurrency_key: None,
        }),
        scheduled_at: chrono::Utc::now(),
        tick: Some(tick),
        kind: jobsd::trigger::TriggerKind::Schedule,
    }
}

/// The nominal time of the test triggers.
const CONTEXT_TICK: &str = "2026-03-08T07:00:00Z";

/// Asserts `get` (a header or metadata lookup) gives jobsd's execution context of the test
/// triggers: the execution, attempt 2, the nominal time, a retry.
fn assert_context<'a>(
    get: impl Fn(&str) -> Option<&'a str>,
    execution: jobsd::trigger::ExecutionId,
) {
    assert_eq!(
        get("jobsd-execution-id"),
        Some(execution.to_string().as_str())
    );
    assert_eq!(get("jobsd-attempt"), Some("2"));
    assert_eq!(get("jobsd-scheduled-time"), Some(CONTEXT_TICK));
    assert_eq!(get("jobsd-trigger"), Some("retry"));
}

/// Asserts `tp` is `00-<execution id hex>-<16 hex, not all zero>-01`.
fn assert_traceparent(tp: &str, execution: jobsd::trigger::ExecutionId) {
    let trace_id = execution.to_string().replace('-', "");
    let rest = tp
        .strip_prefix(&format!("00-{trace_id}-"))
        .unwrap_or_else(|| panic!("{tp:?} is not of trace {trace_id}"));
    let span = rest.strip_suffix("-01").unwrap_or_else(|| panic!("{tp:?}"));
    assert!(
        span.len() == 16
            && span.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            && span != "0000000000000000",
        "{tp:?}"
    );
}

/// Delivers a trigger of job `name` without data.
async fn deliver(sink: &Delivery, name: &str) -> TriggerResult {
    sink.deliver(trigger(name, None)).await
}

fn value_any(kind: Kind) -> prost_types::Any {
    prost_types::Any {
        type_url: VALUE_URL.into(),
        value: prost_types::Value { kind: Some(kind) }.encode_to_vec(),
    }
}

fn config(addr: SocketAddr, protocol: Protocol) -> DeliveryConfig {
    DeliveryConfig {
        app_address: Some(addr),
        protocol,
        ..DeliveryConfig::default()
    }
}

fn delivery(config: DeliveryConfig) -> Delivery {
    Delivery::new(config, &CancellationToken::new()).expect("valid config")
}

/// An address nothing listens on.
async fn closed_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    addr
}

/// Waits (bounded) until the health watch shows `want`.
async fn wait_health(rx: &mut watch::Receiver<bool>, want: bool) {
    tokio::time::timeout(common::PATIENCE, rx.wait_for(|v| *v == want))
        .await
        .unwrap_or_else(|_| panic!("health never became {want}"))
        .expect("probe loop alive");
}

// ---------------------------------------------------------------------------------------------
// The HTTP app

/// One request as the app saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    /// The raw (still percent-encoded) path.
    path: String,
    version: axum::http::Version,
    headers: axum::http::HeaderMap,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

#[derive(Default)]
struct HttpApp {
    seen: Mutex<Vec<Seen>>,
    connections: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    healthy: AtomicBool,
    probes: AtomicUsize,
    /// How long `/healthz` takes to answer, in ms.
    probe_delay_ms: std::sync::atomic::AtomicU64,
    /// Requests to `/job/flaky…` so far; the first two fail.
    flaky: AtomicUsize,
    /// Whether `/job/slow…` calls may answer; until `open_gate`, they hold.
    gate_open: AtomicBool,
    gate: tokio::sync::Notify,
}

impl HttpApp {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
    fn last(&self) -> Seen {
        self.seen().last().cloned().expect("a request")
    }

    /// Lets the `/job/slow…` calls held so far, and every later one, answer.
    fn open_gate(&self) {
        self.gate_open.store(true, Ordering::SeqCst);
        self.gate.notify_waiters();
    }

    async fn pass_gate(&self) {
        loop {
            let opened = self.gate.notified();
            tokio::pin!(opened);
            // Registered before the check, so an `open_gate` in between is not missed.
            opened.as_mut().enable();
            if self.gate_open.load(Ordering::SeqCst) {
                return;
            }
            opened.await;
        }
    }

    /// Waits (bounded) until `n` `/job/slow…` calls are held at once.
    async fn wait_in_flight(&self, n: usize) {
        common::eventually(&format!("{n} calls at the app"), async || {
            self.in_flight.load(Ordering::SeqCst) >= n
        })
        .await;
    }
}

/// Answers `/job/status-<code>` with that code, holds `/job/slow…` until the test opens the
/// gate, fails the first two `/job/flaky…` with 503, answers `/job/async…` with 202 and
/// `Jobsd-Async: true`, and 200 otherwise; `/healthz` follows `healthy`.
async fn job_handler(State(app): State<Arc<HttpApp>>, req: Request) -> axum::response::Response {
    use axum::response::IntoResponse;
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec())
        .unwrap_or_default();
    let path = parts.uri.path().to_owned();
    app.seen.lock().expect("lock").push(Seen {
        method: parts.method.to_string(),
        path: path.clone(),
        version: parts.version,
        headers: parts.headers,
        body,
    });
    if path.starts_with("/job/slow") {
        let now = app.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        app.max_in_flight.fetch_max(now, Ordering::SeqCst);
        app.pass_gate().await;
        app.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
    if path.starts_with("/job/flaky") && app.flaky.fetch_add(1, Ordering::SeqCst) < 2 {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    if path.starts_with("/job/async") {
        return (StatusCode::ACCEPTED, [("jobsd-async", "true")]).into_response();
    }
    path.strip_prefix("/job/status-")
        .and_then(|c| c.parse::<u16>().ok())
        .and_then(|c| StatusCode::from_u16(c).ok())
        .unwrap_or(StatusCode::OK)
        .into_response()
}

async fn healthz(State(app): State<Arc<HttpApp>>) -> StatusCode {
    app.probes.fetch_add(1, Ordering::SeqCst);
    let delay = app.probe_delay_ms.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(delay)).await;
    if app.healthy.load(Ordering::SeqCst) {
        StatusCode::OK
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    }
}

async fn http_app() -> (SocketAddr, Arc<HttpApp>) {
    let app = Arc::new(HttpApp::default());
    app.healthy.store(true, Ordering::SeqCst);
    let router = Router::new()
        .route("/healthz", get(healthz))
        .fallback(job_handler)
        .with_state(app.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let counter = app.clone();
    let listener = listener.tap_io(move |_| {
        counter.connections.fetch_add(1, Ordering::SeqCst);
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (addr, app)
}

// ---------------------------------------------------------------------------------------------
// HTTP delivery

#[tokio::test]
async fn http_bodies_follow_daprd_rules() {
    let (addr, app) = http_app().await;
    let sink = delivery(config(addr, Protocol::Http));

    let mut object = std::collections::BTreeMap::new();
    object.insert(
        "expression".to_string(),
        prost_types::Value {
            kind: Some(Kind::StringValue("val".into())),
        },
    );
    let cases: Vec<(&str, Option<prost_types::Any>, &[u8])> = vec![
        (
            "string",
            Some(value_any(Kind::StringValue("someData".into()))),
            br#""someData""#,
        ),
        ("number", Some(value_any(Kind::NumberValue(123.0))), b"123"),
        (
            "object",
            Some(value_any(Kind::StructValue(prost_types::Struct {
                fields: object,
            }))),
            br#"{"expression":"val"}"#,
        ),
        ("bool", Some(value_any(Kind::BoolValue(true))), b"true"),
        (
            // wrapperspb.String("hello world"): the proto prefix 0x0a 0x0b is white space.
            "stringvalue",
            Some(prost_types::Any {
                type_url: "type.googleapis.com/google.protobuf.StringValue".into(),
                value: "hello world".to_string().encode_to_vec(),
            }),
            b"hello world",
        ),
        (
            "bytesvalue",
            Some(prost_types::Any {
                type_url: "type.googleapis.com/google.protobuf.BytesValue".into(),
                value: b"hello world".to_vec().encode_to_vec(),
            }),
            b"hello world",
        ),
        (
            "int64value",
            Some(prost_types::Any {
                type_url: "type.googleapis.com/google.protobuf.Int64Value".into(),
                value: 123i64.encode_to_vec(),
            }),
            b"\x08{",
        ),
        (
            "raw",
            Some(prost_types::Any {
                type_url: String::new(),
                value: b" \t{\"a\": 1}\r\n\xc2\xa0".to_vec(),
            }),
            br#"{"a": 1}"#,
        ),
        ("none", None, b""),
        ("emptyany", Some(prost_types::Any::default()), b""),
        (
            "emptyvalue",
            Some(prost_types::Any {
                type_url: VALUE_URL.into(),
                value: Vec::new(),
            }),
            b"",
        ),
    ];
    for (name, data, want) in cases {
        let trigger = trigger(name, data);
        let execution = trigger.execution_id;
        let result = sink.deliver(trigger).await;
        assert_eq!(result, TriggerResult::Success, "{name}");
        let seen = app.last();
        // The one header daprd does not send: the attempt's W3C trace context, with the
        // execution id as trace id.
        let tp = seen.header("traceparent").expect("traceparent");
        assert_traceparent(tp, execution);
        // And jobsd's execution context.
        assert_context(|h| seen.header(h), execution);
        assert_eq!(seen.method, "POST", "{name}");
        assert_eq!(seen.path, format!("/job/{name}"));
        assert_eq!(seen.body, want, "{name}: got {:?}", seen.text());
        assert_eq!(
            seen.header("content-type"),
            Some("application/json"),
            "{name}"
        );
        assert_eq!(
            seen.header("content-length"),
            Some(want.len().to_string().as_str()),
            "{name}"
        );
        assert!(
            seen.header("user-agent")
                .is_some_and(|ua| ua.starts_with("jobsd/")),
            "{name}"
        );
        assert_eq!(seen.headers.get_all("content-length").iter().count(), 1);
        assert_eq!(seen.header("dapr-api-token"), None, "{name}");
        assert_eq!(seen.version, axum::http::Version::HTTP_11);
    }
    assert_eq!(sink.stats().accepted, 11);
}

#[tokio::test]
async fn http_corrupt_value_data_fails_without_calling_the_app() {
    let (addr, app) = http_app().await;
    let sink = delivery(config(addr, Protocol::Http));
    let corrupt = prost_types::Any {
        type_url: VALUE_URL.into(),
        value: vec![0xFF; 4],
    };
    let nan = value_any(Kind::NumberValue(f64::NAN));
    for data in [corrupt, nan] {
        assert_eq!(
            sink.deliver(trigger("bad", Some(data))).await,
            TriggerResult::Failed
        );
    }
    assert!(app.seen().is_empty());
    assert_eq!(sink.stats().failed, 2);
}

#[tokio::test]
async fn http_job_names_are_escaped_like_go() {
    let (addr, app) = http_app().await;
    let sink = delivery(config(addr, Protocol::Http));
    let cases = [
        ("my||job@name", "/job/my%7C%7Cjob@name"),
        ("my job", "/job/my%20job"),
        ("/leading", "/job/leading"),
        ("héllo", "/job/h%C3%A9llo"),
        ("a:b;c,d=e&f+g$h~i", "/job/a:b;c,d=e&f+g$h~i"),
        ("x(y)!*'", "/job/x(y)!*'"),
    ];
    for (name, want) in cases {
        assert_eq!(deliver(&sink, name).await, TriggerResult::Success);
        assert_eq!(app.last().path, want, "name {name:?}");
    }
}

#[tokio::test]
async fn http_sends_the_app_api_token() {
    let (addr, app) = http_app().await;
    let sink = delivery(DeliveryConfig {
        app_api_token: Some("s3cret".into()),
        ..config(addr, Protocol::Http)
    });
    assert_eq!(deliver(&sink, "tok").await, TriggerResult::Success);
    assert_eq!(app.last().header("dapr-api-token"), Some("s3cret"));
}

#[tokio::test]
async fn http_token_that_is_not_a_header_value_is_a_config_error() {
    let result = Delivery::new(
        DeliveryConfig {
            app_api_token: Some("bad\ntoken".into()),
            ..config(closed_port().await, Protocol::Http)
        },
        &CancellationToken::new(),
    );
    assert!(matches!(result, Err(jobsd::delivery::Error::Config(_))));
}

#[tokio::test]
async fn http_status_codes_map_to_results() {
    let (addr, _app) = http_app().await;
    let sink = delivery(config(addr, Protocol::Http));
    let cases = [
        (200, TriggerResult::Success),
        (204, TriggerResult::Success),
        // A plain 202: Dapr's success unless the job opts in to async completion (the
        // engine decides, by `policy.lease`).
        (202, TriggerResult::Accepted),
        (404, TriggerResult::Success),
        (400, TriggerResult::Failed),
        (500, TriggerResult::Failed),
        (503, TriggerResult::Failed),
        (301, TriggerResult::Failed),
    ];
    for (code, want) in cases {
        let result = deliver(&sink, &format!("status-{code}")).await;
        assert_eq!(result, want, "status {code}");
    }
    // An explicit async answer holds the execution.
    assert_eq!(deliver(&sink, "async-x").await, TriggerResult::Held);
    let stats = sink.stats();
    assert_eq!(stats.accepted, 4);
    assert_eq!(stats.not_found, 1);
    assert_eq!(stats.failed, 4);
    assert_eq!(stats.undeliverable, 0);
}

#[tokio::test]
async fn call_once_exposes_the_answer_for_resiliency() {
    let (addr, _app) = http_app().await;
    let sink = delivery(config(addr, Protocol::Http));
    let err = sink
        .call_once(&trigger("status-503", None))
        .await
        .expect_err("503 fails");
    assert_eq!(err.http_status(), Some(503));
    assert_eq!(err.grpc_code(), None);
    assert_eq!(
        sink.call_once(&trigger("status-404", None)).await.ok(),
        Some(jobsd::delivery::Ack::NotFound)
    );
}

#[tokio::test]
async fn http_unreachable_app_fails() {
    let sink = delivery(config(closed_port().await, Protocol::Http));
    assert!(sink.is_deliverable("app||default||myapp||x"));
    assert_eq!(deliver(&sink, "x").await, TriggerResult::Failed);
    assert!(matches!(
        sink.call_once(&trigger("x", None)).await,
        Err(jobsd::delivery::Error::Transport(_))
    ));
}

/// Right after a start the app's health is unknown, not bad: a trigger waits for the first
/// probe's answer instead of finding the app down (a `whileTargetDown: skip` job would lose
/// the tick it catches up on after a restart).
#[tokio::test]
async fn a_trigger_before_the_first_probe_answers_waits_for_it() {
    let (addr, app) = http_app().await;
    app.probe_delay_ms.store(300, Ordering::SeqCst);
    let sink = with_health(addr, Protocol::Http);
    assert_eq!(deliver(&sink, "x").await, TriggerResult::Success);
    assert_eq!(app.seen().len(), 1);

    let (addr, app) = http_app().await;
    app.healthy.store(false, Ordering::SeqCst);
    app.probe_delay_ms.store(300, Ordering::SeqCst);
    let sink = with_health(addr, Protocol::Http);
    assert_eq!(deliver(&sink, "x").await, TriggerResult::Undeliverable);
    assert!(
        app.probes.load(Ordering::SeqCst) >= 1,
        "after the probe answered"
    );
    assert!(app.seen().is_empty());
}

#[tokio::test]
async fn no_app_port_is_undeliverable() {
    let sink = delivery(DeliveryConfig::default());
    assert!(!*sink.health().borrow());
    assert!(!sink.is_deliverable("app||default||myapp||x"));
    assert_eq!(deliver(&sink, "x").await, TriggerResult::Undeliverable);
    assert_eq!(sink.stats().undeliverable, 1);
}

#[tokio::test]
async fn targets_other_than_app_jobs_are_not_sent_to_the_app() {
    let (addr, app) = http_app().await;
    let sink = delivery(config(addr, Protocol::Http));
    let actor = sv1::job_target_metadata::Type::Actor(sv1::TargetActorReminder {
        id: "1".into(),
        r#type: "counter".into(),
    });
    assert_eq!(
        sink.deliver(trigger_for("r", None, Some(actor))).await,
        TriggerResult::Undeliverable
    );
    assert!(!sink.is_deliverable("actorreminder||default||counter||1||r"));
    assert_eq!(
        sink.deliver(trigger_for("t", None, None)).await,
        TriggerResult::Failed
    );
    assert!(app.seen().is_empty());
}

#[tokio::test]
async fn http_concurrency_is_bounded() {
    let (addr, app) = http_app().await;
    let sink = Arc::new(delivery(DeliveryConfig {
        max_concurrency: Some(2),
        ..config(addr, Protocol::Http)
    }));
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let sink = sink.clone();
            tokio::spawn(async move { deliver(&sink, &format!("slow-{i}")).await })
        })
        .collect();
    // Two calls held at the app and the other six queued at the bound: with every call
    // accounted for, none more can reach the app until one of the two ends.
    app.wait_in_flight(2).await;
    common::eventually("six calls waiting at the bound", async || {
        sink.waiting_for_permit() == 6
    })
    .await;
    assert_eq!(app.in_flight.load(Ordering::SeqCst), 2);
    app.open_gate();
    for t in tasks {
        assert_eq!(t.await.expect("task"), TriggerResult::Success);
    }
    assert_eq!(app.seen().len(), 8);
    assert_eq!(app.max_in_flight.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn http_unbounded_concurrency_runs_in_parallel() {
    let (addr, app) = http_app().await;
    let sink = Arc::new(delivery(config(addr, Protocol::Http)));
    let tasks: Vec<_> = (0..6)
        .map(|i| {
            let sink = sink.clone();
            tokio::spawn(async move { deliver(&sink, &format!("slow-{i}")).await })
        })
        .collect();
    // More than two calls at the app at once (all six, in fact: nothing bounds them).
    app.wait_in_flight(6).await;
    app.open_gate();
    for t in tasks {
        assert_eq!(t.await.expect("task"), TriggerResult::Success);
    }
    assert!(app.max_in_flight.load(Ordering::SeqCst) > 2);
}

#[tokio::test]
async fn http_connections_are_kept_alive() {
    let (addr, app) = http_app().await;
    let sink = Arc::new(delivery(DeliveryConfig {
        max_concurrency: Some(4),
        ..config(addr, Protocol::Http)
    }));
    for i in 0..50 {
        assert_eq!(
            deliver(&sink, &format!("seq-{i}")).await,
            TriggerResult::Success
        );
    }
    // hyper pools a connection again from a spawned task, so a request may rarely race it
    // and open a second one; without keep-alive this would be 50.
    assert!(
        app.connections.load(Ordering::SeqCst) <= 2,
        "{} connections",
        app.connections.load(Ordering::SeqCst)
    );
    let tasks: Vec<_> = (0..4)
        .map(|t| {
            let sink = sink.clone();
            tokio::spawn(async move {
                for i in 0..25 {
                    assert_eq!(
                        deliver(&sink, &format!("par-{t}-{i}")).await,
                        TriggerResult::Success
                    );
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("task");
    }
    assert_eq!(app.seen().len(), 150);
    assert!(
        app.connections.load(Ordering::SeqCst) <= 8,
        "{} connections",
        app.connections.load(Ordering::SeqCst)
    );
}

/// The actor runtime calls the app through its own `Http` client: the bound on open
/// connections is the client's, so a burst of calls reuses a few kept-alive connections
/// instead of piling connects onto the app's accept queue.
#[tokio::test]
async fn http_client_opens_no_more_connections_than_its_bound() {
    let (addr, app) = http_app().await;
    let http = jobsd::delivery::Http::new(addr, None, false, 4, 4 << 20).expect("client");
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let http = http.clone();
            tokio::spawn(async move { http.call(&format!("slow-{i}"), None, None, &[]).await })
        })
        .collect();
    app.wait_in_flight(4).await;
    app.open_gate();
    for t in tasks {
        assert!(t.await.expect("task").is_ok());
    }
    assert_eq!(app.seen().len(), 40);
    assert_eq!(app.max_in_flight.load(Ordering::SeqCst), 4);
    let opened = app.connections.load(Ordering::SeqCst);
    assert!(opened <= 4, "{opened} connections for a bound of 4");
}

/// Health probes go on a connection of their own: calls holding every connection the
/// bound allows do not hold the probes back (which would make a busy app "unhealthy").
#[tokio::test]
async fn health_probes_do_not_wait_for_busy_connections() {
    let (addr, app) = http_app().await;
    let sink = Arc::new(delivery(DeliveryConfig {
        max_concurrency: Some(2),
        health: Some(fast_health()),
        ..config(addr, Protocol::Http)
    }));
    wait_health(&mut sink.health(), true).await;
    let tasks: Vec<_> = (0..2)
        .map(|i| {
            let sink = sink.clone();
            tokio::spawn(async move { deliver(&sink, &format!("slow-{i}")).await })
        })
        .collect();
    app.wait_in_flight(2).await;
    let before = app.probes.load(Ordering::SeqCst);
    common::eventually("probes while both connections are busy", async || {
        app.probes.load(Ordering::SeqCst) >= before + 3
    })
    .await;
    assert!(*sink.health().borrow(), "a busy app stays healthy");
    app.open_gate();
    for t in tasks {
        assert_eq!(t.await.expect("task"), TriggerResult::Success);
    }
}

#[tokio::test]
async fn h2c_speaks_http2() {
    let (addr, app) = http_app().await;
    let sink = delivery(config(addr, Protocol::H2c));
    let data = value_any(Kind::StringValue("x".into()));
    assert_eq!(
        sink.deliver(trigger("h2", Some(data))).await,
        TriggerResult::Success
    );
    let seen = app.last();
    assert_eq!(seen.version, axum::http::Version::HTTP_2);
    assert_eq!(seen.body, br#""x""#);
    assert_eq!(seen.header("content-type"), Some("application/json"));
}

// ---------------------------------------------------------------------------------------------
// The gRPC apps

/// One `JobEventRequest` with its token metadata and the rpc it came on.
#[derive(Debug, Clone)]
struct SeenEvent {
    rpc: &'static str,
    request: JobEventRequest,
    token: Option<String>,
    traceparent: Option<String>,
    /// jobsd's execution-context metadata (`jobsd-*`).
    context: std::collections::HashMap<String, String>,
}

#[derive(Default)]
struct GrpcApp {
    seen: Mutex<Vec<SeenEvent>>,
    /// `OnJobEvent` answers `Unimplemented` (an app built for Dapr < 1.18).
    stable_unimplemented: bool,
    /// Calls to `OnJobEvent`, answered or not.
    stable_calls: AtomicUsize,
    healthy: AtomicBool,
    probes: AtomicUsize,
}

impl GrpcApp {
    fn seen(&self) -> Vec<SeenEvent> {
        self.seen.lock().expect("lock").clone()
    }

    /// Records the event and answers by name: `notfound` → NotFound, `internal` → Internal,
    /// `unregistered` → Unimplemented (as the Python SDK does), else OK.
    fn handle(
        &self,
        rpc: &'static str,
        req: tonic::Request<JobEventRequest>,
    ) -> Result<tonic::Response<JobEventResponse>, tonic::Status> {
        let token = req
            .metadata()
            .get("dapr-api-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let traceparent = req
            .metadata()
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let context = req
            .metadata()
            .iter()
            .filter_map(|kv| match kv {
                tonic::metadata::KeyAndValueRef::Ascii(k, v)
                    if k.as_str().starts_with("jobsd-") =>
                {
                    Some((k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
                }
                _ => None,
            })
            .collect();
        let request = req.into_inner();
        let name = request.name.clone();
        self.seen.lock().expect("lock").push(SeenEvent {
            rpc,
            request,
            token,
            traceparent,
            context,
        });
        match name.as_str() {
            "notfound" => Err(tonic::Status::not_found("no such job")),
            "internal" => Err(tonic::Status::internal("boom")),
            "unregistered" => Err(tonic::Status::unimplemented("no handler")),
            "async" => {
                let mut resp = tonic::Response::new(JobEventResponse {});
                resp.metadata_mut()
                    .insert("jobsd-async", "true".parse().expect("ascii"));
                Ok(resp)
            }
            _ => Ok(tonic::Response::new(JobEventResponse {})),
        }
    }
}

#[derive(Clone)]
struct Svc(Arc<GrpcApp>);

#[tonic::async_trait]
impl AppCallback for Svc {
    async fn on_job_event(
        &self,
        req: tonic::Request<JobEventRequest>,
    ) -> Result<tonic::Response<JobEventResponse>, tonic::Status> {
        self.0.stable_calls.fetch_add(1, Ordering::SeqCst);
        if self.0.stable_unimplemented {
            return Err(tonic::Status::unimplemented("unknown method OnJobEvent"));
        }
        self.0.handle("OnJobEvent", req)
    }
}

#[tonic::async_trait]
impl AppCallbackAlpha for Svc {
    async fn on_job_event_alpha1(
        &self,
        req: tonic::Request<JobEventRequest>,
    ) -> Result<tonic::Response<JobEventResponse>, tonic::Status> {
        self.0.handle("OnJobEventAlpha1", req)
    }
}

#[tonic::async_trait]
impl AppCallbackHealthCheck for Svc {
    async fn health_check(
        &self,
        _req: tonic::Request<()>,
    ) -> Result<tonic::Response<HealthCheckResponse>, tonic::Status> {
        self.0.probes.fetch_add(1, Ordering::SeqCst);
        if self.0.healthy.load(Ordering::SeqCst) {
            Ok(tonic::Response::new(HealthCheckResponse {}))
        } else {
            Err(tonic::Status::unavailable("not ready"))
        }
    }
}

/// Which services the gRPC app registers.
#[derive(Clone, Copy)]
enum Services {
    /// AppCallback, AppCallbackAlpha and the health check (like the Python SDK's `App`).
    All,
    /// Only AppCallbackAlpha: `OnJobEvent` hits tonic's unknown-service answer.
    AlphaOnly,
}

async fn grpc_app(app: GrpcApp, services: Services) -> (SocketAddr, Arc<GrpcApp>) {
    let app = Arc::new(app);
    app.healthy.store(true, Ordering::SeqCst);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let svc = Svc(app.clone());
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    tokio::spawn(async move {
        let mut server = tonic::transport::Server::builder();
        let router = match services {
            Services::All => server
                .add_service(AppCallbackServer::new(svc.clone()))
                .add_service(AppCallbackAlphaServer::new(svc.clone()))
                .add_service(AppCallbackHealthCheckServer::new(svc)),
            Services::AlphaOnly => server.add_service(AppCallbackAlphaServer::new(svc)),
        };
        let _ = router.serve_with_incoming(incoming).await;
    });
    (addr, app)
}

// ---------------------------------------------------------------------------------------------
// gRPC delivery

#[tokio::test]
async fn grpc_sends_job_event_requests_like_daprd() {
    let (addr, app) = grpc_app(GrpcApp::default(), Services::All).await;
    let sink = delivery(config(addr, Protocol::Grpc));

    let value = value_any(Kind::StringValue("someData".into()));
    let raw = prost_types::Any {
        type_url: String::new(),
        value: b"  raw bytes stay untrimmed \n".to_vec(),
    };
    let cases = [
        ("with-value", Some(value.clone()), VALUE_URL),
        ("raw", Some(raw.clone()), ""),
        ("nodata", None, ""),
        ("empty-any", Some(prost_types::Any::default()), ""),
    ];
    for (name, data, content_type) in cases {
        let trigger = trigger(name, data.clone());
        let execution = trigger.execution_id;
        assert_eq!(
            sink.deliver(trigger).await,
            TriggerResult::Success,
            "{name}"
        );
        let seen = app.seen().last().cloned().expect("an event");
        assert_traceparent(seen.traceparent.as_deref().expect("traceparent"), execution);
        assert_context(|k| seen.context.get(k).map(String::as_str), execution);
        assert_eq!(seen.rpc, "OnJobEvent");
        assert_eq!(seen.request.name, name);
        assert_eq!(
            seen.request.data, data,
            "{name}: data passed through unchanged"
        );
        assert_eq!(seen.request.method, format!("job/{name}"));
        assert_eq!(seen.request.content_type, content_type);
        let ext = seen.request.http_extension.expect("http_extension");
        assert_eq!(ext.verb, Verb::Post as i32);
        assert_eq!(ext.querystring, "");
        assert_eq!(seen.token, None);
    }
}

#[tokio::test]
async fn grpc_sends_the_app_api_token() {
    let (addr, app) = grpc_app(GrpcApp::default(), Services::All).await;
    let sink = delivery(DeliveryConfig {
        app_api_token: Some("s3cret".into()),
        ..config(addr, Protocol::Grpc)
    });
    assert_eq!(deliver(&sink, "tok").await, TriggerResult::Success);
    assert_eq!(app.seen()[0].token.as_deref(), Some("s3cret"));
}

#[tokio::test]
async fn grpc_status_codes_map_to_results() {
    let (addr, _app) = grpc_app(GrpcApp::default(), Services::All).await;
    let sink = delivery(config(addr, Protocol::Grpc));
    assert_eq!(deliver(&sink, "ok").await, TriggerResult::Success);
    assert_eq!(deliver(&sink, "notfound").await, TriggerResult::Success);
    assert_eq!(deliver(&sink, "internal").await, TriggerResult::Failed);
    // Unimplemented from both rpcs (the Python SDK's answer for an unregistered name).
    assert_eq!(deliver(&sink, "unregistered").await, TriggerResult::Failed);
    let err = sink
        .call_once(&trigger("internal", None))
        .await
        .expect_err("internal fails");
    assert_eq!(err.grpc_code(), Some(tonic::Code::Internal as i32));
    // OK with `jobsd-async: true` metadata: the app completes it later.
    assert_eq!(deliver(&sink, "async").await, TriggerResult::Held);
    let stats = sink.stats();
    assert_eq!((stats.accepted, stats.not_found, stats.failed), (2, 1, 2));
}

#[tokio::test]
async fn grpc_falls_back_to_alpha_when_the_app_has_no_app_callback() {
    let (addr, app) = grpc_app(GrpcApp::default(), Services::AlphaOnly).await;
    let sink = delivery(config(addr, Protocol::Grpc));
    for name in ["a", "b", "notfound"] {
        assert_eq!(deliver(&sink, name).await, TriggerResult::Success);
    }
    assert_eq!(deliver(&sink, "internal").await, TriggerResult::Failed);
    assert_eq!(deliver(&sink, "async").await, TriggerResult::Held);
    let seen = app.seen();
    assert_eq!(seen.len(), 5);
    assert!(seen.iter().all(|e| e.rpc == "OnJobEventAlpha1"));
    assert_eq!(seen[0].request.method, "job/a");
    // The fallback carries the trace context too.
    assert!(seen.iter().all(|e| e.traceparent.is_some()));
}

#[tokio::test]
async fn grpc_always_tries_on_job_event_first_like_daprd() {
    let app = GrpcApp {
        stable_unimplemented: true,
        ..GrpcApp::default()
    };
    let (addr, app) = grpc_app(app, Services::All).await;
    let sink = delivery(config(addr, Protocol::Grpc));
    for i in 0..5 {
        assert_eq!(
            deliver(&sink, &format!("j{i}")).await,
            TriggerResult::Success
        );
    }
    assert_eq!(app.seen().len(), 5);
    // No memory across triggers: SDKs answer Unimplemented per job name, so each trigger
    // starts with the stable rpc and falls back on its own.
    assert_eq!(app.stable_calls.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn grpc_switches_back_when_alpha_becomes_unimplemented() {
    // A Python-style app: both rpcs answer Unimplemented for an unregistered name. The
    // memory must not make later registered names fail or skip OnJobEvent for good.
    let (addr, app) = grpc_app(GrpcApp::default(), Services::All).await;
    let sink = delivery(config(addr, Protocol::Grpc));
    assert_eq!(deliver(&sink, "unregistered").await, TriggerResult::Failed);
    assert_eq!(deliver(&sink, "ok1").await, TriggerResult::Success);
    assert_eq!(deliver(&sink, "unregistered").await, TriggerResult::Failed);
    assert_eq!(deliver(&sink, "ok2").await, TriggerResult::Success);
    let seen = app.seen();
    for name in ["ok1", "ok2"] {
        let event = seen.iter().find(|e| e.request.name == name).expect("event");
        assert_eq!(event.rpc, "OnJobEvent", "{name} went to the stable rpc");
    }
}

#[tokio::test]
async fn grpc_unreachable_app_fails_then_recovers() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let sink = delivery(config(addr, Protocol::Grpc));
    assert_eq!(deliver(&sink, "x").await, TriggerResult::Failed);

    // The app comes up on the same port; the lazy channel reconnects by itself.
    let app = Arc::new(GrpcApp::default());
    let listener = TcpListener::bind(addr).await.expect("rebind");
    let svc = Svc(app.clone());
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_service(AppCallbackServer::new(svc))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await;
    });
    common::eventually("a delivery to the app that came up", async || {
        deliver(&sink, "x").await == TriggerResult::Success
    })
    .await;
}

#[tokio::test]
async fn grpc_messages_over_the_max_body_size_fail() {
    let (addr, app) = grpc_app(GrpcApp::default(), Services::All).await;
    let sink = delivery(DeliveryConfig {
        max_body_size: 1024,
        ..config(addr, Protocol::Grpc)
    });
    let big = prost_types::Any {
        type_url: String::new(),
        value: vec![b'x'; 4096],
    };
    assert_eq!(
        sink.deliver(trigger("big", Some(big))).await,
        TriggerResult::Failed
    );
    assert!(app.seen().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Health checks

fn fast_health() -> HealthCheckConfig {
    HealthCheckConfig {
        path: "healthz".into(),
        interval: Duration::from_millis(50),
        timeout: Duration::from_secs(2),
        threshold: 2,
    }
}

fn with_health(addr: SocketAddr, protocol: Protocol) -> Delivery {
    delivery(DeliveryConfig {
        health: Some(fast_health()),
        ..config(addr, protocol)
    })
}

/// The probe loop has stopped: its task owns the health sender and the prober (probes run
/// inline in it, none is spawned), so the sender being dropped means the task is gone and
/// with it every probe it could send. A loop still running keeps the sender and this fails.
async fn assert_probes_stopped(health: &mut watch::Receiver<bool>) {
    tokio::time::timeout(common::PATIENCE, health.changed())
        .await
        .expect("loop stops")
        .expect_err("sender dropped");
}

#[tokio::test]
async fn http_health_gates_delivery() {
    let (addr, app) = http_app().await;
    let sink = with_health(addr, Protocol::Http);
    let mut health = sink.health();
    wait_health(&mut health, true).await;
    assert!(sink.is_deliverable("app||default||myapp||j"));
    assert_eq!(deliver(&sink, "j").await, TriggerResult::Success);

    app.healthy.store(false, Ordering::SeqCst);
    wait_health(&mut health, false).await;
    assert!(!sink.is_deliverable("app||default||myapp||j"));
    let before = app.seen().len();
    assert_eq!(deliver(&sink, "j").await, TriggerResult::Undeliverable);
    assert_eq!(app.seen().len(), before, "nothing sent while unhealthy");

    app.healthy.store(true, Ordering::SeqCst);
    wait_health(&mut health, true).await;
    assert_eq!(deliver(&sink, "j").await, TriggerResult::Success);
    let stats = sink.stats();
    assert_eq!((stats.accepted, stats.undeliverable), (2, 1));
}

#[tokio::test]
async fn http_health_starts_unhealthy_until_a_probe_passes() {
    let (addr, app) = http_app().await;
    app.healthy.store(false, Ordering::SeqCst);
    let sink = with_health(addr, Protocol::Http);
    assert!(!*sink.health().borrow());
    assert_eq!(deliver(&sink, "j").await, TriggerResult::Undeliverable);
    // Several failed probes later it is still unhealthy. The loop probes one at a time, so
    // the fifth probe at the app means the fourth's result was taken.
    common::eventually("five probes", async || {
        app.probes.load(Ordering::SeqCst) >= 5
    })
    .await;
    assert!(!*sink.health().borrow());
    app.healthy.store(true, Ordering::SeqCst);
    wait_health(&mut sink.health(), true).await;
}

#[tokio::test]
async fn one_failed_probe_below_the_threshold_keeps_the_app_healthy() {
    let (addr, app) = http_app().await;
    let sink = delivery(DeliveryConfig {
        health: Some(HealthCheckConfig {
            threshold: 1000,
            ..fast_health()
        }),
        ..config(addr, Protocol::Http)
    });
    let mut health = sink.health();
    wait_health(&mut health, true).await;
    app.healthy.store(false, Ordering::SeqCst);
    let probes = app.probes.load(Ordering::SeqCst);
    // Three failed probes taken: the loop probes one at a time, so a fourth has reached the
    // app once the third's result was taken.
    common::eventually("three failed probes", async || {
        app.probes.load(Ordering::SeqCst) >= probes + 4
    })
    .await;
    assert!(*health.borrow());
}

#[tokio::test]
async fn grpc_health_gates_delivery() {
    let (addr, app) = grpc_app(GrpcApp::default(), Services::All).await;
    let sink = with_health(addr, Protocol::Grpc);
    let mut health = sink.health();
    wait_health(&mut health, true).await;
    assert_eq!(deliver(&sink, "j").await, TriggerResult::Success);
    app.healthy.store(false, Ordering::SeqCst);
    wait_health(&mut health, false).await;
    assert_eq!(deliver(&sink, "j").await, TriggerResult::Undeliverable);
    app.healthy.store(true, Ordering::SeqCst);
    wait_health(&mut health, true).await;
    assert_eq!(deliver(&sink, "j").await, TriggerResult::Success);
}

#[tokio::test]
async fn unreachable_app_with_health_checks_is_undeliverable() {
    let sink = with_health(closed_port().await, Protocol::Http);
    // The first probe's answer is published even when it leaves the health as it was.
    let mut health = sink.health();
    tokio::time::timeout(common::PATIENCE, health.changed())
        .await
        .expect("the first probe answers")
        .expect("probe loop alive");
    assert!(!*health.borrow());
    assert_eq!(deliver(&sink, "j").await, TriggerResult::Undeliverable);
}

#[tokio::test]
async fn probes_stop_when_cancelled() {
    let (addr, _app) = http_app().await;
    let stop = CancellationToken::new();
    let sink = Delivery::new(
        DeliveryConfig {
            health: Some(fast_health()),
            ..config(addr, Protocol::Http)
        },
        &stop,
    )
    .expect("valid config");
    let mut health = sink.health();
    wait_health(&mut health, true).await;
    stop.cancel();
    assert_probes_stopped(&mut health).await;
}

#[tokio::test]
async fn probes_stop_when_the_delivery_is_dropped() {
    let (addr, _app) = http_app().await;
    let sink = with_health(addr, Protocol::Http);
    let mut health = sink.health();
    wait_health(&mut health, true).await;
    drop(sink);
    assert_probes_stopped(&mut health).await;
}

// ---------------------------------------------------------------------------------------------
// Resiliency

fn retries(max_retries: i64, matching: Option<Matching>) -> RetryConfig {
    RetryConfig {
        duration: Duration::from_millis(10),
        max_retries,
        matching,
        ..RetryConfig::default()
    }
}

fn with_policy(addr: SocketAddr, policy: Policy) -> Delivery {
    delivery(DeliveryConfig {
        resiliency: Some(Arc::new(policy)),
        ..config(addr, Protocol::Http)
    })
}

#[tokio::test]
async fn resiliency_retries_until_the_app_recovers() {
    let (addr, app) = http_app().await;
    let sink = with_policy(
        addr,
        Policy::new("app[myapp]", None, Some(retries(5, None)), None),
    );
    assert_eq!(deliver(&sink, "flaky").await, TriggerResult::Success);
    assert_eq!(app.seen().len(), 3);
    // One trigger, one result: retries inside the policy are not counted separately.
    assert_eq!(sink.stats().accepted, 1);
    assert_eq!(sink.stats().failed, 0);
}

#[tokio::test]
async fn resiliency_gives_up_with_the_last_failure() {
    let (addr, app) = http_app().await;
    let sink = with_policy(
        addr,
        Policy::new("app[myapp]", None, Some(retries(2, None)), None),
    );
    let err = sink
        .call(&trigger("status-503", None))
        .await
        .expect_err("always 503");
    assert_eq!(err.http_status(), Some(503));
    assert_eq!(app.seen().len(), 3);
    assert_eq!(deliver(&sink, "status-503").await, TriggerResult::Failed);
    // 404 is an answer, not a failure: no retry.
    assert_eq!(deliver(&sink, "status-404").await, TriggerResult::Success);
    assert_eq!(app.seen().len(), 7);
}

#[tokio::test]
async fn resiliency_matching_limits_what_is_retried() {
    let (addr, app) = http_app().await;
    let matching = Matching {
        http_status_codes: Some(vec![CodeRange {
            start: 500,
            end: 500,
        }]),
        grpc_status_codes: None,
    };
    let sink = with_policy(
        addr,
        Policy::new("app[myapp]", None, Some(retries(2, Some(matching))), None),
    );
    assert_eq!(deliver(&sink, "status-503").await, TriggerResult::Failed);
    assert_eq!(app.seen().len(), 1);
    assert_eq!(deliver(&sink, "status-500").await, TriggerResult::Failed);
    assert_eq!(app.seen().len(), 4);
}

#[tokio::test]
async fn resiliency_timeout_fails_a_slow_call() {
    let (addr, _app) = http_app().await;
    let sink = with_policy(
        addr,
        Policy::new("app[myapp]", Some(Duration::from_millis(20)), None, None),
    );
    assert!(matches!(
        sink.call(&trigger("slow", None)).await,
        Err(jobsd::delivery::Error::Timeout)
    ));
    assert_eq!(deliver(&sink, "slow").await, TriggerResult::Failed);
}

#[tokio::test]
async fn resiliency_open_breaker_fails_without_calling_the_app() {
    let (addr, app) = http_app().await;
    let breaker = BreakerSettings {
        timeout: Duration::from_secs(60),
        ..BreakerSettings::default()
    };
    let sink = with_policy(addr, Policy::new("app[myapp]", None, None, Some(&breaker)));
    // gobreaker's default trip: more than 5 consecutive failures.
    for _ in 0..6 {
        assert_eq!(deliver(&sink, "status-500").await, TriggerResult::Failed);
    }
    assert_eq!(app.seen().len(), 6);
    assert_eq!(deliver(&sink, "ok").await, TriggerResult::Failed);
    assert!(matches!(
        sink.call(&trigger("ok", None)).await,
        Err(jobsd::delivery::Error::Breaker(_))
    ));
    assert_eq!(app.seen().len(), 6);
}

#[tokio::test]
async fn health_path_that_is_not_a_url_path_is_a_config_error() {
    let result = Delivery::new(
        DeliveryConfig {
            health: Some(HealthCheckConfig {
                path: "/health z".into(),
                ..fast_health()
            }),
            ..config(closed_port().await, Protocol::Http)
        },
        &CancellationToken::new(),
    );
    assert!(matches!(result, Err(jobsd::delivery::Error::Config(_))));
}

/// A delivery whose calls are bounded by `--app-call-timeout` = 60 s on `clock`.
fn with_call_timeout(addr: SocketAddr, clock: &WatchedClock, policy: Option<Policy>) -> Delivery {
    delivery(DeliveryConfig {
        call_timeout: Some(CallTimeout {
            limit: Duration::from_secs(60),
            clock: Arc::new(clock.clone()),
        }),
        resiliency: policy.map(Arc::new),
        ..config(addr, Protocol::Http)
    })
}

#[tokio::test]
async fn a_call_the_app_never_answers_ends_at_the_call_timeout() {
    let (addr, app) = http_app().await;
    let clock = ManualClock::new(common::t0());
    let timers = WatchedClock::new(&clock);
    let sink = Arc::new(with_call_timeout(addr, &timers, None));
    let s = sink.clone();
    let call = tokio::spawn(async move { s.deliver_reported(trigger("slow", None)).await });
    common::eventually("the call to reach the app", async || app.seen().len() == 1).await;
    clock.set(common::t0() + chrono::TimeDelta::seconds(59));
    // The call's timer, due 60 s after the call began, has seen 59 s and sleeps on; the app
    // holds the call, so nothing else can end it.
    let due = common::t0() + chrono::TimeDelta::seconds(60);
    timers
        .slept_on(due, common::t0() + chrono::TimeDelta::seconds(59))
        .await;
    assert!(!call.is_finished(), "ended before the timeout");
    clock.set(common::t0() + chrono::TimeDelta::seconds(60));
    let report = tokio::time::timeout(common::PATIENCE, call)
        .await
        .expect("the call ends at the timeout")
        .unwrap();
    assert_eq!(report.result, TriggerResult::Failed);
    assert!(report.timed_out);
    assert_eq!(
        report.error.as_deref(),
        Some("the app did not answer within 1m0s (--app-call-timeout)")
    );
    assert_eq!(sink.stats().failed, 1);
}

#[tokio::test]
async fn a_resiliency_timeout_policy_takes_precedence_over_the_call_timeout() {
    let (addr, app) = http_app().await;
    let clock = ManualClock::new(common::t0());
    let timers = WatchedClock::new(&clock);
    let policy = Policy::new("app[myapp]", Some(Duration::from_secs(5)), None, None);
    let sink = Arc::new(with_call_timeout(addr, &timers, Some(policy)));
    let s = sink.clone();
    let call = tokio::spawn(async move { s.call(&trigger("slow", None)).await });
    common::eventually("the call to reach the app", async || app.seen().len() == 1).await;
    // The call timeout's timer is set before the call is sent: at the app with none set,
    // the call timeout is not in force, and a step of its clock past it changes nothing.
    // The policy's own timeout (5 s of real time) is the one that ends the call.
    assert_eq!(timers.timers_armed(), 0, "the call timeout is in force");
    clock.set(common::t0() + chrono::TimeDelta::hours(1));
    let result = tokio::time::timeout(common::PATIENCE, call)
        .await
        .expect("the policy's timeout ends the call")
        .unwrap();
    assert!(
        matches!(result, Err(jobsd::delivery::Error::Timeout)),
        "{result:?}"
    );
}
