//! Trigger-delivery benchmark for a running jobsd (issue 4) — a benchmark, never a CI test.
//!
//! One binary, two roles:
//!
//! - `app --port P`: a minimal HTTP app. `POST /job/<name>` answers 200 at once and records
//!   the arrival (wall clock, unix ns) and the job name. With `--complete-via ADDR` it is an
//!   async app instead (issue 13, async completion): it answers `202` with
//!   `Jobsd-Async: true`, then completes the execution through jobsd's
//!   `POST /jobsd/v1/executions/{id}/complete` at ADDR, and records the moment that call was
//!   answered (so a burst measures executions completed per second). The id is the
//!   `Jobsd-Execution-Id` header, or (from a jobsd without it) the one derived from the job's
//!   key and the nominal time in its data. Control endpoints for the driver:
//!   `GET /_count` (records held), `POST /_take` (the records as `<ns> <name>` lines, then
//!   forgets them), `POST /_clear`.
//! - the driver subcommands, which create jobs over gRPC (`Dapr/ScheduleJob`) and read the
//!   app's records afterwards. Every job's nominal time follows from its name (`<prefix>-<i>`)
//!   and the run's parameters, so the app does no parsing in the hot path. The data of every
//!   job is `{"due":"<RFC 3339 nominal time>"}` all the same.
//!   - `burst`: N one-shot jobs all due at one instant T (T = now + measured create time × 2 +
//!     3 s); waits (bounded) for all N arrivals; deliveries/s = N / (last − T) and
//!     N / (last − first), lateness (arrival − T) p50/p99/max, duplicates, missing, and the CPU
//!     jobsd and the app used meanwhile (jobsd by thread).
//!   - `steady`: RATE triggers/s for SECS s. `--kind recurring` (default): RATE jobs with
//!     `schedule: "@every 1s"`, `repeats: SECS`, dueTime = S + i/RATE s, so the engine fires
//!     RATE/1000 jobs per ms, every second, through its reschedule path (counter write,
//!     next tick queued). `--kind oneshot`: RATE × SECS one-shots due S + i/RATE s.
//!     Lateness of every trigger = arrival − nominal (the k-th arrival of job i is its tick
//!     k: the engine never has two ticks of a job out at once and catches up from the nominal
//!     time, never skipping).
//!   - `fill`: N one-shot jobs due far ahead (RSS with many scheduled jobs).
//!   - `probe`: one one-shot job due at now + `--due-in-ms`; prints its due time (unix ns).
//!   - `clear`: forget the app's records.
//!   - `wait-restart`: polls jobsd's `/v1.0/healthz` and the app at once; prints
//!     `healthz_ns first_ns` once healthz answered 204 and a job named `--prefix…` arrived.
//!
//! Every measuring subcommand prints human lines and one `RESULT key=value …` line for
//! `e2e/bench/triggers.sh`.

#[path = "common/accept.rs"]
mod accept;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use clap::{Args, Parser, Subcommand, ValueEnum};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use jobsd::proto::jobsd_api::{
    ScheduleJobRequest as JobsScheduleRequest, ScheduleJobsRequest, jobs_client::JobsClient,
};
use jobsd::proto::runtime::{Job, ScheduleJobRequest, dapr_client::DaprClient};
use prost::Message;
use tokio::net::{TcpListener, TcpStream};
use tonic::transport::{Channel, Endpoint};

#[derive(Debug, Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// The HTTP app jobsd delivers to.
    App(AppArgs),
    /// N one-shot jobs due at the same instant.
    Burst(BurstArgs),
    /// RATE triggers/s for SECS seconds.
    Steady(SteadyArgs),
    /// N jobs due far in the future.
    Fill(FillArgs),
    /// One job due at now + --due-in-ms; prints its due time (unix ns).
    Probe(ProbeArgs),
    /// Forget the app's records; prints how many there were.
    Clear(Target),
    /// After a (re)start: print `healthz_ns first_ns`.
    WaitRestart(WaitRestartArgs),
}

#[derive(Debug, Args)]
struct AppArgs {
    /// Port on 127.0.0.1.
    #[arg(long)]
    port: u16,
    /// Runtime worker threads (1 = a current-thread runtime).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Also speak HTTP/2 without TLS (for jobsd's `--app-protocol h2c`) to clients that
    /// open with the HTTP/2 preface.
    #[arg(long)]
    h2c: bool,
    /// Answer `202` + `Jobsd-Async: true` and complete each execution through jobsd's HTTP
    /// API at this address (async completion); records the completions.
    #[arg(long)]
    complete_via: Option<SocketAddr>,
    /// Async mode: complete calls in flight at once (a worker pool, over as many kept-alive
    /// connections).
    #[arg(long, default_value_t = 64)]
    complete_concurrency: usize,
}

/// Where jobsd and the app are.
#[derive(Debug, Clone, Args)]
struct Target {
    /// jobsd's HTTP API.
    #[arg(long, default_value = "127.0.0.1:3500")]
    http: SocketAddr,
    /// jobsd's gRPC API.
    #[arg(long, default_value = "127.0.0.1:50001")]
    grpc: SocketAddr,
    /// The bench app (`app`).
    #[arg(long, default_value = "127.0.0.1:3000")]
    app: SocketAddr,
    /// jobsd's pid: CPU by thread, VmRSS/VmHWM.
    #[arg(long)]
    jobsd_pid: Option<u32>,
    /// The app's pid: its CPU.
    #[arg(long)]
    app_pid: Option<u32>,
}

/// How jobs are created.
#[derive(Debug, Clone, Args)]
struct Create {
    /// Creates in flight.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// HTTP/2 channels they share.
    #[arg(long, default_value_t = 4)]
    channels: usize,
    /// Jobs per call: 0 creates each with Dapr's `ScheduleJob`; N sends N per call of
    /// jobsd's `jobsd.v1.Jobs/ScheduleJobs` (each of the `concurrency` calls in flight).
    #[arg(long, default_value_t = 0)]
    batch: u64,
    /// Jobs per second to offer (0: each call as soon as the one before it answers). Paced,
    /// each call is sent at its own time and its latency counts from that time, so a call
    /// held back because every sender waits on a slow server counts as late.
    #[arg(long, default_value_t = 0)]
    pace: u64,
}

