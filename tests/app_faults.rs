//! Issue 15, the app misbehaves: a call the app never answers ends at `--app-call-timeout`
//! (on the engine's clock, a manual one here) and the job's failure policy runs, while the
//! other jobs keep firing on time. A real sidecar, a real HTTP app.

mod common;

use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use common::app::{self, HttpApp};
use common::running::Running;
use common::{eventually, sidecar_config, started_after_t0, t0};
use jobsd::clock::ManualClock;
use jobsd::config::AppProtocol;
use jobsd::store;

/// A hung app holds one job's calls: each attempt of that job ends exactly at the call
/// timeout as `timed_out`, its failure policy (2 retries) runs to the end, and a
/// job due every 10 s meanwhile is delivered at each of its ticks.
#[tokio::test]
async fn a_hung_call_ends_at_the_call_timeout_and_other_jobs_stay_on_time() {
    let app = HttpApp::new();
    // Never given a permit: every call for `hung` waits forever.
    let _gate = app.hold("hung");
    let addr = app::serve(app.clone()).await;
    let mut cfg = sidecar_config(Some(addr), AppProtocol::Http, &[]);
    cfg.app_call_timeout = Some(Duration::from_secs(60));
    let r = Running::start(cfg, Arc::new(store::Memory::new()), ManualClock::new(t0())).await;
    r.create(
        "hung",
        r#"{"dueTime":"10s","failurePolicy":{"constant":{"interval":"5s","maxRetries":2}}}"#,
    )
    .await;
    r.create("tick", r#"{"schedule":"@every 10s","dueTime":"10s"}"#)
        .await;
    // Attempts start at 10 s; each ends 60 s later. Retry k is due at the tick + k × 5 s
    // (Dapr's constant policy counts from the nominal time), long past: it starts at once.
    let hung_started = |t: i64| match t {
        ..10 => 0,
        10..70 => 1,
        70..130 => 2,
        _ => 3,
    };
    for t in (5..=200).step_by(5) {
        r.clock.set(t0() + TimeDelta::seconds(t));
        // The clock moves on only once every tick due by now has reached the app: each one
        // was delivered at its own nominal instant.
        eventually(&format!("tick's deliveries due by {t} s"), async || {
            app.count("tick") == usize::try_from(t / 10).unwrap()
        })
        .await;
        eventually(&format!("hung's attempts started by {t} s"), async || {
            app.started("hung") == hung_started(t)
        })
        .await;
    }
    eventually("hung's last attempt to end", async || {
        r.view("hung").await["status"]["counters"]["dropped"] == 1
    })
    .await;
    let v = r.view("hung").await;
    assert_eq!(v["status"]["counters"]["failedAttempts"], 3, "{v}");
    assert_eq!(v["status"]["lastOutcome"], "timed_out", "{v}");
    let runs = r.runs("hung", "").await;
    assert_eq!(started_after_t0(&runs), [10, 70, 130], "{runs}");
    for run in runs["runs"].as_array().unwrap() {
        assert_eq!(run["outcome"], "timed_out", "{run}");
        let at = |k: &str| chrono::DateTime::parse_from_rfc3339(run[k].as_str().unwrap()).unwrap();
        assert_eq!((at("finished") - at("started")).num_seconds(), 60, "{run}");
    }
    assert_eq!(app.count("hung"), 0, "the app never answered");
    // Every tick of `tick` was a first attempt, on time.
    let ticks = r.runs("tick", "?limit=100").await;
    assert_eq!(
        started_after_t0(&ticks),
        (1..=20).map(|k| k * 10).collect::<Vec<_>>()
    );
    r.stop().await;
}
