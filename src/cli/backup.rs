//! `jobsd jobs export` and `jobsd jobs import`: a sidecar's jobs, with their progress, to and
//! from a file (NDJSON, `docs/export-format.md`), streamed both ways so that neither side
//! holds the jobs in memory. A progress bar shows on a terminal (stderr) and nowhere else; a
//! summary ends each run.
//!
//! `export` writes to `FILE.partial` and renames it to `FILE` only once the stream ended with
//! its trailer line, so a file that exists is a whole export. `import` exits 2 when any line
//! failed (each failure listed).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Args;
use futures_util::{Stream, StreamExt};
use http::Method;
use http_body_util::{BodyExt, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::Frame;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::CliError;
use super::client::{Answer, Client, error_of};
use super::output::{Printer, Table};

/// `jobsd jobs export`.
#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// Where to write the export: a file, or `-` for stdout.
    #[arg(short = 'f', long = "file", default_value = "-")]
    pub file: String,
    /// Stop the sidecar firing the jobs first (until it restarts) and wait for every trigger
    /// out: the file is their final state, to import into another jobsd without a tick firing
    /// twice. Stop this sidecar before the other one starts firing them.
    #[arg(long)]
    pub handover: bool,
}

/// `jobsd jobs import`.
#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// The export to read: a file, or `-` for stdin. A `dapr scheduler export` file is read
    /// too (this app's jobs in it).
    #[arg(short = 'f', long = "file", default_value = "-")]
    pub file: String,
    /// Replace jobs that exist (definition and progress) instead of skipping them.
    #[arg(long)]
    pub overwrite: bool,
}

/// Bytes read from the input per chunk sent.
const READ_CHUNK: usize = 256 << 10;

/// The body type of the streaming calls.
type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// An HTTP/1.1 client whose request bodies stream.
fn http() -> HyperClient<HttpConnector, Body> {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(Duration::from_secs(5)));
    connector.set_nodelay(true);
    HyperClient::builder(TokioExecutor::new()).build(connector)
}

