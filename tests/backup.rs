//! Issue 14: backup and restore. Jobs exported from one sidecar (with `handover`) and
//! imported into a fresh one go on where they were — same definition, same progress, same next
//! fire time, no tick delivered twice; an import is idempotent, reports bad lines by number
//! without stopping, notices a stream cut short and refuses a format it does not read; a Dapr
//! Scheduler export (dapr/cli's gob file) is read; remote mode refuses with 412.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use common::app::{self, HttpApp};
use common::replica::Rep;
use common::running::Running;
use common::{http, sidecar_config, t0};
use jobsd::clock::ManualClock;
use jobsd::config::{self, AppProtocol};
use jobsd::proto::jobsd_api::{self as jv1, jobs_client::JobsClient};
use jobsd::store::{self, Store};
use serde_json::{Value, json};

fn cfg(app: SocketAddr) -> config::Sidecar {
    sidecar_config(Some(app), AppProtocol::Http, &[])
}

async fn start_at(app: SocketAddr, at: DateTime<Utc>) -> Running {
    Running::start(
        cfg(app),
        Arc::new(store::Memory::new()),
        ManualClock::new(at),
    )
    .await
}

/// `GET /jobsd/v1/export[?query]`: status and body.
async fn export(r: &Running, query: &str) -> (u16, Vec<u8>) {
    let resp = http(r.api, "GET", &format!("/jobsd/v1/export{query}"), &[], b"").await;
    (resp.status, resp.body)
}

/// `POST /jobsd/v1/import[?query]` of `body`: status and answer.
async fn import(r: &Running, query: &str, body: &[u8]) -> (u16, Value) {
    let resp = http(
        r.api,
        "POST",
        &format!("/jobsd/v1/import{query}"),
        &[],
        body,
    )
    .await;
    (
        resp.status,
        serde_json::from_slice(&resp.body).unwrap_or(Value::Null),
    )
}

fn lines(body: &[u8]) -> Vec<Value> {
    body.split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect()
}

/// The jobs of the test, created through jobsd's API: every kind of schedule and setting an
/// export must carry.
async fn create_mixed(r: &Running) {
    let jobs = [
        (
            "cron-tz",
            json!({"schedule":"TZ=Europe/Paris 0 30 9 * * *"}),
        ),
        (
            "every",
            json!({"schedule":"@every 10s","repeats":100,"data":{"k":"v"},"labels":{"team":"a"}}),
        ),
        ("once", json!({"dueTime":"5s","data":"one-shot"})),
        ("ttl", json!({"schedule":"@every 7s","ttl":"1h"})),
        (
            "policy",
            json!({"schedule":"@every 3s","policy":{"catchUp":"latest","jitter":"1s"}}),
        ),
        ("paused", json!({"schedule":"@every 4s"})),
        (
            "flaky",
            json!({"schedule":"@every 20s","failurePolicy":{"constant":{"interval":"2s","maxRetries":5}}}),
        ),
        (
            "exp",
            json!({"schedule":"@every 6s","failurePolicy":{"exponential":{"initialInterval":"1s","multiplier":2,"maxRetries":2},"onExhausted":"pause"}}),
        ),
        (
            "later",
            json!({"dueTime":"2030-01-01T00:00:00Z","data":{"x":[1,2]}}),
        ),
    ];
    for (name, body) in jobs {
        r.create(name, &body.to_string()).await;
    }
    let (status, answer) = r
        .call(
            "POST",
            "/jobsd/v1/jobs/paused/pause",
            r#"{"note":"maintenance"}"#,
        )
        .await;
    assert_eq!(status, 204, "{answer}");
}

const NAMES: [&str; 9] = [
    "cron-tz", "every", "once", "ttl", "policy", "paused", "flaky", "exp", "later",
];

/// A job view without what only says what this process is doing with it right now.
fn lasting(mut view: Value) -> Value {
    let status = view["status"].as_object_mut().unwrap();
    // Whether a trigger is out here: none on the exporter after a handover, none yet on the
    // importer.
    status.remove("inFlight");
    view
}

/// Each `(execution id, attempt)` the app was called with, and how often.
fn deliveries(app: &HttpApp) -> Vec<(String, String, String)> {
    let mut all = Vec::new();
    for name in NAMES {
        for ctx in app.contexts(name) {
            all.push((
                name.to_owned(),
                ctx["jobsd-execution-id"].clone(),
                ctx["jobsd-attempt"].clone(),
            ));
        }
    }
    all
}

