//! Load generator for the Jobs API of a running jobsd — a benchmark, never a CI test.
//!
//! ```text
//! cargo run --release --example bench_api -- --http 127.0.0.1:3500 --grpc 127.0.0.1:50001
//! ```
//!
//! Modes (`--mode`):
//! - `http`: `-n` creates (default 100,000) as `POST /v1.0/jobs/bench-<run>-<i>` from `-c`
//!   clients (default 16), each on its own keep-alive HTTP/1.1 connection.
//! - `grpc`: the same over `Dapr/ScheduleJob`, `-c` tasks sharing 1 HTTP/2 channel, then `-c`
//!   channels (`--channels 1,16` to choose); the better is named.
//! - `jobsd-http`: the same creates on `POST /jobsd/v1/jobs/<name>` with labels and every
//!   policy; `--idempotency-key` sends each with its own `Idempotency-Key` (the job's name).
//! - `both` (default): `http` then `grpc`.
//! - `healthz` / `grpc-health`: the same load on `GET /v1.0/healthz` / `grpc.health.v1` —
//!   the transport's ceiling on this machine, with no JSON, validation or store.
//! - `--fill [N]`: N creates (default 1,000,000) at `--fill-concurrency` (default 64), with
//!   progress, for the RSS / reopen measurement.
//!
//! Every run prints a human line and a `RESULT key=value …` line (for `e2e/bench/api.sh`):
//! creates/s, latency p50/p90/p99/max, errors (anything but 204 / gRPC OK; the run aborts
//! past `--max-error-ratio`, default 0.1 %), and CPU per request of this process and, with
//! `--server-pid`, of the server split by thread name (tokio workers vs the store writer).
//!
//! Two helpers for profiling:
//! - `serve --store memory|redb`: the sidecar in this process over a chosen store (the
//!   memory store shows what the API costs without durable commits; `redb` also prints the
//!   writer's requests per commit).
//! - `micro`: in-process cost of the steps of one create (JSON, engine, durable commit)
//!   without any network.
//! - `wait-healthy`: polls `GET /v1.0/healthz` every millisecond and prints when it answered
//!   204 (unix nanoseconds), for reopen timings.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use clap::{Args, Parser, Subcommand, ValueEnum};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use jobsd::proto::runtime::{Job, ScheduleJobRequest, dapr_client::DaprClient};
use prost::Message;
use tokio::net::TcpStream;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// Load generator for jobsd's Jobs API (see the file's doc).
#[derive(Debug, Parser)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    /// A helper instead of a load run.
    #[command(subcommand)]
    command: Option<Helper>,
    /// Load-run flags.
    #[command(flatten)]
    load: LoadArgs,
}

#[derive(Debug, Subcommand)]
enum Helper {
    /// Serve the sidecar in this process over a chosen store.
    Serve(ServeArgs),
    /// In-process cost of the steps of one create.
    Micro(MicroArgs),
    /// Poll `GET /v1.0/healthz` until 204; print the unix time (ns) it answered.
    WaitHealthy(WaitArgs),
    /// Open a data dir's store and scan every job, as the engine's start does, without the
    /// engine: time and RSS of the store's share of a reopen.
    Reopen(ReopenArgs),
}

#[derive(Debug, Args)]
struct ReopenArgs {
    /// The data dir (of a stopped jobsd).
    #[arg(long)]
    data_dir: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    Http,
    /// `POST /jobsd/v1/jobs/<name>`: the same job plus labels, a policy and jobsd's failure
    /// policy.
    JobsdHttp,
    Grpc,
    Both,
    Healthz,
    GrpcHealth,
}

