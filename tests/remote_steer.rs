//! Pausing, resuming and running jobs by hand in remote mode: a sidecar with
//! `--scheduler-host-address` in front of an in-process `jobsd scheduler` replica (memory
//! store, manual clock) and a real HTTP app. jobsd's routes answer as in embedded mode, the
//! replica applies the change (alone, it fires every job), and the triggers come back on the
//! sidecar's streams. A cluster's owner routing is in `e2e/cluster.sh`; a Dapr Scheduler's
//! refusal in the unit tests of `seam::remote::steer`.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use chrono::TimeDelta;
use common::app::{self, HttpApp};
use common::replica::Rep;
use common::{eventually, http, sidecar_config};
use jobsd::app::Sidecar;
use jobsd::config::AppProtocol;
use serde_json::Value;

/// A replica, an app, and a sidecar of `myapp` in front of them (its streams open) holding
/// job `name` created with `body` on Dapr's route.
async fn started(name: &str, body: &str) -> (Rep, HttpApp, Sidecar) {
    let rep = Rep::start().await;
    let app = HttpApp::new();
    let side = sidecar(&rep, &app).await;
    let (status, answer) = call(&side, "POST", &format!("/v1.0/jobs/{name}"), body).await;
    assert_eq!(status, 204, "{answer}");
    (rep, app, side)
}

/// Stops the sidecar, then the replica.
async fn stop(rep: Rep, side: Sidecar) {
    side.shutdown_token().cancel();
    tokio::time::timeout(Duration::from_secs(15), side.wait())
        .await
        .unwrap()
        .unwrap();
    rep.stop().await;
}

/// A sidecar of `myapp` in front of `rep`, its streams open.
async fn sidecar(rep: &Rep, app: &HttpApp) -> Sidecar {
    let app = app::serve(app.clone()).await;
    let cfg = sidecar_config(Some(app), AppProtocol::Http, &[rep.address()]);
    let sidecar = Sidecar::start(cfg).await.unwrap();
    eventually("3 job streams", async || {
        sidecar.remote().unwrap().job_streams() == 3
    })
    .await;
    sidecar
}

async fn call(side: &Sidecar, method: &str, path: &str, body: &str) -> (u16, Value) {
    let r = http(side.http_addrs[0], method, path, &[], body.as_bytes()).await;
    let json = if r.body.is_empty() {
        Value::Null
    } else {
        r.json()
    };
    (r.status, json)
}

