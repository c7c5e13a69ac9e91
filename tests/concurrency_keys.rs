//! Issue 38: concurrency limits by key for app jobs on jobsd's route. A job names
//! `policy.concurrencyKey`; rules per key or key prefix (`PUT /jobsd/v1/concurrency/{key}`)
//! bound how many of the key's executions the app has at once; the rest wait in due order,
//! and their status says why; other keys go on. Embedded on a manual clock with a real HTTP
//! app that holds its answers, then through a `jobsd scheduler` replica.

mod common;

use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use common::app::{self, HttpApp};
use common::replica::Rep;
use common::running::Running;
use common::{eventually, http, sidecar_config, t0};
use jobsd::app::Sidecar;
use jobsd::clock::ManualClock;
use jobsd::config::AppProtocol;
use jobsd::store;
use serde_json::{Value, json};

fn keyed(key: &str) -> String {
    json!({"dueTime": "1s", "data": "x", "policy": {"concurrencyKey": key}}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_is_held_to_its_limit_and_other_keys_go_on() {
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let r = Running::start(
        sidecar_config(Some(addr), AppProtocol::Http, &[]),
        Arc::new(store::Memory::new()),
        ManualClock::new(t0()),
    )
    .await;
    // Rules: one key, and a prefix (each key under it on its own).
    let (status, rule) = r
        .call("PUT", "/jobsd/v1/concurrency/a", r#"{"limit":2}"#)
        .await;
    assert_eq!((status, rule), (200, json!({"key": "a", "limit": 2})));
    assert_eq!(
        r.call("PUT", "/jobsd/v1/concurrency/t*", r#"{"limit":1}"#)
            .await
            .0,
        200
    );
    // Bad rules and jobs are refused, naming the field.
    let (status, err) = r
        .call("PUT", "/jobsd/v1/concurrency/a", r#"{"limit":0}"#)
        .await;
    assert_eq!(status, 400, "{err}");
    assert!(
        err["message"].as_str().unwrap().starts_with("limit:"),
        "{err}"
    );
    assert_eq!(
        r.call("PUT", "/jobsd/v1/concurrency/a", r#"{"limit":1,"x":1}"#)
            .await
            .0,
        400
    );
    let body = json!({"schedule": "@every 1s", "policy": {"concurrencyKey": "a", "overlap": "allow", "maxConcurrent": 2}});
    let (status, err) = r
        .call("POST", "/jobsd/v1/jobs/bad", &body.to_string())
        .await;
    assert_eq!(status, 400, "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .starts_with("policy.concurrencyKey:"),
        "{err}"
    );

    let names: Vec<String> = (0..5)
        .map(|i| format!("a-{i}"))
        .chain((0..2).map(|i| format!("tx-{i}")))
        .collect();
    let holds: Vec<_> = names.iter().map(|n| app.hold(n)).collect();
    for n in &names {
        r.create(n, &keyed(n.split('-').next().unwrap())).await;
    }
    r.create("free", &json!({"dueTime": "1s"}).to_string())
        .await;
    // The app holds its answers, so the loop never settles: the clock is only set.
    r.clock.set(t0() + TimeDelta::seconds(2));
    let started = |prefix: &str| {
        names
            .iter()
            .filter(|n| n.starts_with(prefix))
            .map(|n| app.started(n))
            .sum::<usize>()
    };
    eventually("2 of a, 1 of tx and the free job at the app", async || {
        started("a-") == 2 && started("tx-") == 1 && app.count("free") == 1
    })
    .await;
    let (status, view) = r.call("GET", "/jobsd/v1/concurrency", "").await;
    assert_eq!(status, 200);
    assert_eq!(
        view["rules"],
        json!([{"key": "a", "limit": 2}, {"key": "t*", "limit": 1}])
    );
    assert_eq!(
        view["keys"],
        json!([
            {"key": "a", "rule": "a", "limit": 2, "inFlight": 2, "waiting": 3},
            {"key": "tx", "rule": "t*", "limit": 1, "inFlight": 1, "waiting": 1},
        ])
    );
    let (_, one) = r.call("GET", "/jobsd/v1/concurrency/ty", "").await;
    assert_eq!(
        one,
        json!({"key": "ty", "rule": "t*", "limit": 1, "inFlight": 0, "waiting": 0})
    );
    // A waiting job says why.
    let waiting = names
        .iter()
        .find(|n| n.starts_with("a-") && app.started(n) == 0)
        .unwrap();
    let status = &r.view(waiting).await["status"];
    assert!(
        status["waiting"]
            .as_str()
            .unwrap()
            .contains("\"a\" is at its limit: 2 in flight"),
        "{status}"
    );
    assert_eq!(status["inFlight"], false);

    // One answer frees one slot: exactly one more of `a` goes, in due order.
    let first = names
        .iter()
        .position(|n| n.starts_with("a-") && app.started(n) == 1)
        .unwrap();
    holds[first].add_permits(1);
    eventually("a third of a", async || started("a-") == 3).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(started("a-"), 3, "no more than the one freed slot");
    // Everything answers: every job is delivered once.
    for h in &holds {
        h.add_permits(10);
    }
    eventually("each delivered", async || {
        names.iter().all(|n| app.count(n) == 1)
    })
    .await;
    r.run_for(TimeDelta::zero()).await;
    assert!(
        names.iter().all(|n| app.count(n) == 1),
        "each delivered once"
    );
    assert_eq!(r.call("DELETE", "/jobsd/v1/concurrency/a", "").await.0, 204);
    let (status, err) = r.call("DELETE", "/jobsd/v1/concurrency/a", "").await;
    assert_eq!(
        (status, err["errorCode"].clone()),
        (404, json!("ERR_CONCURRENCY_RULE_NOT_FOUND"))
    );
    r.stop().await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_replica_rules_are_kept_and_enforced() {
    let rep = Rep::start().await;
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let side = Sidecar::start(sidecar_config(
        Some(addr),
        AppProtocol::Http,
        &[rep.address()],
    ))
    .await
    .unwrap();
    eventually("3 job streams", async || {
        side.remote().unwrap().job_streams() == 3
    })
    .await;
    assert_eq!(
        call(&side, "PUT", "/jobsd/v1/concurrency/k", r#"{"limit":1}"#)
            .await
            .0,
        200
    );
    let holds: Vec<_> = (0..3).map(|i| app.hold(&format!("k-{i}"))).collect();
    for i in 0..3 {
        let (status, err) =
            call(&side, "POST", &format!("/jobsd/v1/jobs/k-{i}"), &keyed("k")).await;
        assert_eq!(status, 204, "{err}");
    }
    // The replica runs on a manual clock: set past the due time (not run: answers are held).
    rep.clock.set(t0() + TimeDelta::seconds(2));
    let started = || {
        (0..3)
            .map(|i| app.started(&format!("k-{i}")))
            .sum::<usize>()
    };
    eventually("one of k at the app", async || started() == 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(started(), 1, "the replica holds k to 1");
    let (_, view) = call(&side, "GET", "/jobsd/v1/concurrency", "").await;
    assert_eq!(
        view["keys"],
        json!([{"key": "k", "rule": "k", "limit": 1, "inFlight": 1, "waiting": 2}])
    );
    for h in &holds {
        h.add_permits(10);
    }
    eventually("all three delivered", async || {
        (0..3).all(|i| app.count(&format!("k-{i}")) == 1)
    })
    .await;
    side.shutdown_token().cancel();
    side.wait().await.unwrap();
    rep.stop().await;
}
