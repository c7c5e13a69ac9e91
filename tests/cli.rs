//! Issue 14: the `jobsd jobs …` command line. The real `jobsd` binary runs against a sidecar
//! in this process (a real HTTP app behind it, a `--test-clock` standing at `t0()`, so the
//! relative times it prints are exact), against a `jobsd scheduler` replica (`--scheduler`),
//! and with no server at all (`preview`).

mod common;

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::Arc;

use common::app::{self, HttpApp};
use common::dapr_scheduler::DaprScheduler;
use common::replica::Rep;
use common::running::Running;
use common::{eventually, sidecar_config, t0};
use jobsd::clock::ManualClock;
use jobsd::config::AppProtocol;
use jobsd::proto::dapr_scheduler as sv1;
use jobsd::store;
use serde_json::Value;

type Out = common::cli::CliOut;

/// Runs `jobsd jobs <args>` with `env` and stdin from `input` (not a terminal either way).
async fn jobsd_env(args: &[&str], env: &[(&str, &str)], input: &str) -> Out {
    common::cli::jobs(args, env, input.as_bytes().to_vec()).await
}

async fn jobsd(args: &[&str]) -> Out {
    jobsd_env(args, &[], "").await
}

/// A sidecar of `myapp` on a test clock at `t0()`, with `app` behind it, and `token` as its
/// `DAPR_API_TOKEN`.
async fn sidecar(app: &HttpApp, token: Option<&str>) -> Running {
    let addr = app::serve(app.clone()).await;
    let mut cfg = sidecar_config(Some(addr), AppProtocol::Http, &[]);
    cfg.test_clock = true;
    cfg.api_token = token.map(str::to_owned);
    Running::start(cfg, Arc::new(store::Memory::new()), ManualClock::new(t0())).await
}

fn address(r: &Running) -> String {
    format!("http://{}", r.api)
}

