//! Issue 12: the tick policies that decide which ticks run — `catchUp: none`,
//! `whileTargetDown: latest` and every `overlap` value — each beside Dapr's default on the same
//! clock. A real sidecar on a manual clock, a real HTTP app that can hold its answers.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use common::app::{self, HttpApp};
use common::running::Running;
use common::{sidecar_config, t0};
use jobsd::clock::ManualClock;
use jobsd::config::{self, AppProtocol};
use jobsd::store::{self, Store};
use serde_json::Value;

fn cfg(app: SocketAddr) -> config::Sidecar {
    let mut c = sidecar_config(Some(app), AppProtocol::Http, &[]);
    c.health_check = Some(common::fast_health_check());
    c
}

async fn start(app: &HttpApp) -> Running {
    let addr = app::serve(app.clone()).await;
    Running::start(
        cfg(addr),
        Arc::new(store::Memory::new()),
        ManualClock::new(t0()),
    )
    .await
}

/// Nominal times (seconds after t0) of the job's runs with this outcome, oldest first.
async fn nominals(r: &Running, name: &str, outcome: &str) -> Vec<i64> {
    let runs = r.runs(name, "?limit=100").await;
    let mut secs: Vec<i64> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|run| run["outcome"] == outcome)
        .map(|run| seconds(&run["nominalTime"]))
        .collect();
    secs.reverse();
    secs
}

/// Seconds after t0 at which each attempt of the job started, oldest first.
async fn attempt_times(r: &Running, name: &str) -> Vec<i64> {
    let runs = r.runs(name, "?limit=100").await;
    let mut secs: Vec<i64> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| seconds(&run["started"]))
        .collect();
    secs.reverse();
    secs
}

fn seconds(v: &Value) -> i64 {
    let at = chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap();
    (at.with_timezone(&chrono::Utc) - t0()).num_seconds()
}

