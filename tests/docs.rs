//! The doc test harness: every shell block of `README.md` and `docs/**/*.md` marked as tested
//! runs against the real `jobsd` binary, so the README's tour and the guides' commands cannot
//! drift from what jobsd does. The convention is in `docs/README.md` ("Commands that are
//! tested"):
//!
//! - a fenced block whose info string is `sh tested` runs with `bash -eu` and must exit 0
//!   within [`BLOCK_PATIENCE`];
//! - `sh tested background` starts a server (jobsd): it keeps running while the page's later
//!   blocks run, and they start once its HTTP port answers `/v1.0/healthz/outbound` (a
//!   `jobsd scheduler` replica: once its Scheduler port accepts connections).
//!
//! Each page runs in a fresh temp dir (with the repository's `config/` linked in, for the
//! example app), its blocks in order, with `jobsd` (this build's) on `PATH`. The default ports
//! in the text (3500, 50001, 9090, 8080, 50006, 8081) are replaced by free ones, `cargo run --release --`
//! by `jobsd` (building a release would take minutes; it is the same code), and
//! `JOBSD_ADDRESS` points `jobsd jobs` at the page's sidecar. Every process a block started is
//! stopped when the page ends, pass or fail.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Longest a foreground block may run.
const BLOCK_PATIENCE: Duration = Duration::from_secs(180);

/// Longest a background block's jobsd may take to answer on its HTTP port.
const SERVER_PATIENCE: Duration = Duration::from_secs(120);

/// One tested shell block.
#[derive(Debug)]
struct Block {
    /// 1-based line of the opening fence.
    line: usize,
    /// Whether it starts a server that stays up.
    background: bool,
    /// The commands, as written.
    text: String,
}

/// The tested blocks of a Markdown page, in order.
fn tested_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, bool, Vec<&str>)> = None;
    for (i, line) in markdown.lines().enumerate() {
        match open.as_mut() {
            None => {
                let Some(info) = line.trim_start().strip_prefix("```") else {
                    continue;
                };
                let words: Vec<&str> = info.split_whitespace().collect();
                if words.first() == Some(&"sh") && words.contains(&"tested") {
                    open = Some((i + 1, words.contains(&"background"), Vec::new()));
                } else {
                    // Another block: read to its end, keep nothing.
                    open = Some((0, false, Vec::new()));
                }
            }
            Some((start, background, lines)) => {
                if line.trim().trim_start_matches('`').is_empty() && line.trim().starts_with("```")
                {
                    if *start > 0 {
                        blocks.push(Block {
                            line: *start,
                            background: *background,
                            text: lines.join("\n"),
                        });
                    }
                    open = None;
                } else {
                    lines.push(line);
                }
            }
        }
    }
    blocks
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The ports of one page's run, in place of the documented defaults.
struct Ports {
    http: u16,
    grpc: u16,
    metrics: u16,
    app: u16,
    /// A `jobsd scheduler` replica's port (50006) and its metrics port.
    scheduler: u16,
    scheduler_metrics: u16,
    /// A replica's healthz port (8081).
    healthz: u16,
}

impl Ports {
    fn new() -> Self {
        Ports {
            http: free_port(),
            grpc: free_port(),
            metrics: free_port(),
            app: free_port(),
            scheduler: free_port(),
            scheduler_metrics: free_port(),
            healthz: free_port(),
        }
    }

    /// `text` with the default ports and the release run replaced.
    fn apply(&self, text: &str) -> String {
        let mut out = text.replace("cargo run --release --", "jobsd");
        for (from, to) in [
            ("3500", self.http),
            ("50001", self.grpc),
            ("9090", self.metrics),
            ("8080", self.app),
            ("50006", self.scheduler),
            ("8081", self.healthz),
        ] {
            out = replace_number(&out, from, &to.to_string());
        }
        out
    }
}

