//! Many creates in one call: gRPC `jobsd.v1.Jobs/ScheduleJobs` and `POST /jobsd/v1/jobs:batch`
//! on a real sidecar (manual clock, real HTTP app): every job is answered exactly as its own
//! create would be (Dapr's errors for the job, jobsd's for labels and policies), the accepted
//! ones are stored and fire, Dapr's GET shows them as daprd would, and a batch refused as a
//! whole stores nothing.

mod common;

use std::sync::Arc;

use chrono::TimeDelta;
use common::app::{self, HttpApp};
use common::running::Running;
use common::{http, sidecar_config, t0};
use jobsd::clock::ManualClock;
use jobsd::config::AppProtocol;
use jobsd::proto::jobsd_api::{self as jv1, jobs_client::JobsClient};
use jobsd::proto::runtime as rv1;
use jobsd::seam::MAX_SCHEDULE_BATCH;
use jobsd::store;
use serde_json::{Value, json};
use tonic::Code;
use tonic::transport::Channel;

async fn start(app: &HttpApp) -> Running {
    let addr = app::serve(app.clone()).await;
    Running::start(
        sidecar_config(Some(addr), AppProtocol::Http, &[]),
        Arc::new(store::Memory::new()),
        ManualClock::new(t0()),
    )
    .await
}

async fn client(r: &Running) -> JobsClient<Channel> {
    JobsClient::connect(format!("http://{}", r.sidecar.grpc_addrs[0]))
        .await
        .unwrap()
}

fn job(name: &str, due: &str, labels: &[(&str, &str)]) -> jv1::ScheduleJobRequest {
    jv1::ScheduleJobRequest {
        job: Some(rv1::Job {
            name: name.into(),
            due_time: Some(due.into()),
            data: Some(prost_types::Any {
                type_url: "type.googleapis.com/google.protobuf.StringValue".into(),
                value: prost::Message::encode_to_vec(&format!("data of {name}")),
            }),
            ..Default::default()
        }),
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..Default::default()
    }
}

/// What a single ScheduleJob answers for `req`: `(code, message)`.
async fn alone(c: &mut JobsClient<Channel>, req: jv1::ScheduleJobRequest) -> (i32, String) {
    match c.schedule_job(req).await {
        Ok(_) => (0, String::new()),
        Err(s) => (s.code() as i32, s.message().to_owned()),
    }
}

#[tokio::test]
async fn grpc_batch_answers_each_job_as_its_own_create_and_stores_the_accepted_ones() {
    let app = HttpApp::new();
    let r = start(&app).await;
    let mut c = client(&r).await;
    c.schedule_job(job("existing", "100s", &[])).await.unwrap();

    let batch = vec![
        job("a", "2s", &[("team", "a")]),
        job("bad-due", "not a time", &[]),
        job("bad-label", "3s", &[("bad key", "v")]),
        job("existing", "4s", &[]),
        job("b", "5s", &[]),
        job("a", "6s", &[]),
        job("", "7s", &[]),
    ];
    let answers = c
        .schedule_jobs(jv1::ScheduleJobsRequest {
            jobs: batch.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .results;
    let names: Vec<_> = answers.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        ["a", "bad-due", "bad-label", "existing", "b", "a", ""]
    );
    let codes: Vec<_> = answers.iter().map(|a| Code::from(a.code)).collect();
    assert_eq!(
        codes,
        [
            Code::Ok,
            // daprd's answer to a job that fails validation.
            Code::Internal,
            Code::InvalidArgument,
            Code::AlreadyExists,
            Code::Ok,
            Code::AlreadyExists,
            Code::InvalidArgument,
        ],
        "{answers:?}"
    );

    // The refusals are word for word what a create of each alone answers (on a sidecar
    // where "a" and "existing" exist, as they did for the batch's later entries).
    let other = HttpApp::new();
    let fresh = start(&other).await;
    let mut f = client(&fresh).await;
    for name in ["existing", "a"] {
        f.schedule_job(job(name, "100s", &[])).await.unwrap();
    }
    for (req, answer) in batch.into_iter().zip(&answers) {
        if answer.code == 0 {
            continue;
        }
        assert_eq!(
            alone(&mut f, req).await,
            (answer.code, answer.message.clone()),
            "{}",
            answer.name
        );
    }
    fresh.stop().await;

    // The accepted ones are stored as daprd shows them, with jobsd's settings beside them.
    let dapr = http(r.api, "GET", "/v1.0-alpha1/jobs/a", &[], b"").await;
    assert_eq!(dapr.status, 200, "{}", dapr.text());
    assert_eq!(dapr.json()["dueTime"], "2s");
    assert!(dapr.json().get("labels").is_none());
    assert_eq!(r.view("a").await["labels"], json!({"team": "a"}));
    for name in ["bad-due", "bad-label"] {
        let (status, _) = r.call("GET", &format!("/jobsd/v1/jobs/{name}"), "").await;
        assert_eq!(status, 404, "{name} was not stored");
    }

    // And they fire, once each, with their data.
    r.run_for(TimeDelta::seconds(200)).await;
    assert_eq!(app.count("a"), 1);
    assert_eq!(app.count("b"), 1);
    assert_eq!(app.count("existing"), 1);
    assert_eq!(app.count("bad-label"), 0);
    assert!(
        app.bodies("b")[0].contains("data of b"),
        "{:?}",
        app.bodies("b")
    );
    r.stop().await;
}

#[tokio::test]
async fn a_batch_refused_as_a_whole_stores_nothing() {
    let app = HttpApp::new();
    let r = start(&app).await;
    let mut c = client(&r).await;

    let too_many: Vec<_> = (0..=MAX_SCHEDULE_BATCH)
        .map(|i| job(&format!("j{i}"), "1h", &[]))
        .collect();
    let err = c
        .schedule_jobs(jv1::ScheduleJobsRequest { jobs: too_many })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(
        err.message(),
        format!(
            "jobs: at most {MAX_SCHEDULE_BATCH} per call, got {}",
            MAX_SCHEDULE_BATCH + 1
        )
    );

    let mut req = tonic::Request::new(jv1::ScheduleJobsRequest {
        jobs: vec![job("keyed", "1h", &[])],
    });
    req.metadata_mut()
        .insert("idempotency-key", "k1".parse().unwrap());
    let err = c.schedule_jobs(req).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("Idempotency-Key"),
        "{}",
        err.message()
    );

    let (status, body) = r
        .call("POST", "/jobsd/v1/jobs:batch", r#"{"jobs": {"a": 1}}"#)
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["message"], "jobs: expected an array");

    let (_, list) = r.call("GET", "/jobsd/v1/jobs", "").await;
    assert_eq!(list["jobs"], json!([]), "nothing stored: {list}");
    r.stop().await;
}