#[derive(Debug, Args)]
struct LoadArgs {
    /// jobsd's HTTP API address.
    #[arg(long, default_value = "127.0.0.1:3500")]
    http: SocketAddr,
    /// jobsd's gRPC API address.
    #[arg(long, default_value = "127.0.0.1:50001")]
    grpc: SocketAddr,
    /// What to measure.
    #[arg(long, value_enum, default_value_t = Mode::Both)]
    mode: Mode,
    /// Requests per run.
    #[arg(short = 'n', long, default_value_t = 100_000)]
    requests: u64,
    /// Concurrent clients (one request in flight each).
    #[arg(short = 'c', long, default_value_t = 16)]
    concurrency: usize,
    /// gRPC: numbers of HTTP/2 channels the clients share, one run each (default `1,C`).
    #[arg(long, value_delimiter = ',')]
    channels: Vec<usize>,
    /// Untimed requests before each run (connections warm, server caches hot).
    #[arg(long, default_value_t = 1000)]
    warmup: u64,
    /// Create N jobs as fast as possible instead (default N: 1,000,000).
    #[arg(long, num_args = 0..=1, default_missing_value = "1000000")]
    fill: Option<u64>,
    /// Clients of `--fill`.
    #[arg(long, default_value_t = 64)]
    fill_concurrency: usize,
    /// Transport of `--fill`.
    #[arg(long, value_enum, default_value_t = FillProto::Http)]
    fill_proto: FillProto,
    /// Job names are `bench-<run-id>-<i>`; default: derived from the clock.
    #[arg(long)]
    run_id: Option<String>,
    /// Abort a run once errors exceed this share of its requests.
    #[arg(long, default_value_t = 0.001)]
    max_error_ratio: f64,
    /// The server's pid: report its CPU per request, by thread name.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Client runtime worker threads (default: the number of CPUs).
    #[arg(long)]
    threads: Option<usize>,
    /// Print progress every this many seconds (0: only for `--fill`).
    #[arg(long, default_value_t = 0)]
    progress_secs: u64,
    /// With `--mode jobsd-http`: send every create with its own `Idempotency-Key` (the job's
    /// name), to measure what keeping the keys costs.
    #[arg(long)]
    idempotency_key: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FillProto {
    Http,
    Grpc,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StoreKind {
    Memory,
    Redb,
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// The store behind the engine.
    #[arg(long, value_enum, default_value_t = StoreKind::Memory)]
    store: StoreKind,
    /// Data directory (redb).
    #[arg(long, default_value = "./bench-data")]
    data_dir: PathBuf,
    /// HTTP API port.
    #[arg(long, default_value_t = 3500)]
    http_port: u16,
    /// gRPC API port.
    #[arg(long, default_value_t = 50001)]
    grpc_port: u16,
}

#[derive(Debug, Args)]
struct MicroArgs {
    /// Iterations of the CPU-only steps.
    #[arg(long, default_value_t = 200_000)]
    iterations: u64,
    /// Durable creates per concurrency level of the redb steps.
    #[arg(long, default_value_t = 50_000)]
    durable: u64,
    /// Where the redb steps put their (fresh) database; removed afterwards.
    #[arg(long, default_value = "./bench-micro")]
    data_dir: PathBuf,
}

#[derive(Debug, Args)]
struct WaitArgs {
    /// jobsd's HTTP API address.
    #[arg(long, default_value = "127.0.0.1:3500")]
    http: SocketAddr,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
    /// Give up as soon as this process is gone.
    #[arg(long)]
    pid: Option<u32>,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let threads = cli
        .load
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, usize::from));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match cli.command {
            Some(Helper::Serve(args)) => serve(args).await,
            Some(Helper::Micro(args)) => micro(args).await,
            Some(Helper::WaitHealthy(args)) => wait_healthy(args).await,
            Some(Helper::Reopen(args)) => reopen(args).await,
            None => load(cli.load).await,
        }
    })
}

// ---------------------------------------------------------------------------------------
// Load runs
// ---------------------------------------------------------------------------------------

/// What each request of a run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    HttpCreate,
    JobsdCreate,
    /// `JobsdCreate` with an `Idempotency-Key`.
    JobsdCreateKeyed,
    GrpcCreate,
    HttpHealthz,
    GrpcHealth,
}

impl Call {
    fn proto(self) -> &'static str {
        match self {
            Call::HttpCreate => "http",
            Call::JobsdCreate => "jobsd-http",
            Call::JobsdCreateKeyed => "jobsd-http-idempotency-key",
            Call::GrpcCreate => "grpc",
            Call::HttpHealthz => "http-healthz",
            Call::GrpcHealth => "grpc-health",
        }
    }

    fn is_grpc(self) -> bool {
        matches!(self, Call::GrpcCreate | Call::GrpcHealth)
    }
}

/// One run's settings.
#[derive(Debug, Clone)]
struct RunSpec {
    call: Call,
    http: SocketAddr,
    grpc: SocketAddr,
    requests: u64,
    concurrency: usize,
    /// gRPC channels shared by the clients.
    channels: usize,
    /// Names are `bench-<run_id>-<i>`.
    run_id: String,
    warmup: u64,
    max_error_ratio: f64,
    server_pid: Option<u32>,
    progress: Option<Duration>,
}

/// One run's figures.
#[derive(Debug, Clone)]
struct RunResult {
    ok: u64,
    errors: u64,
    aborted: bool,
    secs: f64,
    /// Sorted latencies of the successful requests, in ns.
    lat: Vec<u64>,
    client_cpu: Duration,
    /// CPU time of the server's threads during the run, by thread name.
    server_cpu: BTreeMap<String, Duration>,
    /// Busy CPU time of the whole machine during the run (all processes, all cores).
    machine: MachineCpu,
}

impl RunResult {
    fn rate(&self) -> f64 {
        self.ok as f64 / self.secs
    }

