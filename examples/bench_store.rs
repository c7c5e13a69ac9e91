//! Figures for the redb store: `cargo run --release --example bench_store [-- --jobs N]
//! [--only creates|creates-quick|reads|bulk]`; `JOBSD_BENCH_STORE_CACHE_MIB=M` sets redb's
//! page cache.
//!
//! 1. Durable single-op creates from 16, 64 and 128 concurrent tasks (the API's pattern) into
//!    an empty store, and into one holding 200,000 and N jobs with random (UUID-like) names:
//!    ops/s, latency percentiles, ops per commit. `creates-quick`: the same with redb's quick
//!    repair.
//! 2. Point reads on the calling task versus through `spawn_blocking`.
//! 3. Bulk load of N jobs (default 1,000,000) in batches; file size and RSS.
//! 4. Reopen and a full paged scan (the engine's start) in a fresh process; its RSS.
//! 5. Reopen after `kill -9` of a writer on that file (redb repair), with and without quick
//!    repair.
//!
//! 6. `--only wal`: step 1's empty-store creates from 16 and 64 tasks with the write-ahead log
//!    off and on (alternating, twice each).
//!
//! Run it on an otherwise idle machine: fsync latency dominates every write figure.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jobsd::proto::dapr_scheduler as sv1;
use jobsd::proto::jobsd_store::stored_job::Begin;
use jobsd::store::{Op, OpResult, Redb, RedbOptions, Store, StoredJob};
use prost::Message;
use prost_types::{Any, Timestamp};

/// Set in the child of step 5: the data dir to write to until killed.
const CHILD_ENV: &str = "JOBSD_BENCH_STORE_CHILD";
/// redb page cache in MiB for every step, instead of the default.
const CACHE_ENV: &str = "JOBSD_BENCH_STORE_CACHE_MIB";
/// Set in the child of step 4: the data dir to reopen and scan.
const SCAN_ENV: &str = "JOBSD_BENCH_STORE_SCAN";
/// Set in the child of step 5 when it must commit with quick repair.
const CHILD_QUICK_ENV: &str = "JOBSD_BENCH_STORE_CHILD_QUICK";

/// How long each throughput run lasts.
const RUN: Duration = Duration::from_secs(5);

/// A job as the API would store it: ~200 bytes encoded.
fn job(generation: u64, name: &str) -> StoredJob {
    StoredJob {
        job: Some(sv1::Job {
            schedule: Some("@every 30s".into()),
            repeats: Some(10),
            due_time: Some("10s".into()),
            ttl: Some("1h".into()),
            data: Some(Any {
                type_url: "type.googleapis.com/google.protobuf.StringValue".into(),
                value: format!("{{\"order\":\"{name}\",\"amount\":42}}").into_bytes(),
            }),
            failure_policy: None,
        }),
        metadata: Some(sv1::JobMetadata {
            app_id: "bench-app".into(),
            namespace: "default".into(),
            target: Some(sv1::JobTargetMetadata {
                r#type: Some(sv1::job_target_metadata::Type::Job(sv1::TargetJob {})),
            }),
            concurrency_key: None,
        }),
        generation,
        begin: Some(Begin::DueTime(Timestamp {
            seconds: 1_800_000_000,
            nanos: 0,
        })),
        expiration: Some(Timestamp {
            seconds: 1_800_003_600,
            nanos: 0,
        }),
        ..Default::default()
    }
}

fn key(prefix: &str, i: u64) -> String {
    format!("app||default||bench-app||{prefix}-{i:09}")
}

fn put(key: String, generation: u64) -> Op {
    Op::PutJob {
        job: job(generation, &key),
        key,
        create_only: true,
        due: Some(0),
    }
}

