//! Issue 11: what jobsd shows of every job on its own routes — status after success,
//! failure, retries and restart; run history order, limit and pruning; finished jobs;
//! label and state filters; paging over 100k jobs while jobs come and go. A real sidecar on
//! a manual clock, a real HTTP app, real redb stores.

mod common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;

use chrono::TimeDelta;
use common::app::{self, HttpApp};
use common::running::Running;
use common::{http, sidecar_config, t0};
use jobsd::clock::ManualClock;
use jobsd::config::{self, AppProtocol};
use jobsd::engine::history::Options;
use jobsd::store::{self, Store};
use serde_json::Value;

fn cfg(app: SocketAddr, history: Options) -> config::Sidecar {
    let mut cfg = sidecar_config(Some(app), AppProtocol::Http, &[]);
    cfg.history = history;
    cfg
}

fn redb(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    Arc::new(store::Redb::open(dir.path()).unwrap())
}

fn counter(view: &Value, name: &str) -> u64 {
    view["status"]["counters"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("{name} in {view}"))
}

#[tokio::test]
async fn status_and_history_after_success_failure_retries_and_restart() {
    let app = HttpApp::new();
    app.status.lock().unwrap().insert("flaky".into(), 503);
    let addr = app::serve(app.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(t0());
    let r = Running::start(cfg(addr, Options::default()), redb(&dir), clock.clone()).await;

    r.create(
        "ok",
        r#"{"schedule":"@every 10s","repeats":5,"labels":{"team":"billing"}}"#,
    )
    .await;
    r.create("flaky", r#"{"schedule":"@every 1m"}"#).await;
    r.run_for(TimeDelta::seconds(31)).await; // ok: 10s, 20s, 30s; flaky: not yet

    let v = r.view("ok").await;
    assert_eq!(v["labels"]["team"], "billing");
    assert_eq!(v["job"]["name"], "ok", "the job is Dapr's GET body: {v}");
    assert_eq!(v["job"]["schedule"], "@every 10s");
    assert!(
        v["job"].get("labels").is_none(),
        "labels stay beside Dapr's job"
    );
    assert_eq!(v["status"]["state"], "active");
    assert_eq!(counter(&v, "delivered"), 3);
    assert_eq!(counter(&v, "succeeded"), 3);
    assert_eq!(counter(&v, "failedAttempts"), 0);
    assert_eq!(v["status"]["ticks"], 3);
    assert_eq!(v["status"]["lastOutcome"], "success");
    assert_eq!(
        v["status"]["lastFireTime"]["nominal"],
        "2026-01-01T00:00:30Z"
    );
    assert_eq!(v["status"]["nextFireTime"], "2026-01-01T00:00:40Z");
    assert!(v["status"]["lastError"].is_null());

    // The app fails flaky's tick at 60s: 4 attempts (default policy: 1 s × 3), then given up.
    r.run_for(TimeDelta::seconds(34)).await; // to 65s
    let v = r.view("flaky").await;
    assert_eq!(counter(&v, "delivered"), 4);
    assert_eq!(counter(&v, "failedAttempts"), 4);
    assert_eq!(counter(&v, "succeeded"), 0);
    assert_eq!(counter(&v, "dropped"), 1);
    assert_eq!(v["status"]["lastOutcome"], "failed");
    assert_eq!(
        v["status"]["lastError"],
        "app responded with HTTP status 503"
    );
    assert_eq!(v["status"]["nextFireTime"], "2026-01-01T00:02:00Z");
    let runs = r.runs("flaky", "").await;
    let runs = runs["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    // Newest first; one execution for the tick, attempts 4..1.
    let attempts: Vec<_> = runs
        .iter()
        .map(|r| r["attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(attempts, [4, 3, 2, 1]);
    let ids: BTreeSet<_> = runs
        .iter()
        .map(|r| r["executionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 1, "retries share the tick's execution id");
    for run in runs {
        assert_eq!(run["outcome"], "failed");
        assert_eq!(run["httpStatus"], 503);
        assert_eq!(run["nominalTime"], "2026-01-01T00:01:00Z");
    }
    assert_eq!(runs[3]["started"], "2026-01-01T00:01:00Z");
    assert_eq!(runs[0]["started"], "2026-01-01T00:01:03Z");

    // ok finishes at 50s (repeats 5): Dapr's GET says 404, jobsd's view says finished.
    let dapr = http(r.api, "GET", "/v1.0-alpha1/jobs/ok", &[], b"").await;
    assert_eq!(
        dapr.status,
        500,
        "daprd answers a missing job so: {}",
        dapr.text()
    );
    let v = r.view("ok").await;
    assert_eq!(v["status"]["state"], "finished");
    assert_eq!(counter(&v, "succeeded"), 5);
    assert!(v["status"]["nextFireTime"].is_null());
    assert_eq!(v["status"]["finishedAt"], "2026-01-01T00:00:50Z");
    let runs = r.runs("ok", "?limit=2").await;
    let seqs: Vec<_> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [4, 3]);
    assert_eq!(runs["nextBefore"], 3);
    let older = r.runs("ok", "?limit=10&before=3").await;
    let seqs: Vec<_> = older["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [2, 1, 0]);
    assert!(older["nextBefore"].is_null());
    r.stop().await;

    // Restart on the same store: status and history are durable.
    let r = Running::start(cfg(addr, Options::default()), redb(&dir), clock.clone()).await;
    let v = r.view("flaky").await;
    assert_eq!(counter(&v, "failedAttempts"), 4);
    assert_eq!(counter(&v, "dropped"), 1);
    assert_eq!(
        r.runs("flaky", "").await["runs"].as_array().unwrap().len(),
        4
    );
    app.status.lock().unwrap().remove("flaky");
    r.run_for(TimeDelta::seconds(60)).await; // tick at 120s succeeds
    let v = r.view("flaky").await;
    assert_eq!(counter(&v, "succeeded"), 1);
    assert_eq!(v["status"]["lastOutcome"], "success");
    assert!(v["status"]["lastError"].is_null());
    assert_eq!(v["status"]["currentAttempt"], 1);

    // DELETE removes the job with its history.
    let (status, _) = r.call("DELETE", "/jobsd/v1/jobs/flaky", "").await;
    assert_eq!(status, 204);
    let (status, body) = r.call("GET", "/jobsd/v1/jobs/flaky", "").await;
    assert_eq!(status, 404);
    assert_eq!(body["errorCode"], "ERR_JOB_NOT_FOUND");
    let (status, _) = r.call("GET", "/jobsd/v1/jobs/flaky/runs", "").await;
    assert_eq!(status, 404);
    r.stop().await;
}

#[tokio::test]
async fn history_is_bounded_by_its_limit_and_can_be_off() {
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let history = Options {
        history_limit: 3,
        finished_retention: None,
    };
    let r = Running::start(
        cfg(addr, history),
        Arc::new(store::Memory::new()),
        ManualClock::new(t0()),
    )
    .await;
    r.create("j", r#"{"schedule":"@every 1s"}"#).await;
    r.run_for(TimeDelta::milliseconds(10_500)).await;
    assert_eq!(app.count("j"), 10);
    let runs = r.runs("j", "?limit=100").await;
    let seqs: Vec<_> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [9, 8, 7], "only the newest 3 runs are kept");
    assert_eq!(counter(&r.view("j").await, "succeeded"), 10);
    // Without retention a finished job is gone at once, as in Dapr.
    r.create("once", r#"{"dueTime":"1s"}"#).await;
    r.run_for(TimeDelta::seconds(2)).await;
    let (status, _) = r.call("GET", "/jobsd/v1/jobs/once", "").await;
    assert_eq!(status, 404);
    r.stop().await;

    let off = Options {
        history_limit: 0,
        finished_retention: None,
    };
    let r = Running::start(
        cfg(addr, off),
        Arc::new(store::Memory::new()),
        ManualClock::new(t0()),
    )
    .await;
    r.create("k", r#"{"schedule":"@every 1s"}"#).await;
    r.run_for(TimeDelta::milliseconds(3_500)).await;
    assert!(r.runs("k", "").await["runs"].as_array().unwrap().is_empty());
    assert_eq!(
        counter(&r.view("k").await, "succeeded"),
        3,
        "status is kept without history"
    );
    r.stop().await;
}

#[tokio::test]
async fn finished_jobs_are_swept_after_their_retention() {
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let history = Options {
        history_limit: 10,
        finished_retention: Some(std::time::Duration::from_secs(60)),
    };
    let r = Running::start(
        cfg(addr, history),
        Arc::new(store::Memory::new()),
        ManualClock::new(t0()),
    )
    .await;
    r.create("once", r#"{"dueTime":"1s"}"#).await;
    r.run_for(TimeDelta::seconds(2)).await;
    assert_eq!(r.view("once").await["status"]["state"], "finished");
    // The sweep runs every 6 s of the (manual) clock; 70 s after finishing it is gone.
    for _ in 0..20 {
        r.clock.advance(TimeDelta::seconds(5));
        tokio::task::yield_now().await;
    }
    common::eventually("the finished record swept", async || {
        r.call("GET", "/jobsd/v1/jobs/once", "").await.0 == 404
    })
    .await;
    r.stop().await;
}

#[tokio::test]
async fn labels_are_checked_and_filter_lists() {
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let r = Running::start(
        cfg(addr, Options::default()),
        Arc::new(store::Memory::new()),
        ManualClock::new(t0()),
    )
    .await;
    r.create(
        "a1",
        r#"{"schedule":"@daily","labels":{"team":"a","tier":"1"}}"#,
    )
    .await;
    r.create(
        "a2",
        r#"{"schedule":"@daily","labels":{"team":"a","tier":"2"}}"#,
    )
    .await;
    r.create("b1", r#"{"schedule":"@daily","labels":{"team":"b"}}"#)
        .await;
    r.create("plain", r#"{"schedule":"@daily"}"#).await;
    // Dapr's own create route takes no labels and its GET shows none.
    let dapr = http(r.api, "GET", "/v1.0-alpha1/jobs/a1", &[], b"").await;
    assert_eq!(dapr.status, 200);
    assert!(dapr.json().get("labels").is_none());

    let names = |v: &Value| -> Vec<String> {
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let (_, v) = r.call("GET", "/jobsd/v1/jobs?label=team=a", "").await;
    assert_eq!(names(&v), ["a1", "a2"]);
    let (_, v) = r
        .call("GET", "/jobsd/v1/jobs?label=team=a&label=tier=2", "")
        .await;
    assert_eq!(names(&v), ["a2"]);
    let (_, v) = r.call("GET", "/jobsd/v1/jobs?prefix=a", "").await;
    assert_eq!(names(&v), ["a1", "a2"]);
    let (_, v) = r.call("GET", "/jobsd/v1/jobs?state=finished", "").await;
    assert!(names(&v).is_empty());
    let (_, v) = r.call("GET", "/jobsd/v1/jobs?state=active", "").await;
    assert_eq!(names(&v), ["a1", "a2", "b1", "plain"]);

    // Bad input: clear errors naming the field; nothing stored.
    let (status, body) = r
        .call(
            "POST",
            "/jobsd/v1/jobs/x",
            r#"{"schedule":"@daily","labels":{"bad key":"v"}}"#,
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("labels: key \"bad key\""),
        "{body}"
    );
    let many: serde_json::Map<String, Value> = (0..65)
        .map(|i| (format!("k{i}"), Value::from("v")))
        .collect();
    let body = serde_json::json!({"schedule": "@daily", "labels": many}).to_string();
    let (status, _) = r.call("POST", "/jobsd/v1/jobs/x", &body).await;
    assert_eq!(status, 400);
    let (status, body) = r
        .call(
            "POST",
            "/jobsd/v1/jobs/x",
            r#"{"schedule":"@daily","labels":{"k":1}}"#,
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = r.call("GET", "/jobsd/v1/jobs?state=gone", "").await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = r.call("GET", "/jobsd/v1/jobs?pageToken=!!", "").await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = r
        .call(
            "POST",
            "/jobsd/v1/jobs/x",
            r#"{"schedule":"not a cron","labels":{"k":"v"}}"#,
        )
        .await;
    assert_eq!(status, 500, "Dapr's validation and error: {body}");
    assert_eq!(body["errorCode"], "DAPR_SCHEDULER_SCHEDULE_JOB");
    assert_eq!(r.call("GET", "/jobsd/v1/jobs/x", "").await.0, 404);
    // Create-only unless overwrite, as Dapr's route.
    let (status, _) = r
        .call("POST", "/jobsd/v1/jobs/a1", r#"{"schedule":"@daily"}"#)
        .await;
    assert_eq!(status, 409);
    r.create(
        "a1",
        r#"{"schedule":"@hourly","overwrite":true,"labels":{"team":"c"}}"#,
    )
    .await;
    assert_eq!(r.view("a1").await["labels"]["team"], "c");
    r.stop().await;
}

/// 100k jobs listed 1,000 a page while jobs are created and deleted between pages: every
/// job that exists throughout is listed exactly once, in name order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_over_100k_jobs_lists_each_exactly_once_while_jobs_come_and_go() {
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let r = Running::start(
        cfg(addr, Options::default()),
        redb(&dir),
        ManualClock::new(t0()),
    )
    .await;
    let engine = r.sidecar.engine().unwrap().clone();
    let metadata = common::app_metadata("myapp");
    const N: usize = 100_000;
    let create = move |name: String| {
        let engine = engine.clone();
        let metadata = metadata.clone();
        async move {
            engine
                .schedule_job(jobsd::proto::dapr_scheduler::ScheduleJobRequest {
                    name,
                    job: Some(jobsd::proto::dapr_scheduler::Job {
                        schedule: Some("@yearly".into()),
                        ..Default::default()
                    }),
                    metadata: Some(metadata),
                    overwrite: false,
                })
                .await
                .unwrap();
        }
    };
    let mut tasks = tokio::task::JoinSet::new();
    for chunk in 0..16 {
        let create = create.clone();
        tasks.spawn(async move {
            for i in (chunk..N).step_by(16) {
                create(format!("job-{i:06}")).await;
            }
        });
    }
    while let Some(t) = tasks.join_next().await {
        t.unwrap();
    }

    let mut seen = Vec::with_capacity(N);
    let mut token: Option<String> = None;
    let mut page = 0;
    loop {
        let path = match &token {
            Some(t) => format!("/jobsd/v1/jobs?state=active&pageSize=1000&pageToken={t}"),
            None => "/jobsd/v1/jobs?state=active&pageSize=1000".to_owned(),
        };
        let (status, v) = r.call("GET", &path, "").await;
        assert_eq!(status, 200, "{v}");
        for j in v["jobs"].as_array().unwrap() {
            seen.push(j["name"].as_str().unwrap().to_owned());
        }
        // Churn between pages: new jobs (before and after the cursor) and deletes of
        // extra jobs; the 100k stay.
        create(format!("extra-{page:04}")).await;
        create(format!("zzz-{page:04}")).await;
        if page > 2 {
            let (s, _) = r
                .call(
                    "DELETE",
                    &format!("/jobsd/v1/jobs/extra-{:04}", page - 2),
                    "",
                )
                .await;
            assert_eq!(s, 204);
        }
        page += 1;
        match v["nextPageToken"].as_str() {
            Some(t) => token = Some(t.to_owned()),
            None => break,
        }
    }
    let stable: Vec<_> = seen
        .iter()
        .filter(|n| n.starts_with("job-"))
        .cloned()
        .collect();
    assert_eq!(stable.len(), N, "each of the 100k exactly once");
    let unique: BTreeSet<_> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "no job listed twice");
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(sorted, seen, "name order");
    r.stop().await;
}

/// `jobsd.v1.Jobs` on the gRPC port: the same jobs, status, history, filters and errors as
/// the HTTP routes.
#[tokio::test]
async fn grpc_jobs_service_shows_what_the_http_routes_show() {
    use jobsd::proto::jobsd_api::{self as jv1, jobs_client::JobsClient};
    use jobsd::proto::runtime as rv1;
    use tonic::Code;

    let app = HttpApp::new();
    app.status.lock().unwrap().insert("flaky".into(), 503);
    let addr = app::serve(app.clone()).await;
    let r = Running::start(
        cfg(addr, Options::default()),
        Arc::new(store::Memory::new()),
        ManualClock::new(t0()),
    )
    .await;
    let grpc = r.sidecar.grpc_addrs[0];
    let mut c = JobsClient::connect(format!("http://{grpc}")).await.unwrap();
    let job = |name: &str, schedule: &str, repeats: Option<u32>| rv1::Job {
        name: name.to_owned(),
        schedule: Some(schedule.to_owned()),
        repeats,
        ..Default::default()
    };
    let schedule =
        |job: rv1::Job, labels: &[(&str, &str)], overwrite: bool| jv1::ScheduleJobRequest {
            job: Some(job),
            overwrite,
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..Default::default()
        };
    c.schedule_job(schedule(
        job("ok", "@every 10s", Some(3)),
        &[("team", "a")],
        false,
    ))
    .await
    .unwrap();
    c.schedule_job(schedule(
        job("flaky", "@every 1m", None),
        &[("team", "b")],
        false,
    ))
    .await
    .unwrap();

    // Errors: Dapr's for the job, jobsd's for labels, nothing stored.
    let err = c
        .schedule_job(schedule(job("ok", "@daily", None), &[], false))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists, "{err:?}");
    let err = c
        .schedule_job(schedule(
            job("x", "@daily", None),
            &[("bad key", "v")],
            false,
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("labels: key"), "{err:?}");
    let err = c
        .schedule_job(schedule(job("x", "not a cron", None), &[], false))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Internal, "Dapr's validation: {err:?}");
    let err = c
        .get_job(jv1::GetJobRequest { name: "x".into() })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);

    r.run_for(TimeDelta::seconds(65)).await; // ok: 10, 20, 30 (done); flaky: 60 + 3 retries

    let view = |v: jv1::GetJobResponse| v.job.unwrap();
    let ok = view(
        c.get_job(jv1::GetJobRequest { name: "ok".into() })
            .await
            .unwrap()
            .into_inner(),
    );
    assert_eq!(ok.name, "ok");
    assert_eq!(
        ok.job.as_ref().unwrap().schedule.as_deref(),
        Some("@every 10s")
    );
    assert_eq!(ok.labels.get("team").map(String::as_str), Some("a"));
    let status = ok.status.unwrap();
    assert_eq!(status.state, "finished");
    assert_eq!(status.counters.as_ref().unwrap().succeeded, 3);
    assert_eq!(status.ticks, 3);
    assert_eq!(status.last_outcome, "success");
    assert!(status.next_fire_time.is_none());
    assert_eq!(status.finished_at.unwrap().seconds, t0().timestamp() + 30);

    let flaky = view(
        c.get_job(jv1::GetJobRequest {
            name: "flaky".into(),
        })
        .await
        .unwrap()
        .into_inner(),
    );
    let status = flaky.status.unwrap();
    assert_eq!(status.state, "active");
    let counters = status.counters.unwrap();
    assert_eq!((counters.failed_attempts, counters.dropped), (4, 1));
    assert_eq!(status.last_error, "app responded with HTTP status 503");
    assert_eq!(
        status.next_fire_time.unwrap().seconds,
        t0().timestamp() + 120
    );
    // The HTTP view says the same.
    let http_view = r.view("flaky").await;
    assert_eq!(
        counter(&http_view, "failedAttempts"),
        counters.failed_attempts
    );
    assert_eq!(http_view["status"]["lastError"], status.last_error);

    // History: newest first, paged by `before`.
    let page = c
        .list_runs(jv1::ListRunsRequest {
            name: "flaky".into(),
            limit: 3,
            before: 0,
        })
        .await
        .unwrap()
        .into_inner();
    let attempts: Vec<_> = page.runs.iter().map(|r| r.attempt).collect();
    assert_eq!(attempts, [4, 3, 2]);
    for run in &page.runs {
        assert_eq!(run.outcome(), jv1::RunOutcome::Failed);
        assert_eq!(run.http_status, 503);
        assert_eq!(run.nominal_time.unwrap().seconds, t0().timestamp() + 60);
        assert!(run.latency.is_some());
        assert_eq!(run.execution_id, page.runs[0].execution_id);
    }
    assert_eq!(page.next_before, page.runs[2].seq);
    let rest = c
        .list_runs(jv1::ListRunsRequest {
            name: "flaky".into(),
            limit: 3,
            before: page.next_before,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(rest.runs.len(), 1);
    assert_eq!(rest.runs[0].attempt, 1);
    assert_eq!(rest.next_before, 0);

    // Lists: filters and paging.
    let list =
        |labels: &[(&str, &str)], state: &str, page_size: u32, token: &str| jv1::ListJobsRequest {
            prefix: String::new(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            state: state.to_owned(),
            page_size,
            page_token: token.to_owned(),
        };
    let names = |p: &jv1::ListJobsResponse| -> Vec<String> {
        p.jobs.iter().map(|j| j.name.clone()).collect()
    };
    let p = c
        .list_jobs(list(&[("team", "b")], "", 0, ""))
        .await
        .unwrap();
    assert_eq!(names(p.get_ref()), ["flaky"]);
    let p = c.list_jobs(list(&[], "finished", 0, "")).await.unwrap();
    assert_eq!(names(p.get_ref()), ["ok"]);
    let first = c
        .list_jobs(list(&[], "", 1, ""))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(names(&first), ["flaky"]);
    assert!(!first.next_page_token.is_empty());
    let second = c
        .list_jobs(list(&[], "", 1, &first.next_page_token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(names(&second), ["ok"]);
    let err = c.list_jobs(list(&[], "gone", 0, "")).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().starts_with("state:"), "{err:?}");

    // Delete removes the job and its history.
    c.delete_job(jv1::DeleteJobRequest {
        name: "flaky".into(),
    })
    .await
    .unwrap();
    let err = c
        .list_runs(jv1::ListRunsRequest {
            name: "flaky".into(),
            limit: 0,
            before: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    r.stop().await;
}
