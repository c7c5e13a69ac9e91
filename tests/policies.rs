//! Issue 12: jobsd's per-job policies on its own routes — `"policy"` and the extended
//! `"failurePolicy"` (cron, exponential, delays, onExhausted) stored with the job, shown by
//! jobsd's GET, hidden from Dapr's, checked with errors naming the field, and retries at the
//! times each kind gives; `onExhausted` `pause` and `deadLetter`, and pausing and resuming
//! by hand. A real sidecar on a manual clock, a real HTTP app.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use chrono::TimeDelta;
use common::app::{self, HttpApp};
use common::running::Running;
use common::{http, sidecar_config, started_after_t0, t0};
use jobsd::clock::ManualClock;
use jobsd::config::{self, AppProtocol};
use jobsd::store::{self, Store};
use serde_json::{Value, json};

fn cfg(app: SocketAddr) -> config::Sidecar {
    sidecar_config(Some(app), AppProtocol::Http, &[])
}

async fn start(app: &HttpApp, store: Arc<dyn Store>) -> Running {
    let addr = app::serve(app.clone()).await;
    Running::start(cfg(addr), store, ManualClock::new(t0())).await
}

/// Seconds after t0 at which the app was called for `name`, read from the job's history.
async fn attempt_times(r: &Running, name: &str) -> Vec<i64> {
    started_after_t0(&r.runs(name, "?limit=100").await)
}

#[tokio::test]
async fn policies_are_stored_shown_and_hidden_from_dapr() {
    let app = HttpApp::new();
    let r = start(&app, Arc::new(store::Memory::new())).await;
    let policy = json!({"catchUp": "all", "whileTargetDown": "stage", "overlap": "serial"});
    let failure = json!({
        "exponential": {"initialInterval": "1s", "multiplier": 2.0, "maxInterval": "1m",
                        "jitter": 0.2, "maxRetries": 5, "maxElapsed": "10m"}
    });
    let body = json!({
        "schedule": "@every 1m", "data": {"k": "v"}, "labels": {"team": "a"},
        "policy": policy, "failurePolicy": failure
    });
    r.create("full", &body.to_string()).await;
    let v = r.view("full").await;
    assert_eq!(v["policy"], policy, "{v}");
    assert_eq!(v["failurePolicy"], failure, "{v}");
    assert_eq!(v["labels"]["team"], "a");
    // Dapr's GET shows Dapr's fields only: jobsd's kinds are not Dapr's, so `drop`.
    let dapr = http(r.api, "GET", "/v1.0-alpha1/jobs/full", &[], b"").await;
    assert_eq!(dapr.status, 200);
    let dapr = dapr.json();
    assert!(dapr.get("policy").is_none(), "{dapr}");
    assert_eq!(dapr["failurePolicy"], json!({"drop": {}}));
    assert_eq!(dapr["schedule"], "@every 1m");

    // Dapr's kinds through jobsd's route with onExhausted: Dapr's GET shows the kind.
    let failure = json!({"constant": {"interval": "2s", "maxRetries": 1}, "onExhausted": "drop"});
    r.create(
        "constant",
        &json!({"dueTime": "1h", "failurePolicy": failure}).to_string(),
    )
    .await;
    assert_eq!(r.view("constant").await["failurePolicy"], failure);
    let dapr = http(r.api, "GET", "/v1.0-alpha1/jobs/constant", &[], b"").await;
    assert_eq!(
        dapr.json()["failurePolicy"],
        json!({"constant": {"interval": "2s", "maxRetries": 1}})
    );
    // A plain Dapr failure policy on jobsd's route is Dapr's, nothing stored beside it.
    r.create(
        "plain",
        r#"{"dueTime":"1h","failurePolicy":{"drop":{}},"policy":{}}"#,
    )
    .await;
    let v = r.view("plain").await;
    assert!(v["failurePolicy"].is_null() && v["policy"].is_null(), "{v}");
    assert_eq!(v["job"]["failurePolicy"], json!({"drop": {}}));
    r.stop().await;
}

