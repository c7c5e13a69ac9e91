//! Issue 36: `jobsd jobs import` of a file written by the real Dapr CLI. The fixture
//! (tests/data/dapr_export/dapr-cli-v1.16.5-scheduler-v1.18.2.bin, README.md beside it says how
//! it was made) is `dapr scheduler export -o FILE` of dapr/cli v1.16.5 run against a real Dapr
//! Scheduler v1.18.2 holding 13 records: app `cliapp`'s jobs (made through a jobsd sidecar),
//! app `daprdapp`'s (made through a real daprd), actor reminders and workflow/activity
//! reminders. Each importing app gets its own jobs with their progress; the rest is counted as
//! not this app's.

mod common;

use std::sync::Arc;

use chrono::{TimeZone, Utc};
use common::app::{self, HttpApp};
use common::running::Running;
use common::sidecar_config;
use jobsd::clock::ManualClock;
use jobsd::config::AppProtocol;
use jobsd::store;
use serde_json::{Value, json};

const FIXTURE: &str = "tests/data/dapr_export/dapr-cli-v1.16.5-scheduler-v1.18.2.bin";

/// A sidecar of `app_id` in front of a recording app, its clock just after the export was
/// taken (2026-12-07T10:44:34Z + a few seconds).
async fn sidecar(app_id: &str, app: &HttpApp) -> Running {
    let addr = app::serve(app.clone()).await;
    let mut cfg = sidecar_config(Some(addr), AppProtocol::Http, &[]);
    cfg.app_id = app_id.to_owned();
    let at = Utc.with_ymd_and_hms(2026, 12, 7, 10, 45, 0).unwrap();
    Running::start(cfg, Arc::new(store::Memory::new()), ManualClock::new(at)).await
}

/// `jobsd jobs import -f FIXTURE -o json` into `r`: its summary.
async fn import(r: &Running) -> Value {
    let address = format!("http://{}", r.api);
    let out = common::cli::jobs(
        &["import", "--address", &address, "-f", FIXTURE, "-o", "json"],
        &[],
        vec![],
    )
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    out.json()
}

/// A job's data as the view shows it, unwrapped from a `google.protobuf.Value` Any.
fn data(view: &Value) -> Value {
    let d = &view["job"]["data"];
    match d.get("@type").and_then(Value::as_str) {
        Some(t) if t.ends_with("google.protobuf.Value") => d["value"].clone(),
        _ => d.clone(),
    }
}

/// What app `cliapp` had on the real Scheduler comes back with its progress: `ticked` ran its
/// due tick (count 1) and fires next an hour after it, `once` waits for 2030, `nightly` keeps
/// its ttl and data; `doomed` (every 2 s, last run at the export) catches up at once, as after
/// a restart. `daprdapp`'s jobs and the reminders are counted, not imported.
#[tokio::test]
async fn a_real_dapr_cli_export_restores_the_apps_jobs_with_their_progress() {
    let app = HttpApp::new();
    let r = sidecar("cliapp", &app).await;
    assert_eq!(
        import(&r).await,
        json!({"created": 4, "replaced": 0, "skipped": 0, "failed": [], "failedCount": 0, "notThisApp": 9})
    );

    let nightly = r.view("nightly").await;
    assert_eq!(nightly["job"]["schedule"], "0 0 2 * * *", "{nightly}");
    assert_eq!(nightly["job"]["ttl"], "8760h", "{nightly}");
    assert_eq!(data(&nightly), json!({"k": "v"}), "{nightly}");
    assert_eq!(nightly["status"]["ticks"], 0, "{nightly}");
    assert_eq!(nightly["status"]["nextFireTime"], "2026-12-08T02:00:00Z");

    let once = r.view("once").await;
    assert_eq!(once["job"]["dueTime"], "2030-01-01T00:00:00Z", "{once}");
    assert_eq!(data(&once), json!("hello"), "{once}");
    assert_eq!(once["status"]["nextFireTime"], "2030-01-01T00:00:00Z");

    let ticked = r.view("ticked").await;
    assert_eq!(
        (
            &ticked["job"]["schedule"],
            &ticked["job"]["dueTime"],
            &ticked["job"]["repeats"]
        ),
        (&json!("@every 1h"), &json!("1s"), &json!(5)),
        "{ticked}"
    );
    assert_eq!(ticked["status"]["ticks"], 1, "{ticked}");
    let next = ticked["status"]["nextFireTime"].as_str().unwrap();
    assert!(next.starts_with("2026-12-07T11:44:35"), "{ticked}");
    // The generation is the Scheduler's partition id: an etag of 16 hex digits.
    let etag = ticked["etag"].as_str().unwrap().trim_matches('"');
    assert!(
        etag.len() == 16 && etag.chars().all(|c| c.is_ascii_hexdigit()),
        "{etag}"
    );
    assert_eq!(app.count("ticked"), 0, "its due tick ran on the Scheduler");

    let doomed = r.view("doomed").await;
    assert_eq!(doomed["job"]["schedule"], "@every 2s", "{doomed}");
    assert!(app.count("doomed") > 0, "the missed ticks run");

    let listed = common::cli::jobs(
        &[
            "list",
            "--address",
            &format!("http://{}", r.api),
            "-o",
            "json",
        ],
        &[],
        vec![],
    )
    .await;
    let names: Vec<String> = listed
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["doomed", "nightly", "once", "ticked"]);
    r.stop().await;
}

/// The jobs a real daprd made (app `daprdapp`) come in for that app.
#[tokio::test]
async fn a_real_dapr_cli_export_restores_the_jobs_a_real_daprd_made() {
    let app = HttpApp::new();
    let r = sidecar("daprdapp", &app).await;
    assert_eq!(
        import(&r).await,
        json!({"created": 2, "replaced": 0, "skipped": 0, "failed": [], "failedCount": 0, "notThisApp": 11})
    );
    let cleanup = r.view("cleanup").await;
    assert_eq!(cleanup["job"]["dueTime"], "24h", "{cleanup}");
    assert_eq!(data(&cleanup), json!({"a": 1}), "{cleanup}");
    let next = cleanup["status"]["nextFireTime"].as_str().unwrap();
    assert!(next.starts_with("2026-12-08T10:44:34"), "{cleanup}");
    r.stop().await;
}

/// A job daprd made without data holds an `Any` of an empty `google.protobuf.Value` (daprd's own
/// GET of it answers 500, Dapr's bug); jobsd's own view must still show it.
#[tokio::test]
async fn a_job_daprd_made_without_data_is_shown_by_jobsds_view() {
    let app = HttpApp::new();
    let r = sidecar("daprdapp", &app).await;
    import(&r).await;
    let report = r.view("report").await;
    assert_eq!(report["job"]["schedule"], "@daily", "{report}");
    assert_eq!(report["job"]["repeats"], 10, "{report}");
    assert_eq!(
        report["job"].get("data"),
        None,
        "daprd's \"no data\": {report}"
    );
    r.stop().await;
}