    fn pct_ms(&self, p: f64) -> f64 {
        percentile(&self.lat, p) as f64 / 1e6
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

async fn load(args: LoadArgs) -> Result<()> {
    let run_id = args.run_id.clone().unwrap_or_else(|| {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        format!("{ms:x}")
    });
    let base = RunSpec {
        call: Call::HttpCreate,
        http: args.http,
        grpc: args.grpc,
        requests: args.requests,
        concurrency: args.concurrency.max(1),
        channels: 1,
        run_id: run_id.clone(),
        warmup: args.warmup,
        max_error_ratio: args.max_error_ratio,
        server_pid: args.server_pid,
        progress: (args.progress_secs > 0).then(|| Duration::from_secs(args.progress_secs)),
    };
    let mut failed = false;

    if let Some(n) = args.fill {
        let spec = RunSpec {
            call: match args.fill_proto {
                FillProto::Http => Call::HttpCreate,
                FillProto::Grpc => Call::GrpcCreate,
            },
            requests: n,
            concurrency: args.fill_concurrency.max(1),
            channels: args.fill_concurrency.max(1),
            run_id: format!("{run_id}f"),
            warmup: 0,
            progress: base.progress.or(Some(Duration::from_secs(10))),
            ..base
        };
        let result = run(&spec).await?;
        report("fill", &spec, &result);
        return if result.aborted || result.errors > 0 && result.ok == 0 {
            bail!("fill aborted")
        } else {
            Ok(())
        };
    }

    let channel_counts = if args.channels.is_empty() {
        let mut v = vec![1, base.concurrency];
        v.dedup();
        v
    } else {
        args.channels.clone()
    };

    let mut plan: Vec<(String, RunSpec)> = Vec::new();
    if matches!(args.mode, Mode::Http | Mode::Both) {
        plan.push((
            "http".into(),
            RunSpec {
                call: Call::HttpCreate,
                run_id: format!("{run_id}h"),
                ..base.clone()
            },
        ));
    }
    if args.mode == Mode::JobsdHttp {
        plan.push((
            "jobsd-http".into(),
            RunSpec {
                call: if args.idempotency_key {
                    Call::JobsdCreateKeyed
                } else {
                    Call::JobsdCreate
                },
                run_id: format!("{run_id}j"),
                ..base.clone()
            },
        ));
    }
    if args.mode == Mode::Healthz {
        plan.push((
            "http-healthz".into(),
            RunSpec {
                call: Call::HttpHealthz,
                ..base.clone()
            },
        ));
    }
    for &channels in &channel_counts {
        let channels = channels.max(1);
        if matches!(args.mode, Mode::Grpc | Mode::Both) {
            plan.push((
                format!("grpc-ch{channels}"),
                RunSpec {
                    call: Call::GrpcCreate,
                    channels,
                    run_id: format!("{run_id}g{channels}"),
                    ..base.clone()
                },
            ));
        }
        if args.mode == Mode::GrpcHealth {
            plan.push((
                format!("grpc-health-ch{channels}"),
                RunSpec {
                    call: Call::GrpcHealth,
                    channels,
                    ..base.clone()
                },
            ));
        }
    }

    let mut grpc_best: Option<(String, f64)> = None;
    for (label, spec) in &plan {
        let result = run(spec).await?;
        report(label, spec, &result);
        if spec.call.is_grpc() && grpc_best.as_ref().is_none_or(|(_, r)| result.rate() > *r) {
            grpc_best = Some((label.clone(), result.rate()));
        }
        failed |= result.aborted;
    }
    if let Some((label, rate)) = grpc_best.filter(|_| channel_counts.len() > 1) {
        println!("gRPC: best of the channel settings is {label} ({rate:.0} req/s)");
    }
    if failed {
        bail!(
            "a run aborted: more than {:.2} % errors",
            args.max_error_ratio * 100.0
        );
    }
    Ok(())
}

/// Where one task sends its requests.
enum Client {
    Http {
        addr: SocketAddr,
        sender: SendRequest<Full<Bytes>>,
    },
    Grpc(DaprClient<Channel>),
    Health(HealthClient<Channel>),
}

async fn connect_http(addr: SocketAddr) -> Result<SendRequest<Full<Bytes>>> {
    let stream = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connect {addr}"))?;
    stream.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        // The connection ends with the task's sender; an error shows up there.
        let _ = conn.await;
    });
    Ok(sender)
}

async fn connect_grpc(addr: SocketAddr) -> Result<Channel> {
    Endpoint::from_shared(format!("http://{addr}"))?
        .tcp_nodelay(true)
        .connect()
        .await
        .with_context(|| format!("connect grpc {addr}"))
}

/// The HTTP body of create `name`: ~135 bytes, due in a year, so nothing fires.
fn http_body(name: &str) -> String {
    format!(
        concat!(
            r#"{{"schedule":"@every 1h","dueTime":"8760h","repeats":10,"ttl":"87600h","#,
            r#""data":{{"order":"{}","amount":42,"currency":"EUR"}}}}"#
        ),
        name
    )
}

