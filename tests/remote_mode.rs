//! Remote mode end to end: a sidecar started with `--scheduler-host-address` in front of an
//! in-process `jobsd scheduler` replica (memory store, manual clock) and a real HTTP app.
//! Jobs go through the sidecar's HTTP and gRPC APIs to the replica; triggers come back on the
//! sidecar's WatchJobs streams, reach the app and are acknowledged.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use common::app::{self, HttpApp};
use common::dapr_scheduler::DaprScheduler;
use common::replica::Rep;
use common::running::Running;
use common::{
    any_port, app_metadata, due_now, eventually, fast_health_check, http, sidecar_config,
    started_after_t0, t0,
};
use jobsd::app::Sidecar;
use jobsd::clock::ManualClock;
use jobsd::config::{self, AppProtocol};
use jobsd::proto::dapr_scheduler as sv1;
use jobsd::proto::jobsd_api as jv1;
use jobsd::proto::runtime::{self as rv1, dapr_client::DaprClient};
use jobsd::seam::cannot_travel;
use jobsd::store;
use serde_json::json;
use tonic::transport::Channel;

/// A sidecar of `myapp` in remote mode, in front of the replicas at `hosts` and the app at `app`.
fn sidecar_cfg(hosts: &[String], app: Option<SocketAddr>) -> config::Sidecar {
    sidecar_config(app, AppProtocol::Http, hosts)
}

struct Side {
    sidecar: Sidecar,
    http: SocketAddr,
}

impl Side {
    async fn start(cfg: config::Sidecar) -> Side {
        let sidecar = Sidecar::start(cfg).await.unwrap();
        let http = sidecar.http_addrs[0];
        Side { sidecar, http }
    }

    /// Starts in front of `rep` and waits until its streams are open.
    async fn connected(rep: &Rep, app: SocketAddr) -> Side {
        let side = Side::start(sidecar_cfg(&[rep.address()], Some(app))).await;
        side.wait_streams(3).await;
        side
    }

    fn streams(&self) -> usize {
        self.sidecar.remote().unwrap().job_streams()
    }

    async fn wait_streams(&self, n: usize) {
        eventually(&format!("{n} job streams"), async || self.streams() == n).await;
    }

    async fn send(&self, method: &str, path: &str, body: &str) -> common::HttpResponse {
        http(self.http, method, path, &[], body.as_bytes()).await
    }

    async fn post(&self, name: &str, body: &str) {
        let r = self.send("POST", &format!("/v1.0/jobs/{name}"), body).await;
        assert_eq!(r.status, 204, "{}", r.text());
    }

    async fn grpc(&self) -> DaprClient<Channel> {
        DaprClient::connect(format!("http://{}", self.sidecar.grpc_addrs[0]))
            .await
            .unwrap()
    }

    async fn stop(self) {
        self.sidecar.shutdown_token().cancel();
        tokio::time::timeout(Duration::from_secs(15), self.sidecar.wait())
            .await
            .expect("sidecar stops in bounded time")
            .unwrap();
    }
}

// ---- tests -------------------------------------------------------------------------------

