//! `jobsd jobs get NAME` (`GET /jobsd/v1/jobs/{name}`, and its next fire times when the
//! sidecar answers `…/{name}/next`) and `jobsd jobs runs NAME` (`…/{name}/runs`, paged by
//! `nextBefore` behind the scenes).

use chrono::{DateTime, Utc};
use clap::Args;
use serde_json::Value;

use super::CliError;
use super::client::{self, Client};
use super::list::{Stream, labels_cell, schedule_cell};
use super::output::{
    Column, Printer, absolute_or_dash, fields, or_dash, print, relative, relative_or_dash, str_of,
    text_of, time_of, when,
};
use super::preview::{ticks_table, zone_of};

/// Fire times `get` shows.
const NEXT_SHOWN: usize = 5;
/// Most runs the route answers per call.
const RUNS_PER_CALL: usize = 1000;

/// `jobsd jobs get`.
#[derive(Debug, Clone, Args)]
pub struct GetArgs {
    /// The job's name.
    pub name: String,
}

/// `jobsd jobs runs`.
#[derive(Debug, Clone, Args)]
pub struct RunsArgs {
    /// The job's name.
    pub name: String,
    /// How many runs, newest first.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// Start below this run (`seq` of a run shown, from `-o json`).
    #[arg(long)]
    pub before: Option<u64>,
}

/// `jobsd jobs get NAME`.
pub async fn get(client: &Client, args: &GetArgs, out: &Printer) -> Result<(), CliError> {
    let view = client.get(&client::job_path(&args.name, "")).await?;
    if !out.is_table() {
        return out.document(&view);
    }
    let now = client.now().await?;
    let mut text = describe(&view, now);
    let next = next_fire_times(client, &args.name).await?;
    // A finished job has none to show.
    let ticks = |n: &Value| n.get("ticks").and_then(Value::as_array).map_or(0, Vec::len);
    if let Some(next) = next.filter(|n| ticks(n) > 0) {
        text.push_str(&format!("Next fire times ({}):\n", zone_of(&next)));
        text.push_str(&ticks_table(&next, now, out.is_wide()));
    }
    print(&text)
}

/// The job's next fire times from `GET …/{name}/next`, when this sidecar has the route (a
/// finished job or an older sidecar has none to give: nothing is shown then).
async fn next_fire_times(client: &Client, name: &str) -> Result<Option<Value>, CliError> {
    let path = client::job_path(name, &format!("/next?count={NEXT_SHOWN}"));
    match client.get(&path).await {
        Ok(next) => Ok(Some(next)),
        Err(e @ (CliError::Unreachable { .. } | CliError::Unauthorized { .. })) => Err(e),
        Err(_) => Ok(None),
    }
}

/// A job view as a key-value block.
pub(super) fn describe(view: &Value, now: DateTime<Utc>) -> String {
    let job = view.get("job").unwrap_or(&Value::Null);
    let status = |p: &str| text_of(view, &format!("/status{p}"));
    let mut pairs: Vec<(&str, String)> = vec![
        ("Name", str_of(view, "/name").to_owned()),
        ("State", or_dash(status("/state"))),
        ("Schedule", schedule_cell(job)),
        ("Repeats", or_dash(text_of(job, "/repeats"))),
        ("TTL", or_dash(text_of(job, "/ttl"))),
        ("Data", or_dash(text_of(job, "/data"))),
        ("Labels", or_dash(labels_cell(view))),
        (
            "Next fire",
            when(time_of(view, "/status/nextFireTime"), now),
        ),
        (
            "Last fire",
            match time_of(view, "/status/lastFireTime/actual") {
                None => "-".to_owned(),
                Some(t) => format!(
                    "{} ({}), nominal {}",
                    relative(t, now),
                    absolute_or_dash(Some(t)),
                    absolute_or_dash(time_of(view, "/status/lastFireTime/nominal"))
                ),
            },
        ),
        (
            "Last outcome",
            match (status("/lastOutcome"), status("/lastError")) {
                (outcome, error) if error.is_empty() => or_dash(outcome),
                (outcome, error) => format!("{outcome}: {error}"),
            },
        ),
        (
            "Counters",
            format!(
                "delivered {}, succeeded {}, failed attempts {}, dropped {}, staged {}",
                status("/counters/delivered"),
                status("/counters/succeeded"),
                status("/counters/failedAttempts"),
                status("/counters/dropped"),
                status("/counters/staged"),
            ),
        ),
        ("Ticks", status("/ticks")),
    ];
    let skipped = text_of(view, "/status/counters/skipped");
    if !matches!(skipped.as_str(), "" | "{}") {
        pairs.push(("Skipped", skipped));
    }
    if let Some(paused) = time_of(view, "/status/pausedAt") {
        let mut text = format!("since {}", when(Some(paused), now));
        let note = status("/pausedNote");
        if !note.is_empty() {
            text.push_str(&format!(", note {note:?}"));
        }
        let reason = status("/pausedReason");
        if !reason.is_empty() {
            text.push_str(&format!(" ({reason})"));
        }
        pairs.push(("Paused", text));
    }
    if let Some(finished) = time_of(view, "/status/finishedAt") {
        pairs.push(("Finished", when(Some(finished), now)));
    }
    if view.pointer("/status/inFlight") == Some(&Value::Bool(true)) {
        pairs.push((
            "In flight",
            format!("attempt {}", status("/currentAttempt")),
        ));
    }
    let failure = match text_of(view, "/failurePolicy") {
        jobsd if !jobsd.is_empty() => jobsd,
        _ => text_of(job, "/failurePolicy"),
    };
    pairs.push(("Failure policy", or_dash(failure)));
    pairs.push(("Policy", or_dash(text_of(view, "/policy"))));
    pairs.push(("ETag", or_dash(text_of(view, "/etag"))));
    fields(&pairs)
}