/// The body of a create on jobsd's route: [`http_body`] plus labels, a full tick policy and an
/// exponential failure policy with a dead-letter job (~560 bytes).
fn jobsd_body(name: &str) -> String {
    let dapr = http_body(name);
    format!(
        concat!(
            r#"{},"labels":{{"team":"billing","tier":"1"}},"#,
            r#""policy":{{"catchUp":"window","catchUpWindow":"10m","whileTargetDown":"skip","#,
            r#""overlap":"bufferOne","timeout":"30s","jitter":"5s","#,
            r#""dst":{{"gap":"shift","repeat":"first"}}}},"#,
            r#""failurePolicy":{{"exponential":{{"initialInterval":"1s","multiplier":2,"#,
            r#""maxInterval":"1m","jitter":0.2,"maxRetries":5}},"#,
            r#""onExhausted":"deadLetter","deadLetterJob":"dead-letters"}}}}"#
        ),
        &dapr[..dapr.len() - 1]
    )
}

/// The gRPC request of create `name`, the same job with its data as a `StringValue`.
fn grpc_request(name: String) -> ScheduleJobRequest {
    let data = format!(r#"{{"order":"{name}","amount":42,"currency":"EUR"}}"#);
    ScheduleJobRequest {
        job: Some(Job {
            name,
            schedule: Some("@every 1h".into()),
            repeats: Some(10),
            due_time: Some("8760h".into()),
            ttl: Some("87600h".into()),
            data: Some(prost_types::Any {
                type_url: "type.googleapis.com/google.protobuf.StringValue".into(),
                value: data.encode_to_vec(),
            }),
            ..Default::default()
        }),
        overwrite: false,
    }
}

impl Client {
    /// Sends request `name`; `Err` describes a non-success answer or a transport error.
    async fn call(&mut self, call: Call, name: String) -> Result<(), String> {
        match self {
            Client::Http { addr, sender } => {
                if sender.is_closed() {
                    *sender = connect_http(*addr).await.map_err(|e| format!("{e:#}"))?;
                }
                let request = match call {
                    Call::HttpHealthz => http::Request::get("/v1.0/healthz")
                        .header(http::header::HOST, addr.to_string())
                        .body(Full::new(Bytes::new())),
                    Call::JobsdCreate | Call::JobsdCreateKeyed => {
                        let mut request = http::Request::post(format!("/jobsd/v1/jobs/{name}"))
                            .header(http::header::HOST, addr.to_string())
                            .header(http::header::CONTENT_TYPE, "application/json");
                        if call == Call::JobsdCreateKeyed {
                            request = request.header("Idempotency-Key", name.as_str());
                        }
                        request.body(Full::new(Bytes::from(jobsd_body(&name))))
                    }
                    _ => http::Request::post(format!("/v1.0/jobs/{name}"))
                        .header(http::header::HOST, addr.to_string())
                        .header(http::header::CONTENT_TYPE, "application/json")
                        .body(Full::new(Bytes::from(http_body(&name)))),
                }
                .map_err(|e| e.to_string())?;
                sender.ready().await.map_err(|e| e.to_string())?;
                let response = sender
                    .send_request(request)
                    .await
                    .map_err(|e| e.to_string())?;
                let status = response.status();
                let body = response
                    .into_body()
                    .collect()
                    .await
                    .map_err(|e| e.to_string())?
                    .to_bytes();
                if status == http::StatusCode::NO_CONTENT {
                    Ok(())
                } else {
                    Err(format!("{status}: {}", String::from_utf8_lossy(&body)))
                }
            }
            Client::Grpc(client) => client
                .schedule_job(grpc_request(name))
                .await
                .map(drop)
                .map_err(|s| format!("{:?}: {}", s.code(), s.message())),
            Client::Health(client) => client
                .check(HealthCheckRequest {
                    service: String::new(),
                })
                .await
                .map(drop)
                .map_err(|s| format!("{:?}: {}", s.code(), s.message())),
        }
    }
}

/// Counters shared by a run's tasks.
struct Shared {
    next: AtomicU64,
    done: AtomicU64,
    errors: AtomicU64,
    abort: AtomicBool,
    samples: Mutex<Vec<String>>,
}

async fn make_clients(spec: &RunSpec) -> Result<Vec<Client>> {
    let mut clients = Vec::with_capacity(spec.concurrency);
    if spec.call.is_grpc() {
        let mut channels = Vec::with_capacity(spec.channels);
        for _ in 0..spec.channels.max(1) {
            channels.push(connect_grpc(spec.grpc).await?);
        }
        for i in 0..spec.concurrency {
            let channel = channels[i % channels.len()].clone();
            clients.push(match spec.call {
                Call::GrpcHealth => Client::Health(HealthClient::new(channel)),
                _ => Client::Grpc(DaprClient::new(channel)),
            });
        }
    } else {
        for _ in 0..spec.concurrency {
            clients.push(Client::Http {
                addr: spec.http,
                sender: connect_http(spec.http).await?,
            });
        }
    }
    Ok(clients)
}

async fn run(spec: &RunSpec) -> Result<RunResult> {
    let mut clients = make_clients(spec).await?;

    if spec.warmup > 0 {
        let next = Arc::new(AtomicU64::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        for mut client in clients.drain(..) {
            let next = Arc::clone(&next);
            let (call, n, id) = (spec.call, spec.warmup, spec.run_id.clone());
            tasks.spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    // Warmup errors are ignored: the timed run counts its own.
                    let _ = client.call(call, format!("bench-{id}-w{i}")).await;
                }
                client
            });
        }
        while let Some(client) = tasks.join_next().await {
            clients.push(client?);
        }
    }

    let shared = Arc::new(Shared {
        next: AtomicU64::new(0),
        done: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        abort: AtomicBool::new(false),
        samples: Mutex::new(Vec::new()),
    });
    let max_errors = (spec.requests as f64 * spec.max_error_ratio).floor() as u64;
    let server_before = spec.server_pid.map(thread_cpu).unwrap_or_default();
    let client_before = process_cpu("self");
    let machine_before = MachineCpu::read();
    let start = Instant::now();

    let progress = spec.progress.map(|every| {
        let shared = Arc::clone(&shared);
        let total = spec.requests;
        tokio::spawn(async move {
            let mut last = (Instant::now(), 0u64);
            loop {
                tokio::time::sleep(every).await;
                let done = shared.done.load(Ordering::Relaxed);
                let now = Instant::now();
                let rate = (done - last.1) as f64 / (now - last.0).as_secs_f64();
                println!(
                    "  … {done}/{total} ({:.0} s): {rate:.0} req/s, {} errors",
                    start.elapsed().as_secs_f64(),
                    shared.errors.load(Ordering::Relaxed)
                );
                last = (now, done);
            }
        })
    });

    let mut tasks = tokio::task::JoinSet::new();
    for mut client in clients {
        let shared = Arc::clone(&shared);
        let (call, n, id) = (spec.call, spec.requests, spec.run_id.clone());
        let per_task = (n as usize / spec.concurrency) + 16;
        tasks.spawn(async move {
            let mut lat = Vec::with_capacity(per_task);
            while !shared.abort.load(Ordering::Relaxed) {
                let i = shared.next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let name = format!("bench-{id}-{i}");
                let t0 = Instant::now();
                let outcome = client.call(call, name).await;
                let elapsed = t0.elapsed().as_nanos() as u64;
                shared.done.fetch_add(1, Ordering::Relaxed);
                match outcome {
                    Ok(()) => lat.push(elapsed),
                    Err(e) => {
                        let errors = shared.errors.fetch_add(1, Ordering::Relaxed) + 1;
                        if let Ok(mut samples) = shared.samples.lock()
                            && samples.len() < 5
                        {
                            samples.push(e);
                        }
                        if errors > max_errors {
                            shared.abort.store(true, Ordering::Relaxed);
                        }
                    }
                }
            }
            lat
        });
    }
    let mut lat = Vec::with_capacity(spec.requests as usize);
    while let Some(part) = tasks.join_next().await {
        lat.extend(part?);
    }
    let secs = start.elapsed().as_secs_f64();
    let client_cpu = process_cpu("self").saturating_sub(client_before);
    let machine = MachineCpu::read().since(&machine_before);
    let server_after = spec.server_pid.map(thread_cpu).unwrap_or_default();
    if let Some(p) = progress {
        p.abort();
    }
    lat.sort_unstable();
    let mut server_cpu = BTreeMap::new();
    for (name, after) in server_after {
        let before = server_before.get(&name).copied().unwrap_or_default();
        server_cpu.insert(name, after.saturating_sub(before));
    }
    for sample in shared.samples.lock().map(|s| s.clone()).unwrap_or_default() {
        eprintln!("  error sample: {sample}");
    }
    Ok(RunResult {
        ok: lat.len() as u64,
        errors: shared.errors.load(Ordering::Relaxed),
        aborted: shared.abort.load(Ordering::Relaxed),
        secs,
        lat,
        client_cpu,
        server_cpu,
        machine,
    })
}

