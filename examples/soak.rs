//! The soak (issue 15, item 5): the app, the load driver and the checker that `e2e/soak.sh`
//! runs around a release jobsd for an hour — never part of CI.
//!
//! - `app --port P --log FILE`: an HTTP app that answers every `POST /job/<name>` with 200
//!   at once. Before it answers it appends one fixed 24-byte record to FILE (which job, the
//!   attempt and nominal time jobsd put in its `Jobsd-Attempt` / `Jobsd-Scheduled-Time`
//!   headers, the wall-clock arrival). The record is written (to the page cache, one
//!   `write(2)`) before the 200 goes out, so a `kill -9` of the app never loses a delivery
//!   jobsd saw acknowledged; restarted apps append to the same file.
//! - `drive`: creates `--recurring` jobs `r-<i>` (`@every 1s`, no end, first tick at
//!   S0 + ⌊i·1000/N⌋ ms) so jobsd fires N triggers/s, then for `--secs` s creates `--churn`
//!   one-shots `o-<seq>` a second (due 3–18 s ahead) and deletes every fourth right after its
//!   create was answered. Everything it learns goes to `--log` as text lines: `start S0 N`,
//!   `c seq due_ms ack_ms` (created), `u seq due_ms` (the create failed: it may or may not
//!   exist), `d seq ack_ms` (deleted), `x seq` (the delete failed), `end end_ms`.
//! - `check`: reads the app's records, the driver's log and the script's events
//!   (`<unix ms> <what>` lines: `kill9`, `sigterm`, `app-restart`) and counts, for every
//!   tick due at or before the driver's end: lost (a recurring tick, or a one-shot whose
//!   create was answered OK and that was not deleted, never delivered), early (any arrival
//!   before its nominal time), wrong nominal times, one-shots delivered after their delete was
//!   answered, and duplicates (a tick delivered more than once), each duplicate put beside the
//!   event it came with (its first delivery at most 10 s before the event, or 1 s after). Prints a `RESULT` line; exits 1 when lost, early, wrong or
//!   resurrected is not 0.

#[path = "common/accept.rs"]
mod accept;

use std::collections::HashMap;
use std::convert::Infallible;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use clap::{Args, Parser, Subcommand};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use jobsd::proto::runtime::dapr_client::DaprClient;
use jobsd::proto::runtime::{DeleteJobRequest, Job, ScheduleJobRequest};
use tokio::net::TcpListener;
use tonic::transport::{Channel, Endpoint};

#[derive(Debug, Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// The HTTP app jobsd delivers to; records every delivery in --log.
    App(AppArgs),
    /// Creates the recurring jobs, then churns one-shots for --secs seconds.
    Drive(DriveArgs),
    /// Counts lost, early and duplicate deliveries.
    Check(CheckArgs),
}

#[derive(Debug, Args)]
struct AppArgs {
    /// Port on 127.0.0.1.
    #[arg(long)]
    port: u16,
    /// Where the delivery records are appended.
    #[arg(long)]
    log: PathBuf,
}

#[derive(Debug, Args)]
struct DriveArgs {
    /// jobsd's gRPC API.
    #[arg(long)]
    grpc: SocketAddr,
    /// Recurring `@every 1s` jobs (= steady triggers/s).
    #[arg(long, default_value_t = 5000)]
    recurring: u32,
    /// One-shots created per second (a quarter of them deleted right away).
    #[arg(long, default_value_t = 100)]
    churn: u32,
    /// How long to churn, in seconds.
    #[arg(long)]
    secs: u64,
    /// The driver's log (see the module doc).
    #[arg(long)]
    log: PathBuf,
}

#[derive(Debug, Args)]
struct CheckArgs {
    /// The app's record file.
    #[arg(long)]
    app_log: PathBuf,
    /// The driver's log.
    #[arg(long)]
    drive_log: PathBuf,
    /// The script's events (`<unix ms> <what>` lines).
    #[arg(long)]
    events: PathBuf,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::App(args) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(app(args)),
        Cmd::Drive(args) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?
            .block_on(drive(args)),
        Cmd::Check(args) => check(&args),
    }
}

fn now_ms() -> i64 {
    now_us() / 1000
}

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