/// `(execution id, trigger kind, scheduled time)` of each delivery of `name`, in order.
fn deliveries(app: &HttpApp, name: &str) -> Vec<(String, String, String)> {
    app.contexts(name)
        .into_iter()
        .map(|h: HashMap<String, String>| {
            let get = |k: &str| h.get(k).cloned().unwrap_or_default();
            (
                get("jobsd-execution-id"),
                get("jobsd-trigger"),
                get("jobsd-scheduled-time"),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_paused_job_does_not_fire_through_the_replica_until_resumed() {
    let (rep, app, side) = started("every", r#"{"schedule":"@every 10s"}"#).await;
    let (status, answer) = call(
        &side,
        "POST",
        "/jobsd/v1/jobs/every/pause",
        r#"{"note":"maintenance"}"#,
    )
    .await;
    assert_eq!(status, 204, "{answer}");
    rep.run_for(TimeDelta::seconds(35)).await;
    assert_eq!(app.count("every"), 0, "a paused job fired");
    let (_, view) = call(&side, "GET", "/jobsd/v1/jobs/every", "").await;
    assert_eq!(view["status"]["state"], "paused", "{view}");
    assert_eq!(view["status"]["pausedNote"], "maintenance", "{view}");

    let (status, answer) = call(&side, "POST", "/jobsd/v1/jobs/every/resume", "").await;
    assert_eq!(status, 204, "{answer}");
    // Resumed at 0:35: the ticks of 0:40 and 0:50 run, the three passed over do not.
    rep.run_for(TimeDelta::seconds(20)).await;
    eventually("two ticks after the resume", async || {
        app.count("every") == 2
    })
    .await;
    let (_, view) = call(&side, "GET", "/jobsd/v1/jobs/every", "").await;
    assert_eq!(view["status"]["state"], "active", "{view}");
    assert_eq!(view["status"]["counters"]["skipped"]["paused"], 3, "{view}");

    let (status, answer) = call(&side, "POST", "/jobsd/v1/jobs/nope/pause", "").await;
    assert_eq!(status, 404, "{answer}");
    assert_eq!(answer["errorCode"], "ERR_JOB_NOT_FOUND");
    stop(rep, side).await;
}

#[tokio::test]
async fn run_now_and_backfill_reach_the_app_through_the_replica() {
    let (rep, app, side) = started("hourly", r#"{"schedule":"0 0 * * * *"}"#).await;

    let (status, answer) = call(&side, "POST", "/jobsd/v1/jobs/hourly/trigger", "").await;
    assert_eq!(status, 202, "{answer}");
    let id = answer["executionId"].as_str().unwrap().to_owned();
    rep.run_for(TimeDelta::seconds(1)).await;
    eventually("the manual run", async || app.count("hourly") == 1).await;
    assert_eq!(
        deliveries(&app, "hourly"),
        [(id, "manual".into(), "2026-01-01T00:00:00Z".into())]
    );

    let (status, answer) = call(
        &side,
        "POST",
        "/jobsd/v1/jobs/hourly/backfill",
        r#"{"start":"2025-12-31T21:00:00Z","end":"2026-01-01T00:00:00Z"}"#,
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["count"], 3, "{answer}");
    rep.run_for(TimeDelta::seconds(1)).await;
    eventually("the three backfilled ticks", async || {
        app.count("hourly") == 4
    })
    .await;
    let backfilled: Vec<_> = deliveries(&app, "hourly").into_iter().skip(1).collect();
    for (hour, (id, trigger, at)) in backfilled.iter().enumerate() {
        assert_eq!(at, &format!("2025-12-31T{:02}:00:00Z", 21 + hour));
        assert_eq!(trigger, "backfill");
        assert_eq!(
            id,
            answer["executions"][hour]["executionId"].as_str().unwrap()
        );
    }

    // The sidecar's own checks come first, as in embedded mode.
    let (status, answer) = call(
        &side,
        "POST",
        "/jobsd/v1/jobs/hourly/backfill",
        r#"{"start":"2026-01-01T00:00:00Z","end":"2025-12-31T00:00:00Z"}"#,
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    let (status, answer) = call(&side, "POST", "/jobsd/v1/jobs/nope/trigger", "").await;
    assert_eq!(status, 404, "{answer}");
    stop(rep, side).await;
}

#[tokio::test]
async fn a_bulk_pause_by_selection_holds_the_selected_jobs_until_a_bulk_resume() {
    let (rep, app, side) = started("a-1", r#"{"schedule":"@every 10s"}"#).await;
    for name in ["a-2", "b-1"] {
        let (status, answer) = call(
            &side,
            "POST",
            &format!("/v1.0/jobs/{name}"),
            r#"{"schedule":"@every 10s"}"#,
        )
        .await;
        assert_eq!(status, 204, "{answer}");
    }
    // Already paused: left as it is (its note kept), not counted again.
    let (status, answer) = call(
        &side,
        "POST",
        "/jobsd/v1/jobs/a-2/pause",
        r#"{"note":"first"}"#,
    )
    .await;
    assert_eq!(status, 204, "{answer}");

    let (status, answer) = call(
        &side,
        "POST",
        "/jobsd/v1/jobs:pause",
        r#"{"prefix":"a-","note":"bulk"}"#,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["count"], 1, "{answer}");
    assert_eq!(answer["names"], serde_json::json!(["a-1"]), "{answer}");
    assert_eq!(answer["truncated"], false, "{answer}");
    let (_, view) = call(&side, "GET", "/jobsd/v1/jobs/a-2", "").await;
    assert_eq!(view["status"]["pausedNote"], "first", "{view}");
    let (_, view) = call(&side, "GET", "/jobsd/v1/jobs/a-1", "").await;
    assert_eq!(view["status"]["pausedNote"], "bulk", "{view}");

    rep.run_for(TimeDelta::seconds(25)).await;
    eventually("b-1's two ticks", async || app.count("b-1") == 2).await;
    assert_eq!(
        (app.count("a-1"), app.count("a-2")),
        (0, 0),
        "a paused job fired"
    );

    // Everything needs "all": true; then only the paused ones resume.
    let (status, answer) = call(&side, "POST", "/jobsd/v1/jobs:resume", "").await;
    assert_eq!(status, 400, "{answer}");
    let (status, answer) = call(&side, "POST", "/jobsd/v1/jobs:resume", r#"{"all":true}"#).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["count"], 2, "{answer}");
    assert_eq!(
        answer["names"],
        serde_json::json!(["a-1", "a-2"]),
        "{answer}"
    );
    rep.run_for(TimeDelta::seconds(10)).await;
    eventually("a tick of each resumed job", async || {
        app.count("a-1") == 1 && app.count("a-2") == 1
    })
    .await;
    let (_, list) = call(&side, "GET", "/jobsd/v1/jobs?state=paused", "").await;
    assert_eq!(list["jobs"], serde_json::json!([]), "{list}");
    stop(rep, side).await;
}
