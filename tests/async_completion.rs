//! Issue 13 item 7: async completion. An app answers `202` with `Jobsd-Async: true` (or a
//! plain `202` for a job with `policy.lease`); the execution stays in flight under a lease
//! that heartbeats extend, until the app completes or fails it through
//! `/jobsd/v1/executions/{id}/…` or the lease runs out (a failed attempt the failure policy
//! retries). Held executions survive a restart and do not take the sink's capacity. A real
//! sidecar on a manual clock, a real HTTP app whose `async-*` jobs answer "later".

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use chrono::TimeDelta;
use common::app::{self, HttpApp};
use common::running::Running;
use common::{app_metadata, sidecar_config, started_after_t0, t0};
use jobsd::clock::ManualClock;
use jobsd::config::{self, AppProtocol};
use jobsd::engine::{Error as EngineError, ExecutionCall};
use jobsd::store::{self, Store};
use serde_json::{Value, json};

fn cfg(app: SocketAddr) -> config::Sidecar {
    sidecar_config(Some(app), AppProtocol::Http, &[])
}

async fn start(app: &HttpApp, store: Arc<dyn Store>) -> Running {
    let addr = app::serve(app.clone()).await;
    Running::start(cfg(addr), store, ManualClock::new(t0())).await
}

/// An app and a redb data dir that sidecars are started on one after another, on one clock.
struct OnDisk {
    app: HttpApp,
    addr: SocketAddr,
    dir: tempfile::TempDir,
    clock: ManualClock,
}

impl OnDisk {
    async fn new() -> OnDisk {
        let app = HttpApp::new();
        let addr = app::serve(app.clone()).await;
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(t0());
        OnDisk {
            app,
            addr,
            dir,
            clock,
        }
    }

    /// A sidecar on the data dir (the previous one stopped).
    async fn start(&self) -> Running {
        let store: Arc<dyn Store> = Arc::new(store::Redb::open(self.dir.path()).unwrap());
        Running::start(cfg(self.addr), store, self.clock.clone()).await
    }
}

/// The executions job `name` holds, from its status.
async fn held(r: &Running, name: &str) -> Vec<Value> {
    r.view(name).await["status"]["held"]
        .as_array()
        .unwrap()
        .clone()
}

/// The one execution id job `name` holds.
async fn held_id(r: &Running, name: &str) -> String {
    let held = held(r, name).await;
    assert_eq!(held.len(), 1, "{held:?}");
    held[0]["executionId"].as_str().unwrap().to_owned()
}

/// `POST /jobsd/v1/executions/{id}/{what}` with `body`.
async fn call(r: &Running, id: &str, what: &str, body: &str) -> (u16, Value) {
    r.call("POST", &format!("/jobsd/v1/executions/{id}/{what}"), body)
        .await
}

/// The runs of job `name`, oldest first.
async fn runs(r: &Running, name: &str) -> Vec<Value> {
    let mut runs = r.runs(name, "?limit=100").await["runs"]
        .as_array()
        .unwrap()
        .clone();
    runs.reverse();
    runs
}