/// The move the issue asks for: export with handover, import into a fresh sidecar (another
/// store), and every job is identical on GET, fires next when it would have, and no execution
/// attempt reaches the app twice.
#[tokio::test]
async fn a_handover_export_imported_elsewhere_goes_on_where_it_was() {
    let app = HttpApp::new();
    app.status.lock().unwrap().insert("flaky".into(), 500);
    app.status.lock().unwrap().insert("exp".into(), 500);
    let addr = app::serve(app.clone()).await;
    let a = start_at(addr, t0()).await;
    create_mixed(&a).await;
    // flaky: its tick at 20 s failed at 20, 22 and 24 s; the next retry is due at 26 s.
    a.run_for(TimeDelta::seconds(25)).await;
    let (status, body) = export(&a, "?handover=true").await;
    assert_eq!(status, 200);
    let exported = lines(&body);
    assert_eq!(exported[0]["format"], "jobsd-export");
    assert_eq!(exported[0]["version"], 1);
    assert_eq!(exported[0]["app"], "myapp");
    assert_eq!(exported[0]["namespace"], "default");
    assert_eq!(exported[0]["handover"], true);
    let trailer = exported.last().unwrap();
    assert_eq!(trailer, &json!({"end": true, "jobs": exported.len() - 2}));
    let names: Vec<&str> = exported[1..exported.len() - 1]
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    // Active jobs in name order, then the finished one-shot.
    assert_eq!(
        names,
        [
            "cron-tz", "every", "exp", "flaky", "later", "paused", "policy", "ttl", "once"
        ]
    );
    let flaky = &exported[4];
    assert_eq!(flaky["progress"]["attempts"], 3, "{flaky}");
    assert_eq!(flaky["progress"]["failedAttempts"], 3, "{flaky}");
    assert!(exported[9]["finishedAt"].is_string());

    let before: BTreeMap<&str, Value> = {
        let mut m = BTreeMap::new();
        for name in NAMES {
            m.insert(name, lasting(a.view(name).await));
        }
        m
    };
    // After the handover the exporter fires nothing more.
    let delivered_by_a = deliveries(&app).len();
    a.run_for(TimeDelta::seconds(30)).await;
    assert_eq!(deliveries(&app).len(), delivered_by_a);
    let at = t0() + TimeDelta::seconds(25);
    a.stop().await;

    let b = start_at(addr, at).await;
    let (status, summary) = import(&b, "", &body).await;
    assert_eq!(status, 200, "{summary}");
    assert_eq!(
        summary,
        json!({"created": 9, "replaced": 0, "skipped": 0, "failed": [], "failedCount": 0})
    );
    for name in NAMES {
        assert_eq!(lasting(b.view(name).await), before[name], "job {name}");
    }
    // The etag (generation) moved with the job: a conditional write made against the old
    // sidecar's answer still applies.
    assert_eq!(b.view("every").await["etag"], before["every"]["etag"]);

    b.run_for(TimeDelta::seconds(60)).await;
    let seen = deliveries(&app);
    let unique: HashSet<&(String, String, String)> = seen.iter().collect();
    assert_eq!(
        unique.len(),
        seen.len(),
        "an attempt delivered twice: {seen:?}"
    );
    // flaky went on with attempt 4 of the same execution, at 26 s.
    let flaky_ctx = app.contexts("flaky");
    let fourth = &flaky_ctx[3];
    assert_eq!(fourth["jobsd-attempt"], "4");
    assert_eq!(
        fourth["jobsd-execution-id"],
        flaky_ctx[0]["jobsd-execution-id"]
    );
    assert_eq!(fourth["jobsd-scheduled-time"], "2026-01-01T00:00:20Z");
    // every went on from its tick count, not from scratch.
    let every = b.view("every").await;
    assert_eq!(every["status"]["ticks"], 8, "{every}");
    assert_eq!(app.contexts("every").len(), 8);
    assert_eq!(
        app.count("once"),
        1,
        "a one-shot that ran does not run again"
    );
    assert_eq!(
        b.view("paused").await["status"]["state"],
        "paused",
        "still paused"
    );
    b.stop().await;
}