/// A progress bar on stderr when it is a terminal, else one that draws nothing.
pub(super) fn progress(len: Option<u64>, template: &str) -> ProgressBar {
    let bar = match len {
        Some(len) => ProgressBar::new(len),
        None => ProgressBar::no_length(),
    };
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// The request's answer once its head arrived, or the error a non-2xx answer stands for.
async fn send(
    client: &Client,
    request: http::Request<Body>,
) -> Result<http::Response<hyper::body::Incoming>, CliError> {
    let unreachable = |reason: String| CliError::Unreachable {
        address: client.address().to_owned(),
        reason,
    };
    let response = http().request(request).await.map_err(|e| {
        let mut cause: &dyn std::error::Error = &e;
        while let Some(inner) = cause.source() {
            cause = inner;
        }
        unreachable(cause.to_string())
    })?;
    if response.status().is_success() {
        return Ok(response);
    }
    let status = response.status();
    let body = tokio::time::timeout(client.timeout(), response.into_body().collect())
        .await
        .map_err(|_| unreachable("the error answer did not arrive".to_owned()))?
        .map_err(|e| unreachable(format!("the answer broke off: {e}")))?
        .to_bytes();
    Err(error_of(client.address(), &Answer { status, body }))
}

/// `jobsd jobs export`.
pub async fn export(client: &Client, args: &ExportArgs, out: &Printer) -> Result<(), CliError> {
    let path = format!(
        "/jobsd/v1/export{}",
        if args.handover { "?handover=true" } else { "" }
    );
    let request = client
        .request(Method::GET, &path)
        .body(Body::default())
        .map_err(|e| CliError::Usage(format!("cannot build the request: {e}")))?;
    let started = Instant::now();
    let response = tokio::time::timeout(client.timeout(), send(client, request))
        .await
        .map_err(|_| CliError::Unreachable {
            address: client.address().to_owned(),
            reason: format!("no answer within {:?}", client.timeout()),
        })??;
    let mut target = Target::open(&args.file).await?;
    let bar = progress(None, "{spinner} exported {pos} jobs ({per_sec}) {elapsed}");
    let result = copy_export(client, response.into_body(), &mut target.writer, &bar).await;
    bar.finish_and_clear();
    let jobs = match result {
        Ok(jobs) => jobs,
        Err(e) => {
            target.abandon().await;
            return Err(e);
        }
    };
    let file = target.commit().await?;
    let seconds = started.elapsed().as_secs_f64();
    let rate = (jobs as f64 / seconds.max(1e-6)).round() as u64;
    let summary = serde_json::json!({
        "jobs": jobs,
        "file": file,
        "seconds": (seconds * 1000.0).round() / 1000.0,
        "jobsPerSecond": rate,
    });
    if args.file == "-" {
        // stdout carries the export: the summary goes to stderr.
        eprintln!("exported {jobs} jobs in {seconds:.2}s ({rate} jobs/s)");
        return Ok(());
    }
    if !out.is_table() {
        return out.document(&summary);
    }
    Table::new(&["JOBS", "FILE", "SECONDS", "JOBS/S"]).print(&[vec![
        jobs.to_string(),
        file,
        format!("{seconds:.2}"),
        rate.to_string(),
    ]])
}

/// Copies an export's body to `writer`, counting job lines; the body must end with the
/// trailer line, or the export failed (an error line says why, else it was cut short).
async fn copy_export(
    client: &Client,
    mut body: hyper::body::Incoming,
    writer: &mut Box<dyn AsyncWrite + Unpin + Send>,
    bar: &ProgressBar,
) -> Result<u64, CliError> {
    let broke = |reason: String| CliError::Unreachable {
        address: client.address().to_owned(),
        reason,
    };
    // The last whole line (the trailer, once the stream ends) and what came after it.
    let (mut last, mut tail) = (Vec::new(), Vec::new());
    let mut lines = 0u64;
    loop {
        let frame = match tokio::time::timeout(client.timeout(), body.frame()).await {
            Err(_) => {
                return Err(broke(format!(
                    "the export stalled: nothing came for {:?}",
                    client.timeout()
                )));
            }
            Ok(None) => break,
            Ok(Some(frame)) => frame.map_err(|e| broke(format!("the export broke off: {e}")))?,
        };
        let Ok(chunk) = frame.into_data() else {
            continue;
        };
        writer.write_all(&chunk).await?;
        let newlines = chunk.iter().filter(|b| **b == b'\n').count() as u64;
        lines += newlines;
        last_line(&mut last, &mut tail, &chunk);
        // Header and trailer are not jobs.
        bar.set_position(lines.saturating_sub(1));
    }
    writer.flush().await?;
    writer.shutdown().await?;
    let last: Value = match tail.is_empty() {
        true => serde_json::from_slice(&last).unwrap_or(Value::Null),
        // A last line without its newline: cut short.
        false => Value::Null,
    };
    if let Some(error) = last.get("error").and_then(Value::as_str) {
        return Err(CliError::Other(format!(
            "the export failed part way: {error}"
        )));
    }
    match last.get("jobs").and_then(Value::as_u64) {
        Some(jobs) if last.get("end") == Some(&Value::Bool(true)) => Ok(jobs),
        _ => Err(broke(
            "the export ended without its trailer line: it was cut short".to_owned(),
        )),
    }
}

/// Follows the last whole line of a stream chunk by chunk: `tail` holds the bytes after the
/// last newline seen.
fn last_line(last: &mut Vec<u8>, tail: &mut Vec<u8>, chunk: &[u8]) {
    let Some(end) = chunk.iter().rposition(|b| *b == b'\n') else {
        tail.extend_from_slice(chunk);
        return;
    };
    match chunk[..end].iter().rposition(|b| *b == b'\n') {
        Some(start) => *last = chunk[start + 1..end].to_vec(),
        None => {
            tail.extend_from_slice(&chunk[..end]);
            *last = std::mem::take(tail);
        }
    }
    *tail = chunk[end + 1..].to_vec();
}

/// Where an export goes: stdout, or a file written under a temporary name until it is whole.
struct Target {
    writer: Box<dyn AsyncWrite + Unpin + Send>,
    /// `(partial, final)` paths of a file.
    paths: Option<(PathBuf, PathBuf)>,
}

impl Target {
    async fn open(file: &str) -> Result<Target, CliError> {
        if file == "-" {
            return Ok(Target {
                writer: Box::new(tokio::io::stdout()),
                paths: None,
            });
        }
        let path = PathBuf::from(file);
        let mut partial = path.clone().into_os_string();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        let f = tokio::fs::File::create(&partial)
            .await
            .map_err(|e| CliError::Usage(format!("--file {}: {e}", partial.display())))?;
        Ok(Target {
            writer: Box::new(tokio::io::BufWriter::with_capacity(1 << 20, f)),
            paths: Some((partial, path)),
        })
    }

    /// The export is whole: the file gets its name (made durable first).
    async fn commit(self) -> Result<String, CliError> {
        drop(self.writer);
        let Some((partial, path)) = self.paths else {
            return Ok("-".to_owned());
        };
        let io = |e: std::io::Error| CliError::Other(format!("{}: {e}", path.display()));
        tokio::fs::File::open(&partial)
            .await
            .map_err(io)?
            .sync_all()
            .await
            .map_err(io)?;
        tokio::fs::rename(&partial, &path).await.map_err(io)?;
        Ok(path.display().to_string())
    }

    /// The export failed: no file is left that could pass for one.
    async fn abandon(self) {
        drop(self.writer);
        if let Some((partial, _)) = self.paths {
            let _ = tokio::fs::remove_file(partial).await;
        }
    }
}

/// `jobsd jobs import`.
pub async fn import(client: &Client, args: &ImportArgs, out: &Printer) -> Result<(), CliError> {
    let (reader, len) = open_input(&args.file).await?;
    let bar = progress(
        len,
        "{spinner} {bar:30} {bytes}/{total_bytes} sent, {msg} ({bytes_per_sec}) {elapsed}",
    );
    let path = format!(
        "/jobsd/v1/import{}",
        if args.overwrite {
            "?overwrite=true"
        } else {
            ""
        }
    );
    let body = UnsyncBoxBody::new(StreamBody::new(read_chunks(reader, bar.clone())));
    let request = client
        .request(Method::POST, &path)
        .header(http::header::CONTENT_TYPE, "application/x-ndjson")
        .body(body)
        .map_err(|e| CliError::Usage(format!("cannot build the request: {e}")))?;
    let started = Instant::now();
    // The server answers once every line is written: no overall time limit, the sidecar's own
    // pace decides.
    let answer = send(client, request).await;
    bar.finish_and_clear();
    let response = answer?;
    let body = tokio::time::timeout(client.timeout(), response.into_body().collect())
        .await
        .map_err(|_| CliError::Unreachable {
            address: client.address().to_owned(),
            reason: "the summary did not arrive".to_owned(),
        })?
        .map_err(|e| CliError::Unreachable {
            address: client.address().to_owned(),
            reason: format!("the answer broke off: {e}"),
        })?
        .to_bytes();
    let summary: Value = serde_json::from_slice(&body)
        .map_err(|e| CliError::Other(format!("the summary is not JSON: {e}")))?;
    print_summary(&summary, started.elapsed(), out)?;
    let failed = summary["failedCount"].as_u64().unwrap_or(0);
    if failed > 0 {
        let (lines, were) = if failed == 1 {
            ("line", "was")
        } else {
            ("lines", "were")
        };
        return Err(CliError::PartlyDone(format!(
            "{failed} {lines} of the export {were} not imported"
        )));
    }
    Ok(())
}

/// The input `file` names (`-`: stdin) and its length when known.
pub(super) async fn open_input(
    file: &str,
) -> Result<(Box<dyn AsyncRead + Unpin + Send>, Option<u64>), CliError> {
    if file == "-" {
        return Ok((Box::new(tokio::io::stdin()), None));
    }
    let f = tokio::fs::File::open(Path::new(file))
        .await
        .map_err(|e| CliError::Usage(format!("--file {file}: {e}")))?;
    let len = f.metadata().await.ok().map(|m| m.len());
    Ok((Box::new(f), len))
}

/// The input as body frames of up to [`READ_CHUNK`] bytes, counted on `bar` (bytes, and job
/// lines as its message).
fn read_chunks(
    reader: Box<dyn AsyncRead + Unpin + Send>,
    bar: ProgressBar,
) -> impl Stream<Item = Result<Frame<Bytes>, std::io::Error>> + Send {
    futures_util::stream::unfold((reader, bar, 0u64), |(mut reader, bar, lines)| async move {
        let mut buf = Vec::with_capacity(READ_CHUNK);
        match (&mut reader)
            .take(READ_CHUNK as u64)
            .read_to_end(&mut buf)
            .await
        {
            Ok(0) => None,
            Ok(n) => {
                let lines = lines + buf.iter().filter(|b| **b == b'\n').count() as u64;
                bar.inc(n as u64);
                bar.set_message(format!("{lines} lines"));
                Some((Ok(Frame::data(Bytes::from(buf))), (reader, bar, lines)))
            }
            Err(e) => Some((Err(e), (reader, bar, lines))),
        }
    })
    .boxed()
}

/// The import's summary: counts, then the failed lines.
fn print_summary(summary: &Value, took: Duration, out: &Printer) -> Result<(), CliError> {
    if !out.is_table() {
        return out.document(summary);
    }
    let n = |k: &str| summary[k].as_u64().unwrap_or(0);
    let written = n("created") + n("replaced") + n("skipped");
    let mut header = vec!["CREATED", "REPLACED", "SKIPPED", "FAILED"];
    let mut row = vec![
        n("created").to_string(),
        n("replaced").to_string(),
        n("skipped").to_string(),
        n("failedCount").to_string(),
    ];
    if n("notThisApp") > 0 {
        header.push("NOT THIS APP");
        row.push(n("notThisApp").to_string());
    }
    header.extend(["SECONDS", "JOBS/S"]);
    row.push(format!("{:.2}", took.as_secs_f64()));
    row.push(format!(
        "{}",
        (written as f64 / took.as_secs_f64().max(1e-6)).round()
    ));
    Table::new(&header).print(&[row])?;
    let failed = summary["failed"].as_array().cloned().unwrap_or_default();
    if failed.is_empty() {
        return Ok(());
    }
    super::output::print("\n")?;
    let rows: Vec<Vec<String>> = failed
        .iter()
        .map(|f| {
            vec![
                f["line"].to_string(),
                f["name"]
                    .as_str()
                    .filter(|s| !s.is_empty())
                    .unwrap_or("-")
                    .to_owned(),
                f["error"].as_str().unwrap_or_default().to_owned(),
            ]
        })
        .collect();
    Table::new(&["LINE", "NAME", "ERROR"]).print(&rows)?;
    let unlisted = n("failedCount").saturating_sub(failed.len() as u64);
    if unlisted > 0 {
        super::output::print(&format!("… and {unlisted} more failed lines\n"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::last_line;

    #[test]
    fn the_last_line_is_found_across_chunk_boundaries() {
        for chunks in [
            vec!["a\nb\n", "{\"end\"}\n"],
            vec!["a\nb\n{\"en", "d\"}", "\n"],
            vec!["a\nb\n{\"end\"}\n"],
            vec!["a\n", "b\n{", "\"end\"}\n"],
        ] {
            let (mut last, mut tail) = (Vec::new(), Vec::new());
            for c in &chunks {
                last_line(&mut last, &mut tail, c.as_bytes());
            }
            assert_eq!(last, b"{\"end\"}", "{chunks:?}");
            assert!(tail.is_empty());
        }
    }
}