#[tokio::test]
async fn bad_policies_are_refused_naming_the_field_and_nothing_is_stored() {
    let app = HttpApp::new();
    let r = start(&app, Arc::new(store::Memory::new())).await;
    for (body, want) in [
        (
            r#"{"schedule":"@daily","policy":{"catchUp":"sometimes"}}"#,
            "policy.catchUp: \"sometimes\" is not one of all, latest, none, window",
        ),
        (
            r#"{"schedule":"@daily","policy":{"overlap":"allow"}}"#,
            "policy.maxConcurrent: required (1 or more) with overlap \"allow\"",
        ),
        (
            r#"{"schedule":"@daily","policy":{"timeout":"soon"}}"#,
            "policy.timeout: \"soon\" is not a duration",
        ),
        (
            r#"{"schedule":"@daily","policy":{"retries":3}}"#,
            "policy: unknown field `retries`",
        ),
        (
            r#"{"schedule":"@daily","failurePolicy":{"exponential":{"multiplier":2}}}"#,
            "failurePolicy.exponential.initialInterval: required",
        ),
        (
            r#"{"schedule":"@daily","failurePolicy":{"exponential":{"initialInterval":"1s","jitter":2}}}"#,
            "failurePolicy.exponential.jitter: 2 must be between 0 and 1",
        ),
        (
            r#"{"schedule":"@daily","failurePolicy":{"delays":{"delays":["1s","x"]}}}"#,
            "failurePolicy.delays.delays[1]: \"x\" is not a duration",
        ),
        (
            r#"{"schedule":"@daily","failurePolicy":{"cron":{"schedule":"bad"}}}"#,
            "failurePolicy.cron.schedule: \"bad\"",
        ),
        (
            r#"{"schedule":"@daily","failurePolicy":{"drop":{},"onExhausted":"deadLetter"}}"#,
            "failurePolicy.deadLetterJob: required with onExhausted \"deadLetter\"",
        ),
        (
            r#"{"schedule":"@daily","failurePolicy":{"drop":{},"delays":{"delays":["1s"]}}}"#,
            "failurePolicy: give one of drop, constant, cron, exponential, delays",
        ),
        (
            r#"{"schedule":"@daily","policy":{"timeout":"0s"}}"#,
            "policy.timeout: \"0s\" must be more than 0",
        ),
        (
            r#"{"schedule":"@daily","policy":{"overlap":"allow","maxConcurrent":1001}}"#,
            "policy.maxConcurrent: 1001 is more than 1000",
        ),
        (
            r#"{"schedule":"@daily","policy":{"overlap":"allow","maxConcurrent":2,"whileTargetDown":"latest"}}"#,
            "policy.whileTargetDown: \"latest\" cannot be combined with overlap \"allow\"",
        ),
        (
            r#"{"schedule":"@daily","policy":{"overlap":"allow","maxConcurrent":2},"failurePolicy":{"drop":{},"onExhausted":"pause"}}"#,
            "failurePolicy.onExhausted: only \"drop\" with policy.overlap \"allow\"",
        ),
        (
            r#"{"schedule":"@daily","policy":{"dst":{"gap":"later"}}}"#,
            "policy.dst.gap: invalid dst.gap \"later\": allowed values are \"skip\" and \"shift\"",
        ),
        // Parsed, but not acted on yet by this build: refused rather than ignored.
        (
            r#"{"schedule":"@daily","failurePolicy":{"drop":{},"onExhausted":"deadLetter","deadLetterJob":"bad"}}"#,
            "failurePolicy.deadLetterJob: \"bad\" is this job; name another job",
        ),
        (
            r#"{"schedule":"@daily","failurePolicy":{"drop":{},"onExhausted":"pause","deadLetterJob":"x"}}"#,
            "failurePolicy.deadLetterJob: only with onExhausted \"deadLetter\"",
        ),
    ] {
        let (status, err) = r.call("POST", "/jobsd/v1/jobs/bad", body).await;
        assert_eq!(status, 400, "{body}: {err}");
        assert_eq!(err["errorCode"], "ERR_MALFORMED_REQUEST");
        assert!(
            err["message"].as_str().unwrap().starts_with(want),
            "{body}: {err}"
        );
        assert_eq!(r.call("GET", "/jobsd/v1/jobs/bad", "").await.0, 404);
    }
    r.stop().await;
}

#[tokio::test]
async fn retries_follow_exponential_delays_and_cron_kinds() {
    let app = HttpApp::new();
    for name in ["exp", "table", "again", "cron"] {
        app.status.lock().unwrap().insert(name.into(), 500);
    }
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(store::Redb::open(dir.path()).unwrap());
    let r = start(&app, store).await;
    // Due at 10 s; waits 2, 6, 10 (capped), 10 → attempts at 10, 12, 18, 28, 38.
    r.create(
        "exp",
        r#"{"dueTime":"10s","failurePolicy":{"exponential":{"initialInterval":"2s","multiplier":3,"maxInterval":"10s","maxRetries":4}}}"#,
    )
    .await;
    // Delays 1 s then 5 s, no repeat: attempts at 10, 11, 16.
    r.create(
        "table",
        r#"{"dueTime":"10s","failurePolicy":{"delays":{"delays":["1s","5s"]}}}"#,
    )
    .await;
    // Repeat the last delay, at most 4 retries: 10, 11, 16, 21, 26.
    r.create(
        "again",
        r#"{"dueTime":"10s","failurePolicy":{"delays":{"delays":["1s","5s"],"repeatLast":true,"maxRetries":4}}}"#,
    )
    .await;
    // At the ticks of */15 s, 2 retries: 10, 15, 30.
    r.create(
        "cron",
        r#"{"dueTime":"10s","failurePolicy":{"cron":{"schedule":"*/15 * * * * *","maxRetries":2}}}"#,
    )
    .await;
    r.run_for(TimeDelta::seconds(100)).await;
    assert_eq!(attempt_times(&r, "exp").await, [10, 12, 18, 28, 38]);
    assert_eq!(attempt_times(&r, "table").await, [10, 11, 16]);
    assert_eq!(attempt_times(&r, "again").await, [10, 11, 16, 21, 26]);
    assert_eq!(attempt_times(&r, "cron").await, [10, 15, 30]);
    for name in ["exp", "table", "again", "cron"] {
        let v = r.view(name).await;
        assert_eq!(v["status"]["counters"]["dropped"], 1, "{name}: {v}");
        assert_eq!(v["status"]["state"], "finished", "{name}: {v}");
    }
    assert_eq!(app.count("exp"), 5);
    r.stop().await;
}