#[derive(Debug, Args)]
struct BurstArgs {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    create: Create,
    /// Jobs.
    #[arg(short = 'n', long, default_value_t = 100_000)]
    jobs: u64,
    /// Names are `b<run-id>-<i>`.
    #[arg(long, default_value = "1")]
    run_id: String,
    /// Seconds between T and giving up waiting.
    #[arg(long, default_value_t = 300)]
    timeout_secs: u64,
    /// Give up when no delivery arrived for this many seconds (after T).
    #[arg(long, default_value_t = 30)]
    stall_secs: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Kind {
    /// RATE jobs `@every 1s` × SECS repeats.
    Recurring,
    /// RATE × SECS one-shot jobs.
    Oneshot,
}

#[derive(Debug, Args)]
struct SteadyArgs {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    create: Create,
    /// Triggers per second.
    #[arg(long, default_value_t = 5000)]
    rate: u64,
    /// Seconds.
    #[arg(long, default_value_t = 60)]
    secs: u64,
    /// How the load is made.
    #[arg(long, value_enum, default_value_t = Kind::Recurring)]
    kind: Kind,
    /// Names are `s<run-id>-<i>`.
    #[arg(long, default_value = "1")]
    run_id: String,
    /// Give up when no delivery arrived for this many seconds (after the start).
    #[arg(long, default_value_t = 30)]
    stall_secs: u64,
}

#[derive(Debug, Args)]
struct FillArgs {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    create: Create,
    /// Jobs.
    #[arg(short = 'n', long, default_value_t = 1_000_000)]
    jobs: u64,
    /// Due this many hours from now.
    #[arg(long, default_value_t = 48)]
    due_in_hours: i64,
    /// A mix instead: 60 % one-shots spread over the week after `due_in_hours`, 30 %
    /// `@every` 1 min – 1 day and 10 % cron (daily / weekly), each first due at a time spread
    /// over that week.
    #[arg(long)]
    mix: bool,
    /// Names are `f<run-id>-<i>`.
    #[arg(long, default_value = "1")]
    run_id: String,
}

#[derive(Debug, Args)]
struct ProbeArgs {
    #[command(flatten)]
    target: Target,
    /// Job name.
    #[arg(long, default_value = "probe")]
    name: String,
    /// Due this many ms from now.
    #[arg(long, default_value_t = 5000)]
    due_in_ms: i64,
}

#[derive(Debug, Args)]
struct WaitRestartArgs {
    #[command(flatten)]
    target: Target,
    /// The first arrival whose name starts with this counts.
    #[arg(long, default_value = "probe")]
    prefix: String,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    if let Cmd::App(args) = &cli.cmd {
        let runtime = if args.threads <= 1 {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
        } else {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(args.threads)
                .enable_all()
                .build()?
        };
        let complete = args.complete_via.map(|at| (at, args.complete_concurrency));
        return runtime.block_on(app(args.port, args.h2c, complete));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match cli.cmd {
            Cmd::App(_) => unreachable!(),
            Cmd::Burst(args) => burst(args).await,
            Cmd::Steady(args) => steady(args).await,
            Cmd::Fill(args) => fill(args).await,
            Cmd::Probe(args) => probe(args).await,
            Cmd::Clear(target) => {
                println!("{}", take(target.app).await?.len());
                Ok(())
            }
            Cmd::WaitRestart(args) => wait_restart(args).await,
        }
    })
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

fn ns_to_time(ns: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_nanos(ns)
}

// ---------------------------------------------------------------------------------------
// The app
// ---------------------------------------------------------------------------------------

/// One delivery as the app saw it.
struct Rec {
    at_ns: i64,
    name: Box<str>,
}

#[derive(Default)]
struct AppState {
    recs: Mutex<Vec<Rec>>,
    /// Async mode: where to complete executions, over pooled keep-alive connections, and
    /// how many complete calls may be in flight at once.
    complete: Option<(SocketAddr, Completer, Arc<tokio::sync::Semaphore>)>,
}

/// A pooled HTTP/1.1 client for jobsd's execution routes.
type Completer = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    Full<Bytes>,
>;

async fn app(port: u16, h2c: bool, complete_via: Option<(SocketAddr, usize)>) -> Result<()> {
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .with_context(|| format!("bind 127.0.0.1:{port}"))?;
    eprintln!("bench app listening on 127.0.0.1:{port}");
    let complete = complete_via.map(|(addr, concurrency)| {
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .pool_max_idle_per_host(concurrency)
                .build_http();
        let slots = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
        (addr, client, slots)
    });
    let state = Arc::new(AppState {
        recs: Mutex::default(),
        complete,
    });
    accept::accept_loop(listener, |stream| {
        let state = state.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| handle(state.clone(), req));
            // The driver's control calls speak HTTP/1.1 even when jobsd speaks h2c: look at
            // the connection preface.
            let mut head = [0u8; 3];
            let is_h2 = h2c && matches!(stream.peek(&mut head).await, Ok(3) if &head == b"PRI");
            if is_h2 {
                let _ = hyper::server::conn::http2::Builder::new(LocalExec)
                    .max_concurrent_streams(None)
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            } else {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            }
        });
    })
    .await
}

/// Runs HTTP/2 stream tasks on the app's runtime.
#[derive(Clone, Copy)]
struct LocalExec;

impl<F> hyper::rt::Executor<F> for LocalExec
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        tokio::spawn(fut);
    }
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r
}

