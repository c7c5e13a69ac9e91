//! Actor reminder benchmark for a running jobsd (issue 10) — a benchmark, never a CI test.
//!
//! One binary, two roles:
//!
//! - `app --port P`: a minimal HTTP actor app. `GET /dapr/config` answers
//!   `{"entities":["BenchActor"],"actorIdleTimeout":"1h"}` (1 h: no deactivation during a
//!   run); `PUT /actors/BenchActor/<id>/method/remind/<name>` answers 200 at once and records
//!   the arrival (wall clock, unix ns), the actor id and the reminder name; `DELETE
//!   /actors/<type>/<id>` (deactivation) answers 200 and is counted. Control endpoints for the
//!   driver: `GET /_count` (records held), `POST /_take` (the records as `<ns> <id> <name>`
//!   lines, then forgets them), `POST /_clear`, `GET /_stats` (deactivations, reminder bodies
//!   that were not daprd's `{"data":…,"dueTime":"","period":""}`).
//! - the driver subcommands, which talk to jobsd's HTTP API (daprd's actor routes) over
//!   keep-alive HTTP/1.1 connections:
//!   - `wait-hosted`: registers (and deletes) a probe reminder until jobsd answers 204, i.e.
//!     until it has read the app's `/dapr/config` and hosts `BenchActor`.
//!   - `register`: `-n` registrations `PUT /v1.0/actors/BenchActor/<run>-<i>/reminders/r`
//!     with `{"dueTime":"24h","period":"24h"}` (Dapr's perf test body: nothing fires), one
//!     actor id each, from `-c` clients with one request in flight each, after `--warmup`
//!     untimed ones. Registrations/s, latency p50/p90/p99/p99.9/max, errors (anything but
//!     204), CPU per registration of this process and of jobsd (by thread), and the cores
//!     other processes used meanwhile.
//!   - `burst`: `--actors` reminders (one per actor id) all due at one instant T, `--ticks`
//!     ticks each, `--period-ms` apart, delivered to the app. A pilot of 2,000 one-shot
//!     reminders first warms jobsd's connections to the app and measures the registration
//!     rate; T = now + 2 × (actors ÷ that rate) + 3 s, in whole ms. Invocations/s over
//!     first→last arrival and over T→last, lateness (arrival − nominal time T + k·period of
//!     the actor's k-th arrival) p50/p99, missing and duplicate ticks per actor, and the CPU
//!     of jobsd and the app from T − 50 ms to the last arrival.
//!
//!     The period: dapr/kit's ISO-8601 parser (and so daprd's and jobsd's) takes whole
//!     numbers only, so `R5/PT0.1S` is refused and the shortest `Rn/` period is `PT1S`. A
//!     sub-second period is therefore sent as a Go duration (`100ms`) with an absolute ttl
//!     (RFC 3339) half a period after the last wanted tick: the engine stops at the first
//!     nominal tick past the ttl, so each reminder has exactly `--ticks` ticks (Dapr's own
//!     test does the same with period 1 ms, ttl 5 ms). Whole seconds use `R<ticks>/PT<s>S`.
//!
//! Every measuring subcommand prints human lines and one `RESULT key=value …` line for
//! `e2e/bench/actors.sh`.

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
use chrono::{DateTime, SecondsFormat, Utc};
use clap::{Args, Parser, Subcommand};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

/// The actor type the app hosts.
const ACTOR_TYPE: &str = "BenchActor";

#[derive(Debug, Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// The HTTP actor app jobsd delivers to.
    App(AppArgs),
    /// Wait until jobsd hosts `BenchActor` (a reminder create answers 204).
    WaitHosted(WaitArgs),
    /// N reminder registrations with far-future due times.
    Register(RegisterArgs),
    /// Reminders of many actors all due at one instant, several ticks each.
    Burst(BurstArgs),
}

#[derive(Debug, Args)]
struct AppArgs {
    /// Port on 127.0.0.1.
    #[arg(long)]
    port: u16,
    /// Runtime worker threads (1 = a current-thread runtime).
    #[arg(long, default_value_t = 1)]
    threads: usize,
}

/// Where jobsd and the app are.
#[derive(Debug, Clone, Args)]
struct Target {
    /// jobsd's HTTP API.
    #[arg(long, default_value = "127.0.0.1:3500")]
    http: SocketAddr,
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

#[derive(Debug, Args)]
struct WaitArgs {
    #[command(flatten)]
    target: Target,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 60)]
    timeout_secs: u64,
}