// ---------------------------------------------------------------------------------------
// The app
// ---------------------------------------------------------------------------------------

/// Size of one delivery record: kind, attempt, 2 spare bytes, index (u32), nominal ms
/// (i64), arrival µs (i64), little endian.
const REC: usize = 24;

/// A job's kind from its name: `r-<i>` recurring, `o-<seq>` one-shot.
fn parse_name(name: &str) -> Option<(u8, u32)> {
    let (kind, idx) = name.split_once('-')?;
    let kind = match kind {
        "r" => b'r',
        "o" => b'o',
        _ => return None,
    };
    Some((kind, idx.parse().ok()?))
}

async fn app(args: AppArgs) -> Result<()> {
    let listener = TcpListener::bind(("127.0.0.1", args.port))
        .await
        .with_context(|| format!("bind 127.0.0.1:{}", args.port))?;
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.log)
        .with_context(|| format!("open {}", args.log.display()))?;
    let file = Arc::new(Mutex::new(file));
    eprintln!("soak app listening on 127.0.0.1:{}", args.port);
    accept::accept_loop(listener, |stream| {
        let file = file.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| handle(file.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    })
    .await
}

async fn handle(
    file: Arc<Mutex<File>>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let arrival = now_us();
    let mut status = StatusCode::NOT_FOUND;
    if req.method() == Method::POST
        && let Some(name) = req.uri().path().strip_prefix("/job/")
    {
        let (kind, idx) = parse_name(name).unwrap_or((b'?', 0));
        let header = |h: &str| req.headers().get(h).and_then(|v| v.to_str().ok());
        let attempt = header("jobsd-attempt")
            .and_then(|a| a.parse::<u8>().ok())
            .unwrap_or(0);
        let nominal = header("jobsd-scheduled-time")
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map_or(i64::MIN, |t| t.timestamp_millis());
        let mut rec = [0u8; REC];
        rec[0] = kind;
        rec[1] = attempt;
        rec[4..8].copy_from_slice(&idx.to_le_bytes());
        rec[8..16].copy_from_slice(&nominal.to_le_bytes());
        rec[16..24].copy_from_slice(&arrival.to_le_bytes());
        // Read the (small) body so the connection stays reusable.
        let _ = req.into_body().collect().await;
        let written = file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .write_all(&rec);
        // An unrecorded delivery must not be acknowledged: jobsd then retries it.
        status = if written.is_ok() {
            StatusCode::OK
        } else {
            StatusCode::INTERNAL_SERVER_ERROR
        };
    }
    let mut resp = Response::new(Full::new(Bytes::new()));
    *resp.status_mut() = status;
    Ok(resp)
}

// ---------------------------------------------------------------------------------------
// The driver
// ---------------------------------------------------------------------------------------

fn rfc3339_ms(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// First tick (unix ms) of recurring job `i` of `n`, the run starting at `s0`.
fn first_tick(s0: i64, i: u32, n: u32) -> i64 {
    s0 + i64::from(i) * 1000 / i64::from(n.max(1))
}

fn job(name: String, due_ms: i64, every: bool) -> ScheduleJobRequest {
    ScheduleJobRequest {
        job: Some(Job {
            name,
            schedule: every.then(|| "@every 1s".to_owned()),
            due_time: Some(rfc3339_ms(due_ms)),
            ..Default::default()
        }),
        overwrite: false,
    }
}

fn client(grpc: SocketAddr) -> Result<DaprClient<Channel>> {
    // Lazy, with short timeouts: jobsd is down now and then, and a call must fail rather
    // than hang (the driver records it as uncertain).
    let channel = Endpoint::from_shared(format!("http://{grpc}"))?
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(1))
        .timeout(Duration::from_secs(3))
        .connect_lazy();
    Ok(DaprClient::new(channel))
}

/// The driver's log, flushed per line so a reader sees everything said so far.
struct Log(File);

impl Log {
    fn line(&mut self, s: std::fmt::Arguments<'_>) -> Result<()> {
        writeln!(self.0, "{s}").context("write the driver log")
    }
}