fn report(label: &str, spec: &RunSpec, r: &RunResult) {
    let per_req_us = |d: Duration| d.as_secs_f64() * 1e6 / (r.ok + r.errors).max(1) as f64;
    let server_total: Duration = r.server_cpu.values().sum();
    // Cores busy with anything but this client and the server (builds, other tests…) and
    // stolen by the hypervisor, averaged over the run.
    let other_cores = r
        .machine
        .busy
        .saturating_sub(r.client_cpu + server_total)
        .as_secs_f64()
        / r.secs;
    let steal_cores = r.machine.steal.as_secs_f64() / r.secs;
    let threads: Vec<String> = r
        .server_cpu
        .iter()
        .filter(|(_, d)| !d.is_zero())
        .map(|(name, d)| format!("{name}={:.1}", per_req_us(*d)))
        .collect();
    println!(
        "{label:<16} {:>8} ok {:>4} err in {:>6.2} s: {:>8.0} req/s  p50 {:.3} p90 {:.3} \
         p99 {:.3} max {:.3} ms  cpu/req: client {:.1} µs, server {:.1} µs [{}]; \
         other load {:.2} cores, steal {:.2}{}",
        r.ok,
        r.errors,
        r.secs,
        r.rate(),
        r.pct_ms(0.50),
        r.pct_ms(0.90),
        r.pct_ms(0.99),
        r.pct_ms(1.0),
        per_req_us(r.client_cpu),
        per_req_us(server_total),
        threads.join(" "),
        other_cores,
        steal_cores,
        if r.aborted { "  ABORTED" } else { "" },
    );
    println!(
        "RESULT label={label} proto={} n={} c={} channels={} ok={} errors={} aborted={} \
         secs={:.3} rate={:.1} p50_ms={:.3} p90_ms={:.3} p99_ms={:.3} max_ms={:.3} \
         client_cpu_us={:.2} server_cpu_us={:.2} other_cores={:.2} steal_cores={:.2} {}",
        spec.call.proto(),
        spec.requests,
        spec.concurrency,
        if spec.call.is_grpc() {
            spec.channels
        } else {
            0
        },
        r.ok,
        r.errors,
        r.aborted,
        r.secs,
        r.rate(),
        r.pct_ms(0.50),
        r.pct_ms(0.90),
        r.pct_ms(0.99),
        r.pct_ms(1.0),
        per_req_us(r.client_cpu),
        per_req_us(server_total),
        other_cores,
        steal_cores,
        r.server_cpu
            .iter()
            .filter(|(_, d)| !d.is_zero())
            .map(|(name, d)| format!("cpu_{name}_us={:.2}", per_req_us(*d)))
            .collect::<Vec<_>>()
            .join(" "),
    );
}

