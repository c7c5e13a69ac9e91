//! Issue 14: `jobsd jobs export` and `jobsd jobs import`, the real binary against sidecars in
//! this process: a file written whole (or not at all), stdout and stdin, the summary table and
//! JSON, exit 2 when a line failed, the token, an unreachable sidecar.

mod common;

use std::sync::Arc;

use common::app::{self, HttpApp};
use common::running::Running;
use common::{sidecar_config, t0};
use jobsd::clock::ManualClock;
use jobsd::config::AppProtocol;
use jobsd::store;

use common::cli::CliOut as Out;

async fn jobsd(args: &[&str], env: &[(&str, &str)], input: Vec<u8>) -> Out {
    common::cli::jobs(args, env, input).await
}

async fn sidecar(token: Option<&str>) -> Running {
    let addr = app::serve(HttpApp::new()).await;
    let mut cfg = sidecar_config(Some(addr), AppProtocol::Http, &[]);
    cfg.api_token = token.map(str::to_owned);
    Running::start(cfg, Arc::new(store::Memory::new()), ManualClock::new(t0())).await
}

fn address(r: &Running) -> String {
    format!("http://{}", r.api)
}

/// `jobsd jobs import --address <r> -f <file> <extra>`.
async fn import_file(r: &Running, file: &str, extra: &[&str]) -> Out {
    let address = address(r);
    let mut args = vec!["import", "--address", &address, "-f", file];
    args.extend_from_slice(extra);
    jobsd(&args, &[], vec![]).await
}

/// Export to a file and import it elsewhere; import again and every job is skipped; with
/// `--overwrite` replaced. The summaries are tables (or JSON with `-o json`).
#[tokio::test]
async fn export_to_a_file_and_import_it_elsewhere() {
    let a = sidecar(None).await;
    for i in 0..3000 {
        a.create(
            &format!("job-{i:04}"),
            r#"{"schedule":"@every 1h","data":"x"}"#,
        )
        .await;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("jobs.ndjson");
    let file = file.to_str().unwrap();
    let out = jobsd(
        &["export", "--address", &address(&a), "-f", file],
        &[],
        vec![],
    )
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    let table: Vec<&str> = out.stdout.lines().collect();
    assert!(table[0].starts_with("JOBS  FILE"), "{out:?}");
    assert!(table[1].starts_with("3000  "), "{out:?}");
    assert!(!std::path::Path::new(&format!("{file}.partial")).exists());
    let text = std::fs::read_to_string(file).unwrap();
    assert_eq!(text.lines().count(), 3002, "header, jobs, trailer");
    assert!(text.ends_with("{\"end\":true,\"jobs\":3000}\n"));
    a.stop().await;

    let b = sidecar(None).await;
    let out = import_file(&b, file, &[]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let rows: Vec<Vec<&str>> = out
        .stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        [
            "CREATED", "REPLACED", "SKIPPED", "FAILED", "SECONDS", "JOBS/S"
        ]
    );
    assert_eq!(rows[1][..4], ["3000", "0", "0", "0"], "{out:?}");
    let out = import_file(&b, file, &["-o", "json"]).await;
    assert_eq!(out.code, 0, "{out:?}");
    let summary: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(summary["skipped"], 3000);
    let out = import_file(&b, file, &["--overwrite", "-o", "json"]).await;
    let summary: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(summary["replaced"], 3000, "{out:?}");
    b.view("job-2999").await;
    b.stop().await;
}

/// `-f -` (the default) streams through stdout and stdin; the summary of an export to stdout
/// goes to stderr so that the data stays clean.
#[tokio::test]
async fn stdout_and_stdin_carry_the_export() {
    let a = sidecar(Some("tok")).await;
    let created = common::http(
        a.api,
        "POST",
        "/jobsd/v1/jobs/one",
        &[("dapr-api-token", "tok")],
        br#"{"schedule":"@every 1m"}"#,
    )
    .await;
    assert_eq!(created.status, 204);
    let env = [("DAPR_API_TOKEN", "tok")];
    let out = jobsd(&["export", "--address", &address(&a)], &env, vec![]).await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.starts_with("{\"format\":\"jobsd-export\""),
        "{out:?}"
    );
    assert!(out.stderr.contains("exported 1 jobs"), "{out:?}");
    // Without the token: the sidecar's refusal and its exit code.
    let refused = jobsd(&["export", "--address", &address(&a)], &[], vec![]).await;
    assert_eq!(refused.code, 5, "{refused:?}");
    a.stop().await;

    let b = sidecar(Some("tok")).await;
    let out = jobsd(
        &["import", "--address", &address(&b)],
        &env,
        out.stdout.into_bytes(),
    )
    .await;
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.lines().nth(1).unwrap().starts_with("1 "),
        "{out:?}"
    );
    b.stop().await;
}

/// A line that fails is listed with its number and the run exits 2; a file that is not an
/// export is refused whole (exit 1, the server's message); no server: exit 4, and an export
/// leaves no file behind.
#[tokio::test]
async fn failures_show_in_the_summary_and_the_exit_code() {
    let b = sidecar(None).await;
    let file = concat!(
        "{\"format\":\"jobsd-export\",\"version\":1}\n",
        "{\"name\":\"ok\",\"generation\":\"0000000000000001\",\"job\":{\"schedule\":\"@every 1s\"},\"start\":\"2026-01-01T00:00:00Z\"}\n",
        "{\"name\":\"bad\",\"generation\":\"zz\",\"job\":{},\"start\":\"2026-01-01T00:00:00Z\"}\n",
        "{\"end\":true,\"jobs\":2}\n"
    );
    let out = jobsd(
        &["import", "--address", &address(&b)],
        &[],
        file.as_bytes().to_vec(),
    )
    .await;
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stdout.contains("LINE  NAME  ERROR"), "{out:?}");
    assert!(out.stdout.contains("3     bad   generation"), "{out:?}");
    assert!(
        out.stderr.contains("1 line of the export was not imported"),
        "{out:?}"
    );

    let out = jobsd(
        &["import", "--address", &address(&b)],
        &[],
        b"{\"format\":\"jobsd-export\",\"version\":9}\n".to_vec(),
    )
    .await;
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("version 9 is not supported"), "{out:?}");
    b.stop().await;

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.ndjson");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = listener.local_addr().unwrap();
    drop(listener);
    let out = jobsd(
        &[
            "export",
            "--address",
            &format!("http://{closed}"),
            "-f",
            file.to_str().unwrap(),
        ],
        &[],
        vec![],
    )
    .await;
    assert_eq!(out.code, 4, "{out:?}");
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
}