/// (VmRSS, VmHWM) of this process in MiB.
fn rss() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn file_mib(dir: &Path) -> f64 {
    std::fs::metadata(dir.join("jobsd.redb")).map_or(f64::NAN, |m| m.len() as f64 / 1048576.0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// A random 64-bit number (xorshift), for UUID-like job names without a dependency.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Step 1: `tasks` tasks doing single-op durable creates for `RUN`, into a store that already
/// holds `preload` jobs. With `preload > 0` names are random (like the UUIDs of Dapr's perf
/// test), so every create lands on a different B-tree leaf.
async fn durable_creates(tasks: usize, options: RedbOptions, label: &str, preload: u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(Redb::open_with(dir.path(), options).expect("open"));
    let random = preload > 0;
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    for start in (0..preload).step_by(10_000) {
        let ops = (start..(start + 10_000).min(preload))
            .map(|i| put(key(&format!("{:016x}", next_random(&mut seed)), 0), i))
            .collect();
        store.write(ops).await.expect("preload");
    }
    let before = store.stats();
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(200_000);
                let mut i = 0u64;
                let mut seed = 0xD1B5_4A32_D192_ED03u64 ^ (t as u64 + 1);
                while started.elapsed() < RUN {
                    let name = if random {
                        format!("{:016x}", next_random(&mut seed))
                    } else {
                        format!("t{t}")
                    };
                    let op = put(key(&name, i), i);
                    let t0 = Instant::now();
                    let results = store.write(vec![op]).await.expect("write");
                    latencies.push(t0.elapsed());
                    assert_eq!(results, [OpResult::Done]);
                    i += 1;
                }
                latencies
            })
        })
        .collect();
    let mut all = Vec::new();
    for handle in handles {
        all.extend(handle.await.expect("task"));
    }
    let elapsed = started.elapsed();
    let stats = store.stats();
    all.sort_unstable();
    let commits = stats.commits - before.commits;
    let label = if random {
        format!("{label}, {preload} jobs, random names")
    } else {
        format!("{label}, empty store")
    };
    println!(
        "{label:>50} {tasks:>3} tasks: {:>6.0} ops/s  p50 {}  p99 {}  p99.9 {}  max {}  {:.1} ops/commit  {} checkpoints",
        all.len() as f64 / elapsed.as_secs_f64(),
        ms(percentile(&all, 0.50)),
        ms(percentile(&all, 0.99)),
        ms(percentile(&all, 0.999)),
        ms(all.last().copied().unwrap_or_default()),
        (stats.ops - before.ops) as f64 / commits.max(1) as f64,
        stats.checkpoints - before.checkpoints,
    );
}

/// Step 2: point reads on the task versus in the blocking pool.
async fn reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(Redb::open_with(dir.path(), options_from_env()).expect("open"));
    const N: u64 = 100_000;
    let ops: Vec<Op> = (0..N).map(|i| put(key("r", i), i)).collect();
    store.write(ops).await.expect("load");
    for blocking in [false, true] {
        let started = Instant::now();
        let handles: Vec<_> = (0..16u64)
            .map(|t| {
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    let mut latencies = Vec::with_capacity(20_000);
                    for i in 0..20_000u64 {
                        let k = key("r", (i * 7919 + t * 104_729) % N);
                        let t0 = Instant::now();
                        let found = if blocking {
                            let store = Arc::clone(&store);
                            tokio::task::spawn_blocking(move || {
                                tokio::runtime::Handle::current().block_on(store.get_job(&k))
                            })
                            .await
                            .expect("join")
                        } else {
                            store.get_job(&k).await
                        };
                        latencies.push(t0.elapsed());
                        assert!(found.expect("get").is_some());
                    }
                    latencies
                })
            })
            .collect();
        let mut all = Vec::new();
        for handle in handles {
            all.extend(handle.await.expect("task"));
        }
        let elapsed = started.elapsed();
        all.sort_unstable();
        println!(
            "{:>28}  16 tasks: {:>8.0} gets/s  p50 {:.1} µs  p99 {:.1} µs",
            if blocking {
                "get_job via spawn_blocking"
            } else {
                "get_job on the task"
            },
            all.len() as f64 / elapsed.as_secs_f64(),
            percentile(&all, 0.50).as_secs_f64() * 1e6,
            percentile(&all, 0.99).as_secs_f64() * 1e6,
        );
    }
}

/// Steps 3 and 4 (and 5, which reuses the file).
async fn bulk(jobs: u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    println!(
        "encoded job size: {} B (key {} B)",
        job(1, &key("bulk", 1)).encoded_len(),
        key("bulk", 1).len()
    );
    let (rss0, _) = rss();
    {
        let store = Redb::open_with(dir.path(), options_from_env()).expect("open");
        let started = Instant::now();
        const BATCH: u64 = 10_000;
        for start in (0..jobs).step_by(BATCH as usize) {
            let ops = (start..(start + BATCH).min(jobs))
                .map(|i| put(key("bulk", i), i))
                .collect();
            store.write(ops).await.expect("bulk write");
        }
        let elapsed = started.elapsed();
        let (rss1, hwm1) = rss();
        println!(
            "bulk load {jobs} jobs in batches of {BATCH}: {:.2} s ({:.0} jobs/s), file {:.0} MiB, RSS {rss1:.0} MiB (peak {hwm1:.0}, {rss0:.0} before)",
            elapsed.as_secs_f64(),
            jobs as f64 / elapsed.as_secs_f64(),
            file_mib(dir.path()),
        );
        store.close().await.expect("close");
    }
    // A fresh process, as at sidecar start: its RSS is what a restart costs.
    let exe = std::env::current_exe().expect("exe");
    let output = Command::new(exe)
        .env(SCAN_ENV, dir.path())
        .output()
        .expect("scan child");
    print!("{}", String::from_utf8_lossy(&output.stdout));
    assert!(output.status.success(), "scan child failed");
    for quick in [false, true] {
        crash_reopen(dir.path(), quick);
    }
}