/// The columns of the run table.
const RUN_COLUMNS: &[Column] = &[
    ("SEQ", true),
    ("STARTED", false),
    ("STARTED (UTC)", true),
    ("FINISHED (UTC)", true),
    ("EXECUTION", false),
    ("TRIGGER", false),
    ("NOMINAL (UTC)", false),
    ("ATTEMPT", false),
    ("OUTCOME", false),
    ("LATENCY", false),
    ("STATUS", false),
    ("ERROR", false),
];

/// One run as a row of [`RUN_COLUMNS`]; the execution id is cut to 8 characters unless
/// `wide`.
fn run_row(run: &Value, now: DateTime<Utc>, wide: bool) -> Vec<String> {
    let started = time_of(run, "/started");
    let id = str_of(run, "/executionId");
    let latency = run.get("latencyMs").and_then(Value::as_f64).map_or_else(
        || "-".to_owned(),
        |ms| {
            if ms < 10.0 {
                format!("{ms:.1}ms")
            } else {
                format!("{ms:.0}ms")
            }
        },
    );
    let code = match (run.get("httpStatus"), run.get("grpcCode")) {
        (Some(Value::Number(http)), _) => format!("HTTP {http}"),
        (_, Some(Value::Number(grpc))) if grpc.as_u64() != Some(0) => format!("gRPC {grpc}"),
        _ => "-".to_owned(),
    };
    vec![
        text_of(run, "/seq"),
        relative_or_dash(started, now),
        absolute_or_dash(started),
        absolute_or_dash(time_of(run, "/finished")),
        or_dash(if wide {
            id.to_owned()
        } else {
            id.chars().take(8).collect()
        }),
        or_dash(text_of(run, "/trigger")),
        absolute_or_dash(time_of(run, "/nominalTime")),
        text_of(run, "/attempt"),
        or_dash(text_of(run, "/outcome")),
        latency,
        code,
        or_dash(text_of(run, "/error")),
    ]
}

/// `jobsd jobs runs NAME`.
pub async fn runs(client: &Client, args: &RunsArgs, out: &Printer) -> Result<(), CliError> {
    let now = if out.is_table() {
        client.now().await?
    } else {
        Utc::now()
    };
    let mut stream = Stream::new(out, RUN_COLUMNS);
    let mut before = args.before;
    let mut left = args.limit;
    while left > 0 {
        let ask = left.min(RUNS_PER_CALL);
        let mut pairs = vec![("limit", ask.to_string())];
        if let Some(before) = before {
            pairs.push(("before", before.to_string()));
        }
        let page = client
            .get(&client::job_path(
                &args.name,
                &format!("/runs{}", client::query(pairs)),
            ))
            .await?;
        let runs = page
            .get("runs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        left = left.saturating_sub(runs.len());
        let rows: Vec<Vec<String>> = runs
            .iter()
            .map(|r| run_row(r, now, out.is_wide()))
            .collect();
        stream.push(&runs, &rows)?;
        before = page.get("nextBefore").and_then(Value::as_u64);
        if before.is_none() || runs.is_empty() {
            break;
        }
    }
    stream.finish()
}