/// Busy and stolen CPU time of the machine, from the first line of `/proc/stat`.
#[derive(Debug, Clone, Copy, Default)]
struct MachineCpu {
    /// user + nice + system + irq + softirq, all cores.
    busy: Duration,
    /// Time the hypervisor ran something else while we wanted the CPU.
    steal: Duration,
}

impl MachineCpu {
    fn read() -> MachineCpu {
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
        MachineCpu {
            busy: Duration::from_millis((at(0) + at(1) + at(2) + at(5) + at(6)) * 10),
            steal: Duration::from_millis(at(7) * 10),
        }
    }

    fn since(&self, before: &MachineCpu) -> MachineCpu {
        MachineCpu {
            busy: self.busy.saturating_sub(before.busy),
            steal: self.steal.saturating_sub(before.steal),
        }
    }
}

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

fn process_cpu(pid: &str) -> Duration {
    stat_cpu(&format!("/proc/{pid}/stat")).unwrap_or_default()
}

/// CPU time of each thread of `pid`, summed by thread name (digits dropped, so that
/// `tokio-runtime-w` and pool threads group).
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

// ---------------------------------------------------------------------------------------
// Helpers: wait-healthy, serve, micro
// ---------------------------------------------------------------------------------------

async fn wait_healthy(args: WaitArgs) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    loop {
        if let Ok(mut sender) = connect_http(args.http).await {
            let request = http::Request::get("/v1.0/healthz")
                .header(http::header::HOST, args.http.to_string())
                .body(Full::new(Bytes::new()))?;
            if let Ok(response) = sender.send_request(request).await
                && response.status() == http::StatusCode::NO_CONTENT
            {
                let now = SystemTime::now().duration_since(UNIX_EPOCH)?;
                println!("{}", now.as_nanos());
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            bail!("{} not healthy after {} s", args.http, args.timeout_secs);
        }
        if let Some(pid) = args.pid
            && !process_alive(pid)
        {
            bail!("process {pid} exited before {} was healthy", args.http);
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Sidecar settings as jobsd's own flags would give them.
fn sidecar_config(
    data_dir: &std::path::Path,
    http_port: u16,
    grpc_port: u16,
) -> Result<jobsd::config::Sidecar> {
    let cli = jobsd::config::Cli::try_parse_from([
        "jobsd".to_owned(),
        "--app-id".to_owned(),
        "myapp".to_owned(),
        "--data-dir".to_owned(),
        data_dir.display().to_string(),
        "--dapr-http-port".to_owned(),
        http_port.to_string(),
        "--dapr-grpc-port".to_owned(),
        grpc_port.to_string(),
        "--dapr-listen-addresses".to_owned(),
        "127.0.0.1".to_owned(),
        // Metrics on, as in production, on a free loopback port.
        "--metrics-listen-address".to_owned(),
        "127.0.0.1".to_owned(),
        "--metrics-port".to_owned(),
        "0".to_owned(),
    ])?;
    cli.sidecar
        .validate(jobsd::config::Env::default())
        .map_err(|e| anyhow::anyhow!("{e}"))
}

async fn serve(args: ServeArgs) -> Result<()> {
    use jobsd::store::{Memory, Redb, Store};
    let cfg = sidecar_config(&args.data_dir, args.http_port, args.grpc_port)?;
    let mut redb = None;
    let store: Arc<dyn Store> = match args.store {
        StoreKind::Memory => Arc::new(Memory::new()),
        StoreKind::Redb => {
            let r = Arc::new(Redb::open(&args.data_dir)?);
            redb = Some(Arc::clone(&r));
            r
        }
    };
    let sidecar =
        jobsd::app::Sidecar::start_with(cfg, store, Arc::new(jobsd::clock::SystemClock)).await?;
    println!(
        "serving {:?} store: http {:?} grpc {:?} (pid {})",
        args.store,
        sidecar.http_addrs,
        sidecar.grpc_addrs,
        std::process::id()
    );
    let stop = sidecar.shutdown_token();
    let stats = redb.map(|r| {
        tokio::spawn(async move {
            let mut last = r.stats();
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                let now = r.stats();
                let (requests, commits) =
                    (now.requests - last.requests, now.commits - last.commits);
                if commits > 0 {
                    println!(
                        "  redb writer: +{requests} requests in +{commits} commits \
                         ({:.1} per commit; {} failed commits in all)",
                        requests as f64 / commits as f64,
                        now.failed_commits
                    );
                }
                last = now;
            }
        })
    });
    tokio::spawn(async move {
        jobsd::app::shutdown_signal().await;
        stop.cancel();
    });
    sidecar.wait().await?;
    if let Some(s) = stats {
        s.abort();
    }
    Ok(())
}

/// VmRSS and VmHWM of this process, in MiB.
fn own_rss() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

async fn reopen(args: ReopenArgs) -> Result<()> {
    use jobsd::store::{Redb, Store};
    let (rss, _) = own_rss();
    println!("before open: RSS {rss:.1} MiB");
    let t0 = Instant::now();
    let store = Redb::open(&args.data_dir)?;
    let (rss, hwm) = own_rss();
    println!(
        "Redb::open: {:.0} ms, RSS {rss:.1} MiB (HWM {hwm:.1})",
        t0.elapsed().as_secs_f64() * 1e3
    );
    let t0 = Instant::now();
    let mut scan = store.scan("", 4096).await?;
    let (mut jobs, mut bytes) = (0u64, 0u64);
    while let Some(page) = scan.next_page().await? {
        for loaded in page {
            jobs += 1;
            bytes += loaded.job.encoded_len() as u64 + loaded.key.len() as u64;
        }
    }
    let (rss, hwm) = own_rss();
    println!(
        "full scan (decode only, pages dropped): {jobs} jobs in {:.0} ms; {:.0} bytes of key + \
         record per job; RSS {rss:.1} MiB (HWM {hwm:.1})",
        t0.elapsed().as_secs_f64() * 1e3,
        bytes as f64 / jobs.max(1) as f64
    );
    store.close().await?;
    Ok(())
}

/// Runs `f` `n` times on this task; ns per call.
async fn time_per_call<F, Fut>(n: u64, mut f: F) -> Result<f64>
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let start = Instant::now();
    for i in 0..n {
        f(i).await?;
    }
    Ok(start.elapsed().as_nanos() as f64 / n as f64)
}

fn scheduler_request(name: String) -> jobsd::proto::dapr_scheduler::ScheduleJobRequest {
    use jobsd::proto::dapr_scheduler as sv1;
    let job = grpc_request(name.clone()).job.unwrap_or_default();
    sv1::ScheduleJobRequest {
        name,
        job: Some(sv1::Job {
            schedule: job.schedule,
            repeats: job.repeats,
            due_time: job.due_time,
            ttl: job.ttl,
            data: job.data,
            failure_policy: job.failure_policy,
        }),
        metadata: Some(sv1::JobMetadata {
            app_id: "myapp".into(),
            namespace: "default".into(),
            target: Some(sv1::JobTargetMetadata {
                r#type: Some(sv1::job_target_metadata::Type::Job(sv1::TargetJob {})),
            }),
            concurrency_key: None,
        }),
        overwrite: false,
    }
}

async fn micro(args: MicroArgs) -> Result<()> {
    use jobsd::engine::Engine;
    use jobsd::store::{Memory, Redb, Store};

    let n = args.iterations.max(1);
    println!(
        "inline sizes (bytes) of what the engine keeps per job: schedule::Plan {}, \
         schedule::Counter {}, Option<prost_types::Any> {}, scheduler JobMetadata {}",
        std::mem::size_of::<jobsd::schedule::Plan>(),
        std::mem::size_of::<jobsd::schedule::Counter>(),
        std::mem::size_of::<Option<prost_types::Any>>(),
        std::mem::size_of::<jobsd::proto::dapr_scheduler::JobMetadata>(),
    );
    println!("in-process cost of one create ({n} iterations, one task):");

    let bodies: Vec<String> = (0..1000)
        .map(|i| http_body(&format!("bench-m-{i}")))
        .collect();
    let ns = time_per_call(n, |i| {
        let body = &bodies[(i % 1000) as usize];
        async move {
            let req = jobsd::api::json::parse_job_http_request(body.as_bytes())
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            std::hint::black_box(req.data.as_ref().map(jobsd::api::json::value_to_any));
            Ok(())
        }
    })
    .await?;
    println!("  HTTP body JSON → JobHTTPRequest + data → Any : {ns:>8.0} ns");

    let encoded: Vec<Vec<u8>> = (0..1000)
        .map(|i| grpc_request(format!("bench-m-{i}")).encode_to_vec())
        .collect();
    let ns = time_per_call(n, |i| {
        let bytes = &encoded[(i % 1000) as usize];
        async move {
            std::hint::black_box(ScheduleJobRequest::decode(bytes.as_slice())?);
            Ok(())
        }
    })
    .await?;
    println!("  gRPC ScheduleJobRequest protobuf decode       : {ns:>8.0} ns");

    let clock = Arc::new(jobsd::clock::SystemClock);
    let memory: Arc<dyn Store> = Arc::new(Memory::new());
    let engine = Engine::new(memory, clock.clone());
    let ns = time_per_call(n, |i| {
        let engine = engine.clone();
        async move {
            engine
                .schedule_job(scheduler_request(format!("bench-m-{i}")))
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))
        }
    })
    .await?;
    println!(
        "  engine.schedule_job over the memory store     : {ns:>8.0} ns (validate, key, encode, insert)"
    );

    // Durable: sequential, then concurrent, through the engine over a fresh redb.
    let _ = std::fs::remove_dir_all(&args.data_dir);
    let redb = Arc::new(Redb::open(&args.data_dir)?);
    let engine = Engine::new(redb.clone(), clock);
    let seq = 2000u64.min(args.durable.max(1));
    let mut lat = Vec::with_capacity(seq as usize);
    for i in 0..seq {
        let t0 = Instant::now();
        engine
            .schedule_job(scheduler_request(format!("bench-s-{i}")))
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        lat.push(t0.elapsed().as_nanos() as u64);
    }
    lat.sort_unstable();
    println!(
        "  engine over redb, 1 in flight (= 1 commit each): p50 {:.3} p99 {:.3} ms → {:.0} creates/s",
        percentile(&lat, 0.5) as f64 / 1e6,
        percentile(&lat, 0.99) as f64 / 1e6,
        seq as f64 / (lat.iter().sum::<u64>() as f64 / 1e9)
    );
    for concurrency in [16usize, 64] {
        let before = redb.stats();
        let next = Arc::new(AtomicU64::new(0));
        let total = args.durable;
        let start = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..concurrency {
            let (engine, next) = (engine.clone(), Arc::clone(&next));
            tasks.spawn(async move {
                let mut lat = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        break;
                    }
                    let t0 = Instant::now();
                    let r = engine
                        .schedule_job(scheduler_request(format!("bench-c{concurrency}-{i}")))
                        .await;
                    if r.is_ok() {
                        lat.push(t0.elapsed().as_nanos() as u64);
                    }
                }
                lat
            });
        }
        let mut lat = Vec::new();
        while let Some(part) = tasks.join_next().await {
            lat.extend(part?);
        }
        let secs = start.elapsed().as_secs_f64();
        lat.sort_unstable();
        let after = redb.stats();
        println!(
            "  engine over redb, {concurrency:>2} tasks: {:>7.0} creates/s, p50 {:.3} p99 {:.3} ms, \
             {:.1} requests per commit ({} ok of {total})",
            lat.len() as f64 / secs,
            percentile(&lat, 0.5) as f64 / 1e6,
            percentile(&lat, 0.99) as f64 / 1e6,
            (after.requests - before.requests) as f64
                / (after.commits - before.commits).max(1) as f64,
            lat.len(),
        );
    }
    redb.close().await?;
    drop(engine);
    drop(redb);
    let _ = std::fs::remove_dir_all(&args.data_dir);
    Ok(())
}