/// Replaces `from` where it stands as a whole number (not inside a longer one).
fn replace_number(text: &str, from: &str, to: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(from) {
        let before = rest[..at].chars().next_back();
        let after = rest[at + from.len()..].chars().next();
        out.push_str(&rest[..at]);
        let digit = |c: Option<char>| c.is_some_and(|c| c.is_ascii_digit());
        if digit(before) || digit(after) {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = &rest[at + from.len()..];
    }
    out.push_str(rest);
    out
}

/// What runs before every block: strict mode; `curl` fails on an answer that is not a 2xx
/// (and shows the body); `jobsd`'s server roles sent to the page's metrics ports (a repeated
/// flag keeps its last value, so a block's own `--metrics-port` is overridden the same way).
const PRELUDE: &str = r#"set -eu
curl() { command curl --fail-with-body -sS "$@"; }
jobsd() {
  case "${1:-}" in
    ""|-*) command jobsd "$@" --metrics-port "$DOCS_METRICS_PORT" ;;
    scheduler) command jobsd "$@" --metrics-port "$DOCS_SCHEDULER_METRICS_PORT" ;;
    *) command jobsd "$@" ;;
  esac
}
"#;

/// One page's run: its temp dir, ports, and every process group it started.
struct Run {
    dir: PathBuf,
    bin: PathBuf,
    ports: Ports,
    groups: Vec<u32>,
}

