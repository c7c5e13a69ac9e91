//! The real binary started with command lines written for daprd: it starts, serves the Jobs
//! API, names the flags it does not act on in one warning, and exits 0 on SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// A port nobody listens on right now (the sidecar binds it a moment later).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One HTTP/1.1 request over a fresh connection: the status code and the body, or `None`
/// while nothing answers.
fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?;
    Some((status, body))
}

/// The running binary and the lines it has printed so far (logs go to stdout).
struct Jobsd {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    reader: JoinHandle<()>,
}

impl Jobsd {
    fn start(args: &[String]) -> Jobsd {
        let mut child = Command::new(env!("CARGO_BIN_EXE_jobsd"))
            .args(args)
            .env_remove("DAPR_SCHEDULER_HOST_ADDRESS_DNS_A")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let reader = thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Jobsd {
            child,
            lines,
            reader,
        }
    }

    /// Waits for `GET /v1.0/healthz` to answer and returns its status.
    fn healthz(&mut self, http_addr: SocketAddr) -> u16 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some((status, _)) = http(http_addr, "GET", "/v1.0/healthz", "") {
                return status;
            }
            if let Some(exit) = self.child.try_wait().unwrap() {
                panic!("jobsd exited before serving: {exit}");
            }
            assert!(Instant::now() < deadline, "jobsd did not serve in time");
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends SIGTERM and returns the exit status and everything the process printed.
    fn terminate(mut self) -> (ExitStatus, Vec<String>) {
        let pid = self.child.id().to_string();
        let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(killed.success());
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("jobsd did not exit on SIGTERM");
            }
            thread::sleep(Duration::from_millis(50));
        };
        self.reader.join().unwrap();
        let lines = std::mem::take(&mut *self.lines.lock().unwrap());
        (status, lines)
    }
}