/// A file imported twice is skipped the second time; `overwrite` replaces jobs changed since
/// with the file's version, progress and all.
#[tokio::test]
async fn an_import_skips_what_exists_unless_it_overwrites() {
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let a = start_at(addr, t0()).await;
    a.create("j1", r#"{"schedule":"@every 10s"}"#).await;
    a.create("j2", r#"{"schedule":"@every 1h","labels":{"v":"1"}}"#)
        .await;
    a.run_for(TimeDelta::seconds(35)).await;
    let (_, file) = export(&a, "").await;
    a.stop().await;

    let b = start_at(addr, t0() + TimeDelta::seconds(35)).await;
    let (_, first) = import(&b, "", &file).await;
    assert_eq!(
        (first["created"].clone(), first["skipped"].clone()),
        (json!(2), json!(0))
    );
    let (status, again) = import(&b, "", &file).await;
    assert_eq!(status, 200);
    assert_eq!(
        again,
        json!({"created": 0, "replaced": 0, "skipped": 2, "failed": [], "failedCount": 0})
    );
    // Changed since: the skip leaves the change; overwrite brings the file's version back.
    b.create(
        "j2",
        r#"{"schedule":"@every 5m","labels":{"v":"2"},"overwrite":true}"#,
    )
    .await;
    let (_, skipped) = import(&b, "", &file).await;
    assert_eq!(skipped["skipped"], 2);
    assert_eq!(b.view("j2").await["labels"]["v"], "2");
    let (status, replaced) = import(&b, "?overwrite=true", &file).await;
    assert_eq!(status, 200, "{replaced}");
    assert_eq!(replaced["replaced"], 2);
    let j2 = b.view("j2").await;
    assert_eq!(j2["labels"]["v"], "1");
    assert_eq!(j2["job"]["schedule"], "@every 1h");
    assert_eq!(b.view("j1").await["status"]["ticks"], 3);
    // A bad flag value is refused, naming it.
    let (status, answer) = import(&b, "?overwrite=maybe", &file).await;
    assert_eq!(status, 400, "{answer}");
    assert!(answer["message"].as_str().unwrap().contains("overwrite"));
    b.stop().await;
}

/// One bad line does not stop the import: it is reported with its line number (and name when
/// it has one), and every good line is imported.
#[tokio::test]
async fn bad_lines_are_reported_by_number_and_the_rest_imported() {
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let a = start_at(addr, t0()).await;
    a.create("good1", r#"{"schedule":"@every 10s"}"#).await;
    a.create("good2", r#"{"schedule":"@every 20s"}"#).await;
    let (_, file) = export(&a, "").await;
    a.stop().await;
    let text = String::from_utf8(file).unwrap();
    let mut rows: Vec<String> = text.lines().map(str::to_owned).collect();
    let good = rows[1].clone();
    let bad_schedule = good
        .replace("\"good1\"", "\"badsched\"")
        .replace("@every 10s", "every ten seconds");
    let misspelt = good
        .replace("\"good1\"", "\"typo\"")
        .replace("\"job\":", "\"jobb\":");
    rows.insert(2, "{not json".to_owned());
    rows.insert(3, bad_schedule);
    rows.insert(4, misspelt);
    // The trailer counts every job line, good or bad.
    let last = rows.len() - 1;
    rows[last] = r#"{"end":true,"jobs":5}"#.to_owned();
    let body = rows.join("\n") + "\n";

    let b = start_at(addr, t0()).await;
    let (status, summary) = import(&b, "", body.as_bytes()).await;
    assert_eq!(status, 200, "{summary}");
    assert_eq!(summary["created"], 2, "{summary}");
    assert_eq!(summary["failedCount"], 3, "{summary}");
    let failed = summary["failed"].as_array().unwrap();
    let at: Vec<(u64, &str)> = failed
        .iter()
        .map(|f| (f["line"].as_u64().unwrap(), f["name"].as_str().unwrap()))
        .collect();
    assert_eq!(at, [(3, ""), (4, "badsched"), (5, "typo")], "{summary}");
    assert!(
        failed[1]["error"]
            .as_str()
            .unwrap()
            .contains("every ten seconds")
    );
    assert!(failed[2]["error"].as_str().unwrap().contains("jobb"));
    b.view("good1").await;
    b.view("good2").await;
    b.stop().await;
}

/// A stream cut short (mid-line, or between lines) imports what came before it and says it
/// was cut: the trailer line is missing.
#[tokio::test]
async fn a_truncated_stream_imports_what_came_before_and_says_so() {
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let a = start_at(addr, t0()).await;
    for i in 0..5 {
        a.create(&format!("j{i}"), r#"{"schedule":"@every 10s"}"#)
            .await;
    }
    let (_, file) = export(&a, "").await;
    a.stop().await;
    let text = String::from_utf8(file).unwrap();
    let rows: Vec<&str> = text.lines().collect();
    // Header, j0, j1, and half of j2.
    let cut = format!("{}\n{}\n{}\n{}", rows[0], rows[1], rows[2], &rows[3][..40]);

    let b = start_at(addr, t0()).await;
    let (status, summary) = import(&b, "", cut.as_bytes()).await;
    assert_eq!(status, 200, "{summary}");
    assert_eq!(summary["created"], 2, "{summary}");
    let failed = summary["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 2, "{summary}");
    assert_eq!(failed[0]["line"], 4);
    assert!(
        failed[0]["error"].as_str().unwrap().contains("cut short"),
        "{summary}"
    );
    assert_eq!(failed[1]["line"], 5);
    assert!(
        failed[1]["error"].as_str().unwrap().contains("trailer"),
        "{summary}"
    );
    // Cut between lines: only the missing trailer tells.
    let cut = format!("{}\n{}\n", rows[0], rows[1]);
    let (_, summary) = import(&b, "", cut.as_bytes()).await;
    assert_eq!(summary["skipped"], 1, "{summary}");
    assert_eq!(summary["failed"][0]["line"], 3, "{summary}");
    b.stop().await;
}

/// What is not an export of a version this jobsd reads is refused before anything is
/// written, saying what was found.
#[tokio::test]
async fn other_versions_and_other_formats_are_refused_whole() {
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let b = start_at(addr, t0()).await;
    let job = r#"{"name":"x","generation":"0000000000000001","job":{"schedule":"@every 1s"},"start":"2026-01-01T00:00:00Z"}"#;
    let v2 = format!(
        "{{\"format\":\"jobsd-export\",\"version\":2}}\n{job}\n{{\"end\":true,\"jobs\":1}}\n"
    );
    let (status, answer) = import(&b, "", v2.as_bytes()).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["errorCode"], "ERR_MALFORMED_REQUEST");
    let message = answer["message"].as_str().unwrap();
    assert!(message.contains("version 2 is not supported"), "{message}");
    assert_eq!(b.call("GET", "/jobsd/v1/jobs/x", "").await.0, 404);

    let (status, answer) = import(&b, "", b"\x00\x01binary stuff").await;
    assert_eq!(status, 400, "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(message.contains("not a jobsd export"), "{message}");
    assert!(message.contains("00 01"), "{message}");

    let (status, answer) = import(&b, "", br#"{"some":"json"}"#).await;
    assert_eq!(status, 400, "{answer}");

    // Version 1 with the same line goes in.
    let v1 = v2.replace("\"version\":2", "\"version\":1");
    let (status, answer) = import(&b, "", v1.as_bytes()).await;
    assert_eq!(
        (status, answer["created"].clone()),
        (200, json!(1)),
        "{answer}"
    );
    b.stop().await;
}

/// `dapr scheduler export` output (tests/data/dapr_export, written by Go's encoding/gob as
/// dapr/cli does): this app's jobs come in with their progress; other apps' jobs and actor
/// reminders are counted, not imported.
#[tokio::test]
async fn a_dapr_scheduler_export_is_imported() {
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let b = start_at(addr, t0()).await;
    let file = std::fs::read("tests/data/dapr_export/dapr-scheduler-export.gob").unwrap();
    let (status, summary) = import(&b, "", &file).await;
    assert_eq!(status, 200, "{summary}");
    assert_eq!(
        summary,
        json!({"created": 2, "replaced": 0, "skipped": 0, "failed": [], "failedCount": 0, "notThisApp": 2})
    );
    let nightly = b.view("nightly").await;
    assert_eq!(nightly["job"]["schedule"], "0 0 2 * * *");
    assert_eq!(nightly["job"]["ttl"], "8760h");
    assert_eq!(nightly["status"]["ticks"], 3, "{nightly}");
    assert_eq!(nightly["status"]["currentAttempt"], 2, "{nightly}");
    assert_eq!(nightly["etag"], "\"000000000000002a\"");
    let once = b.view("once").await;
    assert_eq!(once["job"]["dueTime"], "2030-01-01T00:00:00Z");
    assert_eq!(
        once["job"]["data"],
        json!({"@type":"type.googleapis.com/google.protobuf.StringValue","value":"hello"})
    );
    assert_eq!(
        once["status"]["ticks"], 0,
        "another version's counter is not taken"
    );
    assert_eq!(once["status"]["nextFireTime"], "2030-01-01T00:00:00Z");
    // A gob of something else is named as such.
    let mut other = file.clone();
    let at = other.windows(8).position(|w| w == b"Counters").unwrap();
    other[at..at + 8].copy_from_slice(b"Countres");
    let (status, answer) = import(&b, "", &other).await;
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("Dapr Scheduler export"),
        "{answer}"
    );
    b.stop().await;
}

/// The gRPC methods carry the same bytes: an export streamed from one sidecar and streamed
/// into another restores the same jobs.
#[tokio::test]
async fn grpc_export_and_import_move_the_same_jobs() {
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let a = start_at(addr, t0()).await;
    for i in 0..2500 {
        a.create(&format!("g{i:04}"), r#"{"schedule":"@every 1h"}"#)
            .await;
    }
    let mut ca = JobsClient::connect(format!("http://{}", a.sidecar.grpc_addrs[0]))
        .await
        .unwrap();
    let mut stream = ca
        .export_jobs(jv1::ExportJobsRequest { handover: false })
        .await
        .unwrap()
        .into_inner();
    let mut chunks = Vec::new();
    while let Some(chunk) = stream.message().await.unwrap() {
        chunks.push(chunk.ndjson);
    }
    assert!(chunks.len() > 2, "streamed in pages, not at once");
    let (_, http_file) = export(&a, "").await;
    let grpc_file = chunks.concat();
    // Same lines but the header's time.
    let skip_header = |f: &[u8]| {
        let at = f.iter().position(|b| *b == b'\n').unwrap();
        f[at..].to_vec()
    };
    assert_eq!(skip_header(&grpc_file), skip_header(&http_file));
    a.stop().await;

    let b = start_at(addr, t0()).await;
    let mut cb = JobsClient::connect(format!("http://{}", b.sidecar.grpc_addrs[0]))
        .await
        .unwrap();
    // Split anywhere, not on lines.
    let pieces: Vec<jv1::ImportJobsChunk> = grpc_file
        .chunks(7777)
        .enumerate()
        .map(|(i, piece)| jv1::ImportJobsChunk {
            ndjson: piece.to_vec(),
            overwrite: i == 0,
        })
        .collect();
    let summary = cb
        .import_jobs(futures_util::stream::iter(pieces))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (summary.created, summary.replaced, summary.failed_count),
        (2500, 0, 0)
    );
    b.view("g2499").await;
    b.stop().await;
}

/// Remote mode keeps no progress to export: both routes answer 412, naming why.
#[tokio::test]
async fn remote_mode_refuses_export_and_import() {
    let rep = Rep::start().await;
    let side =
        jobsd::app::Sidecar::start(sidecar_config(None, AppProtocol::Http, &[rep.address()]))
            .await
            .unwrap();
    let api = side.http_addrs[0];
    for (method, path) in [("GET", "/jobsd/v1/export"), ("POST", "/jobsd/v1/import")] {
        let r = http(api, method, path, &[], b"").await;
        assert_eq!(r.status, 412, "{method} {path}: {}", r.text());
        assert!(r.text().contains("embedded scheduler"), "{}", r.text());
    }
    side.shutdown_token().cancel();
    side.wait().await.unwrap();
}

/// The routes sit behind the API token like every other.
#[tokio::test]
async fn the_routes_need_the_token() {
    let app = HttpApp::new();
    let addr = app::serve(app.clone()).await;
    let mut config = cfg(addr);
    config.api_token = Some("s3cret".into());
    let store: Arc<dyn Store> = Arc::new(store::Memory::new());
    let r = Running::start(config, store, ManualClock::new(t0())).await;
    for (method, path) in [("GET", "/jobsd/v1/export"), ("POST", "/jobsd/v1/import")] {
        let r = http(r.api, method, path, &[], b"").await;
        assert_eq!(r.status, 401, "{method} {path}");
    }
    let ok = http(
        r.api,
        "GET",
        "/jobsd/v1/export",
        &[("dapr-api-token", "s3cret")],
        b"",
    )
    .await;
    assert_eq!(ok.status, 200);
    r.stop().await;
}