impl Run {
    fn new(page: &str) -> Self {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = std::env::temp_dir().join(format!(
            "jobsd-docs-{}-{}",
            std::process::id(),
            page.replace('/', "_")
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).expect("temp dir");
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_jobsd"), bin.join("jobsd"))
            .expect("link jobsd");
        std::os::unix::fs::symlink(root.join("config"), dir.join("config")).expect("link config");
        Run {
            dir,
            bin,
            ports: Ports::new(),
            groups: Vec::new(),
        }
    }

    /// Starts `block` as `bash` in a process group of its own, output to `log`.
    fn spawn(&mut self, block: &Block, log: &Path) -> Child {
        let script = format!("{PRELUDE}{}\n", self.ports.apply(&block.text));
        let out = std::fs::File::create(log).expect("log file");
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let child = Command::new("bash")
            .arg("-c")
            .arg(script)
            .current_dir(&self.dir)
            .env("PATH", path)
            .env(
                "JOBSD_ADDRESS",
                format!("http://127.0.0.1:{}", self.ports.http),
            )
            .env("DAPR_HTTP_PORT", self.ports.http.to_string())
            .env("DAPR_GRPC_PORT", self.ports.grpc.to_string())
            .env("DOCS_METRICS_PORT", self.ports.metrics.to_string())
            .env(
                "DOCS_SCHEDULER_METRICS_PORT",
                self.ports.scheduler_metrics.to_string(),
            )
            .env_remove("DAPR_API_TOKEN")
            .env_remove("APP_ID")
            .env_remove("APP_PORT")
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log file"))
            .stderr(out)
            .process_group(0)
            .spawn()
            .expect("start bash");
        self.groups.push(child.id());
        child
    }

    /// Runs one block; `Err` says what went wrong, with its output.
    fn run(&mut self, page: &str, n: usize, block: &Block) -> Result<Duration, String> {
        let log = self.dir.join(format!("block-{n}.log"));
        let started = Instant::now();
        let mut child = self.spawn(block, &log);
        let fail = |why: String| {
            let output = std::fs::read_to_string(&log).unwrap_or_default();
            Err(format!(
                "{page}:{} ({why}):\n--- block ---\n{}\n--- output ---\n{output}",
                block.line, block.text
            ))
        };
        if block.background {
            // A replica is up once its Scheduler port accepts; a sidecar once its HTTP port
            // answers its health route.
            let replica = block.text.contains("jobsd scheduler");
            loop {
                if let Ok(Some(status)) = child.try_wait() {
                    return fail(format!("the server exited: {status}"));
                }
                let up = if replica {
                    TcpStream::connect(("127.0.0.1", self.ports.scheduler)).is_ok()
                } else {
                    healthy(self.ports.http)
                };
                if up {
                    return Ok(started.elapsed());
                }
                if started.elapsed() > SERVER_PATIENCE {
                    return fail(format!("no answer on its port in {SERVER_PATIENCE:?}"));
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(started.elapsed()),
                Ok(Some(status)) => return fail(format!("exited with {status}")),
                Ok(None) if started.elapsed() > BLOCK_PATIENCE => {
                    return fail(format!("still running after {BLOCK_PATIENCE:?}"));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(100)),
                Err(e) => return fail(format!("cannot wait for it: {e}")),
            }
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        for signal in ["-TERM", "-KILL"] {
            for group in &self.groups {
                let _ = Command::new("kill")
                    .args([signal, "--", &format!("-{group}")])
                    .stderr(Stdio::null())
                    .status();
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether a jobsd answers `GET /v1.0/healthz/outbound` with a 2xx on `port`.
fn healthy(port: u16) -> bool {
    let Ok(mut conn) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let request =
        "GET /v1.0/healthz/outbound HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    if conn.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    conn.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 2")
}

/// `README.md` and every page under `docs/`, relative to the crate.
fn pages() -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                let rel = path.strip_prefix(root).expect("under the crate");
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec!["README.md".to_owned()];
    walk(&root.join("docs"), root, &mut out);
    out.sort();
    out
}

fn read(page: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(page)).expect("read page")
}

/// Times a page is run again when a port it was given was taken by another process between
/// the harness finding it free and jobsd binding it (other tests run on this machine too).
const PORT_RACE_RETRIES: usize = 3;

/// Runs one page's tested blocks in a fresh [`Run`]; `Err` names the block that failed.
fn run_page(page: &str, blocks: &[Block]) -> Result<(), String> {
    let started = Instant::now();
    let mut run = Run::new(page);
    for (n, block) in blocks.iter().enumerate() {
        let took = run.run(page, n, block)?;
        eprintln!("docs: {page}:{} ok in {took:.1?}", block.line);
    }
    eprintln!(
        "docs: {page}: {} blocks in {:.1?}",
        blocks.len(),
        started.elapsed()
    );
    Ok(())
}

#[test]
fn tested_blocks_run() {
    let mut failures = Vec::new();
    let mut ran = 0;
    for page in pages() {
        let blocks = tested_blocks(&read(&page));
        if blocks.is_empty() {
            continue;
        }
        let mut attempt = 1;
        loop {
            match run_page(&page, &blocks) {
                Ok(()) => ran += blocks.len(),
                Err(e) if e.contains("Address already in use") && attempt < PORT_RACE_RETRIES => {
                    eprintln!("docs: {page}: a port was taken meanwhile; again with new ports");
                    attempt += 1;
                    continue;
                }
                Err(e) => failures.push(e),
            }
            break;
        }
    }
    assert!(
        failures.is_empty(),
        "{} page(s) failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert!(ran > 0, "no tested block found");
}

/// The README's Quick start run command and its tour are among the tested blocks, so the front
/// door cannot drift (the test command itself is CI's, not run here).
#[test]
fn readme_quick_start_and_tour_are_tested() {
    let blocks = tested_blocks(&read("README.md"));
    let has = |needle: &str| blocks.iter().any(|b| b.text.contains(needle));
    assert!(
        blocks
            .iter()
            .any(|b| b.background && b.text.contains("cargo run --release -- ")),
        "the Quick start's run command is not a `sh tested background` block"
    );
    for step in [
        "curl -X POST",
        "jobsd jobs list",
        "jobsd jobs runs",
        "/jobsd/ui/",
    ] {
        assert!(
            has(step),
            "the README's tour has no tested block with `{step}`"
        );
    }
}

#[test]
fn extraction_follows_the_convention() {
    let page = "text\n```sh tested background\njobsd --app-id a\n```\n```sh\nnot run\n```\n\
                ```sh tested\ncurl x\n```\n";
    let blocks = tested_blocks(page);
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    assert!(blocks[0].background && blocks[0].text == "jobsd --app-id a");
    assert!(!blocks[1].background && blocks[1].text == "curl x" && blocks[1].line == 8);
    let ports = Ports {
        http: 1,
        grpc: 2,
        metrics: 3,
        app: 4,
        scheduler: 5,
        scheduler_metrics: 6,
        healthz: 7,
    };
    assert_eq!(
        ports.apply(
            "cargo run --release -- --app-port 8080; curl localhost:3500 :50001 9090 135000"
        ),
        "jobsd --app-port 4; curl localhost:1 :2 3 135000"
    );
}