fn outcomes(runs: &[Value]) -> Vec<&str> {
    runs.iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn heartbeats_keep_an_execution_past_its_lease_and_complete_records_a_success() {
    let app = HttpApp::new();
    let r = start(&app, Arc::new(store::Memory::new())).await;
    r.create(
        "async-a",
        r#"{"schedule":"@every 1m","policy":{"lease":"30s"}}"#,
    )
    .await;
    r.run_for(TimeDelta::seconds(61)).await;
    assert_eq!(app.count("async-a"), 1);
    let id = held_id(&r, "async-a").await;
    let v = r.view("async-a").await;
    assert_eq!(v["status"]["held"][0]["leaseUntil"], "2026-01-01T00:01:30Z");
    assert_eq!(v["status"]["held"][0]["attempt"], 1);
    assert_eq!(v["status"]["inFlight"], true);
    // The run view shows it running.
    let shown = r.runs("async-a", "").await;
    assert_eq!(shown["runs"][0]["outcome"], "running", "{shown}");
    assert_eq!(shown["runs"][0]["executionId"], id.as_str());

    // Heartbeats carry it past its first lease (01:30) and past the next tick (02:00).
    r.run_for(TimeDelta::seconds(19)).await; // 01:20
    let (status, body) = call(&r, &id, "heartbeat", "").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["leaseUntil"], "2026-01-01T00:01:50Z");
    assert_eq!(body["name"], "async-a");
    r.run_for(TimeDelta::seconds(20)).await; // 01:40
    let (status, body) = call(&r, &id, "heartbeat", r#"{"lease":"2m"}"#).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["leaseUntil"], "2026-01-01T00:03:40Z");
    r.run_for(TimeDelta::seconds(50)).await; // 02:30: the 02:00 tick waits (serial)
    assert_eq!(
        app.count("async-a"),
        1,
        "the next tick waits for the held one"
    );
    assert_eq!(held_id(&r, "async-a").await, id);
    assert!(
        runs(&r, "async-a")
            .await
            .iter()
            .all(|r| r["outcome"] == "running")
    );

    let (status, body) = call(&r, &id, "complete", "").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ended"], "completed");
    assert_eq!(body["leaseUntil"], Value::Null);
    r.run_for(TimeDelta::seconds(1)).await;
    let runs = runs(&r, "async-a").await;
    assert_eq!(runs[0]["outcome"], "success", "{runs:?}");
    assert_eq!(runs[0]["executionId"], id.as_str());
    assert_eq!(runs[0]["started"], "2026-01-01T00:01:00Z");
    assert_eq!(runs[0]["finished"], "2026-01-01T00:02:30Z");
    // The next tick went out once the slot was free, as an execution of its own.
    assert_eq!(app.count("async-a"), 2);
    let next = held_id(&r, "async-a").await;
    assert_ne!(next, id);
    let v = r.view("async-a").await;
    assert_eq!(v["status"]["counters"]["succeeded"], 1, "{v}");
    r.stop().await;
}

#[tokio::test]
async fn an_expired_lease_fails_the_attempt_and_the_failure_policy_retries_it() {
    let app = HttpApp::new();
    let r = start(&app, Arc::new(store::Memory::new())).await;
    // Dapr's default failure policy (constant 1 s × 3): a retry due at tick + k s is overdue
    // when the lease runs out, so each goes at once.
    r.create(
        "async-default",
        r#"{"dueTime":"10s","policy":{"lease":"10s"}}"#,
    )
    .await;
    // Retries a minute apart: each at its own time, the lease running out in between.
    r.create(
        "async-minute",
        r#"{"dueTime":"10s","policy":{"lease":"10s"},
            "failurePolicy":{"constant":{"interval":"60s","maxRetries":2}}}"#,
    )
    .await;
    r.run_for(TimeDelta::seconds(11)).await;
    let id = held_id(&r, "async-minute").await;
    r.run_for(TimeDelta::seconds(200)).await;

    let default = runs(&r, "async-default").await;
    assert_eq!(outcomes(&default), ["failed"; 4]);
    let minute = runs(&r, "async-minute").await;
    assert_eq!(outcomes(&minute), ["failed"; 3]);
    let started =
        |runs: &[Value]| started_after_t0(&json!({"runs": runs.iter().rev().collect::<Vec<_>>()}));
    assert_eq!(started(&default), [10, 20, 30, 40]);
    assert_eq!(started(&minute), [10, 70, 130]);
    for run in default.iter().chain(&minute) {
        assert_eq!(run["error"], "lease expired", "{run}");
    }
    let attempts: Vec<_> = minute
        .iter()
        .map(|r| r["attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(attempts, [1, 2, 3]);
    assert!(
        minute.iter().all(|r| r["executionId"] == id.as_str()),
        "{minute:?}"
    );
    // Spent: the one-shots are finished, nothing held.
    let v = r.view("async-minute").await;
    assert_eq!(v["status"]["state"], "finished", "{v}");
    assert_eq!(v["status"]["counters"]["dropped"], 1);
    assert_eq!(v["status"]["held"], json!([]));
    // The ended execution is gone for the app.
    let (status, body) = call(&r, &id, "heartbeat", "").await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = call(&r, &id, "complete", "").await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("lease_expired"),
        "{body}"
    );
    r.stop().await;
}

#[tokio::test]
async fn fail_records_the_error_and_the_retry_keeps_the_execution_id() {
    let app = HttpApp::new();
    let r = start(&app, Arc::new(store::Memory::new())).await;
    r.create(
        "async-f",
        r#"{"dueTime":"10s","failurePolicy":{"constant":{"interval":"5s","maxRetries":1}}}"#,
    )
    .await;
    r.run_for(TimeDelta::seconds(11)).await;
    let id = held_id(&r, "async-f").await;
    // Without policy.lease the explicit answer holds it for the default 5 minutes.
    assert_eq!(
        r.view("async-f").await["status"]["held"][0]["leaseUntil"],
        "2026-01-01T00:05:10Z"
    );
    let (status, body) = call(&r, &id, "fail", r#"{"error":"disk full"}"#).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ended"], "failed");
    // Failing again answers the same (a retried request); completing it now cannot.
    let (status, again) = call(&r, &id, "fail", r#"{"error":"disk full"}"#).await;
    assert_eq!((status, &again), (200, &body));
    let (status, body) = call(&r, &id, "complete", "").await;
    assert_eq!(status, 409, "{body}");

    // The retry (attempt 2, same execution) goes at tick + 5 s and is held again.
    r.run_for(TimeDelta::seconds(5)).await;
    assert_eq!(app.count("async-f"), 2);
    assert_eq!(held_id(&r, "async-f").await, id);
    assert_eq!(r.view("async-f").await["status"]["held"][0]["attempt"], 2);
    let (status, body) = call(&r, &id, "complete", "{}").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["attempt"], 2);
    // Completing it again is safe; failing it is not.
    let (status, again) = call(&r, &id, "complete", "").await;
    assert_eq!((status, &again), (200, &body));
    let (status, _) = call(&r, &id, "fail", "").await;
    assert_eq!(status, 409);
    r.run_for(TimeDelta::seconds(1)).await;

    let runs = runs(&r, "async-f").await;
    assert_eq!(outcomes(&runs), ["failed", "success"]);
    assert_eq!(runs[0]["error"], "disk full");
    assert_eq!(runs[0]["attempt"], 1);
    assert_eq!(runs[1]["attempt"], 2);
    assert!(runs.iter().all(|r| r["executionId"] == id.as_str()));
    assert_eq!(r.view("async-f").await["status"]["state"], "finished");
    r.stop().await;
}

#[tokio::test]
async fn unknown_foreign_and_malformed_executions_are_refused_clearly() {
    let app = HttpApp::new();
    let r = start(&app, Arc::new(store::Memory::new())).await;
    r.create("async-o", r#"{"dueTime":"1s"}"#).await;
    r.run_for(TimeDelta::seconds(2)).await;
    let id = held_id(&r, "async-o").await;

    let unknown = "6f1c1b7e-0000-5000-8000-000000000000";
    for what in ["heartbeat", "complete", "fail"] {
        let (status, body) = call(&r, unknown, what, "").await;
        assert_eq!(status, 404, "{what}: {body}");
        assert_eq!(body["errorCode"], "ERR_EXECUTION_NOT_FOUND", "{body}");
    }
    let (status, body) = call(&r, "not-an-id", "complete", "").await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("executionId:"),
        "{body}"
    );
    let (status, body) = call(&r, &id, "heartbeat", r#"{"lease":"25h"}"#).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["message"], "lease: \"25h\" must be between 1s and 24h");
    let (status, body) = call(&r, &id, "fail", r#"{"reason":"x"}"#).await;
    assert_eq!(status, 400, "{body}");
    // Another app's execution is not there for it.
    let engine = r.sidecar.engine().unwrap();
    let other = engine
        .execution_call(&app_metadata("otherapp"), &id, ExecutionCall::Complete)
        .await;
    assert!(
        matches!(other, Err(EngineError::ExecutionNotFound(_))),
        "{other:?}"
    );
    assert_eq!(held_id(&r, "async-o").await, id, "still held");

    // policy.lease is bounded, naming the field.
    for (lease, want) in [
        (
            "500ms",
            "policy.lease: \"500ms\" must be between 1s and 24h",
        ),
        ("48h", "policy.lease: \"48h\" must be between 1s and 24h"),
    ] {
        let body = json!({"dueTime": "1h", "policy": {"lease": lease}}).to_string();
        let (status, json) = r.call("POST", "/jobsd/v1/jobs/bad", &body).await;
        assert_eq!(status, 400, "{json}");
        assert_eq!(json["message"], want);
    }
    let v = r.call("GET", "/jobsd/v1/jobs/bad", "").await;
    assert_eq!(v.0, 404);
    r.stop().await;
}

#[tokio::test]
async fn a_plain_202_holds_only_a_job_that_opts_in_with_policy_lease() {
    let app = HttpApp::new();
    for name in ["plain", "leased"] {
        app.status.lock().unwrap().insert(name.into(), 202);
    }
    let r = start(&app, Arc::new(store::Memory::new())).await;
    // Dapr's reading of a 202: a success, the job goes on.
    r.create("plain", r#"{"schedule":"@every 10s"}"#).await;
    r.create(
        "leased",
        // policy.timeout stops at the 202: the lease takes over.
        r#"{"schedule":"@every 10s","policy":{"lease":"1m","timeout":"5s"}}"#,
    )
    .await;
    r.run_for(TimeDelta::seconds(35)).await;
    assert_eq!(app.count("plain"), 3);
    assert_eq!(outcomes(&runs(&r, "plain").await), ["success"; 3]);
    assert_eq!(held(&r, "plain").await.len(), 0);
    assert_eq!(app.count("leased"), 1, "held: its next ticks wait");
    assert_eq!(held(&r, "leased").await.len(), 1);
    assert_eq!(
        outcomes(&runs(&r, "leased").await),
        ["running"],
        "no timeout"
    );
    r.stop().await;
}

#[tokio::test]
async fn overlap_skip_passes_over_the_ticks_a_held_execution_spans_and_allow_runs_beside_it() {
    let app = HttpApp::new();
    let r = start(&app, Arc::new(store::Memory::new())).await;
    r.create(
        "async-skip",
        r#"{"schedule":"@every 10s","policy":{"overlap":"skip","lease":"1m"}}"#,
    )
    .await;
    r.create(
        "async-allow",
        r#"{"schedule":"@every 10s","policy":{"overlap":"allow","maxConcurrent":2,"lease":"1m"}}"#,
    )
    .await;
    r.run_for(TimeDelta::seconds(35)).await; // ticks at 10, 20, 30
    assert_eq!(app.count("async-skip"), 1);
    assert_eq!(
        app.count("async-allow"),
        2,
        "two held at once, the third waits"
    );
    let allow = held(&r, "async-allow").await;
    assert_eq!(allow.len(), 2, "{allow:?}");
    assert_eq!(r.sidecar.engine().unwrap().sync().await.unwrap().held, 3);

    let skip_id = held_id(&r, "async-skip").await;
    assert_eq!(call(&r, &skip_id, "complete", "").await.0, 200);
    let first = allow
        .iter()
        .find(|h| h["nominalTime"] == "2026-01-01T00:00:10Z")
        .unwrap();
    let first = first["executionId"].as_str().unwrap();
    assert_eq!(call(&r, first, "complete", "").await.0, 200);
    r.run_for(TimeDelta::seconds(1)).await; // 36
    // skip: the 20 and 30 ticks were passed over; the next is 40.
    let v = r.view("async-skip").await;
    assert_eq!(v["status"]["counters"]["skipped"]["overlap"], 2, "{v}");
    assert_eq!(v["status"]["nextFireTime"], "2026-01-01T00:00:40Z");
    // allow: the 30 tick went out as soon as a slot was free.
    assert_eq!(app.count("async-allow"), 3);
    let allow = held(&r, "async-allow").await;
    let ticks: Vec<_> = allow
        .iter()
        .map(|h| h["nominalTime"].as_str().unwrap())
        .collect();
    assert_eq!(ticks, ["2026-01-01T00:00:20Z", "2026-01-01T00:00:30Z"]);
    r.stop().await;
}

#[tokio::test]
async fn a_held_execution_survives_a_restart_and_completes_after_it() {
    let disk = OnDisk::new().await;
    let (app, clock) = (disk.app.clone(), disk.clock.clone());
    let r = disk.start().await;
    r.create(
        "async-live",
        r#"{"schedule":"@every 1m","policy":{"lease":"2m"}}"#,
    )
    .await;
    r.create(
        "async-lapsed",
        r#"{"dueTime":"60s","policy":{"lease":"30s"},
            "failurePolicy":{"constant":{"interval":"1s","maxRetries":1}}}"#,
    )
    .await;
    r.run_for(TimeDelta::seconds(61)).await;
    let live = held_id(&r, "async-live").await;
    let lapsed = held_id(&r, "async-lapsed").await;
    let (status, _) = call(&r, &live, "heartbeat", r#"{"lease":"5m"}"#).await;
    assert_eq!(status, 200);
    r.stop().await;

    // Down for a minute and a half: the 30 s lease ran out meanwhile, the 5 m one did not.
    clock.set(t0() + TimeDelta::seconds(150));
    let r = disk.start().await;
    r.run_for(TimeDelta::seconds(1)).await;
    let v = r.view("async-live").await;
    assert_eq!(v["status"]["held"][0]["executionId"], live.as_str(), "{v}");
    assert_eq!(v["status"]["held"][0]["leaseUntil"], "2026-01-01T00:06:01Z");
    assert_eq!(
        app.count("async-live"),
        1,
        "not delivered again while its lease is live"
    );
    // The lapsed one failed its attempt at restart, and its retry (same execution) is held.
    let lapsed_runs = runs(&r, "async-lapsed").await;
    assert_eq!(
        outcomes(&lapsed_runs),
        ["failed", "running"],
        "{lapsed_runs:?}"
    );
    assert_eq!(lapsed_runs[0]["error"], "lease expired");
    assert_eq!(held_id(&r, "async-lapsed").await, lapsed);
    assert_eq!(app.count("async-lapsed"), 2);

    let (status, body) = call(&r, &live, "complete", "").await;
    assert_eq!(status, 200, "{body}");
    r.run_for(TimeDelta::seconds(1)).await;
    let runs = runs(&r, "async-live").await;
    assert_eq!(runs[0]["outcome"], "success", "{runs:?}");
    assert_eq!(runs[0]["executionId"], live.as_str());
    // Its missed ticks (2:00) follow, Dapr's catch-up: the next execution is out.
    assert_eq!(app.count("async-live"), 2);
    r.stop().await;
}

#[tokio::test]
async fn a_thousand_held_executions_do_not_hold_back_other_jobs() {
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let mut c = cfg(addr);
    // A small sink: held executions must not take its places.
    c.app_max_concurrency = 8;
    let r = Running::start(c, Arc::new(store::Memory::new()), ManualClock::new(t0())).await;
    for i in 0..1000 {
        r.create(&format!("async-{i}"), r#"{"dueTime":"1s"}"#).await;
    }
    r.create("plain", r#"{"schedule":"@every 1s"}"#).await;
    r.run_for(TimeDelta::seconds(5)).await;
    let engine = r.sidecar.engine().unwrap();
    assert_eq!(engine.sync().await.unwrap().held, 1000);
    assert_eq!(app.count("plain"), 5);
    assert_eq!(outcomes(&runs(&r, "plain").await), ["success"; 5]);
    r.stop().await;
}

#[tokio::test]
async fn grpc_heartbeat_complete_and_fail() {
    use jobsd::proto::jobsd_api::{self as jv1, jobs_client::JobsClient};

    let app = HttpApp::new();
    let r = start(&app, Arc::new(store::Memory::new())).await;
    r.create("async-g1", r#"{"dueTime":"1s"}"#).await;
    r.create(
        "async-g2",
        r#"{"dueTime":"1s","failurePolicy":{"drop":{}}}"#,
    )
    .await;
    r.run_for(TimeDelta::seconds(2)).await;
    let (g1, g2) = (held_id(&r, "async-g1").await, held_id(&r, "async-g2").await);
    let mut c = JobsClient::connect(format!("http://{}", r.sidecar.grpc_addrs[0]))
        .await
        .unwrap();
    let beat = c
        .heartbeat(jv1::HeartbeatRequest {
            execution_id: g1.clone(),
            lease: "1h".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(beat.name, "async-g1");
    let until = beat.execution.unwrap().lease_until.unwrap();
    assert_eq!(until.seconds - t0().timestamp(), 2 + 3600);
    let bad = c
        .heartbeat(jv1::HeartbeatRequest {
            execution_id: g1.clone(),
            lease: "0.5s".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    c.complete_execution(jv1::CompleteExecutionRequest {
        execution_id: g1.clone(),
    })
    .await
    .unwrap();
    let failed = c
        .fail_execution(jv1::FailExecutionRequest {
            execution_id: g2.clone(),
            error: "no luck".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(failed.execution.unwrap().attempt, 1);
    let again = c
        .fail_execution(jv1::FailExecutionRequest {
            execution_id: g1.clone(),
            error: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(again.code(), tonic::Code::Aborted);
    let unknown = c
        .complete_execution(jv1::CompleteExecutionRequest {
            execution_id: "6f1c1b7e-0000-5000-8000-000000000000".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);
    r.run_for(TimeDelta::seconds(1)).await;
    assert_eq!(outcomes(&runs(&r, "async-g1").await), ["success"]);
    let g2_runs = runs(&r, "async-g2").await;
    assert_eq!(outcomes(&g2_runs), ["failed"]);
    assert_eq!(g2_runs[0]["error"], "no luck");
    r.stop().await;
}

/// An app that completes each execution through jobsd's API before its own `202` reaches
/// jobsd (the race every fast async app runs): the call must wait for the answer, not 404.
#[tokio::test]
async fn a_complete_that_overtakes_its_own_202_still_completes() {
    use axum::extract::{Path, State};
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    use std::sync::Mutex;
    use std::time::Duration;

    #[derive(Clone, Default)]
    struct Early {
        api: Arc<Mutex<Option<SocketAddr>>>,
        answers: Arc<Mutex<Vec<u16>>>,
    }
    async fn job(State(app): State<Early>, Path(name): Path<String>) -> axum::response::Response {
        let api = app.api.lock().unwrap().unwrap();
        let tick = t0() + TimeDelta::seconds(1);
        let id =
            jobsd::trigger::ExecutionId::for_tick(&format!("app||default||myapp||{name}"), tick);
        let answers = app.answers.clone();
        tokio::spawn(async move {
            let path = format!("/jobsd/v1/executions/{id}/complete");
            let r = common::http(api, "POST", &path, &[], b"").await;
            answers.lock().unwrap().push(r.status);
        });
        // Long enough for the complete to reach jobsd first.
        tokio::time::sleep(Duration::from_millis(200)).await;
        (StatusCode::ACCEPTED, [("jobsd-async", "true")]).into_response()
    }
    let early = Early::default();
    let router = axum::Router::new()
        .route("/job/{name}", axum::routing::post(job))
        .with_state(early.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    let r = Running::start(
        cfg(addr),
        Arc::new(store::Memory::new()),
        ManualClock::new(t0()),
    )
    .await;
    *early.api.lock().unwrap() = Some(r.api);
    r.create("early", r#"{"dueTime":"1s"}"#).await;
    r.run_for(TimeDelta::seconds(2)).await;
    common::eventually("the app's complete answered", async || {
        !early.answers.lock().unwrap().is_empty()
    })
    .await;
    assert_eq!(*early.answers.lock().unwrap(), [200]);
    r.run_for(TimeDelta::seconds(1)).await;
    assert_eq!(outcomes(&runs(&r, "early").await), ["success"]);
    assert_eq!(r.view("early").await["status"]["state"], "finished");
    r.stop().await;
}

/// `overlap: allow` with executions held across a restart: the held ones stay held, the one
/// between them that had ended is run again (at least once), nothing is lost.
#[tokio::test]
async fn overlapping_held_executions_survive_a_restart() {
    let disk = OnDisk::new().await;
    let app = disk.app.clone();
    let r = disk.start().await;
    r.create(
        "async-many",
        r#"{"schedule":"@every 10s","policy":{"overlap":"allow","maxConcurrent":3,"lease":"10m"}}"#,
    )
    .await;
    r.run_for(TimeDelta::seconds(35)).await; // ticks at 10, 20, 30 held
    let held_before = held(&r, "async-many").await;
    assert_eq!(held_before.len(), 3);
    let id_of = |held: &[Value], at: &str| {
        held.iter()
            .find(|h| h["nominalTime"] == at)
            .map(|h| h["executionId"].as_str().unwrap().to_owned())
    };
    let t10 = id_of(&held_before, "2026-01-01T00:00:10Z").unwrap();
    let t20 = id_of(&held_before, "2026-01-01T00:00:20Z").unwrap();
    let t30 = id_of(&held_before, "2026-01-01T00:00:30Z").unwrap();
    // The middle one ends: progress stays at the oldest still out (10).
    assert_eq!(call(&r, &t20, "complete", "").await.0, 200);
    r.run_for(TimeDelta::seconds(1)).await;
    assert_eq!(app.count("async-many"), 3, "the 40 tick is not due yet");
    r.stop().await;

    let r = disk.start().await;
    r.run_for(TimeDelta::seconds(1)).await; // 37
    let after = held(&r, "async-many").await;
    assert_eq!(id_of(&after, "2026-01-01T00:00:10Z"), Some(t10.clone()));
    assert_eq!(id_of(&after, "2026-01-01T00:00:30Z"), Some(t30.clone()));
    // The ended 20 tick ran again after the restart (at least once) and is held again.
    assert_eq!(id_of(&after, "2026-01-01T00:00:20Z"), Some(t20.clone()));
    assert_eq!(app.count("async-many"), 4);
    for id in [&t10, &t20, &t30] {
        assert_eq!(call(&r, id, "complete", "").await.0, 200, "{id}");
    }
    r.run_for(TimeDelta::seconds(4)).await; // 41: the 40 tick goes
    assert_eq!(app.count("async-many"), 5);
    let v = r.view("async-many").await;
    assert_eq!(v["status"]["ticks"], 3, "{v}");
    r.stop().await;
}
