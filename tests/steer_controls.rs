//! Issue 13, steering jobs: pause and resume (ticks that fall due while paused are skipped
//! and counted; resume follows `policy.catchUp`), by name and in bulk; preview of a job
//! before it exists; the opt-in test clock. A real sidecar on a manual clock, a real HTTP
//! app, driven through the HTTP and gRPC APIs.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use common::app::{self, HttpApp};
use common::running::Running;
use common::{sidecar_config, t0};
use jobsd::clock::{Clock, ManualClock};
use jobsd::config::{self, AppProtocol};
use jobsd::proto::jobsd_api::{self as jv1, jobs_client::JobsClient};
use jobsd::store::{self, Store};
use serde_json::{Value, json};
use tonic::transport::Channel;

fn cfg(app: SocketAddr) -> config::Sidecar {
    sidecar_config(Some(app), AppProtocol::Http, &[])
}

/// A sidecar over a memory store on a manual clock standing at `now`, for the app at `app`.
async fn start(app: SocketAddr, now: DateTime<Utc>) -> Running {
    Running::start(
        cfg(app),
        Arc::new(store::Memory::new()),
        ManualClock::new(now),
    )
    .await
}

async fn grpc(r: &Running) -> JobsClient<Channel> {
    JobsClient::connect(format!("http://{}", r.sidecar.grpc_addrs[0]))
        .await
        .unwrap()
}

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// The must-show of pause: an `@every 1m` job paused over three ticks has three skipped
/// (counted while still paused, across a restart, and after the resume); resumed with
/// `catchUp: latest` exactly one of them runs, with the default none does and the job goes on
/// at its next tick.
#[tokio::test]
async fn ticks_that_fall_due_while_paused_are_skipped_counted_and_resumed_by_catch_up() {
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let open = || -> Arc<dyn Store> { Arc::new(store::Redb::open(dir.path()).unwrap()) };
    let clock = ManualClock::new(t0());
    let r = Running::start(cfg(addr), open(), clock.clone()).await;
    r.create(
        "latest",
        r#"{"schedule":"@every 1m","policy":{"catchUp":"latest"}}"#,
    )
    .await;
    r.create("default", r#"{"schedule":"@every 1m"}"#).await;
    r.run_for(TimeDelta::seconds(90)).await;
    assert_eq!((app.count("latest"), app.count("default")), (1, 1));
    for name in ["latest", "default"] {
        let (status, body) = r
            .call(
                "POST",
                &format!("/jobsd/v1/jobs/{name}/pause"),
                r#"{"note":"db migration"}"#,
            )
            .await;
        assert_eq!(status, 204, "{body}");
    }
    // 2:00, 3:00 and 4:00 fall due while paused.
    r.run_for(TimeDelta::minutes(3)).await;
    assert_eq!((app.count("latest"), app.count("default")), (1, 1));
    for name in ["latest", "default"] {
        let s = &r.view(name).await["status"];
        assert_eq!(s["state"], "paused", "{s}");
        assert_eq!(s["counters"]["skipped"]["paused"], 3, "{name}: {s}");
        assert_eq!(s["ticks"], 1, "skipped ticks do not count toward repeats");
        assert!(s["nextFireTime"].is_null());
    }
    r.stop().await;

    let r = Running::start(cfg(addr), open(), clock.clone()).await;
    r.run_for(TimeDelta::seconds(20)).await; // 4:50
    assert_eq!((app.count("latest"), app.count("default")), (1, 1));
    assert_eq!(
        r.view("latest").await["status"]["counters"]["skipped"]["paused"],
        3,
        "still three after a restart"
    );

    // `catchUp: latest`: the latest of them (4:00) runs once, now.
    let (status, _) = r.call("POST", "/jobsd/v1/jobs/latest/resume", "").await;
    assert_eq!(status, 204);
    r.run_for(TimeDelta::zero()).await;
    assert_eq!(app.count("latest"), 2, "exactly one run for the three");
    let v = r.view("latest").await;
    let s = &v["status"];
    assert_eq!(s["state"], "active", "{v}");
    assert_eq!(s["counters"]["skipped"]["paused"], 3, "{v}");
    assert_eq!(s["lastFireTime"]["nominal"], "2026-01-01T00:04:00Z");
    assert_eq!(s["nextFireTime"], "2026-01-01T00:05:00Z");
    // The history has the skipped run standing for them, as other skips do.
    let runs = r.runs("latest", "").await;
    let skipped = &runs["runs"][1];
    assert_eq!(skipped["outcome"], "skipped", "{runs}");
    assert_eq!(skipped["error"], "paused");
    assert_eq!(skipped["nominalTime"], "2026-01-01T00:04:00Z");

    // Dapr's default (`all`): a pause means skip; none of them runs, then 5:00 does.
    let (status, _) = r.call("POST", "/jobsd/v1/jobs/default/resume", "").await;
    assert_eq!(status, 204);
    r.run_for(TimeDelta::zero()).await;
    assert_eq!(app.count("default"), 1, "no run for the paused ticks");
    let s = &r.view("default").await["status"];
    assert_eq!(s["counters"]["skipped"]["paused"], 3, "{s}");
    assert_eq!(s["nextFireTime"], "2026-01-01T00:05:00Z");
    r.run_for(TimeDelta::seconds(10)).await;
    assert_eq!((app.count("latest"), app.count("default")), (3, 2));
    r.stop().await;
}

/// Pausing and resuming many jobs by prefix or label, over HTTP (body or list query) and
/// gRPC; an empty selection is refused unless `all` says so.
#[tokio::test]
async fn jobs_are_paused_and_resumed_in_bulk_by_prefix_or_label() {
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let r = start(addr, t0()).await;
    let mut c = grpc(&r).await;
    for (name, team) in [
        ("batch-1", "a"),
        ("batch-2", "b"),
        ("report", "a"),
        ("x", "c"),
    ] {
        r.create(
            name,
            &json!({"schedule": "@every 10s", "labels": {"team": team}}).to_string(),
        )
        .await;
    }
    // Nothing selected: refused, saying how to take everything.
    let (status, body) = r.call("POST", "/jobsd/v1/jobs:pause", "{}").await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["errorCode"], "ERR_MALFORMED_REQUEST");
    assert!(body["message"].as_str().unwrap().contains("\"all\": true"));
    let err = c
        .resume_jobs(jv1::ResumeJobsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);

    // By prefix, in the list route's query, with a note.
    let (status, body) = r
        .call(
            "POST",
            "/jobsd/v1/jobs:pause?prefix=batch-",
            r#"{"note":"backfill running"}"#,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"count": 2, "names": ["batch-1", "batch-2"], "truncated": false})
    );
    let s = &r.view("batch-2").await["status"];
    assert_eq!(
        (&s["state"], &s["pausedNote"]),
        (&json!("paused"), &json!("backfill running"))
    );
    // Again: they are paused already.
    let (_, body) = r
        .call("POST", "/jobsd/v1/jobs:pause", r#"{"prefix":"batch-"}"#)
        .await;
    assert_eq!(body["count"], 0);
    // By label, over gRPC: `report` (team a; batch-1 is paused already).
    let paused = c
        .pause_jobs(jv1::PauseJobsRequest {
            labels: [("team".to_owned(), "a".to_owned())].into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((paused.count, paused.names), (1, vec!["report".to_owned()]));
    let (_, list) = r.call("GET", "/jobsd/v1/jobs?state=paused", "").await;
    let names: Vec<_> = list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["name"].clone())
        .collect();
    assert_eq!(names, [json!("batch-1"), json!("batch-2"), json!("report")]);
    r.run_for(TimeDelta::seconds(25)).await;
    assert_eq!(
        ["batch-1", "batch-2", "report", "x"].map(|n| app.count(n)),
        [0, 0, 0, 2]
    );

    // Resume by label `team=a` in the body (list form), then everything with `all`.
    let (_, body) = r
        .call("POST", "/jobsd/v1/jobs:resume", r#"{"label":["team=a"]}"#)
        .await;
    assert_eq!(
        body,
        json!({"count": 2, "names": ["batch-1", "report"], "truncated": false})
    );
    let (status, body) = r
        .call("POST", "/jobsd/v1/jobs:resume", r#"{"note":"x"}"#)
        .await;
    assert_eq!(status, 400, "a resume takes no note: {body}");
    let resumed = c
        .resume_jobs(jv1::ResumeJobsRequest {
            all: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (resumed.count, resumed.names),
        (1, vec!["batch-2".to_owned()])
    );
    r.run_for(TimeDelta::seconds(10)).await;
    assert_eq!(
        ["batch-1", "batch-2", "report", "x"].map(|n| app.count(n)),
        [1, 1, 1, 3]
    );
    for bad in [
        r#"{"label":"team"}"#,
        r#"{"prefix":"a","bogus":1}"#,
        r#"{"note":7,"all":true}"#,
    ] {
        let (status, body) = r.call("POST", "/jobsd/v1/jobs:pause", bad).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    let (status, _) = r
        .call("POST", "/jobsd/v1/jobs:pause?prefix=a", r#"{"prefix":"b"}"#)
        .await;
    assert_eq!(status, 400, "two different prefixes");
    r.stop().await;
}

/// The must-show of preview: `TZ=America/New_York 0 30 2 * * *` across the March gap (no
/// 02:30 on 2027-03-14: no run that day) and `0 30 1 * * *` across the November repeat, the
/// job normalised as jobsd's GET shows it, nothing stored.
#[tokio::test]
async fn a_preview_shows_the_next_fire_times_across_dst_and_stores_nothing() {
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let r = start(addr, at("2027-03-12T12:00:00Z")).await;
    let (status, p) = r
        .call(
            "POST",
            "/jobsd/v1/preview?name=nightly",
            r#"{"schedule":"TZ=America/New_York 0 30 2 * * *","count":4,"labels":{"team":"a"}}"#,
        )
        .await;
    assert_eq!(status, 200, "{p}");
    assert_eq!(p["zone"], "America/New_York");
    let ticks = p["ticks"].as_array().unwrap();
    let field = |f: &str| ticks.iter().map(|t| t[f].clone()).collect::<Vec<_>>();
    assert_eq!(
        field("time"),
        [
            "2027-03-13T07:30:00Z",
            "2027-03-15T06:30:00Z",
            "2027-03-16T06:30:00Z",
            "2027-03-17T06:30:00Z"
        ]
    );
    assert_eq!(
        field("local")[..2],
        ["2027-03-13T02:30:00-05:00", "2027-03-15T02:30:00-04:00"]
    );
    assert_eq!(field("abbreviation")[..2], ["EST", "EDT"]);
    assert_eq!(
        ticks[1]["notes"],
        json!([
            "02:30 on 2027-03-14 does not exist in America/New_York (clocks jump from \
                02:00 to 03:00) (DST gap): skipped, no run for it"
        ])
    );
    assert_eq!(ticks[0]["notes"], json!([]));
    // Normalised as jobsd's GET shows a created job: Dapr's default failure policy filled in.
    assert_eq!(p["name"], "nightly");
    assert_eq!(p["labels"], json!({"team": "a"}));
    assert_eq!(p["job"]["schedule"], "TZ=America/New_York 0 30 2 * * *");
    assert_eq!(
        p["job"]["failurePolicy"],
        json!({"constant": {"interval": "1s", "maxRetries": 3}})
    );
    assert_eq!(p["status"]["nextFireTime"], "2027-03-13T07:30:00Z");
    // Nothing stored.
    let (status, _) = r.call("GET", "/jobsd/v1/jobs/nightly", "").await;
    assert_eq!(status, 404);

    // The November repeat, under `dst.repeat: first`, over gRPC.
    let mut c = grpc(&r).await;
    r.clock.set(at("2027-11-06T12:00:00Z"));
    let p = c
        .preview(jv1::PreviewRequest {
            job: Some(jobsd::proto::runtime::Job {
                schedule: Some("TZ=America/New_York 0 30 1 * * *".into()),
                ..Default::default()
            }),
            policy: Some(jv1::JobPolicy {
                dst: Some(jv1::DstPolicy {
                    repeat: "first".into(),
                    gap: String::new(),
                }),
                ..Default::default()
            }),
            count: 2,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(p.job.unwrap().name, "preview");
    assert_eq!(
        p.ticks.iter().map(|t| t.local.as_str()).collect::<Vec<_>>(),
        ["2027-11-07T01:30:00-04:00", "2027-11-08T01:30:00-05:00"]
    );
    assert_eq!(
        p.ticks[0].notes,
        [
            "01:30 on 2027-11-07 happens twice in America/New_York (DST repeat): this is the \
          first, 01:30 EDT; it fires only at this one, not at 01:30 EST"
        ]
    );
    // Dapr's default fires at both, and says so.
    let (_, p) = r
        .call(
            "POST",
            "/jobsd/v1/preview",
            r#"{"schedule":"TZ=America/New_York 0 30 1 * * *","count":2}"#,
        )
        .await;
    assert_eq!(
        p["ticks"][1]["notes"],
        json!([
            "01:30 on 2027-11-07 happens twice in America/New_York (DST repeat): this is \
                the second, 01:30 EST; it fires at both"
        ])
    );
    r.stop().await;
}

/// A preview refuses what a create refuses, with the very same answer, over HTTP and gRPC.
#[tokio::test]
async fn a_preview_refuses_what_a_create_refuses_with_the_same_errors() {
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let r = start(addr, t0()).await;
    for body in [
        r#"{"schedule":"bogus"}"#,
        r#"{"schedule":"TZ=Mars/Olympus 0 0 * * * *"}"#,
        r#"{"ttl":"1h","dueTime":"10s"}"#,
        r#"{"schedule":"@every 1m","repeats":0}"#,
        r#"{"dueTime":"yesterday"}"#,
        r#"{}"#,
        r#"{"schedule":"@every 1m","policy":{"catchUp":"sometimes"}}"#,
        r#"{"schedule":"@every 1m","policy":{"overlap":"allow"}}"#,
        r#"{"schedule":"@every 1m","labels":{"bad key!":"v"}}"#,
        r#"{"schedule":"@every 1m","failurePolicy":{"delays":{"delays":["x"]}}}"#,
        r#"{"schedule":"@every 1m","failurePolicy":{"drop":{},"onExhausted":"deadLetter","deadLetterJob":"j"}}"#,
        r#"{"schedule":"@every 1m","data":}"#,
    ] {
        let create = r.call("POST", "/jobsd/v1/jobs/j", body).await;
        let preview = r.call("POST", "/jobsd/v1/preview?name=j", body).await;
        assert!(create.0 >= 400, "{body}: {create:?}");
        assert_eq!(preview, create, "{body}");
    }
    // A name a create refuses is refused alike.
    let create = r
        .call("POST", "/jobsd/v1/jobs/a%23b", r#"{"schedule":"@daily"}"#)
        .await;
    let preview = r
        .call(
            "POST",
            "/jobsd/v1/preview?name=a%23b",
            r#"{"schedule":"@daily"}"#,
        )
        .await;
    assert!(create.0 >= 400);
    assert_eq!(preview, create);
    // Over gRPC too.
    let mut c = grpc(&r).await;
    let job = jobsd::proto::runtime::Job {
        name: "j".into(),
        schedule: Some("bogus".into()),
        ..Default::default()
    };
    let create = c
        .schedule_job(jv1::ScheduleJobRequest {
            job: Some(job.clone()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    let preview = c
        .preview(jv1::PreviewRequest {
            job: Some(job),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        (preview.code(), preview.message()),
        (create.code(), create.message())
    );
    // The count is bounded, clearly.
    for count in ["0", "1001", "\"ten\""] {
        let (status, body) = r
            .call(
                "POST",
                "/jobsd/v1/preview",
                &format!(r#"{{"schedule":"@daily","count":{count}}}"#),
            )
            .await;
        assert_eq!(status, 400, "{count}: {body}");
        assert!(
            body["message"].as_str().unwrap().starts_with("count:"),
            "{body}"
        );
    }
    // Nothing was stored by any of it.
    let (_, list) = r.call("GET", "/jobsd/v1/jobs", "").await;
    assert_eq!(list["jobs"], json!([]));
    r.stop().await;
}

/// `--test-clock`: the sidecar stands on a manual clock moved through the API; an advance
/// fires every tick due on the way at its own instant, retries included, before it answers.
/// Without the flag the routes refuse.
#[tokio::test]
async fn the_test_clock_moves_only_when_advanced_and_fires_every_tick_on_the_way() {
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let mut with_clock = cfg(addr);
    with_clock.test_clock = true;
    // The given clock only gives the test clock its start.
    let sidecar = jobsd::app::Sidecar::start_with(
        with_clock,
        Arc::new(store::Memory::new()),
        Arc::new(ManualClock::new(t0())),
    )
    .await
    .unwrap();
    let api = sidecar.http_addrs[0];
    let call = |method: &'static str, path: &'static str, body: &'static str| async move {
        let r = common::http(api, method, path, &[], body.as_bytes()).await;
        let json = if r.body.is_empty() {
            Value::Null
        } else {
            r.json()
        };
        (r.status, json)
    };
    let (status, now) = call("GET", "/jobsd/v1/clock", "").await;
    assert_eq!((status, &now["now"]), (200, &json!("2026-01-01T00:00:00Z")));
    let (status, body) = call(
        "POST",
        "/jobsd/v1/jobs/hourly",
        r#"{"schedule":"@every 1h"}"#,
    )
    .await;
    assert_eq!(status, 204, "{body}");
    app.status.lock().unwrap().insert("flaky".into(), 500);
    call("POST", "/jobsd/v1/jobs/flaky", r#"{"dueTime":"30m"}"#).await;
    // Held executions' leases run out on the way too: a 202 under a 20-minute lease, never
    // completed, fails each attempt 20 minutes after it went out.
    app.status.lock().unwrap().insert("leased".into(), 202);
    let (status, body) = call(
        "POST",
        "/jobsd/v1/jobs/leased",
        r#"{"dueTime":"1h","policy":{"lease":"20m"}}"#,
    )
    .await;
    assert_eq!(status, 204, "{body}");

    let (status, body) = call("POST", "/jobsd/v1/clock/advance", r#"{"by":"3h"}"#).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"previous": "2026-01-01T00:00:00Z", "now": "2026-01-01T03:00:00Z"})
    );
    assert_eq!(app.count("hourly"), 3, "1:00, 2:00, 3:00");
    assert_eq!(
        app.count("flaky"),
        4,
        "the tick and Dapr's three retries, 1 s apart"
    );
    assert_eq!(app.count("leased"), 4, "the tick and three retries");
    let (_, runs) = call("GET", "/jobsd/v1/jobs/leased/runs", "").await;
    let attempts: Vec<_> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["started"].clone(), r["error"].clone()))
        .collect();
    assert_eq!(
        attempts,
        [
            "2026-01-01T02:00:00Z",
            "2026-01-01T01:40:00Z",
            "2026-01-01T01:20:00Z",
            "2026-01-01T01:00:00Z"
        ]
        .map(|t| (json!(t), json!("lease expired"))),
        "each retry when the lease before it ran out: {runs}"
    );
    let (_, runs) = call("GET", "/jobsd/v1/jobs/hourly/runs", "").await;
    let started: Vec<_> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["started"].clone())
        .collect();
    assert_eq!(
        started,
        [
            "2026-01-01T03:00:00Z",
            "2026-01-01T02:00:00Z",
            "2026-01-01T01:00:00Z"
        ],
        "each at its own instant"
    );

    // gRPC: read and advance; `to` an instant.
    let mut c = JobsClient::connect(format!("http://{}", sidecar.grpc_addrs[0]))
        .await
        .unwrap();
    let moved = c
        .advance_clock(jv1::AdvanceClockRequest {
            by: "90m".into(),
            to: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        moved.now.unwrap().seconds,
        t0().timestamp() + 4 * 3600 + 1800
    );
    assert_eq!(app.count("hourly"), 4);
    let (status, body) = call(
        "POST",
        "/jobsd/v1/clock/advance",
        r#"{"to":"2026-01-01T06:00:00Z"}"#,
    )
    .await;
    assert_eq!(
        (status, &body["now"]),
        (200, &json!("2026-01-01T06:00:00Z"))
    );
    assert_eq!(app.count("hourly"), 6);
    for bad in [
        r#"{"by":"-1h"}"#,
        r#"{}"#,
        r#"{"by":"1h","to":"2030-01-01T00:00:00Z"}"#,
        r#"{"to":"2026-01-01T00:00:00Z"}"#,
        r#"{"by":"soon"}"#,
    ] {
        let (status, body) = call("POST", "/jobsd/v1/clock/advance", bad).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert_eq!(body["errorCode"], "ERR_MALFORMED_REQUEST");
    }
    sidecar.shutdown_token().cancel();
    sidecar.wait().await.unwrap();

    // Without the flag: refused, saying which flag.
    let r = start(addr, t0()).await;
    for (method, path) in [
        ("GET", "/jobsd/v1/clock"),
        ("POST", "/jobsd/v1/clock/advance"),
    ] {
        let (status, body) = r.call(method, path, r#"{"by":"1h"}"#).await;
        assert_eq!(status, 412, "{body}");
        assert_eq!(body["errorCode"], "ERR_JOBSD_TEST_CLOCK_OFF");
        assert!(body["message"].as_str().unwrap().contains("--test-clock"));
    }
    let err = grpc(&r)
        .await
        .get_clock(jv1::GetClockRequest {})
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert_eq!(r.clock.now(), t0());
    r.stop().await;
}

/// A stored job's next fire times (`GET /jobsd/v1/jobs/{name}/next`, gRPC `NextFireTimes`)
/// come from its progress: they move on as it fires, stop at its `repeats`, say when it is
/// paused, and end when it has finished.
#[tokio::test]
async fn a_jobs_next_fire_times_follow_its_progress() {
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    // redb keeps finished jobs for the views (the memory store does not).
    let dir = tempfile::tempdir().unwrap();
    let r = Running::start(
        cfg(addr),
        Arc::new(store::Redb::open(dir.path()).unwrap()),
        ManualClock::new(t0()),
    )
    .await;
    r.create(
        "nightly",
        r#"{"schedule":"TZ=America/New_York 0 30 2 * * *","repeats":3}"#,
    )
    .await;
    let next = |count: &'static str| {
        let r = &r;
        async move {
            r.call("GET", &format!("/jobsd/v1/jobs/nightly/next{count}"), "")
                .await
        }
    };
    let times = |body: &Value| -> Vec<String> {
        body["ticks"]
            .as_array()
            .unwrap_or_else(|| panic!("{body}"))
            .iter()
            .map(|t| t["time"].as_str().unwrap().to_owned())
            .collect()
    };
    let (status, body) = next("?count=2").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["zone"], "America/New_York");
    assert_eq!(body["paused"], false);
    assert_eq!(
        times(&body),
        ["2026-01-01T07:30:00Z", "2026-01-02T07:30:00Z"],
        "02:30 EST"
    );
    assert_eq!(body["ticks"][0]["local"], "2026-01-01T02:30:00-05:00");
    // Three repeats: no fourth, whatever the count.
    let (_, body) = next("").await;
    assert_eq!(times(&body).len(), 3, "{body}");

    // Once the first has fired, the list starts at the second.
    r.run_for(TimeDelta::hours(8)).await;
    assert_eq!(app.count("nightly"), 1);
    let (_, body) = next("").await;
    assert_eq!(
        times(&body),
        ["2026-01-02T07:30:00Z", "2026-01-03T07:30:00Z"],
        "{body}"
    );

    // Paused: the same ticks, said to be skipped unless resumed.
    r.call("POST", "/jobsd/v1/jobs/nightly/pause", "").await;
    let (_, body) = next("?count=1").await;
    assert_eq!(body["paused"], true, "{body}");
    assert!(
        body["ticks"][0]["notes"][0]
            .as_str()
            .unwrap()
            .contains("paused"),
        "{body}"
    );
    r.call("POST", "/jobsd/v1/jobs/nightly/resume", "").await;

    // gRPC, the same.
    let mut c = grpc(&r).await;
    let got = c
        .next_fire_times(jv1::NextFireTimesRequest {
            name: "nightly".into(),
            count: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.ticks.len(), 2);
    assert_eq!(
        got.ticks[0].time.as_ref().unwrap().seconds,
        at("2026-01-02T07:30:00Z").timestamp()
    );

    // Finished: none; unknown: 404; a bad count: 400. (Two days: the third tick is at
    // 07:30 on day three, and its finished record is swept 24 h later.)
    r.run_for(TimeDelta::days(2)).await;
    assert_eq!(app.count("nightly"), 3);
    let (status, body) = next("").await;
    assert_eq!((status, times(&body).len()), (200, 0), "{body}");
    let (status, body) = r.call("GET", "/jobsd/v1/jobs/nope/next", "").await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["errorCode"], "ERR_JOB_NOT_FOUND");
    for bad in ["?count=0", "?count=1001", "?count=x"] {
        let (status, body) = next(bad).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert_eq!(body["errorCode"], "ERR_MALFORMED_REQUEST");
    }
    r.stop().await;
}
