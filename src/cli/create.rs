//! `jobsd jobs create`: many jobs from a file of one job per line (NDJSON), each line
//! `{"name": …, <the body of POST /jobsd/v1/jobs/{name}>}`, sent in batches to
//! `POST /jobsd/v1/jobs:batch` (each job answered as its own create). A progress bar shows on a
//! terminal (stderr); a summary ends the run, with every line that failed (its number, name
//! and why), and the exit code is 2 when any did.

use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::CliError;
use super::backup::{open_input, progress};
use super::client::Client;
use super::output::{Printer, Table};

/// Most failures listed one by one; the rest are counted.
const MAX_LISTED: usize = 1000;

/// `jobsd jobs create`.
#[derive(Debug, Clone, Args)]
pub struct CreateArgs {
    /// The jobs, one JSON object per line: `{"name": "n", "schedule": "@daily", …}` (the
    /// fields of `POST /jobsd/v1/jobs/{name}`); a file, or `-` for stdin.
    #[arg(short = 'f', long = "file", default_value = "-")]
    pub file: String,
    /// Replace jobs that exist (every line that does not set `overwrite` itself).
    #[arg(long)]
    pub overwrite: bool,
    /// Jobs per call (1 to 4096).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u16).range(1..=4096))]
    pub batch: u16,
}

/// A line that was not created.
struct Failure {
    line: u64,
    name: String,
    status: String,
    error: String,
}

/// What the run did.
#[derive(Default)]
struct Outcome {
    created: u64,
    failed: Vec<Failure>,
    failed_count: u64,
}

impl Outcome {
    fn fail(&mut self, line: u64, name: &str, status: String, error: String) {
        self.failed_count += 1;
        if self.failed.len() < MAX_LISTED {
            self.failed.push(Failure {
                line,
                name: name.to_owned(),
                status,
                error,
            });
        }
    }
}

/// `jobsd jobs create`.
pub async fn create(client: &Client, args: &CreateArgs, out: &Printer) -> Result<(), CliError> {
    let (reader, len) = open_input(&args.file).await?;
    let bar = progress(
        len,
        "{spinner} {bar:30} {bytes}/{total_bytes} read, {msg} ({bytes_per_sec}) {elapsed}",
    );
    let started = Instant::now();
    let mut outcome = Outcome::default();
    let mut lines = BufReader::new(reader).lines();
    let mut number = 0u64;
    let mut done = false;
    while !done {
        // Per entry sent: its line number and name.
        let mut sent = Vec::new();
        let mut entries = Vec::new();
        while entries.len() < usize::from(args.batch) {
            let Some(line) = lines
                .next_line()
                .await
                .map_err(|e| CliError::Usage(format!("--file {}: {e}", args.file)))?
            else {
                done = true;
                break;
            };
            number += 1;
            bar.inc(line.len() as u64 + 1);
            if line.trim().is_empty() {
                continue;
            }
            match entry_of(&line, args.overwrite) {
                Ok((name, entry)) => {
                    sent.push((number, name));
                    entries.push(entry);
                }
                Err(why) => outcome.fail(number, "-", "-".into(), why),
            }
        }
        if entries.is_empty() {
            continue;
        }
        let answer = client
            .post("/jobsd/v1/jobs:batch", Some(&json!({ "jobs": entries })))
            .await;
        let answer = match answer {
            Ok(answer) => answer,
            Err(e) => {
                bar.finish_and_clear();
                return Err(e);
            }
        };
        let results = answer["results"].as_array().cloned().unwrap_or_default();
        for (i, (line, name)) in sent.iter().enumerate() {
            let result = results.get(i).cloned().unwrap_or(Value::Null);
            match result["status"].as_u64() {
                Some(204) => outcome.created += 1,
                status => {
                    let status = status.map_or_else(|| "-".to_owned(), |s| s.to_string());
                    let error = result["error"]["message"]
                        .as_str()
                        .unwrap_or("no answer for this job")
                        .to_owned();
                    outcome.fail(*line, name, status, error);
                }
            }
        }
        bar.set_message(format!(
            "{} created, {} failed",
            outcome.created, outcome.failed_count
        ));
    }
    bar.finish_and_clear();
    print_outcome(&outcome, started.elapsed(), out)?;
    match outcome.failed_count {
        0 => Ok(()),
        1 => Err(CliError::PartlyDone("1 job was not created".into())),
        n => Err(CliError::PartlyDone(format!("{n} jobs were not created"))),
    }
}

/// One line as a batch entry and its job's name, or why it is not one.
fn entry_of(line: &str, overwrite: bool) -> Result<(String, Value), String> {
    let mut entry: Value =
        serde_json::from_str(line).map_err(|e| format!("not a JSON object: {e}"))?;
    let Some(fields) = entry.as_object_mut() else {
        return Err("not a JSON object".into());
    };
    let name = match fields.get("name") {
        Some(Value::String(name)) if !name.is_empty() => name.clone(),
        _ => return Err("no \"name\"".into()),
    };
    if overwrite && !fields.contains_key("overwrite") {
        fields.insert("overwrite".into(), Value::Bool(true));
    }
    Ok((name, entry))
}

/// The summary: counts, then the lines that failed.
fn print_outcome(outcome: &Outcome, took: Duration, out: &Printer) -> Result<(), CliError> {
    if !out.is_table() {
        let failed: Vec<Value> = outcome
            .failed
            .iter()
            .map(|f| json!({"line": f.line, "name": f.name, "status": f.status, "error": f.error}))
            .collect();
        return out.document(&json!({
            "created": outcome.created,
            "failed": failed,
            "failedCount": outcome.failed_count,
        }));
    }
    let secs = took.as_secs_f64();
    Table::new(&["CREATED", "FAILED", "SECONDS", "JOBS/S"]).print(&[vec![
        outcome.created.to_string(),
        outcome.failed_count.to_string(),
        format!("{secs:.2}"),
        format!("{}", (outcome.created as f64 / secs.max(1e-6)).round()),
    ]])?;
    if outcome.failed.is_empty() {
        return Ok(());
    }
    super::output::print("\n")?;
    let rows: Vec<Vec<String>> = outcome
        .failed
        .iter()
        .map(|f| {
            vec![
                f.line.to_string(),
                f.name.clone(),
                f.status.clone(),
                f.error.clone(),
            ]
        })
        .collect();
    Table::new(&["LINE", "NAME", "STATUS", "ERROR"]).print(&rows)?;
    let unlisted = outcome.failed_count - outcome.failed.len() as u64;
    if unlisted > 0 {
        super::output::print(&format!("… and {unlisted} more failed lines\n"))?;
    }
    Ok(())
}
