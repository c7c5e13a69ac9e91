//! Tracing, end to end: the whole sidecar in-process on a manual clock, real HTTP and gRPC
//! apps that record the `traceparent` of every delivery, a real OTLP/gRPC receiver for the
//! spans, and the real binary for `--log-as-json`.

mod common;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post, put};
use chrono::TimeDelta;
use common::{any_port, clockwork, eventually, sidecar_config, t0};
use jobsd::app::Sidecar;
use jobsd::clock::ManualClock;
use jobsd::config::{self, AppProtocol};
use jobsd::proto::runtime::app_callback_server::{AppCallback, AppCallbackServer};
use jobsd::proto::runtime::{self as rv1, JobEventRequest, JobEventResponse};
use jobsd::store;
use jobsd::trigger::ExecutionId;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::{Span, span::SpanKind};
use tokio::net::TcpListener;

// ---------------------------------------------------------------------------------------------
// What the apps saw

/// One delivery as an app received it.
#[derive(Debug, Clone)]
struct Seen {
    /// Job or reminder name.
    name: String,
    /// The `traceparent` header or metadata, if any.
    traceparent: Option<String>,
}

/// Deliveries an app received; names in `fail_once` fail their first delivery.
#[derive(Clone, Default)]
struct Record {
    seen: Arc<Mutex<Vec<Seen>>>,
    fail_once: Arc<Mutex<HashSet<String>>>,
}

impl Record {
    /// Records a delivery; whether it is to fail.
    fn arrive(&self, name: &str, traceparent: Option<&str>) -> bool {
        self.seen.lock().unwrap().push(Seen {
            name: name.to_owned(),
            traceparent: traceparent.map(str::to_owned),
        });
        self.fail_once.lock().unwrap().remove(name)
    }

    fn fail_once(&self, name: &str) {
        self.fail_once.lock().unwrap().insert(name.to_owned());
    }

    /// The `traceparent`s `name`'s deliveries carried, in order (each checked well-formed).
    fn traces(&self, name: &str) -> Vec<Parsed> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.name == name)
            .map(|s| {
                let tp = s
                    .traceparent
                    .as_deref()
                    .unwrap_or_else(|| panic!("{name}: delivered without a traceparent"));
                well_formed(tp)
            })
            .collect()
    }
}

/// A `traceparent` taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Parsed {
    trace_id: String,
    span_id: String,
}

/// Checks `00-<32 lower hex, not all 0>-<16 lower hex, not all 0>-01`, written out here
/// rather than with jobsd's parser.
fn well_formed(tp: &str) -> Parsed {
    let parts: Vec<&str> = tp.split('-').collect();
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            && s.bytes().any(|b| b != b'0')
    };
    assert!(
        parts.len() == 4
            && parts[0] == "00"
            && hex(parts[1], 32)
            && hex(parts[2], 16)
            && parts[3] == "01",
        "malformed traceparent {tp:?}"
    );
    Parsed {
        trace_id: parts[1].to_owned(),
        span_id: parts[2].to_owned(),
    }
}

/// The trace id of an execution: its UUID's 32 hex digits.
fn trace_of(execution: ExecutionId) -> String {
    execution.to_string().replace('-', "")
}

// ---------------------------------------------------------------------------------------------
// Apps