async fn handle(
    state: Arc<AppState>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let at_ns = now_ns();
    let path = req.uri().path();
    if req.method() == Method::POST
        && let Some(name) = path.strip_prefix("/job/")
    {
        let name: Box<str> = name.into();
        if state.complete.is_some() {
            return Ok(later(state, name, req).await);
        }
        // Read the (small) body so the connection stays reusable.
        let _ = req.into_body().collect().await;
        state
            .recs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Rec { at_ns, name });
        return Ok(text(StatusCode::OK, Bytes::new()));
    }
    let resp = match path {
        "/_count" => {
            let n = state
                .recs
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .len();
            text(StatusCode::OK, n.to_string())
        }
        "/_take" | "/_clear" => {
            let recs = std::mem::take(
                &mut *state
                    .recs
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            if path == "/_clear" {
                text(StatusCode::OK, recs.len().to_string())
            } else {
                let mut out = String::with_capacity(recs.len() * 32);
                for r in &recs {
                    out.push_str(&r.at_ns.to_string());
                    out.push(' ');
                    out.push_str(&r.name);
                    out.push('\n');
                }
                text(StatusCode::OK, out)
            }
        }
        _ => text(StatusCode::NOT_FOUND, Bytes::new()),
    };
    Ok(resp)
}

/// Async mode: answers `202` + `Jobsd-Async: true` and completes the execution through
/// jobsd once that answer is out, recording when jobsd answered the complete.
async fn later(
    state: Arc<AppState>,
    name: Box<str>,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let header = req
        .headers()
        .get("jobsd-execution-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = req.into_body().collect().await.map(|b| b.to_bytes());
    let id = header.or_else(|| {
        // Derived as jobsd derives it: the job's key and its nominal time (in the data).
        let body = body.ok()?;
        let data: serde_json::Value = serde_json::from_slice(&body).ok()?;
        let due = DateTime::parse_from_rfc3339(data.get("due")?.as_str()?).ok()?;
        let key = format!("app||default||myapp||{name}");
        Some(jobsd::trigger::ExecutionId::for_tick(&key, due.with_timezone(&Utc)).to_string())
    });
    let Some(id) = id else {
        return text(StatusCode::BAD_REQUEST, "no execution id");
    };
    tokio::spawn(async move {
        let Some((addr, client, slots)) = &state.complete else {
            return;
        };
        let Ok(_slot) = slots.acquire().await else {
            return;
        };
        let uri = format!("http://{addr}/jobsd/v1/executions/{id}/complete");
        for _ in 0..100 {
            let req = Request::post(&uri)
                .body(Full::new(Bytes::new()))
                .expect("a valid request");
            match client.request(req).await {
                Ok(resp) if resp.status() == StatusCode::OK => {
                    let _ = resp.into_body().collect().await;
                    state
                        .recs
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(Rec {
                            at_ns: now_ns(),
                            name,
                        });
                    return;
                }
                Ok(resp) => {
                    let status = resp.status();
                    let _ = resp.into_body().collect().await;
                    eprintln!("complete {id}: {status}");
                    return;
                }
                // Out of sockets or connections for a moment: try again.
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    });
    let mut r = text(StatusCode::ACCEPTED, Bytes::new());
    r.headers_mut().insert(
        "jobsd-async",
        hyper::header::HeaderValue::from_static("true"),
    );
    r
}

// ---------------------------------------------------------------------------------------
// Talking to the app and to jobsd's HTTP API
// ---------------------------------------------------------------------------------------

/// One request on a fresh connection; the status and body.
async fn http_call(addr: SocketAddr, method: Method, path: &str) -> Result<(StatusCode, Bytes)> {
    let stream = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connect {addr}"))?;
    stream.set_nodelay(true)?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, addr.to_string())
        .body(Full::new(Bytes::new()))?;
    let resp = sender.send_request(req).await?;
    let status = resp.status();
    let body = resp.into_body().collect().await?.to_bytes();
    Ok((status, body))
}

async fn app_count(app: SocketAddr) -> Result<u64> {
    let (_, body) = http_call(app, Method::GET, "/_count").await?;
    Ok(std::str::from_utf8(&body)?.trim().parse()?)
}

/// The app's records (and it forgets them).
async fn take(app: SocketAddr) -> Result<Vec<(i64, String)>> {
    let (status, body) = http_call(app, Method::POST, "/_take").await?;
    if status != StatusCode::OK {
        bail!("app /_take: {status}");
    }
    let text = std::str::from_utf8(&body)?;
    let mut out = Vec::new();
    for line in text.lines() {
        let (ns, name) = line.split_once(' ').context("bad record line")?;
        out.push((ns.parse()?, name.to_owned()));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Creating jobs
// ---------------------------------------------------------------------------------------

/// `{"due":"<time>"}` as a `google.protobuf.Value`, which the app receives as JSON text.
fn due_data(due: DateTime<Utc>) -> prost_types::Any {
    use prost_types::value::Kind;
    let mut fields = BTreeMap::new();
    fields.insert(
        "due".to_owned(),
        prost_types::Value {
            kind: Some(Kind::StringValue(
                due.to_rfc3339_opts(SecondsFormat::Micros, true),
            )),
        },
    );
    let value = prost_types::Value {
        kind: Some(Kind::StructValue(prost_types::Struct { fields })),
    };
    prost_types::Any {
        type_url: "type.googleapis.com/google.protobuf.Value".into(),
        value: value.encode_to_vec(),
    }
}

fn one_shot(name: String, due: DateTime<Utc>) -> ScheduleJobRequest {
    ScheduleJobRequest {
        job: Some(Job {
            name,
            due_time: Some(due.to_rfc3339_opts(SecondsFormat::Micros, true)),
            data: Some(due_data(due)),
            ..Default::default()
        }),
        overwrite: false,
    }
}

fn every_second(name: String, due: DateTime<Utc>, repeats: u32) -> ScheduleJobRequest {
    ScheduleJobRequest {
        job: Some(Job {
            name,
            schedule: Some("@every 1s".into()),
            repeats: Some(repeats),
            due_time: Some(due.to_rfc3339_opts(SecondsFormat::Micros, true)),
            data: Some(due_data(due)),
            ..Default::default()
        }),
        overwrite: false,
    }
}

async fn connect_grpc(addr: SocketAddr) -> Result<Channel> {
    Endpoint::from_shared(format!("http://{addr}"))?
        .tcp_nodelay(true)
        .connect()
        .await
        .with_context(|| format!("connect grpc {addr}"))
}

/// What a batch of creates took.
struct Created {
    secs: f64,
    /// When 90 % of the jobs were created (seconds after the start).
    secs_at_90: f64,
    errors: u64,
    /// How long each call took (one job, or one batch of them), in ns.
    calls_ns: Vec<i64>,
    /// For each call, in the order of `calls_ns`: when it was sent (paced: due), in ns after
    /// the start.
    sent_ns: Vec<i64>,
}

impl Created {
    fn rate(&self, n: u64) -> f64 {
        n as f64 / self.secs.max(1e-9)
    }

    /// The rate of the last 10 % (the store at its fullest).
    fn tail_rate(&self, n: u64) -> f64 {
        (n - n * 9 / 10) as f64 / (self.secs - self.secs_at_90).max(1e-9)
    }
}

/// Job `i` of `--mix`: 60 % one-shots, 30 % `@every` 1 min – 1 day, 10 % cron, first due at
/// `from` plus a spread over a week (a fixed stride, so runs are alike).
fn mixed(name: String, from: DateTime<Utc>, i: u64) -> ScheduleJobRequest {
    const WEEK_S: u64 = 7 * 24 * 3600;
    let due = from + TimeDelta::seconds((i.wrapping_mul(7919) % WEEK_S) as i64);
    let mut req = one_shot(name, due);
    let job = req.job.as_mut().expect("one_shot sets the job");
    match i % 10 {
        0..=5 => {}
        6..=8 => {
            const EVERY: [&str; 6] = ["1m", "5m", "15m", "1h", "6h", "24h"];
            job.schedule = Some(format!("@every {}", EVERY[(i / 10 % 6) as usize]));
        }
        _ => {
            let (m, h) = (i / 10 % 60, i / 600 % 24);
            job.schedule = Some(if (i / 10).is_multiple_of(2) {
                format!("0 {m} {h} * * *")
            } else {
                format!("0 {m} {h} * * {}", i / 20 % 7)
            });
        }
    }
    req
}

/// Creates jobs `0..n` (request `make(i)`) with `create.concurrency` in flight over
/// `create.channels` channels. Aborts after 100 errors.
async fn create_jobs<F>(
    grpc: SocketAddr,
    create: &Create,
    n: u64,
    progress: bool,
    make: F,
) -> Result<Created>
where
    F: Fn(u64) -> ScheduleJobRequest + Send + Sync + 'static,
{
    let mut channels = Vec::new();
    for _ in 0..create.channels.max(1) {
        channels.push(connect_grpc(grpc).await?);
    }
    let make = Arc::new(make);
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let abort = Arc::new(AtomicBool::new(false));
    let first_error = Arc::new(Mutex::new(None::<String>));
    let start = Instant::now();
    let at_90 = Arc::new(Mutex::new(None::<f64>));
    let n_90 = n * 9 / 10;
    let mut tasks = tokio::task::JoinSet::<Vec<(i64, i64)>>::new();
    let (batch, pace) = (create.batch, create.pace);
    for t in 0..create.concurrency.max(1) {
        let channel = channels[t % channels.len()].clone();
        let mut client = DaprClient::new(channel.clone());
        let mut jobs_client = JobsClient::new(channel);
        let (make, next, done, errors, abort, first_error, at_90) = (
            make.clone(),
            next.clone(),
            done.clone(),
            errors.clone(),
            abort.clone(),
            first_error.clone(),
            at_90.clone(),
        );
        tasks.spawn(async move {
            let step = batch.max(1);
            let mut calls_ns = Vec::new();
            loop {
                let from = next.fetch_add(step, Ordering::Relaxed);
                if from >= n || abort.load(Ordering::Relaxed) {
                    return calls_ns;
                }
                let to = (from + step).min(n);
                let sent = if pace > 0 {
                    let at = start + Duration::from_secs_f64(from as f64 / pace as f64);
                    tokio::time::sleep_until(at.into()).await;
                    at
                } else {
                    Instant::now()
                };
                // Per job: `None` when created, else why not.
                let answers: Vec<Option<String>> = if batch == 0 {
                    match client.schedule_job(make(from)).await {
                        Ok(_) => vec![None],
                        Err(s) => vec![Some(format!("{:?}: {}", s.code(), s.message()))],
                    }
                } else {
                    let jobs = (from..to)
                        .map(|i| {
                            let req = make(i);
                            JobsScheduleRequest {
                                job: req.job,
                                overwrite: req.overwrite,
                                ..Default::default()
                            }
                        })
                        .collect();
                    match jobs_client
                        .schedule_jobs(ScheduleJobsRequest { jobs })
                        .await
                    {
                        Ok(r) => r
                            .into_inner()
                            .results
                            .into_iter()
                            .map(|r| (r.code != 0).then(|| format!("{}: {}", r.code, r.message)))
                            .collect(),
                        Err(s) => {
                            let e = format!("{:?}: {}", s.code(), s.message());
                            vec![Some(e); (to - from) as usize]
                        }
                    }
                };
                calls_ns.push((
                    (sent - start).as_nanos() as i64,
                    sent.elapsed().as_nanos() as i64,
                ));
                for answer in answers {
                    match answer {
                        None => {
                            if done.fetch_add(1, Ordering::Relaxed) + 1 == n_90 {
                                *at_90.lock().unwrap() = Some(start.elapsed().as_secs_f64());
                            }
                        }
                        Some(why) => {
                            let e = errors.fetch_add(1, Ordering::Relaxed) + 1;
                            first_error.lock().unwrap().get_or_insert(why);
                            if e >= 100 {
                                abort.store(true, Ordering::Relaxed);
                            }
                        }
                    }
                }
            }
        });
    }
    let ticker = progress.then(|| {
        let done = done.clone();
        tokio::spawn(async move {
            let mut last = 0;
            let mut at = Instant::now();
            loop {
                tokio::time::sleep(Duration::from_secs(10)).await;
                let d = done.load(Ordering::Relaxed);
                let rate = (d - last) as f64 / at.elapsed().as_secs_f64();
                eprintln!("   ... {d} / {n} created ({rate:.0}/s)");
                last = d;
                at = Instant::now();
            }
        })
    });
    let (mut sent_ns, mut calls_ns) = (Vec::new(), Vec::new());
    while let Some(joined) = tasks.join_next().await {
        for (sent, took) in joined.unwrap_or_default() {
            sent_ns.push(sent);
            calls_ns.push(took);
        }
    }
    if let Some(t) = ticker {
        t.abort();
    }
    let secs = start.elapsed().as_secs_f64();
    let errors = errors.load(Ordering::Relaxed);
    if abort.load(Ordering::Relaxed) {
        bail!(
            "creates aborted after {errors} errors; first: {}",
            first_error.lock().unwrap().clone().unwrap_or_default()
        );
    }
    if errors > 0 {
        eprintln!(
            "   {errors} create errors; first: {}",
            first_error.lock().unwrap().clone().unwrap_or_default()
        );
    }
    let secs_at_90 = at_90.lock().unwrap().unwrap_or(0.0);
    Ok(Created {
        secs,
        secs_at_90,
        errors,
        calls_ns,
        sent_ns,
    })
}

/// Creates `n` pilot one-shots due now + 1 s, waits for their deliveries and forgets them:
/// warms jobsd's and the app's connections and measures the create rate.
async fn pilot(target: &Target, create: &Create, tag: &str, n: u64) -> Result<f64> {
    take(target.app).await?;
    let due = Utc::now() + TimeDelta::seconds(1);
    let tag = tag.to_owned();
    let created = create_jobs(target.grpc, create, n, false, move |i| {
        one_shot(format!("p{tag}-{i}"), due)
    })
    .await?;
    let rate = created.rate(n);
    let deadline = Instant::now() + Duration::from_secs(60);
    while app_count(target.app).await? < n {
        if Instant::now() > deadline {
            eprintln!("   (pilot deliveries incomplete after 60 s)");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Let the pilot's results be written before the timed part.
    tokio::time::sleep(Duration::from_millis(500)).await;
    take(target.app).await?;
    Ok(rate)
}

// ---------------------------------------------------------------------------------------
// CPU and memory of the processes under test
// ---------------------------------------------------------------------------------------

/// utime + stime of a `/proc/<pid>/stat` or `/proc/<pid>/task/<tid>/stat` file.
fn stat_cpu(path: &str) -> Option<Duration> {
    let text = std::fs::read_to_string(path).ok()?;
    let after_comm = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// CPU of each thread of `pid` summed by thread name (non-alphanumerics as `-`).
fn thread_cpu(pid: u32) -> BTreeMap<String, Duration> {
    let mut out = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for entry in dir.flatten() {
        let path = entry.path();
        let name = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        let name: String = name
            .trim()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        if let Some(cpu) = stat_cpu(&path.join("stat").to_string_lossy()) {
            *out.entry(name).or_default() += cpu;
        }
    }
    out
}

/// Busy and steal time of the whole machine (`/proc/stat`).
fn machine_cpu() -> (Duration, Duration) {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> = text
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let at = |i: usize| ticks.get(i).copied().unwrap_or(0);
    (
        Duration::from_millis((at(0) + at(1) + at(2) + at(5) + at(6)) * 10),
        Duration::from_millis(at(7) * 10),
    )
}

/// A CPU snapshot of jobsd (by thread), the app and the machine.
struct CpuSnap {
    at: Instant,
    jobsd: BTreeMap<String, Duration>,
    app: Duration,
    machine: (Duration, Duration),
}

impl CpuSnap {
    fn take(target: &Target) -> CpuSnap {
        CpuSnap {
            at: Instant::now(),
            jobsd: target.jobsd_pid.map(thread_cpu).unwrap_or_default(),
            app: target
                .app_pid
                .and_then(|p| stat_cpu(&format!("/proc/{p}/stat")))
                .unwrap_or_default(),
            machine: machine_cpu(),
        }
    }

    /// `jobsd_cpu_ms=… app_cpu_ms=… machine_busy_cores=… steal_cores=… (threads …)`.
    fn since(&self, before: &CpuSnap) -> (String, String) {
        let wall = self.at.duration_since(before.at).as_secs_f64().max(1e-9);
        let mut total = Duration::ZERO;
        let mut threads = Vec::new();
        for (name, cpu) in &self.jobsd {
            let d = cpu.saturating_sub(before.jobsd.get(name).copied().unwrap_or_default());
            total += d;
            if !d.is_zero() {
                threads.push(format!("{name}={}", d.as_millis()));
            }
        }
        let app = self.app.saturating_sub(before.app);
        let busy = self.machine.0.saturating_sub(before.machine.0);
        let steal = self.machine.1.saturating_sub(before.machine.1);
        let other = busy.saturating_sub(total).saturating_sub(app);
        let kv = format!(
            "wall_ms={:.0} jobsd_cpu_ms={} app_cpu_ms={} machine_busy_cores={:.2} other_cores={:.2} steal_cores={:.2}",
            wall * 1000.0,
            total.as_millis(),
            app.as_millis(),
            busy.as_secs_f64() / wall,
            other.as_secs_f64() / wall,
            steal.as_secs_f64() / wall,
        );
        (kv, threads.join(","))
    }
}

fn rss(pid: Option<u32>) -> String {
    let Some(pid) = pid else {
        return "rss_mib=- hwm_mib=-".into();
    };
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map_or("-".to_owned(), |k| format!("{:.1}", k / 1024.0))
    };
    format!("rss_mib={} hwm_mib={}", kb("VmRSS:"), kb("VmHWM:"))
}

// ---------------------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------------------

fn pct(sorted: &[i64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[i.clamp(1, sorted.len()) - 1] as f64 / 1e6
}

/// `p50_ms=… p90_ms=… p99_ms=… p999_ms=… max_ms=…` of lateness values in ns (sorted here).
fn lateness(values: &mut [i64]) -> String {
    values.sort_unstable();
    format!(
        "p50_ms={:.2} p90_ms={:.2} p99_ms={:.2} p999_ms={:.2} max_ms={:.2} min_ms={:.2}",
        pct(values, 50.0),
        pct(values, 90.0),
        pct(values, 99.0),
        pct(values, 99.9),
        values.last().map_or(f64::NAN, |&v| v as f64 / 1e6),
        values.first().map_or(f64::NAN, |&v| v as f64 / 1e6),
    )
}

/// Index `i` of a name `<prefix><i>`.
fn index_of(name: &str, prefix: &str) -> Option<u64> {
    name.strip_prefix(prefix)?.parse().ok()
}

/// Waits until the app holds `want` records, nothing new came for `stall`, or `deadline`.
/// Returns the count seen and when it was complete (or last grew).
async fn wait_for(app: SocketAddr, want: u64, stall: Duration, deadline: Instant) -> Result<u64> {
    let mut last = 0;
    let mut last_change = Instant::now();
    loop {
        let n = app_count(app).await?;
        if n >= want {
            return Ok(n);
        }
        if n != last {
            last = n;
            last_change = Instant::now();
        }
        if last_change.elapsed() > stall || Instant::now() > deadline {
            eprintln!("   gave up waiting: {n} of {want} arrived");
            return Ok(n);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn sleep_until_ns(ns: i64) {
    let d = ns - now_ns();
    if d > 0 {
        tokio::time::sleep(Duration::from_nanos(d as u64)).await;
    }
}

// ---------------------------------------------------------------------------------------
// (a) burst
// ---------------------------------------------------------------------------------------

async fn burst(args: BurstArgs) -> Result<()> {
    let target = &args.target;
    let n = args.jobs;
    let pilot_rate = pilot(target, &args.create, &format!("b{}", args.run_id), 2000).await?;
    // Creates run at least at half the pilot's rate; 3 s more for the tail.
    let lead = n as f64 / pilot_rate * 2.0 + 3.0;
    let t_ns = now_ns() + (lead * 1e9) as i64;
    // Whole milliseconds, as users write due times.
    let t_ns = t_ns - t_ns % 1_000_000;
    let t = ns_to_time(t_ns);
    println!(
        "burst {}: {n} one-shots due at {} (now + {lead:.1} s; pilot create rate {pilot_rate:.0}/s)",
        args.run_id,
        t.to_rfc3339_opts(SecondsFormat::Millis, true)
    );
    let prefix = format!("b{}-", args.run_id);
    let p = prefix.clone();
    let created = create_jobs(target.grpc, &args.create, n, false, move |i| {
        one_shot(format!("{p}{i}"), t)
    })
    .await?;
    let margin_ms = (t_ns - now_ns()) as f64 / 1e6;
    println!(
        "   created in {:.2} s ({:.0}/s, {} errors); {margin_ms:.0} ms before T; jobsd {}",
        created.secs,
        created.rate(n),
        created.errors,
        rss(target.jobsd_pid)
    );
    let early = take(target.app).await?.len();
    if margin_ms < 0.0 || early > 0 {
        println!(
            "   INVALID: creates ended after T ({margin_ms:.0} ms) or {early} deliveries before T"
        );
    }
    sleep_until_ns(t_ns - 50_000_000).await;
    let before = CpuSnap::take(target);
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    let got = wait_for(
        target.app,
        n,
        Duration::from_secs(args.stall_secs),
        deadline,
    )
    .await?;
    let at_last = CpuSnap::take(target);
    // The results of the last triggers are still being written: look again once idle.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = CpuSnap::take(target);
    let recs = take(target.app).await?;

    let mut seen = vec![0u32; n as usize];
    let mut lates = Vec::with_capacity(recs.len());
    let mut stray = 0u64;
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    for (at, name) in &recs {
        match index_of(name, &prefix) {
            Some(i) if i < n => {
                seen[i as usize] += 1;
                lates.push(at - t_ns);
                first = first.min(*at);
                last = last.max(*at);
            }
            _ => stray += 1,
        }
    }
    let missing = seen.iter().filter(|&&c| c == 0).count();
    let dups: u64 = seen.iter().map(|&c| u64::from(c.saturating_sub(1))).sum();
    let delivered = lates.len() as u64;
    let span_t = (last - t_ns) as f64 / 1e9;
    let span_fl = (last - first) as f64 / 1e9;
    let rate_t = delivered as f64 / span_t;
    let rate_fl = delivered as f64 / span_fl;
    let lat = lateness(&mut lates);
    let (cpu_window, threads_window) = at_last.since(&before);
    let (cpu_tail, threads_tail) = after.since(&before);
    println!(
        "   delivered {delivered} (of {n}; {got} counted), missing {missing}, duplicates {dups}, stray {stray}"
    );
    println!(
        "   deliveries/s: {rate_t:.0} (N / (last − T) = {span_t:.3} s), {rate_fl:.0} (first→last {span_fl:.3} s); first at T + {:.1} ms",
        (first - t_ns) as f64 / 1e6
    );
    println!("   lateness: {lat}");
    println!("   CPU T−50ms → last arrival: {cpu_window}");
    println!("       jobsd threads (ms): {threads_window}");
    println!("   CPU T−50ms → last + 2 s:   {cpu_tail}");
    println!("       jobsd threads (ms): {threads_tail}");
    println!("   jobsd after: {}", rss(target.jobsd_pid));
    println!(
        "RESULT label=burst run={} n={n} delivered={delivered} missing={missing} dups={dups} create_rate={:.0} margin_ms={margin_ms:.0} rate_t={rate_t:.0} rate_fl={rate_fl:.0} span_t_s={span_t:.3} first_ms={:.1} {lat} {cpu_window} {}",
        args.run_id,
        created.rate(n),
        (first - t_ns) as f64 / 1e6,
        rss(target.jobsd_pid),
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// (b) steady
// ---------------------------------------------------------------------------------------

async fn steady(args: SteadyArgs) -> Result<()> {
    let target = &args.target;
    let (rate, secs) = (args.rate, args.secs);
    let step_ns = 1_000_000_000 / rate as i64;
    let tag = format!("s{}", args.run_id);
    let pilot_rate = pilot(target, &args.create, &tag, 2000).await?;
    let jobs = match args.kind {
        Kind::Recurring => rate,
        Kind::Oneshot => rate * secs,
    };
    let lead = jobs as f64 / pilot_rate * 2.0 + 3.0;
    let s_ns = now_ns() + (lead * 1e9) as i64;
    let s_ns = s_ns - s_ns % 1_000_000_000 + 1_000_000_000;
    let start = ns_to_time(s_ns);
    println!(
        "steady {}: {rate} triggers/s for {secs} s ({:?}: {jobs} jobs) from {} (pilot create rate {pilot_rate:.0}/s)",
        args.run_id,
        args.kind,
        start.to_rfc3339_opts(SecondsFormat::Millis, true)
    );
    let prefix = format!("{tag}-");
    let p = prefix.clone();
    let repeats = u32::try_from(secs)?;
    let kind = args.kind;
    let created = create_jobs(
        target.grpc,
        &args.create,
        jobs,
        kind == Kind::Oneshot,
        move |i| {
            let due = ns_to_time(s_ns + i as i64 * step_ns);
            match kind {
                Kind::Recurring => every_second(format!("{p}{i}"), due, repeats),
                Kind::Oneshot => one_shot(format!("{p}{i}"), due),
            }
        },
    )
    .await?;
    let margin_ms = (s_ns - now_ns()) as f64 / 1e6;
    println!(
        "   created in {:.2} s ({:.0}/s); {margin_ms:.0} ms before the start",
        created.secs,
        created.rate(jobs)
    );
    if margin_ms < 0.0 {
        println!("   INVALID: creates ended after the start");
    }
    sleep_until_ns(s_ns).await;
    let before = CpuSnap::take(target);
    // Per-second progress, to see the load hold up.
    let want = rate * secs;
    let end_ns = s_ns + i64::try_from(secs)? * 1_000_000_000;
    let (mut last_n, mut last_t) = (0, 0.0);
    while now_ns() < end_ns {
        let left = Duration::from_nanos(u64::try_from(end_ns - now_ns()).unwrap_or(0));
        tokio::time::sleep(left.min(Duration::from_secs(10))).await;
        let n = app_count(target.app).await?;
        let t = (now_ns() - s_ns) as f64 / 1e9;
        eprintln!(
            "   ... t+{t:.0} s: {n} arrived ({:.0}/s since t+{last_t:.0} s)",
            (n - last_n) as f64 / (t - last_t).max(1e-3)
        );
        (last_n, last_t) = (n, t);
    }
    let during = CpuSnap::take(target);
    let got = wait_for(
        target.app,
        want,
        Duration::from_secs(args.stall_secs),
        Instant::now() + Duration::from_secs(120),
    )
    .await?;
    let recs = take(target.app).await?;

    // Arrivals of each job, in time order.
    let mut per_job: Vec<Vec<i64>> = vec![Vec::new(); jobs as usize];
    let mut stray = 0u64;
    for (at, name) in &recs {
        match index_of(name, &prefix) {
            Some(i) if i < jobs => per_job[i as usize].push(*at),
            _ => stray += 1,
        }
    }
    let per_tick = match kind {
        Kind::Recurring => secs,
        Kind::Oneshot => 1,
    };
    let mut lates = Vec::with_capacity(recs.len());
    // Lateness by 10-s window of nominal time.
    let windows = secs.div_ceil(10) as usize;
    let mut by_window: Vec<Vec<i64>> = vec![Vec::new(); windows];
    let (mut missing, mut dups) = (0u64, 0u64);
    let mut in_window = 0u64;
    let mut per_sec = vec![0u64; secs as usize];
    for (i, arrivals) in per_job.iter_mut().enumerate() {
        arrivals.sort_unstable();
        let got = arrivals.len() as u64;
        missing += per_tick.saturating_sub(got);
        dups += got.saturating_sub(per_tick);
        for (k, &at) in arrivals.iter().take(per_tick as usize).enumerate() {
            let nominal = s_ns + i as i64 * step_ns + k as i64 * 1_000_000_000;
            let late = at - nominal;
            lates.push(late);
            let w = ((nominal - s_ns) / 10_000_000_000) as usize;
            if let Some(v) = by_window.get_mut(w) {
                v.push(late);
            }
        }
        for &at in arrivals.iter() {
            if at >= s_ns && at < end_ns {
                in_window += 1;
                per_sec[((at - s_ns) / 1_000_000_000) as usize] += 1;
            }
        }
    }
    let achieved = in_window as f64 / secs as f64;
    let mut secs_sorted = per_sec.clone();
    secs_sorted.sort_unstable();
    let (sec_min, sec_max) = (
        secs_sorted.first().copied().unwrap_or(0),
        secs_sorted.last().copied().unwrap_or(0),
    );
    let lat = lateness(&mut lates);
    let (cpu, threads) = during.since(&before);
    println!(
        "   arrivals {} (of {want}; {got} counted), missing {missing}, duplicates {dups}, stray {stray}",
        recs.len() as u64 - stray
    );
    println!(
        "   achieved {achieved:.0} triggers/s within [start, start + {secs} s) (per second: min {sec_min}, max {sec_max})"
    );
    println!("   lateness: {lat}");
    for (w, v) in by_window.iter_mut().enumerate() {
        v.sort_unstable();
        println!(
            "     nominal {:>3}–{:<3} s: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            w * 10,
            (w + 1) * 10,
            pct(v, 50.0),
            pct(v, 99.0),
            v.last().map_or(f64::NAN, |&x| x as f64 / 1e6)
        );
    }
    println!("   CPU over the {secs} s: {cpu}");
    println!("       jobsd threads (ms): {threads}");
    println!("   jobsd after: {}", rss(target.jobsd_pid));
    println!(
        "RESULT label=steady run={} kind={kind:?} rate={rate} secs={secs} arrivals={} missing={missing} dups={dups} achieved={achieved:.0} sec_min={sec_min} sec_max={sec_max} {lat} {cpu}",
        args.run_id,
        recs.len() as u64 - stray,
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// (c) fill, (d) probe / wait-restart
// ---------------------------------------------------------------------------------------

async fn fill(args: FillArgs) -> Result<()> {
    let target = &args.target;
    let n = args.jobs;
    let due = Utc::now() + TimeDelta::hours(args.due_in_hours);
    let prefix = format!("f{}-", args.run_id);
    println!(
        "fill: {n} one-shots due at {}",
        due.to_rfc3339_opts(SecondsFormat::Millis, true)
    );
    let before = CpuSnap::take(target);
    let mix = args.mix;
    let mut created = create_jobs(target.grpc, &args.create, n, true, move |i| {
        let name = format!("{prefix}{i}");
        if mix {
            mixed(name, due, i)
        } else {
            one_shot(name, due)
        }
    })
    .await?;
    let (cpu, _) = CpuSnap::take(target).since(&before);
    if args.create.pace > 0 {
        println!("   {}", slowest_seconds(&created));
    }
    let calls = &mut created.calls_ns;
    calls.sort_unstable();
    let (call_p50, call_p99) = (pct(calls, 50.0), pct(calls, 99.0));
    println!(
        "   created in {:.1} s ({:.0}/s, the last 10 % {:.0}/s, {} errors; a call p50 {call_p50:.1} ms, p99 {call_p99:.1} ms); jobsd {}",
        created.secs,
        created.rate(n),
        created.tail_rate(n),
        created.errors,
        rss(target.jobsd_pid)
    );
    println!(
        "RESULT label=fill n={n} create_rate={:.0} tail_rate={:.0} errors={} call_p50_ms={call_p50:.2} call_p99_ms={call_p99:.2} {} {cpu}",
        created.rate(n),
        created.tail_rate(n),
        created.errors,
        rss(target.jobsd_pid)
    );
    Ok(())
}

/// The five seconds of sending whose calls took longest, each with its p99 and most, and the
/// share of calls over 20 ms: where a paced run's tail comes from.
fn slowest_seconds(created: &Created) -> String {
    let mut by_second: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for (&sent, &took) in created.sent_ns.iter().zip(&created.calls_ns) {
        by_second
            .entry(sent / 1_000_000_000)
            .or_default()
            .push(took);
    }
    let mut seconds: Vec<(i64, f64, f64)> = by_second
        .into_iter()
        .map(|(s, mut took)| {
            took.sort_unstable();
            (s, pct(&took, 99.0), pct(&took, 100.0))
        })
        .collect();
    seconds.sort_by(|a, b| b.2.total_cmp(&a.2));
    let over = created.calls_ns.iter().filter(|&&t| t > 20_000_000).count();
    let worst: Vec<String> = seconds
        .iter()
        .take(5)
        .map(|(s, p99, max)| format!("+{s}s p99 {p99:.0} max {max:.0} ms"))
        .collect();
    format!(
        "calls over 20 ms: {over} of {} ({:.2} %); slowest seconds of sending: {}",
        created.calls_ns.len(),
        100.0 * over as f64 / created.calls_ns.len().max(1) as f64,
        worst.join(", ")
    )
}

async fn probe(args: ProbeArgs) -> Result<()> {
    let due_ns = now_ns() + args.due_in_ms * 1_000_000;
    let due_ns = due_ns - due_ns % 1_000_000;
    let mut client = DaprClient::new(connect_grpc(args.target.grpc).await?);
    client
        .schedule_job(one_shot(args.name.clone(), ns_to_time(due_ns)))
        .await
        .map_err(|s| anyhow::anyhow!("probe create: {:?}: {}", s.code(), s.message()))?;
    println!("{due_ns}");
    Ok(())
}

async fn wait_restart(args: WaitRestartArgs) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    let http = args.target.http;
    let healthz = tokio::spawn(async move {
        loop {
            if let Ok((status, _)) = http_call(http, Method::GET, "/v1.0/healthz").await
                && status == StatusCode::NO_CONTENT
            {
                return Some(now_ns());
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    });
    let app = args.target.app;
    let first = loop {
        // Records accumulate in the app; only a matching name counts.
        let (_, body) = http_call(app, Method::GET, "/_count").await?;
        if std::str::from_utf8(&body)?.trim() != "0" {
            let recs = take(app).await?;
            if let Some(at) = recs
                .iter()
                .filter(|(_, name)| name.starts_with(&args.prefix))
                .map(|(at, _)| *at)
                .min()
            {
                break at;
            }
        }
        if Instant::now() > deadline {
            bail!("no trigger {}… after {} s", args.prefix, args.timeout_secs);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let healthz = healthz.await?.context("jobsd never healthy")?;
    println!("{healthz} {first}");
    Ok(())
}