#[derive(Debug, Args)]
struct RegisterArgs {
    #[command(flatten)]
    target: Target,
    /// Registrations.
    #[arg(short = 'n', long, default_value_t = 100_000)]
    requests: u64,
    /// Clients, one keep-alive connection and one request in flight each.
    #[arg(short = 'c', long, default_value_t = 16)]
    concurrency: usize,
    /// Untimed registrations first (connections warm).
    #[arg(long, default_value_t = 1000)]
    warmup: u64,
    /// Actor ids are `<run-id>-<i>`.
    #[arg(long, default_value = "r1")]
    run_id: String,
    /// Abort once errors exceed this share of the requests.
    #[arg(long, default_value_t = 0.001)]
    max_error_ratio: f64,
}

#[derive(Debug, Args)]
struct BurstArgs {
    #[command(flatten)]
    target: Target,
    /// Actors, one reminder each.
    #[arg(long, default_value_t = 20_000)]
    actors: u64,
    /// Ticks per reminder.
    #[arg(long, default_value_t = 5)]
    ticks: u32,
    /// Milliseconds between ticks.
    #[arg(long, default_value_t = 100)]
    period_ms: u64,
    /// Registrations in flight while creating the reminders.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Actor ids are `b<run-id>-<i>`.
    #[arg(long, default_value = "1")]
    run_id: String,
    /// Seconds after T before giving up waiting.
    #[arg(long, default_value_t = 300)]
    timeout_secs: u64,
    /// Give up when nothing arrived for this many seconds (after T).
    #[arg(long, default_value_t = 30)]
    stall_secs: u64,
    /// Also write every arrival as `<µs after T> <actor index> <tick k>` lines, in time
    /// order, to this file (for a closer look at the drain).
    #[arg(long)]
    dump: Option<std::path::PathBuf>,
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
        return runtime.block_on(app(args.port));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match cli.cmd {
            Cmd::App(_) => unreachable!(),
            Cmd::WaitHosted(args) => wait_hosted(args).await,
            Cmd::Register(args) => register(args).await,
            Cmd::Burst(args) => burst(args).await,
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

/// One reminder call as the app saw it.
struct Rec {
    at_ns: i64,
    actor: Box<str>,
    name: Box<str>,
}

#[derive(Default)]
struct AppState {
    recs: Mutex<Vec<Rec>>,
    deactivations: AtomicU64,
    bad_bodies: AtomicU64,
    other_calls: AtomicU64,
}

async fn app(port: u16) -> Result<()> {
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .with_context(|| format!("bind 127.0.0.1:{port}"))?;
    eprintln!("bench actor app listening on 127.0.0.1:{port}");
    let state = Arc::new(AppState::default());
    accept::accept_loop(listener, |stream| {
        let state = state.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| handle(state.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    })
    .await
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// daprd's reminder body: `{"data":…,"dueTime":"","period":""}` (data optional).
fn is_remind_body(body: &[u8]) -> bool {
    body.first() == Some(&b'{') && body.ends_with(br#""dueTime":"","period":""}"#)
}

async fn handle(
    state: Arc<AppState>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let at_ns = now_ns();
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    if let Some(rest) = path.strip_prefix("/actors/") {
        let parts: Vec<&str> = rest.split('/').collect();
        // Read the (small) body so the connection stays reusable.
        let body = req
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        match (&method, parts.as_slice()) {
            (&Method::PUT, [_, id, "method", "remind", name]) => {
                if !is_remind_body(&body) {
                    state.bad_bodies.fetch_add(1, Ordering::Relaxed);
                }
                lock(&state.recs).push(Rec {
                    at_ns,
                    actor: (*id).into(),
                    name: (*name).into(),
                });
            }
            (&Method::DELETE, [_, _]) => {
                state.deactivations.fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                state.other_calls.fetch_add(1, Ordering::Relaxed);
            }
        }
        return Ok(text(StatusCode::OK, Bytes::new()));
    }
    let resp = match path.as_str() {
        "/dapr/config" => text(
            StatusCode::OK,
            format!(r#"{{"entities":["{ACTOR_TYPE}"],"actorIdleTimeout":"1h"}}"#),
        ),
        "/healthz" => text(StatusCode::OK, Bytes::new()),
        "/_count" => text(StatusCode::OK, lock(&state.recs).len().to_string()),
        "/_stats" => text(
            StatusCode::OK,
            format!(
                "deactivations={} bad_bodies={} other_calls={}",
                state.deactivations.load(Ordering::Relaxed),
                state.bad_bodies.load(Ordering::Relaxed),
                state.other_calls.load(Ordering::Relaxed)
            ),
        ),
        "/_take" | "/_clear" => {
            let recs = std::mem::take(&mut *lock(&state.recs));
            if path == "/_clear" {
                text(StatusCode::OK, recs.len().to_string())
            } else {
                let mut out = String::with_capacity(recs.len() * 40);
                for r in &recs {
                    out.push_str(&r.at_ns.to_string());
                    out.push(' ');
                    out.push_str(&r.actor);
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

// ---------------------------------------------------------------------------------------
// HTTP client
// ---------------------------------------------------------------------------------------

async fn connect(addr: SocketAddr) -> Result<SendRequest<Full<Bytes>>> {
    let stream = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connect {addr}"))?;
    stream.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        // The connection ends with its sender; an error shows up there.
        let _ = conn.await;
    });
    Ok(sender)
}

/// One keep-alive connection that reconnects when closed.
struct Conn {
    addr: SocketAddr,
    sender: SendRequest<Full<Bytes>>,
}

impl Conn {
    async fn new(addr: SocketAddr) -> Result<Conn> {
        Ok(Conn {
            addr,
            sender: connect(addr).await?,
        })
    }

    /// The status and body of one request.
    async fn call(
        &mut self,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> Result<(StatusCode, Bytes)> {
        if self.sender.is_closed() {
            self.sender = connect(self.addr).await?;
        }
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, self.addr.to_string());
        if !body.is_empty() {
            req = req.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        let req = req.body(Full::new(body))?;
        self.sender.ready().await?;
        let resp = self.sender.send_request(req).await?;
        let status = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }
}

/// One request on a fresh connection.
async fn call_once(addr: SocketAddr, method: Method, path: &str) -> Result<(StatusCode, Bytes)> {
    Conn::new(addr)
        .await?
        .call(method, path, Bytes::new())
        .await
}

fn reminder_path(actor_id: &str, name: &str) -> String {
    format!("/v1.0/actors/{ACTOR_TYPE}/{actor_id}/reminders/{name}")
}

/// What a batch of registrations gave.
struct Batch {
    secs: f64,
    /// Sorted latencies of the 204s, in ns.
    lat: Vec<u64>,
    errors: u64,
    aborted: bool,
    first_error: Option<String>,
}

impl Batch {
    fn rate(&self) -> f64 {
        self.lat.len() as f64 / self.secs.max(1e-9)
    }
}

/// Sends `PUT reminder_path(id(i), "r")` with body `body(i)` for `i` in `0..n` from the
/// clients in `conns`, one request in flight each; aborts past `max_errors` errors.
async fn put_all<I, B>(
    conns: Vec<Conn>,
    n: u64,
    max_errors: u64,
    id: I,
    body: B,
) -> Result<(Batch, Vec<Conn>)>
where
    I: Fn(u64) -> String + Send + Sync + 'static,
    B: Fn(u64) -> String + Send + Sync + 'static,
{
    let (id, body) = (Arc::new(id), Arc::new(body));
    let next = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let abort = Arc::new(AtomicBool::new(false));
    let first_error = Arc::new(Mutex::new(None::<String>));
    let per_task = n as usize / conns.len().max(1) + 16;
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for mut conn in conns {
        let (id, body, next, errors, abort, first_error) = (
            id.clone(),
            body.clone(),
            next.clone(),
            errors.clone(),
            abort.clone(),
            first_error.clone(),
        );
        tasks.spawn(async move {
            let mut lat = Vec::with_capacity(per_task);
            while !abort.load(Ordering::Relaxed) {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let path = reminder_path(&id(i), "r");
                let payload = Bytes::from(body(i));
                let t0 = Instant::now();
                let outcome = conn.call(Method::PUT, &path, payload).await;
                let elapsed = t0.elapsed().as_nanos() as u64;
                let err = match outcome {
                    Ok((StatusCode::NO_CONTENT, _)) => {
                        lat.push(elapsed);
                        continue;
                    }
                    Ok((status, body)) => format!("{status}: {}", String::from_utf8_lossy(&body)),
                    Err(e) => format!("{e:#}"),
                };
                lock(&first_error).get_or_insert(err);
                if errors.fetch_add(1, Ordering::Relaxed) + 1 > max_errors {
                    abort.store(true, Ordering::Relaxed);
                }
            }
            (lat, conn)
        });
    }
    let mut lat = Vec::with_capacity(n as usize);
    let mut conns = Vec::new();
    while let Some(part) = tasks.join_next().await {
        let (l, c) = part?;
        lat.extend(l);
        conns.push(c);
    }
    let secs = start.elapsed().as_secs_f64();
    lat.sort_unstable();
    let first_error = lock(&first_error).clone();
    Ok((
        Batch {
            secs,
            lat,
            errors: errors.load(Ordering::Relaxed),
            aborted: abort.load(Ordering::Relaxed),
            first_error,
        },
        conns,
    ))
}

async fn open_conns(addr: SocketAddr, n: usize) -> Result<Vec<Conn>> {
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n.max(1) {
        conns.push(Conn::new(addr).await?);
    }
    Ok(conns)
}

// ---------------------------------------------------------------------------------------
// wait-hosted
// ---------------------------------------------------------------------------------------

async fn wait_hosted(args: WaitArgs) -> Result<()> {
    let start = Instant::now();
    let deadline = start + Duration::from_secs(args.timeout_secs);
    let path = reminder_path("probe", "probe");
    let mut last = String::new();
    loop {
        if let Ok(mut conn) = Conn::new(args.target.http).await {
            match conn
                .call(
                    Method::PUT,
                    &path,
                    Bytes::from_static(br#"{"dueTime":"8760h"}"#),
                )
                .await
            {
                Ok((StatusCode::NO_CONTENT, _)) => {
                    let (status, body) = conn.call(Method::DELETE, &path, Bytes::new()).await?;
                    if status != StatusCode::NO_CONTENT {
                        bail!(
                            "DELETE of the probe reminder: {status}: {}",
                            String::from_utf8_lossy(&body)
                        );
                    }
                    println!(
                        "hosted after {:.0} ms (last refusal: {last})",
                        start.elapsed().as_secs_f64() * 1e3
                    );
                    return Ok(());
                }
                Ok((status, body)) => {
                    last = format!("{status} {}", String::from_utf8_lossy(&body).trim());
                }
                Err(e) => last = format!("{e:#}"),
            }
        }
        if Instant::now() > deadline {
            bail!(
                "jobsd does not host {ACTOR_TYPE} after {} s; last answer: {last}",
                args.timeout_secs
            );
        }
        if let Some(pid) = args.target.jobsd_pid
            && !process_alive(pid)
        {
            bail!("jobsd (pid {pid}) exited");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---------------------------------------------------------------------------------------
// register
// ---------------------------------------------------------------------------------------

/// Dapr's `TestActorReminderRegistrationPerformance` body: nothing fires within the run.
const REGISTER_BODY: &str = r#"{"dueTime":"24h","period":"24h"}"#;

async fn register(args: RegisterArgs) -> Result<()> {
    let target = &args.target;
    let n = args.requests;
    let c = args.concurrency.max(1);
    let mut conns = open_conns(target.http, c).await?;
    if args.warmup > 0 {
        let run = args.run_id.clone();
        let (warm, back) = put_all(
            conns,
            args.warmup,
            args.warmup,
            move |i| format!("{run}-w{i}"),
            |_| REGISTER_BODY.to_owned(),
        )
        .await?;
        conns = back;
        if warm.errors > 0 {
            eprintln!(
                "   warmup: {} errors; first: {}",
                warm.errors,
                warm.first_error.unwrap_or_default()
            );
        }
    }
    let before = CpuSnap::take(target);
    let run = args.run_id.clone();
    let max_errors = (n as f64 * args.max_error_ratio).floor() as u64;
    let (b, _) = put_all(
        conns,
        n,
        max_errors,
        move |i| format!("{run}-{i}"),
        |_| REGISTER_BODY.to_owned(),
    )
    .await?;
    let after = CpuSnap::take(target);
    let ok = b.lat.len() as u64;
    let per_req_us = |d: Duration| d.as_secs_f64() * 1e6 / (ok + b.errors).max(1) as f64;
    let cpu = after.since(&before);
    let p = |q: f64| pct_u(&b.lat, q);
    if let Some(e) = &b.first_error {
        eprintln!("   first error: {e}");
    }
    println!(
        "register {}: {ok} ok {} err in {:.2} s: {:.0} registrations/s  p50 {:.3} p90 {:.3} p99 {:.3} p99.9 {:.3} max {:.3} ms; \
         cpu/req: client {:.1} µs, jobsd {:.1} µs [{}]; other load {:.2} cores, steal {:.2}{}",
        args.run_id,
        b.errors,
        b.secs,
        b.rate(),
        p(50.0),
        p(90.0),
        p(99.0),
        p(99.9),
        p(100.0),
        per_req_us(cpu.me),
        per_req_us(cpu.jobsd_total),
        cpu.jobsd_threads_us(ok + b.errors),
        cpu.other_cores,
        cpu.steal_cores,
        if b.aborted { "  ABORTED" } else { "" },
    );
    println!(
        "RESULT label=register run={} n={n} c={c} ok={ok} errors={} aborted={} secs={:.3} rate={:.1} \
         p50_ms={:.3} p90_ms={:.3} p99_ms={:.3} p999_ms={:.3} max_ms={:.3} client_cpu_us={:.2} \
         jobsd_cpu_us={:.2} jobsd_cores={:.2} other_cores={:.2} steal_cores={:.2} {}",
        args.run_id,
        b.errors,
        b.aborted,
        b.secs,
        b.rate(),
        p(50.0),
        p(90.0),
        p(99.0),
        p(99.9),
        p(100.0),
        per_req_us(cpu.me),
        per_req_us(cpu.jobsd_total),
        cpu.jobsd_total.as_secs_f64() / cpu.wall,
        cpu.other_cores,
        cpu.steal_cores,
        rss(target.jobsd_pid),
    );
    if b.aborted {
        bail!("run aborted: more than {max_errors} errors");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// burst
// ---------------------------------------------------------------------------------------

async fn app_count(app: SocketAddr) -> Result<u64> {
    let (_, body) = call_once(app, Method::GET, "/_count").await?;
    Ok(std::str::from_utf8(&body)?.trim().parse()?)
}

async fn app_stats(app: SocketAddr) -> Result<String> {
    let (_, body) = call_once(app, Method::GET, "/_stats").await?;
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// The app's records `(ns, actor id, name)` (and it forgets them).
async fn take(app: SocketAddr) -> Result<Vec<(i64, String, String)>> {
    let (status, body) = call_once(app, Method::POST, "/_take").await?;
    if status != StatusCode::OK {
        bail!("app /_take: {status}");
    }
    let mut out = Vec::new();
    for line in std::str::from_utf8(&body)?.lines() {
        let mut it = line.splitn(3, ' ');
        let (Some(ns), Some(id), Some(name)) = (it.next(), it.next(), it.next()) else {
            bail!("bad record line {line:?}");
        };
        out.push((ns.parse()?, id.to_owned(), name.to_owned()));
    }
    Ok(out)
}

/// Waits until the app holds `want` records, nothing new came for `stall`, or `deadline`.
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
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn sleep_until_ns(ns: i64) {
    let d = ns - now_ns();
    if d > 0 {
        tokio::time::sleep(Duration::from_nanos(d as u64)).await;
    }
}

fn rfc3339(ns: i64) -> String {
    ns_to_time(ns).to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The body of a burst reminder due at `t_ns` with `ticks` ticks `period_ms` apart (see the
/// file's doc for why a sub-second period is a Go duration with a ttl).
fn burst_body(t_ns: i64, ticks: u32, period_ms: u64, run: &str) -> String {
    let due = rfc3339(t_ns);
    if period_ms.is_multiple_of(1000) {
        format!(
            r#"{{"dueTime":"{due}","period":"R{ticks}/PT{}S","data":{{"run":"{run}"}}}}"#,
            period_ms / 1000
        )
    } else {
        let last_tick = t_ns + i64::from(ticks.saturating_sub(1)) * period_ms as i64 * 1_000_000;
        let ttl = rfc3339(last_tick + period_ms as i64 * 500_000);
        format!(
            r#"{{"dueTime":"{due}","period":"{period_ms}ms","ttl":"{ttl}","data":{{"run":"{run}"}}}}"#
        )
    }
}

async fn burst(args: BurstArgs) -> Result<()> {
    let target = &args.target;
    let n = args.actors;
    let ticks = args.ticks.max(1);
    let period_ns = args.period_ms as i64 * 1_000_000;
    let want = n * u64::from(ticks);
    let run = args.run_id.clone();
    let mut conns = open_conns(target.http, args.concurrency).await?;

    // Pilot: 2,000 one-shot reminders due in 1 s warm jobsd's connections to the app.
    take(target.app).await?;
    let pilot_n = 2000u64;
    let pilot_due = rfc3339(now_ns() + 1_000_000_000);
    let r = run.clone();
    let (pilot, back) = put_all(
        conns,
        pilot_n,
        100,
        move |i| format!("p{r}-{i}"),
        move |_| format!(r#"{{"dueTime":"{pilot_due}"}}"#),
    )
    .await?;
    conns = back;
    if pilot.aborted {
        bail!(
            "pilot registrations failed: {}",
            pilot.first_error.unwrap_or_default()
        );
    }
    let pilot_rate = pilot.rate();
    let got = wait_for(
        target.app,
        pilot_n,
        Duration::from_secs(10),
        Instant::now() + Duration::from_secs(60),
    )
    .await?;
    if got < pilot_n {
        eprintln!("   (pilot deliveries incomplete: {got} of {pilot_n})");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    take(target.app).await?;

    let lead = n as f64 / pilot_rate * 2.0 + 3.0;
    let t_ns = now_ns() + (lead * 1e9) as i64;
    // Whole milliseconds, as users write due times.
    let t_ns = t_ns - t_ns % 1_000_000;
    let sample_body = burst_body(t_ns, ticks, args.period_ms, &run);
    println!(
        "burst {run}: {n} actors × 1 reminder × {ticks} ticks every {} ms = {want} invocations, \
         due at {} (now + {lead:.1} s; pilot registration rate {pilot_rate:.0}/s); body {sample_body}",
        args.period_ms,
        rfc3339(t_ns),
    );
    let prefix = format!("b{run}-");
    let p = prefix.clone();
    let (period_ms, r) = (args.period_ms, run.clone());
    let (created, _) = put_all(
        conns,
        n,
        100,
        move |i| format!("{p}{i}"),
        move |_| burst_body(t_ns, ticks, period_ms, &r),
    )
    .await?;
    if created.aborted {
        bail!(
            "registrations failed: {}",
            created.first_error.unwrap_or_default()
        );
    }
    let margin_ms = (t_ns - now_ns()) as f64 / 1e6;
    println!(
        "   registered in {:.2} s ({:.0}/s, {} errors, p99 {:.2} ms); {margin_ms:.0} ms before T; jobsd {}",
        created.secs,
        created.rate(),
        created.errors,
        pct_u(&created.lat, 99.0),
        rss(target.jobsd_pid)
    );
    let early = take(target.app).await?.len();
    if margin_ms < 0.0 || early > 0 {
        println!(
            "   INVALID: registrations ended after T ({margin_ms:.0} ms) or {early} invocations before T"
        );
    }
    sleep_until_ns(t_ns - 50_000_000).await;
    let before = CpuSnap::take(target);
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    let got = wait_for(
        target.app,
        want,
        Duration::from_secs(args.stall_secs),
        deadline,
    )
    .await?;
    let at_last = CpuSnap::take(target);
    // Late duplicates and the last results' writes: look again once idle.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = CpuSnap::take(target);
    let recs = take(target.app).await?;
    let stats = app_stats(target.app).await?;

    // Arrivals per actor.
    let mut per_actor: Vec<Vec<i64>> = vec![Vec::new(); n as usize];
    let mut stray = 0u64;
    for (at, id, name) in &recs {
        match id.strip_prefix(&prefix).and_then(|i| i.parse::<u64>().ok()) {
            Some(i) if i < n && name == "r" => per_actor[i as usize].push(*at),
            _ => stray += 1,
        }
    }
    let (mut missing, mut dups, mut actors_missing) = (0u64, 0u64, 0u64);
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    let mut lates = Vec::with_capacity(want as usize);
    let mut by_tick: Vec<Vec<i64>> = vec![Vec::new(); ticks as usize];
    let mut delivered = 0u64;
    for arrivals in &mut per_actor {
        arrivals.sort_unstable();
        let got = arrivals.len() as u64;
        delivered += got;
        if got < u64::from(ticks) {
            actors_missing += 1;
        }
        missing += u64::from(ticks).saturating_sub(got);
        dups += got.saturating_sub(u64::from(ticks));
        for (k, &at) in arrivals.iter().enumerate() {
            first = first.min(at);
            last = last.max(at);
            if k < ticks as usize {
                let late = at - (t_ns + k as i64 * period_ns);
                lates.push(late);
                by_tick[k].push(late);
            }
        }
    }
    if let Some(path) = &args.dump {
        let mut lines: Vec<(i64, usize, usize)> = per_actor
            .iter()
            .enumerate()
            .flat_map(|(i, a)| a.iter().enumerate().map(move |(k, &at)| (at - t_ns, i, k)))
            .collect();
        lines.sort_unstable();
        let mut out = String::with_capacity(lines.len() * 20);
        for (d, i, k) in lines {
            out.push_str(&format!("{} {i} {k}\n", d / 1000));
        }
        std::fs::write(path, out).with_context(|| format!("write {}", path.display()))?;
    }
    let span_t = (last - t_ns) as f64 / 1e9;
    let span_fl = (last - first) as f64 / 1e9;
    let rate_t = delivered as f64 / span_t;
    let rate_fl = delivered as f64 / span_fl;
    let lat = lateness(&mut lates);
    let window = at_last.since(&before);
    let tail = after.since(&before);
    // After its last tick a reminder is gone.
    let (gone_status, gone_body) = call_once(
        target.http,
        Method::GET,
        &reminder_path(&format!("{prefix}0"), "r"),
    )
    .await?;
    println!(
        "   delivered {delivered} (of {want}; {got} counted), missing {missing} ({actors_missing} actors short), \
         duplicates {dups}, stray {stray}; app: {stats}"
    );
    println!(
        "   invocations/s: {rate_fl:.0} (first→last {span_fl:.3} s), {rate_t:.0} (T→last {span_t:.3} s); \
         first at T + {:.1} ms",
        (first - t_ns) as f64 / 1e6
    );
    println!("   lateness (arrival − T − k·period): {lat}");
    for (k, v) in by_tick.iter_mut().enumerate() {
        v.sort_unstable();
        println!(
            "     tick {k}: {} arrivals, lateness p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            v.len(),
            pct(v, 50.0),
            pct(v, 99.0),
            v.last().map_or(f64::NAN, |&x| x as f64 / 1e6)
        );
    }
    println!("   CPU T−50ms → last arrival: {}", window.kv());
    println!(
        "       jobsd threads (µs/invocation): {}",
        window.jobsd_threads_us(delivered)
    );
    println!("   CPU T−50ms → last + 2 s:   {}", tail.kv());
    println!(
        "   GET of a finished reminder: {gone_status} {}",
        String::from_utf8_lossy(&gone_body).trim()
    );
    println!("   jobsd after: {}", rss(target.jobsd_pid));
    println!(
        "RESULT label=burst run={run} actors={n} ticks={ticks} period_ms={} want={want} delivered={delivered} \
         missing={missing} dups={dups} stray={stray} reg_rate={:.0} reg_p99_ms={:.2} margin_ms={margin_ms:.0} \
         rate_fl={rate_fl:.0} rate_t={rate_t:.0} span_fl_s={span_fl:.3} span_t_s={span_t:.3} first_ms={:.1} \
         {lat} {} jobsd_us_per_inv={:.1} app_us_per_inv={:.1} {}",
        args.period_ms,
        created.rate(),
        pct_u(&created.lat, 99.0),
        (first - t_ns) as f64 / 1e6,
        window.kv(),
        window.jobsd_total.as_secs_f64() * 1e6 / delivered.max(1) as f64,
        window.app.as_secs_f64() * 1e6 / delivered.max(1) as f64,
        rss(target.jobsd_pid),
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// CPU and memory of the processes under test
// ---------------------------------------------------------------------------------------

/// utime + stime of a `/proc/<pid>/stat` or `/proc/<pid>/task/<tid>/stat` file.
fn stat_cpu(path: &str) -> Option<Duration> {
    let text = std::fs::read_to_string(path).ok()?;
    let after_comm = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // Fields 14 and 15 of stat(5); the text after `comm` starts at field 3.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on Linux.
    Some(Duration::from_millis(ticks * 10))
}

/// Whether `pid` exists and is not a zombie.
fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let state = s[s.rfind(')')? + 1..].split_whitespace().next()?.to_owned();
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
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
    // user nice system idle iowait irq softirq steal
    (
        Duration::from_millis((at(0) + at(1) + at(2) + at(5) + at(6)) * 10),
        Duration::from_millis(at(7) * 10),
    )
}

/// `(Tcp ActiveOpens, TcpExt ListenOverflows)` of this network namespace: connections
/// opened, and connection attempts dropped because a listener's accept queue was full (each
/// costs the client a 1 s SYN retransmit).
fn tcp_counters() -> (u64, u64) {
    fn field(path: &str, section: &str, name: &str) -> u64 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let mut lines = text.lines().filter(|l| l.starts_with(section));
        let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
            return 0;
        };
        names
            .split_whitespace()
            .zip(values.split_whitespace())
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0)
    }
    (
        field("/proc/net/snmp", "Tcp:", "ActiveOpens"),
        field("/proc/net/netstat", "TcpExt:", "ListenOverflows"),
    )
}

/// A CPU snapshot of jobsd (by thread), the app, this process and the machine.
struct CpuSnap {
    at: Instant,
    jobsd: BTreeMap<String, Duration>,
    app: Duration,
    me: Duration,
    machine: (Duration, Duration),
    tcp: (u64, u64),
}

/// What happened between two snapshots.
struct CpuDelta {
    wall: f64,
    jobsd: BTreeMap<String, Duration>,
    jobsd_total: Duration,
    app: Duration,
    me: Duration,
    busy_cores: f64,
    other_cores: f64,
    steal_cores: f64,
    tcp_opens: u64,
    listen_overflows: u64,
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
            me: stat_cpu("/proc/self/stat").unwrap_or_default(),
            machine: machine_cpu(),
            tcp: tcp_counters(),
        }
    }

    fn since(&self, before: &CpuSnap) -> CpuDelta {
        let wall = self.at.duration_since(before.at).as_secs_f64().max(1e-9);
        let mut jobsd = BTreeMap::new();
        for (name, cpu) in &self.jobsd {
            let d = cpu.saturating_sub(before.jobsd.get(name).copied().unwrap_or_default());
            if !d.is_zero() {
                jobsd.insert(name.clone(), d);
            }
        }
        let jobsd_total: Duration = jobsd.values().sum();
        let app = self.app.saturating_sub(before.app);
        let me = self.me.saturating_sub(before.me);
        let busy = self.machine.0.saturating_sub(before.machine.0);
        let steal = self.machine.1.saturating_sub(before.machine.1);
        let other = busy
            .saturating_sub(jobsd_total)
            .saturating_sub(app)
            .saturating_sub(me);
        CpuDelta {
            wall,
            jobsd,
            jobsd_total,
            app,
            me,
            busy_cores: busy.as_secs_f64() / wall,
            other_cores: other.as_secs_f64() / wall,
            steal_cores: steal.as_secs_f64() / wall,
            tcp_opens: self.tcp.0.saturating_sub(before.tcp.0),
            listen_overflows: self.tcp.1.saturating_sub(before.tcp.1),
        }
    }
}

impl CpuDelta {
    /// `wall_ms=… jobsd_cpu_ms=… app_cpu_ms=… driver_cpu_ms=… machine_busy_cores=…
    /// other_cores=… steal_cores=… tcp_opens=… listen_overflows=…`.
    fn kv(&self) -> String {
        format!(
            "wall_ms={:.0} jobsd_cpu_ms={} app_cpu_ms={} driver_cpu_ms={} machine_busy_cores={:.2} other_cores={:.2} steal_cores={:.2} tcp_opens={} listen_overflows={}",
            self.wall * 1000.0,
            self.jobsd_total.as_millis(),
            self.app.as_millis(),
            self.me.as_millis(),
            self.busy_cores,
            self.other_cores,
            self.steal_cores,
            self.tcp_opens,
            self.listen_overflows,
        )
    }

    /// jobsd's CPU by thread name, in µs per unit of work.
    fn jobsd_threads_us(&self, per: u64) -> String {
        self.jobsd
            .iter()
            .map(|(name, d)| format!("{name}={:.1}", d.as_secs_f64() * 1e6 / per.max(1) as f64))
            .collect::<Vec<_>>()
            .join(" ")
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

/// Percentile `p` (0–100) of sorted ns values, in ms.
fn pct(sorted: &[i64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[i.clamp(1, sorted.len()) - 1] as f64 / 1e6
}

fn pct_u(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[i.clamp(1, sorted.len()) - 1] as f64 / 1e6
}

/// `p50_ms=… p90_ms=… p99_ms=… p999_ms=… max_ms=… min_ms=…` of lateness values in ns.
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