/// Moves the sidecar's test clock by `by` (every tick on the way delivered).
async fn advance(r: &Running, by: &str) {
    let (status, body) = r
        .call(
            "POST",
            "/jobsd/v1/clock/advance",
            &format!(r#"{{"by":"{by}"}}"#),
        )
        .await;
    assert_eq!(status, 200, "{body}");
}

/// A port nothing listens on.
fn closed_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// Every page arrives, in name order, as one aligned table (header once), a JSON array or a
/// YAML sequence; the filters reach the route; next and last fire read as relative times
/// from the sidecar's clock.
#[tokio::test]
async fn list_streams_every_page_in_every_format() {
    let app = HttpApp::new();
    let r = sidecar(&app, None).await;
    for (name, body) in [
        (
            "report-eu",
            r#"{"schedule":"@every 10s","labels":{"team":"billing"}}"#,
        ),
        (
            "report-us",
            r#"{"schedule":"@every 1h","labels":{"team":"billing"}}"#,
        ),
        ("cleanup", r#"{"dueTime":"90s"}"#),
        ("backup-1", r#"{"schedule":"@every 30m"}"#),
        ("backup-2", r#"{"schedule":"@every 30m"}"#),
    ] {
        r.create(name, body).await;
    }
    advance(&r, "12s").await;
    assert_eq!(app.count("report-eu"), 1);
    let (status, _) = r.call("POST", "/jobsd/v1/jobs/backup-2/pause", "").await;
    assert_eq!(status, 204);
    let addr = address(&r);

    // Two jobs a page: three pages, one table.
    let out = jobsd(&["--address", &addr, "list", "--page-size", "2"]).await;
    assert_eq!(
        out.ok(),
        "\
NAME       STATE   SCHEDULE    NEXT FIRE   LAST FIRE  OUTCOME  LABELS
backup-1   active  @every 30m  in 29m 48s  -          -        -
backup-2   paused  @every 30m  -           -          -        -
cleanup    active  at 90s      in 1m 18s   -          -        -
report-eu  active  @every 10s  in 8s       2s ago     success  team=billing
report-us  active  @every 1h   in 59m 48s  -          -        team=billing
"
    );

    let wide = jobsd(&[
        "--address",
        &addr,
        "list",
        "-o",
        "wide",
        "--prefix",
        "report-eu",
    ])
    .await;
    let lines: Vec<&str> = wide.ok().lines().collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    for column in ["NEXT FIRE (UTC)", "DELIVERED", "SUCCEEDED", "NOTE"] {
        assert!(lines[0].contains(column), "{column} in {}", lines[0]);
    }
    assert!(lines[1].contains("2026-01-01T00:00:20Z"), "{}", lines[1]);
    assert!(lines[1].contains("2026-01-01T00:00:10Z"), "{}", lines[1]);

    // JSON: one array of jobsd's GET bodies, every page.
    let json = jobsd(&["--address", &addr, "list", "-o", "json", "--page-size", "2"]).await;
    let jobs = json.json();
    let names: Vec<&str> = jobs
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["backup-1", "backup-2", "cleanup", "report-eu", "report-us"]
    );
    assert_eq!(jobs[3]["status"]["counters"]["succeeded"], 1);
    assert_eq!(jobs[3]["job"]["schedule"], "@every 10s");

    // Filters: label, state, prefix, limit.
    let by_label = jobsd(&[
        "--address",
        &addr,
        "list",
        "-l",
        "team=billing",
        "-o",
        "json",
    ])
    .await
    .json();
    assert_eq!(by_label.as_array().unwrap().len(), 2);
    let paused = jobsd(&[
        "--address",
        &addr,
        "list",
        "--state",
        "paused",
        "-o",
        "json",
    ])
    .await
    .json();
    assert_eq!(paused[0]["name"], "backup-2");
    assert_eq!(paused.as_array().unwrap().len(), 1);
    let limited = jobsd(&[
        "--address",
        &addr,
        "list",
        "--prefix",
        "backup",
        "--limit",
        "1",
        "-o",
        "json",
    ])
    .await
    .json();
    assert_eq!(limited.as_array().unwrap().len(), 1);

    // YAML: one sequence across pages.
    let yaml = jobsd(&["--address", &addr, "list", "-o", "yaml", "--page-size", "2"]).await;
    let parsed: Vec<Value> = serde_saphyr::from_str(yaml.ok()).unwrap();
    assert_eq!(parsed.len(), 5);
    assert_eq!(parsed[4]["labels"]["team"], "billing");

    // Nothing selected: the header alone, an empty array.
    let none = jobsd(&["--address", &addr, "list", "--prefix", "zzz"]).await;
    assert_eq!(none.ok().lines().count(), 1);
    let none = jobsd(&["--address", &addr, "list", "--prefix", "zzz", "-o", "json"]).await;
    assert_eq!(none.json(), serde_json::json!([]));
    r.stop().await;
}

/// `get` describes a job (status, counters, relative times); `runs` pages through the
/// history newest first; JSON and YAML are the routes' bodies.
#[tokio::test]
async fn get_and_runs_show_status_and_history() {
    let app = HttpApp::new();
    app.status.lock().unwrap().insert("flaky".into(), 503);
    let r = sidecar(&app, None).await;
    r.create(
        "flaky",
        r#"{"schedule":"@every 10s","labels":{"team":"ops"},"failurePolicy":{"drop":{}}}"#,
    )
    .await;
    advance(&r, "35s").await;
    assert_eq!(app.count("flaky"), 3);
    let addr = address(&r);

    let get = jobsd(&["--address", &addr, "get", "flaky"]).await;
    let text = get.ok();
    for line in [
        "Name:            flaky",
        "State:           active",
        "Schedule:        @every 10s",
        "Labels:          team=ops",
        "Next fire:       in 5s (2026-01-01T00:00:40Z)",
        "Last fire:       5s ago (2026-01-01T00:00:30Z), nominal 2026-01-01T00:00:30Z",
        "Last outcome:    failed: app responded with HTTP status 503",
        "Counters:        delivered 3, succeeded 0, failed attempts 3, dropped 3, staged 0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} in\n{text}");
    }
    // Then its next fire times, from the sidecar's `…/next` route.
    let at = text.find("Next fire times (UTC):\n").expect(text);
    let next: Vec<&str> = text[at..].lines().collect();
    assert_eq!(next.len(), 2 + 5, "{next:?}");
    assert!(next[1].starts_with("#  TIME (UTC)"), "{next:?}");
    assert!(
        next[2].starts_with("1  2026-01-01T00:00:40Z  2026-01-01T00:00:40Z  UTC   in 5s"),
        "{next:?}"
    );
    let view = jobsd(&["--address", &addr, "get", "flaky", "-o", "json"])
        .await
        .json();
    assert_eq!(view["name"], "flaky");
    assert_eq!(view["status"]["counters"]["delivered"], 3);
    let yaml = jobsd(&["--address", &addr, "get", "flaky", "-o", "yaml"]).await;
    let parsed: Value = serde_saphyr::from_str(yaml.ok()).unwrap();
    assert_eq!(parsed, view);

    let runs = jobsd(&["--address", &addr, "runs", "flaky"]).await;
    let lines: Vec<&str> = runs.ok().lines().collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(lines[0].starts_with("STARTED  EXECUTION"), "{}", lines[0]);
    // Newest first: the tick of 00:00:30, 5 s before the clock's now.
    assert!(lines[1].starts_with("5s ago "), "{}", lines[1]);
    for cell in ["schedule", "2026-01-01T00:00:30Z", "failed", "HTTP 503"] {
        assert!(lines[1].contains(cell), "{cell} in {}", lines[1]);
    }
    assert!(lines[3].contains("2026-01-01T00:00:10Z"), "{}", lines[3]);
    // Paged behind the scenes: a limit of 2 is two runs; JSON is one array of them.
    let two = jobsd(&[
        "--address",
        &addr,
        "runs",
        "flaky",
        "--limit",
        "2",
        "-o",
        "json",
    ])
    .await
    .json();
    let two = two.as_array().unwrap();
    assert_eq!(two.len(), 2);
    assert_eq!(two[0]["nominalTime"], "2026-01-01T00:00:30Z");
    let below = two[1]["seq"].as_u64().unwrap().to_string();
    let rest = jobsd(&[
        "--address",
        &addr,
        "runs",
        "flaky",
        "--before",
        &below,
        "-o",
        "json",
    ])
    .await
    .json();
    assert_eq!(rest.as_array().unwrap().len(), 1);
    assert_eq!(rest[0]["nominalTime"], "2026-01-01T00:00:10Z");
    r.stop().await;
}

/// Pause and resume by name (with a note) and in bulk, run now and backfill: each reaches the
/// sidecar and says what it did.
#[tokio::test]
async fn pause_resume_trigger_and_backfill() {
    let app = HttpApp::new();
    let r = sidecar(&app, None).await;
    for name in ["batch-eu", "batch-us", "other"] {
        r.create(
            name,
            r#"{"schedule":"0 0 * * * *","labels":{"team":"billing"}}"#,
        )
        .await;
    }
    let addr = address(&r);

    let out = jobsd(&[
        "--address",
        &addr,
        "pause",
        "other",
        "--note",
        "db migration",
    ])
    .await;
    assert_eq!(out.ok(), "job other: paused\n");
    let view = r.view("other").await;
    assert_eq!(view["status"]["pausedNote"], "db migration");

    let out = jobsd(&[
        "--address",
        &addr,
        "pause",
        "--prefix",
        "batch-",
        "-l",
        "team=billing",
    ])
    .await;
    assert_eq!(out.ok(), "paused 2 job(s): batch-eu, batch-us\n");
    assert_eq!(r.view("batch-us").await["status"]["state"], "paused");
    let out = jobsd(&["--address", &addr, "resume", "--all", "-o", "json"]).await;
    assert_eq!(out.json()["count"], 3);
    assert_eq!(r.view("other").await["status"]["state"], "active");
    let view = jobsd(&["--address", &addr, "pause", "other", "-o", "json"])
        .await
        .json();
    assert_eq!(view["status"]["state"], "paused");
    let out = jobsd(&["--address", &addr, "resume", "other"]).await;
    assert_eq!(out.ok(), "job other: active\n");

    // Run now: the app gets a manual call.
    let out = jobsd(&["--address", &addr, "trigger", "batch-eu", "-o", "json"]).await;
    let id = out.json()["executionId"].as_str().unwrap().to_owned();
    eventually("the manual run", async || app.count("batch-eu") == 1).await;
    let contexts = app.contexts("batch-eu");
    assert_eq!(contexts[0]["jobsd-execution-id"], id);
    assert_eq!(contexts[0]["jobsd-trigger"], "manual");
    let out = jobsd(&[
        "--address",
        &addr,
        "trigger",
        "batch-us",
        "--overlap",
        "allow",
    ])
    .await;
    assert!(
        out.ok().starts_with("triggered job batch-us: execution "),
        "{out:?}"
    );

    // Backfill three hours: three ticks, in order.
    let out = jobsd(&[
        "--address",
        &addr,
        "backfill",
        "other",
        "--start",
        "2025-12-31T00:00:00Z",
        "--end",
        "2025-12-31T03:00:00Z",
    ])
    .await;
    let lines: Vec<&str> = out.ok().lines().collect();
    assert_eq!(lines[0], "backfilling 3 tick(s) of job other, in order:");
    assert!(lines[2].starts_with("2025-12-31T00:00:00Z  "), "{lines:?}");
    assert!(lines[4].starts_with("2025-12-31T02:00:00Z  "), "{lines:?}");
    eventually("the backfilled runs", async || app.count("other") == 3).await;
    r.stop().await;
}

/// A delete by name needs the job to exist; a delete of many asks, refuses without a terminal
/// and `--yes`, and deletes them all with it.
#[tokio::test]
async fn delete_by_name_and_by_selection() {
    let app = HttpApp::new();
    let r = sidecar(&app, None).await;
    for name in ["tmp-1", "tmp-2", "tmp-3", "keep"] {
        r.create(
            name,
            r#"{"schedule":"@every 1h","labels":{"kind":"scratch"}}"#,
        )
        .await;
    }
    let addr = address(&r);

    let missing = jobsd(&["--address", &addr, "delete", "nope"]).await;
    assert_eq!(missing.code, 3, "{missing:?}");
    assert!(missing.stderr.contains("ERR_JOB_NOT_FOUND"), "{missing:?}");

    // One job by name from a script: no question asked.
    let out = jobsd(&["--address", &addr, "delete", "tmp-1"]).await;
    assert_eq!(out.ok(), "deleted job tmp-1\n");
    let (status, _) = r.call("GET", "/jobsd/v1/jobs/tmp-1", "").await;
    assert_eq!(status, 404);

    // Many, without a terminal: refused, nothing deleted (even with "y" on stdin).
    let refused = jobsd_env(
        &["--address", &addr, "delete", "--prefix", "tmp-"],
        &[],
        "y\n",
    )
    .await;
    assert_eq!(refused.code, 6, "{refused:?}");
    assert!(refused.stderr.contains("--yes"), "{refused:?}");
    assert_eq!(r.view("tmp-2").await["name"], "tmp-2");

    let out = jobsd(&[
        "--address",
        &addr,
        "delete",
        "--prefix",
        "tmp-",
        "--yes",
        "-o",
        "json",
    ])
    .await;
    let answer = out.json();
    assert_eq!(answer["count"], 2);
    assert_eq!(answer["deleted"], serde_json::json!(["tmp-2", "tmp-3"]));
    let left = jobsd(&[
        "--address",
        &addr,
        "list",
        "-l",
        "kind=scratch",
        "-o",
        "json",
    ])
    .await
    .json();
    assert_eq!(left[0]["name"], "keep");
    assert_eq!(left.as_array().unwrap().len(), 1);

    // A selection that takes nothing deletes nothing and is no error.
    let out = jobsd(&["--address", &addr, "delete", "--prefix", "tmp-", "--yes"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("no job matches"), "{out:?}");
    let usage = jobsd(&["--address", &addr, "delete"]).await;
    assert_eq!(usage.code, 64, "{usage:?}");
    r.stop().await;
}

/// Runs `jobsd jobs <args>` on a pseudo-terminal (util-linux `script`), typing `input`.
async fn on_terminal(args: &str, input: &str) -> Out {
    let command = format!("{} jobs {args}", env!("CARGO_BIN_EXE_jobsd"));
    let input = input.to_owned();
    tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = std::process::Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .env_remove("DAPR_API_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("util-linux script");
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        Out {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    })
    .await
    .unwrap()
}

/// On a terminal a delete asks first: "n" keeps the jobs (exit 6), "y" deletes them.
#[tokio::test]
async fn delete_asks_on_a_terminal() {
    let app = HttpApp::new();
    let r = sidecar(&app, None).await;
    for name in ["tmp-1", "tmp-2"] {
        r.create(name, r#"{"schedule":"@every 1h"}"#).await;
    }
    let args = format!("--address {} delete --prefix tmp-", address(&r));
    let declined = on_terminal(&args, "n\n").await;
    assert_eq!(declined.code, 6, "{declined:?}");
    assert!(
        declined
            .stdout
            .contains("Delete 2 jobs (tmp-1, tmp-2)? [y/N]"),
        "{declined:?}"
    );
    assert_eq!(r.view("tmp-1").await["name"], "tmp-1");
    let confirmed = on_terminal(&args, "y\n").await;
    assert_eq!(confirmed.code, 0, "{confirmed:?}");
    assert!(confirmed.stdout.contains("deleted 2 jobs"), "{confirmed:?}");
    let (status, _) = r.call("GET", "/jobsd/v1/jobs/tmp-2", "").await;
    assert_eq!(status, 404);
    r.stop().await;
}

/// The exit codes scripts rely on: not found 3, the server's refusal 1 (its errorCode
/// printed), bad flags 64, nobody listening 4.
#[tokio::test]
async fn exit_codes_for_scripts() {
    let app = HttpApp::new();
    let r = sidecar(&app, None).await;
    r.create("hourly", r#"{"schedule":"@every 1h"}"#).await;
    let addr = address(&r);

    let out = jobsd(&["--address", &addr, "get", "nope"]).await;
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        "jobsd: ERR_JOB_NOT_FOUND: job not found: nope\n"
    );
    let out = jobsd(&["--address", &addr, "runs", "nope"]).await;
    assert_eq!(out.code, 3, "{out:?}");

    let out = jobsd(&[
        "--address",
        &addr,
        "backfill",
        "hourly",
        "--start",
        "yesterday",
        "--end",
        "2026-01-01T00:00:00Z",
    ])
    .await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr
            .starts_with("jobsd: ERR_MALFORMED_REQUEST: start: \"yesterday\""),
        "{out:?}"
    );

    for bad in [
        &["list", "--bogus"][..],
        &["get"],
        &["list", "--state", "sleeping"],
        &["list", "-o", "xml"],
        &["frobnicate"],
    ] {
        let mut args = vec!["--address", addr.as_str()];
        args.extend_from_slice(bad);
        let out = jobsd(&args).await;
        assert_eq!(out.code, 64, "{bad:?}: {out:?}");
    }

    let nowhere = format!("http://{}", closed_port());
    let out = jobsd(&["--address", &nowhere, "list"]).await;
    assert_eq!(out.code, 4, "{out:?}");
    assert!(out.stderr.contains("cannot reach"), "{out:?}");
    let out = jobsd_env(&["list"], &[("JOBSD_ADDRESS", &nowhere)], "").await;
    assert_eq!(
        out.code, 4,
        "the address comes from JOBSD_ADDRESS too: {out:?}"
    );
    r.stop().await;
}

/// `DAPR_API_TOKEN` is sent as `dapr-api-token`: without it or with a wrong one, exit 5.
#[tokio::test]
async fn the_api_token() {
    let app = HttpApp::new();
    let r = sidecar(&app, Some("s3cret")).await;
    let addr = address(&r);
    let out = jobsd(&["--address", &addr, "list"]).await;
    assert_eq!(out.code, 5, "{out:?}");
    assert!(out.stderr.contains("DAPR_API_TOKEN"), "{out:?}");
    let wrong = jobsd_env(
        &["--address", &addr, "list"],
        &[("DAPR_API_TOKEN", "nope")],
        "",
    )
    .await;
    assert_eq!(wrong.code, 5, "{wrong:?}");
    let right = jobsd_env(
        &["--address", &addr, "list", "-o", "json"],
        &[("DAPR_API_TOKEN", "s3cret")],
        "",
    )
    .await;
    assert_eq!(right.json(), serde_json::json!([]));
    r.stop().await;
}

/// `preview` needs no server: the create's own checks and the engine's plan, with the DST
/// notes, from flags or a file.
#[tokio::test]
async fn preview_works_offline() {
    let nowhere = format!("http://{}", closed_port());
    let out = jobsd(&[
        "--address",
        &nowhere,
        "preview",
        "nightly",
        "--schedule",
        "TZ=America/New_York 0 30 2 * * *",
        "--count",
        "3",
        "--at",
        "2027-03-12T12:00:00Z",
    ])
    .await;
    let lines: Vec<&str> = out.ok().lines().collect();
    assert_eq!(
        lines[0],
        "job nightly, zone America/New_York, from 2027-03-12T12:00:00Z:"
    );
    assert_eq!(lines.len(), 5, "{lines:?}");
    assert!(
        lines[2]
            .starts_with("1  2027-03-13T07:30:00Z  2027-03-13T02:30:00-05:00  EST   in 19h 30m"),
        "{lines:?}"
    );
    assert!(lines[3].contains("EDT   in 2d 18h"), "{lines:?}");
    assert!(
        lines[3].contains("02:30 on 2027-03-14 does not exist in America/New_York"),
        "{lines:?}"
    );

    // A body from a file (stdin here), labels and policy from flags; JSON is the route's.
    let out = jobsd_env(
        &[
            "preview",
            "-f",
            "-",
            "-l",
            "team=ops",
            "--policy",
            r#"{"jitter":"10s"}"#,
            "--at",
            "2026-01-01T00:00:00Z",
            "-o",
            "json",
        ],
        &[],
        r#"{"schedule":"@every 1h","repeats":2}"#,
    )
    .await;
    let answer = out.json();
    assert_eq!(answer["labels"]["team"], "ops");
    assert_eq!(answer["zone"], "UTC");
    let ticks = answer["ticks"].as_array().unwrap();
    assert_eq!(ticks.len(), 2, "repeats: 2");
    assert_eq!(ticks[0]["time"], "2026-01-01T01:00:00Z");

    // The create's errors, exit 1; a file that is not JSON is a usage error.
    let bad = jobsd(&["preview", "--schedule", "bogus"]).await;
    assert_eq!(bad.code, 1, "{bad:?}");
    assert!(
        bad.stderr.contains("DAPR_SCHEDULER_SCHEDULE_JOB"),
        "{bad:?}"
    );
    let bad = jobsd(&["preview", "--schedule", "@every 1h", "--count", "0"]).await;
    assert_eq!(bad.code, 1, "{bad:?}");
    assert!(
        bad.stderr.contains("count: 0 is not between 1 and 1000"),
        "{bad:?}"
    );
    let bad = jobsd_env(&["preview", "-f", "-"], &[], "not json").await;
    assert_eq!(bad.code, 64, "{bad:?}");
}

/// `--scheduler`: a `jobsd scheduler` replica answers list and get from jobsd's views (labels,
/// status, filters, as a sidecar shows them) and deletes through Dapr's Scheduler gRPC.
#[tokio::test]
async fn scheduler_replicas_list_get_and_delete() {
    let rep = Rep::start().await;
    for name in ["alpha", "beta", "gamma"] {
        rep.schedule(
            name,
            sv1::Job {
                schedule: Some("@every 1m".into()),
                ..Default::default()
            },
        )
        .await;
    }
    let scheduler = rep.address();
    let with = |args: &[&str]| -> Vec<String> {
        ["--scheduler", scheduler.as_str(), "--app-id", "myapp"]
            .iter()
            .chain(args)
            .map(|s| (*s).to_owned())
            .collect()
    };
    let run = async |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        jobsd(&args).await
    };

    let out = run(with(&["list", "--page-size", "2"])).await;
    let lines: Vec<Vec<&str>> = out
        .ok()
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert_eq!(lines[0][..2], ["NAME", "STATE"]);
    assert_eq!(lines[1][..4], ["alpha", "active", "@every", "1m"]);
    assert_eq!(lines[3][0], "gamma");
    let got = run(with(&["get", "beta", "-o", "json"])).await.json();
    assert_eq!(got["name"], "beta");
    assert_eq!(got["job"]["schedule"], "@every 1m");
    assert_eq!(got["status"]["state"], "active");
    let text = run(with(&["get", "beta"])).await;
    assert!(
        text.ok().contains("Schedule:        @every 1m\n"),
        "{text:?}"
    );
    let missing = run(with(&["get", "nope"])).await;
    assert_eq!(missing.code, 3, "{missing:?}");
    let paused = run(with(&["list", "--state", "paused", "-o", "json"])).await;
    assert_eq!(paused.json(), serde_json::json!([]));

    let out = run(with(&["delete", "--prefix", "a", "--yes"])).await;
    assert_eq!(out.ok(), "deleted job alpha\n");
    assert!(!rep.exists("alpha").await);
    let out = run(with(&["delete", "beta"])).await;
    assert_eq!(out.ok(), "deleted job beta\n");
    let left = run(with(&["list", "-o", "json"])).await.json();
    assert_eq!(left[0]["name"], "gamma");
    assert_eq!(left.as_array().unwrap().len(), 1);

    // What a Scheduler does not serve, and whom it cannot find.
    let out = jobsd(&["--scheduler", &scheduler, "list"]).await;
    assert_eq!(out.code, 64, "--app-id is needed: {out:?}");
    let out = run(with(&["pause", "gamma"])).await;
    assert_eq!(out.code, 64, "{out:?}");
    let nowhere = closed_port().to_string();
    let out = jobsd(&["--scheduler", &nowhere, "--app-id", "myapp", "list"]).await;
    assert_eq!(out.code, 4, "{out:?}");
    rep.stop().await;
}

/// A real Dapr Scheduler has no views: list and get fall back to Dapr's `ListJobs` and
/// `GetJob` (Dapr's fields, Dapr's GET body); labels and states are refused there.
#[tokio::test]
async fn a_dapr_scheduler_answers_with_dapr_s_jobs() {
    let dapr = DaprScheduler::start().await;
    for name in ["alpha", "beta"] {
        dapr.engine
            .schedule_job(sv1::ScheduleJobRequest {
                name: name.into(),
                job: Some(sv1::Job {
                    schedule: Some("@every 1m".into()),
                    ..Default::default()
                }),
                metadata: Some(common::app_metadata("myapp")),
                overwrite: false,
            })
            .await
            .unwrap();
    }
    let base = ["--scheduler", dapr.address.as_str(), "--app-id", "myapp"];
    let args = |more: &[&'static str]| -> Vec<&str> {
        base.iter().copied().chain(more.iter().copied()).collect()
    };
    let out = jobsd(&args(&["list"])).await;
    assert_eq!(
        out.ok(),
        "\
NAME   SCHEDULE   DUE TIME  REPEATS  TTL
alpha  @every 1m  -         -        -
beta   @every 1m  -         -        -
"
    );
    let got = jobsd(&args(&["get", "beta", "-o", "json"])).await.json();
    assert_eq!(got["name"], "beta");
    assert_eq!(got["schedule"], "@every 1m");
    let missing = jobsd(&args(&["get", "nope"])).await;
    assert_eq!(missing.code, 3, "{missing:?}");
    for refused in [&["list", "-l", "a=b"][..], &["list", "--state", "paused"]] {
        let out = jobsd(&args(refused)).await;
        assert_eq!(out.code, 64, "{refused:?}: {out:?}");
    }
    let out = jobsd(&args(&["delete", "alpha"])).await;
    assert_eq!(out.ok(), "deleted job alpha\n");
    assert!(!dapr.exists("alpha").await);
    dapr.stop().await;
}

/// `jobsd jobs limits`: set a key's and a prefix's limit, list them with the keys out and
/// waiting, delete one; a bad limit exits as a refused request.
#[tokio::test]
async fn limits_set_list_and_delete() {
    let app = HttpApp::new();
    // No test clock: the app holds its answers, so the clock is set rather than advanced.
    let served = app::serve(app.clone()).await;
    let cfg = sidecar_config(Some(served), AppProtocol::Http, &[]);
    let r = Running::start(cfg, Arc::new(store::Memory::new()), ManualClock::new(t0())).await;
    let addr = address(&r);
    let out = jobsd(&["--address", &addr, "limits", "set", "tenant-*", "5"]).await;
    assert_eq!(out.ok(), "concurrency limit of tenant-*: 5\n");
    jobsd(&["--address", &addr, "limits", "set", "vip", "50"])
        .await
        .ok();
    // One job of tenant-a out (the app holds it), one waiting.
    let hold = [app.hold("t1"), app.hold("t2")];
    for name in ["t1", "t2"] {
        r.create(
            name,
            r#"{"dueTime":"1s","policy":{"concurrencyKey":"tenant-a"}}"#,
        )
        .await;
    }
    jobsd(&["--address", &addr, "limits", "set", "tenant-*", "1"])
        .await
        .ok();
    r.clock.set(t0() + chrono::TimeDelta::seconds(2));
    common::eventually("one of tenant-a at the app", async || {
        app.started("t1") + app.started("t2") == 1
    })
    .await;
    let out = jobsd(&["--address", &addr, "limits"]).await;
    assert_eq!(
        out.ok(),
        "RULE      LIMIT\ntenant-*  1\nvip       50\n\n\
         KEY       RULE      LIMIT  IN FLIGHT  WAITING\ntenant-a  tenant-*  1      1          1\n"
    );
    let out = jobsd(&["--address", &addr, "limits", "list", "-o", "json"]).await;
    assert_eq!(out.json()["keys"][0]["waiting"], 1);
    let out = jobsd(&["--address", &addr, "limits", "delete", "vip"]).await;
    assert_eq!(out.ok(), "deleted the concurrency rule of vip\n");
    let out = jobsd(&["--address", &addr, "limits", "delete", "vip"]).await;
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("ERR_CONCURRENCY_RULE_NOT_FOUND"),
        "{}",
        out.stderr
    );
    let out = jobsd(&["--address", &addr, "limits", "set", "vip", "0"]).await;
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("limit: 0 is not between 1 and"),
        "{}",
        out.stderr
    );
    for h in &hold {
        h.add_permits(5);
    }
}
