//! Issue 13, item 6 (E3): `Idempotency-Key` on creates and `If-Match` with the `etag` of
//! jobsd's GET, on Dapr's and jobsd's routes, over HTTP and gRPC. A real sidecar on a manual
//! clock with a real HTTP app; redb for the restart; remote mode through a jobsd replica and
//! against a Dapr Scheduler.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use chrono::TimeDelta;
use common::app::{self, HttpApp};
use common::dapr_scheduler::DaprScheduler;
use common::replica::Rep;
use common::running::Running;
use common::{HttpResponse, eventually, http, sidecar_config, t0};
use jobsd::app::Sidecar;
use jobsd::clock::ManualClock;
use jobsd::config::{self, AppProtocol};
use jobsd::proto::jobsd_api::{self as jv1, jobs_client::JobsClient};
use jobsd::proto::runtime::{self as rv1, dapr_client::DaprClient};
use jobsd::seam::cannot_travel;
use jobsd::store::{self, Store};
use serde_json::Value;
use tonic::transport::Channel;

fn cfg(app: Option<SocketAddr>) -> config::Sidecar {
    sidecar_config(app, AppProtocol::Http, &[])
}

async fn start(app: &HttpApp, store: Arc<dyn Store>, clock: ManualClock) -> Running {
    let addr = app::serve(app.clone()).await;
    Running::start(cfg(Some(addr)), store, clock).await
}

