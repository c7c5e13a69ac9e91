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
