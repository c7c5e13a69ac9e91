//! Prometheus `/metrics` in-process: a sidecar delivers jobs to a real HTTP app on a manual
//! clock and a replica to a hand-driven WatchJobs stream; the exposition is scraped over HTTP,
//! parsed with a Prometheus text parser (`prometheus-parse`), and its counts are compared with
//! what the app (or the stream) received. Plus daprd's flags: `--enable-metrics=false` serves
//! nothing, a port in use is a startup error naming the flag.

mod common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use chrono::TimeDelta;
use common::app::{self, HttpApp};
use common::replica::Rep;
use common::{any_port, app_metadata, clockwork, due_now, sidecar_config, t0};
use jobsd::app::{Error, Sidecar};
use jobsd::clock::ManualClock;
use jobsd::config::{self, AppProtocol, Env};
use jobsd::proto::dapr_scheduler as sv1;
use jobsd::proto::dapr_scheduler::job_target_metadata::Type as Target;
use jobsd::proto::dapr_scheduler::watch_jobs_request::WatchJobRequestType;
use jobsd::proto::dapr_scheduler::{WatchJobsRequestResultStatus as Ack, scheduler_client};
use jobsd::store;
use prometheus_parse::{Scrape, Value};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

/// `GET /metrics` on `addr`, parsed; panics unless it answers 200 in the Prometheus text
/// format.
async fn scrape(addr: SocketAddr) -> Scrape {
    let resp = common::http(addr, "GET", "/metrics", &[], b"").await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        resp.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    Scrape::parse(resp.text().lines().map(|l| Ok(l.to_owned()))).expect("Prometheus text")
}

/// The value of the one sample named `metric` whose labels are exactly `labels` (for a
/// histogram, `<name>_count` gives its count).
fn value(s: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<&Value> = s
        .samples
        .iter()
        .filter(|x| {
            x.metric == metric
                && x.labels.len() == labels.len()
                && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v))
        })
        .map(|x| &x.value)
        .collect();
    match found.as_slice() {
        [Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v)] => *v,
        other => panic!("{metric}{labels:?}: expected one sample, found {other:?}"),
    }
}

/// Every label name used by any sample of a family whose name starts with `prefix`.
fn label_names(s: &Scrape, prefix: &str) -> BTreeSet<String> {
    s.samples
        .iter()
        .filter(|x| x.metric.starts_with(prefix))
        .flat_map(|x| x.labels.keys().cloned())
        .collect()
}

const APP: [(&str, &str); 2] = [("app_id", "myapp"), ("namespace", "default")];
const DAPR: [(&str, &str); 3] = [
    ("app_id", "myapp"),
    ("namespace", "default"),
    ("operation", "job_trigger_op"),
];

fn with<'a>(base: &[(&'a str, &'a str)], more: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    base.iter().chain(more).copied().collect()
}

/// A sidecar of `myapp` in front of `app`, on a manual clock, serving metrics on a free port.
async fn metered_sidecar(app: SocketAddr) -> (Sidecar, ManualClock) {
    let mut cfg = sidecar_config(Some(app), AppProtocol::Http, &[]);
    cfg.metrics = Some(any_port());
    let clock = ManualClock::new(t0());
    let sidecar = Sidecar::start_with(cfg, Arc::new(store::Memory::new()), Arc::new(clock.clone()))
        .await
        .unwrap();
    (sidecar, clock)
}

async fn post(sidecar: &Sidecar, name: &str, body: &str) {
    let path = format!("/v1.0/jobs/{name}");
    let resp = common::http(
        sidecar.http_addrs[0],
        "POST",
        &path,
        &[("content-type", "application/json")],
        body.as_bytes(),
    )
    .await;
    assert_eq!(resp.status, 204, "{}", resp.text());
}