/// An app on `port` answering every request 404 (an app with no actors and no jobs routes),
/// from now on; the paths it was asked for.
fn app_answering_404(port: u16) -> Arc<Mutex<Vec<String>>> {
    let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let paths = Arc::new(Mutex::new(Vec::new()));
    let seen = paths.clone();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut head = String::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            if reader.read_line(&mut head).is_err() {
                continue;
            }
            if let Some(path) = head.split(' ').nth(1) {
                seen.lock().unwrap().push(path.to_owned());
            }
            // The rest of the head; these requests carry no body.
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let _ = stream.write_all(
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    paths
}

fn args(line: &[&str]) -> Vec<String> {
    line.iter().map(|s| s.to_string()).collect()
}

fn path(p: &Path) -> String {
    p.to_str().unwrap().to_owned()
}

/// The sidecar of the Docker Compose example in Dapr's docs, "How-To: Run Dapr in
/// self-hosted mode with Docker" (docs.dapr.io/operations/hosting/self-hosted/
/// self-hosted-with-docker/, dapr/docs `daprdocs/content/en/operations/hosting/self-hosted/
/// self-hosted-with-docker.md`):
///
/// ```text
/// ./daprd --app-id nodeapp --app-port 3000
///         --placement-host-address placement:50006 --resources-path ./components
/// ```
///
/// with the flags `dapr run` adds to it (dapr/cli `pkg/standalone/run.go`, `RunConfig`'s
/// `arg` tags: `--config`, `--app-protocol`, `--log-level`, `--app-max-concurrency`,
/// `--metrics-port`, `--dapr-http-max-request-size`, `--profile-port` with -1 for the unset
/// ones) and, because this is a test, free ports (the metrics port too), loopback only and a
/// temporary data folder.
/// `--scheduler-host-address` is left out: it would make the sidecar wait for replicas.
#[test]
fn the_docker_compose_sidecar_from_daprs_docs_runs() {
    let dir = tempfile::tempdir().unwrap();
    let components = dir.path().join("components");
    std::fs::create_dir(&components).unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "apiVersion: dapr.io/v1alpha1\nkind: Configuration\nmetadata:\n  name: daprConfig\n",
    )
    .unwrap();
    let (http_port, grpc_port, metrics_port) = (free_port(), free_port(), free_port());
    let (app_port, public_port) = (free_port(), free_port());
    let http_addr: SocketAddr = ([127, 0, 0, 1], http_port).into();
    let metrics_addr: SocketAddr = ([127, 0, 0, 1], metrics_port).into();
    let public_addr: SocketAddr = ([127, 0, 0, 1], public_port).into();
    let (http_port, grpc_port) = (http_port.to_string(), grpc_port.to_string());
    let metrics_port = metrics_port.to_string();
    let mut line = args(&[
        "--app-id",
        "nodeapp",
        "--app-port",
        &app_port.to_string(),
        "--dapr-public-port",
        &public_port.to_string(),
        "--dapr-public-listen-address",
        "127.0.0.1",
        "--placement-host-address",
        "placement:50006",
        "--resources-path",
    ]);
    line.push(path(&components));
    line.extend(args(&[
        "--app-protocol",
        "http",
        "--log-level",
        "info",
        "--app-max-concurrency",
        "-1",
        "--metrics-port",
        &metrics_port,
        "--metrics-listen-address",
        "127.0.0.1",
        "--dapr-http-max-request-size",
        "-1",
        "--profile-port",
        "-1",
        "--dapr-http-port",
        &http_port,
        "--dapr-grpc-port",
        &grpc_port,
        "--dapr-listen-addresses",
        "127.0.0.1",
        "--config",
        &path(&config),
        "--data-dir",
        &path(&dir.path().join("data")),
    ]));

    let mut jobsd = Jobsd::start(&line);
    // As daprd: not ready while the app does not listen (the API serves all the same), ready
    // once it does and its /dapr/config has been read; the public port says the same.
    assert_eq!(jobsd.healthz(http_addr), 500);
    assert_eq!(
        http(http_addr, "GET", "/v1.0/healthz/outbound", "").map(|(s, _)| s),
        Some(204)
    );
    assert_eq!(
        http(public_addr, "GET", "/v1.0/healthz", "").map(|(s, _)| s),
        Some(500)
    );
    let config_reads = app_answering_404(app_port);
    let deadline = Instant::now() + Duration::from_secs(30);
    while http(http_addr, "GET", "/v1.0/healthz", "").map(|(s, _)| s) != Some(204) {
        assert!(Instant::now() < deadline, "not ready once the app listens");
        thread::sleep(Duration::from_millis(50));
    }
    assert!(
        config_reads
            .lock()
            .unwrap()
            .iter()
            .any(|p| p == "/dapr/config"),
        "ready before /dapr/config was read"
    );
    assert_eq!(
        http(public_addr, "GET", "/v1.0/healthz", "").map(|(s, _)| s),
        Some(204)
    );
    let job = r#"{"schedule": "@every 1h", "data": "x"}"#;
    let created = http(http_addr, "POST", "/v1.0-alpha1/jobs/docs", job).unwrap();
    assert_eq!(created.0, 204, "{created:?}");
    let (status, body) = http(http_addr, "GET", "/v1.0-alpha1/jobs/docs", "").unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("@every 1h"), "{body}");
    // `dapr run`'s metrics port serves daprd's job metrics.
    let (status, metrics) = http(metrics_addr, "GET", "/metrics", "").unwrap();
    assert_eq!(status, 200, "{metrics}");
    assert!(
        metrics.contains("dapr_component_job_success_count{app_id=\"nodeapp\""),
        "{metrics}"
    );

    let (exit, lines) = jobsd.terminate();
    assert!(exit.success(), "{exit}: {lines:#?}");
    let warnings: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("not acted on"))
        .collect();
    assert_eq!(warnings.len(), 1, "{lines:#?}");
    let warning = warnings[0];
    assert!(warning.contains("WARN"), "{warning}");
    for named in [
        format!("--config={}", path(&config)),
        "--profile-port=-1".to_owned(),
    ] {
        assert!(warning.contains(&named), "{named} missing: {warning}");
    }
    for acted_on in [
        "--app-id",
        "--resources-path",
        "--dapr-http-max-request-size",
        "--metrics-port",
        // Acted on since issue 38: the app's actors are placed across sidecars.
        "--placement-host-address",
    ] {
        assert!(!warning.contains(acted_on), "{acted_on} named: {warning}");
    }
}

/// The single-dash form of the same docs page ("Run app as a process and sidecar as a Docker
/// container": `./daprd -app-id <my-app-id> -app-port <my-app-port>`), which daprd accepts
/// for Go `flag` compatibility. Nothing ignored, nothing to warn about.
#[test]
fn the_single_dash_command_line_from_daprs_docs_runs() {
    let dir = tempfile::tempdir().unwrap();
    let http_port = free_port();
    let http_addr: SocketAddr = ([127, 0, 0, 1], http_port).into();
    let app_port = free_port();
    app_answering_404(app_port);
    let line = args(&[
        "-app-id",
        "myapp",
        "-app-port",
        &app_port.to_string(),
        &format!("-dapr-http-port={http_port}"),
        "-dapr-grpc-port",
        &free_port().to_string(),
        "-dapr-listen-addresses",
        "127.0.0.1",
        &format!("-metrics-port={}", free_port()),
        "-metrics-listen-address=127.0.0.1",
        "-data-dir",
        &path(dir.path()),
    ]);
    let mut jobsd = Jobsd::start(&line);
    assert_eq!(jobsd.healthz(http_addr), 204);
    let (exit, lines) = jobsd.terminate();
    assert!(exit.success(), "{exit}: {lines:#?}");
    assert!(
        !lines.iter().any(|l| l.contains("not acted on")),
        "{lines:#?}"
    );
}

/// A flag daprd does not have is refused, by name, with the usage exit code.
#[test]
fn an_unknown_flag_exits_64_naming_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_jobsd"))
        .args(["--app-id", "a", "--no-such-flag", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unexpected argument '--no-such-flag'"),
        "{stderr}"
    );
}