#[tokio::test]
async fn a_policy_survives_a_restart_mid_retry() {
    let app = HttpApp::new();
    app.status.lock().unwrap().insert("exp".into(), 500);
    let dir = tempfile::tempdir().unwrap();
    let addr = app::serve(app.clone()).await;
    let clock = ManualClock::new(t0());
    let open = || -> Arc<dyn Store> { Arc::new(store::Redb::open(dir.path()).unwrap()) };
    let r = Running::start(cfg(addr), open(), clock.clone()).await;
    r.create(
        "exp",
        r#"{"dueTime":"10s","failurePolicy":{"exponential":{"initialInterval":"2s","multiplier":3,"maxInterval":"10s","maxRetries":4}}}"#,
    )
    .await;
    r.run_for(TimeDelta::seconds(13)).await; // attempts at 10 and 12
    assert_eq!(app.count("exp"), 2);
    r.stop().await;
    let r = Running::start(cfg(addr), open(), clock.clone()).await;
    let v = r.view("exp").await;
    assert_eq!(v["failurePolicy"]["exponential"]["initialInterval"], "2s");
    assert_eq!(v["status"]["nextFireTime"], "2026-01-01T00:00:18Z", "{v}");
    r.run_for(TimeDelta::seconds(60)).await;
    assert_eq!(attempt_times(&r, "exp").await, [10, 12, 18, 28, 38]);
    r.stop().await;
}