/// An HTTP app serving jobs (`POST /job/{name}`) and actor `T`'s reminders.
async fn serve_http_app(record: Record) -> SocketAddr {
    async fn job(
        State(r): State<Record>,
        Path(name): Path<String>,
        headers: HeaderMap,
    ) -> StatusCode {
        let tp = headers.get("traceparent").and_then(|v| v.to_str().ok());
        if r.arrive(&name, tp) {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            StatusCode::OK
        }
    }
    async fn remind(
        State(r): State<Record>,
        Path((_t, _id, name)): Path<(String, String, String)>,
        headers: HeaderMap,
    ) -> StatusCode {
        job(State(r), Path(name), headers).await
    }
    let router = Router::new()
        .route("/job/{name}", post(job))
        .route("/actors/{t}/{id}/method/remind/{name}", put(remind))
        .route(
            "/dapr/config",
            get(|| async {
                (
                    [("content-type", "application/json")],
                    r#"{"entities":["T"]}"#,
                )
            }),
        )
        .route("/healthz", get(|| async { StatusCode::OK }))
        .with_state(record);
    let listener = TcpListener::bind(any_port()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

/// A gRPC app implementing `AppCallback.OnJobEvent`.
#[derive(Clone, Default)]
struct GrpcApp(Record);

#[tonic::async_trait]
impl AppCallback for GrpcApp {
    async fn on_job_event(
        &self,
        req: tonic::Request<JobEventRequest>,
    ) -> Result<tonic::Response<JobEventResponse>, tonic::Status> {
        let tp = req
            .metadata()
            .get("traceparent")
            .and_then(|v| v.to_str().ok());
        if self.0.arrive(&req.get_ref().name, tp) {
            Err(tonic::Status::internal("first attempt fails"))
        } else {
            Ok(tonic::Response::new(JobEventResponse {}))
        }
    }
}

async fn serve_grpc_app(app: GrpcApp) -> SocketAddr {
    let listener = TcpListener::bind(any_port()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(AppCallbackServer::new(app))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
    });
    addr
}

/// An OTLP/gRPC collector that keeps every span it is sent.
#[derive(Clone, Default)]
struct Collector {
    requests: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.requests.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

impl Collector {
    async fn serve(&self) -> SocketAddr {
        let listener = TcpListener::bind(any_port()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let svc = TraceServiceServer::new(self.clone());
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                .await
        });
        addr
    }

    fn spans(&self) -> Vec<Span> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .flat_map(|r| &r.resource_spans)
            .flat_map(|r| &r.scope_spans)
            .flat_map(|s| s.spans.clone())
            .collect()
    }

    /// `name`'s spans, by attempt.
    fn spans_of(&self, name: &str) -> Vec<Span> {
        let mut spans: Vec<Span> = self
            .spans()
            .into_iter()
            .filter(|s| string_attr(s, "jobsd.job.name").as_deref() == Some(name))
            .collect();
        spans.sort_by_key(|s| int_attr(s, "jobsd.attempt"));
        spans
    }

    fn service_names(&self) -> Vec<String> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .flat_map(|r| &r.resource_spans)
            .filter_map(|r| r.resource.as_ref())
            .flat_map(|r| &r.attributes)
            .filter(|kv| kv.key == "service.name")
            .filter_map(|kv| match kv.value.as_ref()?.value.as_ref()? {
                Value::StringValue(s) => Some(s.clone()),
                _ => None,
            })
            .collect()
    }
}

fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
}

