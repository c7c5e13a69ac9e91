//! `jobsd jobs create -f FILE`: many jobs from a file of one JSON object per line, the real
//! binary against a sidecar in this process: every good line is stored with its settings, every
//! bad one is listed with its line number and the sidecar's reason (exit 2), `--overwrite`,
//! batches smaller than the file, stdin, JSON output.

mod common;

use std::sync::Arc;

use chrono::TimeDelta;
use common::app::{self, HttpApp};
use common::cli::CliOut as Out;
use common::running::Running;
use common::{sidecar_config, t0};
use jobsd::clock::ManualClock;
use jobsd::config::AppProtocol;
use jobsd::store;
use serde_json::json;

async fn sidecar(app: &HttpApp) -> Running {
    let addr = app::serve(app.clone()).await;
    let cfg = sidecar_config(Some(addr), AppProtocol::Http, &[]);
    Running::start(cfg, Arc::new(store::Memory::new()), ManualClock::new(t0())).await
}

async fn create(r: &Running, args: &[&str], input: &str) -> Out {
    let address = format!("http://{}", r.api);
    let mut all = vec!["create", "--address", &address];
    all.extend_from_slice(args);
    common::cli::jobs(&all, &[], input.as_bytes().to_vec()).await
}

#[tokio::test]
async fn a_file_of_jobs_is_created_in_batches_and_its_bad_lines_are_listed() {
    let app = HttpApp::new();
    let r = sidecar(&app).await;
    r.create("taken", r#"{"dueTime":"100s"}"#).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("jobs.ndjson");
    let mut lines = vec![
        json!({"name": "a", "dueTime": "2s", "labels": {"team": "a"}}).to_string(),
        json!({"name": "bad", "schedule": "not a schedule"}).to_string(),
        String::new(),
        "not json".to_owned(),
        json!({"name": "taken", "dueTime": "3s"}).to_string(),
    ];
    for i in 0..20 {
        lines.push(json!({"name": format!("many-{i}"), "dueTime": "4s"}).to_string());
    }
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();

    let out = create(&r, &["-f", file.to_str().unwrap(), "--batch", "7"], "").await;
    assert_eq!(out.code, 2, "{out:?}");
    let table = &out.stdout;
    let head: Vec<&str> = table.lines().take(2).collect();
    assert!(
        head[0].contains("CREATED") && head[0].contains("FAILED"),
        "{table}"
    );
    let counts: Vec<&str> = head[1].split_whitespace().collect();
    assert_eq!(&counts[..2], ["21", "3"], "{table}");
    let bad = table
        .lines()
        .find(|l| l.starts_with("2 "))
        .unwrap_or_default();
    assert!(bad.contains("bad") && bad.contains("500"), "{table}");
    assert!(bad.contains("expected exactly 6 fields"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("4 ") && l.contains("not a JSON object")),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("5 ") && l.contains("taken") && l.contains("409")),
        "{table}"
    );
    assert!(out.stderr.contains("3 jobs were not created"), "{out:?}");

    assert_eq!(r.view("a").await["labels"], json!({"team": "a"}));
    r.run_for(TimeDelta::seconds(200)).await;
    assert_eq!(app.count("a"), 1);
    assert_eq!(app.count("taken"), 1, "left as it was");
    assert_eq!(
        (0..20)
            .map(|i| app.count(&format!("many-{i}")))
            .sum::<usize>(),
        20
    );
    assert_eq!(app.count("bad"), 0);
    r.stop().await;
}

#[tokio::test]
async fn stdin_overwrite_and_json_output() {
    let app = HttpApp::new();
    let r = sidecar(&app).await;
    r.create("x", r#"{"dueTime":"100s"}"#).await;
    let input = format!(
        "{}\n{}\n",
        json!({"name": "x", "dueTime": "5s"}),
        json!({"name": "y", "dueTime": "100s", "overwrite": false})
    );
    let out = create(&r, &["--overwrite", "-o", "json"], &input).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        out.json(),
        json!({"created": 2, "failed": [], "failedCount": 0})
    );
    r.run_for(TimeDelta::seconds(10)).await;
    assert_eq!(app.count("x"), 1, "replaced: due in 5 s now");

    // A line that says `overwrite: false` keeps it, whatever the flag ("y" is still due).
    let again = format!(
        "{}\n",
        json!({"name": "y", "dueTime": "9s", "overwrite": false})
    );
    let out = create(&r, &["--overwrite", "-o", "json"], &again).await;
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(out.json()["failed"][0]["status"], "409");
    r.stop().await;
}