async fn send(
    r: &Running,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> HttpResponse {
    http(r.api, method, path, headers, body.as_bytes()).await
}

fn counters(view: &Value) -> (u64, u64) {
    let c = &view["status"]["counters"];
    (
        c["delivered"].as_u64().unwrap(),
        view["status"]["ticks"].as_u64().unwrap(),
    )
}

fn etag_of(r: &HttpResponse) -> String {
    r.header("etag")
        .unwrap_or_else(|| panic!("no ETag: {} {}", r.status, r.text()))
        .to_owned()
}

fn error_of(r: &HttpResponse, status: u16) -> (String, String) {
    assert_eq!(r.status, status, "{}", r.text());
    let e = r.json();
    (
        e["errorCode"].as_str().unwrap().to_owned(),
        e["message"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn a_repeat_gets_the_first_answer_and_keeps_the_progress() {
    let app = HttpApp::new();
    let r = start(&app, Arc::new(store::Memory::new()), ManualClock::new(t0())).await;
    let key = [("Idempotency-Key", "create-j-1")];
    let body = r#"{"schedule":"@every 10s","overwrite":true,"data":"x"}"#;
    let first = send(&r, "POST", "/jobsd/v1/jobs/j", &key, body).await;
    assert_eq!(first.status, 204, "{}", first.text());
    assert!(first.header("idempotent-replayed").is_none());
    let etag = etag_of(&first);
    r.run_for(TimeDelta::seconds(21)).await;
    let before = r.view("j").await;
    assert_eq!(counters(&before), (2, 2), "{before}");
    assert_eq!(before["etag"], etag.as_str());

    // The client retries (its first answer was lost): same answer, nothing overwritten.
    let again = send(&r, "POST", "/jobsd/v1/jobs/j", &key, body).await;
    assert_eq!(again.status, 204, "{}", again.text());
    assert!(again.body.is_empty());
    assert_eq!(etag_of(&again), etag);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    let after = r.view("j").await;
    assert_eq!(counters(&after), (2, 2), "progress kept: {after}");
    assert_eq!(after["status"], before["status"]);
    assert_eq!(after["etag"], etag.as_str());
    r.run_for(TimeDelta::seconds(10)).await;
    assert_eq!(counters(&r.view("j").await), (3, 3));
    assert_eq!(app.count("j"), 3);

    // The key with another request: refused, naming the header; nothing changes.
    for (path, other) in [
        (
            "/jobsd/v1/jobs/j",
            r#"{"schedule":"@every 5s","overwrite":true}"#,
        ),
        ("/jobsd/v1/jobs/other", body),
    ] {
        let refused = send(&r, "POST", path, &key, other).await;
        let (code, message) = error_of(&refused, 422);
        assert_eq!(code, "ERR_IDEMPOTENCY_KEY_REUSED");
        assert!(
            message.starts_with("Idempotency-Key: \"create-j-1\""),
            "{message}"
        );
    }
    assert_eq!(r.view("j").await["job"]["schedule"], "@every 10s");
    assert_eq!(
        send(&r, "GET", "/jobsd/v1/jobs/other", &[], "")
            .await
            .status,
        404
    );

    // Dapr's route: a create-only job the client itself created is no 409 on a retry.
    let dapr = [("Idempotency-Key", "create-d")];
    let once = r#"{"dueTime":"1h"}"#;
    for replayed in [None, Some("true")] {
        let resp = send(&r, "POST", "/v1.0-alpha1/jobs/d", &dapr, once).await;
        assert_eq!(resp.status, 204, "{}", resp.text());
        assert_eq!(resp.header("idempotent-replayed"), replayed);
    }
    // Without the header, Dapr's answer as ever.
    let plain = send(&r, "POST", "/v1.0-alpha1/jobs/d", &[], once).await;
    assert_eq!(plain.status, 409, "{}", plain.text());
    assert!(plain.header("etag").is_none());

    // A key that is not one.
    let long = "k".repeat(256);
    let bad = send(
        &r,
        "POST",
        "/jobsd/v1/jobs/j",
        &[("Idempotency-Key", &long)],
        body,
    )
    .await;
    let (code, message) = error_of(&bad, 400);
    assert_eq!(code, "ERR_MALFORMED_REQUEST");
    assert!(message.starts_with("Idempotency-Key: "), "{message}");
    r.stop().await;
}

#[tokio::test]
async fn keys_survive_a_restart_and_are_forgotten_after_24_hours() {
    let app = HttpApp::new();
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(t0());
    let redb = |dir: &tempfile::TempDir| -> Arc<dyn Store> {
        Arc::new(store::Redb::open(dir.path()).unwrap())
    };
    let r = start(&app, redb(&dir), clock.clone()).await;
    let key = [("Idempotency-Key", "k")];
    let body = r#"{"dueTime":"72h"}"#;
    let first = send(&r, "POST", "/jobsd/v1/jobs/j", &key, body).await;
    assert_eq!(first.status, 204, "{}", first.text());
    let etag = etag_of(&first);
    r.stop().await;

    // After a restart the create-only retry is still answered as the first was.
    let store = redb(&dir);
    let r = start(&app, Arc::clone(&store), clock.clone()).await;
    let again = send(&r, "POST", "/jobsd/v1/jobs/j", &key, body).await;
    assert_eq!(again.status, 204, "{}", again.text());
    assert_eq!(etag_of(&again), etag);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));

    // 23 h later still; past 24 h the key is forgotten (and swept from the store), and the
    // same request is judged afresh: the job exists, so Dapr's create-only answer.
    clock.advance(TimeDelta::hours(23));
    let resp = send(&r, "POST", "/jobsd/v1/jobs/j", &key, body).await;
    assert_eq!(resp.header("idempotent-replayed"), Some("true"));
    clock.advance(TimeDelta::hours(1) + TimeDelta::seconds(1));
    eventually("the expired key swept", async || {
        store.page_idempotency(None, 10).await.unwrap().is_empty()
    })
    .await;
    let late = send(&r, "POST", "/jobsd/v1/jobs/j", &key, body).await;
    assert_eq!(late.status, 409, "{}", late.text());
    r.stop().await;
}

#[tokio::test]
async fn etags_make_overwrites_and_deletes_conditional() {
    let app = HttpApp::new();
    let r = start(&app, Arc::new(store::Memory::new()), ManualClock::new(t0())).await;
    r.create("j", r#"{"schedule":"@every 10s"}"#).await;
    let got = send(&r, "GET", "/jobsd/v1/jobs/j", &[], "").await;
    let e1 = etag_of(&got);
    assert_eq!(got.json()["etag"], e1.as_str());
    assert!(
        e1.starts_with('"') && e1.ends_with('"') && e1.len() == 18,
        "{e1}"
    );
    // Progress does not change the definition's etag.
    r.run_for(TimeDelta::seconds(11)).await;
    let v = r.view("j").await;
    assert_eq!(
        (v["etag"].as_str().unwrap(), counters(&v)),
        (e1.as_str(), (1, 1))
    );
    // Dapr's GET body is Dapr's.
    let dapr = send(&r, "GET", "/v1.0-alpha1/jobs/j", &[], "").await.json();
    assert!(dapr.get("etag").is_none(), "{dapr}");

    let over = r#"{"schedule":"@every 20s","overwrite":true}"#;
    // A stale etag: 412, nothing written.
    let stale = [("If-Match", "\"0000000000000001\"")];
    for path in ["/jobsd/v1/jobs/j", "/v1.0-alpha1/jobs/j"] {
        let refused = send(&r, "POST", path, &stale, over).await;
        let (code, message) = error_of(&refused, 412);
        assert_eq!(code, "ERR_PRECONDITION_FAILED");
        assert!(message.starts_with("If-Match: "), "{message}");
        assert!(message.contains(&e1), "names the current etag: {message}");
    }
    let v = r.view("j").await;
    assert_eq!(v["job"]["schedule"], "@every 10s");
    assert_eq!(counters(&v), (1, 1));

    // The etag read: written, with a new etag (and progress reset, as every overwrite).
    let ok = send(&r, "POST", "/jobsd/v1/jobs/j", &[("If-Match", &e1)], over).await;
    assert_eq!(ok.status, 204, "{}", ok.text());
    let e2 = etag_of(&ok);
    assert_ne!(e2, e1);
    let v = r.view("j").await;
    assert_eq!(
        (v["etag"].as_str().unwrap(), counters(&v)),
        (e2.as_str(), (0, 0))
    );
    assert_eq!(v["job"]["schedule"], "@every 20s");
    // The old etag is stale now.
    let again = send(&r, "POST", "/jobsd/v1/jobs/j", &[("If-Match", &e1)], over).await;
    assert_eq!(again.status, 412, "{}", again.text());
    // `*`: only a job that exists.
    let star = [("If-Match", "*")];
    let r1 = send(&r, "POST", "/jobsd/v1/jobs/j", &star, over).await;
    assert_eq!(r1.status, 204, "{}", r1.text());
    for m in [&star[..], &[("If-Match", e2.as_str())]] {
        let missing = send(&r, "POST", "/jobsd/v1/jobs/nope", m, over).await;
        let (_, message) = error_of(&missing, 412);
        assert!(message.contains("does not exist"), "{message}");
    }
    assert_eq!(
        send(&r, "GET", "/jobsd/v1/jobs/nope", &[], "").await.status,
        404
    );
    // Not an entity tag.
    let bad = send(&r, "POST", "/jobsd/v1/jobs/j", &[("If-Match", "abc")], over).await;
    let (code, message) = error_of(&bad, 400);
    assert_eq!(code, "ERR_MALFORMED_REQUEST");
    assert!(message.starts_with("If-Match: "), "{message}");

    // Deletes: a stale etag deletes nothing; the current one deletes.
    let now = r.view("j").await["etag"].as_str().unwrap().to_owned();
    let refused = send(&r, "DELETE", "/jobsd/v1/jobs/j", &[("If-Match", &e1)], "").await;
    assert_eq!(refused.status, 412, "{}", refused.text());
    assert_eq!(r.view("j").await["etag"], now.as_str());
    let deleted = send(&r, "DELETE", "/jobsd/v1/jobs/j", &[("If-Match", &now)], "").await;
    assert_eq!(deleted.status, 204, "{}", deleted.text());
    assert_eq!(
        send(&r, "GET", "/jobsd/v1/jobs/j", &[], "").await.status,
        404
    );
    r.stop().await;
}

#[tokio::test]
async fn concurrent_conditional_overwrites_have_one_winner() {
    let app = HttpApp::new();
    let r = start(&app, Arc::new(store::Memory::new()), ManualClock::new(t0())).await;
    r.create("j", r#"{"schedule":"@every 10s"}"#).await;
    let e1 = r.view("j").await["etag"].as_str().unwrap().to_owned();
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let (api, e1) = (r.api, e1.clone());
            tokio::spawn(async move {
                let body = format!(r#"{{"schedule":"@every 10s","overwrite":true,"data":{i}}}"#);
                http(
                    api,
                    "POST",
                    "/jobsd/v1/jobs/j",
                    &[("If-Match", &e1)],
                    body.as_bytes(),
                )
                .await
            })
        })
        .collect();
    let mut winners = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        let resp = task.await.unwrap();
        match resp.status {
            204 => winners.push((i, etag_of(&resp))),
            status => assert_eq!(status, 412, "{}", resp.text()),
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    let v = r.view("j").await;
    assert_eq!(v["etag"], winners[0].1.as_str());
    assert_eq!(v["job"]["data"]["value"], winners[0].0);
    r.stop().await;
}

fn with_metadata<T>(message: T, pairs: &[(&'static str, &str)]) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    for (k, v) in pairs {
        request.metadata_mut().insert(*k, v.parse().unwrap());
    }
    request
}

fn grpc_job(name: &str, schedule: &str) -> rv1::Job {
    rv1::Job {
        name: name.into(),
        schedule: Some(schedule.into()),
        ..Default::default()
    }
}

async fn jobsd_client(addr: SocketAddr) -> JobsClient<Channel> {
    JobsClient::connect(format!("http://{addr}")).await.unwrap()
}

#[tokio::test]
async fn grpc_metadata_carries_the_same_conditions() {
    let app = HttpApp::new();
    let r = start(&app, Arc::new(store::Memory::new()), ManualClock::new(t0())).await;
    let grpc = r.sidecar.grpc_addrs[0];
    let mut c = jobsd_client(grpc).await;
    let create = jv1::ScheduleJobRequest {
        job: Some(grpc_job("g", "@every 10s")),
        overwrite: true,
        ..Default::default()
    };
    let key = [("idempotency-key", "g-1")];
    let first = c
        .schedule_job(with_metadata(create.clone(), &key))
        .await
        .unwrap();
    assert!(first.metadata().get("idempotent-replayed").is_none());
    let etag = first.into_inner().etag;
    assert_eq!(etag.len(), 18, "{etag}");
    r.run_for(TimeDelta::seconds(21)).await;
    let status = |v: jv1::GetJobResponse| {
        let job = v.job.unwrap();
        let s = job.status.unwrap();
        (job.etag, s.counters.unwrap().delivered, s.ticks)
    };
    let get = || jv1::GetJobRequest { name: "g".into() };
    assert_eq!(
        status(c.get_job(get()).await.unwrap().into_inner()),
        (etag.clone(), 2, 2)
    );
    // The retry: the first answer, progress kept.
    let again = c
        .schedule_job(with_metadata(create.clone(), &key))
        .await
        .unwrap();
    assert_eq!(again.metadata().get("idempotent-replayed").unwrap(), "true");
    assert_eq!(again.metadata().get("etag").unwrap(), etag.as_str());
    assert_eq!(again.into_inner().etag, etag);
    assert_eq!(
        status(c.get_job(get()).await.unwrap().into_inner()),
        (etag.clone(), 2, 2)
    );
    // Another request under the key.
    let mut other = create.clone();
    other.labels.insert("team".into(), "a".into());
    let err = c
        .schedule_job(with_metadata(other, &key))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().starts_with("Idempotency-Key: "), "{err:?}");
    // A stale if-match on create and delete: FailedPrecondition, nothing changes.
    let stale = [("if-match", "\"0000000000000001\"")];
    let err = c
        .schedule_job(with_metadata(create.clone(), &stale))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    let err = c
        .delete_job(with_metadata(
            jv1::DeleteJobRequest { name: "g".into() },
            &stale,
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err:?}");
    assert_eq!(
        status(c.get_job(get()).await.unwrap().into_inner()),
        (etag.clone(), 2, 2)
    );
    // The current one: written, a new etag.
    let written = c
        .schedule_job(with_metadata(create.clone(), &[("if-match", &etag)]))
        .await
        .unwrap()
        .into_inner();
    assert_ne!(written.etag, etag);
    // Without metadata, the answer is as before: no etag.
    let plain = c.schedule_job(create).await.unwrap();
    assert!(plain.metadata().get("etag").is_none());
    assert_eq!(plain.into_inner().etag, "");

    // Dapr's service takes the metadata too: a create-only retry is no AlreadyExists.
    let mut dapr = DaprClient::connect(format!("http://{grpc}")).await.unwrap();
    let once = rv1::ScheduleJobRequest {
        job: Some(grpc_job("d", "@daily")),
        overwrite: false,
    };
    let key = [("idempotency-key", "d-1")];
    dapr.schedule_job_alpha1(with_metadata(once.clone(), &key))
        .await
        .unwrap();
    let again = dapr
        .schedule_job(with_metadata(once.clone(), &key))
        .await
        .unwrap();
    assert_eq!(again.metadata().get("idempotent-replayed").unwrap(), "true");
    let err = dapr.schedule_job(once).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::AlreadyExists, "{err:?}");
    r.stop().await;
}

/// A sidecar in remote mode in front of `hosts`, without an app.
async fn remote_sidecar(hosts: &[String]) -> Sidecar {
    let sidecar = Sidecar::start(sidecar_config(None, AppProtocol::Http, hosts))
        .await
        .unwrap();
    let api = sidecar.http_addrs[0];
    eventually("hosts known", async || {
        http(api, "GET", "/v1.0/healthz", &[], b"").await.status == 204
    })
    .await;
    sidecar
}

async fn stop_sidecar(sidecar: Sidecar) {
    sidecar.shutdown_token().cancel();
    sidecar.wait().await.unwrap();
}

#[tokio::test]
async fn remote_mode_checks_them_on_jobsd_replicas_and_refuses_them_on_a_dapr_scheduler() {
    let rep = Rep::start().await;
    let side = remote_sidecar(&[rep.address()]).await;
    let api = side.http_addrs[0];
    let post = async |path: &str, headers: &[(&str, &str)], body: &str| {
        http(api, "POST", path, headers, body.as_bytes()).await
    };
    let key = [("Idempotency-Key", "r-1")];
    let body = r#"{"dueTime":"1h"}"#;
    let first = post("/jobsd/v1/jobs/j", &key, body).await;
    assert_eq!(first.status, 204, "{}", first.text());
    let etag = etag_of(&first);
    let again = post("/v1.0-alpha1/jobs/j", &key, body).await;
    assert_eq!(again.status, 204, "{}", again.text());
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    let view = http(api, "GET", "/jobsd/v1/jobs/j", &[], b"").await;
    assert_eq!(etag_of(&view), etag);
    let reused = post("/jobsd/v1/jobs/k", &key, body).await;
    assert_eq!(reused.status, 422, "{}", reused.text());
    let over = r#"{"dueTime":"2h","overwrite":true}"#;
    let stale = post(
        "/jobsd/v1/jobs/j",
        &[("If-Match", "\"0000000000000001\"")],
        over,
    )
    .await;
    assert_eq!(stale.status, 412, "{}", stale.text());
    let ok = post("/jobsd/v1/jobs/j", &[("If-Match", &etag)], over).await;
    assert_eq!(ok.status, 204, "{}", ok.text());
    assert_ne!(etag_of(&ok), etag);
    let del = http(
        api,
        "DELETE",
        "/jobsd/v1/jobs/j",
        &[("If-Match", &etag)],
        b"",
    )
    .await;
    assert_eq!(del.status, 412, "{}", del.text());
    stop_sidecar(side).await;
    rep.stop().await;

    // A Dapr Scheduler cannot check them: refused naming the header, nothing stored.
    let dapr = DaprScheduler::start().await;
    let side = remote_sidecar(std::slice::from_ref(&dapr.address)).await;
    let api = side.http_addrs[0];
    for (path, header, value) in [
        ("/v1.0-alpha1/jobs/j", "Idempotency-Key", "k"),
        ("/jobsd/v1/jobs/j", "Idempotency-Key", "k"),
        ("/v1.0/jobs/j", "If-Match", "*"),
    ] {
        let r = http(
            api,
            "POST",
            path,
            &[(header, value)],
            b"{\"dueTime\":\"1h\"}",
        )
        .await;
        let (code, message) = error_of(&r, 400);
        assert_eq!(code, "ERR_MALFORMED_REQUEST");
        assert_eq!(message, cannot_travel(header));
        assert!(!dapr.exists("j").await, "{path} {header}: nothing stored");
    }
    let r = http(api, "DELETE", "/jobsd/v1/jobs/j", &[("If-Match", "*")], b"").await;
    assert_eq!(error_of(&r, 400).1, cannot_travel("If-Match"));
    let mut c = DaprClient::connect(format!("http://{}", side.grpc_addrs[0]))
        .await
        .unwrap();
    let err = c
        .schedule_job(with_metadata(
            rv1::ScheduleJobRequest {
                job: Some(grpc_job("j", "@daily")),
                overwrite: false,
            },
            &[("idempotency-key", "k")],
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert_eq!(err.message(), cannot_travel("Idempotency-Key"));
    assert!(!dapr.exists("j").await);
    // Without the headers, creates go on as daprd's.
    let r = http(api, "POST", "/v1.0/jobs/j", &[], b"{\"dueTime\":\"1h\"}").await;
    assert_eq!(r.status, 204, "{}", r.text());
    stop_sidecar(side).await;
    dapr.stop().await;
}
