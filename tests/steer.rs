//! Issue 13: steering jobs by hand and telling handlers exactly what they run — the execution
//! context on every delivery, run now, backfill. A real sidecar on a manual clock, a real
//! HTTP app.

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use chrono::TimeDelta;
use common::app::{self, HttpApp};
use common::running::Running;
use common::{sidecar_config, t0};
use jobsd::clock::ManualClock;
use jobsd::config::{self, AppProtocol};
use jobsd::store::{self, Store};
use serde_json::Value;

fn cfg(app: SocketAddr) -> config::Sidecar {
    sidecar_config(Some(app), AppProtocol::Http, &[])
}

async fn start(app: &HttpApp, store: Arc<dyn Store>) -> Running {
    let addr = app::serve(app.clone()).await;
    Running::start(cfg(addr), store, ManualClock::new(t0())).await
}

/// `(execution id, attempt, scheduled time, trigger)` of each call the app got for `name`.
fn contexts(app: &HttpApp, name: &str) -> Vec<(String, String, String, String)> {
    app.contexts(name)
        .into_iter()
        .map(|h: HashMap<String, String>| {
            let get = |k: &str| h.get(k).cloned().unwrap_or_default();
            (
                get("jobsd-execution-id"),
                get("jobsd-attempt"),
                get("jobsd-scheduled-time"),
                get("jobsd-trigger"),
            )
        })
        .collect()
}

/// The execution ids of the job's runs, oldest first.
async fn run_ids(r: &Running, name: &str) -> Vec<String> {
    let runs = r.runs(name, "?limit=100").await;
    let mut ids: Vec<String> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["executionId"].as_str().unwrap().to_owned())
        .collect();
    ids.reverse();
    ids
}