#[tokio::test]
async fn daprd_job_metrics_count_what_the_app_received() {
    let app = HttpApp::new();
    app.status.lock().unwrap().insert("gone".into(), 404);
    app.status.lock().unwrap().insert("broken".into(), 500);
    let (sidecar, clock) = metered_sidecar(app::serve(app.clone()).await).await;
    let engine = sidecar.engine().unwrap();
    let metrics = sidecar.metrics_addr.expect("metrics on");

    for name in ["a", "b", "c", "gone", "broken"] {
        post(&sidecar, name, r#"{"dueTime":"1s"}"#).await;
    }
    post(&sidecar, "every", r#"{"schedule":"@every 1s","ttl":"3s"}"#).await;
    post(&sidecar, "later", r#"{"dueTime":"1h"}"#).await;
    clockwork::run_for(engine, &clock, TimeDelta::seconds(30)).await;

    // What the app received, by the answer it gave.
    let received: Vec<String> = app
        .received
        .lock()
        .unwrap()
        .iter()
        .map(|(n, _)| n.clone())
        .collect();
    let answered_2xx = received
        .iter()
        .filter(|n| !["gone", "broken"].contains(&n.as_str()))
        .count();
    let answered_other = received.len() - answered_2xx;
    // a, b, c and three ticks of `every`; one 404 and four 500s (the default policy).
    assert_eq!((answered_2xx, answered_other), (6, 5), "{received:?}");

    let s = scrape(metrics).await;
    assert_eq!(
        value(&s, "dapr_component_job_success_count", &DAPR),
        answered_2xx as f64
    );
    assert_eq!(
        value(&s, "dapr_component_job_failure_count", &DAPR),
        answered_other as f64
    );
    assert_eq!(
        value(
            &s,
            "dapr_component_job_latencies_count",
            &with(&DAPR, &[("success", "true")])
        ),
        answered_2xx as f64
    );
    assert_eq!(
        value(
            &s,
            "dapr_component_job_latencies_count",
            &with(&DAPR, &[("success", "false")])
        ),
        answered_other as f64
    );
    // Every trigger handed out was measured for lateness; a 404 is a SUCCESS to the engine.
    assert_eq!(
        value(&s, "jobsd_trigger_lateness_seconds_count", &APP),
        received.len() as f64
    );
    let outcome = |o| {
        value(
            &s,
            "jobsd_trigger_duration_seconds_count",
            &with(&APP, &[("outcome", o)]),
        )
    };
    assert_eq!(outcome("success"), (answered_2xx + 1) as f64);
    assert_eq!(outcome("failed"), 4.0);
    assert_eq!(outcome("undeliverable"), 0.0);
    assert_eq!(value(&s, "jobsd_triggers_in_flight", &APP), 0.0);
    assert_eq!(value(&s, "jobsd_app_calls_in_flight", &APP), 0.0);
    assert_eq!(value(&s, "jobsd_jobs_created_total", &APP), 7.0);
    // Sampled from the trigger loop at scrape time: only `later` is left, due in 1 h, past
    // the 5 min horizon: it waits in the store's due index, not in memory.
    assert_eq!(value(&s, "jobsd_jobs", &APP), 0.0);
    assert_eq!(value(&s, "jobsd_jobs_queued", &APP), 0.0);
    assert_eq!(value(&s, "jobsd_jobs_staged", &APP), 0.0);
    assert_eq!(value(&s, "jobsd_queue_overdue_seconds", &APP), 0.0);
    // A skipped-tick counter exists for every reason, with nothing skipped yet.
    assert_eq!(
        value(
            &s,
            "jobsd_ticks_skipped_total",
            &with(&APP, &[("reason", "expired")])
        ),
        0.0
    );

    // Labels are the app's and Dapr's own, never a job's name.
    assert_eq!(
        label_names(&s, "dapr_component_job_"),
        ["app_id", "namespace", "operation", "success"]
            .map(String::from)
            .into()
    );
    assert_eq!(
        label_names(&s, "jobsd_"),
        ["app_id", "namespace", "outcome", "reason"]
            .map(String::from)
            .into()
    );
    for sample in &s.samples {
        for v in sample.labels.values() {
            assert!(
                !["a", "b", "c", "gone", "broken", "every", "later"].contains(&v.as_str()),
                "{} carries a job name: {:?}",
                sample.metric,
                sample.labels
            );
        }
    }
    // No Scheduler metrics in the sidecar role.
    assert!(
        s.samples
            .iter()
            .all(|x| !x.metric.starts_with("dapr_scheduler_"))
    );

    // OpenMetrics for scrapers that ask for it.
    let open = common::http(
        metrics,
        "GET",
        "/metrics",
        &[(
            "accept",
            "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
        )],
        b"",
    )
    .await;
    assert_eq!(
        open.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    assert!(open.text().ends_with("# EOF\n"));

    sidecar.shutdown_token().cancel();
    sidecar.wait().await.unwrap();
    // The metrics server stopped with the rest.
    assert!(tokio::net::TcpStream::connect(metrics).await.is_err());
}

#[tokio::test]
async fn undeliverable_triggers_are_staged_and_counted_but_not_daprd_failures() {
    // No app port: every trigger is UNDELIVERABLE and staged.
    let mut cfg = sidecar_config(None, AppProtocol::Http, &[]);
    cfg.metrics = Some(any_port());
    let clock = ManualClock::new(t0());
    let sidecar = Sidecar::start_with(cfg, Arc::new(store::Memory::new()), Arc::new(clock.clone()))
        .await
        .unwrap();
    post(&sidecar, "held", r#"{"dueTime":"1s"}"#).await;
    clockwork::run_for(sidecar.engine().unwrap(), &clock, TimeDelta::seconds(5)).await;

    let s = scrape(sidecar.metrics_addr.unwrap()).await;
    assert_eq!(value(&s, "jobsd_jobs_staged", &APP), 1.0);
    assert_eq!(
        value(
            &s,
            "jobsd_trigger_duration_seconds_count",
            &with(&APP, &[("outcome", "undeliverable")])
        ),
        1.0
    );
    assert_eq!(value(&s, "dapr_component_job_success_count", &DAPR), 0.0);
    assert_eq!(value(&s, "dapr_component_job_failure_count", &DAPR), 0.0);
    sidecar.shutdown_token().cancel();
    sidecar.wait().await.unwrap();
}

fn actor_reminder(actor_type: &str, id: &str) -> sv1::JobMetadata {
    sv1::JobMetadata {
        target: Some(sv1::JobTargetMetadata {
            r#type: Some(Target::Actor(sv1::TargetActorReminder {
                id: id.into(),
                r#type: actor_type.into(),
            })),
        }),
        ..app_metadata("myapp")
    }
}

/// What a hand-driven sidecar acked on its WatchJobs stream.
#[derive(Default)]
struct Acked {
    success: usize,
    failed: usize,
}

/// Opens a WatchJobs stream for `myapp`'s jobs that acks `bad` FAILED and every other trigger
/// SUCCESS, counting what it acked.
async fn ack_stream(rep: &Rep) -> Arc<Mutex<Acked>> {
    let (tx, rx) = mpsc::unbounded_channel();
    tx.send(sv1::WatchJobsRequest {
        watch_job_request_type: Some(WatchJobRequestType::Initial(sv1::WatchJobsRequestInitial {
            app_id: "myapp".into(),
            namespace: "default".into(),
            actor_types: Vec::new(),
            accept_job_types: vec![sv1::JobTargetType::Job as i32],
            concurrency_limits: Vec::new(),
        })),
    })
    .unwrap();
    let mut client: scheduler_client::SchedulerClient<_> = rep.client();
    let mut triggers = client
        .watch_jobs(UnboundedReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let acked = Arc::new(Mutex::new(Acked::default()));
    let count = acked.clone();
    tokio::spawn(async move {
        while let Ok(Some(t)) = triggers.message().await {
            let status = if t.name == "bad" {
                count.lock().unwrap().failed += 1;
                Ack::Failed
            } else {
                count.lock().unwrap().success += 1;
                Ack::Success
            };
            let ack = sv1::WatchJobsRequest {
                watch_job_request_type: Some(WatchJobRequestType::Result(
                    sv1::WatchJobsRequestResult {
                        id: t.id,
                        status: status as i32,
                    },
                )),
            };
            if tx.send(ack).is_err() {
                return;
            }
        }
    });
    acked
}

#[tokio::test]
async fn replica_serves_the_dapr_scheduler_s_metrics() {
    let rep = Rep::start_metered().await;
    let metrics = rep.replica.metrics_addr.expect("metrics on");
    let acked = ack_stream(&rep).await;
    common::eventually("the stream to register", async || {
        value(
            &scrape(metrics).await,
            "dapr_scheduler_sidecars_connected",
            &[],
        ) == 1.0
    })
    .await;

    rep.schedule("ok1", due_now()).await;
    rep.schedule("ok2", due_now()).await;
    rep.schedule("bad", due_now()).await;
    // A reminder of an actor type no stream hosts: undeliverable, staged.
    rep.schedule_for(actor_reminder("Cart", "1"), "r", due_now())
        .await;
    rep.run_for(TimeDelta::seconds(30)).await;

    let (success, failed) = {
        let a = acked.lock().unwrap();
        (a.success, a.failed)
    };
    // ok1, ok2 once; bad four times (the default failure policy).
    assert_eq!((success, failed), (2, 4));

    let s = scrape(metrics).await;
    let job = [("type", "job")];
    let actor = [("type", "actor")];
    assert_eq!(value(&s, "dapr_scheduler_jobs_created_total", &job), 3.0);
    assert_eq!(value(&s, "dapr_scheduler_jobs_created_total", &actor), 1.0);
    assert_eq!(
        value(&s, "dapr_scheduler_jobs_triggered_total", &job),
        success as f64
    );
    assert_eq!(
        value(&s, "dapr_scheduler_jobs_failed_total", &job),
        failed as f64
    );
    assert_eq!(
        value(&s, "dapr_scheduler_jobs_undelivered_total", &job),
        0.0
    );
    assert_eq!(
        value(&s, "dapr_scheduler_jobs_undelivered_total", &actor),
        1.0
    );
    assert_eq!(
        value(&s, "dapr_scheduler_trigger_latency_count", &job),
        (success + failed) as f64
    );
    assert_eq!(value(&s, "dapr_scheduler_sidecars_connected", &[]), 1.0);
    // jobsd's own, without app labels: a replica serves many apps.
    assert_eq!(
        value(&s, "jobsd_trigger_lateness_seconds_count", &[]),
        (success + failed + 1) as f64
    );
    assert_eq!(value(&s, "jobsd_jobs_staged", &[]), 1.0);
    assert!(label_names(&s, "").is_subset(&["type", "outcome", "reason"].map(String::from).into()));
    assert!(
        s.samples
            .iter()
            .all(|x| !x.metric.starts_with("dapr_component_"))
    );
    rep.stop().await;
}

/// A free loopback port (bound and released).
async fn free_port() -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap().port()
}

/// The sidecar settings of a daprd command line (API on free loopback ports).
fn from_flags(flags: &[&str]) -> config::Sidecar {
    let mut argv = vec![
        "jobsd",
        "--app-id",
        "myapp",
        "--dapr-listen-addresses",
        "127.0.0.1",
        "--dapr-http-port",
        "0",
        "--dapr-grpc-port",
        "0",
    ];
    argv.extend_from_slice(flags);
    let (cli, _) = config::parse(argv).unwrap();
    cli.sidecar.validate(Env::default()).unwrap()
}

async fn start(cfg: config::Sidecar) -> Result<Sidecar, Error> {
    let clock = ManualClock::new(t0());
    Sidecar::start_with(cfg, Arc::new(store::Memory::new()), Arc::new(clock)).await
}

#[tokio::test]
async fn daprd_metrics_flags_choose_the_server_and_false_turns_it_off() {
    let port = free_port().await.to_string();
    let on = start(from_flags(&[
        "--metrics-listen-address",
        "127.0.0.1",
        "--metrics-port",
        &port,
    ]))
    .await
    .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    assert_eq!(on.metrics_addr, Some(addr));
    let s = scrape(addr).await;
    // Without NAMESPACE daprd labels its metrics with an empty namespace (its jobs still live
    // under `default`).
    let self_hosted = [
        ("app_id", "myapp"),
        ("namespace", ""),
        ("operation", "job_trigger_op"),
    ];
    assert_eq!(
        value(&s, "dapr_component_job_success_count", &self_hosted),
        0.0
    );
    // daprd serves its exposition on every path.
    assert_eq!(common::http(addr, "GET", "/", &[], b"").await.status, 200);
    on.shutdown_token().cancel();
    on.wait().await.unwrap();

    let off = start(from_flags(&[
        "--metrics-listen-address",
        "127.0.0.1",
        "--metrics-port",
        &port,
        "--enable-metrics=false",
    ]))
    .await
    .unwrap();
    assert_eq!(off.metrics_addr, None);
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "nothing listens on the metrics port"
    );
    off.shutdown_token().cancel();
    off.wait().await.unwrap();
}

#[tokio::test]
async fn a_metrics_port_in_use_is_a_startup_error_naming_the_flag() {
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let err = start(from_flags(&[
        "--metrics-listen-address",
        "127.0.0.1",
        "--metrics-port",
        &port,
    ]))
    .await
    .err()
    .expect("the port is taken");
    assert!(matches!(err, Error::MetricsBind { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("--metrics-port"), "{text}");
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(
        text.to_lowercase().contains("address already in use"),
        "{text}"
    );
}

#[tokio::test]
async fn held_executions_are_a_gauge_and_their_answers_a_duration_outcome() {
    let app = HttpApp::new();
    let (sidecar, clock) = metered_sidecar(app::serve(app.clone()).await).await;
    let engine = sidecar.engine().unwrap();
    let metrics = sidecar.metrics_addr.expect("metrics on");
    // `async-*` jobs answer 202 + Jobsd-Async: true (async completion).
    for name in ["async-1", "async-2", "plain"] {
        post(&sidecar, name, r#"{"dueTime":"1s"}"#).await;
    }
    clockwork::run_for(engine, &clock, TimeDelta::seconds(2)).await;
    let s = scrape(metrics).await;
    assert_eq!(value(&s, "jobsd_executions_held", &APP), 2.0);
    let outcome = |o| {
        value(
            &s,
            "jobsd_trigger_duration_seconds_count",
            &with(&APP, &[("outcome", o)]),
        )
    };
    assert_eq!((outcome("held"), outcome("success")), (2.0, 1.0));
    assert_eq!(value(&s, "jobsd_triggers_in_flight", &APP), 0.0);
    sidecar.shutdown_token().cancel();
    sidecar.wait().await.unwrap();
}