/// Step 5: a child writes to the file in `dir` and is killed; how long does reopening take?
fn crash_reopen(dir: &Path, quick: bool) {
    let exe = std::env::current_exe().expect("exe");
    let mut child = Command::new(exe)
        .env(CHILD_ENV, dir)
        .env(CHILD_QUICK_ENV, if quick { "1" } else { "0" })
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let acks = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .filter(|l| l.starts_with("ack"))
        .take(2000)
        .count();
    child.kill().expect("kill");
    child.wait().expect("wait");
    let started = Instant::now();
    let store = Redb::open(dir).expect("reopen after kill");
    let reopened = started.elapsed();
    println!(
        "reopen after kill -9 of a writer ({acks} acks, quick_repair={quick}): {}",
        ms(reopened)
    );
    drop(store);
}

/// Default options, with the page cache from `JOBSD_BENCH_STORE_CACHE_MIB` if set (children
/// inherit it).
fn options_from_env() -> RedbOptions {
    let mut options = RedbOptions::default();
    if let Some(mib) = std::env::var(CACHE_ENV)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        options.cache_size = mib << 20;
    }
    options
}

/// Step 4, in a child: reopen the store in `dir` and scan every job.
fn scan_child(dir: &str) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let (rss0, _) = rss();
        let started = Instant::now();
        let store = Redb::open_with(dir, options_from_env()).expect("reopen");
        let reopened = started.elapsed();
        let started = Instant::now();
        let mut scan = store.scan("", 1024).await.expect("scan");
        let mut count = 0u64;
        while let Some(page) = scan.next_page().await.expect("page") {
            count += page.len() as u64;
        }
        let scanned = started.elapsed();
        let (rss1, hwm1) = rss();
        println!(
            "fresh process: reopen {} ; scan {count} jobs (pages of 1024) {:.2} s ({:.0} jobs/s); RSS {rss1:.0} MiB after (peak {hwm1:.0}, {rss0:.0} at start)",
            ms(reopened),
            scanned.as_secs_f64(),
            count as f64 / scanned.as_secs_f64(),
        );
    });
}

/// The child of step 5: single-op durable writes until killed.
fn child(dir: &str) {
    let quick = std::env::var(CHILD_QUICK_ENV).is_ok_and(|v| v == "1");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let options = RedbOptions {
            quick_repair: quick,
            ..RedbOptions::default()
        };
        let store = Arc::new(Redb::open_with(dir, options).expect("open"));
        let tasks: Vec<_> = (0..16u64)
            .map(|t| {
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    for i in 0.. {
                        let key = key(&format!("crash{quick}-{t}"), i);
                        store.write(vec![put(key, i)]).await.expect("write");
                        let mut out = std::io::stdout().lock();
                        // The parent may be gone; keep writing until killed.
                        let _ = writeln!(out, "ack");
                        let _ = out.flush();
                    }
                })
            })
            .collect();
        for task in tasks {
            let _ = task.await;
        }
    });
}

fn main() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        child(&dir);
        return;
    }
    if let Ok(dir) = std::env::var(SCAN_ENV) {
        scan_child(&dir);
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    let jobs = args
        .iter()
        .position(|a| a == "--jobs")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000u64);
    println!(
        "bench_store: {} CPUs, data in {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::env::temp_dir().display()
    );
    // `--only creates|reads|bulk` runs one step (for profiling).
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let run = |step: &str| only.as_deref().is_none_or(|o| o == step);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        if run("creates") {
            for preload in [0, 200_000, jobs] {
                for tasks in [16, 64, 128] {
                    durable_creates(tasks, options_from_env(), "creates", preload).await;
                }
            }
        }
        if run("creates-quick") {
            for tasks in [16, 64] {
                let options = RedbOptions {
                    quick_repair: true,
                    ..options_from_env()
                };
                durable_creates(tasks, options, "creates (quick repair)", 200_000).await;
            }
        }
        if run("wal") {
            for tasks in [16, 64] {
                for wal in [false, true, false, true] {
                    let options = RedbOptions {
                        wal,
                        ..options_from_env()
                    };
                    let label = if wal {
                        "creates, WAL on"
                    } else {
                        "creates, WAL off"
                    };
                    durable_creates(tasks, options, label, 0).await;
                }
            }
        }
        if run("reads") {
            reads().await;
        }
        if run("bulk") {
            bulk(jobs).await;
        }
    });
}