#[tokio::test]
async fn http_and_grpc_calls_land_in_the_replica() {
    let rep = Rep::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = sidecar_cfg(&[rep.address()], None);
    cfg.data_dir = dir.path().join("data");
    let side = Side::start(cfg).await;
    assert!(
        !dir.path().join("data").exists(),
        "remote mode opens no store"
    );

    // HTTP: schedule, get, list.
    side.post(
        "http-job",
        r#"{"schedule":"@every 1h","data":{"k":"v"},"ttl":"48h"}"#,
    )
    .await;
    assert!(rep.exists("http-job").await);
    let stored = rep
        .replica
        .engine()
        .get_job(sv1::GetJobRequest {
            name: "http-job".into(),
            metadata: Some(app_metadata("myapp")),
        })
        .await
        .unwrap();
    assert_eq!(stored.schedule.as_deref(), Some("@every 1h"));
    assert_eq!(stored.ttl.as_deref(), Some("48h"));
    let got = side.send("GET", "/v1.0/jobs/http-job", "").await;
    assert_eq!(got.status, 200, "{}", got.text());
    let got = got.json();
    assert_eq!(got["name"], "http-job");
    assert_eq!(got["schedule"], "@every 1h");
    assert_eq!(
        got["data"],
        serde_json::json!({"@type": "type.googleapis.com/google.protobuf.Value", "value": {"k": "v"}})
    );
    assert_eq!(
        got["failurePolicy"],
        serde_json::json!({"constant": {"interval": "1s", "maxRetries": 3}})
    );

    // gRPC: schedule, get, list, delete, delete by prefix.
    let mut c = side.grpc().await;
    for name in ["grpc-a", "grpc-b", "other"] {
        c.schedule_job(rv1::ScheduleJobRequest {
            job: Some(rv1::Job {
                name: name.into(),
                due_time: Some("2030-01-01T00:00:00Z".into()),
                ..Default::default()
            }),
            overwrite: false,
        })
        .await
        .unwrap();
        assert!(rep.exists(name).await, "{name} is on the replica");
    }
    let job = c
        .get_job(rv1::GetJobRequest {
            name: "grpc-a".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .job
        .unwrap();
    assert_eq!(job.due_time.as_deref(), Some("2030-01-01T00:00:00Z"));
    let mut names: Vec<String> = c
        .list_jobs(rv1::ListJobsRequest {})
        .await
        .unwrap()
        .into_inner()
        .jobs
        .into_iter()
        .map(|j| j.name)
        .collect();
    names.sort();
    assert_eq!(names, ["grpc-a", "grpc-b", "http-job", "other"]);
    c.delete_job(rv1::DeleteJobRequest {
        name: "other".into(),
    })
    .await
    .unwrap();
    assert!(!rep.exists("other").await);
    c.delete_jobs_by_prefix(rv1::DeleteJobsByPrefixRequest {
        name_prefix: Some("grpc-".into()),
    })
    .await
    .unwrap();
    assert!(!rep.exists("grpc-a").await && !rep.exists("grpc-b").await);

    // HTTP delete; deleting a missing job is fine too.
    let del = side.send("DELETE", "/v1.0/jobs/http-job", "").await;
    assert_eq!(del.status, 204, "{}", del.text());
    assert!(!rep.exists("http-job").await);
    let del = side.send("DELETE", "/v1.0/jobs/never-was", "").await;
    assert_eq!(del.status, 204, "{}", del.text());

    side.stop().await;
    rep.stop().await;
}

#[tokio::test]
async fn replica_errors_map_like_daprd() {
    let rep = Rep::start().await;
    let side = Side::start(sidecar_cfg(&[rep.address()], None)).await;

    side.post("dup", r#"{"schedule":"@daily"}"#).await;
    let again = side
        .send("POST", "/v1.0/jobs/dup", r#"{"schedule":"@daily"}"#)
        .await;
    assert_eq!(again.status, 409, "{}", again.text());
    let body = again.json();
    assert_eq!(body["errorCode"], "DAPR_SCHEDULER_SCHEDULE_JOB");
    assert_eq!(
        body["message"],
        "failed to schedule job due to: rpc error: code = AlreadyExists desc = job already exists: 'app||default||myapp||dup'"
    );

    let missing = side.send("GET", "/v1.0/jobs/nope", "").await;
    assert_eq!(missing.status, 500, "{}", missing.text());
    let body = missing.json();
    assert_eq!(body["errorCode"], "DAPR_SCHEDULER_GET_JOB");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "failed to get job due to: rpc error: code = NotFound desc = job not found: "
        ),
        "{message}"
    );

    // The replica's validation errors come back as Unknown, which daprd turns into 500.
    let invalid = side
        .send("POST", "/v1.0/jobs/bad", r#"{"schedule":"not a schedule"}"#)
        .await;
    assert_eq!(invalid.status, 500, "{}", invalid.text());
    assert_eq!(invalid.json()["errorCode"], "DAPR_SCHEDULER_SCHEDULE_JOB");

    // gRPC: AlreadyExists keeps its code.
    let mut c = side.grpc().await;
    let status = c
        .schedule_job(rv1::ScheduleJobRequest {
            job: Some(rv1::Job {
                name: "dup".into(),
                schedule: Some("@daily".into()),
                ..Default::default()
            }),
            overwrite: false,
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::AlreadyExists, "{status:?}");

    side.stop().await;
    rep.stop().await;
}

#[tokio::test]
async fn healthz_waits_for_the_replicas_and_metadata_lists_them() {
    // A port with nobody behind it yet.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let side = Side::start(sidecar_cfg(&[port.to_string()], None)).await;

    let health = side.send("GET", "/v1.0/healthz", "").await;
    assert_eq!(health.status, 500, "{}", health.text());
    assert_eq!(
        health.json(),
        serde_json::json!({"errorCode": "ERR_HEALTH_NOT_READY", "message": "dapr is not ready"})
    );
    assert_eq!(
        side.send("GET", "/v1.0/healthz/outbound", "").await.status,
        204
    );
    let meta = side.send("GET", "/v1.0/metadata", "").await.json();
    assert_eq!(meta["extended"]["schedulerMode"], "remote");
    assert_eq!(
        meta["scheduler"]["connected_addresses"],
        serde_json::json!([])
    );

    // The replica comes up on that port: WatchHosts reconnects and names it.
    let rep = Rep::start_on(port, Arc::new(store::Memory::new()), ManualClock::new(t0())).await;
    eventually("healthz ready", async || {
        side.send("GET", "/v1.0/healthz", "").await.status == 204
    })
    .await;
    let meta = side.send("GET", "/v1.0/metadata", "").await.json();
    assert_eq!(
        meta["scheduler"]["connected_addresses"],
        serde_json::json!([rep.address()])
    );

    side.stop().await;
    rep.stop().await;
}

#[tokio::test]
async fn a_due_job_reaches_the_app_and_its_ack_finishes_it() {
    let rep = Rep::start().await;
    let app = HttpApp::new();
    let side = Side::connected(&rep, app::serve(app.clone()).await).await;

    side.post("once", r#"{"dueTime":"1s","data":"someData"}"#)
        .await;
    side.post("obj", r#"{"dueTime":"1s","data":{"expression":"val"}}"#)
        .await;
    side.post("every", r#"{"schedule":"@every 1s","repeats":3}"#)
        .await;
    rep.run_for(TimeDelta::seconds(10)).await;

    assert_eq!(app.bodies("once"), [r#""someData""#]);
    assert_eq!(app.bodies("obj"), [r#"{"expression":"val"}"#]);
    assert_eq!(app.count("every"), 3);
    // SUCCESS acks finished the jobs on the replica.
    for name in ["once", "obj", "every"] {
        assert!(!rep.exists(name).await, "{name} should be done");
    }

    side.stop().await;
    rep.stop().await;
}

#[tokio::test]
async fn a_failing_app_fails_the_ack_and_the_replicas_failure_policy_applies() {
    let rep = Rep::start().await;
    let app = HttpApp::new();
    app.status.lock().unwrap().insert("broken".into(), 500);
    app.status.lock().unwrap().insert("gone".into(), 404);
    let side = Side::connected(&rep, app::serve(app.clone()).await).await;

    side.post("broken", r#"{"dueTime":"1s"}"#).await;
    side.post("gone", r#"{"dueTime":"1s"}"#).await;
    rep.run_for(TimeDelta::seconds(30)).await;

    // Default policy: constant 1 s × 3 retries = 4 deliveries, then the job is dropped.
    assert_eq!(app.count("broken"), 4);
    assert!(!rep.exists("broken").await);
    // 404 is SUCCESS, as in daprd: delivered once.
    assert_eq!(app.count("gone"), 1);
    assert!(!rep.exists("gone").await);

    side.stop().await;
    rep.stop().await;
}

#[tokio::test]
async fn async_completion_is_refused_in_remote_mode() {
    let rep = Rep::start().await;
    let app = HttpApp::new();
    app.status.lock().unwrap().insert("plain202".into(), 202);
    let side = Side::connected(&rep, app::serve(app.clone()).await).await;

    // An explicit async answer cannot be held across the WatchJobs protocol: the attempt
    // fails and the failure policy runs its course (1 s × 3 retries = 4 deliveries).
    side.post("async-r", r#"{"dueTime":"1s"}"#).await;
    // A plain 202 is Dapr's success.
    side.post("plain202", r#"{"dueTime":"1s"}"#).await;
    rep.run_for(TimeDelta::seconds(30)).await;
    assert_eq!(app.count("async-r"), 4);
    assert!(!rep.exists("async-r").await);
    assert_eq!(app.count("plain202"), 1);
    assert!(!rep.exists("plain202").await);

    // The execution routes and policy.lease say why.
    let r = side
        .send(
            "POST",
            "/jobsd/v1/executions/6f1c1b7e-0000-5000-8000-000000000000/complete",
            "",
        )
        .await;
    assert_eq!(r.status, 412, "{}", r.text());
    assert!(
        r.text().contains("--scheduler-host-address"),
        "{}",
        r.text()
    );
    let r = side
        .send(
            "POST",
            "/jobsd/v1/jobs/leased",
            r#"{"dueTime":"1h","policy":{"lease":"1m"}}"#,
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(
        r.text().contains("policy.lease: async completion needs"),
        "{}",
        r.text()
    );

    side.stop().await;
    rep.stop().await;
}

#[tokio::test]
async fn two_sidecars_of_one_app_share_its_triggers() {
    let rep = Rep::start().await;
    let app_a = HttpApp::new();
    let app_b = HttpApp::new();
    let a = Side::connected(&rep, app::serve(app_a.clone()).await).await;
    let b = Side::connected(&rep, app::serve(app_b.clone()).await).await;

    a.post("tick", r#"{"schedule":"@every 1s","repeats":30}"#)
        .await;
    rep.run_for(TimeDelta::seconds(40)).await;

    let (na, nb) = (app_a.count("tick"), app_b.count("tick"));
    assert_eq!(na + nb, 30, "every trigger delivered once: {na} + {nb}");
    assert!(na > 0 && nb > 0, "both sidecars receive: {na} / {nb}");

    a.stop().await;
    b.stop().await;
    rep.stop().await;
}

#[tokio::test]
async fn a_restarted_sidecar_reconnects_and_delivery_goes_on() {
    let rep = Rep::start().await;
    let app = HttpApp::new();
    let app_addr = app::serve(app.clone()).await;
    let side = Side::connected(&rep, app_addr).await;
    side.post("tick", r#"{"schedule":"@every 1s","repeats":10}"#)
        .await;
    rep.run_for(TimeDelta::seconds(3)).await;
    assert_eq!(app.count("tick"), 3);
    side.stop().await;

    // No sidecar: the due triggers are staged, not spent.
    rep.run_for(TimeDelta::seconds(2)).await;
    assert_eq!(rep.staged().await, 1);
    assert_eq!(app.count("tick"), 3);

    let side = Side::connected(&rep, app_addr).await;
    // The staged tick (4 s) and the one missed meanwhile (5 s) are replayed, as in Dapr.
    eventually("the missed ticks", async || app.count("tick") == 5).await;
    rep.run_for(TimeDelta::seconds(20)).await;
    assert_eq!(app.count("tick"), 10);
    assert!(!rep.exists("tick").await);

    side.stop().await;
    rep.stop().await;
}

#[tokio::test]
async fn streams_and_discovery_reconnect_after_a_replica_restart() {
    let dir = tempfile::tempdir().unwrap();
    let rep = Rep::on_redb(any_port(), dir.path(), ManualClock::new(t0())).await;
    let listen = rep.replica.addr;
    let app = HttpApp::new();
    let side = Side::connected(&rep, app::serve(app.clone()).await).await;
    side.post("tick", r#"{"schedule":"@every 1s","repeats":6}"#)
        .await;
    rep.run_for(TimeDelta::seconds(2)).await;
    assert_eq!(app.count("tick"), 2);

    let clock = rep.stop().await;
    side.wait_streams(0).await;
    // A call while the replica is down waits for it (gRPC wait-for-ready) instead of failing.
    let addr = side.http;
    let waiting = tokio::spawn(async move {
        http(
            addr,
            "POST",
            "/v1.0/jobs/while-down",
            &[],
            br#"{"dueTime":"1s"}"#,
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished());
    let rep = Rep::on_redb(listen, dir.path(), clock).await;
    let answer = waiting.await.unwrap();
    assert_eq!(answer.status, 204, "{}", answer.text());
    side.wait_streams(3).await;
    rep.run_for(TimeDelta::seconds(10)).await;
    assert_eq!(app.count("tick"), 6);
    assert_eq!(app.count("while-down"), 1);

    side.stop().await;
    rep.stop().await;
}

#[tokio::test]
async fn without_an_app_port_no_streams_are_held_and_jobs_stay_staged() {
    let rep = Rep::start().await;
    let idle = Side::start(sidecar_cfg(&[rep.address()], None)).await;
    eventually("hosts known", async || {
        idle.send("GET", "/v1.0/healthz", "").await.status == 204
    })
    .await;
    idle.post("waiting", r#"{"dueTime":"1s"}"#).await;
    rep.run_for(TimeDelta::seconds(10)).await;
    assert_eq!(idle.streams(), 0);
    assert_eq!(
        rep.staged().await,
        1,
        "staged, its failure policy untouched"
    );

    let app = HttpApp::new();
    let side = Side::connected(&rep, app::serve(app.clone()).await).await;
    eventually("the staged trigger", async || app.count("waiting") == 1).await;
    rep.settle().await;
    assert!(!rep.exists("waiting").await);

    idle.stop().await;
    side.stop().await;
    rep.stop().await;
}

#[tokio::test]
async fn an_unhealthy_app_closes_the_streams_until_it_recovers() {
    let rep = Rep::start().await;
    let app = HttpApp::new();
    *app.healthy.lock().unwrap() = false;
    let mut cfg = sidecar_cfg(&[rep.address()], Some(app::serve(app.clone()).await));
    cfg.health_check = Some(fast_health_check());
    let side = Side::start(cfg).await;
    eventually("hosts known", async || {
        side.send("GET", "/v1.0/healthz", "").await.status == 204
    })
    .await;
    side.post("held", r#"{"dueTime":"0s"}"#).await;
    rep.run_for(TimeDelta::seconds(5)).await;
    assert_eq!(side.streams(), 0);
    assert_eq!(rep.staged().await, 1);
    assert_eq!(app.count("held"), 0);

    *app.healthy.lock().unwrap() = true;
    side.wait_streams(3).await;
    eventually("the held trigger", async || app.count("held") == 1).await;

    *app.healthy.lock().unwrap() = false;
    side.wait_streams(0).await;

    side.stop().await;
    rep.stop().await;
}

#[tokio::test]
async fn host_list_changes_move_the_streams() {
    let one = Rep::start().await;
    let two = Rep::start().await;
    let app = HttpApp::new();
    let side = Side::connected(&one, app::serve(app.clone()).await).await;

    // Replica one announces both: streams open to two as well, and its jobs arrive.
    one.replica.set_hosts(vec![one.address(), two.address()]);
    side.wait_streams(6).await;
    let meta = side.send("GET", "/v1.0/metadata", "").await.json();
    let mut expected = vec![one.address(), two.address()];
    expected.sort();
    assert_eq!(
        meta["scheduler"]["connected_addresses"],
        serde_json::json!(expected)
    );
    two.schedule("on-two", due_now()).await;
    two.run_for(TimeDelta::seconds(1)).await;
    assert_eq!(app.count("on-two"), 1);

    // Then only two: the streams to one close, and its triggers stay there, staged.
    one.replica.set_hosts(vec![two.address()]);
    side.wait_streams(3).await;
    side.post("on-two-again", r#"{"dueTime":"0s"}"#).await;
    assert!(two.exists("on-two-again").await, "calls go to the new set");
    two.run_for(TimeDelta::seconds(1)).await;
    assert_eq!(app.count("on-two-again"), 1);
    one.schedule("on-one", due_now()).await;
    one.run_for(TimeDelta::seconds(1)).await;
    assert_eq!(one.staged().await, 1);
    assert_eq!(app.count("on-one"), 0);

    side.stop().await;
    one.stop().await;
    two.stop().await;
}

#[tokio::test]
async fn shutdown_acknowledges_the_deliveries_in_flight() {
    let rep = Rep::start().await;
    let app = HttpApp::new();
    app.delay
        .lock()
        .unwrap()
        .insert("slow".into(), Duration::from_millis(500));
    let side = Side::connected(&rep, app::serve(app.clone()).await).await;
    side.post("slow", r#"{"dueTime":"1s"}"#).await;
    rep.clock.advance(TimeDelta::seconds(1));
    // Stop while the app is still answering: the delivery finishes and its ack goes out.
    eventually("the call at the app", async || {
        app.started.lock().unwrap().contains(&"slow".to_owned())
    })
    .await;
    side.stop().await;
    assert_eq!(app.count("slow"), 1);
    rep.settle().await;
    assert!(!rep.exists("slow").await, "acked before the streams closed");
    assert_eq!(rep.staged().await, 0);

    rep.stop().await;
}

#[tokio::test]
async fn jobsd_views_come_from_a_jobsd_replica() {
    let rep = Rep::start().await;
    let app = HttpApp::new();
    app.status.lock().unwrap().insert("flaky".into(), 503);
    let side = Side::connected(&rep, app::serve(app.clone()).await).await;

    side.post("ok", r#"{"schedule":"@every 10s","repeats":2}"#)
        .await;
    side.post("flaky", r#"{"dueTime":"1s"}"#).await;
    side.post("later", r#"{"schedule":"@daily"}"#).await;
    rep.run_for(TimeDelta::seconds(30)).await;
    assert_eq!(app.count("ok"), 2);
    assert_eq!(app.count("flaky"), 4);

    let get = async |path: &str| {
        let r = side.send("GET", path, "").await;
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        r.json()
    };
    let ok = get("/jobsd/v1/jobs/ok").await;
    assert_eq!(ok["job"]["name"], "ok");
    assert_eq!(ok["job"]["schedule"], "@every 10s");
    assert_eq!(ok["status"]["state"], "finished", "{ok}");
    assert_eq!(ok["status"]["counters"]["succeeded"], 2);
    assert_eq!(ok["status"]["lastOutcome"], "success");

    let flaky = get("/jobsd/v1/jobs/flaky").await;
    assert_eq!(flaky["status"]["counters"]["failedAttempts"], 4, "{flaky}");
    assert_eq!(flaky["status"]["counters"]["dropped"], 1);
    assert_eq!(flaky["status"]["lastOutcome"], "failed");

    let later = get("/jobsd/v1/jobs/later").await;
    assert_eq!(later["status"]["state"], "active");
    assert_eq!(later["status"]["nextFireTime"], "2026-01-02T00:00:00Z");

    let runs = get("/jobsd/v1/jobs/flaky/runs?limit=3").await;
    let attempts: Vec<_> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(attempts, [4, 3, 2]);
    let older = get(&format!(
        "/jobsd/v1/jobs/flaky/runs?before={}",
        runs["nextBefore"]
    ))
    .await;
    assert_eq!(older["runs"].as_array().unwrap().len(), 1);

    let finished = get("/jobsd/v1/jobs?state=finished").await;
    let names: Vec<_> = finished["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["flaky", "ok"]);

    let missing = side.send("GET", "/jobsd/v1/jobs/nope", "").await;
    assert_eq!(missing.status, 404, "{}", missing.text());
    assert_eq!(missing.json()["errorCode"], "ERR_JOB_NOT_FOUND");

    side.stop().await;
    rep.stop().await;
}

#[tokio::test]
async fn jobsd_settings_travel_to_a_jobsd_replica_and_act_there() {
    use jv1::jobs_client::JobsClient;

    let rep = Rep::start().await;
    let app = HttpApp::new();
    for name in ["exp", "delays"] {
        app.status.lock().unwrap().insert(name.into(), 500);
    }
    let side = Side::connected(&rep, app::serve(app.clone()).await).await;

    // HTTP: labels, a policy and an exponential failure policy.
    let labels = json!({"team": "billing", "tier": "gold"});
    let policy = json!({"catchUp": "all", "whileTargetDown": "stage", "overlap": "serial", "timeout": "30s"});
    let failure = json!({"exponential": {"initialInterval": "2s", "multiplier": 3.0,
                                          "maxInterval": "10s", "maxRetries": 4}});
    let body = json!({"dueTime": "10s", "data": {"k": "v"}, "labels": labels,
                      "policy": policy, "failurePolicy": failure});
    let created = side
        .send("POST", "/jobsd/v1/jobs/exp", &body.to_string())
        .await;
    assert_eq!(created.status, 204, "{}", created.text());

    // gRPC `jobsd.v1.Jobs`: the same settings, a delays failure policy.
    let mut c = JobsClient::connect(format!("http://{}", side.sidecar.grpc_addrs[0]))
        .await
        .unwrap();
    let grpc_policy = jv1::JobPolicy {
        catch_up: "latest".into(),
        timeout: "30s".into(),
        ..Default::default()
    };
    let grpc_failure = jv1::FailurePolicy {
        kind: Some(jv1::failure_policy::Kind::Delays(jv1::DelaysRetry {
            delays: vec!["1s".into(), "5s".into()],
            repeat_last: false,
            max_retries: None,
        })),
        on_exhausted: "drop".into(),
        dead_letter_job: String::new(),
    };
    c.schedule_job(jv1::ScheduleJobRequest {
        job: Some(rv1::Job {
            name: "delays".into(),
            due_time: Some("10s".into()),
            ..Default::default()
        }),
        labels: [("team".to_owned(), "ops".to_owned())].into(),
        policy: Some(grpc_policy.clone()),
        failure_policy: Some(grpc_failure.clone()),
        ..Default::default()
    })
    .await
    .unwrap();

    // Stored on the replica, beside Dapr's job.
    let kept = rep
        .replica
        .engine()
        .job_view(&app_metadata("myapp"), "exp")
        .await
        .unwrap();
    assert_eq!(
        kept.labels.get("tier").map(String::as_str),
        Some("gold"),
        "{kept:?}"
    );
    assert!(kept.policy.is_some() && kept.failure_policy.is_some());

    // jobsd's routes show them, read back from the replica; Dapr's route shows Dapr's job.
    let view = side.send("GET", "/jobsd/v1/jobs/exp", "").await;
    assert_eq!(view.status, 200, "{}", view.text());
    let view = view.json();
    assert_eq!(view["labels"], labels, "{view}");
    assert_eq!(view["policy"], policy, "{view}");
    assert_eq!(view["failurePolicy"], failure, "{view}");
    let dapr = side.send("GET", "/v1.0-alpha1/jobs/exp", "").await;
    assert_eq!(dapr.status, 200, "{}", dapr.text());
    let dapr = dapr.json();
    assert!(
        dapr.get("labels").is_none() && dapr.get("policy").is_none(),
        "{dapr}"
    );
    assert_eq!(dapr["failurePolicy"], json!({"drop": {}}));
    assert_eq!(dapr["dueTime"], "10s");
    let got = c
        .get_job(jv1::GetJobRequest {
            name: "delays".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .job
        .unwrap();
    assert_eq!(got.labels.get("team").map(String::as_str), Some("ops"));
    assert_eq!(got.policy, Some(grpc_policy));
    assert_eq!(got.failure_policy, Some(grpc_failure));

    // The replica acts on them: retries at the times each failure policy gives, then the
    // tick is dropped. Due at 10 s; exponential waits 2, 6, 10 (capped), 10; delays 1, 5.
    rep.run_for(TimeDelta::seconds(60)).await;
    let runs = async |name: &str| {
        let r = side
            .send("GET", &format!("/jobsd/v1/jobs/{name}/runs?limit=100"), "")
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        started_after_t0(&r.json())
    };
    assert_eq!(runs("exp").await, [10, 12, 18, 28, 38]);
    assert_eq!(runs("delays").await, [10, 11, 16]);
    assert_eq!((app.count("exp"), app.count("delays")), (5, 3));
    for name in ["exp", "delays"] {
        let v = side
            .send("GET", &format!("/jobsd/v1/jobs/{name}"), "")
            .await
            .json();
        assert_eq!(v["status"]["state"], "finished", "{name}: {v}");
        assert_eq!(v["status"]["counters"]["dropped"], 1, "{name}: {v}");
    }

    side.stop().await;
    rep.stop().await;
}

#[tokio::test]
async fn bad_jobsd_settings_get_the_embedded_answer_and_nothing_is_stored() {
    use jv1::jobs_client::JobsClient;

    let rep = Rep::start().await;
    let side = Side::start(sidecar_cfg(&[rep.address()], None)).await;
    let embedded = Running::start(
        sidecar_cfg(&[], None),
        Arc::new(store::Memory::new()),
        ManualClock::new(t0()),
    )
    .await;
    for body in [
        r#"{"schedule":"@daily","labels":{"bad key":"v"}}"#,
        r#"{"schedule":"@daily","policy":{"catchUp":"sometimes"}}"#,
        r#"{"schedule":"@daily","policy":{"overlap":"allow","maxConcurrent":2,"whileTargetDown":"latest"}}"#,
        r#"{"schedule":"@daily","failurePolicy":{"exponential":{"multiplier":2}}}"#,
        r#"{"schedule":"@daily","failurePolicy":{"drop":{},"onExhausted":"deadLetter"}}"#,
        // Dapr's own validation, for a job with settings: the replica's engine answers it.
        r#"{"schedule":"not a schedule","labels":{"team":"a"},"policy":{"timeout":"5s"}}"#,
    ] {
        let remote = side.send("POST", "/jobsd/v1/jobs/bad", body).await;
        let (status, want) = embedded.call("POST", "/jobsd/v1/jobs/bad", body).await;
        assert!(status == 400 || status == 500, "{body}: {want}");
        assert_eq!(remote.status, status, "{body}: {}", remote.text());
        assert_eq!(remote.json(), want, "{body}");
        assert!(!rep.exists("bad").await, "{body}: nothing stored");
    }

    // gRPC: the same code and message.
    let bad = jv1::ScheduleJobRequest {
        job: Some(rv1::Job {
            name: "bad".into(),
            schedule: Some("@daily".into()),
            ..Default::default()
        }),
        failure_policy: Some(jv1::FailurePolicy {
            kind: Some(jv1::failure_policy::Kind::Delays(jv1::DelaysRetry {
                delays: vec!["1s".into(), "x".into()],
                ..Default::default()
            })),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut errors = Vec::new();
    for addr in [side.sidecar.grpc_addrs[0], embedded.sidecar.grpc_addrs[0]] {
        let mut c = JobsClient::connect(format!("http://{addr}")).await.unwrap();
        let err = c.schedule_job(bad.clone()).await.unwrap_err();
        errors.push((err.code(), err.message().to_owned()));
    }
    assert_eq!(errors[0], errors[1]);
    assert_eq!(errors[0].0, tonic::Code::InvalidArgument, "{errors:?}");
    assert!(
        errors[0].1.starts_with("failurePolicy.delays.delays[1]:"),
        "{errors:?}"
    );
    assert!(!rep.exists("bad").await);

    side.stop().await;
    embedded.stop().await;
    rep.stop().await;
}

#[tokio::test]
async fn a_dapr_scheduler_refuses_jobsd_settings_naming_them_and_stores_nothing() {
    use jv1::jobs_client::JobsClient;

    let dapr = DaprScheduler::start().await;
    let side = Side::start(sidecar_cfg(std::slice::from_ref(&dapr.address), None)).await;
    eventually("hosts known", async || {
        side.send("GET", "/v1.0/healthz", "").await.status == 204
    })
    .await;

    for (field, body) in [
        ("labels", r#"{"schedule":"@daily","labels":{"team":"a"}}"#),
        (
            "policy",
            r#"{"schedule":"@daily","policy":{"timeout":"5s"}}"#,
        ),
        (
            "failurePolicy",
            r#"{"schedule":"@daily","failurePolicy":{"exponential":{"initialInterval":"1s"}}}"#,
        ),
    ] {
        let r = side.send("POST", "/jobsd/v1/jobs/refused", body).await;
        assert_eq!(r.status, 400, "{field}: {}", r.text());
        let err = r.json();
        assert_eq!(err["errorCode"], "ERR_MALFORMED_REQUEST");
        assert_eq!(err["message"], cannot_travel(field), "{err}");
        assert!(!dapr.exists("refused").await, "{field}: nothing stored");
    }
    let mut c = JobsClient::connect(format!("http://{}", side.sidecar.grpc_addrs[0]))
        .await
        .unwrap();
    let err = c
        .schedule_job(jv1::ScheduleJobRequest {
            job: Some(rv1::Job {
                name: "refused".into(),
                schedule: Some("@daily".into()),
                ..Default::default()
            }),
            labels: [("team".to_owned(), "a".to_owned())].into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert_eq!(err.message(), cannot_travel("labels"));
    assert!(!dapr.exists("refused").await);

    // Without jobsd's settings (an empty policy is Dapr's behaviour) creates go on Dapr's
    // ScheduleJob, as daprd sends it.
    let r = side
        .send(
            "POST",
            "/jobsd/v1/jobs/plain",
            r#"{"schedule":"@daily","policy":{}}"#,
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text());
    side.post("dapr", r#"{"schedule":"@daily"}"#).await;
    assert!(dapr.exists("plain").await && dapr.exists("dapr").await);
    // jobsd's views are not there either, saying so.
    let r = side.send("GET", "/jobsd/v1/jobs/plain", "").await;
    assert_eq!(r.status, 412, "{}", r.text());

    side.stop().await;
    dapr.stop().await;
}

#[tokio::test]
async fn a_batch_through_a_dapr_scheduler_stores_plain_jobs_and_refuses_jobsd_settings() {
    use jv1::jobs_client::JobsClient;

    let dapr = DaprScheduler::start().await;
    let side = Side::start(sidecar_cfg(std::slice::from_ref(&dapr.address), None)).await;
    eventually("hosts known", async || {
        side.send("GET", "/v1.0/healthz", "").await.status == 204
    })
    .await;
    let mut c = JobsClient::connect(format!("http://{}", side.sidecar.grpc_addrs[0]))
        .await
        .unwrap();
    let job = |name: &str, labels: &[(&str, &str)]| jv1::ScheduleJobRequest {
        job: Some(rv1::Job {
            name: name.into(),
            schedule: Some("@daily".into()),
            ..Default::default()
        }),
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..Default::default()
    };
    let results = c
        .schedule_jobs(jv1::ScheduleJobsRequest {
            jobs: vec![
                job("plain-1", &[]),
                job("labelled", &[("team", "a")]),
                job("plain-2", &[]),
            ],
        })
        .await
        .unwrap()
        .into_inner()
        .results;
    let answers: Vec<_> = results
        .iter()
        .map(|r| {
            (
                r.name.as_str(),
                tonic::Code::from(r.code),
                r.message.clone(),
            )
        })
        .collect();
    assert_eq!(
        answers,
        [
            ("plain-1", tonic::Code::Ok, String::new()),
            (
                "labelled",
                tonic::Code::InvalidArgument,
                cannot_travel("labels")
            ),
            ("plain-2", tonic::Code::Ok, String::new()),
        ]
    );
    assert!(dapr.exists("plain-1").await && dapr.exists("plain-2").await);
    assert!(!dapr.exists("labelled").await);
    side.stop().await;
    dapr.stop().await;
}

#[tokio::test]
async fn a_batch_through_a_jobsd_replica_is_one_call_answered_job_by_job_and_fires_there() {
    use jv1::jobs_client::JobsClient;

    let rep = Rep::start().await;
    let app = HttpApp::new();
    let side = Side::connected(&rep, app::serve(app.clone()).await).await;
    let mut c = JobsClient::connect(format!("http://{}", side.sidecar.grpc_addrs[0]))
        .await
        .unwrap();
    let job = |name: &str, due: &str, labels: &[(&str, &str)]| jv1::ScheduleJobRequest {
        job: Some(rv1::Job {
            name: name.into(),
            due_time: Some(due.into()),
            ..Default::default()
        }),
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..Default::default()
    };
    let batch = vec![
        job("one", "2s", &[("team", "a")]),
        job("bad", "not a time", &[]),
        job("two", "3s", &[]),
        job("one", "4s", &[]),
    ];
    let results = c
        .schedule_jobs(jv1::ScheduleJobsRequest {
            jobs: batch.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .results;
    let codes: Vec<_> = results.iter().map(|r| tonic::Code::from(r.code)).collect();
    assert_eq!(
        codes,
        [
            tonic::Code::Ok,
            tonic::Code::Internal,
            tonic::Code::Ok,
            tonic::Code::AlreadyExists,
        ],
        "{results:?}"
    );
    // Each refusal is what the same create alone answers through this sidecar.
    for (req, result) in batch.into_iter().zip(&results).skip(1) {
        if result.code == 0 {
            continue;
        }
        let alone = c.schedule_job(req).await.unwrap_err();
        assert_eq!(
            (alone.code() as i32, alone.message()),
            (result.code, result.message.as_str())
        );
    }
    let kept = rep
        .replica
        .engine()
        .job_view(&app_metadata("myapp"), "one")
        .await
        .unwrap();
    assert_eq!(kept.labels.get("team").map(String::as_str), Some("a"));
    assert!(!rep.exists("bad").await);

    // The replica takes the batch as one call of its own (an older one answers Unimplemented
    // and the sidecar goes one by one).
    let mut direct = jobsd::proto::jobsd_replica::jobs_client::JobsClient::connect(format!(
        "http://{}",
        rep.address()
    ))
    .await
    .unwrap();
    let create = |name: &str| jobsd::proto::jobsd_replica::ScheduleJobRequest {
        job: Some(sv1::ScheduleJobRequest {
            name: name.into(),
            job: Some(sv1::Job {
                due_time: Some("5s".into()),
                ..Default::default()
            }),
            metadata: Some(app_metadata("myapp")),
            overwrite: false,
        }),
        ..Default::default()
    };
    let direct = direct
        .schedule_jobs(jobsd::proto::jobsd_replica::ScheduleJobsRequest {
            jobs: vec![create("three"), create("two")],
        })
        .await
        .unwrap()
        .into_inner()
        .results;
    let direct: Vec<_> = direct.iter().map(|r| (r.name.as_str(), r.code)).collect();
    assert_eq!(
        direct,
        [("three", 0), ("two", tonic::Code::AlreadyExists as i32)]
    );

    rep.run_for(TimeDelta::seconds(10)).await;
    eventually("all three delivered", async || {
        app.count("one") == 1 && app.count("two") == 1 && app.count("three") == 1
    })
    .await;
    side.stop().await;
    rep.stop().await;
}