fn string_attr(span: &Span, key: &str) -> Option<String> {
    match attr(span, key)? {
        Value::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

fn int_attr(span: &Span, key: &str) -> Option<i64> {
    match attr(span, key)? {
        Value::IntValue(i) => Some(*i),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

// ---------------------------------------------------------------------------------------------
// The sidecar

struct Running {
    sidecar: Sidecar,
    clock: ManualClock,
    http: SocketAddr,
}

impl Running {
    async fn start(cfg: config::Sidecar) -> Running {
        let clock = ManualClock::new(t0());
        let sidecar =
            Sidecar::start_with(cfg, Arc::new(store::Memory::new()), Arc::new(clock.clone()))
                .await
                .unwrap();
        let http = sidecar.http_addrs[0];
        Running {
            sidecar,
            clock,
            http,
        }
    }

    /// Creates a job over HTTP with `headers`; Dapr's 204 whatever the headers say.
    async fn post(&self, name: &str, body: &str, headers: &[(&str, &str)]) {
        let path = format!("/v1.0-alpha1/jobs/{name}");
        let mut all = vec![("content-type", "application/json")];
        all.extend_from_slice(headers);
        let resp = common::http(self.http, "POST", &path, &all, body.as_bytes()).await;
        assert_eq!(resp.status, 204, "{}", resp.text());
        assert_eq!(resp.body, b"");
    }

    /// Registers reminder `name` of actor `T/1`, once the runtime has read the app's config.
    async fn remind(&self, name: &str, body: &str, headers: &[(&str, &str)]) {
        let path = format!("/v1.0/actors/T/1/reminders/{name}");
        eventually("the reminder registered", async || {
            common::http(self.http, "POST", &path, headers, body.as_bytes())
                .await
                .status
                == 204
        })
        .await;
    }

    async fn run_for(&self, d: TimeDelta) {
        clockwork::run_for(self.sidecar.engine().unwrap(), &self.clock, d).await;
    }

    async fn stop(self) {
        self.sidecar.shutdown_token().cancel();
        self.sidecar.wait().await.unwrap();
    }
}

fn app_key(name: &str) -> String {
    format!("app||default||myapp||{name}")
}

// ---------------------------------------------------------------------------------------------
// traceparent on deliveries

/// Every delivery carries a well-formed `traceparent`: the retry of a tick shares its trace
/// (the execution id), with a span id of its own; two ticks are two traces.
async fn one_trace_per_execution(protocol: AppProtocol, record: &Record, app: SocketAddr) {
    record.fail_once("flaky");
    let r = Running::start(sidecar_config(Some(app), protocol, &[])).await;
    r.post("flaky", r#"{"dueTime":"0s"}"#, &[]).await;
    r.post("tick", r#"{"schedule":"@every 1s","repeats":2}"#, &[])
        .await;
    r.run_for(TimeDelta::seconds(10)).await;

    let flaky = record.traces("flaky");
    assert_eq!(flaky.len(), 2, "a failed attempt and its retry");
    assert_eq!(flaky[0].trace_id, flaky[1].trace_id);
    assert_ne!(flaky[0].span_id, flaky[1].span_id);
    assert_eq!(
        flaky[0].trace_id,
        trace_of(ExecutionId::for_tick(&app_key("flaky"), t0())),
        "the trace id is the execution id"
    );
    let ticks = record.traces("tick");
    assert_eq!(ticks.len(), 2);
    assert_ne!(ticks[0].trace_id, ticks[1].trace_id, "one trace per tick");
    r.stop().await;
}

#[tokio::test]
async fn http_deliveries_carry_one_trace_per_execution() {
    let record = Record::default();
    let app = serve_http_app(record.clone()).await;
    one_trace_per_execution(AppProtocol::Http, &record, app).await;
}

#[tokio::test]
async fn grpc_deliveries_carry_one_trace_per_execution() {
    let record = Record::default();
    let app = serve_grpc_app(GrpcApp(record.clone())).await;
    one_trace_per_execution(AppProtocol::Grpc, &record, app).await;
}

// ---------------------------------------------------------------------------------------------
// OTLP

const CREATE_HTTP: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const CREATE_GRPC: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const CREATE_REMINDER: &str = "00-11111111111111111111111111111111-2222222222222222-00";

/// Each delivery attempt becomes a span at the collector: trace id = execution id, span id
/// = the one the app was sent, the attempt's attributes, and a link to the create's trace
/// context when the create (HTTP, gRPC or a reminder registration) sent a valid one.
#[tokio::test]
async fn otlp_receives_a_span_per_attempt_linked_to_the_create() {
    let collector = Collector::default();
    let endpoint = collector.serve().await;
    let record = Record::default();
    record.fail_once("flaky");
    record.fail_once("nudge");
    let app = serve_http_app(record.clone()).await;
    let mut cfg = sidecar_config(Some(app), AppProtocol::Http, &[]);
    cfg.otlp_endpoint = Some(format!("http://{endpoint}"));
    let r = Running::start(cfg).await;

    r.post(
        "flaky",
        r#"{"dueTime":"0s"}"#,
        &[("traceparent", CREATE_HTTP)],
    )
    .await;
    r.post("plain", r#"{"dueTime":"0s"}"#, &[]).await;
    // A malformed context is not stored (and the create answers as Dapr does).
    r.post(
        "badtp",
        r#"{"dueTime":"0s"}"#,
        &[("traceparent", "00-XYZ-b7ad6b7169203331-01")],
    )
    .await;
    let mut grpc =
        rv1::dapr_client::DaprClient::connect(format!("http://{}", r.sidecar.grpc_addrs[0]))
            .await
            .unwrap();
    let mut req = tonic::Request::new(rv1::ScheduleJobRequest {
        job: Some(rv1::Job {
            name: "viagrpc".into(),
            due_time: Some("0s".into()),
            ..Default::default()
        }),
        overwrite: false,
    });
    req.metadata_mut()
        .insert("traceparent", CREATE_GRPC.parse().unwrap());
    grpc.schedule_job_alpha1(req).await.unwrap();
    r.remind(
        "nudge",
        r#"{"dueTime":"0s"}"#,
        &[("traceparent", CREATE_REMINDER)],
    )
    .await;

    r.run_for(TimeDelta::seconds(10)).await;
    assert_eq!(record.traces("nudge").len(), 2);
    // Spans go out while the sidecar runs (the batch processor's own schedule), …
    eventually("a span at the collector", async || {
        !collector.spans().is_empty()
    })
    .await;
    // … and the rest when it stops.
    r.stop().await;

    let expected: HashMap<&str, (usize, Option<&str>, &str)> = [
        ("flaky", (2, Some(CREATE_HTTP), "job.trigger")),
        ("plain", (1, None, "job.trigger")),
        ("badtp", (1, None, "job.trigger")),
        ("viagrpc", (1, Some(CREATE_GRPC), "job.trigger")),
        ("nudge", (2, Some(CREATE_REMINDER), "actor.reminder")),
    ]
    .into();
    for (name, (attempts, link, span_name)) in expected {
        let spans = collector.spans_of(name);
        let sent = record.traces(name);
        assert_eq!(spans.len(), attempts, "{name}: {spans:#?}");
        assert_eq!(sent.len(), attempts, "{name}");
        for (i, (span, sent)) in spans.iter().zip(&sent).enumerate() {
            let attempt = i as i64 + 1;
            assert_eq!(span.name, span_name);
            assert_eq!(span.kind, SpanKind::Client as i32);
            assert_eq!(hex(&span.trace_id), sent.trace_id, "{name}");
            assert_eq!(hex(&span.span_id), sent.span_id, "{name}");
            assert_eq!(
                string_attr(span, "jobsd.execution.id").map(|e| e.replace('-', "")),
                Some(sent.trace_id.clone())
            );
            assert_eq!(int_attr(span, "jobsd.attempt"), Some(attempt), "{name}");
            let lateness = int_attr(span, "jobsd.lateness_ms").expect("lateness");
            assert!(lateness >= 0, "{name}: {lateness}");
            assert_eq!(string_attr(span, "jobsd.app_id").as_deref(), Some("myapp"));
            assert_eq!(
                string_attr(span, "jobsd.namespace").as_deref(),
                Some("default")
            );
            let outcome = if attempt < attempts as i64 {
                "failed"
            } else {
                "success"
            };
            assert_eq!(
                string_attr(span, "jobsd.outcome").as_deref(),
                Some(outcome),
                "{name}"
            );
            assert!(span.end_time_unix_nano >= span.start_time_unix_nano);
            let links: Vec<String> = span
                .links
                .iter()
                .map(|l| {
                    format!(
                        "00-{}-{}-{:02x}",
                        hex(&l.trace_id),
                        hex(&l.span_id),
                        l.flags & 0xff
                    )
                })
                .collect();
            assert_eq!(links, link.into_iter().collect::<Vec<_>>(), "{name}");
        }
        assert_eq!(
            sent.iter()
                .map(|s| &s.trace_id)
                .collect::<HashSet<_>>()
                .len(),
            1,
            "{name}: attempts share the trace"
        );
    }
    let nudge = &collector.spans_of("nudge")[0];
    assert_eq!(string_attr(nudge, "jobsd.actor.type").as_deref(), Some("T"));
    assert_eq!(string_attr(nudge, "jobsd.actor.id").as_deref(), Some("1"));
    assert!(
        collector.service_names().iter().all(|s| s == "myapp"),
        "{:?}",
        collector.service_names()
    );
}

/// A collector that is not there costs nothing: every job is delivered and the sidecar stops.
#[tokio::test]
async fn an_absent_collector_never_holds_deliveries_back() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let record = Record::default();
    let app = serve_http_app(record.clone()).await;
    let mut cfg = sidecar_config(Some(app), AppProtocol::Http, &[]);
    cfg.otlp_endpoint = Some(format!("http://{closed}"));
    let r = Running::start(cfg).await;
    for i in 0..20 {
        r.post(&format!("j{i}"), r#"{"dueTime":"0s"}"#, &[]).await;
    }
    r.run_for(TimeDelta::seconds(1)).await;
    for i in 0..20 {
        assert_eq!(record.traces(&format!("j{i}")).len(), 1);
    }
    r.stop().await;
}

// ---------------------------------------------------------------------------------------------
// --log-as-json

/// `--log-as-json` writes one JSON object per line, each with a timestamp, a level and a
/// message, from start to shutdown.
#[test]
fn log_as_json_writes_json_lines() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    let dir = tempfile::tempdir().unwrap();
    let free = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
            .to_string()
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_jobsd"))
        .args([
            "--app-id",
            "logs",
            "--log-as-json",
            "--dapr-listen-addresses",
        ])
        .args(["127.0.0.1", "--dapr-http-port", &free()])
        .args(["--dapr-grpc-port", &free(), "--metrics-port", &free()])
        .arg("--data-dir")
        .arg(dir.path())
        .env_remove("DAPR_SCHEDULER_HOST_ADDRESS_DNS_A")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut lines = Vec::new();
    let deadline = Instant::now() + common::PATIENCE;
    while !lines.iter().any(|l: &String| l.contains("sidecar ready")) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.min(Duration::from_secs(1))) {
            Ok(line) => lines.push(line),
            Err(_) => {
                if Instant::now() >= deadline {
                    let _ = child.kill();
                    panic!("no ready line: {lines:#?}");
                }
            }
        }
    }
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = child.wait().unwrap();
    reader.join().unwrap();
    lines.extend(rx.try_iter());
    assert!(status.success(), "{status}: {lines:#?}");

    assert!(lines.len() >= 2, "{lines:#?}");
    for line in &lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
        let ts = v["timestamp"].as_str().unwrap_or_else(|| panic!("{line}"));
        assert!(
            chrono::DateTime::parse_from_rfc3339(ts).is_ok(),
            "timestamp {ts:?}"
        );
        assert!(
            ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"]
                .contains(&v["level"].as_str().unwrap_or("")),
            "{line}"
        );
        assert!(
            v["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{line}"
        );
    }
    let ready = lines
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| {
            v["message"]
                .as_str()
                .unwrap_or("")
                .contains("sidecar ready")
        })
        .unwrap();
    // Fields stay fields: the app id is a key of its own, not text in the message.
    assert_eq!(ready["app_id"], "logs", "{ready}");
    assert!(
        lines.iter().any(|l| l.contains("jobsd stopped")),
        "{lines:#?}"
    );
}