#[tokio::test]
async fn grpc_surface_carries_policies() {
    use jobsd::proto::jobsd_api::{self as jv1, jobs_client::JobsClient};
    use jobsd::proto::runtime as rv1;

    let app = HttpApp::new();
    let r = start(&app, Arc::new(store::Memory::new())).await;
    let mut c = JobsClient::connect(format!("http://{}", r.sidecar.grpc_addrs[0]))
        .await
        .unwrap();
    let policy = jv1::JobPolicy {
        overlap: "serial".into(),
        catch_up: "all".into(),
        ..Default::default()
    };
    let failure = jv1::FailurePolicy {
        kind: Some(jv1::failure_policy::Kind::Delays(jv1::DelaysRetry {
            delays: vec!["1s".into(), "10s".into()],
            repeat_last: false,
            max_retries: None,
        })),
        on_exhausted: "drop".into(),
        dead_letter_job: String::new(),
    };
    c.schedule_job(jv1::ScheduleJobRequest {
        job: Some(rv1::Job {
            name: "g".into(),
            schedule: Some("@hourly".into()),
            ..Default::default()
        }),
        policy: Some(policy.clone()),
        failure_policy: Some(failure.clone()),
        ..Default::default()
    })
    .await
    .unwrap();
    let view = c
        .get_job(jv1::GetJobRequest { name: "g".into() })
        .await
        .unwrap()
        .into_inner()
        .job
        .unwrap();
    assert_eq!(view.policy, Some(policy));
    assert_eq!(view.failure_policy, Some(failure));
    let http_view = r.view("g").await;
    assert_eq!(
        http_view["policy"],
        json!({"overlap": "serial", "catchUp": "all"})
    );

    let err = c
        .schedule_job(jv1::ScheduleJobRequest {
            job: Some(rv1::Job {
                name: "bad".into(),
                schedule: Some("@hourly".into()),
                ..Default::default()
            }),
            policy: Some(jv1::JobPolicy {
                catch_up: "maybe".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().starts_with("policy.catchUp"), "{err:?}");
    let _: Value = r.call("GET", "/jobsd/v1/jobs/bad", "").await.1;
    assert_eq!(r.call("GET", "/jobsd/v1/jobs/bad", "").await.0, 404);
    r.stop().await;
}

/// `policy.dst` on `TZ=America/New_York` schedules across both 2026 transitions. Dapr's own
/// behaviour (no `dst`) skips a local time the spring change skips and runs a repeated local
/// time twice (`src/schedule/cron/dst/tests.rs` shows it tick by tick, in more zones).
#[tokio::test]
async fn dst_gap_and_repeat_choices_in_new_york() {
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let at = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().to_utc();
    let clock = ManualClock::new(at("2026-03-07T12:00:00Z"));
    let r = Running::start(cfg(addr), Arc::new(store::Memory::new()), clock).await;
    let spring = "TZ=America/New_York 0 30 2 * * *";
    let fall = "TZ=America/New_York 0 30 1 * * *";
    let create = async |jobs: &[(&str, &str, Value)]| {
        for (name, schedule, dst) in jobs {
            let mut body = json!({"schedule": schedule});
            if !dst.is_null() {
                body["policy"] = json!({"dst": dst});
            }
            r.create(name, &body.to_string()).await;
        }
    };
    create(&[
        ("spring-dapr", spring, Value::Null),
        ("spring-skip", spring, json!({"gap": "skip"})),
        ("spring-shift", spring, json!({"gap": "shift"})),
    ])
    .await;
    let nominal = async |name: &str, day: &str| -> Vec<String> {
        let runs = r.runs(name, "?limit=100").await;
        let mut out: Vec<String> = runs["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|run| run["nominalTime"].as_str().unwrap().to_owned())
            .filter(|t| t.starts_with(day))
            .collect();
        out.reverse();
        out
    };
    // Spring: 2026-03-08 02:00 EST jumps to 03:00 EDT; 02:30 does not exist that day.
    r.run_for(TimeDelta::days(2)).await;
    assert!(nominal("spring-dapr", "2026-03-08").await.is_empty());
    assert!(nominal("spring-skip", "2026-03-08").await.is_empty());
    assert_eq!(
        nominal("spring-shift", "2026-03-08").await,
        ["2026-03-08T07:30:00Z"],
        "shifted by the gap: 03:30 EDT"
    );
    assert_eq!(
        nominal("spring-dapr", "2026-03-09").await,
        ["2026-03-09T06:30:00Z"]
    );
    // Fall: 2026-11-01 02:00 EDT falls back to 01:00 EST; 01:30 happens twice.
    for name in ["spring-dapr", "spring-skip", "spring-shift"] {
        assert_eq!(
            r.call("DELETE", &format!("/jobsd/v1/jobs/{name}"), "")
                .await
                .0,
            204
        );
    }
    r.clock.set(at("2026-10-31T12:00:00Z"));
    create(&[
        ("fall-dapr", fall, Value::Null),
        ("fall-first", fall, json!({"repeat": "first"})),
        ("fall-last", fall, json!({"repeat": "last"})),
        ("fall-twice", fall, json!({"repeat": "twice"})),
    ])
    .await;
    r.run_for(TimeDelta::days(1)).await;
    let day = "2026-11-01";
    let both = ["2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z"];
    assert_eq!(nominal("fall-dapr", day).await, both);
    assert_eq!(nominal("fall-twice", day).await, both);
    assert_eq!(nominal("fall-first", day).await, ["2026-11-01T05:30:00Z"]);
    assert_eq!(nominal("fall-last", day).await, ["2026-11-01T06:30:00Z"]);
    r.stop().await;
}

/// `policy.timeout`: an attempt the app has not answered in time is cancelled and fails (as
/// `timed_out`), on the engine's clock; other jobs are not held up.
#[tokio::test]
async fn an_attempt_past_its_timeout_fails_and_others_go_on() {
    let app = HttpApp::new();
    app.delay
        .lock()
        .unwrap()
        .insert("slow".into(), std::time::Duration::from_secs(60));
    let r = start(&app, Arc::new(store::Memory::new())).await;
    r.create(
        "slow",
        r#"{"dueTime":"10s","policy":{"timeout":"5s"},"failurePolicy":{"drop":{}}}"#,
    )
    .await;
    r.create("fast", r#"{"dueTime":"12s"}"#).await;
    let real = std::time::Instant::now();
    r.clock.set(t0() + TimeDelta::seconds(10));
    common::eventually("slow reaches the app", async || {
        app.started.lock().unwrap().iter().any(|n| n == "slow")
    })
    .await;
    r.clock.set(t0() + TimeDelta::seconds(12));
    common::eventually("fast is delivered while slow hangs", async || {
        app.count("fast") == 1
    })
    .await;
    let v = r.view("slow").await;
    assert_eq!(v["status"]["inFlight"], true, "{v}");
    r.clock.set(t0() + TimeDelta::seconds(15));
    common::clockwork::settle(r.sidecar.engine().unwrap(), &r.clock).await;
    let v = r.view("slow").await;
    assert_eq!(v["status"]["lastOutcome"], "timed_out", "{v}");
    assert_eq!(v["status"]["lastError"], "attempt timed out after 5s");
    assert_eq!(v["status"]["counters"]["failedAttempts"], 1);
    assert_eq!(v["status"]["counters"]["dropped"], 1);
    let runs = r.runs("slow", "").await;
    assert_eq!(runs["runs"][0]["outcome"], "timed_out");
    assert_eq!(runs["runs"][0]["finished"], "2026-01-01T00:00:15Z");
    assert_eq!(app.count("slow"), 0, "the app never finished answering");
    assert!(real.elapsed() < std::time::Duration::from_secs(30));
    r.stop().await;
}

/// `policy.jitter`: every tick of a job fires the same offset in `[0, jitter)` after its
/// nominal time (the execution's nominal time and id do not move), the same after a restart.
#[tokio::test]
async fn jitter_is_a_fixed_per_job_offset_that_survives_a_restart() {
    let app = HttpApp::new();
    let dir = tempfile::tempdir().unwrap();
    let addr = app::serve(app.clone()).await;
    let clock = ManualClock::new(t0());
    let open = || -> Arc<dyn Store> { Arc::new(store::Redb::open(dir.path()).unwrap()) };
    let r = Running::start(cfg(addr), open(), clock.clone()).await;
    let names: Vec<String> = (0..5).map(|i| format!("j{i}")).collect();
    for name in &names {
        r.create(
            name,
            r#"{"schedule":"0 * * * * *","policy":{"jitter":"30s"}}"#,
        )
        .await;
    }
    r.run_for(TimeDelta::minutes(3)).await;
    let offsets = async |r: &Running| -> Vec<i64> {
        let mut all = Vec::new();
        for name in &names {
            let runs = r.runs(name, "").await;
            let seen: std::collections::BTreeSet<i64> = runs["runs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|run| {
                    let at = |k: &str| {
                        chrono::DateTime::parse_from_rfc3339(run[k].as_str().unwrap()).unwrap()
                    };
                    assert_eq!(at("nominalTime").timestamp() % 60, 0, "{run}");
                    (at("started") - at("nominalTime")).num_milliseconds()
                })
                .collect();
            assert_eq!(seen.len(), 1, "{name}: one offset for every tick: {seen:?}");
            all.extend(seen);
        }
        all
    };
    let before = offsets(&r).await;
    assert!(
        before.iter().all(|&ms| (0..30_000).contains(&ms)),
        "{before:?}"
    );
    assert!(
        before
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            > 1,
        "jobs get different offsets: {before:?}"
    );
    let next: Vec<Value> = {
        let mut out = Vec::new();
        for name in &names {
            out.push(r.view(name).await["status"]["nextFireTime"].clone());
        }
        out
    };
    r.stop().await;
    let r = Running::start(cfg(addr), open(), clock.clone()).await;
    for (name, want) in names.iter().zip(&next) {
        assert_eq!(
            &r.view(name).await["status"]["nextFireTime"],
            want,
            "{name}"
        );
    }
    r.run_for(TimeDelta::minutes(2)).await;
    assert_eq!(
        offsets(&r).await,
        before,
        "the same offsets after a restart"
    );
    r.stop().await;
}

/// `policy.whileTargetDown: skip` (seed 004): ticks that come while the app is down do not
/// run and are counted; the default (Dapr's `stage`) holds them and replays every one when
/// the app is back.
#[tokio::test]
async fn while_target_down_skip_runs_no_tick_while_the_app_is_down() {
    let app = HttpApp::new();
    *app.healthy.lock().unwrap() = false;
    let addr = app::serve(app.clone()).await;
    let mut c = cfg(addr);
    c.health_check = Some(common::fast_health_check());
    let r = Running::start(c, Arc::new(store::Memory::new()), ManualClock::new(t0())).await;
    r.create(
        "skipper",
        r#"{"schedule":"@every 30s","policy":{"whileTargetDown":"skip"}}"#,
    )
    .await;
    r.create("stager", r#"{"schedule":"@every 30s"}"#).await;
    r.run_for(TimeDelta::minutes(5)).await;
    assert_eq!(app.count("skipper") + app.count("stager"), 0);
    let v = r.view("skipper").await;
    assert_eq!(v["status"]["counters"]["skipped"]["target_down"], 10, "{v}");
    assert_eq!(v["status"]["lastOutcome"], "skipped");
    assert_eq!(v["status"]["ticks"], 0, "skipped ticks do not count as run");
    assert_eq!(v["status"]["nextFireTime"], "2026-01-01T00:05:30Z");
    let v = r.view("stager").await;
    assert_eq!(v["status"]["staged"], true, "{v}");

    *app.healthy.lock().unwrap() = true;
    // Dapr's default replays every tick it held back: the ten of the five minutes.
    common::eventually("the held ticks", async || app.count("stager") == 10).await;
    r.run_for(TimeDelta::seconds(30)).await;
    assert_eq!(
        app.count("skipper"),
        1,
        "the first tick after the app is back runs"
    );
    assert_eq!(app.count("stager"), 11);
    let v = r.view("skipper").await;
    assert_eq!(v["status"]["counters"]["skipped"]["target_down"], 10);
    assert_eq!(v["status"]["counters"]["succeeded"], 1);
    let runs = r.runs("skipper", "?limit=2").await;
    assert_eq!(runs["runs"][0]["outcome"], "success");
    assert_eq!(runs["runs"][1]["outcome"], "skipped");
    assert_eq!(runs["runs"][1]["error"], "target_down");
    r.stop().await;
}

/// Seed 004 end to end: an `@every 30s` job with `whileTargetDown: skip` and
/// `catchUp: latest` runs no tick while the app is down, and after a 10-minute outage of jobsd
/// itself exactly one tick runs (the latest); Dapr's default replays all twenty. `window` skips
/// only the ticks older than its window.
#[tokio::test]
async fn seed_004_skip_while_down_and_latest_after_an_outage() {
    let app = HttpApp::new();
    *app.healthy.lock().unwrap() = false;
    let addr = app::serve(app.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let open = || -> Arc<dyn Store> { Arc::new(store::Redb::open(dir.path()).unwrap()) };
    let config = || {
        let mut c = cfg(addr);
        c.health_check = Some(common::fast_health_check());
        c
    };
    let clock = ManualClock::new(t0());
    let r = Running::start(config(), open(), clock.clone()).await;
    r.create(
        "seed",
        r#"{"schedule":"@every 30s","policy":{"whileTargetDown":"skip","catchUp":"latest"}}"#,
    )
    .await;
    r.create(
        "windowed",
        r#"{"schedule":"@every 30s","policy":{"catchUp":"window","catchUpWindow":"2m"}}"#,
    )
    .await;
    r.create("dapr", r#"{"schedule":"@every 30s"}"#).await;
    // The app is down for 5 minutes: no tick of `seed` runs.
    r.run_for(TimeDelta::minutes(5)).await;
    assert_eq!(app.count("seed"), 0);
    let v = r.view("seed").await;
    assert_eq!(v["status"]["counters"]["skipped"]["target_down"], 10, "{v}");
    // Back up: the held ticks of the others are delivered, `seed` goes on from the next one.
    *app.healthy.lock().unwrap() = true;
    common::eventually("held ticks", async || app.count("dapr") == 10).await;
    r.run_for(TimeDelta::seconds(30)).await; // 5:30
    assert_eq!(app.count("seed"), 1);
    assert_eq!(
        app.count("windowed"),
        6,
        "3:00–5:00 held and run, 0:30–2:30 skipped, 5:30"
    );
    let (seed, windowed, dapr) = (app.count("seed"), app.count("windowed"), app.count("dapr"));
    r.stop().await;

    // jobsd is down for 10 minutes (20 ticks of each job pass).
    clock.advance(TimeDelta::minutes(10));
    let r = Running::start(config(), open(), clock.clone()).await;
    common::eventually("the app is seen healthy", async || {
        r.sidecar
            .engine()
            .unwrap()
            .sync()
            .await
            .unwrap()
            .outstanding
            == 0
            && app.count("dapr") == dapr + 20
    })
    .await;
    common::clockwork::settle(r.sidecar.engine().unwrap(), &r.clock).await;
    assert_eq!(
        app.count("seed"),
        seed + 1,
        "exactly one tick after the outage"
    );
    assert_eq!(
        app.count("windowed"),
        windowed + 5,
        "the ticks of the last 2 minutes: 13:30, 14:00, 14:30, 15:00, 15:30"
    );
    let v = r.view("seed").await;
    assert_eq!(v["status"]["counters"]["skipped"]["catch_up"], 19, "{v}");
    assert_eq!(
        v["status"]["lastFireTime"]["nominal"],
        "2026-01-01T00:15:30Z"
    );
    let v = r.view("windowed").await;
    // 0:30–2:30 when the app came back at 5:00, then 6:00–13:00 after the outage.
    assert_eq!(v["status"]["counters"]["skipped"]["catch_up"], 20, "{v}");
    let runs = r.runs("seed", "?limit=2").await;
    assert_eq!(runs["runs"][1]["outcome"], "skipped");
    assert_eq!(runs["runs"][1]["error"], "catch_up");
    r.stop().await;
}

/// Names of the jobs a `/jobsd/v1/jobs` list answers for `query`.
async fn listed(r: &Running, query: &str) -> Vec<String> {
    let (status, page) = r.call("GET", &format!("/jobsd/v1/jobs{query}"), "").await;
    assert_eq!(status, 200, "{page}");
    page["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["name"].as_str().unwrap().to_owned())
        .collect()
}

/// `onExhausted: pause`: once a tick's retries are spent the job stops — across a restart —
/// until it is resumed; the ticks that fall due meanwhile are skipped, and `catchUp: latest`
/// runs the latest of them once at the resume.
#[tokio::test]
async fn an_exhausted_failure_policy_pauses_the_job_until_it_is_resumed() {
    let app = HttpApp::new();
    app.status.lock().unwrap().insert("flaky".into(), 500);
    let dir = tempfile::tempdir().unwrap();
    let addr = app::serve(app.clone()).await;
    let clock = ManualClock::new(t0());
    let open = || -> Arc<dyn Store> { Arc::new(store::Redb::open(dir.path()).unwrap()) };
    let r = Running::start(cfg(addr), open(), clock.clone()).await;
    r.create(
        "flaky",
        r#"{"schedule":"@every 10s","policy":{"catchUp":"latest"},
            "failurePolicy":{"delays":{"delays":["1s"]},"onExhausted":"pause"}}"#,
    )
    .await;
    r.create("steady", r#"{"schedule":"@every 10s"}"#).await;
    r.run_for(TimeDelta::seconds(15)).await;
    assert_eq!(attempt_times(&r, "flaky").await, [10, 11]);
    r.run_for(TimeDelta::minutes(5)).await;
    assert_eq!(app.count("flaky"), 2, "nothing fires while paused");
    let v = r.view("flaky").await;
    let s = &v["status"];
    assert_eq!(s["state"], "paused", "{v}");
    assert_eq!(s["paused"], true);
    assert_eq!(s["pausedReason"], "failure_policy_exhausted");
    assert_eq!(s["pausedNote"], "app responded with HTTP status 500");
    assert_eq!(s["pausedAt"], "2026-01-01T00:00:11Z");
    assert!(s["nextFireTime"].is_null());
    assert_eq!(s["counters"]["dropped"], 1);
    assert_eq!(s["counters"]["onExhausted"]["pause"], 1);
    assert_eq!(listed(&r, "?state=paused").await, ["flaky"]);
    assert_eq!(listed(&r, "?state=active").await, ["steady"]);
    r.stop().await;

    let r = Running::start(cfg(addr), open(), clock.clone()).await;
    r.run_for(TimeDelta::minutes(5)).await;
    assert_eq!(app.count("flaky"), 2, "still paused after a restart");
    assert_eq!(r.view("flaky").await["status"]["state"], "paused");

    // Resumed at 10:15: the ticks of 0:20–10:10 fell due while paused; the latest, 10:10,
    // runs.
    app.status.lock().unwrap().remove("flaky");
    let (status, body) = r.call("POST", "/jobsd/v1/jobs/flaky/resume", "").await;
    assert_eq!(status, 204, "{body}");
    common::clockwork::settle(r.sidecar.engine().unwrap(), &r.clock).await;
    assert_eq!(
        app.count("flaky"),
        3,
        "exactly one run for the missed ticks"
    );
    let v = r.view("flaky").await;
    assert_eq!(v["status"]["state"], "active", "{v}");
    assert!(v["status"]["pausedReason"].is_null());
    assert_eq!(v["status"]["counters"]["skipped"]["paused"], 60);
    assert_eq!(
        v["status"]["lastFireTime"]["nominal"],
        "2026-01-01T00:10:10Z"
    );
    r.run_for(TimeDelta::seconds(10)).await;
    assert_eq!(app.count("flaky"), 4, "and on with its schedule");

    let (status, body) = r.call("POST", "/jobsd/v1/jobs/nope/resume", "").await;
    assert_eq!(status, 404);
    assert_eq!(body["errorCode"], "ERR_JOB_NOT_FOUND");
    r.stop().await;
}

/// Pausing and resuming by hand, over HTTP and gRPC: the note is shown, nothing fires while
/// paused, and with Dapr's catch-up (`all`) none of the ticks that fell due runs on resume:
/// a pause means skip.
#[tokio::test]
async fn jobs_are_paused_and_resumed_by_hand_over_http_and_grpc() {
    use jobsd::proto::jobsd_api::{self as jv1, jobs_client::JobsClient};

    let app = HttpApp::new();
    let r = start(&app, Arc::new(store::Memory::new())).await;
    let mut c = JobsClient::connect(format!("http://{}", r.sidecar.grpc_addrs[0]))
        .await
        .unwrap();
    r.create("h", r#"{"schedule":"@every 10s"}"#).await;
    r.create("g", r#"{"schedule":"@every 10s"}"#).await;
    r.run_for(TimeDelta::seconds(15)).await;
    assert_eq!((app.count("h"), app.count("g")), (1, 1));

    let (status, body) = r
        .call(
            "POST",
            "/jobsd/v1/jobs/h/pause",
            r#"{"note":"deploy in progress"}"#,
        )
        .await;
    assert_eq!(status, 204, "{body}");
    let v = r.view("h").await;
    assert_eq!(v["status"]["state"], "paused", "{v}");
    assert_eq!(v["status"]["pausedReason"], "manual");
    assert_eq!(v["status"]["pausedNote"], "deploy in progress");
    assert_eq!(v["status"]["pausedAt"], "2026-01-01T00:00:15Z");
    c.pause_job(jv1::PauseJobRequest {
        name: "g".into(),
        note: String::new(),
    })
    .await
    .unwrap();
    let status = c
        .get_job(jv1::GetJobRequest { name: "g".into() })
        .await
        .unwrap()
        .into_inner()
        .job
        .unwrap()
        .status
        .unwrap();
    assert_eq!((status.state.as_str(), status.paused), ("paused", true));
    assert_eq!(status.paused_reason, "manual");
    assert_eq!(status.paused_at.unwrap().seconds, t0().timestamp() + 15);
    r.run_for(TimeDelta::minutes(1)).await;
    assert_eq!((app.count("h"), app.count("g")), (1, 1));
    assert_eq!(listed(&r, "?state=paused").await, ["g", "h"]);

    // Refusals: a missing job, a body that is not a note, a note too long.
    let (status, body) = r.call("POST", "/jobsd/v1/jobs/nope/pause", "").await;
    assert_eq!(
        (status, &body["errorCode"]),
        (404, &json!("ERR_JOB_NOT_FOUND"))
    );
    let err = c
        .resume_job(jv1::ResumeJobRequest {
            name: "nope".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    let (status, body) = r
        .call("POST", "/jobsd/v1/jobs/h/pause", r#"{"why":"x"}"#)
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["errorCode"], "ERR_MALFORMED_REQUEST");
    let long = json!({"note": "x".repeat(513)}).to_string();
    let (status, body) = r.call("POST", "/jobsd/v1/jobs/h/pause", &long).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("note: 513 bytes")
    );

    // Resumed at 1:15: the ticks of 0:20–1:10 are skipped, then on schedule from 1:20.
    let (status, _) = r.call("POST", "/jobsd/v1/jobs/h/resume", "").await;
    assert_eq!(status, 204);
    c.resume_job(jv1::ResumeJobRequest { name: "g".into() })
        .await
        .unwrap();
    common::clockwork::settle(r.sidecar.engine().unwrap(), &r.clock).await;
    assert_eq!((app.count("h"), app.count("g")), (1, 1));
    assert_eq!(
        r.view("h").await["status"]["counters"]["skipped"]["paused"],
        6
    );
    // Resuming a job that is not paused changes nothing.
    let (status, _) = r.call("POST", "/jobsd/v1/jobs/h/resume", "").await;
    assert_eq!(status, 204);
    assert_eq!(r.view("h").await["status"]["state"], "active");
    r.run_for(TimeDelta::seconds(10)).await;
    assert_eq!((app.count("h"), app.count("g")), (2, 2));
    r.stop().await;
}

/// `onExhausted: deadLetter`: the tick whose retries are spent goes, once, to the dead-letter
/// job as a JSON object with its execution, error and data; the job keeps its schedule, and
/// a restart dead-letters nothing again.
#[tokio::test]
async fn a_spent_tick_goes_once_to_its_dead_letter_job() {
    let app = HttpApp::new();
    app.status.lock().unwrap().insert("orders".into(), 500);
    let dir = tempfile::tempdir().unwrap();
    let addr = app::serve(app.clone()).await;
    let clock = ManualClock::new(t0());
    let open = || -> Arc<dyn Store> { Arc::new(store::Redb::open(dir.path()).unwrap()) };
    let r = Running::start(cfg(addr), open(), clock.clone()).await;
    r.create(
        "orders",
        r#"{"schedule":"@every 10s","data":{"order":42,"items":["a"]},
            "failurePolicy":{"delays":{"delays":["1s"]},"onExhausted":"deadLetter",
                             "deadLetterJob":"orders-failed"}}"#,
    )
    .await;
    r.run_for(TimeDelta::seconds(12)).await;
    assert_eq!(attempt_times(&r, "orders").await, [10, 11]);
    let letters = app.bodies("orders-failed");
    assert_eq!(letters.len(), 1);
    let letter: Value = serde_json::from_str(&letters[0]).unwrap();
    let runs = r.runs("orders", "").await;
    assert_eq!(
        letter,
        json!({
            "job": "orders",
            "executionId": runs["runs"][0]["executionId"],
            "scheduledTime": "2026-01-01T00:00:10Z",
            "attempts": 2,
            "error": "app responded with HTTP status 500",
            "data": {"order": 42, "items": ["a"]},
        })
    );
    let v = r.view("orders").await;
    assert_eq!(v["status"]["state"], "active", "{v}");
    assert_eq!(v["status"]["counters"]["dropped"], 1);
    assert_eq!(v["status"]["counters"]["onExhausted"]["dead_letter"], 1);
    assert_eq!(v["status"]["nextFireTime"], "2026-01-01T00:00:20Z");
    // The dead letter is a job of the app like any: a one-shot, done once delivered.
    assert_eq!(r.view("orders-failed").await["status"]["state"], "finished");

    app.status.lock().unwrap().remove("orders");
    r.stop().await;
    let r = Running::start(cfg(addr), open(), clock.clone()).await;
    r.run_for(TimeDelta::seconds(20)).await;
    assert_eq!(
        app.count("orders-failed"),
        1,
        "nothing is dead-lettered twice"
    );
    assert_eq!(attempt_times(&r, "orders").await, [10, 11, 20, 30]);
    r.stop().await;
}