/// Gives the engine a moment to do what it should not (a negative check on a manual clock).
async fn a_moment() {
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// `catchUp: none`: a tick that could not start within 10 s of its time (the scheduler was
/// stopped or behind) is skipped and counted; a tick merely a few seconds late still runs.
/// Dapr's default runs every missed tick.
#[tokio::test]
async fn catch_up_none_skips_missed_ticks_but_runs_a_late_one() {
    let app = HttpApp::new();
    let r = start(&app).await;
    r.create(
        "none",
        r#"{"schedule":"@every 1m","policy":{"catchUp":"none"}}"#,
    )
    .await;
    r.create("dapr", r#"{"schedule":"@every 1m"}"#).await;
    // 5 s late: not missed.
    r.clock.set(t0() + TimeDelta::seconds(65));
    common::eventually("the late tick", async || {
        app.count("none") == 1 && app.count("dapr") == 1
    })
    .await;
    // The scheduler falls 9½ minutes behind: ticks 2:00 … 10:00 are 30 s or more late.
    r.clock.set(t0() + TimeDelta::seconds(630));
    common::clockwork::settle(r.sidecar.engine().unwrap(), &r.clock).await;
    assert_eq!(app.count("none"), 1, "no missed tick runs");
    assert_eq!(app.count("dapr"), 10, "Dapr replays the nine");
    let v = r.view("none").await;
    assert_eq!(v["status"]["counters"]["skipped"]["catch_up"], 9, "{v}");
    assert_eq!(v["status"]["nextFireTime"], "2026-01-01T00:11:00Z");
    r.run_for(TimeDelta::seconds(30)).await;
    assert_eq!(app.count("none"), 2, "the schedule goes on");
    assert_eq!(nominals(&r, "none", "success").await, [60, 660]);
    r.stop().await;
}

/// `whileTargetDown: latest`: while the app is down at most one tick is held, the latest; when
/// the app is back it runs once and the others are counted as skipped. Dapr's `stage` replays
/// every held tick.
#[tokio::test]
async fn while_target_down_latest_holds_one_tick() {
    let app = HttpApp::new();
    *app.healthy.lock().unwrap() = false;
    let r = start(&app).await;
    r.create(
        "latest",
        r#"{"schedule":"@every 30s","policy":{"whileTargetDown":"latest"}}"#,
    )
    .await;
    r.create("stager", r#"{"schedule":"@every 30s"}"#).await;
    r.run_for(TimeDelta::minutes(5)).await;
    assert_eq!(app.count("latest") + app.count("stager"), 0);
    assert_eq!(r.view("latest").await["status"]["staged"], true);

    *app.healthy.lock().unwrap() = true;
    common::eventually("the held ticks", async || {
        app.count("stager") == 10 && app.count("latest") == 1
    })
    .await;
    common::clockwork::settle(r.sidecar.engine().unwrap(), &r.clock).await;
    assert_eq!(app.count("latest"), 1, "only the latest held tick runs");
    assert_eq!(nominals(&r, "latest", "success").await, [300]);
    let v = r.view("latest").await;
    assert_eq!(v["status"]["counters"]["skipped"]["target_down"], 9, "{v}");
    assert_eq!(v["status"]["nextFireTime"], "2026-01-01T00:05:30Z");
    r.run_for(TimeDelta::seconds(30)).await;
    assert_eq!(app.count("latest"), 2);
    assert_eq!(app.count("stager"), 11);
    r.stop().await;
}

/// A handler that takes 25 s on an `@every 10s` schedule, under each `overlap` value: Dapr's
/// `serial` runs the ticks that fell due meanwhile one after the other; `skip` counts them
/// and goes on with the next tick; `bufferOne` runs the latest of them at once; `allow` with
/// `maxConcurrent: 2` runs a second tick beside the first and holds the third until one ends.
#[tokio::test]
async fn overlap_policies_with_a_slow_handler() {
    let app = HttpApp::new();
    let jobs = [
        ("serial", r#"{"overlap":"serial"}"#),
        ("skip", r#"{"overlap":"skip"}"#),
        ("buffer", r#"{"overlap":"bufferOne"}"#),
        ("allow", r#"{"overlap":"allow","maxConcurrent":2}"#),
    ];
    let gates: Vec<_> = jobs.iter().map(|(name, _)| app.hold(name)).collect();
    let r = start(&app).await;
    for (name, policy) in jobs {
        r.create(
            name,
            &format!(r#"{{"schedule":"@every 10s","policy":{policy}}}"#),
        )
        .await;
    }
    r.clock.set(t0() + TimeDelta::seconds(10));
    common::eventually("every first tick", async || {
        jobs.iter().all(|(name, _)| app.started(name) == 1)
    })
    .await;
    r.clock.set(t0() + TimeDelta::seconds(20));
    common::eventually("a second tick of `allow` beside the first", async || {
        app.started("allow") == 2
    })
    .await;
    r.clock.set(t0() + TimeDelta::seconds(35));
    a_moment().await;
    for (name, _) in &jobs[..3] {
        assert_eq!(app.started(name), 1, "{name}: one tick in flight at most");
    }
    assert_eq!(app.started("allow"), 2, "allow: two at most");
    assert_eq!(r.view("allow").await["status"]["inFlight"], true);

    // The handler answers (at 0:35).
    for gate in &gates {
        gate.add_permits(1000);
    }
    common::eventually("the answers and what follows them", async || {
        app.count("serial") == 3
            && app.count("skip") == 1
            && app.count("buffer") == 2
            && app.count("allow") == 3
    })
    .await;
    common::clockwork::settle(r.sidecar.engine().unwrap(), &r.clock).await;
    assert_eq!(nominals(&r, "serial", "success").await, [10, 20, 30]);
    assert_eq!(nominals(&r, "skip", "success").await, [10]);
    assert_eq!(nominals(&r, "buffer", "success").await, [10, 30]);
    assert_eq!(nominals(&r, "allow", "success").await, [10, 20, 30]);
    let skip = r.view("skip").await;
    assert_eq!(
        skip["status"]["counters"]["skipped"]["overlap"], 2,
        "{skip}"
    );
    assert_eq!(skip["status"]["nextFireTime"], "2026-01-01T00:00:40Z");
    let buffer = r.view("buffer").await;
    assert_eq!(buffer["status"]["counters"]["skipped"]["overlap"], 1);
    assert_eq!(nominals(&r, "skip", "skipped").await, [30]);
    let allow = r.view("allow").await;
    assert_eq!(allow["status"]["counters"]["succeeded"], 3, "{allow}");
    assert_eq!(allow["status"]["ticks"], 3);

    r.run_for(TimeDelta::seconds(5)).await; // 0:40
    for (name, n) in [("serial", 4), ("skip", 2), ("buffer", 3), ("allow", 4)] {
        assert_eq!(app.count(name), n, "{name}");
    }
    r.stop().await;
}

/// `overlap: allow`: each execution has its own retries (a failing tick retries while the
/// next tick runs beside it), and `maxConcurrent` counts executions waiting for a retry.
#[tokio::test]
async fn allow_retries_each_execution_on_its_own() {
    let app = HttpApp::new();
    app.status.lock().unwrap().insert("retrier".into(), 500);
    let r = start(&app).await;
    r.create(
        "retrier",
        r#"{"schedule":"@every 10s","policy":{"overlap":"allow","maxConcurrent":2},
            "failurePolicy":{"delays":{"delays":["15s"]}}}"#,
    )
    .await;
    r.run_for(TimeDelta::seconds(40)).await;
    // Tick 0:10 at 10 and 25; tick 0:20 at 20 (beside it) and 35; tick 0:30 waits for room
    // until 0:25, then runs at its time, 30; tick 0:40 waits for 0:35 and runs at 40.
    assert_eq!(attempt_times(&r, "retrier").await, [10, 20, 25, 30, 35, 40]);
    let v = r.view("retrier").await;
    assert_eq!(v["status"]["counters"]["dropped"], 2, "{v}");
    assert_eq!(v["status"]["ticks"], 2);
    r.stop().await;
}

/// `overlap: allow` writes the progress up to the oldest execution still out: after a crash
/// an execution that had not ended runs again (at least once), even when a later one had.
#[tokio::test]
async fn allow_after_a_restart_runs_again_what_had_not_ended() {
    let app = HttpApp::new();
    let dir = tempfile::tempdir().unwrap();
    let addr = app::serve(app.clone()).await;
    let clock = ManualClock::new(t0());
    let open = || -> Arc<dyn Store> { Arc::new(store::Redb::open(dir.path()).unwrap()) };
    let r = Running::start(cfg(addr), open(), clock.clone()).await;
    r.create(
        "par",
        r#"{"schedule":"@every 10s","policy":{"overlap":"allow","maxConcurrent":3},
            "failurePolicy":{"delays":{"delays":["1h"]}}}"#,
    )
    .await;
    // Tick 0:10 fails (its retry is an hour away); tick 0:20 succeeds.
    app.status.lock().unwrap().insert("par".into(), 500);
    r.run_for(TimeDelta::seconds(10)).await;
    app.status.lock().unwrap().remove("par");
    r.run_for(TimeDelta::seconds(10)).await;
    assert_eq!(nominals(&r, "par", "failed").await, [10]);
    assert_eq!(nominals(&r, "par", "success").await, [20]);
    r.stop().await;

    let r = Running::start(cfg(addr), open(), clock.clone()).await;
    common::eventually("tick 0:10 again", async || app.count("par") == 4).await;
    common::clockwork::settle(r.sidecar.engine().unwrap(), &r.clock).await;
    // Both are handed out at once (allow): their answers land in either order.
    let mut after = nominals(&r, "par", "success").await;
    after.sort_unstable();
    assert_eq!(
        after,
        [10, 20, 20],
        "0:10 was still out: it runs again, and 0:20 with it (at least once)"
    );
    r.run_for(TimeDelta::seconds(10)).await;
    assert_eq!(nominals(&r, "par", "success").await.last(), Some(&30));
    assert_eq!(app.count("par"), 5);
    r.stop().await;
}