/// Every retry of a tick is the same execution (id and nominal time), with its attempt number
/// and `retry`; the next tick is another execution; a restart in the middle of the retries
/// changes nothing; the ids are the ones the run history shows.
#[tokio::test]
async fn execution_context_is_stable_across_retries_and_a_restart() {
    let app = HttpApp::new();
    app.status.lock().unwrap().insert("ctx".into(), 500);
    let dir = tempfile::tempdir().unwrap();
    let addr = app::serve(app.clone()).await;
    let clock = ManualClock::new(t0());
    let open = || -> Arc<dyn Store> { Arc::new(store::Redb::open(dir.path()).unwrap()) };
    let r = Running::start(cfg(addr), open(), clock.clone()).await;
    // Ticks at 10 s and 20 s; Dapr's default policy: 3 retries 1 s apart.
    r.create("ctx", r#"{"schedule":"@every 10s","repeats":2}"#)
        .await;
    r.run_for(TimeDelta::seconds(11)).await; // attempts at 10 and 11
    assert_eq!(app.count("ctx"), 2);
    r.stop().await;
    let r = Running::start(cfg(addr), open(), clock.clone()).await;
    r.run_for(TimeDelta::seconds(30)).await;
    let seen = contexts(&app, "ctx");
    assert_eq!(seen.len(), 8, "{seen:?}");
    let (first, second) = seen.split_at(4);
    for (tick, calls) in [("10", first), ("20", second)] {
        for (i, (id, attempt, at, trigger)) in calls.iter().enumerate() {
            assert_eq!(id, &calls[0].0, "one execution per tick: {seen:?}");
            assert_eq!(attempt, &(i + 1).to_string());
            assert_eq!(at, &format!("2026-01-01T00:00:{tick}Z"));
            assert_eq!(trigger, if i == 0 { "schedule" } else { "retry" });
        }
    }
    assert_ne!(
        first[0].0, second[0].0,
        "a tick of its own, an id of its own"
    );
    let ids: Vec<String> = seen.iter().map(|c| c.0.clone()).collect();
    assert_eq!(
        run_ids(&r, "ctx").await,
        ids,
        "the history names the same executions"
    );
    r.stop().await;
}

/// Dapr's request is unchanged: the body is the job's data, whatever the headers say.
#[tokio::test]
async fn the_body_stays_daprs() {
    let app = HttpApp::new();
    let r = start(&app, Arc::new(store::Memory::new())).await;
    r.create("b", r#"{"dueTime":"1s","data":{"k":"v"}}"#).await;
    r.run_for(TimeDelta::seconds(2)).await;
    assert_eq!(app.bodies("b"), [r#"{"k":"v"}"#]);
    let context = &contexts(&app, "b")[0];
    assert_eq!(context.3, "schedule");
    let _: Value = r.view("b").await;
    r.stop().await;
}

/// Run now: one execution of its own (the id the answer gave, `manual`), retried under the
/// job's failure policy as the same execution; the schedule, the progress and `repeats` do not
/// move; the run history marks it `manual`.
#[tokio::test]
async fn run_now_is_an_execution_of_its_own() {
    let app = HttpApp::new();
    let r = start(&app, Arc::new(store::Memory::new())).await;
    r.create("hourly", r#"{"schedule":"@every 1h","repeats":2}"#)
        .await;
    r.run_for(TimeDelta::seconds(10)).await;
    let (status, answer) = r.call("POST", "/jobsd/v1/jobs/hourly/trigger", "").await;
    assert_eq!(status, 202, "{answer}");
    let id = answer["executionId"].as_str().unwrap().to_owned();
    r.run_for(TimeDelta::seconds(1)).await;
    assert_eq!(
        contexts(&app, "hourly"),
        [(
            id.clone(),
            "1".into(),
            "2026-01-01T00:00:10Z".into(),
            "manual".into()
        )]
    );
    let v = r.view("hourly").await;
    assert_eq!(v["status"]["ticks"], 0, "{v}");
    assert_eq!(v["status"]["nextFireTime"], "2026-01-01T01:00:00Z", "{v}");
    let runs = r.runs("hourly", "").await;
    assert_eq!(runs["runs"][0]["trigger"], "manual", "{runs}");
    assert_eq!(runs["runs"][0]["executionId"], id.as_str());
    // The schedule goes on as before: both repeats still run.
    r.run_for(TimeDelta::hours(3)).await;
    let triggers: Vec<String> = contexts(&app, "hourly").into_iter().map(|c| c.3).collect();
    assert_eq!(triggers, ["manual", "schedule", "schedule"]);

    // A failing run by hand is retried as the job's failure policy says (Dapr's default:
    // 3 retries 1 s apart), as one execution.
    app.status.lock().unwrap().insert("failing".into(), 500);
    r.create("failing", r#"{"schedule":"@every 24h"}"#).await;
    let (status, answer) = r.call("POST", "/jobsd/v1/jobs/failing/trigger", "{}").await;
    assert_eq!(status, 202, "{answer}");
    r.run_for(TimeDelta::seconds(10)).await;
    let seen = contexts(&app, "failing");
    assert_eq!(seen.len(), 4, "{seen:?}");
    for (i, (id, attempt, _, trigger)) in seen.iter().enumerate() {
        assert_eq!(id, answer["executionId"].as_str().unwrap());
        assert_eq!(attempt, &(i + 1).to_string());
        assert_eq!(trigger, if i == 0 { "manual" } else { "retry" });
    }
    // Two runs now at one instant are two executions.
    let a = r.call("POST", "/jobsd/v1/jobs/failing/trigger", "").await.1;
    let b = r.call("POST", "/jobsd/v1/jobs/failing/trigger", "").await.1;
    assert_ne!(a["executionId"], b["executionId"]);
    r.stop().await;
}

/// Run now meets the scheduled executions as the overlap rule says: serial waits for the one
/// in flight, `skip` is refused while one is, `allow` runs beside it.
#[tokio::test]
async fn run_now_follows_the_overlap_rule() {
    let app = HttpApp::new();
    let gate = app.hold("slow");
    let r = start(&app, Arc::new(store::Memory::new())).await;
    r.create("slow", r#"{"dueTime":"1s","schedule":"@every 1h"}"#)
        .await;
    r.clock.advance(TimeDelta::seconds(1));
    common::eventually("the scheduled tick is at the app", async || {
        app.started("slow") == 1
    })
    .await;
    // Skip: refused while an execution is in flight, nothing queued.
    let (status, body) = r
        .call(
            "POST",
            "/jobsd/v1/jobs/slow/trigger",
            r#"{"overlap":"skip"}"#,
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["errorCode"], "ERR_JOBSD_BUSY", "{body}");
    // Allow: runs beside the one in flight.
    let (status, _) = r
        .call(
            "POST",
            "/jobsd/v1/jobs/slow/trigger",
            r#"{"overlap":"allow"}"#,
        )
        .await;
    assert_eq!(status, 202);
    common::eventually("the allowed run starts", async || app.started("slow") == 2).await;
    // Serial (the job's default): accepted, waits for the executions in flight.
    let (status, _) = r.call("POST", "/jobsd/v1/jobs/slow/trigger", "").await;
    assert_eq!(status, 202);
    let engine = r.sidecar.engine().unwrap();
    let s = common::clockwork::looked_at_the_clock(engine).await;
    assert_eq!(s.outstanding, 2, "serial: the run by hand waits");
    assert_eq!(app.started("slow"), 2, "serial: the run by hand waits");
    gate.add_permits(10);
    r.run_for(TimeDelta::seconds(5)).await;
    let triggers: Vec<String> = contexts(&app, "slow").into_iter().map(|c| c.3).collect();
    assert_eq!(triggers.len(), 3, "{triggers:?}");
    assert_eq!(app.count("slow"), 3);
    let (status, body) = r
        .call(
            "POST",
            "/jobsd/v1/jobs/slow/trigger",
            r#"{"overlap":"sometimes"}"#,
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let (status, _) = r.call("POST", "/jobsd/v1/jobs/nope/trigger", "").await;
    assert_eq!(status, 404);
    r.stop().await;
}

/// Backfill of a day of an hourly cron: 24 executions, in order, each once, marked
/// `backfill` with its nominal time; the job's own progress does not move. Ranges too long,
/// empty or malformed are refused.
#[tokio::test]
async fn backfill_of_a_day_runs_24_ordered_ticks() {
    let app = HttpApp::new();
    let r = start(&app, Arc::new(store::Memory::new())).await;
    r.create("hourly", r#"{"schedule":"0 0 * * * *"}"#).await;
    let (status, answer) = r
        .call(
            "POST",
            "/jobsd/v1/jobs/hourly/backfill",
            r#"{"start":"2025-12-31T00:00:00Z","end":"2026-01-01T00:00:00Z"}"#,
        )
        .await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["count"], 24);
    r.run_for(TimeDelta::seconds(1)).await;
    let seen = contexts(&app, "hourly");
    assert_eq!(seen.len(), 24, "{seen:?}");
    for (hour, (id, attempt, at, trigger)) in seen.iter().enumerate() {
        assert_eq!(at, &format!("2025-12-31T{hour:02}:00:00Z"));
        assert_eq!(trigger, "backfill");
        assert_eq!(attempt, "1");
        assert_eq!(
            id,
            answer["executions"][hour]["executionId"].as_str().unwrap()
        );
        assert_eq!(answer["executions"][hour]["scheduledTime"], at.as_str());
    }
    let v = r.view("hourly").await;
    assert_eq!(v["status"]["ticks"], 0, "{v}");
    assert_eq!(v["status"]["nextFireTime"], "2026-01-01T01:00:00Z");
    // The scheduled tick that follows is an execution of its own (not a backfilled one's id).
    r.run_for(TimeDelta::hours(1)).await;
    let last = contexts(&app, "hourly").pop().unwrap();
    assert_eq!(last.3, "schedule");
    assert!(seen.iter().all(|s| s.0 != last.0));

    for (body, want) in [
        // Two years of hours: over the default bound of 10,000 ticks.
        (
            r#"{"start":"2024-01-01T00:00:00Z","end":"2026-01-01T00:00:00Z"}"#,
            "more than 10000 ticks",
        ),
        (
            r#"{"start":"2026-01-01T00:00:00Z","end":"2025-01-01T00:00:00Z"}"#,
            "end must be after",
        ),
        (
            r#"{"start":"yesterday","end":"2026-01-01T00:00:00Z"}"#,
            "start",
        ),
        (r#"{"start":"2026-01-01T00:00:00Z"}"#, "end"),
    ] {
        let (status, err) = r.call("POST", "/jobsd/v1/jobs/hourly/backfill", body).await;
        let message = err["message"].as_str().unwrap_or_default();
        assert_eq!(status, 400, "{body}: {message}");
        assert!(message.contains(want), "{body}: {message}");
    }
    r.stop().await;
}

/// A scheduled tick that falls due while a run by hand is out (serial) waits for it, then runs.
#[tokio::test]
async fn a_scheduled_tick_waits_for_a_run_by_hand() {
    let app = HttpApp::new();
    let gate = app.hold("turns");
    let r = start(&app, Arc::new(store::Memory::new())).await;
    r.create("turns", r#"{"schedule":"@every 10s","repeats":1}"#)
        .await;
    r.clock.advance(TimeDelta::seconds(5));
    let (status, _) = r.call("POST", "/jobsd/v1/jobs/turns/trigger", "").await;
    assert_eq!(status, 202);
    common::eventually("the run by hand is at the app", async || {
        app.started("turns") == 1
    })
    .await;
    r.clock.advance(TimeDelta::seconds(10));
    let engine = r.sidecar.engine().unwrap();
    let s = common::clockwork::looked_at_the_clock(engine).await;
    assert_eq!(s.outstanding, 1, "the tick waits for its turn");
    assert_eq!(app.started("turns"), 1, "the tick waits for its turn");
    gate.add_permits(2);
    r.run_for(TimeDelta::seconds(1)).await;
    let triggers: Vec<String> = contexts(&app, "turns").into_iter().map(|c| c.3).collect();
    assert_eq!(triggers, ["manual", "schedule"]);
    assert_eq!(r.view("turns").await["status"]["state"], "finished");
    r.stop().await;
}