async fn drive(args: DriveArgs) -> Result<()> {
    let mut log =
        Log(File::create(&args.log).with_context(|| format!("create {}", args.log.display()))?);
    let client = client(args.grpc)?;
    let n = args.recurring;
    // Ten seconds to create them all (they fire late, never lost, if that is not enough).
    let s0 = now_ms() + 10_000;
    log.line(format_args!("start {s0} {n}"))?;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for lane in 0..32u32 {
        let mut client = client.clone();
        tasks.spawn(async move {
            let mut i = lane;
            while i < n {
                let req = job(format!("r-{i}"), first_tick(s0, i, n), true);
                match client.schedule_job(req).await {
                    Ok(_) => i += 32,
                    // An earlier try that looked failed did create it: the same job.
                    Err(s) if s.code() == tonic::Code::AlreadyExists => i += 32,
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    eprintln!(
        "soak drive: {n} recurring jobs created in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let end = Instant::now() + Duration::from_secs(args.secs);
    let per_tick = (args.churn / 10).max(1);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut seq: u32 = 0;
    let (mut created, mut uncertain, mut deleted) = (0u64, 0u64, 0u64);
    let mut c = client.clone();
    while Instant::now() < end {
        tick.tick().await;
        for _ in 0..per_tick {
            seq += 1;
            let due = now_ms() + 3000 + i64::from(seq.wrapping_mul(7919) % 15_000);
            match c.schedule_job(job(format!("o-{seq}"), due, false)).await {
                Ok(_) => {
                    created += 1;
                    log.line(format_args!("c {seq} {due} {}", now_ms()))?;
                }
                Err(_) => {
                    uncertain += 1;
                    log.line(format_args!("u {seq} {due}"))?;
                    continue;
                }
            }
            if seq.is_multiple_of(4) {
                let req = DeleteJobRequest {
                    name: format!("o-{seq}"),
                };
                match c.delete_job(req).await {
                    Ok(_) => {
                        deleted += 1;
                        log.line(format_args!("d {seq} {}", now_ms()))?;
                    }
                    Err(_) => log.line(format_args!("x {seq}"))?,
                }
            }
        }
    }
    log.line(format_args!("end {}", now_ms()))?;
    eprintln!(
        "soak drive: {created} one-shots created ({deleted} deleted), {uncertain} creates failed"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The checker
// ---------------------------------------------------------------------------------------

/// What the driver did, from its log.
#[derive(Default)]
struct Plan {
    s0: i64,
    n: u32,
    end: i64,
    /// seq → (due ms, create answered OK, delete answered OK at).
    oneshots: HashMap<u32, (i64, bool, Option<i64>)>,
}

fn read_plan(path: &Path) -> Result<Plan> {
    let mut plan = Plan::default();
    let f = File::open(path).with_context(|| format!("open {}", path.display()))?;
    for line in BufReader::new(f).lines() {
        let line = line?;
        let w: Vec<&str> = line.split(' ').collect();
        let num = |k: usize| -> Result<i64> {
            w.get(k)
                .and_then(|s| s.parse().ok())
                .with_context(|| format!("{}: bad line {line:?}", path.display()))
        };
        match w[0] {
            "start" => {
                plan.s0 = num(1)?;
                plan.n = u32::try_from(num(2)?)?;
            }
            "end" => plan.end = num(1)?,
            "c" | "u" => {
                let ok = w[0] == "c";
                plan.oneshots
                    .insert(u32::try_from(num(1)?)?, (num(2)?, ok, None));
            }
            "d" => {
                if let Some(o) = plan.oneshots.get_mut(&u32::try_from(num(1)?)?) {
                    o.2 = Some(num(2)?);
                }
            }
            _ => {}
        }
    }
    if plan.n == 0 || plan.end == 0 {
        bail!(
            "{}: no start or no end line (did the driver finish?)",
            path.display()
        );
    }
    Ok(plan)
}

/// Reads the app's records, calling `f(kind, attempt, idx, nominal_ms, arrival_us)`.
fn each_record(path: &Path, mut f: impl FnMut(u8, u8, u32, i64, i64)) -> Result<u64> {
    let mut r = BufReader::with_capacity(
        1 << 20,
        File::open(path).with_context(|| format!("open {}", path.display()))?,
    );
    let mut rec = [0u8; REC];
    let mut n = 0;
    loop {
        match r.read_exact(&mut rec) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(n),
            Err(e) => return Err(e.into()),
        }
        n += 1;
        let word = |a: usize| <[u8; 8]>::try_from(&rec[a..a + 8]).unwrap_or_default();
        let idx = u32::from_le_bytes(<[u8; 4]>::try_from(&rec[4..8]).unwrap_or_default());
        f(
            rec[0],
            rec[1],
            idx,
            i64::from_le_bytes(word(8)),
            i64::from_le_bytes(word(16)),
        );
    }
}

/// Lateness histogram in whole milliseconds (the last bucket collects everything later).
struct Hist(Vec<u64>);

impl Hist {
    fn add(&mut self, late_us: i64) {
        let ms = usize::try_from(late_us.max(0) / 1000).unwrap_or(0);
        let last = self.0.len() - 1;
        self.0[ms.min(last)] += 1;
    }
    fn pct(&self, p: f64) -> String {
        let total: u64 = self.0.iter().sum();
        let want = ((total as f64) * p).ceil() as u64;
        let mut seen = 0;
        for (ms, c) in self.0.iter().enumerate() {
            seen += c;
            if seen >= want.max(1) {
                return if ms + 1 == self.0.len() {
                    format!(">{ms}")
                } else {
                    format!("<{}", ms + 1)
                };
            }
        }
        "-".into()
    }
}

fn check(args: &CheckArgs) -> Result<()> {
    let plan = read_plan(&args.drive_log)?;
    let mut events: Vec<(i64, String)> = Vec::new();
    if let Ok(f) = File::open(&args.events) {
        for line in BufReader::new(f).lines() {
            let line = line?;
            if let Some((t, what)) = line.split_once(' ')
                && let Ok(t) = t.parse()
            {
                events.push((t, what.to_owned()));
            }
        }
    }
    // Ticks per recurring job up to the end, plus room for the ones fired while draining.
    let ticks = usize::try_from((plan.end - plan.s0) / 1000 + 600).unwrap_or(0);
    let n = plan.n as usize;
    let mut seen = vec![0u8; n * ticks];
    let mut first = vec![i64::MAX; n * ticks];
    let mut oneshot_seen: HashMap<u32, (u32, i64)> = HashMap::new();
    let mut hist = Hist(vec![0; 60_001]);
    let (mut early, mut wrong, mut stray, mut retries) = (0u64, 0u64, 0u64, 0u64);
    let mut max_late_us = 0i64;
    let total = each_record(&args.app_log, |kind, attempt, idx, nominal, at| {
        if attempt > 1 {
            retries += 1;
        }
        let due = match kind {
            b'r' if (idx as usize) < n => {
                let t0 = first_tick(plan.s0, idx, plan.n);
                let k = (nominal - t0) / 1000;
                if nominal < t0 || (nominal - t0) % 1000 != 0 || k as usize >= ticks {
                    wrong += 1;
                    return;
                }
                let slot = idx as usize * ticks + k as usize;
                seen[slot] = seen[slot].saturating_add(1);
                first[slot] = first[slot].min(at);
                nominal
            }
            b'o' => match plan.oneshots.get(&idx) {
                Some(&(due, _, _)) => {
                    if nominal != due {
                        wrong += 1;
                    }
                    let e = oneshot_seen.entry(idx).or_insert((0, i64::MAX));
                    e.0 += 1;
                    e.1 = e.1.min(at);
                    due
                }
                None => {
                    stray += 1;
                    return;
                }
            },
            _ => {
                stray += 1;
                return;
            }
        };
        if at < due * 1000 {
            early += 1;
        }
        max_late_us = max_late_us.max(at - due * 1000);
        hist.add(at - due * 1000);
    })?;

    // Every duplicate beside the event it came with: its first delivery at most 10 s before.
    let mut dup_by: HashMap<String, u64> = HashMap::new();
    let mut unexplained = Vec::new();
    let mut blame = |job: String, first_at_us: i64, extra: u64| {
        let t = first_at_us / 1000;
        let what = events
            .iter()
            // The event is logged just before the signal: a delivery may land in between.
            .filter(|(e, _)| t <= *e + 1000 && *e - t <= 10_000)
            .map(|(_, w)| w.clone())
            .next()
            .unwrap_or_else(|| "none".into());
        if what == "none" && unexplained.len() < 10 {
            unexplained.push(format!("{job} first at {}", rfc3339_ms(t)));
        }
        *dup_by.entry(what).or_default() += extra;
    };
    let (mut lost, mut required, mut dups) = (0u64, 0u64, 0u64);
    let mut lost_examples = Vec::new();
    for i in 0..plan.n {
        let t0 = first_tick(plan.s0, i, plan.n);
        for k in 0..ticks {
            let slot = i as usize * ticks + k;
            let due = t0 + k as i64 * 1000;
            if seen[slot] > 1 {
                dups += u64::from(seen[slot] - 1);
                blame(
                    format!("r-{i}@{}", rfc3339_ms(due)),
                    first[slot],
                    u64::from(seen[slot] - 1),
                );
            }
            if due <= plan.end {
                required += 1;
                if seen[slot] == 0 {
                    lost += 1;
                    if lost_examples.len() < 10 {
                        lost_examples.push(format!("r-{i}@{}", rfc3339_ms(due)));
                    }
                }
            }
        }
    }
    let (mut os_required, mut os_lost, mut resurrected, mut os_uncertain) = (0u64, 0, 0, 0);
    for (seq, &(due, ok, deleted)) in &plan.oneshots {
        let got = oneshot_seen.get(seq).copied();
        if let Some((c, at)) = got
            && c > 1
        {
            dups += u64::from(c - 1);
            blame(format!("o-{seq}@{}", rfc3339_ms(due)), at, u64::from(c - 1));
        }
        match deleted {
            Some(del) if del < due => {
                if got.is_some() {
                    resurrected += 1;
                }
                continue;
            }
            Some(_) => continue,
            None => {}
        }
        if !ok {
            os_uncertain += 1;
            continue;
        }
        if due <= plan.end {
            os_required += 1;
            if got.is_none() {
                os_lost += 1;
                if lost_examples.len() < 10 {
                    lost_examples.push(format!("o-{seq}@{}", rfc3339_ms(due)));
                }
            }
        }
    }
    let mut blamed: Vec<_> = dup_by.into_iter().collect();
    blamed.sort();
    let blamed: Vec<String> = blamed.iter().map(|(w, c)| format!("{w}:{c}")).collect();
    let secs = (plan.end - plan.s0) as f64 / 1000.0;
    println!(
        "records {total}; recurring ticks due {required}, one-shots due {os_required} \
         ({os_uncertain} creates unanswered, not counted); over {secs:.0} s"
    );
    println!(
        "lost {} (recurring {lost}, one-shot {os_lost}); early {early}; wrong nominal {wrong}; \
         delivered after an answered delete {resurrected}; stray {stray}",
        lost + os_lost
    );
    println!(
        "duplicates {dups} (by the event they followed within 10 s: {}); retried attempts {retries}",
        blamed.join(" ")
    );
    println!(
        "lateness p50 {} / p99 {} / p99.9 {} ms, max {:.1} s",
        hist.pct(0.5),
        hist.pct(0.99),
        hist.pct(0.999),
        max_late_us as f64 / 1e6
    );
    if !unexplained.is_empty() {
        println!(
            "duplicates after no event, e.g.: {}",
            unexplained.join(", ")
        );
    }
    if !lost_examples.is_empty() {
        println!("lost, e.g.: {}", lost_examples.join(" "));
    }
    println!(
        "RESULT records={total} required={} lost={} early={early} wrong={wrong} \
         resurrected={resurrected} dups={dups} dups_by={} retries={retries} p50={} p99={} \
         p999={} max_s={:.1}",
        required + os_required,
        lost + os_lost,
        if blamed.is_empty() {
            "-".into()
        } else {
            blamed.join(",")
        },
        hist.pct(0.5),
        hist.pct(0.99),
        hist.pct(0.999),
        max_late_us as f64 / 1e6
    );
    if lost + os_lost + early + wrong + resurrected > 0 {
        std::process::exit(1);
    }
    Ok(())
}