#[tokio::test]
async fn http_batch_answers_each_job_with_its_own_creates_status_and_body() {
    let app = HttpApp::new();
    let r = start(&app).await;
    r.create("existing", r#"{"dueTime":"100s"}"#).await;

    let entries = json!([
        {"name": "a", "dueTime": "2s", "data": {"n": 1}, "labels": {"team": "a"}},
        {"name": "bad", "schedule": "not a schedule"},
        {"name": "existing", "dueTime": "3s"},
        {"name": "over", "dueTime": "4s"},
        {"name": "over", "dueTime": "5s", "overwrite": true, "policy": {"overlap": "skip"}},
        {"name": "bad-policy", "dueTime": "5s", "policy": {"overlap": "sometimes"}},
        {"dueTime": "6s"},
        "not an object",
    ]);
    let (status, body) = r
        .call(
            "POST",
            "/jobsd/v1/jobs:batch",
            &json!({ "jobs": entries }).to_string(),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let results = body["results"].as_array().unwrap();
    let statuses: Vec<_> = results
        .iter()
        .map(|r| r["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [204, 500, 409, 204, 204, 400, 400, 400], "{body}");

    // Each refusal is the body its own create answers (on a sidecar holding what the batch
    // had stored before that entry).
    let other = HttpApp::new();
    let fresh = start(&other).await;
    fresh.create("existing", r#"{"dueTime":"100s"}"#).await;
    for (entry, result) in entries.as_array().unwrap().iter().zip(results) {
        if result["status"] == 204 {
            continue;
        }
        let Some(name) = entry.get("name").and_then(Value::as_str) else {
            continue;
        };
        let mut fields = entry.as_object().unwrap().clone();
        fields.remove("name");
        let (status, own) = fresh
            .call(
                "POST",
                &format!("/jobsd/v1/jobs/{name}"),
                &Value::Object(fields).to_string(),
            )
            .await;
        assert_eq!(
            u64::from(status),
            result["status"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(own, result["error"], "{name}");
    }
    fresh.stop().await;
    // A nameless entry is refused as daprd refuses a create without a name.
    let nameless = results[6]["error"]["message"].as_str().unwrap_or_default();
    assert!(nameless.contains("empty"), "{body}");
    assert_eq!(
        results[7]["error"]["message"],
        "jobs[7]: expected an object"
    );

    assert_eq!(r.view("a").await["labels"], json!({"team": "a"}));
    assert_eq!(r.view("over").await["policy"]["overlap"], "skip");
    r.run_for(TimeDelta::seconds(200)).await;
    assert_eq!(app.count("a"), 1);
    assert_eq!(app.count("over"), 1);
    assert_eq!(app.count("existing"), 1);
    assert_eq!(app.count("bad"), 0);
    r.stop().await;
}
